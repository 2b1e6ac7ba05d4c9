"""Weighted query augmentation through a real engine: one candidate request for the union, features
fetched once, documents found only by a variant scored, rescore, the prf augmenter and the commands."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from esbridge.augment import FeedbackAugmenter, FeedbackParams
from esbridge.engine.client import Engine
from esbridge.evaluation.datasets import SplitSpec, load_dataset
from esbridge.evaluation.tune import collect_features, evaluate
from esbridge.features import analyze_query, build_input, fetch_raw
from esbridge.features.plugin import EXTENSION
from esbridge.index import read_layout
from esbridge.rerank import Reranker
from esbridge.scoring import get_scorer
from esbridge.scoring.bmx import weighted_query_augmentation
from tests.cli import run
from tests.engine.recording import Recorder
from tests.smallindex import DOCS as SMALL_DOCS
from tests.smallindex import create_small_index

DOCS = {**SMALL_DOCS,
    "f": {"title": "Insulin pumps", "text": "Pumps deliver insulin under the skin."},
}


@pytest.fixture
def small_index(engine: Engine, index_name: str) -> str:
    return create_small_index(engine, index_name, DOCS, shards=2)


Call = tuple[str, str, Any]


def _reads_features(call: Call) -> bool:
    return isinstance(call[2], dict) and EXTENSION in (call[2].get("ext") or {})


def _paths(calls: list[Call], suffix: str) -> list[Call]:
    """The requests to paths ending in ``suffix`` (searches that read features, :func:`_feature_calls`,
    not among them)."""
    return [c for c in calls if c[1].split("?")[0].endswith(suffix) and not _reads_features(c)]


def _feature_calls(calls: list[Call]) -> list[Call]:
    """The requests that read candidates' features: ``_mtermvectors``, or searches through the
    esbridge-features engine plugin."""
    return [c for c in calls if c[1].split("?")[0].endswith("/_mtermvectors") or _reads_features(c)]


def _asked(calls: list[Call]) -> list[str]:
    """The candidates whose features were asked for, once per time asked."""
    out = []
    for _, path, body in _feature_calls(calls):
        if path.split("?")[0].endswith("/_mtermvectors"):
            out += [d["_id"] for d in body["docs"] if "_id" in d]
        else:
            out += body["query"]["bool"]["filter"][0]["ids"]["values"]
    return out


def _fresh_scores(engine: Engine, index: str, scorer: str, text: str, ids: list[str]) -> np.ndarray:
    """The scorer's scores of ``ids`` for ``text`` from features fetched anew (no reranker, no cache)."""
    layout = read_layout(engine, index)
    sc = get_scorer(scorer)
    terms = analyze_query(engine, index, layout, text, list(sc.channels))
    fresh = fetch_raw(engine, index, layout, terms, ids, fields=[layout.combined])
    return sc.score(build_input(fresh, layout, terms, fields=[layout.combined])).scores


def test_the_union_is_found_with_one_request_and_its_features_fetched_once(
        engine: Engine, small_index: str) -> None:
    variants = [("cardiac heart", 0.5), ("sorting algorithm", 0.25)]
    plain = Reranker(engine, small_index, scorer="evolved", window=3)
    plain.analyze("insulin"), plain.max_result_window()  # warm what both searches need alike
    with Recorder(engine) as rec:
        plain.search("insulin", size=10)
    plain_vectors = len(_feature_calls(rec.calls))

    rr = Reranker(engine, small_index, scorer="evolved", window=3)
    for text in ("insulin", *(v for v, _ in variants)):
        rr.analyze(text)
    rr.max_result_window()
    with Recorder(engine) as rec:
        resp = rr.search("insulin", size=10, augmentations=variants)
    searches = _paths(rec.calls, "/_search") + _paths(rec.calls, "/_msearch")
    assert [c[1].split("?")[0] for c in searches] == [f"/{small_index}/_msearch"], searches
    # one _msearch line pair per query: the original and the two variants
    assert len(searches[0][2].strip().splitlines()) == 6
    # term vectors: as many requests as the plain search made, and every candidate asked for once
    assert len(_feature_calls(rec.calls)) == plain_vectors
    asked = _asked(rec.calls)
    ids = [h["_id"] for h in resp["hits"]["hits"]]
    assert sorted(asked) == sorted(ids) and len(set(asked)) == len(asked)
    # the union: insulin finds b and f, the variants c, d and e
    assert set(ids) == {"b", "f", "c", "d", "e"} and resp["_esbridge"]["window"] == 5
    assert [a["text"] for a in resp["_esbridge"]["augmentations"]] == ["cardiac heart", "sorting algorithm"]
    assert resp["_esbridge"]["augmentations"][0]["terms"]["base"] == ["cardiac", "heart"]


@pytest.mark.parametrize("scorer", ["bmx", "evolved", "bm25"])
def test_every_candidate_scores_the_weighted_sum_of_fresh_features(engine: Engine, small_index: str,
                                                                   scorer: str) -> None:
    variants = [("cardiac heart", 0.5), ("sorting algorithm", 0.25)]
    rr = Reranker(engine, small_index, scorer=scorer, window=3)
    resp = rr.search("insulin", size=10, augmentations=variants, original_weight=2.0, explain=True)
    hits = resp["hits"]["hits"]
    ids = [h["_id"] for h in hits]
    if scorer == "bmx":  # entropies come from the collection, not from the term vectors: use the reranker's
        inputs, _ = rr.augmented_inputs([rr.analyze("insulin"), *(rr.analyze(v) for v, _ in variants)], ids,
                                        [None] * len(ids))
        want = weighted_query_augmentation(get_scorer(scorer), inputs[0],
                                           [(0.5, inputs[1]), (0.25, inputs[2])], original_weight=2.0).scores
        # ... and each query's own input equals the one the reranker builds for that query alone
        for text, inp in zip(["insulin", *(v for v, _ in variants)], inputs):
            alone, _ = rr.scoring_input(rr.analyze(text), ids, [None] * len(ids))
            np.testing.assert_allclose(get_scorer(scorer).score(inp).scores,
                                       get_scorer(scorer).score(alone).scores, rtol=1e-12)
    else:
        want = (2.0 * _fresh_scores(engine, small_index, scorer, "insulin", ids)
                + 0.5 * _fresh_scores(engine, small_index, scorer, "cardiac heart", ids)
                + 0.25 * _fresh_scores(engine, small_index, scorer, "sorting algorithm", ids))
    np.testing.assert_allclose([h["_score"] for h in hits], want, rtol=1e-12)
    assert [h["_score"] for h in hits] == sorted((h["_score"] for h in hits), reverse=True)
    parts = hits[0]["_esbridge"]["parts"]
    assert set(parts) == {"original", "augmented_1", "augmented_2", "augmentation"}


def test_a_document_only_a_variant_finds_is_scored(engine: Engine, small_index: str) -> None:
    rr = Reranker(engine, small_index, scorer="bmx", window=10)
    resp = rr.search("insulin", size=10, augmentations=[("cardiac", 0.5)])
    by_id = {h["_id"]: h for h in resp["hits"]["hits"]}
    plain = {h["_id"]: h for h in rr.search("insulin", size=10)["hits"]["hits"]}
    assert "c" not in plain and "c" in by_id
    c = by_id["c"]["_esbridge"]
    assert c["first_stage_rank"] is None and c["first_stage_score"] is None and c["variant_ranks"] == {"1": 1}
    alone = {h["_id"]: h["_score"] for h in rr.search("cardiac", size=10)["hits"]["hits"]}
    assert by_id["c"]["_score"] == pytest.approx(0.5 * alone["c"], rel=1e-12) and by_id["c"]["_score"] > 0
    # a hit of the query keeps its own first-stage score and rank, and gains the variant's part
    b = by_id["b"]
    assert b["_esbridge"]["first_stage_rank"] == plain["b"]["_esbridge"]["first_stage_rank"]
    assert b["_esbridge"]["first_stage_score"] == plain["b"]["_esbridge"]["first_stage_score"]
    assert b["_score"] == pytest.approx(plain["b"]["_score"], rel=1e-12)  # b has no "cardiac"
    d = by_id["d"]
    assert d["_score"] == pytest.approx(0.5 * alone["d"], rel=1e-12)


def test_rescore_with_augmentations(engine: Engine, small_index: str) -> None:
    raw = engine.search(small_index, {"size": 10, "query": {"match": {"esb_all": "glucose"}}})
    ids = [h["_id"] for h in raw["hits"]["hits"]]
    assert len(ids) == 4
    rr = Reranker(engine, small_index, scorer="bm25")
    out = rr.rescore(raw, "glucose", window=3, augmentations=[("heart diabetes", 1.0)])
    head, tail = out["hits"]["hits"][:3], out["hits"]["hits"][3:]
    assert {h["_id"] for h in head} == set(ids[:3]) and [h["_id"] for h in tail] == ids[3:]
    want = dict(zip(ids[:3], _fresh_scores(engine, small_index, "bm25", "glucose", ids[:3])
                    + _fresh_scores(engine, small_index, "bm25", "heart diabetes", ids[:3])))
    for h in head:
        assert h["_score"] == pytest.approx(want[h["_id"]], rel=1e-12)
    assert head[0]["_id"] == "d"  # the only one with heart and diabetes
    assert out["_esbridge"]["augmentations"][0]["weight"] == 1.0
    assert raw["hits"]["hits"][0].get("_esbridge") is None  # the input is not modified


def test_a_custom_augmenter_is_called_with_the_query(engine: Engine, small_index: str) -> None:
    seen = []

    def expand(query_text: str) -> list[tuple[str, float]]:
        seen.append(query_text)
        return [("heart", 0.3)] if "cardiac" in query_text else []

    rr = Reranker(engine, small_index, scorer="evolved", window=10)
    got = rr.search("cardiac output", augmentations=expand)
    assert seen == ["cardiac output"] and got["_esbridge"]["augmentations"][0]["text"] == "heart"
    assert rr.last.augment >= 0.0
    plain = rr.search("insulin")
    empty = rr.search("insulin", augmentations=expand)  # no variant: the plain ranking and scores
    assert [(h["_id"], h["_score"]) for h in empty["hits"]["hits"]] == \
        [(h["_id"], h["_score"]) for h in plain["hits"]["hits"]]


def test_the_prf_augmenter_writes_feedback_stems(engine: Engine, sample_indices: dict[int, str]) -> None:
    index = sample_indices[1]
    rr = Reranker(engine, index, scorer="bmx", window=100)
    aug = FeedbackAugmenter(rr, FeedbackParams(fb_docs=5, fb_terms=8, weight=0.4, repeat=2))
    text = "Vitamin D deficiency is associated with bone density loss."
    variants = aug(text)
    assert len(variants) == 1 and variants[0][1] == 0.4
    words = variants[0][0].split()
    expansion = aug.expansion(text)
    assert list(dict.fromkeys(words)) == list(expansion)[:8] and len(expansion) == 8
    assert words.count(words[0]) == 2  # the best term written `repeat` times
    query_terms = set(rr.analyze(text).query["base"].terms)
    assert not query_terms & set(words)
    # the stems are the index's own tokens: analysed again, they are (almost all) themselves
    again = set(rr.analyze(variants[0][0]).query["base"].terms)
    assert len(again & set(expansion)) >= 6
    resp = rr.search(text, augmentations=aug)
    assert resp["_esbridge"]["augmentations"][0]["text"] == variants[0][0]


def test_search_run_and_eval_commands_with_augmentations(engine: Engine, small_index: str, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    conn = ["--url", engine.options.url]
    by_text = tmp_path / "by-text.json"
    by_text.write_text(json.dumps({"insulin": [["cardiac", 0.5]]}))
    code, out, err = run(capsys, "search", small_index, "insulin", "--scorer", "bmx", "--window", "10",
                         "--augmentations", str(by_text), "--json", *conn)
    assert code == 0, err
    resp = json.loads(out)
    assert "c" in {h["_id"] for h in resp["hits"]["hits"]}
    assert resp["_esbridge"]["augmentations"] == [{"text": "cardiac", "weight": 0.5,
                                                   "terms": {"base": ["cardiac"]}}]
    code, out, err = run(capsys, "search", small_index, "insulin", "--scorer", "bmx", "--window", "10",
                         "--augmentations", str(by_text), *conn)
    assert code == 0 and "weighted query augmentation" in out and "'cardiac' × 0.5" in out
    code, _, err = run(capsys, "search", small_index, "glucose", "--augmentations", str(by_text), *conn)
    assert code == 2 and "by-text.json has no entry for the query text 'glucose'" in err

    topics = tmp_path / "topics.tsv"
    topics.write_text("1\tinsulin\n2\tglucose\n")
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("1 0 b 1\n1 0 c 1\n2 0 a 1\n")
    by_id = tmp_path / "by-id.jsonl"
    by_id.write_text('{"1": [["cardiac", 0.5]]}\n{"7": [["unused", 1]]}\n')
    run_file = tmp_path / "bmx.trec"
    code, out, err = run(capsys, "run", "--index", small_index, "--topics", str(topics), "--output", str(run_file),
                         "--scorer", "bmx", "--window", "10", "--augmentations", str(by_id), "--quiet", *conn)
    assert code == 0, err
    assert "1 entries of by-id.jsonl match no topic id or text, not used: 7" in err
    ranked = {}
    for line in run_file.read_text().splitlines():
        q, _, d, rank, score, _ = line.split()
        ranked.setdefault(q, []).append((d, float(score)))
    assert "c" in {d for d, _ in ranked["1"]} and "c" not in {d for d, _ in ranked["2"]}
    assert dict(ranked["1"])["c"] == pytest.approx(0.5 * rr_score(engine, small_index, "cardiac", "c"), rel=1e-6)

    out_dir = tmp_path / "eval"
    code, out, err = run(capsys, "eval", "--index", small_index, "--topics", str(topics), "--qrels", str(qrels),
                         "--scorers", "bmx", "--window", "10", "--no-pipeline", "--no-plots", "--quiet",
                         "--augmentations", str(by_id), "--out", str(out_dir), *conn)
    assert code == 0, err
    assert "applies to the rerankers (bmx); the engine's BM25 rows rank the original queries" in err
    summary = json.loads((out_dir / "results.json").read_text())
    assert summary["systems"]["bmx"]["params"]["augmentation"]["file"] == "by-id.jsonl"
    eval_run = (out_dir / "runs" / "bmx.trec").read_text().splitlines() if (out_dir / "runs" / "bmx.trec").exists() \
        else next(p for p in out_dir.rglob("*bmx*.trec")).read_text().splitlines()
    assert [ln.split()[:5] for ln in eval_run] == [ln.split()[:5] for ln in run_file.read_text().splitlines()]
    # topic 1's judged c is found only through the variant: recall is 1 with it
    assert summary["results"]["bmx"]["recall@100"] == 1.0
    assert summary["results"]["engine-bm25"]["recall@100"] == pytest.approx(0.75)

    code, out, err = run(capsys, "run", "--index", small_index, "--topics", str(topics), "--output",
                         str(tmp_path / "prf.trec"), "--scorer", "evolved", "--window", "10", "--augmenter", "prf",
                         "--augmenter-param", "fb_docs=3", "--augmenter-param", "min_docs=1", "--quiet", *conn)
    assert code == 0, err


def rr_score(engine: Engine, index: str, text: str, doc: str) -> float:
    hits = Reranker(engine, index, scorer="bmx", window=10).search(text, size=10)["hits"]["hits"]
    return float(next(h["_score"] for h in hits if h["_id"] == doc))


def test_tune_scores_the_augmented_arrays(engine: Engine, sample_dir: Path, eval_prefix: str,
                                          tmp_path: Path) -> None:
    ds = load_dataset(sample_dir)
    split = SplitSpec.parse("test:tune")
    queries = ds.queries(split)[:4]
    table = tmp_path / "aug.json"
    table.write_text(json.dumps({q.id: [["blood pressure", 0.4]] for q in queries}))
    from esbridge.augment import AugmentationSpec

    spec = AugmentationSpec.from_file(table)
    qs = collect_features(engine, ds, split, "bmx", index_prefix=eval_prefix, progress=False, augmentation=spec,
                          window=200)
    plain = collect_features(engine, ds, split, "bmx", index_prefix=eval_prefix, progress=False, window=200)
    augmented = [qf for qf in qs.queries if qf.augmented is not None]
    assert [qf.query_id for qf in augmented] == [q.id for q in queries]
    rr = Reranker(engine, qs_index(engine, ds, eval_prefix), scorer="bmx", window=200)
    params = get_scorer("bmx").params_type()
    for q, qf in zip(queries, augmented):
        assert qf.augmented is not None and qf.inputs is not None
        got = weighted_query_augmentation(get_scorer("bmx"), qf.inputs, qf.augmented, params).scores
        by_id = dict(zip(qf.candidates, got))
        resp = rr.search(q.text, size=20, augmentations=[("blood pressure", 0.4)])
        assert len(qf.candidates) == resp["_esbridge"]["window"] > 200
        for h in resp["hits"]["hits"]:
            assert by_id[h["_id"]] == pytest.approx(h["_score"], rel=1e-12)
    # the other queries are measured as without augmentation; the four differ
    assert evaluate(qs, "bmx", params) != evaluate(plain, "bmx", params)


def qs_index(engine: Engine, ds: Any, prefix: str) -> str:
    from esbridge.evaluation.indexing import PYSERINI_BM25, ensure_index, index_name

    return ensure_index(engine, ds, index_name(prefix, ds, PYSERINI_BM25), bm25=PYSERINI_BM25, progress=False)
