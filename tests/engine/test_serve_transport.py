"""``esbridge serve`` at the HTTP level against the real engines: what real applications' clients
send (compressed bodies, the Java client's URL parameters), connections that never finish a
request, a dead node among the configured ones, bodies nested too deep, and ``--read-only``."""

from __future__ import annotations

import logging
import re
import socket
import time
import uuid
from collections.abc import Iterator

import pytest

from esbridge.engine.client import Engine
from tests.engine.test_serve import http, running
from tests.smallindex import create_small_index, sample_collection

WINDOW = 30


@pytest.fixture(scope="module")
def collection(engine: Engine) -> Iterator[tuple[str, list[str]]]:
    """An esbridge index of 80 SciFact abstracts and four judged claims as queries (nothing here
    writes to it)."""
    sample = sample_collection(4, 80)
    name = create_small_index(engine, f"esb-test-{uuid.uuid4().hex[:10]}",
                              {d["_id"]: {"title": d["title"], "text": d["text"]} for d in sample.docs})
    yield name, [q["text"] for q in sample.queries]
    engine.delete_index(name)


def test_a_connection_that_does_not_finish_its_request_head_is_closed(engine: Engine) -> None:
    with running(engine, {}, header_timeout=1.0) as url:
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=15) as half_sent:
            half_sent.sendall(b"GET /_cluster/hea")
            start = time.monotonic()
            # a whole request meanwhile, on a connection of its own, is answered
            status, _ = http(engine, "GET", f"{url}/_esbridge/health")
            assert status == 200
            assert half_sent.recv(1024) == b""  # closed by the server, not by recv's own timeout
            waited = time.monotonic() - start
        assert 0.5 < waited < 10
        # and one that sends nothing at all
        with socket.create_connection((host, int(port)), timeout=15) as silent:
            start = time.monotonic()
            assert silent.recv(1024) == b""
            assert time.monotonic() - start < 10


def test_a_body_nested_too_deep_is_refused_without_a_traceback(engine: Engine, collection: tuple[str, list[str]],
                                                               caplog: pytest.LogCaptureFixture) -> None:
    index, _ = collection
    caplog.set_level(logging.DEBUG)
    nested = b'{"bool":{"must":[' * 1000 + b'{"match":{"text":"x"}}' + b"]}}" * 1000
    deep_search = b'{"query":' + nested + b"}"
    with running(engine, {index: {"window": WINDOW}}) as url:
        answers = [http(engine, "POST", f"{url}/{index}/_search", deep_search),
                   http(engine, "POST", f"{url}/{index}/_search", b"[" * 1000 + b"]" * 1000),
                   http(engine, "POST", f"{url}/{index}/_msearch", b"{}\n" + deep_search + b"\n",
                        headers={"content-type": "application/x-ndjson"})]
        # the server goes on answering
        status, _ = http(engine, "POST", f"{url}/{index}/_search", {"query": {"match": {"text": "x"}}})
        assert status == 200
    for status, answer in answers:
        assert status == 400 and answer["status"] == 400, answer
        assert answer["error"]["type"] == "parsing_exception"
        assert re.search(r"nests objects and arrays \d{4} levels deep; esbridge reads a search nested at most 100 "
                         r"levels deep", answer["error"]["reason"])
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
