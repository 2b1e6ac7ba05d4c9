"""Vectors the engine keeps and searches itself (OpenSearch's k-NN plugin): one per passage
(nested, what ``esbridge index`` creates) or one per document."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from esbridge.engine.client import Engine
from esbridge.errors import ConfigurationError
from esbridge.hybrid import HybridSearcher, PipelineParams
from esbridge.index import IndexLayout, VectorField, create_index
from esbridge.index.definitions import ID_VALUES, document_vector_field
from esbridge.ingest import ingest
from esbridge.rerank import Reranker
from esbridge.semantic.engine_vectors import (
    EngineVectors,
    document_vector_models,
    open_document_vectors,
    open_vectors,
    vector_field_of,
)
from esbridge.semantic.models import load_encoder
from esbridge.semantic.text import document_text
from esbridge.semantic.vectors import VectorIndex
from tests.data import documents, judged_queries

N_DOCS = 150


@pytest.fixture(scope="module")
def encoder():  # type: ignore[no-untyped-def]
    # fp32: its vectors do not depend on the batch a text is embedded in (int8 models quantize each
    # batch's activations with that batch's own range), so the exact comparisons below hold
    return load_encoder("all-minilm-l6-v2")


def _docs() -> list[dict[str, str]]:
    return documents(N_DOCS)


def _knn_index(engine: Engine, encoder, passages: int | None) -> Iterator[str]:  # type: ignore[no-untyped-def]
    name = f"esb-test-knn-{uuid.uuid4().hex[:8]}"
    report = ingest(engine, name, _docs(), shards=2, progress=False, strict=True,
                    vector=VectorField(dim=encoder.dim, model=encoder.name, passages=passages))
    assert report.indexed == N_DOCS
    yield name
    engine.delete_index(name)


@pytest.fixture
def knn_index(knn_engine: Engine, encoder) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """One nested vector per passage, as ``esbridge index`` creates it."""
    yield from _knn_index(knn_engine, encoder, encoder.passage_tokens)


@pytest.fixture
def knn_doc_index(knn_engine: Engine, encoder) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """One vector per document (an index created without passages)."""
    yield from _knn_index(knn_engine, encoder, None)


def test_engine_knn_over_passages_equals_exact_search_over_the_same_passages(  # type: ignore[no-untyped-def]
        knn_engine: Engine, knn_index: str, encoder, monkeypatch: pytest.MonkeyPatch) -> None:
    from esbridge.semantic import engine_vectors

    # small bulk requests: the fill writes its passages in many, each document's in one
    monkeypatch.setattr(engine_vectors, "BULK_VECTORS", 50)
    sent: list[int] = []
    send = EngineVectors._send
    monkeypatch.setattr(EngineVectors, "_send", lambda self, lines: sent.append(len(lines)) or send(self, lines))
    ev = open_vectors(knn_engine, knn_index, encoder, fields=("title", "text"), progress=False)
    assert isinstance(ev, EngineVectors) and ev.passages == encoder.passage_tokens and len(ev) == N_DOCS
    assert len(sent) > 3 and sum(sent) == 2 * N_DOCS
    mapping = knn_engine.request("GET", f"/{knn_index}/_mapping")[knn_index]["mappings"]["properties"]
    assert mapping["esbridge_vector"]["type"] == "nested"
    assert mapping["esbridge_vector"]["properties"]["vector"]["type"] == "knn_vector"
    # esbridge's own exact search over the passages it would keep on disk: the reference
    exact = VectorIndex.open(knn_engine, knn_index, encoder, fields=("title", "text"), progress=False)
    assert exact.windows and len(exact.vectors) > N_DOCS  # long documents have several passages
    ids = [d["_id"] for d in _docs()]
    for q in judged_queries(limit=8):
        qv = encoder.encode_queries([q["text"]])[0]
        want = exact.search(qv, 10)
        got = ev.search(qv, 10)
        assert got.ids == want.ids, q["text"]  # documents, each once, by their best passage
        np.testing.assert_allclose(got.scores, want.scores, atol=2e-6)
        # the engine's passages are esbridge's: first, and closest to the query
        np.testing.assert_allclose(ev.vectors_of(ids[:5]), exact.vectors_of(ids[:5]), atol=1e-7)
        np.testing.assert_allclose(ev.vectors_of(ids[:5], qv), exact.vectors_of(ids[:5], qv), atol=1e-7)
        np.testing.assert_allclose(ev.similarity(qv, ids[:5]), exact.similarity(qv, ids[:5]), atol=1e-6)
        _among_agrees(ev, exact, qv, ids, want.ids)
    assert np.isnan(ev.similarity(qv, ["no-such-doc"])[0])
    with pytest.raises(ConfigurationError, match="semantic depth k must be at most 10000"):
        ev.search(qv, 10_001)


def _among_agrees(ev: EngineVectors, exact: VectorIndex, qv: np.ndarray, ids: list[str],
                  top: list[str]) -> None:
    """A search of some documents only (the second semantic pass over the first fusion's documents):
    the engine's filtered kNN equals the exact cosines of those documents' passages."""
    # some of the top (not its first three), some far below it, one id twice and one without a document
    far = [d for d in ids if d not in top][-30:]
    among = [*top[3:], *far, far[-1], "no-such-doc"]
    unique = [d for d in dict.fromkeys(among) if d != "no-such-doc"]
    cosines = exact.similarity(qv, unique)
    order = np.lexsort((np.arange(len(cosines)), -cosines))[:10]
    got = ev.search(qv, 10, among=among)
    assert got.ids == [unique[i] for i in order] and not set(got.ids) & set(top[:3])
    np.testing.assert_allclose(got.scores, cosines[order], atol=2e-6)
    assert exact.search(qv, 10, among=among).ids == got.ids
    # asked for more than there are: every one of them that has a vector, once
    assert sorted(ev.search(qv, 100, among=among).ids) == sorted(unique)
    assert ev.search(qv, 10, among=[]).ids == []


def test_engine_knn_top_k_equals_exact_cosine_top_k(knn_engine: Engine, knn_doc_index: str, encoder) -> None:  # type: ignore[no-untyped-def]
    knn_index = knn_doc_index
    ev = open_vectors(knn_engine, knn_index, encoder, fields=("title", "text"), progress=False)
    assert isinstance(ev, EngineVectors) and ev.passages is None
    assert isinstance(ev, EngineVectors) and len(ev) == N_DOCS
    docs = _docs()
    matrix = encoder.encode([document_text(d, ("title", "text")) for d in docs])
    ids = [d["_id"] for d in docs]
    for q in judged_queries(limit=8):
        qv = encoder.encode([q["text"]])[0]
        sims = matrix @ qv
        order = np.lexsort((np.arange(len(ids)), -sims))[:10]
        got = ev.search(qv, 10)
        assert got.ids == [ids[i] for i in order], q["text"]
        np.testing.assert_allclose(got.scores, sims[order], atol=2e-6)
    # the vectors the engine holds are the encoder's
    np.testing.assert_allclose(ev.vectors_of(ids[:3]), matrix[:3], atol=1e-7)
    sim = ev.similarity(qv, [ids[0], "no-such-doc"])
    assert sim[0] == pytest.approx(float(matrix[0] @ qv), abs=1e-6) and np.isnan(sim[1])


def test_reindexed_and_new_documents_get_vectors_of_their_text(knn_engine: Engine, knn_index: str,  # type: ignore[no-untyped-def]
                                                                encoder) -> None:
    ev = EngineVectors.open(knn_engine, knn_index, encoder, fields=("title", "text"), progress=False)
    long_text = " ".join(["Batcher's bitonic sorter merges runs of keys in parallel."] * 20)
    changed = {"_id": _docs()[0]["_id"], "title": "Sorting networks", "text": long_text}
    ingest(knn_engine, knn_index, [changed, {"_id": "new", "text": "Quicksort partitions around a pivot."},
                                   {"_id": "empty", "text": ""}], progress=False)
    assert ev.refresh(force=True)
    assert len(ev) == N_DOCS + 1  # the empty document has no vector and is never a semantic hit
    window_encoder = encoder.at_length(ev.passages)
    want = window_encoder.encode_ids(window_encoder.windows([document_text(changed, ("title", "text"))])[0])
    assert len(want) > 1  # several passages, each the one of the new text
    # the vectors are not in the stored _source; the engine's doc values hold them exactly
    source = knn_engine.request("GET", f"/{knn_index}/_doc/{changed['_id']}")["_source"]
    assert set(source) == {"title", "text"}
    np.testing.assert_allclose(ev.passages_of([changed["_id"]])[changed["_id"]], want, atol=1e-7)
    top = ev.search(encoder.encode(["how does quicksort partition"])[0], 2)
    assert top.ids[0] == "new"
    assert not ev.refresh(force=True)  # nothing left to fill
    # another client, which never filled them, finds nothing pending either: the document without text
    # is not waiting for a vector (before, it stayed "pending" in every client but the one that filled)
    other = EngineVectors.open(knn_engine, knn_index, encoder, fields=("title", "text"), progress=False, build=False)
    assert other.pending == 0 and len(other) == N_DOCS + 1
    ingest(knn_engine, knn_index, [{"_id": "later", "text": "Heapsort builds a heap first."}], progress=False)
    assert not other.refresh(force=True, build=False) and other.pending == 1  # a document with text waits


def test_hybrid_pipeline_uses_the_engine_vectors(knn_engine: Engine, knn_index: str, encoder) -> None:  # type: ignore[no-untyped-def]
    with HybridSearcher(knn_engine, knn_index, PipelineParams(model=encoder.name), progress=False) as hs:
        assert isinstance(hs.vectors, EngineVectors)
        # the vectors were written by updates, which rebuild a document from its _source: they kept the ids
        assert knn_engine.count(knn_index, {"bool": {"must_not": {"exists": {"field": ID_VALUES}}}}) == 0
        q = judged_queries(limit=1)[0]["text"]
        # the engine keeps the passages esbridge would keep on disk: exact cosine over the same
        exact = VectorIndex.open(knn_engine, knn_index, encoder, fields=("title", "text"), progress=False)
        assert hs.semantic(q, depth=20).ids == exact.search(exact.embed_query(q), 20).ids
        resp = hs.search(q, size=5)
        assert len(resp["hits"]["hits"]) == 5
        assert all("esbridge_vector" not in (h.get("_source") or {}) for h in resp["hits"]["hits"])
        # VectorIndex.open scrolled the index above: its documents must still be readable (with
        # _source with the first stage, and fetched afterwards), and never show the vector field
        for window in (10, 1000):
            hits = hs.reranker.search(q, size=3, window=window)["hits"]["hits"]
            assert all(set(h["_source"]) == {"title", "text"} for h in hits), window
            # a reranker that has not yet seen the vector field (asks for all of _source) drops it too
            with Reranker(knn_engine, knn_index, window=window) as fresh:
                for _ in range(2):
                    hits = fresh.search(q, size=3)["hits"]["hits"]
                    assert all(set(h["_source"]) == {"title", "text"} for h in hits), window


def test_an_engine_refuses_a_vector_field_of_a_type_it_cannot_search(engine: Engine, index_name: str) -> None:
    kind = engine.vector_search()
    # OpenSearch without the k-NN plugin and Elasticsearch 7.10 search no vectors; Elasticsearch 8's
    # are dense_vector
    assert kind == ("dense_vector" if engine.distribution == "elasticsearch" and engine.info.version[0] >= 8
                    else None)
    with pytest.raises(ConfigurationError, match="has no knn_vector vector search") as err:
        create_index(engine, index_name, IndexLayout(), vector=VectorField(dim=384, model="all-minilm-l6-v2"))
    if kind is not None:
        assert "VectorField(type='dense_vector')" in str(err.value)
    assert not engine.index_exists(index_name)


def test_cli_index_refuses_vectors_in_an_engine_without_vector_search(engine: Engine, index_name: str, tmp_path,  # type: ignore[no-untyped-def]
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    from esbridge.cli.main import main

    src = tmp_path / "docs.jsonl"
    src.write_text("".join(json.dumps(d) + "\n" for d in _docs()[:5]))
    argv = ["index", "--url", engine.options.url, "--input", str(src), "--index", index_name, "--vectors", "engine",
            "--no-store", "--quiet"]
    if engine.vector_search() is None:
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "--vectors engine:" in err and "has no vector search" in err and err.count("\n") == 1, err
        assert not engine.index_exists(index_name)  # refused before anything was written
        # by default the vectors go on disk here, with one warning naming the cost
        assert main(argv[:argv.index("--vectors")] + argv[argv.index("--vectors") + 2:]) == 0
        err = capsys.readouterr().err
        assert err.count("has no vector search") == 1 and "every client machine embeds every document" in err, err
        assert "esbridge_vector" not in engine.request("GET", f"/{index_name}/_mapping")[index_name]["mappings"].get(
            "properties", {})
    else:  # Elasticsearch 8: the passages go into a nested dense_vector field
        assert main(argv) == 0, capsys.readouterr().err
        props = engine.request("GET", f"/{index_name}/_mapping")[index_name]["mappings"]["properties"]
        assert props["esbridge_vector"]["properties"]["vector"]["type"] == "dense_vector"
        assert "kept and searched by the engine (kNN over passages of 64 word pieces)" in capsys.readouterr().out


@pytest.mark.dense_vector
def test_elasticsearch_dense_vector_over_passages_equals_exact_search(engine: Engine, encoder) -> None:  # type: ignore[no-untyped-def]
    name = f"esb-test-dv-{uuid.uuid4().hex[:8]}"
    report = ingest(engine, name, _docs(), shards=2, progress=False, strict=True,
                    vector=VectorField(dim=encoder.dim, model=encoder.name, passages=encoder.passage_tokens,
                                       type="dense_vector"))
    assert report.indexed == N_DOCS
    try:
        mapping = engine.request("GET", f"/{name}/_mapping")[name]["mappings"]["properties"]["esbridge_vector"]
        assert mapping["type"] == "nested" and mapping["properties"]["vector"]["type"] == "dense_vector"
        ev = open_vectors(engine, name, encoder, fields=("title", "text"), progress=False)
        assert isinstance(ev, EngineVectors) and ev.passages == encoder.passage_tokens and len(ev) == N_DOCS
        # the vectors were written by updates, which rebuild a document from its _source: they kept the ids
        assert engine.count(name, {"bool": {"must_not": {"exists": {"field": ID_VALUES}}}}) == 0
        exact = VectorIndex.open(engine, name, encoder, fields=("title", "text"), progress=False)
        ids = [d["_id"] for d in _docs()]
        for q in judged_queries(limit=8):
            qv = encoder.encode_queries([q["text"]])[0]
            want, got = exact.search(qv, 10), ev.search(qv, 10)
            assert got.ids == want.ids, q["text"]
            np.testing.assert_allclose(got.scores, want.scores, atol=2e-6)
            np.testing.assert_allclose(ev.vectors_of(ids[:5], qv), exact.vectors_of(ids[:5], qv), atol=1e-7)
            np.testing.assert_allclose(ev.similarity(qv, ids[:5]), exact.similarity(qv, ids[:5]), atol=1e-6)
            _among_agrees(ev, exact, qv, ids, want.ids)
        # the hybrid pipeline's semantic strategy searches the engine's vectors
        with HybridSearcher(engine, name, PipelineParams(model=encoder.name), progress=False) as hs:
            assert isinstance(hs.vectors, EngineVectors)
            q = judged_queries(limit=1)[0]["text"]
            assert hs.semantic(q, depth=20).ids == exact.search(exact.embed_query(q), 20).ids
            hits = hs.search(q, size=5)["hits"]["hits"]
            assert len(hits) == 5 and all("esbridge_vector" not in (h.get("_source") or {}) for h in hits)
    finally:
        engine.delete_index(name)


def test_cli_index_puts_the_vectors_in_the_engine(knn_engine: Engine, tmp_path,  # type: ignore[no-untyped-def]
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from esbridge.cli.main import main

    src = tmp_path / "docs.jsonl"
    src.write_text("".join(json.dumps(d) + "\n" for d in _docs()[:20]))
    name = f"esb-test-knncli-{uuid.uuid4().hex[:8]}"
    try:
        assert main(["index", "--url", knn_engine.options.url, "--input", str(src), "--index", name,
                     "--vectors", "engine", "--quiet"]) == 0
        out = capsys.readouterr().out
        assert f"semantic index: 20 document vectors (bge-small-en-v1.5-q) for {name!r}, kept and searched by the " \
               "engine (kNN over passages of 64 word pieces)" in out
        mapping = knn_engine.request("GET", f"/{name}/_mapping")[name]["mappings"]
        assert mapping["properties"]["esbridge_vector"]["type"] == "nested"
        assert mapping["properties"]["esbridge_vector"]["properties"]["vector"]["type"] == "knn_vector"
        has = {"nested": {"path": "esbridge_vector", "query": {"exists": {"field": "esbridge_vector.vector"}}}}
        assert knn_engine.count(name, has) == 20
        # by default (--vectors auto) the same; with --vectors disk a new index without the field
        assert main(["index", "--url", knn_engine.options.url, "--input", str(src), "--index", f"{name}-auto",
                     "--no-store", "--quiet"]) == 0
        assert "kept and searched by the engine" in capsys.readouterr().out
        assert main(["index", "--url", knn_engine.options.url, "--input", str(src), "--index", f"{name}-disk",
                     "--no-store", "--quiet", "--vectors", "disk"]) == 0
        assert "kept by esbridge on disk (exact search; each client machine embeds every document itself)" \
            in capsys.readouterr().out
        props = knn_engine.request("GET", f"/{name}-disk/_mapping")[f"{name}-disk"]["mappings"]["properties"]
        assert "esbridge_vector" not in props
    finally:
        knn_engine.delete_index(name)
        knn_engine.delete_index(f"{name}-disk")
        knn_engine.delete_index(f"{name}-auto")


def test_a_client_keeps_no_state_that_matters(knn_engine: Engine, knn_index: str, encoder,  # type: ignore[no-untyped-def]
                                              tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two clients with different ESBRIDGE_HOMEs rank alike, and the second writes nothing there: the
    vectors, features and statistics are the engine's, the fusion weights are in the index's mapping."""
    params = PipelineParams(model=encoder.name)
    queries = [q["text"] for q in judged_queries(limit=5)]

    def answers() -> list[list[tuple[str, float]]]:
        vectors = EngineVectors.open(knn_engine, knn_index, encoder, fields=("title", "text"))
        with HybridSearcher(knn_engine, knn_index, params, vectors=vectors) as hs:
            return [[(h["_id"], h["_score"]) for h in hs.search(q, size=10)["hits"]["hits"]] for q in queries]

    first = answers()
    home = tmp_path / "another-home"
    monkeypatch.setenv("ESBRIDGE_HOME", str(home))
    assert answers() == first
    assert not home.exists() or [p for p in home.rglob("*") if p.is_file()] == []


def _quantized_agrees(engine: Engine, encoder, kind: str, quantization: str,  # type: ignore[no-untyped-def]
                      oversample: float | None = None, rescored: float | None = None,
                      overlap_at_least: float = 0.9, top_at_least: float = 1.0) -> None:
    """An index whose vectors the engine quantizes finds the exact search's top document (for the
    share ``top_at_least`` of the queries), and of its top 10 on average ``overlap_at_least`` of the
    exact search's.  Without
    rescoring (``rescored`` ``None``) their scores are within 0.02 of the exact cosines; with it, each
    is the float cosine of one of the document's passages (never above its best) and at least the
    share ``rescored`` of them that of its best."""
    name = f"esb-test-{quantization}-{uuid.uuid4().hex[:8]}"
    field = VectorField(dim=encoder.dim, model=encoder.name, passages=encoder.passage_tokens, type=kind,
                        quantization=quantization, oversample=oversample)
    report = ingest(engine, name, _docs(), shards=1, progress=False, strict=True, vector=field)
    assert report.indexed == N_DOCS
    try:
        assert (vector_field_of(engine, name) or {}).get("quantization") == quantization
        ev = open_vectors(engine, name, encoder, fields=("title", "text"), progress=False)
        assert isinstance(ev, EngineVectors) and len(ev) == N_DOCS
        exact = VectorIndex.open(engine, name, encoder, fields=("title", "text"), progress=False)
        overlap, same, top = [], [], []
        for q in judged_queries(limit=8):
            qv = encoder.encode_queries([q["text"]])[0]
            want, got = exact.search(qv, 10), ev.search(qv, 10)
            overlap.append(len(set(got.ids) & set(want.ids)) / 10)
            top.append(got.ids[0] == want.ids[0])
            cosines = exact.similarity(qv, got.ids)
            if rescored is None:
                np.testing.assert_allclose(got.scores, cosines, atol=0.02)  # approximate cosines
            else:
                assert np.all(got.scores <= cosines + 1e-5), (got.scores, cosines)
                same.extend(np.abs(got.scores - cosines) < 1e-5)
        assert np.mean(top) >= top_at_least, top
        assert np.mean(overlap) >= overlap_at_least, overlap
        if rescored is not None:
            assert np.mean(same) >= rescored, np.mean(same)
    finally:
        engine.delete_index(name)


def test_int8_quantized_vectors_in_opensearch(knn_engine: Engine, encoder) -> None:  # type: ignore[no-untyped-def]
    _quantized_agrees(knn_engine, encoder, "knn_vector", "int8")


@pytest.mark.dense_vector
def test_int8_quantized_vectors_in_elasticsearch(engine: Engine, encoder) -> None:  # type: ignore[no-untyped-def]
    _quantized_agrees(engine, encoder, "dense_vector", "int8")


@pytest.mark.dense_vector
def test_bbq_vectors_rescored_in_elasticsearch(engine: Engine, encoder) -> None:  # type: ignore[no-untyped-def]
    # one bit a dimension finds the neighbours and the floats kept beside score them again; a document
    # whose best passage the graph search did not gather is scored by the passage it did
    _quantized_agrees(engine, encoder, "dense_vector", "bbq", oversample=3, rescored=0.5,
                      overlap_at_least=0.7, top_at_least=0.6)


@pytest.fixture
def knn_whole_index(knn_engine: Engine, encoder) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """Passages, and whole-document fields of the encoder's model and of the shipped one."""
    name = f"esb-test-knn-whole-{uuid.uuid4().hex[:8]}"
    shipped = load_encoder(PipelineParams().model)
    create_index(knn_engine, name, IndexLayout(), shards=2,
                 vector=VectorField(dim=encoder.dim, model=encoder.name, passages=encoder.passage_tokens),
                 document_vectors=[document_vector_field(encoder.name, encoder.dim),
                                   document_vector_field(shipped.name, shipped.dim)])
    assert ingest(knn_engine, name, _docs(), create=False, progress=False, strict=True).indexed == N_DOCS
    yield name
    knn_engine.delete_index(name)


def test_whole_document_vectors_in_the_engine_equal_the_exact_search(  # type: ignore[no-untyped-def]
        knn_engine: Engine, knn_whole_index: str, encoder) -> None:
    assert document_vector_models(knn_engine, knn_whole_index) == [encoder.name, PipelineParams().model]
    dv = open_document_vectors(knn_engine, knn_whole_index, encoder, fields=("title", "text"), progress=False)
    assert isinstance(dv, EngineVectors) and dv.passages is None and len(dv) == N_DOCS
    # the passages' field, filled after: each update rebuilds the document from its _source, which
    # holds no vector; the whole-document vectors are written again with the passages
    pv = open_vectors(knn_engine, knn_whole_index, encoder, fields=("title", "text"), progress=False)
    assert isinstance(pv, EngineVectors) and pv.passages and len(pv) == N_DOCS
    dv.refresh(force=True, build=False)
    assert len(dv) == N_DOCS and dv.pending == 0
    assert dv.field == document_vector_field(encoder.name, encoder.dim).name
    docs = _docs()
    whole = encoder.encode([document_text(d, ("title", "text")) for d in docs])
    got = dv.passages_of([d["_id"] for d in docs[:5]])
    for i, d in enumerate(docs[:5]):  # one vector per document, the model's embedding of its whole text
        np.testing.assert_allclose(got[d["_id"]], whole[i:i + 1], atol=1e-5)
    source = knn_engine.request("GET", f"/{knn_whole_index}/_doc/{docs[0]['_id']}")["_source"]
    assert set(source) == {"title", "text"}  # the vectors are not in the stored source
    q = judged_queries(limit=1)[0]["text"]
    qv = dv.embed_query(q)
    cos = whole @ qv
    want = [docs[i]["_id"] for i in np.argsort(-cos, kind="stable")[:10]]
    assert dv.search(qv, 10).ids == want
    # a re-indexed document loses both; each field's fill gives it back its own, keeping the other's
    changed = {"_id": docs[1]["_id"], "title": "Sorting networks", "text": "Batcher's bitonic sorter."}
    ingest(knn_engine, knn_whole_index, [changed], create=False, progress=False, strict=True)
    assert pv.refresh(force=True) and dv.refresh(force=True)
    pv.refresh(force=True, build=False)
    assert len(pv) == len(dv) == N_DOCS and pv.pending == dv.pending == 0
    np.testing.assert_allclose(dv.passages_of([changed["_id"]])[changed["_id"]],
                               encoder.encode([document_text(changed, ("title", "text"))]), atol=1e-5)
    window = encoder.at_length(pv.passages)
    np.testing.assert_allclose(pv.passages_of([changed["_id"]])[changed["_id"]], window.encode_ids(
        window.windows([document_text(changed, ("title", "text"))])[0]), atol=1e-5)


def test_the_pipeline_fuses_the_ensembles_whole_document_lists(  # type: ignore[no-untyped-def]
        knn_engine: Engine, knn_whole_index: str, encoder) -> None:
    from esbridge.hybrid.fusion import fuse

    other = PipelineParams().model
    params = PipelineParams(model=encoder.name, window=50, semantic_depth=50, w_document=1.0, ensemble=(other,),
                            calibration={"queries": 20}, document_feedback=3, document_feedback_share=0.5)
    whole = ("document", f"document {other}")
    with HybridSearcher(knn_engine, knn_whole_index, params, progress=False) as hs:
        assert isinstance(hs.document_vectors, EngineVectors)
        assert isinstance(hs.ensemble_vectors(other), EngineVectors)
        eff = hs.calibration().effectiveness  # type: ignore[union-attr]
        assert {"document", f"document {other}"} <= set(eff)  # measured with the other strategies
        weights = hs.fusion_weights()
        assert weights["document"] == pytest.approx(weights["semantic"])
        assert weights[f"document {other}"] == pytest.approx(
            weights["semantic"] * (eff[f"document {other}"] / eff["document"]) ** params.ensemble_sharpness)
        q = judged_queries(limit=1)[0]["text"]
        res = hs.run(q)
        ev = hs.ensemble_vectors(other)
        assert list(res.lists[f"document {other}"].ids) == ev.search(ev.embed_query(q), 50).ids
        # the semantic feedback reads the passages' vectors, which the whole-document fills kept
        lists = {"semantic": res.lists["semantic_feedback"], "lexical": res.lists["lexical"],
                 "keyword": res.lists["keyword"], **{k: res.lists[k] for k in whole}}
        ids, scores, _ = fuse(lists, weights, params.fusion)
        # each whole-document list ran again in the engine, from its model's vectors of that fusion's top 3
        margins = np.maximum(scores[:3] - scores[3], 0)
        for k, vecs in (("document", hs.document_vectors), (f"document {other}", ev)):
            moved = vecs.embed_query(q) + params.document_beta * (
                vecs.vectors_of(ids[:3]) * (margins / margins.sum())[:, None]).sum(axis=0)
            expected = vecs.search((moved / np.linalg.norm(moved)).astype(np.float32), 50)
            assert list(res.lists[f"{k} feedback"].ids) == expected.ids
            lists[f"{k} feedback"] = res.lists[f"{k} feedback"]
        # both models' vectors of the feedback documents come in one request, the same as each alone
        from esbridge.semantic.engine_vectors import vectors_of_many

        sent: list[str] = []
        request = knn_engine.request

        def counted(method: str, path: str, *args: Any, **kwargs: Any) -> Any:
            sent.append(path)
            return request(method, path, *args, **kwargs)

        knn_engine.request = counted  # type: ignore[method-assign]
        try:
            together = vectors_of_many([hs.document_vectors, ev], ids[:3])
        finally:
            knn_engine.request = request  # type: ignore[method-assign]
        assert len(sent) == 1, sent
        for got, vecs in zip(together, (hs.document_vectors, ev), strict=True):
            assert got.shape == (3, vecs.encoder.dim)
            np.testing.assert_array_equal(got, vecs.vectors_of(ids[:3]))
        halves = {**weights, **{k: weights[k] / 2 for k in whole}, **{f"{k} feedback": weights[k] / 2 for k in whole}}
        ids, scores, _ = fuse(lists, halves, params.fusion)
        assert ids == res.ids
        np.testing.assert_allclose(scores, res.scores)


def test_esbridge_index_with_the_ensemble_pipeline_keeps_every_vector_in_the_engine(  # type: ignore[no-untyped-def]
        knn_engine: Engine, tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.cli import run

    name = f"esb-test-knn-cli-{uuid.uuid4().hex[:8]}"
    url = knn_engine.options.url
    docs = 30
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in _docs()[:docs]))
    try:
        code, out, err = run(capsys, "index", "--input", str(corpus), "--index", name, "--pipeline", "ensemble",
                             "--vectors", "engine", "--quiet", "--url", url)
        assert code == 0, err
        shipped = PipelineParams().model
        for model in (shipped, "e5-small-v2-q", "all-minilm-l6-v2-q"):
            assert f"whole documents: {docs} vectors ({model}) for {name!r}, in the engine" in out
        assert document_vector_models(knn_engine, name) == [shipped, "e5-small-v2-q", "all-minilm-l6-v2-q"]
        with HybridSearcher(knn_engine, name, PipelineParams.preset("ensemble"), build=False) as hs:
            assert isinstance(hs.vectors, EngineVectors) and len(hs.vectors) == docs
            assert isinstance(hs.document_vectors, EngineVectors) and len(hs.document_vectors) == docs
            for m in ("e5-small-v2-q", "all-minilm-l6-v2-q"):
                ev = hs.ensemble_vectors(m)
                assert isinstance(ev, EngineVectors) and len(ev) == docs and ev.pending == 0
        code, out, err = run(capsys, "search", name, "blood glucose in diabetes", "--hybrid", "--pipeline", "ensemble",
                             "--size", "3", "--json", "--url", url)
        assert code == 0, err
        weights = json.loads(out)["_esbridge"]["pipeline"]["weights"]
        assert {"document", "document e5-small-v2-q", "document all-minilm-l6-v2-q"} <= set(weights)
    finally:
        knn_engine.delete_index(name)
