"""The parameter search on synthetic features: reproducible, better than or equal to the
defaults on training data, and held-out sets only reported."""

from __future__ import annotations

import numpy as np
import pytest

from esbridge.errors import ConfigurationError
from esbridge.evaluation.datasets import BeirDataset, SplitSpec
from esbridge.evaluation.metrics import FastJudge
from esbridge.evaluation.tune import QueryFeatures, QuerySet, evaluate, heldout_split, search, space_for
from esbridge.scoring import ChannelArrays, ScoringInput
from tests.data import beir


def _query(rng: np.random.Generator, qid: str, n: int = 60) -> QueryFeatures:
    t = 3
    tf = rng.poisson(0.6, size=(n, t)).astype(np.float64)
    doc_len = rng.integers(20, 400, size=n).astype(np.float64)
    arrays = ChannelArrays(terms=("a", "b", "c"), qtf=np.ones(t), df=np.array([5.0, 50.0, 400.0]), n_docs=1000,
                           tf=tf, doc_len=doc_len, avgdl=150.0)
    ids = tuple(f"{qid}-d{i}" for i in range(n))
    # relevant: documents with the rare term, shorter ones more often
    judged = {ids[i]: 1 for i in range(n) if tf[i, 0] > 0 and doc_len[i] < 250}
    judged = judged or {ids[0]: 1}
    return QueryFeatures(qid, ids, ScoringInput({"base": arrays}), FastJudge.build(ids, judged))


def _set(seed: int, name: str) -> QuerySet:
    rng = np.random.default_rng(seed)
    return QuerySet(name, "test", tuple(_query(rng, f"q{i}") for i in range(12)))


def test_search_is_reproducible_and_never_worse_than_defaults() -> None:
    train = [_set(1, "one"), _set(2, "two")]
    held = [_set(3, "three")]
    a = search("bm25", train, held, trials=12, seed=5, progress=False)
    b = search("bm25", train, held, trials=12, seed=5, progress=False)
    assert a.best == b.best and a.objective_best == b.objective_best
    assert a.objective_best >= a.objective_defaults
    assert len(a.trials) == 12
    assert a.trials[0][2] == {"k1": 0.9, "b": 0.4}  # the defaults are tried first
    assert set(a.train) == {"one/test", "two/test"} and set(a.heldout) == {"three/test"}
    data = a.to_json()
    assert data["objective"]["best"] == pytest.approx(
        np.mean([s.combined for _, s in a.train.values()]))


def test_evaluate_counts_queries_without_candidates() -> None:
    qs = _set(1, "one")
    empty = QueryFeatures("none", (), None, FastJudge.build((), {"x": 1}))
    both = QuerySet("one", "test", (*qs.queries, empty))
    from esbridge.scoring.bm25 import BM25Params

    full, with_empty = evaluate(qs, "bm25", BM25Params()), evaluate(both, "bm25", BM25Params())
    assert with_empty.ndcg10 == pytest.approx(full.ndcg10 * 12 / 13)


def test_spaces_and_heldout_splits() -> None:
    assert [d.name for d in space_for("bmx")] == ["alpha", "beta"]
    assert "w_pfx" not in [d.name for d in space_for("evolved")]
    assert "w_pfx" in [d.name for d in space_for("evolved", "all")]
    assert "w_bi" not in [d.name for d in space_for("evolved", fixed={"w_bi": 0.1})]
    with pytest.raises(ConfigurationError, match="tunable: evolved, bmx, bm25"):
        space_for("arch_c")
    scifact = BeirDataset(beir("scifact"))
    assert heldout_split(scifact, SplitSpec("train")) == SplitSpec("test")
    assert heldout_split(scifact, SplitSpec.parse("test:tune")) == SplitSpec.parse("test:heldout")
    assert heldout_split(scifact, SplitSpec("test")) is None
