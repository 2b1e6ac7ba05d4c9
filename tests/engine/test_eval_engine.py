"""``esbridge eval`` end to end on MED (1033 documents, 30 queries) on a real engine.

The evaluation indices (prefix ``esb-test-eval``) are kept between runs and reused
while their content fingerprint matches, as the command does for users.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from esbridge import cli_eval
from esbridge.engine.client import Engine
from esbridge.evaluation.datasets import SplitSpec, load_dataset
from esbridge.evaluation.indexing import PYSERINI_BM25, ensure_index, index_name
from esbridge.evaluation.runner import BASELINE_DEFAULT, BASELINE_PYSERINI, EvalConfig, run_evaluation
from esbridge.evaluation.tune import collect_features, evaluate
from esbridge.index.definitions import index_meta
from esbridge.rerank import Reranker
from esbridge.scoring import get_scorer
from tests.data import beir

PREFIX = "esb-test-eval"
MEASURES = {"ndcg@10", "recall@100", "recall@1000", "map", "p@5", "combined_score"}


def _uuid(engine: Engine, index: str) -> str:
    resp = engine.request("GET", f"/{index}/_settings/index.uuid")
    return str(next(iter(resp.values()))["settings"]["index"]["uuid"])


def test_eval_command_on_med_is_deterministic(engine: Engine, tmp_path: Path) -> None:
    def run(name: str) -> None:
        # the same command each time (the reports record it), its files then moved aside
        argv = ["eval", "--dataset", str(beir("med")), "--scorers", "bm25,evolved", "--url", engine.options.url,
                "--out", str(tmp_path / "out"), "--json", str(tmp_path / "out.json"), "--quiet",
                "--index-prefix", PREFIX, "--no-plots"]
        assert cli_eval.main(argv) == 0
        (tmp_path / "out").rename(tmp_path / name)
        (tmp_path / "out.json").rename(tmp_path / f"{name}.json")

    run("first")
    index = index_name(PREFIX, load_dataset(beir("med")), PYSERINI_BM25)
    uuid = _uuid(engine, index)
    run("second")
    assert _uuid(engine, index) == uuid  # reused, not rebuilt

    data = json.loads((tmp_path / "first.json").read_text())
    assert {"dataset", "split", "queries", "results"} <= set(data)
    assert (data["dataset"], data["split"], data["queries"]) == ("med", "test", 30)
    assert list(data["results"]) == [BASELINE_PYSERINI, BASELINE_DEFAULT, "bm25", "evolved",
                                     "semantic", "keyword", "hybrid"]
    for values in data["results"].values():
        assert set(values) == MEASURES
        assert all(0.0 <= v <= 1.0 for v in values.values())
    # the engine's BM25 is in the range published for MED, and reranking keeps the candidate set
    assert 0.60 < data["results"][BASELINE_PYSERINI]["ndcg@10"] < 0.75
    r1000 = {v["recall@1000"] for k, v in data["results"].items()
             if k not in (BASELINE_DEFAULT, "semantic", "keyword", "hybrid")}
    assert len(r1000) == 1
    # the pipeline ranks better than the engine's BM25 on MED (measured: about +0.10 nDCG@10)
    assert data["results"]["hybrid"]["ndcg@10"] > data["results"][BASELINE_PYSERINI]["ndcg@10"] + 0.05
    for rel in ("results.json", "results.md", "per_query.tsv", "runs/evolved.trec", "runs/hybrid.trec",
                f"runs/{BASELINE_PYSERINI}.trec", f"runs/{BASELINE_DEFAULT}.trec"):
        assert (tmp_path / "first" / rel).read_bytes() == (tmp_path / "second" / rel).read_bytes(), rel
    meta = index_meta(engine, index)["eval"]
    assert meta["docs"] == 1033 and meta["bm25"] == list(PYSERINI_BM25)


def test_rankings_are_the_rerankers_and_the_engines(engine: Engine) -> None:
    ds = load_dataset(beir("med"))
    result = run_evaluation(engine, ds, EvalConfig(scorers=("bmx",), index_prefix=PREFIX, progress=False))
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


def test_tuning_features_score_as_the_reranker_does(engine: Engine) -> None:
    ds = load_dataset(beir("med"))
    ds_split = SplitSpec.parse("test:tune")
    qs = collect_features(engine, ds, ds_split, "evolved", index_prefix=PREFIX, progress=False)
    assert len(qs.queries) == 15 and qs.label == "med/test:tune"
    index = ensure_index(engine, ds, index_name(PREFIX, ds, PYSERINI_BM25), bm25=PYSERINI_BM25, progress=False)
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
                                                 index_prefix=PREFIX, progress=False))
    fast = evaluate(qs, "evolved", params)
    assert fast.ndcg10 == pytest.approx(full.means["evolved"]["ndcg@10"], abs=1e-12)
    assert fast.recall100 == pytest.approx(full.means["evolved"]["recall@100"], abs=1e-12)
