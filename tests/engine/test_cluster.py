"""A real three-node OpenSearch cluster on loopback, indices of 3 shards with 1 replica.

One cluster for the module (:func:`esbridge.nodes.cluster.start_cluster`: three JVMs, each its
own node name, data directory and ports), deleted at the end.  On it:

* ingestion through ``esbridge index --shards 3 --replicas 1`` puts every document in, with
  both copies of every shard on different nodes;
* esbridge's BM25 from term vectors and summed per-shard statistics equals the engine's
  ``_score`` (``dfs_query_then_fetch``), and reranking (evolved, BMX) gives what it gives on a
  one-shard copy of the same documents;
* a node killed (SIGKILL) while queries run: every answer is the one given before the kill, or
  a one-line error, never another ranking;
* after a node missed updates and replayed them (its copies may count other deleted
  documents in their statistics than the other copies): reranking is the same run after run
  and BM25 still equals the engine's ``_score``, since every read of a query goes to the same
  copy of each shard;
* a node killed during ``esbridge index``, then the command run again: exactly the input's
  documents are in the index;
* the node in use killed, with every node's URL given (or one URL and sniffing): each query goes
  on through the other nodes at once with the ranking it had; an engine given only that node's
  URL fails, and then fails at once.

The nodes start with the C1 compiler only (``-XX:TieredStopAtLevel=1``), which halves the
cluster's start on a two-core machine.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import esbridge.ingest as ingest_mod
from esbridge.cli.main import main
from esbridge.engine.client import ConnectionOptions, Engine
from esbridge.engine.plan import run as run_plan
from esbridge.errors import EngineUnavailableError, EsbridgeError
from esbridge.features import analyze_query, build_input, fetch_raw
from esbridge.features.plugin import features_plugin_plan, fetch_with_plugin_plan
from esbridge.features.termvectors import ShardRouting
from esbridge.index import read_layout
from esbridge.ingest import ingest, read_jsonl
from esbridge.nodes import cluster as cluster_nodes
from esbridge.nodes import local
from esbridge.rerank import Reranker
from esbridge.scoring import get_scorer
from tests.cli import run
from tests.data import documents, judged_queries

CLUSTER = "esb-test-cluster"
FAST_START = ("-XX:TieredStopAtLevel=1",)
N_DOCS = 300
N_QUERIES = 15
REPLICATED = "esb-cluster-scifact"
SINGLE = "esb-cluster-scifact-1"
FAILOVER = "esb-cluster-failover"


@pytest.fixture(scope="module")
def cluster() -> Iterator[cluster_nodes.ClusterInfo]:
    if cluster_nodes.cluster_status(CLUSTER) is None:
        local.wipe(CLUSTER)  # a fresh cluster: what an interrupted run left is deleted
    info = cluster_nodes.start_cluster("opensearch", name=CLUSTER, nodes=3, heap="512m", java_options=FAST_START,
                               progress=False)
    yield info
    if not os.environ.get("ESBRIDGE_KEEP_NODES"):
        local.wipe(CLUSTER)


@pytest.fixture(scope="module")
def eng(cluster: cluster_nodes.ClusterInfo) -> Iterator[Engine]:
    """Connected to the first node, which is never the one killed."""
    engine = Engine.connect(ConnectionOptions(url=cluster.url, max_retries=4, backoff=0.2, timeout=60.0))
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first documents of the shipped SciFact sample, as a JSONL file."""
    path = tmp_path_factory.mktemp("cluster") / "corpus.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in documents(N_DOCS)))
    return path


@pytest.fixture(scope="module")
def indexed(eng: Engine, corpus: Path) -> tuple[int, str, str]:
    """The corpus put in with the command, 3 shards and 1 replica (its exit code and output), and
    the same documents in one shard without replica."""
    out, err = io.StringIO(), io.StringIO()
    eng.delete_index(REPLICATED)
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["index", "--url", eng.options.url, "--input", str(corpus), "--index", REPLICATED,
                     "--shards", "3", "--replicas", "1", "--no-semantic", "--quiet"])
    # replicas stay assigned to a node that is down for a while (it comes back in the tests below)
    eng.request("PUT", f"/{REPLICATED}/_settings", body={"index.unassigned.node_left.delayed_timeout": "5m"})
    eng.delete_index(SINGLE)
    ingest(eng, SINGLE, read_jsonl(corpus), shards=1, progress=False, strict=True)
    cluster_nodes.wait_for_health(eng.options.url, status="green", index=REPLICATED, timeout=60)
    return code, out.getvalue(), err.getvalue()


def _queries(n: int = N_QUERIES) -> list[str]:
    return [q["text"] for q in judged_queries(limit=n)]


def _ranking(resp: dict[str, Any]) -> list[tuple[str, float]]:
    return [(str(h["_id"]), float(h["_score"])) for h in resp["hits"]["hits"]]


def _same(a: list[tuple[str, float]], b: list[tuple[str, float]], rtol: float = 1e-9) -> bool:
    """The same documents in the same order with the same scores (ties may swap places)."""
    if len(a) != len(b):
        return False
    key = lambda pair: (-round(pair[1], 9), pair[0])  # noqa: E731
    return all(x[0] == y[0] and abs(x[1] - y[1]) <= rtol * max(abs(x[1]), 1e-12)
               for x, y in zip(sorted(a, key=key), sorted(b, key=key), strict=True))


def _bm25_parity(eng: Engine, index: str, queries: list[str]) -> int:
    """Assert that esbridge's BM25 of every hit equals the engine's ``_score``; return the hits checked."""
    layout = read_layout(eng, index)
    field = layout.subfield(layout.combined, "base")
    bm25 = get_scorer("bm25")
    params = bm25.make_params(k1=1.2, b=0.75, lucene_norms=True, k1_plus_one=eng.info.bm25_k1_plus_one)
    checked = 0
    for text in queries:
        terms = analyze_query(eng, index, layout, text, ["base"])
        hits = eng.search(index, {"size": 50, "query": {"match": {field: text}}},
                          params={"search_type": "dfs_query_then_fetch"})["hits"]["hits"]
        ids = [h["_id"] for h in hits]
        expected = np.array([h["_score"] for h in hits])
        fetched = fetch_raw(eng, index, layout, terms, ids, fields=[layout.combined])
        got = bm25.score(build_input(fetched, layout, terms, fields=[layout.combined]), params).scores
        rel = np.abs(got - expected) / np.abs(expected)
        assert rel.max() <= 1e-5, (f"{text!r}: hit {ids[int(rel.argmax())]} engine {expected[rel.argmax()]} "
                                   f"esbridge {got[rel.argmax()]}")
        checked += len(hits)
    return checked


def _kill(node: local.NodeInfo) -> None:
    os.kill(node.pid, signal.SIGKILL)


def test_three_nodes_form_one_cluster(cluster: cluster_nodes.ClusterInfo, eng: Engine,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    names = [f"{CLUSTER}-{i}" for i in (1, 2, 3)]
    assert [n.name for n in cluster.nodes] == names
    assert len({n.port for n in cluster.nodes}) == len({n.transport_port for n in cluster.nodes}) == 3
    assert len({n.home for n in cluster.nodes}) == 3
    for node in cluster.nodes:
        assert local.status(node.name) == node  # the node answering on its port is this process
    nodes = eng.request("GET", "/_cat/nodes", params={"format": "json", "h": "name,http_address"})
    assert sorted((n["name"], n["http_address"]) for n in nodes) == [(n.name, n.url.split("//")[1])
                                                                       for n in cluster.nodes]
    assert cluster_nodes.cluster_status(CLUSTER) == cluster
    code, out, _ = run(capsys, "engine", "status")
    assert code == 0 and all(f"{n}\topensearch 3.8.0\t" in out and f"cluster {CLUSTER}" in out for n in names)


def test_ingestion_puts_both_copies_of_every_shard_on_different_nodes(
        eng: Engine, indexed: tuple[int, str, str]) -> None:
    code, out, err = indexed
    assert code == 0, err
    assert f"{N_DOCS} of {N_DOCS} documents indexed" in out
    assert eng.count(REPLICATED) == N_DOCS
    copies = eng.request("GET", f"/_cat/shards/{REPLICATED}", params={"format": "json", "h": "shard,prirep,state,node"})
    assert len(copies) == 6 and all(c["state"] == "STARTED" for c in copies)
    for shard in ("0", "1", "2"):
        assert {c["prirep"] for c in copies if c["shard"] == shard} == {"p", "r"}
        assert len({c["node"] for c in copies if c["shard"] == shard}) == 2
    assert len({c["node"] for c in copies}) == 3


def test_bm25_equals_the_engine_score(eng: Engine, indexed: tuple[int, str, str]) -> None:
    assert _bm25_parity(eng, REPLICATED, _queries()) >= N_QUERIES * 20


@pytest.mark.parametrize("scorer", ["evolved", "bmx"])
@pytest.mark.parametrize("features", ["plugin", "term vectors"])
def test_rerank_equals_the_one_shard_copy(eng: Engine, indexed: tuple[int, str, str], scorer: str, features: str,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """On every node of the cluster runs esbridge's engine plugin; the rankings are the same read
    through it (the statistics of the replicated index gathered by the DFS phase) or with
    ``_mtermvectors``."""
    assert run_plan(features_plugin_plan(eng), eng), "every node of esbridge's cluster loads its plugin"
    monkeypatch.setenv("ESBRIDGE_FEATURES_PLUGIN", "on" if features == "plugin" else "off")
    replicated = Reranker(eng, REPLICATED, scorer=scorer, window=50)
    single = Reranker(eng, SINGLE, scorer=scorer, window=50)
    for text in _queries(10):
        a, b = _ranking(replicated.search(text, size=10)), _ranking(single.search(text, size=10))
        assert a and _same(a, b), f"{scorer} {text!r}:\n{a}\n{b}"
        # statistics read by the plugin in a search of the candidates (a rescore): the same ranking
        ids = [doc for doc, _ in b]
        assert replicated.rank(text, ids).ids == single.rank(text, ids).ids, f"{scorer} {text!r}"


def test_the_plugin_reads_index_wide_statistics_of_a_replicated_index(eng: Engine,
                                                                      indexed: tuple[int, str, str]) -> None:
    """Gathered by the DFS phase over the shards of the replicated index: equal to the sums of
    the shards' term-vector statistics."""
    layout = read_layout(eng, REPLICATED)
    shards = len(eng.request("GET", f"/_cat/shards/{REPLICATED}", params={"format": "json", "h": "shard"}))
    for text in _queries(5):
        query = analyze_query(eng, REPLICATED, layout, text, layout.channels)
        ids = [h["_id"] for h in eng.search(REPLICATED, {"size": 30, "_source": False,
                                                          "query": {"match": {layout.combined: text}}})["hits"]["hits"]]
        old = fetch_raw(eng, REPLICATED, layout, query, ids, fields=[layout.combined])
        new = run_plan(fetch_with_plugin_plan(REPLICATED, layout, query, ids, fields=[layout.combined],
                                              stats_query=query, stat_fields=[layout.combined],
                                              shards=max(2, shards // 2)), eng)
        assert new is not None
        for key, st in new.stats.items():
            ref = old.stats[key]
            assert (st.doc_count, st.sum_ttf) == (ref.doc_count, ref.sum_ttf), (text, key)
            assert all(ref.df.get(t, 0) == n for t, n in st.df.items()), (text, key)


def test_a_node_killed_mid_query_gives_the_same_answer_or_one_line(
        cluster: cluster_nodes.ClusterInfo, eng: Engine, indexed: tuple[int, str, str]) -> None:
    reranker = Reranker(eng, REPLICATED, scorer="evolved", window=50)
    layout = read_layout(eng, REPLICATED)
    field = layout.subfield(layout.combined, "base")

    def answers(text: str) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
        first = eng.search(REPLICATED, {"size": 20, "query": {"match": {field: text}}},
                           params={"search_type": "dfs_query_then_fetch"})
        return _ranking(reranker.search(text, size=10)), _ranking(first)

    queries = _queries(10)
    before = {text: answers(text) for text in queries}
    victim = cluster.nodes[2]
    killer = threading.Timer(0.3, _kill, args=(victim,))
    outcomes: list[tuple[float, str, str]] = []
    started = time.monotonic()
    killer.start()
    try:
        while time.monotonic() - started < 8.0:
            for text in queries:
                try:
                    got = answers(text)
                except EsbridgeError as err:
                    outcomes.append((time.monotonic() - started, "error", str(err)))
                    continue
                same = _same(got[0], before[text][0]) and _same(got[1], before[text][1], rtol=1e-6)
                outcomes.append((time.monotonic() - started, "same" if same else "different", text))
    finally:
        killer.join()
    assert local.status(victim.name) is None
    different = [o for o in outcomes if o[1] == "different"]
    assert not different, f"a different ranking during or after the kill: {different[:3]}"
    errors = [o[2] for o in outcomes if o[1] == "error"]
    assert all("\n" not in e for e in errors), errors
    after = [o for o in outcomes if o[0] > 1.0 and o[1] == "same"]
    assert len(after) >= len(queries), f"too few answers after the kill: {len(after)} ({len(errors)} errors)"
    health = eng.request("GET", "/_cluster/health")
    assert health["number_of_nodes"] == 2


def test_after_a_node_missed_updates_rankings_are_exact_and_repeatable(
        cluster: cluster_nodes.ClusterInfo, eng: Engine, corpus: Path, indexed: tuple[int, str, str]) -> None:
    """The third node is down (killed above, or here) while documents are updated; it comes back
    and its copies replay the updates.  The copies of a shard may now count different deleted
    documents in their statistics (each copy merges deletions away on its own schedule, which
    this cannot force; the counts are printed): BM25
    still equals the engine's ``_score`` and a fresh reranker ranks every query the same way,
    run after run, since every read of a query goes to the same copy of each shard."""
    lost = local.status(cluster.nodes[2].name)
    if lost is not None:
        _kill(lost)
        time.sleep(1.0)
    ingest(eng, REPLICATED, itertools.islice(read_jsonl(corpus), 0, N_DOCS, 5), progress=False, strict=True)
    # the live copies may merge the replaced versions away (as far as the lost copies' retention allows)
    eng.request("POST", f"/{REPLICATED}/_forcemerge", params={"only_expunge_deletes": "true"})
    back = cluster_nodes.start_cluster("opensearch", name=CLUSTER, nodes=3, heap="512m", java_options=FAST_START,
                               progress=False)
    assert [n.pid for n in back.nodes[:2]] == [n.pid for n in cluster.nodes[:2]]  # only the lost node started
    cluster_nodes.wait_for_health(eng.options.url, status="green", index=REPLICATED, timeout=90)
    eng.refresh(REPLICATED)
    deadline = time.monotonic() + 30
    while eng.request("GET", f"/{REPLICATED}/_stats/merge")["_all"]["total"]["merges"]["current"]:
        assert time.monotonic() < deadline, "merges did not finish"
        time.sleep(0.5)
    assert _bm25_parity(eng, REPLICATED, _queries(10)) >= 10 * 20
    for text in _queries(8):
        runs = [_ranking(Reranker(eng, REPLICATED, scorer="evolved", window=50).search(text, size=10))
                for _ in range(3)]
        assert all(_same(r, runs[0], rtol=0.0) for r in runs[1:]), f"{text!r}: {runs}"
    # what the copies' statistics were (a shard whose two copies differ is what the pinning is for)
    layout = read_layout(eng, REPLICATED)
    sub = layout.subfield(layout.combined, "base")
    per_copy: dict[int, list[int]] = {}
    for routing in ShardRouting(eng, REPLICATED).routings():
        for copy in eng.request("GET", f"/{REPLICATED}/_search_shards", params={"routing": routing})["shards"][0]:
            tv = eng.request("POST", f"/{REPLICATED}/_termvectors",
                             params={"routing": routing, "preference": f"_only_nodes:{copy['node']}"},
                             body={"doc": {layout.combined: ["cell"]}, "fields": [sub],
                                   "per_field_analyzer": {sub: "keyword"}, "field_statistics": True})
            per_copy.setdefault(int(copy["shard"]), []).append(
                tv["term_vectors"][sub]["field_statistics"]["doc_count"])
    print(f"documents counted by each copy of each shard: {per_copy}")


def test_a_node_killed_mid_ingest_then_a_rerun_leaves_exactly_the_input(
        cluster: cluster_nodes.ClusterInfo, eng: Engine, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    n = 2000  # four bulk requests of 500
    src = tmp_path / "docs.jsonl"
    src.write_text("".join(json.dumps({"_id": f"d{i}", "title": f"title {i}", "text": f"glucose reading {i}"}) + "\n"
                           for i in range(n)))
    index = "esb-cluster-ingest"
    eng.delete_index(index)
    victim = local.status(cluster.nodes[1].name)
    assert victim is not None
    real_send = ingest_mod._send
    sent = []

    def send(*args: Any, **kwargs: Any) -> Any:
        sent.append(1)
        if len(sent) == 2:  # while the second bulk request is on its way
            threading.Timer(0.05, _kill, args=(victim,)).start()
        return real_send(*args, **kwargs)

    monkeypatch.setattr(ingest_mod, "_send", send)
    argv = ["index", "--url", eng.options.url, "--input", str(src), "--index", index, "--shards", "3",
            "--replicas", "1", "--no-semantic", "--quiet"]
    code, out, err = run(capsys, *argv)
    assert len(sent) >= 2
    assert "Traceback" not in err and all(len(line) < 2000 for line in err.splitlines())
    assert code == 0 or err.strip(), "a failed run says why"
    time.sleep(0.5)
    assert local.status(victim.name) is None
    monkeypatch.setattr(ingest_mod, "_send", real_send)
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    assert f"{n} of {n} documents indexed" in out
    eng.refresh(index)
    assert eng.count(index) == n
    eng.delete_index(index)


def test_the_node_in_use_killed_every_query_goes_on_through_the_others_at_once(
        cluster: cluster_nodes.ClusterInfo, eng: Engine, corpus: Path) -> None:
    """Engines given the three nodes' URLs, and the first node's URL with sniffing; the first
    node, which they use in turn with the others (and an engine given only its URL uses alone), is
    killed between two queries.  The index is a fresh one, whose two copies of each shard hold the
    same documents and statistics, so any copy answers alike."""
    up = cluster_nodes.start_cluster("opensearch", name=CLUSTER, nodes=3, heap="512m", java_options=FAST_START,
                             progress=False)  # the nodes killed above start again
    eng.delete_index(FAILOVER)
    ingest(eng, FAILOVER, read_jsonl(corpus), shards=3, replicas=1, progress=False, strict=True)
    cluster_nodes.wait_for_health(up.url, status="green", nodes=3, index=FAILOVER, timeout=120)
    layout = read_layout(eng, FAILOVER)
    field = layout.subfield(layout.combined, "base")
    # the options' defaults (5 retries, back-off from 0.5 s), which took 17-20 s a query to fail
    engines = {"listed": Engine.connect(ConnectionOptions(urls=up.urls)),
               "sniffed": Engine.connect(ConnectionOptions(url=up.url, sniff=True))}
    rerankers = {name: Reranker(engine, FAILOVER, scorer="evolved", window=50) for name, engine in engines.items()}

    def answers(name: str, text: str) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
        first = engines[name].search(FAILOVER, {"size": 20, "query": {"match": {field: text}}},
                                     params={"search_type": "dfs_query_then_fetch"})
        return _ranking(rerankers[name].search(text, size=10)), _ranking(first)

    queries = _queries(10)
    before = {(name, text): answers(name, text) for name in engines for text in queries}
    after: dict[str, list[float]] = {name: [] for name in engines}
    try:
        for i, text in enumerate(queries):
            if i == 3:
                _kill(up.nodes[0])
                time.sleep(0.2)
            for name in engines:
                started = time.monotonic()
                got = answers(name, text)
                took = time.monotonic() - started
                if i >= 3:
                    after[name].append(took)
                assert _same(got[0], before[name, text][0]) and _same(got[1], before[name, text][1], rtol=1e-6), \
                    f"{name} {text!r}: {got} != {before[name, text]}"
                # a bound on failing over, not a benchmark: a query through a dead node used to spend
                # 17-20 s in retries before failing
                assert took < 5.0, f"{name} {text!r} took {took:.1f}s after the kill" if i >= 3 else ""
        assert local.status(up.nodes[0].name) is None
        print("seconds a query took after the kill: " + ", ".join(f"{name} at most {max(t):.2f}"
                                                                   for name, t in after.items()))
        # given only the dead node: an error once the retries are spent, then at once
        started = time.monotonic()
        with pytest.raises(EngineUnavailableError, match="cannot reach the engine"):
            eng.count(FAILOVER)
        first_failure = time.monotonic() - started
        started = time.monotonic()
        with pytest.raises(EngineUnavailableError, match="cannot reach the engine"):
            eng.count(FAILOVER)
        again = time.monotonic() - started
        print(f"given only the dead node: {first_failure:.2f}s to fail, then {again:.2f}s")
        assert again < min(1.0, first_failure / 2), (first_failure, again)
        engines["listed"].delete_index(FAILOVER)
    finally:
        for engine in engines.values():
            engine.close()
