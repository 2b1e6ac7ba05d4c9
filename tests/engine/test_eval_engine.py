"""``esbridge eval`` end to end on the shipped SciFact sample (1,000 abstracts, 50 judged claims)
on a real engine.

The evaluation indices (prefix :func:`eval_prefix <tests.conftest.eval_prefix>`) are reused while
their content fingerprint matches, as the command does for users; they are kept between runs only
on the suite's own nodes.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from esbridge.cli.main import main
from esbridge.engine.client import Engine
from esbridge.evaluation.datasets import SplitSpec, load_dataset
from esbridge.evaluation.indexing import PYSERINI_BM25, ensure_index, index_name
from esbridge.evaluation.runner import BASELINE_DEFAULT, BASELINE_PYSERINI, EvalConfig, run_evaluation
from esbridge.evaluation.tune import collect_features, evaluate
from esbridge.index.definitions import index_meta
from esbridge.rerank import Reranker
from esbridge.scoring import get_scorer
from tests.data import SAMPLE_NAME

MEASURES = {"ndcg@10", "recall@100", "recall@1000", "map", "p@5", "combined_score"}


def _uuid(engine: Engine, index: str) -> str:
    resp = engine.request("GET", f"/{index}/_settings/index.uuid")
    return str(next(iter(resp.values()))["settings"]["index"]["uuid"])


def _ranked(path: Path) -> tuple[dict[str, list[str]], dict[str, dict[str, float]]]:
    """A TREC run file's ranking per query (by its rank column) and each document's score."""
    rows: dict[str, list[tuple[int, str, float]]] = {}
    for line in path.read_text().splitlines():
        qid, _, doc, rank, score, _ = line.split()
        rows.setdefault(qid, []).append((int(rank), doc, float(score)))
    return ({q: [doc for _, doc, _ in sorted(r)] for q, r in rows.items()},
            {q: {doc: score for _, doc, score in r} for q, r in rows.items()})


def _ir_measures_means(qrels: dict[str, dict[str, int]], ranking: dict[str, list[str]]) -> dict[str, float]:
    """The reported measures computed by ir-measures itself on ``ranking`` (best first)."""
    import ir_measures
    from ir_measures import AP, P, R, nDCG

    names = {nDCG @ 10: "ndcg@10", R @ 100: "recall@100", R @ 1000: "recall@1000", AP: "map", P @ 5: "p@5"}
    run = {q: {doc: float(len(docs) - i) for i, doc in enumerate(docs)} for q, docs in ranking.items()}
    per_query = {q: dict.fromkeys(names.values(), 0.0) for q in qrels}  # a query without hits scores 0
    for m in ir_measures.iter_calc(list(names), qrels, run):
        per_query[m.query_id][names[m.measure]] = m.value
    means = {name: float(np.mean([v[name] for v in per_query.values()])) for name in names.values()}
    means["combined_score"] = 0.8 * means["recall@100"] + 0.2 * means["ndcg@10"]
    return means


def test_eval_command_on_the_sample_is_deterministic(engine: Engine, sample_dir: Path, eval_prefix: str,
                                                     tmp_path: Path) -> None:
    def run(name: str) -> None:
        # the same command each time (the reports record it), its files then moved aside
        argv = ["eval", "--dataset", str(sample_dir), "--scorers", "bm25,evolved", "--url", engine.options.url,
                "--out", str(tmp_path / "out"), "--json", str(tmp_path / "out.json"), "--quiet",
                "--index-prefix", eval_prefix, "--no-plots",
                "--engine-hybrid-depth", "0"]  # the engines' own hybrid rows: test_run_and_eval_index.py
        assert main(argv) == 0
        (tmp_path / "out").rename(tmp_path / name)
        (tmp_path / "out.json").rename(tmp_path / f"{name}.json")

    run("first")
    ds = load_dataset(sample_dir)
    index = index_name(eval_prefix, ds, PYSERINI_BM25)
    uuid = _uuid(engine, index)
    run("second")
    assert _uuid(engine, index) == uuid  # reused, not rebuilt

    data = json.loads((tmp_path / "first.json").read_text())
    assert {"dataset", "split", "queries", "results"} <= set(data)
    assert (data["dataset"], data["split"], data["queries"]) == (SAMPLE_NAME, "test", len(ds.queries("test")))
    assert list(data["results"]) == [BASELINE_PYSERINI, BASELINE_DEFAULT, "bm25", "evolved",
                                     "semantic", "keyword", "hybrid"]
    qrels = ds.qrels("test")
    for system, values in data["results"].items():
        assert set(values) == MEASURES
        assert all(0.0 <= v <= 1.0 for v in values.values())
        # every figure is what ir-measures gives on the run the command wrote
        ranking, _ = _ranked(tmp_path / "first" / "runs" / f"{system}.trec")
        assert values == pytest.approx(_ir_measures_means(qrels, ranking), abs=1e-9), system
    # the engine's BM25 run is the engine's own hits with their scores (written with 6 decimals)
    _, scores = _ranked(tmp_path / "first" / "runs" / f"{BASELINE_PYSERINI}.trec")
    for q in ds.queries("test"):
        hits = engine.search(index, {"size": 1000, "_source": False,
                                     "query": {"match": {"esb_all": q.text}}})["hits"]["hits"]
        engine_scores = {str(h["_id"]): float(h["_score"]) for h in hits}
        assert scores.get(q.id, {}) == pytest.approx(engine_scores, rel=0, abs=6e-7), q.id
    # reranking keeps the candidate set
    r1000 = {v["recall@1000"] for k, v in data["results"].items()
             if k not in (BASELINE_DEFAULT, "semantic", "keyword", "hybrid")}
    assert len(r1000) == 1
    for rel in ("results.json", "results.md", "per_query.tsv", "runs/evolved.trec", "runs/hybrid.trec",
                f"runs/{BASELINE_PYSERINI}.trec", f"runs/{BASELINE_DEFAULT}.trec"):
        assert (tmp_path / "first" / rel).read_bytes() == (tmp_path / "second" / rel).read_bytes(), rel
    meta = index_meta(engine, index)["eval"]
    assert meta["docs"] == ds.corpus_size() and meta["bm25"] == list(PYSERINI_BM25)


def test_rankings_are_the_rerankers_and_the_engines(engine: Engine, sample_dir: Path, eval_prefix: str) -> None:
    ds = load_dataset(sample_dir)
    result = run_evaluation(engine, ds, EvalConfig(scorers=("bmx",), index_prefix=eval_prefix, progress=False))
    index = result.index
    rr = Reranker(engine, index, scorer="bmx", window=1000)
    for q in ds.queries("test")[:4]:
        resp = rr.search(q.text, size=10)
        got = result.systems["bmx"].scores[q.id][:10]
        np.testing.assert_allclose([h["_score"] for h in resp["hits"]["hits"]], got, rtol=1e-12)
        if len(set(got)) == len(got):
            assert [h["_id"] for h in resp["hits"]["hits"]] == result.systems["bmx"].ranking[q.id][:10]
        body = {"size": 10, "query": {"match": {"esb_all": q.text}}}
        hits = engine.search(index, body)["hits"]["hits"]
        np.testing.assert_allclose([h["_score"] for h in hits],
                                   result.systems[BASELINE_PYSERINI].scores[q.id][:10], rtol=1e-6)


def test_tuning_features_score_as_the_reranker_does(engine: Engine, sample_dir: Path, eval_prefix: str) -> None:
    ds = load_dataset(sample_dir)
    ds_split = SplitSpec.parse("test:tune")
    qs = collect_features(engine, ds, ds_split, "evolved", index_prefix=eval_prefix, progress=False)
    assert len(qs.queries) == len(ds.queries(ds_split)) and qs.label == f"{SAMPLE_NAME}/test:tune"
    index = ensure_index(engine, ds, index_name(eval_prefix, ds, PYSERINI_BM25), bm25=PYSERINI_BM25,
                         progress=False)
    rr = Reranker(engine, index, scorer="evolved", window=1000)
    texts = {q.id: q.text for q in ds.queries(ds_split)}
    params = get_scorer("evolved").params_type()
    for qf in qs.queries[:3]:
        assert qf.inputs is not None
        scores = get_scorer("evolved").fn(qf.inputs, params).scores
        by_id = dict(zip(qf.candidates, scores))
        for h in rr.search(texts[qf.query_id], size=10)["hits"]["hits"]:
            assert by_id[h["_id"]] == pytest.approx(h["_score"], rel=1e-12)
    # the fast judge agrees with the full evaluation on the same queries
    full = run_evaluation(engine, ds, EvalConfig(scorers=("evolved",), split=ds_split, baselines=False,
                                                 index_prefix=eval_prefix, progress=False))
    fast = evaluate(qs, "evolved", params)
    assert fast.ndcg10 == pytest.approx(full.means["evolved"]["ndcg@10"], abs=1e-12)
    assert fast.recall100 == pytest.approx(full.means["evolved"]["recall@100"], abs=1e-12)
