"""Measures: ir-measures against hand-worked figures, and the fast judge against ir-measures."""

from __future__ import annotations

import math

import numpy as np
import pytest

from esbridge.evaluation.metrics import FastJudge, combined_score, mean_metrics, per_query_metrics
from esbridge.rerank import Ranking

QRELS = {
    "q1": {"a": 2, "b": 1, "c": 0, "z": 1},  # z is never retrieved
    "q2": {"x": 1},
    "q3": {"y": 1},  # missing from the run: scores 0 and still counts
}
RUN = {"q1": ["b", "c", "a", "d", "e", "f"], "q2": ["w", "x"], "q4": ["a"]}


def test_hand_worked_trec_eval_figures() -> None:
    pq = per_query_metrics(QRELS, RUN)
    assert set(pq) == {"q1", "q2", "q3"}  # q4 is not judged
    # q1: linear gains 1 (b), 0 (c), 2 (a); ideal 2, 1, 1
    dcg = 1 / math.log2(2) + 0 + 2 / math.log2(4)
    ideal = 2 / math.log2(2) + 1 / math.log2(3) + 1 / math.log2(4)
    assert pq["q1"]["ndcg@10"] == pytest.approx(dcg / ideal, abs=1e-12)
    assert pq["q1"]["recall@100"] == pytest.approx(2 / 3)
    assert pq["q1"]["recall@1000"] == pytest.approx(2 / 3)
    assert pq["q1"]["p@5"] == pytest.approx(2 / 5)
    assert pq["q1"]["map"] == pytest.approx((1 / 1 + 2 / 3) / 3)
    assert pq["q2"]["ndcg@10"] == pytest.approx(1 / math.log2(3))
    assert pq["q2"]["map"] == pytest.approx(0.5)
    assert pq["q3"] == {m: 0.0 for m in pq["q3"]}
    means = mean_metrics(pq)
    assert means["ndcg@10"] == pytest.approx((dcg / ideal + 1 / math.log2(3)) / 3)
    assert means["combined_score"] == pytest.approx(0.8 * means["recall@100"] + 0.2 * means["ndcg@10"])


def test_ranks_not_scores_decide() -> None:
    # the run lists "c" before "a": trec_eval must see that order even though a tie would
    # be broken otherwise (by reverse docno)
    pq = per_query_metrics({"q": {"a": 1}}, {"q": ["c", "a"]})
    assert pq["q"]["ndcg@10"] == pytest.approx(1 / math.log2(3))


def test_empty_run() -> None:
    pq = per_query_metrics({"q": {"a": 1}}, {})
    assert pq == {"q": {"ndcg@10": 0.0, "recall@100": 0.0, "recall@1000": 0.0, "map": 0.0, "p@5": 0.0}}


def test_combined_score() -> None:
    assert combined_score(0.5, 1.0) == pytest.approx(0.6)


def test_ranking_keeps_the_candidates_order_on_ties() -> None:
    ranking = Ranking.of(["d3", "d1", "d2", "d0"], [1.0, 2.0, 1.0, 1.0])
    assert ranking.ids == ["d1", "d3", "d2", "d0"]
    assert ranking.scores.tolist() == [2.0, 1.0, 1.0, 1.0]
    assert ranking.order.tolist() == [1, 0, 2, 3]
    assert Ranking.of([], []).ids == []


def test_fast_judge_matches_ir_measures() -> None:
    rng = np.random.default_rng(7)
    for trial in range(20):
        n = int(rng.integers(1, 300))
        cands = [f"d{i}" for i in rng.permutation(400)[:n]]
        judged = {f"d{i}": int(rng.integers(0, 4)) for i in rng.permutation(400)[:40]}
        scores = np.round(rng.normal(size=n), 1)  # many ties
        judge = FastJudge.build(cands, judged)
        nd, rc = judge.ndcg10_recall(scores, k=100)
        ranked = Ranking.of(cands, scores).ids
        assert [cands[i] for i in judge.ranking(scores)] == ranked
        pq = per_query_metrics({"q": judged}, {"q": ranked})["q"]
        assert nd == pytest.approx(pq["ndcg@10"], abs=1e-12), trial
        assert rc == pytest.approx(pq["recall@100"], abs=1e-12), trial
