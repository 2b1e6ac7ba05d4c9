"""The on-disk feature store against a real engine: filled by a build or by queries, validated
by each hit's ``_seq_no``/``_primary_term``, keyed by the index's UUID, shared by threads."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from esbridge.engine.client import Engine
from esbridge.features.build import build_store
from esbridge.features.cache import TermVectorCache
from esbridge.features.diskstore import DiskVectorStore
from esbridge.index import IndexLayout, create_index
from esbridge.index.facts import index_identity
from esbridge.rerank import Reranker
from tests.cli import run
from tests.engine.concurrency import race

# the client-side stores are filled only where features are read with _mtermvectors
pytestmark = pytest.mark.usefixtures("term_vectors_only")

DOCS = {f"d{i}": {"title": f"glucose {i}", "text": f"insulin glucose control number {i} " + "word " * (i % 7)}
        for i in range(30)}
QUERIES = ["insulin glucose", "glucose control", "number word"]


def _fill(engine: Engine, index: str, docs: dict[str, dict[str, str]], shards: int = 2) -> None:
    create_index(engine, index, IndexLayout(), shards=shards)
    for doc_id, src in docs.items():
        engine.request("PUT", f"/{index}/_doc/{doc_id}", body=src)
    engine.refresh(index)


def _ranked(rr: Reranker, query: str) -> list[tuple[str, float]]:
    return [(h["_id"], h["_score"]) for h in rr.search(query, size=30)["hits"]["hits"]]


def _fresh(engine: Engine, index: str, query: str) -> list[tuple[str, float]]:
    with Reranker(engine, index, scorer="evolved", window=30) as rr:
        return _ranked(rr, query)


def test_a_built_store_serves_every_candidate_and_scores_as_the_engine_read(
        engine: Engine, index_name: str, tmp_path: Path) -> None:
    _fill(engine, index_name, DOCS)
    report = build_store(engine, index_name, DiskVectorStore(tmp_path), page=7, progress=False)
    assert (report.documents, report.fetched, report.already) == (30, 30, 0)
    # a second build finds everything stored at its current version
    again = build_store(engine, index_name, DiskVectorStore(tmp_path), page=7, progress=False)
    assert (again.fetched, again.already) == (0, 30)
    # a new process, say: nothing in memory, everything on disk
    cache = TermVectorCache(disk=DiskVectorStore(tmp_path))
    with Reranker(engine, index_name, scorer="evolved", window=30, vector_cache=cache) as rr:
        got = _ranked(rr, "insulin glucose")
    assert cache.counts().misses == 0 and cache.counts().disk_hits == len(got) == 30
    assert got == _fresh(engine, index_name, "insulin glucose")


def test_vectors_written_by_queries_survive_a_restart(engine: Engine, index_name: str, tmp_path: Path) -> None:
    _fill(engine, index_name, DOCS, shards=1)
    with Reranker(engine, index_name, scorer="bm25", window=30, feature_store=tmp_path) as rr:
        first = _ranked(rr, "glucose control")
        assert rr.vector_cache is not None and rr.vector_cache.counts().disk_hits == 0
    cache = TermVectorCache(disk=tmp_path)
    with Reranker(engine, index_name, scorer="bm25", window=30, vector_cache=cache) as rr:
        assert _ranked(rr, "glucose control") == first
    assert cache.counts().disk_hits == 30 and cache.counts().misses == 0


def test_a_changed_document_is_fetched_again_and_written_back(engine: Engine, index_name: str, tmp_path: Path) -> None:
    _fill(engine, index_name, DOCS)
    build_store(engine, index_name, DiskVectorStore(tmp_path), progress=False)
    engine.request("PUT", f"/{index_name}/_doc/d3", body={"title": "glucose glucose glucose", "text": "insulin"},
                   params={"refresh": "true"})
    cache = TermVectorCache(disk=DiskVectorStore(tmp_path))
    with Reranker(engine, index_name, scorer="evolved", window=30, vector_cache=cache) as rr:
        got = _ranked(rr, "insulin glucose")
    assert got == _fresh(engine, index_name, "insulin glucose")
    assert cache.counts().misses == 1 and cache.counts().disk_hits == 29  # d3 only
    hit = engine.search(index_name, {"query": {"ids": {"values": ["d3"]}}, "seq_no_primary_term": True})
    current = (hit["hits"]["hits"][0]["_seq_no"], hit["hits"]["hits"][0]["_primary_term"])
    identity = index_identity(engine, index_name)[0]
    layout = IndexLayout()
    base = [layout.subfield(layout.combined, "base")]
    assert DiskVectorStore(tmp_path).part(identity).holds([("d3", *current), ("d3", 0, 1)], base) == [True, False]


def test_a_recreated_index_starts_its_own_store(engine: Engine, index_name: str, tmp_path: Path) -> None:
    _fill(engine, index_name, DOCS)
    build_store(engine, index_name, DiskVectorStore(tmp_path), progress=False)
    engine.delete_index(index_name)
    # same ids and, document by document, the same sequence numbers: other text
    other = {d: {"title": "cardiac output", "text": "insulin and the heart " + src["text"][::-1]}
             for d, src in DOCS.items()}
    _fill(engine, index_name, other)
    with Reranker(engine, index_name, scorer="evolved", window=30, feature_store=tmp_path) as rr:
        got = _ranked(rr, "insulin glucose")
        assert rr.vector_cache is not None and rr.vector_cache.counts().disk_hits == 0
    assert got == _fresh(engine, index_name, "insulin glucose")
    assert len([p for p in tmp_path.iterdir() if p.is_dir()]) == 2


def test_an_alias_swap_reads_the_new_index(engine: Engine, index_name: str, tmp_path: Path) -> None:
    first, second, alias = f"{index_name}-a", f"{index_name}-b", index_name
    try:
        _fill(engine, first, DOCS)
        _fill(engine, second, {d: {"title": "glucose", "text": src["text"].replace("insulin", "glucagon")}
                               for d, src in DOCS.items()})
        engine.request("POST", "/_aliases", body={"actions": [{"add": {"index": first, "alias": alias}}]})
        with Reranker(engine, alias, scorer="evolved", window=30, feature_store=tmp_path) as rr:
            before = _ranked(rr, "insulin glucose")
            engine.request("POST", "/_aliases", body={"actions": [{"remove": {"index": first, "alias": alias}},
                                                                  {"add": {"index": second, "alias": alias}}]})
            after = _ranked(rr, "insulin glucose")
        assert after == _fresh(engine, second, "insulin glucose") != before
    finally:
        engine.delete_index(first)
        engine.delete_index(second)


def test_threads_and_a_writer_share_a_store(engine: Engine, index_name: str, tmp_path: Path) -> None:
    _fill(engine, index_name, DOCS)
    build_store(engine, index_name, DiskVectorStore(tmp_path), progress=False)
    rr = Reranker(engine, index_name, scorer="evolved", window=30,
                  vector_cache=TermVectorCache(max_entries=5, disk=DiskVectorStore(tmp_path)))

    def search(i: int) -> None:
        rr.search(QUERIES[i % 3], size=5)

    def write(i: int) -> None:
        engine.request("PUT", f"/{index_name}/_doc/d{i % 30}", body={"title": "glucose", "text": f"insulin {i}"},
                       params={"refresh": "true"})

    errors = race(search, write, readers=4, reads=12)
    assert not errors, errors[:3]
    # once the writes stop and the statistics' refresh interval (the index's, 1 s) has passed,
    # what the shared store serves equals a fresh reading of the engine
    time.sleep(rr.store.stats.refresh_interval or 0.0)
    for q in QUERIES:
        assert _ranked(rr, q) == _fresh(engine, index_name, q)
    rr.close()


def test_cli_build_and_search_through_the_store(engine: Engine, index_name: str, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    _fill(engine, index_name, DOCS)
    url = engine.options.url
    code, out, _ = run(capsys, "features", "build", index_name, "--store", str(tmp_path), "--quiet", "--url", url)
    assert code == 0 and "30 documents read, 30 fetched" in out
    code, out, _ = run(capsys, "search", index_name, "insulin glucose", "--store", str(tmp_path), "--url", url)
    assert code == 0 and out.splitlines()[0].split()[:2] == ["rank", "esbridge"]
    code, out, err = run(capsys, "features", "build", index_name, "--fields", "nosuch", "--url", url)
    assert code != 0 and "nosuch" in err


def test_a_plain_index_is_built_and_read_through_the_store(engine: Engine, index_name: str, tmp_path: Path) -> None:
    engine.request("PUT", f"/{index_name}", body={
        "settings": {"index": {"number_of_shards": 2, "number_of_replicas": 0}},
        "mappings": {"properties": {"title": {"type": "text"}, "text": {"type": "text"}}}})
    for doc_id, src in DOCS.items():
        engine.request("PUT", f"/{index_name}/_doc/{doc_id}", body=src)
    engine.refresh(index_name)
    report = build_store(engine, index_name, DiskVectorStore(tmp_path), progress=False)
    assert (report.documents, report.fetched) == (30, 30)
    cache = TermVectorCache(disk=DiskVectorStore(tmp_path))
    with Reranker(engine, index_name, scorer="bm25", window=30, vector_cache=cache) as rr:
        got = _ranked(rr, "insulin glucose")
    with Reranker(engine, index_name, scorer="bm25", window=30) as rr:
        assert got == _ranked(rr, "insulin glucose")
    assert cache.counts().misses == 0 and cache.counts().disk_hits == 30


def test_a_document_written_after_the_search_is_scored_as_it_is_now_and_not_stored_under_the_old_key(
        engine: Engine, index_name: str, tmp_path: Path) -> None:
    """_mtermvectors reads documents in real time: a document changed between the first stage and
    the fetch comes back newer than its hit, so it must not be kept under the hit's version."""
    _fill(engine, index_name, DOCS, shards=1)
    response = engine.search(index_name, {"size": 30, "query": {"match": {"text": "insulin glucose"}},
                                           "seq_no_primary_term": True, "version": True})
    old = {h["_id"]: (h["_seq_no"], h["_primary_term"]) for h in response["hits"]["hits"]}
    engine.request("PUT", f"/{index_name}/_doc/d5", body={"title": "glucose", "text": "insulin insulin insulin"},
                   params={"refresh": "false"})
    with Reranker(engine, index_name, scorer="bm25", window=30, feature_store=tmp_path,
                  stats_refresh_interval=0) as rr:
        rr.rescore(response, "insulin glucose")
        assert rr.store.raced == 1
        identity = index_identity(engine, index_name)[0]
        subfields = [IndexLayout().subfield(IndexLayout().combined, "base")]
        cache = TermVectorCache(disk=DiskVectorStore(tmp_path))
        assert cache.get_many([(identity, "d5", *old["d5"])], subfields) == [None]
        assert cache.get_many([(identity, "d4", *old["d4"])], subfields)[0] is not None
        # the same stale response again: d5 is fetched again, every other document is served
        misses = rr.vector_cache.counts().misses if rr.vector_cache else -1
        rr.rescore(response, "insulin glucose")
        assert rr.vector_cache is not None and rr.vector_cache.counts().misses == misses + 1
        assert rr.store.raced == 2


def _df_of(rr: Reranker, prefix: str) -> int:
    """The cached document frequency of the one analysed query term starting with ``prefix``."""
    subfield = rr._layout.subfield(rr._layout.combined, "base")
    (df,) = [v for (sf, term), v in rr.store.stats.current().df.items() if sf == subfield and term.startswith(prefix)]
    return df


def test_statistics_are_refetched_at_most_once_per_refresh_interval(engine: Engine, index_name: str) -> None:
    _fill(engine, index_name, DOCS, shards=1)
    engine.request("PUT", f"/{index_name}/_settings", body={"index": {"refresh_interval": "3s"}})
    with Reranker(engine, index_name, scorer="bm25", window=30) as rr:
        rr.search("glucose", size=5)
        before = _df_of(rr, "gluc")
        engine.request("PUT", f"/{index_name}/_doc/new", body={"title": "glucose", "text": "glucose"},
                       params={"refresh": "true"})
        rr.search("glucose", size=5)
        assert rr.store.stats.refresh_interval == 3.0  # the index's own, read when first needed
        # within the interval: the same generation, the new document's term frequencies read all the same
        assert rr.store.stats.refreshes == 0 and _df_of(rr, "gluc") == before
        created = rr.store.stats.current().created
        rr.store.stats.current().created = created - 3.0  # the interval has passed
        rr.search("glucose", size=5)
        assert rr.store.stats.refreshes == 1 and _df_of(rr, "gluc") == before + 1
    with Reranker(engine, index_name, scorer="bm25", window=30, stats_refresh_interval=0) as rr:
        rr.search("glucose", size=5)
        engine.request("PUT", f"/{index_name}/_doc/new2", body={"title": "glucose", "text": "glucose"},
                       params={"refresh": "true"})
        rr.search("glucose", size=5)
        assert rr.store.stats.refreshes == 1 and _df_of(rr, "gluc") == before + 2


def test_a_recreated_index_is_noticed_at_once_whatever_the_refresh_interval(
        engine: Engine, index_name: str) -> None:
    _fill(engine, index_name, DOCS, shards=1)
    with Reranker(engine, index_name, scorer="bm25", window=30, stats_refresh_interval=3600) as rr:
        first = _ranked(rr, "insulin glucose")
        engine.request("DELETE", f"/{index_name}")
        _fill(engine, index_name, {k: {"title": v["title"], "text": v["text"] + " insulin"} for k, v in DOCS.items()},
              shards=1)
        again = _ranked(rr, "insulin glucose")
        assert rr.store.stats.refreshes == 1
    assert again != first and again == [(i, s) for i, s in _fresh_bm25(engine, index_name, "insulin glucose")]


def _fresh_bm25(engine: Engine, index: str, query: str) -> list[tuple[str, float]]:
    with Reranker(engine, index, scorer="bm25", window=30) as rr:
        return _ranked(rr, query)
