"""The Elasticsearch client libraries are extras: a missing one gives one line naming the extra."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from esbridge.engine import transports
from esbridge.engine.client import ConnectionOptions, Engine
from esbridge.engine.transports import client_installed, require_client
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
    real = transports.importlib.util.find_spec
    monkeypatch.setattr(transports.importlib.util, "find_spec",
                        lambda name, *a: None if name == module else real(name, *a))


def test_the_test_environment_has_every_client() -> None:
    for module in transports.CLIENT_EXTRAS:
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


@pytest.mark.parametrize("fake_elasticsearch", ["8.19.21"], indirect=True)
def test_a_ca_file_left_set_does_not_stop_a_plain_http_node(fake_elasticsearch: str, tmp_path: Any,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The ``elasticsearch`` client refuses TLS options for an http:// URL (a ``ValueError`` from its
    constructor); a CA file given for another cluster applies to https:// URLs only."""
    ca = tmp_path / "ca.crt"
    ca.write_text("not read for a plain-HTTP node\n")
    monkeypatch.setenv("ESBRIDGE_CA_CERTS", str(ca))
    engine = Engine.connect(ConnectionOptions.from_env(fake_elasticsearch))
    assert engine.options.ca_certs == str(ca)
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


@pytest.mark.parametrize(("client", "server", "hint"), [
    ((9, 5, 1), "8.19.21", "pip install 'elasticsearch>=8,<9'"),
    ((10, 0, 0), "9.1.0", "pip install 'elasticsearch>=9,<10'"),
    ((8, 19, 0), "8.19.21", None),
    ((8, 13, 0), "9.1.0", None),
    ((9, 5, 1), "9.1.0", None),
])
def test_a_client_newer_than_the_server_names_the_client_to_install(
        client: tuple[int, ...], server: str, hint: str | None) -> None:
    from esbridge.engine.connection import parse_info
    from esbridge.engine.transports import newer_client_message

    message = newer_client_message(client, parse_info(_root(server)))
    if hint is None:
        assert message is None
    else:
        assert message is not None and "\n" not in message and message.endswith(hint)
        assert f"elasticsearch client {'.'.join(map(str, client))} is newer than Elasticsearch {server}" in message
    opensearch = parse_info({"version": {"number": "3.8.0", "distribution": "opensearch"}})
    assert newer_client_message(client, opensearch) is None


@pytest.mark.parametrize("fake_elasticsearch", ["8.19.21"], indirect=True)
@pytest.mark.parametrize("version", [(9, 5, 1), (8, 19, 0)])
def test_the_users_client_is_checked_against_the_server(fake_elasticsearch: str, version: tuple[int, ...],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """``Engine.from_client`` with the installed ``elasticsearch`` client reporting ``version``: a
    warning naming the client to install where it is newer than the server, none otherwise."""
    import warnings

    from elasticsearch import Elasticsearch

    monkeypatch.setattr(transports, "elasticsearch_client_version", lambda: version)
    client = Elasticsearch(fake_elasticsearch)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        engine = Engine.connect(client)
    said = [str(w.message) for w in caught if "newer than" in str(w.message)]
    if version[0] > 8:
        assert len(said) == 1 and said[0].endswith("pip install 'elasticsearch>=8,<9'")
    else:
        assert said == []
    assert engine.info.label == "Elasticsearch 8.19.21"
    client.close()

    import asyncio

    from elasticsearch import AsyncElasticsearch

    from esbridge.aio import AsyncEngine

    async def connect_async() -> list[str]:
        async_client = AsyncElasticsearch(fake_elasticsearch)
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                await AsyncEngine.connect(async_client)
            return [str(w.message) for w in caught if "newer than" in str(w.message)]
        finally:
            await async_client.close()

    assert asyncio.run(connect_async()) == said


def test_a_client_that_refuses_the_server_names_it() -> None:
    from esbridge.engine.transports import refused_product_message

    message = refused_product_message((9, 5, 1), {**_root("7.10.2"), "version": {"number": "7.10.2"}})
    assert message.startswith("the given elasticsearch client 9.5.1 refuses Elasticsearch 7.10.2 (")
    assert "pass the URL instead" in message and "\n" not in message
    assert "refuses this server" in refused_product_message((9, 5, 1), "<html>not json</html>")
