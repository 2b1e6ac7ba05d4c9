"""``esbridge serve`` at the HTTP level, without an engine: the command's errors when it cannot
listen, how deep a body nests, the URL parameters of a reranked search and ``filter_path``."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest

from esbridge.serve import IndexConfig
from esbridge.serve.readonly import is_read
from esbridge.serve.search import (
    MAX_BODY_DEPTH,
    SearchRequest,
    _read_msearch,
    _Refused,
    check_depth,
    nesting_depth,
    read_search,
)
from esbridge.serve.shape import filter_path, render
from tests.cli import run


def test_a_port_in_use_is_one_line_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, out, err = run(capsys, "serve", "--url", "http://127.0.0.1:1", "--port", str(port))
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [
        f"esbridge: error: port {port} on 127.0.0.1 is already in use (another esbridge serve, the engine, or another "
        "program listens there): stop that program, or give another --port (--port 0 takes a free one)"]
    assert "Traceback" not in err


@pytest.mark.parametrize("raw,depth", [
    (b"", 0),
    (b"{}", 1),
    (b'{"query": {"match": {"text": "x"}}, "size": [1, [2]]}', 3),
    (b'{"text": "[[[ {{{ brackets in a string ]]]"}', 1),
    (b'{"text": "an escaped quote \\" then [[["}', 1),
    (b'{"a": "never closed [[[', 1),
    (b"[" * 1000 + b"]" * 1000, 1000),
    (b'{"a":' * 150 + b"1" + b"}" * 150, 150),
    (b"]]][", 0),
])
def test_the_nesting_depth_of_a_body(raw: bytes, depth: int) -> None:
    assert nesting_depth(raw) == depth


def test_a_body_nested_too_deep_is_refused_before_it_is_parsed() -> None:
    check_depth(b"[" * MAX_BODY_DEPTH + b"]" * MAX_BODY_DEPTH)
    with pytest.raises(_Refused) as err:
        check_depth(b'{"q":' * 5000 + b"1" + b"}" * 5000)
    assert (err.value.status, err.value.error_type) == (400, "parsing_exception")
    assert "5000 levels deep" in err.value.reason and f"at most {MAX_BODY_DEPTH}" in err.value.reason


JAVA_CLIENT = {"typed_keys": "true"}
ENGINE_PARAMS = {"preference": "_local", "request_cache": "true", "timeout": "5s"}
FORM = {"filter_path": "hits.hits._id", "pretty": "", "human": "true", "error_trace": "false"}


def test_the_url_parameters_of_a_reranked_search() -> None:
    body = {"query": {"match": {"t": "heart"}}}
    # search mode: the first stage's parameters go to the engine, nothing else does
    req = read_search("docs", IndexConfig(mode="search"), body, {**JAVA_CLIENT, **ENGINE_PARAMS, **FORM, "size": "3"})
    assert req is not None and req.params == ENGINE_PARAMS and req.size == 3
    # rescore mode: all but size, from and the answer's form go with the engine's search
    req = read_search("docs", IndexConfig(mode="rescore"), body, {**JAVA_CLIENT, **ENGINE_PARAMS, **FORM,
                                                                 "from": "2", "routing": "r"})
    assert req is not None and req.params == {**JAVA_CLIENT, **ENGINE_PARAMS, "routing": "r"} and req.from_ == 2
    # another parameter in search mode: the rule's (the engine runs the search with it)
    req = read_search("docs", IndexConfig(mode="search"), body, {"routing": "r"})
    assert isinstance(req, SearchRequest) and req.config.mode == "rescore" and req.params == {"routing": "r"}


def test_the_url_parameters_of_a_reranked_msearch() -> None:
    raw = b"{}\n" + json.dumps({"query": {"match": {"t": "heart"}}}).encode() + b"\n"
    (req,) = _read_msearch("docs", IndexConfig(mode="rescore"), raw, {**JAVA_CLIENT, **FORM})
    assert not isinstance(req, _Refused) and req is not None and req.params == JAVA_CLIENT
    # the engine's own _msearch parameters: those of each search go with each search to the engine
    # (OpenSearch's REST tests send rest_total_hits_as_int), max_concurrent_searches bounds the server's
    each = {"rest_total_hits_as_int": "true", "search_type": "dfs_query_then_fetch",
            "max_concurrent_shard_requests": "1", "pre_filter_shard_size": "2", "ccs_minimize_roundtrips": "false"}
    (req,) = _read_msearch("docs", IndexConfig(mode="rescore"), raw, {**each, "max_concurrent_searches": "1"})
    assert isinstance(req, SearchRequest) and req.params == each
    with pytest.raises(_Refused, match=r"\[timeout\] is not supported"):  # as on the engine: not an _msearch's
        _read_msearch("docs", IndexConfig(), raw, {"timeout": "5s"})


ANSWER: dict[str, Any] = {
    "took": 3, "timed_out": False, "_shards": {"total": 1, "successful": 1, "skipped": 0, "failed": 0},
    "hits": {"total": {"value": 2, "relation": "eq"}, "max_score": 2.5,
             "hits": [{"_index": "docs", "_id": "a", "_score": 2.5, "_source": {"title": "A", "text": "x"}},
                      {"_index": "docs", "_id": "b", "_score": 1.5, "_source": {"title": "B", "text": "y"}}]}}
NO_HITS: dict[str, Any] = {**ANSWER, "hits": {"total": {"value": 0, "relation": "eq"}, "max_score": None, "hits": []}}


# what OpenSearch 3.8 answered to the same filters (tests/engine/test_serve_transport.py compares live)
@pytest.mark.parametrize("answer,spec,want", [
    (ANSWER, "hits.hits._id", {"hits": {"hits": [{"_id": "a"}, {"_id": "b"}]}}),
    (NO_HITS, "hits.hits._id", {}),
    (NO_HITS, "hits.hits", {"hits": {"hits": []}}),
    (ANSWER, "hits.hits._id, hits.total", {"hits": {"total": {"value": 2, "relation": "eq"},
                                                    "hits": [{"_id": "a"}, {"_id": "b"}]}}),
    (ANSWER, "-_shards.*", {k: v for k, v in ANSWER.items() if k != "_shards"}),
    (ANSWER, "-hits.hits,hits", {"hits": {"total": {"value": 2, "relation": "eq"}, "max_score": 2.5}}),
    (ANSWER, "hits.hits._id,-hits.hits._id", {}),
    (ANSWER, "hits.total.value,-hits.total", {}),
    (ANSWER, "**._id", {"hits": {"hits": [{"_id": "a"}, {"_id": "b"}]}}),
    (ANSWER, "hits.**", {"hits": ANSWER["hits"]}),
    (ANSWER, "_sh*", {"_shards": ANSWER["_shards"]}),
    (ANSWER, "*.total", {"_shards": {"total": 1}, "hits": {"total": {"value": 2, "relation": "eq"}}}),
    (ANSWER, "hits.hits._source.title", {"hits": {"hits": [{"_source": {"title": "A"}}, {"_source": {"title": "B"}}]}}),
    (ANSWER, "hits.hits.nothing", {}),
    (ANSWER, "-hits.hits._source", {**ANSWER, "hits": {**ANSWER["hits"], "hits": [
        {k: v for k, v in h.items() if k != "_source"} for h in ANSWER["hits"]["hits"]]}}),
])
def test_filter_path_as_the_engine_applies_it(answer: dict[str, Any], spec: str, want: dict[str, Any]) -> None:
    assert filter_path(answer, spec) == want


def test_pretty_as_the_engine_reads_it() -> None:
    assert render({"a": [1]}, {}) == '{"a": [1]}'
    assert render({"a": [1]}, {"pretty": ""}) == render({"a": [1]}, {"pretty": "true"}) == \
        '{\n  "a" : [\n    1\n  ]\n}\n'
    assert render({"a": 1}, {"pretty": "false"}) == '{"a": 1}'


@pytest.mark.parametrize("method,path", [
    ("GET", "/docs/_doc/1"), ("HEAD", "/docs"), ("GET", "/_cluster/settings"), ("GET", "/_snapshot/repo/_all"),
    ("POST", "/docs/_search?typed_keys=true"), ("POST", "/_search"), ("POST", "/_all/_search"),
    ("POST", "/docs,other/_msearch"), ("POST", "/_msearch/template"), ("POST", "/docs/_search/template"),
    ("POST", "/docs/_count"), ("POST", "/_mget"), ("POST", "/docs/_validate/query?explain"),
    ("POST", "/docs/_explain/1"), ("POST", "/docs/_field_caps?fields=*"), ("POST", "/docs/_termvectors/1"),
    ("POST", "/_mtermvectors"), ("POST", "/docs/_analyze"), ("POST", "/_render/template"),
    ("POST", "/_search/scroll"), ("DELETE", "/_search/scroll"), ("DELETE", "/_search/scroll/abc"),
    ("POST", "/docs/_search/point_in_time?keep_alive=1m"), ("DELETE", "/_search/point_in_time"),
    ("DELETE", "/_search/point_in_time/_all"), ("POST", "/docs/_pit?keep_alive=1m"), ("DELETE", "/_pit"),
])
def test_reads_pass_read_only(method: str, path: str) -> None:
    assert is_read(method, path)


@pytest.mark.parametrize("method,path", [
    ("PUT", "/docs/_doc/1"), ("POST", "/docs/_doc"), ("POST", "/docs/_update/1"), ("DELETE", "/docs/_doc/1"),
    ("POST", "/_bulk"), ("PUT", "/docs"), ("DELETE", "/docs"), ("DELETE", "/_all"), ("POST", "/docs/_refresh"),
    ("POST", "/docs/_delete_by_query"), ("POST", "/docs/_update_by_query"), ("POST", "/_reindex"),
    ("PUT", "/_cluster/settings"), ("PUT", "/_snapshot/repo"), ("POST", "/_snapshot/repo/snap/_restore"),
    ("POST", "/_nodes/node-1/_shutdown"), ("POST", "/_cluster/reroute"), ("PUT", "/_search/pipeline/p"),
    ("DELETE", "/_search/pipeline/p"), ("PUT", "/docs/_search"), ("POST", "/docs/_close"),
    ("PATCH", "/docs/_search"), ("POST", "/_plugins/_sql"), ("POST", "/docs/_validate/other"),
    ("DELETE", "/_searchx/scroll"), ("DELETE", "/_pitfall"), ("GET", "/docs/_refresh"), ("GET", "/_flush"),
])
def test_writes_and_administration_do_not(method: str, path: str) -> None:
    assert not is_read(method, path)


def test_the_access_log_is_written_by_a_thread_of_its_own() -> None:
    """The lines of a logger go through a queue to the handlers they reached before (its own and
    its parents'), written by the listener's thread (never by the event loop), all of them by the
    time it stops; the logger as it was afterwards.  A logger whose records reach no handler is
    left alone."""
    import logging
    import threading

    from esbridge.serve.server import _log_off_loop

    written: list[tuple[str, str, str]] = []

    class Keep(logging.Handler):
        def __init__(self, name: str) -> None:
            super().__init__(logging.INFO)
            self.label = name

        def emit(self, record: logging.LogRecord) -> None:
            written.append((self.label, record.getMessage(), threading.current_thread().name))

    parent = logging.getLogger("esbridge-test-access")
    child = logging.getLogger("esbridge-test-access.lines")
    own = Keep("own")
    parent.propagate = False
    parent.addHandler(Keep("parent"))
    child.addHandler(own)
    child.setLevel(logging.INFO)
    try:
        stop = _log_off_loop(child)
        assert stop is not None and not child.propagate
        for i in range(50):
            child.info("GET /x %d", i)
        child.debug("not written")
        stop()
        for label in ("own", "parent"):
            assert [m for h, m, _ in written if h == label] == [f"GET /x {i}" for i in range(50)]
        assert all(name != threading.current_thread().name for _, _, name in written)
        assert child.handlers == [own] and child.propagate
    finally:
        child.handlers.clear()
        parent.handlers.clear()
        parent.propagate = True
    quiet = logging.getLogger("esbridge-test-quiet")
    quiet.propagate = False
    try:
        assert _log_off_loop(logging.getLogger("esbridge-test-quiet.lines")) is None
    finally:
        quiet.propagate = True
