"""The hybrid pipeline (semantic + lexical + keyword, fused) against a real engine."""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from esbridge.engine.client import Engine
from esbridge.hybrid import HybridSearcher, PipelineParams, fuse
from esbridge.hybrid.calibration import CalibrationParams, weights_from
from esbridge.hybrid.keyword import KeywordParams
from esbridge.hybrid.pipeline import feedback_centroid
from esbridge.index import IndexLayout, create_index
from esbridge.semantic.cache import EmbeddingCache
from esbridge.semantic.models import load_encoder
from esbridge.semantic.text import document_text
from esbridge.semantic.vectors import VectorIndex
from tests.data import documents, judged_queries

N_DOCS = 120
#: the model of the encoder fixture, which the pipelines below are given vectors of
MODEL = "all-minilm-l6-v2"


@pytest.fixture(scope="module")
def encoder():  # type: ignore[no-untyped-def]
    # fp32: its vectors do not depend on the batch a text is embedded in (int8 models quantize each
    # batch's activations with that batch's own range), so the exact comparisons below hold
    return load_encoder(MODEL)


@pytest.fixture(scope="module")
def cache(encoder):  # type: ignore[no-untyped-def]
    """esbridge's embedding cache: a text is embedded once across tests and runs."""
    return EmbeddingCache.for_encoder(encoder)


def _docs() -> dict[str, dict[str, str]]:
    return {d["_id"]: {"title": d["title"], "text": d["text"]} for d in documents(N_DOCS)}


def _texts() -> list[str]:
    """Each document's text as the vectors embed it, in the order of :func:`_docs`."""
    return [document_text(d, ("title", "text")) for d in _docs().values()]


def _fill(engine: Engine, index: str, docs: dict[str, dict[str, str]]) -> None:
    create_index(engine, index, IndexLayout(), shards=2)
    body = "".join(json.dumps({"index": {"_id": i}}) + "\n" + json.dumps(src) + "\n" for i, src in docs.items())
    resp = engine.request("POST", f"/{index}/_bulk", body=body, ndjson=True, params={"refresh": "true"})
    assert not resp["errors"]


@pytest.fixture
def hybrid_index(engine: Engine, index_name: str) -> str:
    _fill(engine, index_name, _docs())
    return index_name


@pytest.fixture(scope="module")
def by_hand(encoder):  # type: ignore[no-untyped-def]
    """The documents' ids and texts, each one's windows embedded one document at a time (a document scores by its
    best window), and each text embedded whole (up to the model's 256 word pieces): made by hand, once
    for every engine."""
    texts = _texts()
    return list(_docs()), texts, [encoder.encode_ids(w) for w in encoder.windows(texts)], encoder.encode(texts)


@pytest.fixture(scope="module")
def by_hand_two_lengths():  # type: ignore[no-untyped-def]
    """The encoder of passages of 64 and 128 word pieces, and each length's windows of every document
    embedded one document at a time: made by hand, once for every engine."""
    both = load_encoder(MODEL, passage_tokens=(64, 128))
    texts = _texts()
    return both, [[both.at_length(n).encode_ids(w) for w in both.at_length(n).windows(texts)] for n in (64, 128)]


def test_semantic_top_k_is_exact_cosine_over_the_whole_index(engine: Engine, hybrid_index: str, encoder,  # type: ignore[no-untyped-def]
                                                             cache, tmp_path: Path, by_hand) -> None:
    vi = VectorIndex.open(engine, hybrid_index, encoder, fields=("title", "text"), home=tmp_path, cache=cache,
                          progress=False)
    assert len(vi) == N_DOCS
    ids, texts, windows, whole = by_hand
    assert sum(len(w) > 1 for w in windows) > N_DOCS // 2  # most abstracts are longer than the model reads
    first_only = VectorIndex.open(engine, hybrid_index, encoder, fields=("title", "text"), home=tmp_path / "first",
                                  cache=cache, progress=False, windows=False)
    for q in ("vitamin D and bone density", "stem cells in the bone marrow", "ocular hypertension"):
        qv = encoder.encode([q])[0]
        for index, sims in ((vi, np.array([float((w @ qv).max()) for w in windows])),
                            (first_only, whole @ qv)):
            want = [ids[i] for i in np.lexsort((np.arange(len(ids)), -sims))[:10]]
            got = index.search(qv, 10)
            assert got.ids == want
            np.testing.assert_allclose(got.scores, np.sort(sims)[::-1][:10], atol=1e-5)
            np.testing.assert_allclose(index.similarity(qv, ids[::-7] + ["nosuch"])[:-1], sims[::-7], atol=1e-5)
            assert np.isnan(index.similarity(qv, ["nosuch"])[0])
        # the semantic feedback's vectors: each document's first window, or the one closest to the query
        np.testing.assert_allclose(vi.vectors_of(ids[:6] + ["nosuch"]), [w[0] for w in windows[:6]], atol=1e-6)
        np.testing.assert_allclose(vi.vectors_of(ids[:6], qv), [w[int(np.argmax(w @ qv))] for w in windows[:6]],
                                   atol=1e-6)
    # reopened from disk: nothing is embedded again
    again = VectorIndex.open(engine, hybrid_index, encoder, fields=("title", "text"), home=tmp_path, cache=cache,
                             progress=False)
    np.testing.assert_array_equal(np.asarray(again.vectors), np.asarray(vi.vectors))
    # vectors built with another passage length are rebuilt, never read as this one's
    long_encoder = load_encoder("all-minilm-l6-v2", passage_tokens=256)
    long_windows = long_encoder.windows(texts)
    assert sum(map(len, long_windows)) < len(vi.vectors)
    longer = VectorIndex.open(engine, hybrid_index, long_encoder, fields=("title", "text"), home=tmp_path, cache=cache,
                              progress=False)
    in_order = long_encoder.windows([texts[ids.index(d)] for d in longer.ids])  # the index's own document order
    np.testing.assert_allclose(np.asarray(longer.vectors), long_encoder.encode_ids([w for ws in in_order for w in ws]),
                               atol=2e-6)
    back = VectorIndex.open(engine, hybrid_index, encoder, fields=("title", "text"), home=tmp_path, cache=cache,
                            progress=False)
    np.testing.assert_array_equal(np.asarray(back.vectors), np.asarray(vi.vectors))


def test_several_passage_lengths_score_the_mean_of_their_best_passages(  # type: ignore[no-untyped-def]
        engine: Engine, hybrid_index: str, cache, tmp_path: Path, by_hand_two_lengths) -> None:
    ids = list(_docs())
    both, per_length = by_hand_two_lengths
    assert both.passage_lengths == (64, 128) and both.passage_tokens == 64
    # a document with no text: one window at each length, zero, so it matches nothing
    engine.request("PUT", f"/{hybrid_index}/_doc/blank", body={"title": "", "text": ""}, params={"refresh": "true"})
    vi = VectorIndex.open(engine, hybrid_index, both, fields=("title", "text"), home=tmp_path, cache=cache,
                          progress=False)
    # by hand: each length's windows embedded one document at a time, the best window at each
    # length, the mean over the two lengths
    assert sum(len(w) > 1 for w in per_length[1]) > 0 and sum(map(len, per_length[0])) > sum(map(len, per_length[1]))
    assert len(vi.vectors) == sum(map(len, per_length[0])) + sum(map(len, per_length[1])) + 2
    blank = vi.ids.index("blank")
    assert not np.asarray(vi.vectors)[[vi.starts[blank], vi.starts[len(vi.ids) + blank]]].any()
    for q in ("vitamin D and bone density", "ocular hypertension"):
        qv = both.encode([q])[0]
        sims = np.mean([[float((w @ qv).max()) for w in level] for level in per_length], axis=0)
        got = vi.search(qv, 10)
        assert got.ids == [ids[i] for i in np.lexsort((np.arange(len(ids)), -sims))[:10]]
        np.testing.assert_allclose(got.scores, np.sort(sims)[::-1][:10], atol=1e-5)
        np.testing.assert_allclose(vi.similarity(qv, ids[::-5] + ["nosuch"])[:-1], sims[::-5], atol=1e-5)
        assert vi.similarity(qv, ["blank"])[0] == 0.0 and "blank" not in got.ids
        # the feedback's vectors come from the first length's windows
        np.testing.assert_allclose(vi.vectors_of(ids[:4], qv),
                                   [w[int(np.argmax(w @ qv))] for w in per_length[0][:4]], atol=1e-6)
    again = VectorIndex.open(engine, hybrid_index, both, fields=("title", "text"), home=tmp_path, cache=cache,
                             progress=False)
    np.testing.assert_array_equal(np.asarray(again.vectors), np.asarray(vi.vectors))
    # one length only: rebuilt, never read as the two lengths' vectors
    one = VectorIndex.open(engine, hybrid_index, both.at_length(64), fields=("title", "text"), home=tmp_path,
                           cache=cache, progress=False)
    assert len(one.vectors) == sum(map(len, per_length[0])) + 1 and len(one.starts) == len(ids) + 2


def test_pipeline_fuses_its_strategies(engine: Engine, hybrid_index: str, tmp_path: Path, encoder,  # type: ignore[no-untyped-def]
                                       cache) -> None:
    vi = VectorIndex.open(engine, hybrid_index, encoder, fields=("title", "text"), home=tmp_path, cache=cache,
                          progress=False)
    params = PipelineParams(model=MODEL, window=50, semantic_depth=50, w_keyword=0.5)
    with HybridSearcher(engine, hybrid_index, params, vectors=vi) as hs:
        for q in [q["text"] for q in judged_queries(limit=3)]:
            res = hs.run(q)
            assert set(res.lists) == {"semantic", "lexical", "keyword", "semantic_feedback"}
            fused = {"semantic": res.lists["semantic_feedback"], "lexical": res.lists["lexical"],
                     "keyword": res.lists["keyword"]}
            weights = hs.fusion_weights()  # the parameters' weights times those measured on the index
            assert weights != params.weights and set(weights) == set(params.weights)
            ids, scores, _ = fuse(fused, weights, params.fusion)
            assert ids == res.ids
            np.testing.assert_allclose(scores, res.scores)
            # the feedback query is the query vector plus the mean of the first fusion's top vectors
            first, first_scores, _ = fuse({k: res.lists[k] for k in ("semantic", "lexical", "keyword")},
                                          weights, params.fusion)
            top = vi.vectors_of(first[:params.semantic_feedback])
            moved = vi.embed_query(q) + params.semantic_beta * feedback_centroid(
                top, first_scores, params.semantic_feedback_weighting)
            again = vi.search((moved / np.linalg.norm(moved)).astype(np.float32), params.semantic_depth)
            assert again.ids == list(res.lists["semantic_feedback"].ids)
            assert res.expansion, "pseudo-relevance feedback chose no terms"
            resp = hs.search(q, size=5, explain=True)
            hits = resp["hits"]["hits"]
            assert [h["_id"] for h in hits] == res.ids[:5]
            for h in hits:
                assert h["_source"]["title"]
                assert set(h["_esbridge"]["parts"]) == {"semantic", "lexical", "keyword"}
                assert h["_esbridge"]["strategies"], h


def test_feedback_from_the_lexical_and_semantic_lists_runs_beside_the_keyword_strategy(  # type: ignore[no-untyped-def]
        engine: Engine, hybrid_index: str, tmp_path: Path, encoder, cache) -> None:
    vi = VectorIndex.open(engine, hybrid_index, encoder, fields=("title", "text"), home=tmp_path, cache=cache,
                          progress=False)
    params = PipelineParams(model=MODEL, window=50, semantic_depth=50, w_keyword=0.5,
                            semantic_feedback_from="lexical_semantic")
    with HybridSearcher(engine, hybrid_index, params, vectors=vi) as hs:
        weights = hs.fusion_weights()
        differs = 0
        for q in [q["text"] for q in judged_queries(limit=4)]:
            res = hs.run(q)
            # the feedback documents: the top of the lexical and semantic lists fused, the keyword list left out
            seed = {k: weights[k] for k in ("semantic", "lexical")}
            first, first_scores, _ = fuse({k: res.lists[k] for k in seed}, seed, params.fusion)
            moved = vi.embed_query(q) + params.semantic_beta * feedback_centroid(
                vi.vectors_of(first[:params.semantic_feedback]), first_scores, params.semantic_feedback_weighting)
            again = vi.search((moved / np.linalg.norm(moved)).astype(np.float32), params.semantic_depth)
            assert again.ids == list(res.lists["semantic_feedback"].ids)
            ids, scores, _ = fuse({"semantic": res.lists["semantic_feedback"], "lexical": res.lists["lexical"],
                                   "keyword": res.lists["keyword"]}, weights, params.fusion)
            assert ids == res.ids
            np.testing.assert_allclose(scores, res.scores)
            # the aggregator alone (the tuning's path) reads the same lists the same way
            lists = {k: res.lists[k] for k in ("semantic", "lexical", "keyword")}
            assert hs.aggregate(lists, vi.embed_query(q)).ids == res.ids
            # and it is not the shipped order's feedback: that one reads the keyword list too
            shipped = hs.aggregate(lists, vi.embed_query(q), params=params.with_overrides(semantic_feedback_from="all"))
            differs += shipped.lists["semantic_feedback"].ids != res.lists["semantic_feedback"].ids
        assert differs, "the keyword list never moved the feedback documents: the test shows nothing"


def test_feedback_among_the_candidates_searches_the_first_fusions_documents_only(  # type: ignore[no-untyped-def]
        engine: Engine, hybrid_index: str, tmp_path: Path, encoder, cache, monkeypatch) -> None:
    vi = VectorIndex.open(engine, hybrid_index, encoder, fields=("title", "text"), home=tmp_path, cache=cache,
                          progress=False)
    params = PipelineParams(model=MODEL, window=20, semantic_depth=20, w_keyword=0.5,
                            keyword=KeywordParams(depth=20), semantic_feedback_scope="candidates")
    with HybridSearcher(engine, hybrid_index, params, vectors=vi) as hs:
        weights = hs.fusion_weights()
        differs = 0
        seen: dict[str, tuple[list[str], list[str]]] = {}
        for q in [q["text"] for q in judged_queries(limit=4)]:
            res = hs.run(q)
            first, first_scores, _ = fuse({k: res.lists[k] for k in ("semantic", "lexical", "keyword")},
                                          weights, params.fusion)
            moved = vi.embed_query(q) + params.semantic_beta * feedback_centroid(
                vi.vectors_of(first[:params.semantic_feedback]), first_scores, params.semantic_feedback_weighting)
            moved = (moved / np.linalg.norm(moved)).astype(np.float32)
            # the moved vector's cosines with the first fusion's documents, best first: nothing else
            cosines = vi.similarity(moved, first)
            order = np.lexsort((np.arange(len(first)), -cosines))[:params.semantic_depth]
            assert list(res.lists["semantic_feedback"].ids) == [first[i] for i in order]
            np.testing.assert_allclose(res.lists["semantic_feedback"].scores, cosines[order], atol=1e-6)
            ids, scores, _ = fuse({"semantic": res.lists["semantic_feedback"], "lexical": res.lists["lexical"],
                                   "keyword": res.lists["keyword"]}, weights, params.fusion)
            assert ids == res.ids
            np.testing.assert_allclose(scores, res.scores)
            # the whole index's search finds documents no strategy had found
            lists = {k: res.lists[k] for k in ("semantic", "lexical", "keyword")}
            shipped = hs.aggregate(lists, vi.embed_query(q),
                                   params=params.with_overrides(semantic_feedback_scope="index"))
            differs += bool(set(shipped.lists["semantic_feedback"].ids) - set(first))
            seen[q] = (res.lists["semantic_feedback"].ids, shipped.lists["semantic_feedback"].ids)
        assert differs, "the whole index's second pass found nothing new: the test shows nothing"
    # ``auto`` (the default): the candidates from FEEDBACK_CANDIDATES_FROM documents with a vector on,
    # the whole index below (the bound moved to this index's size)
    import esbridge.hybrid.pipeline as pipeline

    with HybridSearcher(engine, hybrid_index, params.with_overrides(semantic_feedback_scope="auto"), vectors=vi) as hs:
        for bound, scope in ((len(vi), "candidates"), (len(vi) + 1, "index")):
            monkeypatch.setattr(pipeline, "FEEDBACK_CANDIDATES_FROM", bound)
            for q, (among, whole) in seen.items():
                assert hs.run(q).lists["semantic_feedback"].ids == (among if scope == "candidates" else whole)
            assert hs.search(next(iter(seen)), size=1)["_esbridge"]["pipeline"]["semantic_feedback_scope"] == scope


def test_whole_document_list_joins_the_last_fusion(engine: Engine, hybrid_index: str, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                   encoder, cache) -> None:
    vi = VectorIndex.open(engine, hybrid_index, encoder, fields=("title", "text"), home=tmp_path, cache=cache,
                          progress=False)
    dvi = VectorIndex.open(engine, hybrid_index, encoder, fields=("title", "text"), home=tmp_path, cache=cache,
                           progress=False, windows=False)
    docs = _docs()
    whole = encoder.encode([document_text(docs[i], ("title", "text")) for i in dvi.ids])
    params = PipelineParams(model=MODEL, window=50, semantic_depth=50, w_document=2.0)
    with HybridSearcher(engine, hybrid_index, params, vectors=vi, document_vectors=dvi) as hs:
        weights = hs.fusion_weights()
        assert weights["document"] == pytest.approx(2.0 * weights["semantic"])
        for q in [q["text"] for q in judged_queries(limit=2)]:
            res = hs.run(q)
            # one vector per whole document, searched exactly with the query's vector
            cos = whole @ vi.embed_query(q)
            want = [dvi.ids[i] for i in np.lexsort((np.arange(len(cos)), -cos))[:50]]
            assert list(res.lists["document"].ids) == want
            # the semantic feedback reads the first fusion (without the document list); the last fusion has all four
            first, first_scores, _ = fuse({k: res.lists[k] for k in ("semantic", "lexical", "keyword")},
                                          {k: w for k, w in weights.items() if k != "document"}, params.fusion)
            moved = vi.embed_query(q) + params.semantic_beta * feedback_centroid(
                vi.vectors_of(first[:params.semantic_feedback]), first_scores, params.semantic_feedback_weighting)
            again = vi.search((moved / np.linalg.norm(moved)).astype(np.float32), params.semantic_depth)
            assert again.ids == list(res.lists["semantic_feedback"].ids)
            ids, scores, _ = fuse({"semantic": res.lists["semantic_feedback"], "lexical": res.lists["lexical"],
                                   "keyword": res.lists["keyword"], "document": res.lists["document"]},
                                  weights, params.fusion)
            assert ids == res.ids
            np.testing.assert_allclose(scores, res.scores)
            assert set(hs.search(q, size=3, explain=True)["hits"]["hits"][0]["_esbridge"]["parts"]) == {
                "semantic", "lexical", "keyword", "document"}


@pytest.mark.parametrize("source", ["lexical", "fusion"])
def test_keyword_feedback_documents_come_from_the_chosen_source(engine: Engine, hybrid_index: str,  # type: ignore[no-untyped-def]
                                                                tmp_path: Path, encoder, cache, source: str) -> None:
    vi = VectorIndex.open(engine, hybrid_index, encoder, fields=("title", "text"), home=tmp_path, cache=cache,
                          progress=False)
    params = PipelineParams(model=MODEL, window=50, semantic_depth=50, keyword_source=source, semantic_feedback=0)
    with HybridSearcher(engine, hybrid_index, params, vectors=vi) as hs:
        q = judged_queries(limit=1)[0]["text"]
        res = hs.run(q)
        # the feedback documents, rebuilt from the lists the pipeline returned
        if source == "lexical":
            fb = res.lists["lexical"]
        else:
            w = hs.fusion_weights()
            ids, _, _ = fuse({"semantic": res.lists["semantic"], "lexical": res.lists["lexical"]},
                             {"semantic": w["semantic"], "lexical": w["lexical"]}, params.fusion)
            top = ids[:params.keyword.fb_docs]
            fb = type(res.lists["lexical"])(top, np.linspace(1.0, 0.5, len(top)))
        prepared = hs.reranker.analyze(q)
        terms = hs.keyword_terms(prepared, fb, [None] * len(fb.ids))
        assert terms == res.expansion
        assert hs.keyword(terms).ids == res.lists["keyword"].ids
        # other keyword parameters for one call (as tuning measures them), and another depth
        original = set(prepared.query["base"].terms)
        few = hs.keyword_terms(prepared, fb, [None] * len(fb.ids), params=replace(params.keyword, fb_terms=3))
        assert len(set(few) - original) == 3 < len(set(terms) - original)
        assert hs.keyword(terms, depth=5).ids == res.lists["keyword"].ids[:5]


def test_filter_applies_to_every_strategy(engine: Engine, hybrid_index: str, tmp_path: Path, encoder,  # type: ignore[no-untyped-def]
                                          cache) -> None:
    vi = VectorIndex.open(engine, hybrid_index, encoder, fields=("title", "text"), home=tmp_path, cache=cache,
                          progress=False)
    allowed = list(_docs())[::3]
    params = PipelineParams(model=MODEL, window=50, semantic_depth=50, w_keyword=1.0)
    with HybridSearcher(engine, hybrid_index, params, vectors=vi) as hs:
        res = hs.run("bone density and vitamin D", filter={"ids": {"values": allowed}})
        for name, lst in res.lists.items():
            assert set(lst.ids) <= set(allowed), name
        assert res.ids and set(res.ids) <= set(allowed)


def test_recreated_index_never_reuses_vectors(engine: Engine, index_name: str, tmp_path: Path, encoder,  # type: ignore[no-untyped-def]
                                          cache) -> None:
    docs = _docs()
    first = dict(list(docs.items())[:40])
    _fill(engine, index_name, first)
    vi = VectorIndex.open(engine, index_name, encoder, fields=("title", "text"), home=tmp_path, cache=cache,
                          progress=False)
    assert set(vi.ids) == set(first)
    engine.delete_index(index_name)
    second = dict(list(docs.items())[40:70])
    _fill(engine, index_name, second)
    vi2 = VectorIndex.open(engine, index_name, encoder, fields=("title", "text"), home=tmp_path, cache=cache,
                           progress=False)
    assert vi2.uuid != vi.uuid and set(vi2.ids) == set(second)
    # a write is seen at the next refresh (the index state changed)
    extra_id, extra = next(iter(first.items()))
    engine.request("PUT", f"/{index_name}/_doc/{extra_id}", body=extra, params={"refresh": "true"})
    assert vi2.refresh(force=True)
    first_passage = encoder.windows([document_text(extra, ("title", "text"))])[0][0]
    hits = vi2.search(encoder.encode_ids([first_passage])[0], 1)
    assert hits.ids == [extra_id] and hits.scores[0] == pytest.approx(1.0, abs=1e-5)


def test_narrative_gives_the_keyword_terms(engine: Engine, hybrid_index: str, tmp_path: Path, encoder,  # type: ignore[no-untyped-def]
                                           cache) -> None:
    vi = VectorIndex.open(engine, hybrid_index, encoder, fields=("title", "text"), home=tmp_path, cache=cache,
                          progress=False)
    with HybridSearcher(engine, hybrid_index, PipelineParams(model=MODEL, window=50), vectors=vi) as hs:
        narrative = ("Relevant documents describe bone mineral density in osteoporosis. "
                     "Documents about tumour cells are not relevant.")
        res = hs.run("vitamin D", narrative=narrative, strategies=("keyword",))
        terms = set(res.expansion)
        # the engine's analyser stems; the narrative's relevant statement gives terms, the other none
        assert {"bone", "miner", "densiti", "osteoporosi"} & terms
        assert not {"tumour", "cell"} & terms
        assert {"vitamin", "d"} <= terms  # the query's own terms stay
        assert res.lists["keyword"].ids


def test_the_seed004_preset_end_to_end(engine: Engine, hybrid_index: str, tmp_path: Path, encoder,  # type: ignore[no-untyped-def]
                                       cache) -> None:
    from esbridge.scoring.bm25 import BM25VariantParams

    vi = VectorIndex.open(engine, hybrid_index, encoder, fields=("title", "text"), home=tmp_path, cache=cache,
                          progress=False)
    params = replace(PipelineParams.seed004(), model=MODEL)
    narrative = ("Relevant documents describe bone mineral density in osteoporosis. "
                 "Documents about tumour cells are not relevant.")
    query = judged_queries(limit=1)[0]["text"]
    with HybridSearcher(engine, hybrid_index, params, vectors=vi) as hs:
        assert hs.reranker.scorer == "bm25_robertson" and hs.reranker.params == BM25VariantParams(k1=1.5, b=0.75)
        # the filter drops the second sentence; the first has two runs between stopwords ("in") and the full
        # stop, two topics joined by one edge, equal scores: first-occurrence order
        phrases = hs.keyphrases(narrative)
        assert phrases == ["Relevant documents describe bone mineral density", "osteoporosis"]
        res = hs.run(query, narrative=narrative)
        assert set(res.lists) == {"semantic", "lexical", "keyword"}  # one semantic pass
        # the keyword query: the keyphrases as analysed by the index (stems), ranked by the lexical strategy
        assert {"bone", "miner", "densiti", "osteoporosi"} <= set(res.expansion)
        assert not {"tumour", "cell"} & set(res.expansion)
        kw, _ = hs.lexical(" ".join(phrases), window=500)
        assert list(res.lists["keyword"].ids) == list(kw.ids) and kw.ids
        # the aggregator: raw scores added over the lists that found a document (120 documents, all kept)
        expected: dict[str, float] = {}
        for name in ("semantic", "lexical", "keyword"):
            for d, s in zip(res.lists[name].ids, res.lists[name].scores):
                expected[d] = expected.get(d, 0.0) + float(s)
        assert sorted(res.ids) == sorted(expected)
        np.testing.assert_allclose(res.scores, [expected[d] for d in res.ids])
        assert all(a >= b for a, b in zip(res.scores, res.scores[1:]))
        # a topic without a narrative has no keyword query
        bare = hs.run(query)
        assert list(bare.lists["keyword"].ids) == [] and bare.expansion == {}
        full = bare.ids
    with HybridSearcher(engine, hybrid_index, replace(params, result_depth=5), vectors=vi) as hs:
        cut = hs.run(query)
        assert cut.ids == full[:5] and len(cut.scores) == 5


def test_calibration_cuts_the_weight_of_a_useless_strategy(engine: Engine, hybrid_index: str,  # type: ignore[no-untyped-def]
                                                            tmp_path: Path, encoder, cache) -> None:
    """The weights are measured on the index: with the documents' vectors shuffled among them, the
    semantic strategy finds nothing and its weight falls; the measure is stored with the index, read
    back by another searcher, and taken again once the index has grown."""
    vi = VectorIndex.open(engine, hybrid_index, encoder, fields=("title", "text"), home=tmp_path, cache=cache,
                          progress=False)
    params = PipelineParams(model=MODEL, window=50, semantic_depth=50,
                            calibration=CalibrationParams(queries=60, depth=20))
    with HybridSearcher(engine, hybrid_index, params, vectors=vi) as hs:
        cal = hs.calibration()
        assert cal.queries == 60 and cal.documents == N_DOCS
        assert set(cal.effectiveness) == {"semantic", "lexical", "keyword"}
        assert min(cal.effectiveness.values()) > 0.3, cal.effectiveness  # each finds most known items
        sound = hs.fusion_weights()
        factors = weights_from(cal.effectiveness, params.calibration.sharpness)
        assert sound == pytest.approx({s: w * factors[s] for s, w in params.weights.items()})
        shown = hs.search("vitamin D and bone density", size=3, explain=True)["_esbridge"]["pipeline"]
        assert shown["weights"] == sound and shown["calibration"]["effectiveness"] == cal.effectiveness
    # another searcher (another process would do the same) reads it from the index's mapping
    with HybridSearcher(engine, hybrid_index, params, vectors=vi) as again:
        assert again.calibration() == cal
    shuffled = VectorIndex.open(engine, hybrid_index, encoder, fields=("title", "text"), home=tmp_path / "x",
                                cache=cache, progress=False)
    shuffled.ids = list(np.random.default_rng(0).permutation(shuffled.ids))  # each vector now names another document
    shuffled._row = {d: i for i, d in enumerate(shuffled.ids)}
    with HybridSearcher(engine, hybrid_index, params, vectors=shuffled) as hs:
        useless = hs.calibration(force=True)
        assert useless.effectiveness["semantic"] < 0.2 < cal.effectiveness["semantic"]
        weights = hs.fusion_weights()
        assert weights["semantic"] < 0.1 * sound["semantic"]
        assert weights["lexical"] == pytest.approx(sound["lexical"], rel=0.5)
    # fixed weights: nothing is measured, the parameters' weights are used as they are
    with HybridSearcher(engine, hybrid_index, replace(params, weighting="fixed"), vectors=vi) as hs:
        assert hs.fusion_weights() == params.weights and "calibration" not in hs.describe()
    # the index grows by more than a tenth: measured again
    extra = {f"extra-{i}": {"title": "Vitamin D", "text": f"Bone density measured in trial number {i} of many."}
             for i in range(20)}
    body = "".join(json.dumps({"index": {"_id": i}}) + "\n" + json.dumps(src) + "\n" for i, src in extra.items())
    assert not engine.request("POST", f"/{hybrid_index}/_bulk", body=body, ndjson=True,
                              params={"refresh": "true"})["errors"]
    with HybridSearcher(engine, hybrid_index, params, vectors=vi) as hs:
        grown = hs.calibration()
        assert grown.documents == N_DOCS + 20


def test_the_ensemble_adds_each_models_whole_document_list_weighed_by_the_index(  # type: ignore[no-untyped-def]
        engine: Engine, hybrid_index: str, tmp_path: Path, encoder, cache) -> None:
    other = PipelineParams().model  # the shipped model, beside the encoder fixture's
    vi = VectorIndex.open(engine, hybrid_index, encoder, fields=("title", "text"), home=tmp_path, cache=cache,
                          progress=False)
    params = PipelineParams(model=MODEL, window=50, semantic_depth=50, w_document=1.0, ensemble=(other,),
                            calibration={"queries": 20})
    with HybridSearcher(engine, hybrid_index, params, vectors=vi) as hs:
        cal = hs.calibration(force=True)
        assert cal is not None and {"document", f"document {other}"} <= set(cal.effectiveness)
        eff = cal.effectiveness
        weights = hs.fusion_weights()
        # the three strategies' weights are those they had without the ensemble
        base = {s: w * weights_from({k: eff[k] for k in ("semantic", "lexical", "keyword")},
                                    params.calibration.sharpness)[s] for s, w in params.weights.items()}
        assert {s: weights[s] for s in base} == pytest.approx(base)
        assert weights["document"] == pytest.approx(weights["semantic"])
        assert weights[f"document {other}"] == pytest.approx(
            weights["semantic"] * (eff[f"document {other}"] / eff["document"]) ** params.ensemble_sharpness)
        ev = hs.ensemble_vectors(other)
        assert isinstance(ev, VectorIndex) and not ev.windows and len(ev) == len(vi.ids)
        threads: list[str] = []
        own = hs._ensemble_run

        def ensemble_run(*args: Any, **kwargs: Any) -> Any:
            threads.append(threading.current_thread().name)
            return own(*args, **kwargs)

        hs._ensemble_run = ensemble_run  # type: ignore[method-assign]
        for q in [q["text"] for q in judged_queries(limit=2)]:
            res = hs.run(q)
            # the other model's own embedding of the query, against its own whole-document vectors
            assert list(res.lists[f"document {other}"].ids) == ev.search(ev.embed_query(q), 50).ids
            final = {"semantic": res.lists.get("semantic_feedback", res.lists["semantic"]),
                     "lexical": res.lists["lexical"], "keyword": res.lists["keyword"],
                     "document": res.lists["document"], f"document {other}": res.lists[f"document {other}"]}
            ids, scores, _ = fuse(final, weights, params.fusion)
            assert ids == res.ids
            np.testing.assert_allclose(scores, res.scores)
        # each model's list ran on the semantic strategy's threads, while the lexical one waited on the engine
        assert len(threads) == 2 and all(t.startswith("esbridge-semantic") for t in threads), threads


def test_each_whole_document_list_runs_again_from_the_fused_rankings_top_documents(  # type: ignore[no-untyped-def]
        engine: Engine, hybrid_index: str, tmp_path: Path, encoder, cache) -> None:
    other = PipelineParams().model
    vi = VectorIndex.open(engine, hybrid_index, encoder, fields=("title", "text"), home=tmp_path, cache=cache,
                          progress=False)
    params = PipelineParams(model=MODEL, window=50, semantic_depth=50, w_document=1.5, ensemble=(other,),
                            calibration={"queries": 20}, document_feedback=3, document_beta=0.25,
                            document_feedback_share=0.25)
    whole = ("document", f"document {other}")
    with HybridSearcher(engine, hybrid_index, params, vectors=vi) as hs:
        weights = hs.fusion_weights()
        indices = {"document": hs.document_vectors, f"document {other}": hs.ensemble_vectors(other)}
        for q in [q["text"] for q in judged_queries(limit=3)]:
            res = hs.run(q)
            first = {"semantic": res.lists.get("semantic_feedback", res.lists["semantic"]),
                     "lexical": res.lists["lexical"], "keyword": res.lists["keyword"],
                     **{k: res.lists[k] for k in whole}}
            ids, scores, _ = fuse(first, weights, params.fusion)
            moved_weights = dict(weights)
            for k in whole:
                # the list's own model embeds the query; its vectors of the fused ranking's top 3 move it
                vecs = indices[k]
                qv = vecs.embed_query(q)
                top = vecs.vectors_of(ids[:3])
                margins = np.maximum(scores[:3] - scores[3], 0)
                moved = qv + 0.25 * (top * (margins / margins.sum())[:, None]).sum(axis=0)
                expected = vecs.search((moved / np.linalg.norm(moved)).astype(np.float32), 50)
                second = res.lists[f"{k} feedback"]
                assert list(second.ids) == expected.ids and second.ids != res.lists[k].ids
                np.testing.assert_allclose(second.scores, expected.scores, rtol=1e-5)
                first[f"{k} feedback"] = second
                moved_weights[f"{k} feedback"] = 0.25 * weights[k]
                moved_weights[k] = 0.75 * weights[k]
            ids, scores, _ = fuse(first, moved_weights, params.fusion)
            assert ids == res.ids
            np.testing.assert_allclose(scores, res.scores)
            assert "document_feedback" in res.seconds
        # the aggregator alone reproduces the answer from the lists and query vectors, with the
        # feedback settings of the parameters it is given
        base = {k: res.lists[k] for k in ("semantic", "lexical", "keyword", *whole)}
        qv = hs.vectors.embed_query(q)
        vectors = {k: indices[k].embed_query(q) for k in whole}
        assert hs.aggregate(base, qv, document_vectors=vectors).ids == res.ids
        farther = hs.aggregate(base, qv, params=replace(params, document_beta=2.0), document_vectors=vectors)
        assert any(farther.lists[f"{k} feedback"].ids != res.lists[f"{k} feedback"].ids for k in whole)
        assert not any(k.endswith(" feedback") for k in hs.aggregate(
            base, qv, params=replace(params, document_feedback=0), document_vectors=vectors).lists)
        # the second pass replaces the first at share 1; none without the parameter
        hs.params = replace(params, document_feedback_share=1.0)
        res = hs.run("vitamin d and bone density")
        assert {f"{k} feedback" for k in whole} <= set(res.parts) and not set(whole) & {
            k for k, v in res.parts.items() if np.any(v != 0)}
        hs.params = replace(params, document_feedback=0)
        assert not any(k.endswith("feedback") and k != "semantic_feedback" for k in hs.run("vitamin d").lists)
