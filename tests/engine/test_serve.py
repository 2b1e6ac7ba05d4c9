"""``esbridge serve`` against the real engines: the engine's clients (opensearch-py, and the
JavaScript client run with node) pointed at the server get esbridge's ranking of the configured
indices, the engine's answers (writes, errors, other indices) unchanged, and nothing secret is
logged."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import re
import shutil
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from opensearchpy import NotFoundError, OpenSearch

from esbridge.engine.client import ConnectionOptions, Engine
from esbridge.rerank import Reranker
from esbridge.serve import parse_config, serve
from esbridge.serve.server import Server
from tests.smallindex import create_small_index, sample_collection

REPO = Path(__file__).resolve().parents[2]
WINDOW = 50


@pytest.fixture(scope="module")
def collection(engine: Engine) -> Iterator[tuple[str, list[str]]]:
    """An esbridge index of 150 SciFact abstracts and six judged claims as queries (nothing here
    writes to it)."""
    sample = sample_collection(6, 150)
    name = create_small_index(engine, f"esb-test-{uuid.uuid4().hex[:10]}",
                              {d["_id"]: {"title": d["title"], "text": d["text"]} for d in sample.docs})
    yield name, [q["text"] for q in sample.queries]
    engine.delete_index(name)


@contextmanager
def running(engine: Engine, indices: dict[str, Any], options: ConnectionOptions | None = None,
            **kwargs: Any) -> Iterator[str]:
    """An ``esbridge serve`` server in a thread of its own, forwarding to ``engine`` (or as
    ``options`` say); its URL."""
    server = Server(options or engine.options, parse_config({"indices": indices}), **kwargs)
    started = threading.Event()
    url: list[str] = []
    failure: list[BaseException] = []
    loop = asyncio.new_event_loop()
    stop: list[asyncio.Event] = []

    async def main() -> None:
        stop.append(asyncio.Event())
        await serve(server, "127.0.0.1", 0, ready=lambda u: (url.append(u), started.set()), stop=stop[0])

    def run() -> None:
        try:
            loop.run_until_complete(main())
        except BaseException as err:  # reported to the test
            failure.append(err)
            started.set()
        finally:
            loop.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert started.wait(60), "the server did not start"
    if failure:
        raise failure[0]
    try:
        yield url[0]
    finally:
        loop.call_soon_threadsafe(stop[0].set)
        thread.join(30)
        assert not thread.is_alive(), "the server did not stop"


def auth_of(engine: Engine) -> dict[str, str]:
    """The ``Authorization`` header of the engine's credentials (none on an engine without security)."""
    options = engine.options
    if options.username is not None:
        token = base64.b64encode(f"{options.username}:{options.password}".encode()).decode()
        return {"Authorization": f"Basic {token}"}
    return dict(options.auth_header())


def client_of(engine: Engine, url: str, **kwargs: Any) -> OpenSearch:
    """opensearch-py pointed at the server ``url``, sending the engine's credentials."""
    return OpenSearch(hosts=[url], headers=auth_of(engine), **kwargs)


def http(engine: Engine, method: str, url: str, body: Any = None,
         headers: dict[str, str | None] | None = None) -> tuple[int, Any]:
    """Status and parsed JSON body of one request, with the engine's credentials unless ``headers``
    give others (None: leave the header out)."""
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    sent = {"content-type": "application/json", **auth_of(engine), **(headers or {})}
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={k: v for k, v in sent.items() if v is not None})
    context = ssl.create_default_context(cafile=engine.options.ca_certs) if url.startswith("https:") else None
    try:
        with urllib.request.urlopen(req, timeout=60, context=context) as resp:
            raw = resp.read()
            status = resp.status
    except urllib.error.HTTPError as err:
        raw = err.read()
        status = err.code
    try:
        return status, json.loads(raw)
    except json.JSONDecodeError:
        return status, raw.decode()


def http_headers(engine: Engine, method: str, url: str, body: Any = None,
                 params: dict[str, str] | None = None) -> tuple[int, dict[str, str], Any]:
    """Status, headers (lower-cased names) and parsed JSON body of one request with the engine's
    credentials."""
    data = None if body is None else json.dumps(body).encode()
    if params:
        url += "?" + urllib.parse.urlencode(params)
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"content-type": "application/json", **auth_of(engine)})
    context = ssl.create_default_context(cafile=engine.options.ca_certs) if url.startswith("https:") else None
    try:
        with urllib.request.urlopen(req, timeout=60, context=context) as resp:
            status, headers, raw = resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as err:
        status, headers, raw = err.code, dict(err.headers), err.read()
    return status, {k.lower(): v for k, v in headers.items()}, json.loads(raw)


def ranking(response: dict[str, Any]) -> list[tuple[str, float]]:
    return [(h["_id"], round(h["_score"], 9)) for h in response["hits"]["hits"]]


def test_opensearch_py_gets_the_python_api_ranking(engine: Engine, collection: tuple[str, list[str]]) -> None:
    index, queries = collection
    reranker = Reranker(engine, index, scorer="evolved", window=WINDOW)
    differs = 0
    with running(engine, {index: {"scorer": "evolved", "window": WINDOW, "mode": "search"}}) as url:
        client = client_of(engine, url)
        for q in queries:
            got = client.search(index=index, body={"query": {"match": {"text": q}}, "size": 10})
            want = reranker.search(q, size=10)
            assert ranking(got) == ranking(want), q
            assert [h["_source"] for h in got["hits"]["hits"]] == [h["_source"] for h in want["hits"]["hits"]]
            assert got["hits"]["max_score"] == want["hits"]["max_score"]
            assert "_esbridge" not in got and all("_esbridge" not in h for h in got["hits"]["hits"])
            own = engine.search(index, {"query": {"match": {"text": q}}, "size": 10})
            differs += [h["_id"] for h in own["hits"]["hits"]] != [h["_id"] for h in got["hits"]["hits"]]
        # the reranked order is esbridge's, not the engine's
        assert differs > 0
        # a page further down, and the window and scorer set per request
        q = queries[0]
        got = client.search(index=index, body={"query": {"match": {"text": q}}, "size": 5, "from": 5,
                                               "ext": {"esbridge": {"scorer": "bmx", "window": 20}}})
        want = Reranker(engine, index, scorer="bmx", window=20).search(q, size=10)
        assert ranking(got) == ranking(want)[5:]


def test_explain_adds_esbridge_details(engine: Engine, collection: tuple[str, list[str]]) -> None:
    index, queries = collection
    with running(engine, {index: {"window": WINDOW}}) as url:
        got = client_of(engine, url).search(index=index, body={
            "query": {"multi_match": {"query": queries[1], "fields": ["title", "text"]}}, "size": 3,
            "_source": ["title"], "ext": {"esbridge": {"explain": True}}})
    assert got["_esbridge"]["scorer"] == "evolved"
    for hit in got["hits"]["hits"]:
        assert set(hit["_source"]) == {"title"}
        assert hit["_esbridge"]["parts"] and hit["_esbridge"]["first_stage_rank"] >= 1


def test_filters_of_a_bool_query_restrict_the_candidates(engine: Engine, collection: tuple[str, list[str]]) -> None:
    index, queries = collection
    q = queries[2]
    keep = {"terms": {"_id": [h["_id"] for h in engine.search(index, {"size": 40})["hits"]["hits"]]}}
    want = Reranker(engine, index, window=WINDOW).search(q, size=10, filter=[keep])
    with running(engine, {index: {"window": WINDOW, "mode": "search"}}) as url:
        got = client_of(engine, url).search(index=index, body={
            "query": {"bool": {"must": [{"match": {"text": q}}], "filter": [keep]}}, "size": 10})
    assert ranking(got) == ranking(want)
    assert {h["_id"] for h in got["hits"]["hits"]} <= set(keep["terms"]["_id"])


def test_rescore_mode_reranks_the_engines_own_query(engine: Engine, collection: tuple[str, list[str]]) -> None:
    index, queries = collection
    q = queries[3]
    query = {"bool": {"should": [{"match": {"title": q}}], "filter": [{"exists": {"field": "text"}}]}}
    reranker = Reranker(engine, index, window=20)
    want = reranker.rescore(engine.search(index, {"query": query, "size": 20}), q, window=20)
    with running(engine, {index: {"mode": "rescore", "window": 20}}) as url:
        got = client_of(engine, url).search(index=index, body={"query": query, "size": 10,
                                                       "aggs": {"n": {"filter": {"exists": {"field": "title"}}}}})
    assert ranking(got) == ranking(want)[:10]
    assert got["aggregations"]["n"]["doc_count"] == want["hits"]["total"]["value"] > 0


def test_msearch_answers_each_search_as_search_does(engine: Engine, collection: tuple[str, list[str]]) -> None:
    index, queries = collection
    with running(engine, {index: {"window": WINDOW}}) as url:
        client = client_of(engine, url)
        singles = [client.search(index=index, body={"query": {"match": {"text": q}}, "size": 5})
                   for q in queries[:3]]
        body: list[Any] = []
        for q in queries[:3]:
            body += [{}, {"query": {"match": {"text": q}}, "size": 5}]
        body += [{}, {"query": {"match": {"text": queries[0]}}, "size": 5, "ext": {"esbridge": {"rerank": False}}}]
        got = client.msearch(index=index, body=body)
    assert [ranking(r) for r in got["responses"][:3]] == [ranking(s) for s in singles]
    own = engine.search(index, {"query": {"match": {"text": queries[0]}}, "size": 5})
    assert "error" not in got["responses"][3], json.dumps(got["responses"][3])[:500]
    assert ranking(got["responses"][3]) == ranking(own)


def test_writes_pass_through_and_are_visible(engine: Engine, index_name: str) -> None:
    create_small_index(engine, index_name)
    with running(engine, {index_name: {"window": 10}}, max_search_body=30_000) as url:
        client = client_of(engine, url)
        client.index(index=index_name, id="new", body={"title": "Insulin pumps", "text": "An insulin pump "
                                                        "delivers insulin to diabetes patients all day."})
        # a _bulk of 300 KiB, ten times what the server reads whole: streamed through
        bulk = "".join(json.dumps(line) + "\n" for i in range(300) for line in (
            {"index": {"_index": index_name, "_id": f"bulk-{i}"}},
            {"title": f"Note {i}", "text": "Readings of the pump, kept for the record. " * 25}))
        assert len(bulk) > 10 * 30_000
        answer = client.bulk(body=bulk)
        assert not answer["errors"] and len(answer["items"]) == 300
        status, answer = http(engine, "POST", f"{url}/{index_name}/_search", {
            "query": {"match": {"text": "pump"}}, "ext": {"esbridge": {"query": "x" * 40_000}}})
        assert status == 413 and "at most 30000 bytes" in answer["error"]["reason"]
        client.indices.refresh(index=index_name)
        assert client.get(index=index_name, id="new")["_source"]["title"] == "Insulin pumps"
        assert client.count(index=index_name)["count"] == 5 + 1 + 300
        got = client.search(index=index_name, body={"query": {"match": {"text": "insulin pump"}}, "size": 3})
        assert got["hits"]["hits"][0]["_id"] == "new"
        client.delete(index=index_name, id="new")
        client.indices.refresh(index=index_name)
        with pytest.raises(NotFoundError):
            client.get(index=index_name, id="new")
    assert engine.request("GET", f"/{index_name}/_count")["count"] == 5 + 300


def test_engine_errors_come_back_unchanged(engine: Engine, collection: tuple[str, list[str]]) -> None:
    index, _ = collection
    missing = f"esb-test-missing-{uuid.uuid4().hex[:8]}"
    configured_missing = f"esb-test-missing-{uuid.uuid4().hex[:8]}"
    direct = engine.options.url
    with running(engine, {index: {}, configured_missing: {}}) as url:
        for method, path, body in [("GET", f"/{missing}/_search", None),
                                   ("POST", f"/{index}/_search", {"query": {"match": {"text": "x"}},
                                                                   "ext": {"esbridge": {"rerank": False}},
                                                                   "size": "many"}),
                                   ("PUT", f"/{index}/_doc/x", b"{not json")]:
            status, answer = http(engine, method, url + path, body)
            assert (status, answer) == http(engine, method, direct + path, body if method != "POST" else {
                k: v for k, v in body.items() if k != "ext"}), path
            assert status >= 400
        # a configured index the cluster does not have: the engine's 404 through esbridge
        status, answer = http(engine, "POST", f"{url}/{configured_missing}/_search",
                              {"query": {"match": {"text": "x"}}})
        assert status == 404 and answer["error"]["type"] == "index_not_found_exception"
        assert answer["status"] == 404
        # a query with no text to rerank by: the engine's answer, saying it is not reranked
        status, headers, answer = http_headers(engine, "POST", f"{url}/{index}/_search",
                                               {"query": {"term": {"text": "x"}}})
        assert status == 200 and headers["x-esbridge-reranked"] == "false"
        assert headers["x-esbridge-reason"] == "no_query_text"
        assert answer["hits"] == engine.search(index, {"query": {"term": {"text": "x"}}})["hits"]
        status, answer = http(engine, "POST", f"{url}/{index}/_search", {"query": {"match": {"text": "x"}},
                                                                  "ext": {"esbridge": {"windwo": 5}}})
        assert status == 400 and "ext.esbridge.windwo" in answer["error"]["reason"]


def test_an_index_not_configured_passes_through(engine: Engine, collection: tuple[str, list[str]]) -> None:
    index, queries = collection
    body = {"query": {"match": {"text": queries[0]}}, "size": 10}
    own = engine.search(index, body, params={"preference": "x"})
    with running(engine, {"some-other-index": {}}) as url:
        got = client_of(engine, url).search(index=index, body=body, params={"preference": "x"})
        # and HEAD, the cluster's root, the cat API as text
        client = client_of(engine, url)
        assert client.indices.exists(index=index)
        assert http(engine, "GET", f"{url}/") == http(engine, "GET", f"{engine.options.url}/")
        cat = client.cat.indices(index=index, h="index")
    assert ranking(got) == ranking(own) and got["hits"]["total"] == own["hits"]["total"]
    assert cat.strip() == index


def test_timeouts_and_metrics(engine: Engine, collection: tuple[str, list[str]]) -> None:
    index, queries = collection
    with running(engine, {index: {"window": WINDOW, "mode": "search"}}, request_timeout=0.000001) as url:
        status, answer = http(engine, "POST", f"{url}/{index}/_search", {"query": {"match": {"text": queries[0]}}})
        assert status == 504 and answer["error"]["type"] == "timeout_exception"
        assert "--request-timeout" in answer["error"]["reason"]
    with running(engine, {index: {"window": WINDOW, "mode": "search"}}, max_concurrency=2) as url:
        client = client_of(engine, url, pool_maxsize=8)
        want = [ranking(Reranker(engine, index, window=WINDOW).search(q, size=5)) for q in queries]
        results: dict[int, Any] = {}

        def one(i: int) -> None:
            results[i] = ranking(client.search(index=index, body={"query": {"match": {"text": queries[i % 6]}},
                                                                  "size": 5}))

        threads = [threading.Thread(target=one, args=(i,)) for i in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert [results[i] for i in range(12)] == [want[i % 6] for i in range(12)]
        client.count(index=index)
        status, health = http(engine, "GET", f"{url}/_esbridge/health")
        assert status == 200 and health["status"] == "ok" and health["reranked_indices"] == [index]
        with urllib.request.urlopen(f"{url}/_esbridge/metrics", timeout=30) as resp:
            assert resp.headers["content-type"].startswith("text/plain")
            metrics = resp.read().decode()
    assert 'esbridge_serve_requests_total{handling="reranked",status="200"} 12' in metrics
    assert 'esbridge_serve_requests_total{handling="passed_through",status="200"} 1' in metrics
    assert 'esbridge_serve_request_duration_seconds_count{handling="reranked"} 12' in metrics
    assert re.search(r'esbridge_serve_request_duration_seconds_bucket\{handling="reranked",le="\+Inf"\} 12', metrics)


def test_no_secret_reaches_the_log(engine: Engine, collection: tuple[str, list[str]],
                                   caplog: pytest.LogCaptureFixture) -> None:
    index, _ = collection
    secret_text = "glucose-secret-claim-7311"
    # the engine's own credentials where it has security on, else made-up ones (which it ignores)
    auth = auth_of(engine).get("Authorization") or "Basic " + base64.b64encode(b"serve-user:s3cret-pass").decode()
    secrets = [auth, auth.split()[1], secret_text, "c2VjcmV0", engine.options.password or "s3cret-pass"]
    caplog.set_level(logging.DEBUG)
    with running(engine, {index: {"window": 10}}) as url:
        for path, body in [(f"/{index}/_search", {"query": {"match": {"text": secret_text}}}),
                           (f"/{index}/_search?q={secret_text}", None),
                           (f"/{index}/_search", {"query": {"match": {"text": secret_text}},
                                                  "ext": {"esbridge": {"rerank": False}}}),
                           (f"/{index}/_count", {"query": {"match": {"text": secret_text}}})]:
            http(engine, "POST", url + path, body, headers={"Authorization": auth, "X-Api-Note": "ApiKey c2VjcmV0"})
    text = "\n".join(f"{r.name} {r.getMessage()} {r.exc_text or ''}" for r in caplog.records)
    assert f"POST /{index}/_search 200" in text and f"POST /{index}/_count 200" in text
    for secret in secrets:
        assert secret not in text


@pytest.mark.secured
def test_each_callers_credentials_reach_the_cluster(engine: Engine, collection: tuple[str, list[str]]) -> None:
    index, queries = collection
    search = {"query": {"match": {"text": queries[0]}}, "size": 5}
    token = base64.b64encode(f"{engine.options.username}:wrong".encode()).decode()
    wrong: dict[str, str | None] = {"Authorization": f"Basic {token}"}
    with running(engine, {index: {"window": WINDOW, "mode": "search"}}) as url:
        for headers in ({"Authorization": None}, wrong):
            for body in (search, {**search, "ext": {"esbridge": {"rerank": False}}}):
                status, answer = http(engine, "POST", f"{url}/{index}/_search", body, headers=headers)
                assert status == 401 and answer["error"]["type"] == "security_exception", answer
        status, answer = http(engine, "POST", f"{url}/{index}/_search", search)
        assert status == 200
        assert ranking(answer) == ranking(Reranker(engine, index, window=WINDOW).search(queries[0], size=5))


@pytest.fixture(scope="module")
def opensearch_js(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with the official JavaScript client (@opensearch-project/opensearch) installed from npm."""
    npm, node = shutil.which("npm"), shutil.which("node")
    assert npm and node, "the JavaScript client test needs node (20+) and npm on the PATH"
    folder = tmp_path_factory.mktemp("opensearch-js")
    (folder / "package.json").write_text(json.dumps({"name": "esbridge-serve-test", "private": True}))
    subprocess.run([npm, "install", "--no-audit", "--no-fund", "--silent", "@opensearch-project/opensearch@^3"],
                   cwd=folder, check=True, timeout=600)
    return folder


def test_javascript_client_gets_the_reranked_order(engine: Engine, collection: tuple[str, list[str]],
                                                   opensearch_js: Path) -> None:
    index, queries = collection
    script = opensearch_js / "search.js"
    script.write_text("""
const { Client } = require('@opensearch-project/opensearch');
const [url, index, ...queries] = process.argv.slice(2);
(async () => {
  const client = new Client({ node: url, headers: JSON.parse(process.env.ESBRIDGE_TEST_HEADERS) });
  const out = [];
  for (const q of queries) {
    const resp = await client.search({ index, body: { query: { match: { text: q } }, size: 10 } });
    out.push(resp.body.hits.hits.map((h) => h._id));
  }
  console.log(JSON.stringify(out));
})().catch((err) => { console.error(err.message); process.exit(1); });
""")
    want = [[h["_id"] for h in Reranker(engine, index, window=WINDOW).search(q, size=10)["hits"]["hits"]]
            for q in queries]
    with running(engine, {index: {"window": WINDOW, "mode": "search"}}) as url:
        done = subprocess.run([shutil.which("node") or "node", str(script), url, index, *queries],
                              cwd=opensearch_js, capture_output=True, text=True, timeout=120,
                              env={**os.environ, "ESBRIDGE_TEST_HEADERS": json.dumps(auth_of(engine))})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == want


def test_the_command_serves_and_stops_on_sigterm(engine: Engine, collection: tuple[str, list[str]],
                                                 tmp_path: Path) -> None:
    index, queries = collection
    config = tmp_path / "serve.json"
    config.write_text(json.dumps({"indices": {index: {"window": WINDOW, "mode": "search"}}}))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "esbridge.cli", "serve", "--url", engine.options.url, "--port",
                             "0", "--config", str(config)], cwd=REPO, env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        url = None
        lines = []
        for line in proc.stderr:
            lines.append(line)
            found = re.search(r"listening on (http://\S+)", line)
            if found:
                url = found.group(1)
                break
        assert url, "".join(lines)
        got = client_of(engine, url).search(index=index, body={"query": {"match": {"text": queries[0]}}, "size": 5})
        assert ranking(got) == ranking(Reranker(engine, index, window=WINDOW).search(queries[0], size=5))
        # a request the cluster takes 3 s over, under way when SIGTERM comes: answered before the server exits
        slow: list[tuple[int, Any]] = []
        waiting = threading.Thread(target=lambda: slow.append(http(
            engine, "GET", f"{url}/_cluster/health?wait_for_nodes=99&timeout=3s")))
        waiting.start()
        time.sleep(1.0)
        proc.send_signal(signal.SIGTERM)
        rest = proc.stderr.read()
        assert proc.wait(60) == 0, rest
        assert "stopping" in rest and "stopped" in rest
        waiting.join(30)
        assert slow and slow[0][0] == 408 and slow[0][1]["timed_out"] is True
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# ---- the rule: the engine's answer to the same request, its top hits reranked ----------------

def same_but_hits(got: dict[str, Any], own: dict[str, Any]) -> None:
    """``got`` is ``own`` but for its hits' order and scores (and ``took``)."""
    for key in set(got) | set(own):
        if key not in ("took", "hits"):
            assert got.get(key) == own.get(key), key
    assert got["hits"]["total"] == own["hits"]["total"]


def test_the_users_query_finds_the_candidates(engine: Engine, collection: tuple[str, list[str]]) -> None:
    index, queries = collection
    window = 20
    reranker = Reranker(engine, index, window=window)
    searches = [
        {"query": {"match": {"title": queries[0]}}},
        {"query": {"multi_match": {"query": queries[1], "fields": ["title^2"]}}},
        {"query": {"match": {"text": {"query": queries[2], "operator": "and"}}}},
        {"query": {"match": {"text": {"query": "vitamin bone", "operator": "and"}}}},
        {"query": {"bool": {"must": [{"match": {"text": queries[3]}}, {"match": {"title": queries[3]}}],
                            "should": [{"term": {"text": "cell"}}], "minimum_should_match": 0}}},
        {"query": {"bool": {"should": [{"match": {"text": queries[4]}}, {"match": {"title": queries[4]}}],
                            "minimum_should_match": 1, "filter": [{"exists": {"field": "title"}}]}}},
    ]
    with running(engine, {index: {"window": window}}) as url:
        client = client_of(engine, url)
        for search in searches:
            own_window = engine.search(index, {**search, "size": window})
            got = client.search(index=index, body={**search, "size": 10})
            same_but_hits(got, engine.search(index, {**search, "size": 10}))
            text = " ".join(dict.fromkeys(
                c.get("query") if isinstance(c, dict) else c
                for c in _text_clauses(search["query"])))
            want = reranker.rescore(own_window, text, window=window) if own_window["hits"]["hits"] else own_window
            assert ranking(got) == ranking(want)[:10], search
            # the candidates are the engine's top hits for the user's query
            assert {h["_id"] for h in got["hits"]["hits"]} <= {h["_id"] for h in own_window["hits"]["hits"]}
        # operator and: the engine's hits and total, none where it has none
        none = client.search(index=index, body={"query": {"match": {"text": {
            "query": "zzzunknownword vitamin", "operator": "and"}}}})
        assert none["hits"]["total"]["value"] == 0 and none["hits"]["hits"] == []


def _text_clauses(query: dict[str, Any]) -> list[Any]:
    (kind, clause), = query.items()
    if kind == "match":
        return list(clause.values())
    if kind == "multi_match":
        return [clause]
    if kind == "bool":
        return [c for key in ("must", "should") for q in clause.get(key, []) for c in _text_clauses(q)]
    return []


def test_the_engines_parts_of_the_answer_are_kept(engine: Engine, collection: tuple[str, list[str]]) -> None:
    index, queries = collection
    window = 20
    q = queries[1]
    search = {"query": {"match": {"text": q}}, "size": 5, "from": 3,
              "aggs": {"ids": {"terms": {"field": "esbridge_id", "size": 3}}, "n": {"filter": {"match": {"title": q}}}},
              "highlight": {"fields": {"text": {}}}, "post_filter": {"exists": {"field": "title"}},
              "track_total_hits": True, "min_score": 0.5, "docvalue_fields": ["esbridge_id"],
              "_source": {"includes": ["title"]}, "suggest": {"s": {"text": "vitamn", "term": {"field": "text"}}},
              "stored_fields": ["_source"], "version": True}
    reranker = Reranker(engine, index, window=window)
    with running(engine, {index: {"window": window}}) as url:
        status, headers, got = http_headers(engine, "POST", f"{url}/{index}/_search", search)
        assert status == 200 and headers["x-esbridge-reranked"] == "true", got
        own = engine.search(index, search)
        same_but_hits(got, own)
        assert got["aggregations"] == own["aggregations"] and got["suggest"] == own["suggest"]
        own_window = engine.search(index, {**search, "size": window, "from": 0})
        want = reranker.rescore(own_window, q, window=window)
        assert ranking(got) == ranking(want)[3:8]
        for hit in got["hits"]["hits"]:
            assert set(hit["_source"]) == {"title"} and hit["highlight"]["text"]
            assert hit["fields"]["esbridge_id"] == [hit["_id"]] and "_version" in hit
        # profile: the engine's
        got = client_of(engine, url).search(index=index, body={"query": {"match": {"text": q}}, "profile": True})
        assert got["profile"]["shards"]
        # paging past the window: the engine's order beyond it
        pages = [client_of(engine, url).search(index=index, body={"query": {"match": {"text": q}}, "size": 10,
                                                                 "from": f})["hits"]["hits"] for f in (0, 10, 20, 30)]
        own_all = engine.search(index, {"query": {"match": {"text": q}}, "size": 40})["hits"]["hits"]
        flat = [h["_id"] for page in pages for h in page]
        assert set(flat[:window]) == {h["_id"] for h in own_all[:window]}
        assert flat[window:] == [h["_id"] for h in own_all[window:40]]
        # a URI search: the engine's query from q
        status, headers, got = http_headers(engine, "GET", f"{url}/{index}/_search", params={"q": "text:vitamin"})
        own = engine.search(index, {"query": {"query_string": {"query": "text:vitamin"}}})
        assert headers["x-esbridge-reranked"] == "true" and got["hits"]["total"] == own["hits"]["total"]
        # what each hit carries asked in the URL
        status, headers, got = http_headers(engine, "POST", f"{url}/{index}/_search",
                                            {"query": {"match": {"text": q}}, "size": 5},
                                            {"_source_includes": "title", "version": "true"})
        assert status == 200 and headers["x-esbridge-reranked"] == "true", got
        assert ranking(got) == ranking(want)[:5]
        assert all(set(h["_source"]) == {"title"} and "_version" in h for h in got["hits"]["hits"])


def test_a_fixed_order_is_the_engines(engine: Engine, collection: tuple[str, list[str]]) -> None:
    index, queries = collection
    match = {"match": {"text": queries[0]}}
    cases = [
        ("sort", {"query": match, "sort": [{"esbridge_id": "asc"}]}, {}),
        ("sort", {"query": match}, {"sort": "esbridge_id:desc"}),
        ("search_after", {"query": match, "sort": [{"esbridge_id": "asc"}], "search_after": ["1"]}, {}),
        ("collapse", {"query": match, "collapse": {"field": "esbridge_id"}}, {}),
        ("rescore", {"query": match, "rescore": {"window_size": 5, "query": {
            "rescore_query": {"match": {"title": queries[0]}}}}}, {}),
        ("no_query_text", {"query": {"term": {"text": "vitamin"}}}, {}),
        ("no_query_text", {"query": {"match_all": {}}, "aggs": {"n": {"value_count": {"field": "esbridge_id"}}}}, {}),
        ("no_query_text", {"query": {"bool": {"filter": [match]}}}, {}),
    ]
    with running(engine, {index: {"window": WINDOW}}) as url:
        for reason, body, params in cases:
            status, headers, got = http_headers(engine, "POST", f"{url}/{index}/_search", body, params)
            own = engine.search(index, body, params=params or None)
            assert status == 200 and headers["x-esbridge-reranked"] == "false", got
            assert headers["x-esbridge-reason"] == reason
            same_but_hits(got, own)
            assert got["hits"] == own["hits"]
        # a scroll: the engine's, its next page too
        status, headers, got = http_headers(engine, "POST", f"{url}/{index}/_search", {"query": match, "size": 3},
                                            {"scroll": "1m"})
        assert headers["x-esbridge-reason"] == "scroll" and got["_scroll_id"]
        more = client_of(engine, url).scroll(body={"scroll_id": got["_scroll_id"], "scroll": "1m"})
        assert len(more["hits"]["hits"]) == 3
        # a sort by score is reranked
        got = client_of(engine, url).search(index=index, body={"query": match, "sort": ["_score"], "size": 3})
        assert [h["sort"] for h in got["hits"]["hits"]] == [[h["_score"]] for h in got["hits"]["hits"]]
        with urllib.request.urlopen(f"{url}/_esbridge/metrics", timeout=30) as resp:
            metrics = resp.read().decode()
    assert 'esbridge_serve_unreranked_total{reason="no_query_text"} 3' in metrics
    assert 'esbridge_serve_unreranked_total{reason="sort"} 2' in metrics
    assert 'esbridge_serve_requests_total{handling="unreranked",status="200"} 9' in metrics


def test_a_faceted_search_page_is_the_engines_in_esbridges_order(engine: Engine, index_name: str) -> None:
    """A shop's search page through opensearch-py: a match on one field with operator and, a filter, a
    terms facet on a keyword field, highlighting and paging get the engine's answer, its top hits in
    esbridge's order."""
    from esbridge.ingest import ingest

    sample = sample_collection(2, 300)
    docs = [{"_id": d["_id"], "title": d["title"], "text": d["text"], "category": ("a", "b", "c")[i % 3],
             "price": 10 + i % 50} for i, d in enumerate(sample.docs)]
    assert ingest(engine, index_name, docs, progress=False).indexed == len(docs)
    engine.refresh(index_name)
    window = 20
    body = {"query": {"bool": {"must": {"match": {"text": {"query": "cell study", "operator": "and"}}},
                               "filter": [{"range": {"price": {"lte": 50}}}]}},
            "aggs": {"category": {"terms": {"field": "category.keyword"}}},
            "highlight": {"fields": {"text": {}}}, "from": 5, "size": 5}
    own = engine.search(index_name, body)
    own_window = engine.search(index_name, {**body, "from": 0, "size": window})
    assert own["hits"]["total"]["value"] > window  # more matches than the window
    want = Reranker(engine, index_name, window=window).rescore(own_window, "cell study", window=window)
    with running(engine, {index_name: {"window": window}}) as url:
        got = client_of(engine, url).search(index=index_name, body=body)
    assert got["hits"]["total"] == own["hits"]["total"]
    assert got["aggregations"] == own["aggregations"] and got["_shards"] == own["_shards"]
    assert ranking(got) == ranking(want)[5:10]
    assert ranking(got) != ranking(own)
    assert {h["_id"] for h in got["hits"]["hits"]} <= {h["_id"] for h in own_window["hits"]["hits"]}
    for hit in got["hits"]["hits"]:
        assert hit["highlight"]["text"] and all("<em>" in f for f in hit["highlight"]["text"])
        assert hit["_source"]["price"] <= 50 and "category" in hit["_source"]


def test_several_indices_wildcards_and_aliases(engine: Engine, collection: tuple[str, list[str]],
                                               index_name: str) -> None:
    index, queries = collection
    sample = sample_collection(6, 150)
    other = create_small_index(engine, index_name, {d["_id"]: {"title": d["title"], "text": d["text"]}
                                                    for d in sample.docs[:60]})
    alias = f"{index}-alias"
    engine.request("POST", "/_aliases", body={"actions": [{"add": {"index": index, "alias": alias}}]})
    q = queries[0]
    body = {"query": {"match": {"text": q}}, "size": 10, "aggs": {"n": {"value_count": {"field": "esbridge_id"}}}}
    window = 20
    try:
        with running(engine, {index: {"window": window}, other: {"window": window}}) as url:
            # an alias of a configured index, a wildcard and a list naming configured indices only: reranked
            for expr in (alias, f"{index[:-3]}*,{other}", f"{index},{other}"):
                status, headers, got = http_headers(engine, "POST", f"{url}/{expr}/_search", body)
                own = engine.search(expr, body)
                assert status == 200 and headers["x-esbridge-reranked"] == "true", (expr, got)
                same_but_hits(got, own)
                own_window = engine.search(expr, {**body, "size": window})
                assert {(h["_index"], h["_id"]) for h in got["hits"]["hits"]} <= \
                    {(h["_index"], h["_id"]) for h in own_window["hits"]["hits"]}
                scores = [h["_score"] for h in got["hits"]["hits"]]
                assert scores == sorted(scores, reverse=True)
            status, _, got = http_headers(engine, "POST", f"{url}/{alias}/_search", body)
            want = Reranker(engine, index, window=window).rescore(engine.search(index, {**body, "size": window}), q,
                                                                 window=window)
            assert ranking(got) == ranking(want)[:10]
            # one index not configured among them: the engine's answer, saying why
        with running(engine, {index: {"window": window}}) as url:
            for path in (f"/{index},{other}/_search", f"/{index[:-3]}*,{other}/_search", "/_search"):
                status, headers, got = http_headers(engine, "POST", url + path, body)
                assert status == 200 and headers["x-esbridge-reranked"] == "false", path
                assert headers["x-esbridge-reason"] == "target_not_configured"
            # an index no configured name covers: passed through as before, without the header
            status, headers, got = http_headers(engine, "POST", f"{url}/{other}/_search", body)
            assert status == 200 and "x-esbridge-reranked" not in headers
            if engine.distribution != "opensearch":
                return  # the point-in-time API below is OpenSearch's (Elasticsearch's is /_pit, with x-pack)
            # a point in time
            status, pit = http(engine, "POST", f"{url}/{index}/_search/point_in_time?keep_alive=1m")
            status, headers, got = http_headers(engine, "POST", f"{url}/_search",
                                                {"pit": {"id": pit["pit_id"]}, "query": {"match": {"text": q}}})
            assert status == 200 and headers["x-esbridge-reason"] == "pit" and got["hits"]["hits"]
            http(engine, "DELETE", f"{url}/_search/point_in_time", {"pit_id": [pit["pit_id"]]})
    finally:
        engine.request("POST", "/_aliases", body={"actions": [{"remove": {"index": index, "alias": alias}}]})


def test_explain_explains_esbridges_score(engine: Engine, collection: tuple[str, list[str]]) -> None:
    index, queries = collection
    with running(engine, {index: {"window": 10}}) as url:
        got = client_of(engine, url).search(index=index, body={"query": {"match": {"text": queries[2]}},
                                                               "explain": True, "size": 15})
    hits = got["hits"]["hits"]
    for hit in hits[:10]:
        assert hit["_explanation"]["value"] == hit["_score"] and "esbridge" in hit["_explanation"]["description"]
        assert hit["_explanation"]["details"] and "_esbridge" not in hit
    for hit in hits[10:]:  # beyond the window: the engine's explanation of its own score
        assert hit["_explanation"]["value"] == pytest.approx(hit["_score"]) and "esbridge" not in json.dumps(
            hit["_explanation"])


def test_msearch_headers_naming_the_index_follow_the_rule(engine: Engine, collection: tuple[str, list[str]],
                                                          index_name: str) -> None:
    index, queries = collection
    other = create_small_index(engine, index_name)
    search = {"query": {"match": {"text": queries[1]}}, "size": 5}
    with running(engine, {index: {"window": WINDOW}}) as url:
        client = client_of(engine, url)
        single = client.search(index=index, body=search)
        body = [{"index": index}, search, {"index": other}, search, {"index": index, "preference": "x"}, search,
                {"index": index}, {**search, "sort": [{"esbridge_id": "asc"}]}]
        status, headers, got = http_headers(engine, "POST", f"{url}/_msearch", None)  # (an empty body: refused)
        assert status == 400
        req = urllib.request.Request(f"{url}/_msearch", method="POST", data="".join(
            json.dumps(line) + "\n" for line in body).encode(),
            headers={"content-type": "application/x-ndjson", **auth_of(engine)})
        with urllib.request.urlopen(req, timeout=60) as resp:
            headers = {k.lower(): v for k, v in resp.headers.items()}
            got = json.loads(resp.read())
        # the same path with the index in it: its searches too
        via_path = client.msearch(index=index, body=[{}, search, {"index": other}, search])
    responses = got["responses"]
    assert ranking(responses[0]) == ranking(single) == ranking(responses[2]) == ranking(via_path["responses"][0])
    own = engine.search(other, search)
    assert ranking(responses[1]) == ranking(own) == ranking(via_path["responses"][1])
    assert responses[3]["hits"] == engine.search(index, {**search, "sort": [{"esbridge_id": "asc"}]})["hits"]
    assert headers["x-esbridge-reranked"] == "true,false,true,false"
    assert headers["x-esbridge-reason"] == "-,target_not_configured,-,sort"


def _ndjson(engine: Engine, url: str, lines: list[Any]) -> tuple[dict[str, str], Any]:
    """Headers (lower-cased names) and parsed answer of an ``_msearch`` POSTed to ``url``."""
    req = urllib.request.Request(url, method="POST", data="".join(json.dumps(line) + "\n" for line in lines).encode(),
                                 headers={"content-type": "application/x-ndjson", **auth_of(engine)})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return {k.lower(): v for k, v in resp.headers.items()}, json.loads(resp.read())


def test_an_index_esbridge_cannot_rerank_is_answered_by_the_engine(engine: Engine, index_name: str,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    """A configured index esbridge cannot rerank as it is (no text field it can read: keyword fields
    only; a missing index) is searched as the engine answers, unreranked and saying why, never with
    esbridge's 400 (OpenSearch's REST tests of search and highlighting got one); the log says why once."""
    engine.request("PUT", f"/{index_name}", body={"mappings": {"properties": {"tag": {"type": "keyword"}}}})
    for i, tag in enumerate(["red", "red", "blue"]):
        engine.request("PUT", f"/{index_name}/_doc/{i}", body={"tag": tag})
    engine.refresh(index_name)
    missing = f"{index_name}-missing"
    body = {"query": {"match": {"tag": "red"}}}
    own = engine.search(index_name, body)
    with caplog.at_level(logging.INFO, "esbridge.serve"), \
            running(engine, {index_name: {"scorer": "bm25"}, missing: {"scorer": "bm25"}}) as url:
        for _ in range(2):
            status, headers, got = http_headers(engine, "POST", f"{url}/{index_name}/_search", body)
            assert status == 200 and headers["x-esbridge-reranked"] == "false", got
            assert headers["x-esbridge-reason"] == "index_not_rerankable" and got["hits"] == own["hits"]
        status, headers, got = http_headers(engine, "POST", f"{url}/{missing}/_search", body)
        assert status == 404 and got["error"]["type"] == "index_not_found_exception"
        headers, got = _ndjson(engine, f"{url}/_msearch", [{"index": index_name}, body, {"index": missing}, body])
        assert headers["x-esbridge-reason"] == "index_not_rerankable,index_not_rerankable"
        assert got["responses"][0]["hits"] == own["hits"]
        assert got["responses"][1]["error"]["type"] == "index_not_found_exception"
    said = [r.getMessage() for r in caplog.records if "answered by the engine unreranked" in r.getMessage()]
    assert len(said) == 1 and index_name in said[0] and "no text field" in said[0]


def test_an_index_created_again_is_reranked_as_it_is_now(engine: Engine, index_name: str) -> None:
    """An index deleted and created again with other text fields while the server runs is reranked
    by what it is now: a reranker made before read the old index's fields and scored every hit 0
    (OpenSearch's REST tests, which create their indices again and again, found it).  And what the
    engine refuses of a reranked search is the engine's own error; the engine's _msearch
    parameters are taken."""
    docs = ["red fox", "red red red fox", "blue fox"]
    with running(engine, {index_name: {"scorer": "bm25"}}) as url:
        for field_name in ("title", "body"):
            engine.delete_index(index_name)
            engine.request("PUT", f"/{index_name}", body={"mappings": {"properties": {field_name: {"type": "text"}}}})
            for i, text in enumerate(docs):
                engine.request("PUT", f"/{index_name}/_doc/{i}", body={field_name: text})
            engine.refresh(index_name)
            body = {"query": {"match": {field_name: "red"}}}
            status, headers, got = http_headers(engine, "POST", f"{url}/{index_name}/_search", body)
            assert status == 200 and headers["x-esbridge-reranked"] == "true", got
            assert [h["_id"] for h in got["hits"]["hits"]] == ["1", "0"], got
            assert all(h["_score"] > 0 for h in got["hits"]["hits"]), got
        status, headers, got = http_headers(engine, "POST", f"{url}/{index_name}/_search", body, {"from": "-5"})
        assert status == 400 and headers["x-esbridge-reason"] == "bad_size_or_from"
        assert "[from] parameter cannot be negative" in got["error"]["reason"]
        headers, got = _ndjson(engine, f"{url}/{index_name}/_msearch?rest_total_hits_as_int=true"
                                        "&max_concurrent_searches=1", [{}, body, {}, {**body, "size": 1}])
    assert headers["x-esbridge-reranked"] == "true,true"
    assert [r["hits"]["total"] for r in got["responses"]] == [2, 2]
    assert [h["_id"] for h in got["responses"][0]["hits"]["hits"]] == ["1", "0"]
