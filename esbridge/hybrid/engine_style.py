"""The engines' own hybrid search, computed with the engines' arithmetic: the baseline esbridge's
pipeline has to beat.

Both engines fuse a BM25 query with a kNN query themselves:

* **OpenSearch**: the ``hybrid`` query with a search pipeline's ``normalization-processor``, whose
  defaults are ``min_max`` normalisation and the ``arithmetic_mean`` combination.  Each sub-query's
  scores are mapped to ``(s − min) / (max − min)`` over that sub-query's results (a score that maps to
  exactly 0 becomes 0.001, so it still counts as found; a list whose scores are all equal maps them
  to 1), and a document's combined score is ``Σ_i w_i · n_i / Σ_i w_i`` over the sub-queries, with
  ``n_i = 0`` for a sub-query that did not return it and every weight 1 by default.  The engine
  returns as many documents as its longest sub-query list.
* **Elasticsearch**: the ``rrf`` retriever, reciprocal rank fusion ``Σ_i 1 / (k + rank_i)`` with
  ``rank_constant`` k = 60, ranks starting at 1, nothing from a list that lacks the document; it keeps
  ``rank_window_size`` documents.

:func:`minmax_mean` and :func:`rrf` compute those rankings from the two result lists (ids and
scores, as the engine returned them); :func:`engine_hybrid` gives both.  :mod:`esbridge.evaluation`
measures them beside esbridge's systems as the rows ``engine-hybrid-minmax`` and
``engine-hybrid-rrf``: the engine's BM25 on the query (its default similarity) and an exact kNN over
one vector per document with the model the pipeline uses, each list's top :data:`DEPTH`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from esbridge.errors import ConfigurationError
from esbridge.hybrid.fusion import Fusion, RankedList, fuse

__all__ = ["DEPTH", "ENGINE_HYBRID_MINMAX", "ENGINE_HYBRID_RRF", "MIN_SCORE", "RANK_CONSTANT",
           "engine_hybrid", "minmax_mean", "minmax_normalise", "rrf"]

#: The row of OpenSearch's fusion (min-max, arithmetic mean).
ENGINE_HYBRID_MINMAX = "engine-hybrid-minmax"
#: The row of Elasticsearch's fusion (reciprocal rank fusion, k = 60).
ENGINE_HYBRID_RRF = "engine-hybrid-rrf"
#: Documents each sub-query returns, and the fused ranking keeps (the engines' usual window).
DEPTH = 100
#: What OpenSearch's min-max normalisation gives the lowest score of a list (0 would read as "not found").
MIN_SCORE = 0.001
#: Elasticsearch's default ``rank_constant``.
RANK_CONSTANT = 60.0


def minmax_normalise(scores: np.ndarray) -> np.ndarray:
    """One sub-query's scores as OpenSearch's ``min_max`` normalisation maps them: ``(s − min) /
    (max − min)``, a result of exactly 0 raised to :data:`MIN_SCORE`, all scores 1 where they are
    all equal."""
    s = np.asarray(scores, dtype=np.float64)
    if s.size == 0:
        return s.copy()
    lo, hi = float(s.min()), float(s.max())
    if hi == lo:
        return np.ones_like(s)
    out = (s - lo) / (hi - lo)
    out[out == 0.0] = MIN_SCORE
    return out


def _check(lists: Mapping[str, RankedList], weights: Mapping[str, float] | None) -> dict[str, float]:
    if not lists:
        raise ConfigurationError("an engine-style hybrid needs at least one result list")
    given = dict(weights or {})
    unknown = sorted(set(given) - set(lists))
    if unknown:
        raise ConfigurationError(f"weights given for {', '.join(unknown)}, which are not among the lists "
                                 f"{', '.join(lists)}")
    out = {name: float(given.get(name, 1.0)) for name in lists}
    if any(not np.isfinite(w) or w < 0 for w in out.values()) or sum(out.values()) <= 0:
        raise ConfigurationError(f"weights must be finite, >= 0 and not all 0, got {out}")
    return out


def minmax_mean(lists: Mapping[str, RankedList], weights: Mapping[str, float] | None = None, *,
                depth: int | None = None) -> tuple[list[str], np.ndarray]:
    """OpenSearch's ``normalization-processor`` defaults over ``lists`` (sub-query name → its
    results): each list min-max normalised (:func:`minmax_normalise`), then the weighted arithmetic
    mean over every sub-query, 0 where a sub-query lacks the document.

    Args:
        weights: per list (default 1 each).
        depth: documents kept (default: as many as the longest list, the engine's rule).

    Returns:
        ``(ids, scores)``, best first; equal scores keep the order in which the lists first name
        the documents.
    """
    w = _check(lists, weights)
    normalised = {name: RankedList(list(lst.ids), minmax_normalise(lst.scores)) for name, lst in lists.items()}
    ids, total, _ = fuse(normalised, w, Fusion.SUM)
    keep = depth if depth is not None else max(len(lst.ids) for lst in lists.values())
    return ids[:keep], total[:keep] / sum(w.values())


def rrf(lists: Mapping[str, RankedList], *, rank_constant: float = RANK_CONSTANT,
        depth: int | None = None) -> tuple[list[str], np.ndarray]:
    """Elasticsearch's ``rrf`` retriever over ``lists``: ``Σ 1 / (rank_constant + rank)``, ranks
    from 1 in each list's score order, nothing from a list that lacks the document.

    Args:
        depth: documents kept (``rank_window_size``; default: as many as the longest list).
    """
    _check(lists, None)
    if not np.isfinite(rank_constant) or rank_constant < 1:
        raise ConfigurationError(f"rank_constant must be >= 1, got {rank_constant}")
    ids, total, _ = fuse(lists, dict.fromkeys(lists, 1.0), Fusion.RRF, rrf_k=rank_constant)
    keep = depth if depth is not None else max(len(lst.ids) for lst in lists.values())
    return ids[:keep], total[:keep]


def engine_hybrid(lexical: RankedList, semantic: RankedList, *,
                  depth: int = DEPTH) -> dict[str, tuple[list[str], np.ndarray]]:
    """Both engines' fusions of a BM25 list and a kNN list, each cut to its top ``depth`` first:
    ``{ENGINE_HYBRID_MINMAX: (ids, scores), ENGINE_HYBRID_RRF: (ids, scores)}``."""
    if depth < 1:
        raise ConfigurationError(f"the engine-style hybrid's depth must be >= 1, got {depth}")
    lists = {"bm25": _top(lexical, depth), "knn": _top(semantic, depth)}
    return {ENGINE_HYBRID_MINMAX: minmax_mean(lists, depth=depth), ENGINE_HYBRID_RRF: rrf(lists, depth=depth)}


def _top(lst: RankedList, k: int) -> RankedList:
    """The ``k`` best of a list (score descending, equal scores in list order)."""
    scores = np.asarray(lst.scores, dtype=np.float64)
    order = np.argsort(-scores, kind="stable")[:k]
    ids: Sequence[str] = lst.ids
    return RankedList([ids[i] for i in order], scores[order])
