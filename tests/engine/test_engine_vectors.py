"""Vectors the engine keeps and searches itself (OpenSearch's k-NN plugin)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import numpy as np
import pytest

from esbridge.engine.client import Engine
from esbridge.errors import ConfigurationError
from esbridge.hybrid import HybridSearcher, PipelineParams
from esbridge.index import IndexLayout, VectorField, create_index
from esbridge.ingest import ingest
from esbridge.rerank import Reranker
from esbridge.semantic.engine_vectors import EngineVectors, open_vectors
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


@pytest.fixture
def knn_index(knn_engine: Engine, encoder) -> Iterator[str]:  # type: ignore[no-untyped-def]
    name = f"esb-test-knn-{uuid.uuid4().hex[:8]}"
    report = ingest(knn_engine, name, _docs(), shards=2, progress=False, strict=True,
                    vector=VectorField(dim=encoder.dim, model=encoder.name))
    assert report.indexed == N_DOCS
    yield name
    knn_engine.delete_index(name)


def test_engine_knn_top_k_equals_exact_cosine_top_k(knn_engine: Engine, knn_index: str, encoder) -> None:  # type: ignore[no-untyped-def]
    ev = open_vectors(knn_engine, knn_index, encoder, fields=("title", "text"), progress=False)
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
    changed = {"_id": _docs()[0]["_id"], "title": "Sorting networks", "text": "Batcher's bitonic sorter merges runs."}
    ingest(knn_engine, knn_index, [changed, {"_id": "new", "text": "Quicksort partitions around a pivot."},
                                   {"_id": "empty", "text": ""}], progress=False)
    assert ev.refresh(force=True)
    assert len(ev) == N_DOCS + 1  # the empty document has no vector and is never a semantic hit
    want = encoder.encode([document_text(changed, ("title", "text"))])[0]
    np.testing.assert_allclose(ev.vectors_of([changed["_id"]])[0], want, atol=1e-7)
    top = ev.search(encoder.encode(["how does quicksort partition"])[0], 2)
    assert top.ids[0] == "new"
    assert not ev.refresh(force=True)  # nothing left to fill


def test_hybrid_pipeline_uses_the_engine_vectors(knn_engine: Engine, knn_index: str, encoder) -> None:  # type: ignore[no-untyped-def]
    with HybridSearcher(knn_engine, knn_index, PipelineParams(model=encoder.name), progress=False) as hs:
        assert isinstance(hs.vectors, EngineVectors)
        q = judged_queries(limit=1)[0]["text"]
        # the engine keeps one vector per document (its first window): exact cosine over the same
        exact = VectorIndex.open(knn_engine, knn_index, encoder, fields=("title", "text"), progress=False,
                                 windows=False)
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


def test_engines_without_vector_search_refuse_a_vector_field(engine: Engine, index_name: str) -> None:
    assert engine.vector_search() is None
    with pytest.raises(ConfigurationError, match="no vector search esbridge can use"):
        create_index(engine, index_name, IndexLayout(), vector=VectorField(dim=384, model="all-minilm-l6-v2"))
    assert not engine.index_exists(index_name)


def test_cli_index_puts_the_vectors_in_the_engine(knn_engine: Engine, tmp_path,  # type: ignore[no-untyped-def]
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from esbridge.cli.main import main

    src = tmp_path / "docs.jsonl"
    src.write_text("".join(json.dumps(d) + "\n" for d in _docs()[:20]))
    name = f"esb-test-knncli-{uuid.uuid4().hex[:8]}"
    try:
        assert main(["index", "--url", knn_engine.options.url, "--input", str(src), "--index", name, "--quiet"]) == 0
        out = capsys.readouterr().out
        assert f"semantic index: 20 document vectors (bge-small-en-v1.5-q) for {name!r}, kept and searched by the " \
               "engine (kNN)" in out
        mapping = knn_engine.request("GET", f"/{name}/_mapping")[name]["mappings"]
        assert mapping["properties"]["esbridge_vector"]["type"] == "knn_vector"
        assert knn_engine.count(name, {"exists": {"field": "esbridge_vector"}}) == 20
    finally:
        knn_engine.delete_index(name)
