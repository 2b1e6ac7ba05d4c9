"""The aggregator: one ranking from the result lists of several query strategies (docs/scoring.md §7.5).

The pipeline's rule (deduplicate; a document found by several strategies gets
the sum of its scores) needs scores on one scale, because a BM25 score, an
esbridge lexical score and a cosine are not comparable.  Each list is first
normalised on its own:

* ``zscore`` (default): ``(s − mean) / std`` over the list (all equal: 0).  Robust to
  a single outlying top score, and it keeps how far the best documents stand out.
* ``minmax``: ``(s − min) / (max − min)`` (all equal: 1).

A document missing from a list gets that list's lowest normalised score (it ranks
below everything the strategy returned), so the weighted sum

    fused(d) = Σ_s  w_s · norm_s(d)

is defined for every document of the union.  Reciprocal rank fusion (Cormack,
Clarke and Büttcher, SIGIR 2009) is the rank-only alternative,
``Σ_s w_s / (k + rank_s(d))`` with ``k = 60`` and no contribution from a list
that lacks ``d``.  ``sum`` is the source's own aggregator, the raw scores added,
``Σ_s w_s · s_d``, again with no contribution from a list that lacks ``d``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

import numpy as np

from esbridge.errors import ConfigurationError
from esbridge.rerank.candidates import rank_order

__all__ = ["Fusion", "RankedList", "normalise", "fuse"]


class Fusion(str, Enum):
    """How strategies' lists are combined."""

    ZSCORE = "zscore"
    MINMAX = "minmax"
    RRF = "rrf"
    SUM = "sum"

    @classmethod
    def parse(cls, value: str | Fusion) -> Fusion:
        try:
            return cls(value)
        except ValueError:
            raise ConfigurationError(
                f"unknown fusion {value!r}; choose one of {', '.join(f.value for f in cls)}") from None


@dataclass(frozen=True)
class RankedList:
    """One strategy's result: document ids and scores (any order; higher is better)."""

    ids: Sequence[str]
    scores: np.ndarray

    def __post_init__(self) -> None:
        if len(self.ids) != len(self.scores):
            raise ConfigurationError(f"a ranked list has {len(self.ids)} ids but {len(self.scores)} scores")


def normalise(scores: np.ndarray, method: Fusion | str) -> np.ndarray:
    """Scores of one list on the fusion scale (see the module text)."""
    s = np.asarray(scores, dtype=np.float64)
    m = Fusion.parse(method)
    if s.size == 0:
        return s.copy()
    if m is Fusion.MINMAX:
        lo, hi = float(s.min()), float(s.max())
        return np.ones_like(s) if hi <= lo else (s - lo) / (hi - lo)
    if m is Fusion.ZSCORE:
        sd = float(s.std())
        return np.zeros_like(s) if sd <= 0 else (s - float(s.mean())) / sd
    if m is Fusion.SUM:
        return s.copy()
    raise ConfigurationError("rrf fuses ranks, not scores: there is nothing to normalise")


def fuse(lists: Mapping[str, RankedList], weights: Mapping[str, float], method: Fusion | str = Fusion.ZSCORE,
         *, rrf_k: float = 60.0) -> tuple[list[str], np.ndarray, dict[str, np.ndarray]]:
    """Fuse ``lists`` (strategy name → list) with ``weights`` (strategy name → weight).

    Returns:
        ``(ids, scores, parts)``: the union of the lists' ids ordered by fused score (ties:
        the order in which the lists first name them, :func:`~esbridge.rerank.rank_order`), the
        fused scores, and per strategy the weighted contribution of each returned id.

    Raises:
        ConfigurationError: a weight is negative or not finite, or names no list.
    """
    m = Fusion.parse(method)
    for name, w in weights.items():
        if name not in lists:
            raise ConfigurationError(f"fusion weight given for {name!r}, which is not a strategy "
                                     f"({', '.join(lists) or 'none'})")
        if not np.isfinite(w) or w < 0:
            raise ConfigurationError(f"fusion weight of {name!r} must be finite and >= 0, got {w}")
    row: dict[str, int] = {}
    for lst in lists.values():
        for d in lst.ids:
            row.setdefault(d, len(row))
    ids = list(row)
    total = np.zeros(len(ids))
    parts: dict[str, np.ndarray] = {}
    for name, lst in lists.items():
        w = float(weights.get(name, 0.0))
        part = np.zeros(len(ids))
        if len(lst.ids) and w > 0:
            rows = np.fromiter((row[d] for d in lst.ids), dtype=np.int64, count=len(lst.ids))
            if m is Fusion.RRF:
                order = rank_order(lst.scores)
                ranks = np.empty(len(order), dtype=np.float64)
                ranks[order] = np.arange(1, len(order) + 1)
                part[rows] = w / (rrf_k + ranks)
            elif m is Fusion.SUM:
                part[rows] = w * np.asarray(lst.scores, dtype=np.float64)
            else:
                norm = normalise(lst.scores, m)
                part[:] = w * float(norm.min())
                part[rows] = w * norm
        parts[name] = part
        total += part
    order = rank_order(total)
    return [ids[i] for i in order], total[order], {k: v[order] for k, v in parts.items()}
