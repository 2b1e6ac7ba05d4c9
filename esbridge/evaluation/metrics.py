"""Retrieval measures, computed by ir-measures (trec_eval through pytrec_eval).

==============  ==========================  =========================================
name            ir-measures                 trec_eval
==============  ==========================  =========================================
``ndcg@10``     ``nDCG@10``                 ``ndcg_cut.10`` (linear gains: gain = grade)
``recall@100``  ``R@100``                   ``recall.100`` (relevant = grade >= 1)
``recall@1000`` ``R@1000``                  ``recall.1000``
``map``         ``AP``                      ``map``
``p@5``         ``P@5``                     ``P.5``
==============  ==========================  =========================================

plus ``combined_score = 0.8 · R@100 + 0.2 · nDCG@10`` (docs/scoring.md §8).

A run is a ranked list of document ids per query: the measures see the ranks,
not the scores, so ties are resolved once (by the caller: equal scores keep the
first stage's order, :func:`esbridge.rerank.rank_order`) and trec_eval's own tie
rule (reverse docno order) never applies.  A judged query
missing from the run, or with no hits, scores 0 on every measure and still
counts in the mean.

:class:`FastJudge` computes ``ndcg@10`` and ``recall@k`` in numpy for tuning, where
thousands of parameter settings are scored; a test pins it to ir-measures.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from esbridge.errors import ConfigurationError
from esbridge.rerank.candidates import rank_order

__all__ = [
    "MEASURES",
    "FastJudge",
    "combined_score",
    "mean_metrics",
    "per_query_metrics",
]

#: Reported measures, in table order.
MEASURES: tuple[str, ...] = ("ndcg@10", "recall@100", "recall@1000", "map", "p@5")
#: Weight of R@100 in the combined score (nDCG@10 gets the rest).
RECALL_WEIGHT = 0.8

Run = Mapping[str, Sequence[str]]
Qrels = Mapping[str, Mapping[str, int]]


def _ir_measures() -> Any:
    try:
        import ir_measures
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ConfigurationError(
            "evaluation needs ir-measures; install it with: pip install 'esbridge[eval]'"
        ) from err
    return ir_measures


def _measure_objects() -> dict[str, Any]:
    irm = _ir_measures()
    return {
        "ndcg@10": irm.nDCG @ 10,
        "recall@100": irm.R @ 100,
        "recall@1000": irm.R @ 1000,
        "map": irm.AP,
        "p@5": irm.P @ 5,
    }


def combined_score(recall_at_100: float, ndcg_at_10: float) -> float:
    """``0.8 · R@100 + 0.2 · nDCG@10`` (docs/scoring.md §8)."""
    return RECALL_WEIGHT * recall_at_100 + (1.0 - RECALL_WEIGHT) * ndcg_at_10


def per_query_metrics(qrels: Qrels, run: Run) -> dict[str, dict[str, float]]:
    """Every measure of :data:`MEASURES` for every judged query: ``{qid: {measure: value}}``.

    Args:
        qrels: ``{qid: {doc_id: grade}}``; the evaluated queries are its keys.
        run: ``{qid: [doc_id, ...]}`` best first (at most 1000 are read by trec_eval's
            measures here; longer lists are fine).
    """
    irm = _ir_measures()
    objects = _measure_objects()
    by_measure = {m: name for name, m in objects.items()}
    out: dict[str, dict[str, float]] = {q: {name: 0.0 for name in MEASURES} for q in qrels}
    scored = {
        q: {doc: float(len(docs) - rank) for rank, doc in enumerate(dict.fromkeys(docs))}
        for q, docs in run.items() if q in qrels and docs
    }
    if not scored:
        return out
    provider = irm.providers.registry["pytrec_eval"]
    evaluator = provider.evaluator(list(objects.values()),
                                   {q: {d: int(g) for d, g in j.items()} for q, j in qrels.items()})
    for metric in evaluator.iter_calc(scored):
        out[metric.query_id][by_measure[metric.measure]] = float(metric.value)
    return out


def mean_metrics(per_query: Mapping[str, Mapping[str, float]],
                 queries: Sequence[str] | None = None) -> dict[str, float]:
    """Mean of each measure over ``queries`` (default: all), plus ``combined_score``."""
    qids = list(per_query) if queries is None else list(queries)
    if not qids:
        raise ConfigurationError("no judged queries to average over")
    means = {name: float(np.mean([per_query[q][name] for q in qids])) for name in MEASURES}
    means["combined_score"] = combined_score(means["recall@100"], means["ndcg@10"])
    return means


@dataclass(frozen=True)
class FastJudge:
    """The judgments of one query against a fixed candidate list (in first-stage order), for
    fast scoring.

    Attributes:
        gains: ``(D,)`` grade of each candidate (0 when unjudged or negative).
        ideal_dcg10: the ideal DCG@10 of the query's judgments.
        n_relevant: number of documents judged relevant (grade >= 1).
    """

    gains: np.ndarray
    ideal_dcg10: float
    n_relevant: int

    @classmethod
    def build(cls, candidates: Sequence[str], judgments: Mapping[str, int]) -> FastJudge:
        gains = np.array([max(int(judgments.get(d, 0)), 0) for d in candidates], dtype=np.float64)
        grades = sorted((g for g in judgments.values() if g > 0), reverse=True)[:10]
        ideal = float(sum(g / np.log2(i + 2) for i, g in enumerate(grades)))
        return cls(gains, ideal, sum(1 for g in judgments.values() if g > 0))

    def ranking(self, scores: np.ndarray) -> np.ndarray:
        """Candidate indices best first: score descending, equal scores in the candidates' order
        (:func:`esbridge.rerank.rank_order`, the rule of every command)."""
        return rank_order(scores)

    def ndcg10_recall(self, scores: np.ndarray, k: int = 100) -> tuple[float, float]:
        """``(nDCG@10, R@k)`` of the ranking ``scores`` induce."""
        if self.gains.size == 0:
            return 0.0, 0.0
        order = self.ranking(scores)
        g = self.gains[order]
        top = g[:10]
        dcg = float(top @ (1.0 / np.log2(np.arange(2, top.size + 2))))
        ndcg = dcg / self.ideal_dcg10 if self.ideal_dcg10 > 0 else 0.0
        recall = float(np.count_nonzero(g[:k] > 0)) / self.n_relevant if self.n_relevant else 0.0
        return ndcg, recall
