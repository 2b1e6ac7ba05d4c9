"""The on-disk feature store against a real engine: filled by a build or by queries, validated
by each hit's ``_seq_no``/``_primary_term``, keyed by the index's UUID, shared by threads."""

from __future__ import annotations

from pathlib import Path

import pytest

from esbridge.engine.client import Engine
from esbridge.features.build import build_store
from esbridge.features.cache import TermVectorCache, index_identity
from esbridge.features.diskstore import DiskVectorStore
from esbridge.index import IndexLayout, create_index
from esbridge.rerank import Reranker
from tests.cli import run
from tests.engine.concurrency import race

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
    # once the writes stop, what the shared store serves equals a fresh reading of the engine
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
