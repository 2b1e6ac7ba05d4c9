"""``esbridge serve`` at the HTTP level against the real engines: what real applications' clients
send (compressed bodies, the Java client's URL parameters), connections that never finish a
request, a dead node among the configured ones, bodies nested too deep, and ``--read-only``."""

from __future__ import annotations

import gzip
import json
import logging
import re
import socket
import time
import urllib.request
import uuid
import zlib
from collections.abc import Iterator
from dataclasses import replace
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

from esbridge.engine.client import Engine
from esbridge.rerank import Reranker
from esbridge.serve.shape import filter_path
from tests.engine.test_serve import auth_of, client_of, http, ranking, running
from tests.netfaults import fault_proxy
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


def compressed(url: str, engine: Engine, method: str, body: Any, encoding: str = "gzip",
               content_type: str = "application/json") -> tuple[int, dict[str, str], Any]:
    """One request with its body compressed (``encoding``), accepting a gzip answer: its status,
    headers and body (decompressed here, where the server compressed it)."""
    raw = json.dumps(body).encode() if not isinstance(body, bytes) else body
    data = gzip.compress(raw) if encoding == "gzip" else zlib.compress(raw)
    req = urllib.request.Request(url, data=data, method=method, headers={
        "content-type": content_type, "content-encoding": encoding, "accept-encoding": "gzip", **auth_of(engine)})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            status, headers, payload = resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as err:
        status, headers, payload = err.code, dict(err.headers), err.read()
    headers = {k.lower(): v for k, v in headers.items()}
    if headers.get("content-encoding") == "gzip":
        payload = gzip.decompress(payload)
    return status, headers, json.loads(payload)


def test_compressed_requests_and_answers(engine: Engine, collection: tuple[str, list[str]], index_name: str) -> None:
    index, queries = collection
    create_small_index(engine, index_name)
    search = {"query": {"match": {"text": queries[0]}}, "size": 5}
    want = ranking(Reranker(engine, index, window=WINDOW).search(queries[0], size=5))
    with running(engine, {index: {"window": WINDOW, "mode": "search"}}) as url:
        # the engine's Python client with http_compress: gzip bodies, gzip answers accepted
        client = client_of(engine, url, http_compress=True)
        client.index(index=index_name, id="zipped", body={"title": "Compressed", "text": "A gzip body, unpacked."},
                     refresh=True)
        assert ranking(client.search(index=index, body=search)) == want
        got = client.search(index=index_name, body={"query": {"match": {"text": "gzip unpacked"}}})
        assert [h["_id"] for h in got["hits"]["hits"]] == ["zipped"]
        bulk = "".join(json.dumps(line) + "\n" for i in range(50) for line in (
            {"index": {"_index": index_name, "_id": f"bulk-{i}"}}, {"title": f"Note {i}", "text": "Kept. " * 20}))
        assert not client.bulk(body=bulk, refresh=True)["errors"]
        assert client.count(index=index_name)["count"] == 5 + 1 + 50
        # each route, gzip and deflate bodies alike; the answers gzip-compressed
        for encoding in ("gzip", "deflate"):
            status, headers, answer = compressed(f"{url}/{index}/_search", engine, "POST", search, encoding)
            assert status == 200 and ranking(answer) == want and headers["content-encoding"] == "gzip"
            status, headers, answer = compressed(f"{url}/{index_name}/_search", engine, "POST",
                                                 {"query": {"ids": {"values": ["zipped"]}}}, encoding)
            assert status == 200 and answer["hits"]["hits"][0]["_id"] == "zipped"
            assert headers["content-encoding"] == "gzip"
            status, headers, answer = compressed(f"{url}/{index}/_msearch", engine, "POST",
                                                 b"{}\n" + json.dumps(search).encode() + b"\n", encoding,
                                                 "application/x-ndjson")
            assert status == 200 and ranking(answer["responses"][0]) == want
            status, headers, answer = compressed(f"{url}/{index_name}/_doc/{encoding}", engine, "PUT",
                                                 {"title": encoding, "text": "written compressed"}, encoding)
            assert status == 201 and answer["result"] == "created"
            # esbridge's own errors too, and a search the engine answers unreranked
            status, headers, answer = compressed(f"{url}/{index}/_search", engine, "POST",
                                                 {"query": {"match": {"text": "x"}},
                                                  "ext": {"esbridge": {"window": 0}}}, encoding)
            assert status == 400 and "ext.esbridge.window" in answer["error"]["reason"]
            assert headers["content-encoding"] == "gzip"
            status, headers, answer = compressed(f"{url}/{index}/_search", engine, "POST",
                                                 {"query": {"term": {"text": "x"}}}, encoding)
            assert status == 200 and headers["x-esbridge-reranked"] == "false" and "hits" in answer
    assert engine.request("GET", f"/{index_name}/_doc/deflate")["_source"]["text"] == "written compressed"
    # an answer the cluster sent uncompressed (the proxy asks for none) is gzipped by the server
    with fault_proxy(engine.options.url, lambda *_: None) as (proxy, _), \
            running(engine, {}, replace(engine.options, url=proxy, urls=())) as url:
        for method, path, body in [("POST", f"/{index_name}/_search", b'{"size": 1}'), ("GET", "/", None),
                                   ("GET", f"/_cat/indices/{index_name}", None)]:
            req = urllib.request.Request(url + path, data=body, method=method, headers={
                "content-type": "application/json", "accept-encoding": "gzip", **auth_of(engine)})
            with urllib.request.urlopen(req, timeout=60) as resp:
                assert resp.headers["content-encoding"] == "gzip", path
                assert gzip.decompress(resp.read()).strip(), path
        req = urllib.request.Request(f"{url}/{index_name}", method="HEAD", headers={"accept-encoding": "gzip",
                                                                                     **auth_of(engine)})
        with urllib.request.urlopen(req, timeout=60) as resp:
            assert resp.status == 200 and "content-encoding" not in resp.headers and resp.read() == b""


def raw_get(engine: Engine, url: str, body: Any) -> tuple[int, str]:
    """Status and text of a POST of ``body``, as sent back."""
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"content-type": "application/json", **auth_of(engine)})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_the_java_clients_url_parameters_are_taken(engine: Engine, collection: tuple[str, list[str]]) -> None:
    index, queries = collection
    search = {"query": {"match": {"text": queries[1]}}, "size": 5}
    want = ranking(Reranker(engine, index, window=WINDOW).search(queries[1], size=5))
    rescore = {"query": {"match": {"text": queries[1]}}, "size": 5,
               "aggs": {"n": {"filter": {"exists": {"field": "title"}}}}}
    with running(engine, {index: {"window": WINDOW, "mode": "search"}, "rescored": {}}) as url:
        client = client_of(engine, url)
        # opensearch-java sends typed_keys=true with every search and _msearch
        got = client.search(index=index, body=search, params={"typed_keys": "true"})
        assert ranking(got) == want
        got = client.msearch(index=index, body=[{}, search], params={"typed_keys": "true"})
        assert ranking(got["responses"][0]) == want
        # the other parameters an application may add (opensearch-py takes a timeout parameter as its own)
        params = {"preference": "app-session-1", "request_cache": "true", "pretty": "true"}
        assert ranking(client.search(index=index, body=search, params=params)) == want
        status, answer = http(engine, "POST", f"{url}/{index}/_search?timeout=30s&typed_keys", search)
        assert status == 200 and ranking(answer) == want
        # filter_path and pretty shape esbridge's answer as the engine shapes its own
        status, answer = http(engine, "POST", f"{url}/{index}/_search?filter_path=hits.hits._id,hits.total", search)
        assert status == 200 and set(answer) == {"hits"} and set(answer["hits"]) == {"hits", "total"}
        assert [h["_id"] for h in answer["hits"]["hits"]] == [i for i, _ in want]
        status, text = raw_get(engine, f"{url}/{index}/_search?pretty&filter_path=-hits.hits._source", search)
        assert status == 200 and text.startswith('{\n  "took" : ') and text.endswith("}\n")
        assert ranking(json.loads(text)) == want and "_source" not in text
        status, answer = http(engine, "POST", f"{url}/{index}/_msearch?filter_path=responses.hits.hits._id",
                              b"{}\n" + json.dumps(search).encode() + b"\n",
                              headers={"content-type": "application/x-ndjson"})
        assert answer == {"responses": [{"hits": {"hits": [{"_id": i} for i, _ in want]}}]}
        # an error is left whole, as the engine leaves its own
        status, answer = http(engine, "POST", f"{url}/{index}/_search?filter_path=took",
                              {"query": {"match": {"text": "x"}}, "ext": {"esbridge": {"window": 0}}})
        assert status == 400 and "ext.esbridge.window" in answer["error"]["reason"]
    # rescore mode: typed_keys goes with the request's own search, which has aggregations
    with running(engine, {index: {"window": WINDOW, "mode": "rescore"}}) as url:
        got = client_of(engine, url).search(index=index, body=rescore, params={"typed_keys": "true"})
        assert set(got["aggregations"]) == {"filter#n"} and got["aggregations"]["filter#n"]["doc_count"] > 0
        assert {h["_id"] for h in got["hits"]["hits"]} <= {h["_id"] for h in engine.search(index, {
            "query": rescore["query"], "size": WINDOW})["hits"]["hits"]}


def test_the_first_stage_takes_the_searchs_engine_parameters(engine: Engine,
                                                             collection: tuple[str, list[str]]) -> None:
    index, queries = collection
    search = {"query": {"match": {"text": queries[2]}}, "size": 5}
    want = ranking(Reranker(engine, index, window=WINDOW).search(queries[2], size=5))
    params = {"preference": "app-session-1", "request_cache": "true", "timeout": "30s"}
    with fault_proxy(engine.options.url, lambda *_: None) as (proxy, seen), \
            running(engine, {index: {"window": WINDOW, "mode": "search"}},
                    replace(engine.options, url=proxy, urls=())) as url:
        status, answer = http(engine, "POST", f"{url}/{index}/_search?{urlencode(params)}", search)
        assert status == 200 and ranking(answer) == want
    sent = [parse_qs(urlsplit(path).query) for method, path in seen.requests
            if urlsplit(path).path == f"/{index}/_search"]
    assert sent and all({k: v[0] for k, v in q.items() if k in params} == params for q in sent)
    # no other request of the rerank carries them
    assert not [path for _, path in seen.requests if urlsplit(path).path != f"/{index}/_search"
                and ("timeout=" in path or "request_cache=" in path or "app-session-1" in path)]


FILTERS = ["hits.hits._id", "hits.hits._id,hits.total", "-hits.hits._source", "-_shards.*", "**._id", "hits.**",
           "_sh*", "*.total", "hits.hits", "hits.hits.*", "hits.hits.nothing", "hits.hits._source.title",
           "-hits.hits,hits", "hits.total.value,-hits.total", "hits.hits._id,-hits.hits._id", "-took,-hits.hits.*"]


def test_filter_path_is_applied_as_the_engine_applies_it(engine: Engine, collection: tuple[str, list[str]]) -> None:
    index, queries = collection
    for body in ({"query": {"match": {"text": queries[0]}}, "size": 3, "_source": ["title"]},
                 {"query": {"ids": {"values": ["no-such-id"]}}}):
        _, whole = raw_get(engine, f"{engine.options.url}/{index}/_search?preference=x", body)
        for spec in FILTERS:
            _, own = raw_get(engine, f"{engine.options.url}/{index}/_search?preference=x&filter_path={spec}", body)
            mine, theirs = filter_path(json.loads(whole), spec), json.loads(own)
            for out in (mine, theirs):
                out.pop("took", None)
            assert mine == theirs, spec


def closed_port() -> int:
    """A local port nothing listens on (a connection to it is refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_body_goes_on_to_the_next_node_when_one_is_down(engine: Engine, collection: tuple[str, list[str]],
                                                          index_name: str) -> None:
    index, queries = collection
    create_small_index(engine, index_name)
    dead = f"{urlsplit(engine.options.url).scheme}://127.0.0.1:{closed_port()}"
    options = replace(engine.options, url="", urls=[dead, *engine.options.urls])
    want = ranking(Reranker(engine, index, window=WINDOW).search(queries[3], size=5))
    bulk = "".join(json.dumps(line) + "\n" for i in range(200) for line in (
        {"index": {"_index": index_name, "_id": f"bulk-{i}"}}, {"title": f"Note {i}", "text": "Kept. " * 50}))
    with running(engine, {index: {"window": WINDOW, "mode": "search"}}, options) as url:
        client = client_of(engine, url, max_retries=0)  # every request reaches the server once
        # the server sends its requests to the dead node and the live one in turn: each kind twice
        for i in range(2):
            client.index(index=index_name, id=f"new-{i}", body={"title": "Posted", "text": "A body, sent again."})
            client.create(index=index_name, id=f"created-{i}", body={"title": "Put", "text": "Another."})
            assert not client.bulk(body=bulk, refresh=True)["errors"]  # 200 KB, streamed
            got = client.search(index=index_name, body={"query": {"match": {"text": "sent again"}}})
            assert got["hits"]["total"]["value"] >= 1
            assert ranking(client.search(index=index, body={"query": {"match": {"text": queries[3]}},
                                                            "size": 5})) == want
            assert client.count(index=index_name)["count"] == 5 + 200 + 2 * (i + 1)
    assert engine.request("GET", f"/{index_name}/_doc/new-1")["_source"]["title"] == "Posted"


def test_read_only_refuses_writes_and_administration(engine: Engine, collection: tuple[str, list[str]],
                                                     index_name: str) -> None:
    index, queries = collection
    create_small_index(engine, index_name)
    count = engine.request("GET", f"/{index_name}/_count")["count"]
    search = {"query": {"match": {"text": queries[0]}}, "size": 5}
    want = ranking(Reranker(engine, index, window=WINDOW).search(queries[0], size=5))
    some_id = engine.search(index_name, {"size": 1})["hits"]["hits"][0]["_id"]
    ndjson = {"content-type": "application/x-ndjson"}
    with running(engine, {index: {"window": WINDOW, "mode": "search"}}, read_only=True) as url:
        refused = [
            ("PUT", f"/{index_name}/_doc/new", {"title": "x"}, None),
            ("POST", f"/{index_name}/_doc", {"title": "x"}, None),
            ("POST", f"/{index_name}/_update/{some_id}", {"doc": {"title": "x"}}, None),
            ("DELETE", f"/{index_name}/_doc/{some_id}", None, None), ("DELETE", f"/{index_name}", None, None),
            ("POST", "/_bulk", json.dumps({"delete": {"_index": index_name, "_id": some_id}}).encode() + b"\n",
             ndjson),
            ("POST", f"/{index_name}/_delete_by_query", {"query": {"match_all": {}}}, None),
            ("PUT", f"/{index_name}-copy", {}, None),
            # (cluster calls that would change nothing on the shared test node, were they let through)
            ("PUT", "/_cluster/settings", {"persistent": {}}, None),
            ("PUT", "/_snapshot/esb-test-repo", {"type": "fs", "settings": {"location": "/tmp/x"}}, None),
            ("POST", "/_nodes/_local/_shutdown", None, None)]
        for method, path, body, headers in refused:
            status, answer = http(engine, method, url + path, body, headers=headers)
            assert status == 403 and answer["status"] == 403, (method, path, answer)
            assert answer["error"]["type"] == "esbridge_read_only_exception"
            assert f"[{method} {path}]" in answer["error"]["reason"] and "--read-only" in answer["error"]["reason"]
        # reads pass, whatever their method
        client = client_of(engine, url)
        assert ranking(client.search(index=index, body=search)) == want
        assert ranking(client.msearch(index=index, body=[{}, search])["responses"][0]) == want
        assert client.count(index=index_name)["count"] == count
        assert client.get(index=index_name, id=some_id)["found"]
        assert client.mget(index=index_name, body={"ids": [some_id]})["docs"][0]["found"]
        assert client.indices.validate_query(index=index_name, body={"query": {"match_all": {}}})["valid"]
        assert client.explain(index=index_name, id=some_id, body={"query": {"match_all": {}}})["matched"]
        assert "title" in client.field_caps(index=index_name, fields="title")["fields"]
        assert client.indices.exists(index=index_name)
        page = client.search(index=index_name, body={"size": 2}, scroll="1m")
        assert client.scroll(body={"scroll_id": page["_scroll_id"], "scroll": "1m"})["hits"]["hits"]
        assert client.clear_scroll(body={"scroll_id": page["_scroll_id"]})["succeeded"]
        if engine.distribution == "opensearch":  # OpenSearch's point-in-time API (Elasticsearch's is /_pit, x-pack)
            status, pit = http(engine, "POST", f"{url}/{index_name}/_search/point_in_time?keep_alive=1m")
            assert status == 200, pit
            status, page = http(engine, "POST", f"{url}/_search", {"pit": {"id": pit["pit_id"]}, "size": 1})
            assert status == 200 and page["hits"]["hits"]
            status, _ = http(engine, "DELETE", f"{url}/_search/point_in_time", {"pit_id": [pit["pit_id"]]})
            assert status == 200
        status, health = http(engine, "GET", f"{url}/_esbridge/health")
        assert health["read_only"] is True
    assert engine.request("GET", f"/{index_name}/_count")["count"] == count
    assert engine.request("GET", f"/{index_name}/_doc/{some_id}")["_source"].get("title") != "x"
