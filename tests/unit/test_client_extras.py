"""The Elasticsearch client libraries are extras: a missing one gives one line naming the extra."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from esbridge.engine import client as client_mod
from esbridge.engine.client import Engine, client_installed, require_client
from esbridge.errors import ConfigurationError


def _root(number: str) -> dict[str, Any]:
    return {"cluster_name": "c", "tagline": "You Know, for Search",
            "version": {"number": number, "lucene_version": "9.12.2", "build_flavor": "default"}}


@pytest.fixture
def fake_elasticsearch(request: pytest.FixtureRequest) -> Iterator[str]:
    """A loopback server answering ``GET /`` as the Elasticsearch version the test names."""
    body = json.dumps(_root(request.param)).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server interface
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("x-elastic-product", "Elasticsearch")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _block(monkeypatch: pytest.MonkeyPatch, module: str) -> None:
    """Make ``module`` look uninstalled (and unimportable) for this test."""
    for name in [m for m in sys.modules if m == module or m.startswith(module + ".")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, module, None)  # import raises ImportError
    real = client_mod.importlib.util.find_spec
    monkeypatch.setattr(client_mod.importlib.util, "find_spec",
                        lambda name, *a: None if name == module else real(name, *a))


def test_the_test_environment_has_every_client() -> None:
    for module in client_mod.CLIENT_EXTRAS:
        assert client_installed(module), module
    require_client("elasticsearch", "anything")  # no error


@pytest.mark.parametrize("fake_elasticsearch", ["8.19.21"], indirect=True)
def test_elasticsearch_8_without_its_client_names_the_extra(fake_elasticsearch: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    _block(monkeypatch, "elasticsearch")
    with pytest.raises(ConfigurationError) as err:
        Engine.connect(fake_elasticsearch)
    message = str(err.value)
    assert "\n" not in message
    assert 'pip install "esbridge[elasticsearch]"' in message and "Elasticsearch 8.19.21" in message


@pytest.mark.parametrize("fake_elasticsearch", ["8.19.21"], indirect=True)
def test_elasticsearch_8_with_its_client(fake_elasticsearch: str) -> None:
    engine = Engine.connect(fake_elasticsearch)
    assert type(engine._transport).__name__ == "_ElasticsearchTransport"
    engine.close()


@pytest.mark.parametrize("fake_elasticsearch", ["7.10.2"], indirect=True)
def test_elasticsearch_7_falls_back_to_opensearch_py(fake_elasticsearch: str, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = Engine.connect(fake_elasticsearch)
    assert type(engine._transport).__name__ == "_Elasticsearch7Transport"
    engine.close()
    _block(monkeypatch, "elasticsearch7")
    engine = Engine.connect(fake_elasticsearch)
    assert type(engine._transport).__name__ == "_OpenSearchTransport"
    assert engine.info.label == "Elasticsearch 7.10.2"
    engine.close()
