"""The arrays every scorer reads.

One :class:`ChannelArrays` holds, for one channel (``base``, ``prefix``, ``bigram``
or ``micro``) and one query, everything a lexical scorer needs about the
candidates: a candidates x query-terms frequency matrix, the candidates' lengths,
the query's term counts and the index-wide statistics.  A :class:`ScoringInput`
groups the channels of one query.  Nothing here talks to an engine: the feature
layer builds these arrays from term vectors, tests build them by hand.

Shapes: ``D`` candidates, ``T`` distinct query terms of the channel.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]

#: Channel names, in the order the evolved formula adds them.
CHANNELS: tuple[str, ...] = ("base", "prefix", "bigram", "micro")


@dataclass(frozen=True)
class FieldArrays:
    """Per-field frequencies of the query terms, for BM25F.

    Attributes:
        tf: ``(D, T)`` occurrences of each query term in this field of each candidate.
        doc_len: ``(D,)`` length of the field in tokens (exact, not Lucene's norm).
        avgdl: mean length of the field over the index.
    """

    tf: FloatArray
    doc_len: FloatArray
    avgdl: float


@dataclass(frozen=True)
class ChannelArrays:
    """Everything a scorer needs for one channel of one query.

    Attributes:
        terms: the channel's distinct query terms, as the engine's analyzer emitted them.
        qtf: ``(T,)`` how often each term occurs in the analysed query.
        df: ``(T,)`` index-wide document frequency of each term (0 if absent).
        n_docs: index-wide number of documents that have this channel's field (``N``).
        tf: ``(D, T)`` (pseudo-)frequency of each term in each candidate; with several
            text fields, ``sum_f w_f * tf_f``.
        doc_len: ``(D,)`` (pseudo-)length of each candidate, ``sum_f w_f * |d|_f``.
        avgdl: index-wide mean of ``doc_len``.
        fields: optional per-field arrays (needed by the BM25F scorers only).
        unique_terms: optional ``(D,)`` number of distinct terms in each candidate
            (architecture B's focus prior); ``None`` if unknown.
        entropy: optional ``(T,)`` collection entropy ``Ẽ(t)`` of each term for BMX:
            ``-sum_j p_j ln p_j`` over the documents containing ``t``, with
            ``p_j = sigmoid(tf(t, d_j))``.
        mean_idf: optional mean IDF over the index's vocabulary (architecture C's IDF
            lift); ``None`` falls back to the mean over the query's terms.
    """

    terms: tuple[str, ...]
    qtf: FloatArray
    df: FloatArray
    n_docs: int
    tf: FloatArray
    doc_len: FloatArray
    avgdl: float
    fields: Mapping[str, FieldArrays] = field(default_factory=dict)
    unique_terms: FloatArray | None = None
    entropy: FloatArray | None = None
    mean_idf: float | None = None

    @property
    def n_candidates(self) -> int:
        """Number of candidates ``D``."""
        return int(self.tf.shape[0])

    @property
    def n_terms(self) -> int:
        """Number of distinct query terms ``T``."""
        return int(self.tf.shape[1])

    def __post_init__(self) -> None:
        d, t = self.tf.shape if self.tf.ndim == 2 else (-1, -1)
        if self.tf.ndim != 2:
            raise ValueError(f"tf must be a 2-d (candidates x terms) array, got shape {self.tf.shape}")
        if len(self.terms) != t:
            raise ValueError(f"terms has {len(self.terms)} entries but tf has {t} columns")
        for name in ("qtf", "df"):
            arr = getattr(self, name)
            if arr.shape != (t,):
                raise ValueError(f"{name} must have shape ({t},), got {arr.shape}")
        if self.doc_len.shape != (d,):
            raise ValueError(f"doc_len must have shape ({d},), got {self.doc_len.shape}")
        if self.n_docs < 0:
            raise ValueError(f"n_docs must be >= 0, got {self.n_docs}")


@dataclass(frozen=True)
class ScoringInput:
    """The channels of one query over one set of candidates.

    Every channel has the same candidates in the same order.  A channel that the
    query produced no terms for is present with ``T = 0``.
    """

    channels: Mapping[str, ChannelArrays]

    def channel(self, name: str) -> ChannelArrays:
        """The arrays of channel ``name``; a clear error if it was not fetched."""
        try:
            return self.channels[name]
        except KeyError:
            raise KeyError(
                f"channel {name!r} is not in this input; it has {sorted(self.channels)}"
            ) from None

    @property
    def n_candidates(self) -> int:
        """Number of candidates (0 when there are no channels)."""
        for arrays in self.channels.values():
            return arrays.n_candidates
        return 0


@dataclass(frozen=True)
class ScoreResult:
    """Scores for the candidates, in input order, with the parts that made them.

    Attributes:
        scores: ``(D,)`` final score of each candidate.
        parts: named ``(D,)`` arrays (per channel evidence, each multiplier, BMX's
            entropy and similarity terms, ...) for explanations.
    """

    scores: FloatArray
    parts: Mapping[str, FloatArray] = field(default_factory=dict)
