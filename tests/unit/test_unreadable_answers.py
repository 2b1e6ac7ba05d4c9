"""Answers that cannot be read and errors that give no reason, through every client library esbridge
drives (opensearch-py, elasticsearch7, elasticsearch 8/9; synchronous and asyncio): always one
esbridge error naming the request.  The server is a loopback stand-in that answers ``GET /`` as
Elasticsearch 8 does and every other request with the body under test (no engine needed: what is
tested is how each client library reports a body it cannot read)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from esbridge.engine import async_client as ac
from esbridge.engine.calls import engine_error
from esbridge.engine.client import ConnectionOptions, Engine
from esbridge.engine.connection import EngineInfo
from esbridge.engine.transports import (
    _Elasticsearch7Transport,
    _ElasticsearchTransport,
    _HttpError,
    _OpenSearchTransport,
)
from esbridge.errors import EngineError
from tests.unit.scripted import ScriptedTransport

BODIES = {
    "truncated": b'{"hits":[',
    "binary": bytes(range(256)),
    "html": b"<html>\n<h1>502 Bad Gateway</h1>\n</html>",
    "deep": b"[" * 100_000 + b"]" * 100_000,
}
INFO = EngineInfo("elasticsearch", (8, 19, 0), "8.19.0", "c", "9.12.0")


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, dict[str, bytes]]]:
    answer: dict[str, bytes] = {"body": b"{}", "type": b"application/json"}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _reply(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            if length:
                self.rfile.read(length)
            data = (json.dumps({"version": {"number": "8.19.0"}, "tagline": "You Know, for Search"}).encode()
                    if self.path == "/" else answer["body"])
            self.send_response(200)
            self.send_header("content-type", "application/json" if self.path == "/" else answer["type"].decode())
            self.send_header("x-elastic-product", "Elasticsearch")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = _reply

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}", answer
    srv.shutdown()
    srv.server_close()


SYNC: dict[str, Callable[[ConnectionOptions], Any]] = {
    "opensearch-py": _OpenSearchTransport,
    "elasticsearch7": _Elasticsearch7Transport,
    "elasticsearch": lambda o: _ElasticsearchTransport(o, 8),
}
ASYNC: dict[str, Callable[[ConnectionOptions], Any]] = {
    "opensearch-py": ac._AsyncOpenSearchTransport,
    "elasticsearch7": ac._AsyncElasticsearch7Transport,
    "elasticsearch": lambda o: ac._AsyncElasticsearchTransport(o, 8),
}


def _check(err: EngineError, kind: str) -> None:
    message = str(err)
    assert "\n" not in message
    assert message.startswith("searching 'x': the engine's answer to POST /x/_search could not be read ("), message
    if kind in TYPED:
        assert "(not JSON: " in message, message


#: The HTML body said to be what it is, as a proxy's error page is: the clients raise no parse error
#: but an unknown content type, or give the text itself.
TYPED = {"html-typed": b"text/html; charset=utf-8", "text-typed": b"text/plain"}


@pytest.fixture(params=[*BODIES, *TYPED])
def kind(request: pytest.FixtureRequest, server: tuple[str, dict[str, bytes]]) -> Iterator[str]:
    """The body under test, sent as ``application/json`` unless ``TYPED`` gives its content type."""
    _, answer = server
    answer["body"] = BODIES["html" if request.param in TYPED else request.param]
    answer["type"] = TYPED.get(request.param, b"application/json")
    yield request.param
    answer["type"] = b"application/json"


@pytest.mark.parametrize("client", list(SYNC))
def test_a_body_that_cannot_be_read_is_an_engine_error_naming_the_request(
        server: tuple[str, dict[str, bytes]], client: str, kind: str) -> None:
    url, answer = server
    options = ConnectionOptions(url=url, max_retries=2, backoff=0.0)
    engine = Engine(options, INFO, SYNC[client](options))
    try:
        with pytest.raises(EngineError) as info:
            engine.search("x", {"query": {"match_all": {}}})
    finally:
        engine.close()
    _check(info.value, kind)


@pytest.mark.parametrize("client", list(ASYNC))
def test_the_same_through_the_asyncio_clients(server: tuple[str, dict[str, bytes]], client: str, kind: str) -> None:
    url, answer = server
    options = ConnectionOptions(url=url, max_retries=2, backoff=0.0)

    async def search() -> None:
        engine = ac.AsyncEngine(options, INFO, ASYNC[client](options))
        try:
            await engine.search("x", {"query": {"match_all": {}}})
        finally:
            await engine.close()

    with pytest.raises(EngineError) as info:
        asyncio.run(search())
    _check(info.value, kind)


@pytest.mark.parametrize("body", [None, "", b"", {}])
def test_an_error_without_a_reason_says_its_status(body: Any) -> None:
    err = engine_error(400, body, context="checking index '_h2'")
    assert str(err) == "checking index '_h2': error (HTTP 400 Bad Request; the engine gave no reason)"
    assert err.status == 400 and err.reason is None
    typed = engine_error(503, {"error": {"type": "unavailable_shards_exception"}})
    assert str(typed) == "unavailable_shards_exception (HTTP 503 Service Unavailable; the engine gave no reason)"


def test_an_engine_reason_on_several_lines_is_one_line() -> None:
    body = {"error": {"type": "json_parse_exception", "reason": "Invalid UTF-8\n at [Source: REDACTED]"}, "status": 400}
    assert str(engine_error(400, body, context="searching 'x'")) == \
        "searching 'x': json_parse_exception: Invalid UTF-8 at [Source: REDACTED]"
    assert "\n" not in str(engine_error(502, "<html>\n<body>Bad gateway</body>\n</html>"))


def test_a_head_request_without_a_reason_asks_the_engine_for_it() -> None:
    reason = {"error": {"type": "invalid_index_name_exception",
                        "reason": "Invalid index name [_h2], must not start with '_'."}, "status": 400}
    transport = ScriptedTransport([_HttpError(400, ""), _HttpError(400, reason)])
    engine = Engine(ConnectionOptions("http://localhost:9200", max_retries=0), INFO, transport)
    with pytest.raises(EngineError) as info:
        engine.index_exists("_h2")
    assert str(info.value) == ("checking index '_h2': invalid_index_name_exception: Invalid index name [_h2], "
                               "must not start with '_'.")
    assert [method for method, _ in transport.calls] == ["HEAD", "GET"]
