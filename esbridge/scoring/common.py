"""Pieces shared by the evolved scorer and architectures A, B and C.

- :class:`IdfVariant`: which IDF a scorer uses, chosen by ``Enum`` member;
- :class:`ChannelWeights`: how much each channel adds, so a caller can fetch only
  the channels a scorer reads with non-zero weight (:func:`channels_needed`);
- small numeric helpers that keep the scorers finite on edge cases (zero-length
  documents, empty queries, an empty index) and parameter checks that raise
  ``ValueError`` naming the offending parameter.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields
from enum import Enum
from typing import Protocol, runtime_checkable

import numpy as np

from esbridge.scoring.arrays import CHANNELS, ChannelArrays, FloatArray, ScoringInput
from esbridge.scoring.idf import lucene_idf, surprisal_idf

__all__ = [
    "ChannelWeights",
    "HasChannelWeights",
    "IdfVariant",
    "channels_needed",
]


class IdfVariant(str, Enum):
    """The IDF a scorer uses.

    ``SURPRISAL``: ``-ln((df + 1) / (N + 2))`` (architecture A, the evolved default).
    ``LUCENE``: ``ln(1 + (N - df + 0.5) / (df + 0.5))`` (Lucene BM25).
    """

    SURPRISAL = "surprisal"
    LUCENE = "lucene"

    def compute(self, df: FloatArray, n_docs: int) -> FloatArray:
        """This variant's IDF of each ``df``, clipped at 0.

        With ``df <= N`` both variants are already positive; the clip only acts on
        inconsistent statistics (``df > N``), where it keeps fractional powers of the
        IDF defined.
        """
        return np.maximum(_IDF_FUNCTIONS[self](df, n_docs), 0.0)


_IDF_FUNCTIONS: Mapping[IdfVariant, Callable[[FloatArray, int], FloatArray]] = {
    IdfVariant.SURPRISAL: surprisal_idf,
    IdfVariant.LUCENE: lucene_idf,
}


@dataclass(frozen=True)
class ChannelWeights:
    """Weight of each channel in a multi-channel score (0 = not read).

    Attributes:
        base, prefix, bigram, micro: the weight of that channel's relevance.
    """

    base: float = 1.0
    prefix: float = 0.0
    bigram: float = 0.0
    micro: float = 0.0

    def __post_init__(self) -> None:
        check_nonnegative(self)

    def as_dict(self) -> dict[str, float]:
        """``{channel: weight}`` in :data:`CHANNELS` order."""
        return {name: float(getattr(self, name)) for name in CHANNELS}

    def active(self) -> tuple[str, ...]:
        """The channels with a weight above 0, in :data:`CHANNELS` order."""
        return tuple(name for name, weight in self.as_dict().items() if weight > 0.0)


@runtime_checkable
class HasChannelWeights(Protocol):
    """Parameters of a multi-channel scorer."""

    @property
    def channel_weights(self) -> ChannelWeights:
        """The weight of each channel under these parameters."""
        ...


def channels_needed(params: object, declared: Iterable[str]) -> tuple[str, ...]:
    """The channels a scorer reads under ``params``.

    Args:
        params: the scorer's parameter object; if it has ``channel_weights``,
            channels weighted 0 are left out.
        declared: the scorer's ``Scorer.channels``.
    """
    declared = tuple(declared)
    if isinstance(params, HasChannelWeights):
        active = set(params.channel_weights.active())
        return tuple(name for name in declared if name in active)
    return declared


def weighted_channels(
    inputs: ScoringInput, weights: ChannelWeights
) -> list[tuple[str, float, ChannelArrays]]:
    """``(name, weight, arrays)`` of each channel with a weight above 0.

    A channel weighted 0 may be missing from ``inputs``; one weighted above 0 must
    be there (``KeyError`` naming it).  Every channel must have the same number of
    candidates (``ValueError`` otherwise).
    """
    out: list[tuple[str, float, ChannelArrays]] = []
    n_candidates: int | None = None
    for name, weight in weights.as_dict().items():
        if weight <= 0.0:
            continue
        arrays = inputs.channel(name)
        if n_candidates is None:
            n_candidates = arrays.n_candidates
        elif arrays.n_candidates != n_candidates:
            raise ValueError(
                f"channel {name!r} has {arrays.n_candidates} candidates, "
                f"the others have {n_candidates}"
            )
        out.append((name, weight, arrays))
    return out


# --- numeric helpers -------------------------------------------------------------


def safe_divide(num: FloatArray | float, den: FloatArray | float) -> FloatArray:
    """``num / den`` elementwise (broadcasting), with 0 wherever ``den`` is 0.

    The one definition for every scorer: a negative denominator divides as usual.
    """
    n, d = np.broadcast_arrays(np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64))
    out = np.zeros(n.shape, dtype=np.float64)
    np.divide(n, d, out=out, where=d != 0.0)
    return out


def length_ratio(doc_len: FloatArray, avgdl: float) -> FloatArray:
    """``|d| / avgdl``; every candidate counts as average length (1.0) when ``avgdl`` is not a
    positive finite number (``avgdl = 0`` is an index of empty documents, where no term can
    match, so the choice only keeps the arithmetic finite)."""
    doc_len = np.asarray(doc_len, dtype=np.float64)
    if avgdl > 0.0 and math.isfinite(avgdl):
        return doc_len / avgdl
    return np.ones_like(doc_len)


def df_ratio(df: FloatArray, n_docs: int) -> FloatArray:
    """``df / N``, the fraction of documents containing each term (0 for ``N = 0``)."""
    df = np.asarray(df, dtype=np.float64)
    if n_docs > 0:
        return df / float(n_docs)
    return np.zeros_like(df)


def sigmoid(x: float) -> float:
    """``1 / (1 + exp(-x))``, without overflow for large ``|x|``."""
    if x >= 0.0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


def bm25_saturation(tf: FloatArray, k1: FloatArray | float, norm: FloatArray) -> FloatArray:
    """BM25 term-frequency saturation ``tf·(k1 + 1) / (tf + k1·norm)``.

    Args:
        tf: ``(D, T)`` frequencies.
        k1: scalar or ``(T,)`` saturation per term.
        norm: ``(D,)`` length normalisation ``1 - b + b·|d|/avgdl``.

    A zero denominator (``tf = 0`` with ``norm = 0``, a zero-length document with
    ``b = 1``) gives 0.  Source: Robertson & Zaragoza (2009), with the ``k1 + 1`` factor: the
    BM25 that architectures B and C build on (docs/scoring.md §6.2, §6.3).
    """
    k = np.asarray(k1, dtype=np.float64)
    den = norm[:, None] * k + tf
    num = tf * (k + 1.0)
    out = np.zeros(den.shape, dtype=np.float64)
    np.divide(num, den, out=out, where=den > 0.0)
    return out


# --- parameter checks ------------------------------------------------------------


def check_nonnegative(params: object, *, exempt: Iterable[str] = ()) -> None:
    """Every numeric field of the dataclass ``params`` is a finite number >= 0.

    Fields declared ``bool`` and ``Enum`` values are skipped, and so are the names in ``exempt``;
    a ``bool`` given for a numeric field is refused (``True`` is not a length damper).

    Raises:
        ValueError: naming the first offending parameter.
    """
    skip = set(exempt)
    for f in fields(params):  # type: ignore[arg-type]
        if f.name in skip:
            continue
        value = getattr(params, f.name)
        declared_bool = f.type in (bool, "bool")
        if isinstance(value, Enum) or (declared_bool and isinstance(value, bool)):
            continue
        if isinstance(value, bool):
            raise ValueError(f"{type(params).__name__}.{f.name} must be a number, got {value!r}")
        if not isinstance(value, (int, float)):
            raise ValueError(f"{type(params).__name__}.{f.name} must be a number, got {value!r}")
        if not math.isfinite(value):
            raise ValueError(f"{type(params).__name__}.{f.name} must be finite, got {value!r}")
        if value < 0:
            raise ValueError(f"{type(params).__name__}.{f.name} must be >= 0, got {value!r}")


def check_positive(params: object, *names: str) -> None:
    """Each named parameter is > 0 (it divides, or 0 would make a formula 0/0)."""
    for name in names:
        value = getattr(params, name)
        if not value > 0:
            raise ValueError(f"{type(params).__name__}.{name} must be > 0, got {value!r}")


def check_at_most(params: object, bound: float, *names: str, strict: bool = False) -> None:
    """Each named parameter is <= ``bound`` (``< bound`` with ``strict``)."""
    for name in names:
        value = getattr(params, name)
        if value > bound or (strict and value == bound):
            rel = "<" if strict else "<="
            raise ValueError(f"{type(params).__name__}.{name} must be {rel} {bound}, got {value!r}")


def check_idf_variant(params: object, name: str = "idf") -> None:
    """Parameter ``name`` is an :class:`IdfVariant` (its string value is accepted too)."""
    value = getattr(params, name)
    if isinstance(value, IdfVariant):
        return
    try:
        member = IdfVariant(value)
    except ValueError:
        valid = ", ".join(v.value for v in IdfVariant)
        raise ValueError(
            f"{type(params).__name__}.{name}: unknown IDF {value!r}; valid: {valid}"
        ) from None
    object.__setattr__(params, name, member)
