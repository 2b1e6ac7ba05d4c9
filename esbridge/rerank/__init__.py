"""Rerank and rescore through the engine.

A :class:`Reranker` is bound to an engine, an index, a scorer and a window; its
:meth:`~Reranker.search`, :meth:`~Reranker.rescore` and :meth:`~Reranker.rank` (a candidate
set ranked; equal scores keep the first stage's order) are the API.  The package follows
the data:

* :mod:`esbridge.rerank.first_stage`: how candidates are found (:class:`FirstStage`), the
  first-stage query built from analysed tokens (no engine calls);
* :mod:`esbridge.rerank.candidates`: the analysed query, the candidates, and their ranking
  by scores (:func:`rank_order`, no engine calls);
* :mod:`esbridge.rerank.pipeline`: the steps that talk to the engine, written once as plans
  (:class:`~esbridge.rerank.pipeline.RerankerCore`), for this synchronous :class:`Reranker`
  and for :class:`esbridge.aio.AsyncReranker`;
* :mod:`esbridge.rerank.reranker`: :class:`Reranker`.
"""

from esbridge.rerank.candidates import (
    AnalyzedQuery,
    CandidateUnion,
    Ranking,
    RerankStats,
    Retrieved,
    hit_version,
    rank_order,
)
from esbridge.rerank.first_stage import MAX_FIRST_STAGE_TERMS, FirstStage
from esbridge.rerank.pipeline import INLINE_SOURCE_WINDOW, RerankerCore
from esbridge.rerank.reranker import Reranker, SharedAnalysis

__all__ = [
    "INLINE_SOURCE_WINDOW",
    "MAX_FIRST_STAGE_TERMS",
    "AnalyzedQuery",
    "CandidateUnion",
    "FirstStage",
    "Ranking",
    "RerankStats",
    "Retrieved",
    "Reranker",
    "RerankerCore",
    "SharedAnalysis",
    "hit_version",
    "rank_order",
]
