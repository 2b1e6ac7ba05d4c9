"""The BM25 family over one channel's arrays (docs/scoring.md §2).

Every scorer here is

.. math::

    score(d, q) = \\sum_{t \\in q} qtf(t, q) \\cdot IDF(t) \\cdot TF(tf(t, d), |d|/avgdl)

with one IDF and one term-frequency component (TFC) per variant, each a small pure
function below that cites its source.  The variants follow the table of
Kamphuis, de Vries, Boytsov and Lin, "Which BM25 Do You Mean? A Large-Scale
Reproducibility Study of Scoring Variants", ECIR 2020 (the same split into
``_score_tfc_*`` / ``_score_idf_*`` functions as bm25s):

- ``bm25`` (Lucene >= 8): IDF ``ln(1 + (N - df + 0.5)/(df + 0.5))``,
  TF ``tf / (tf + k1 (1 - b + b L))``;
- ``bm25_robertson``: IDF ``ln((N - df + 0.5)/(df + 0.5))``,
  TF ``(k1 + 1) tf / (tf + k1 (1 - b + b L))``;
- ``bm25_atire``: IDF ``ln(N / df)``, TF ``(k1 + 1) tf / (tf + k1 (1 - b + b L))``;
- ``bm25l``: IDF ``ln((N + 1)/(df + 0.5))``, TF ``(k1 + 1)(c + δ)/(k1 + c + δ)`` with
  ``c = tf / (1 - b + b L)``;
- ``bm25plus``: IDF ``ln((N + 1)/df)``, TF ``(k1 + 1) tf / (k1 (1 - b + b L) + tf) + δ``;

where ``L = |d| / avgdl``.

BM25L and BM25+ add their lower bound ``δ`` only for terms the document contains
(Lv & Zhai, "Lower-bounding term frequency normalization", CIKM 2011 and "When
documents are very long, BM25 fails!", SIGIR 2011): a term with ``tf = 0``
contributes 0 in every variant.

Repeated query terms count ``qtf`` times: Lucene turns each occurrence into its
own ``SHOULD`` clause and sums them.

Lucene stores document length in one byte (:func:`lucene_norm_length`); the
``bm25`` scorer can reproduce that for parity with the engine's ``_score``
(``BM25Params.lucene_norms``), every other scorer uses exact lengths.

Edge cases, shared by all scorers of this module (and reused by ``bm25f`` and
``bmx``): an empty query or no candidates give zero-length or all-zero scores;
``avgdl <= 0`` (an index of empty documents) takes every candidate to be of
average length; a division whose denominator is 0 (for consistent input only when its
numerator is 0 too, e.g. ``tf = 0`` with ``k1 = 0``) gives 0; ``df`` is clipped
to ``[0, N]`` so inconsistent statistics cannot produce a logarithm of a
non-positive number; a term absent from the index (``df = 0``) gets IDF 0 in the
variants whose IDF is undefined there (ATIRE, BM25+), which changes nothing since
its ``tf`` is 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from esbridge.scoring.arrays import ChannelArrays, FloatArray, ScoreResult, ScoringInput
from esbridge.scoring.common import length_ratio, safe_divide
from esbridge.scoring.idf import lucene_idf, robertson_idf
from esbridge.scoring.registry import Scorer, register

__all__ = [
    "BM25",
    "BM25L",
    "BM25PLUS",
    "BM25_ATIRE",
    "BM25_ROBERTSON",
    "LENGTH_TABLE",
    "NUM_FREE_VALUES",
    "BM25LParams",
    "BM25Params",
    "BM25PlusParams",
    "BM25VariantParams",
    "atire_idf",
    "bm25_family_score",
    "bm25l_idf",
    "bm25plus_idf",
    "byte4_to_int",
    "clipped_df",
    "int_to_byte4",
    "length_ratio",
    "lucene_norm_length",
    "safe_divide",
    "score_bm25",
    "score_bm25_atire",
    "score_bm25_robertson",
    "score_bm25l",
    "score_bm25plus",
    "tfc_atire",
    "tfc_bm25l",
    "tfc_bm25plus",
    "tfc_lucene",
    "tfc_robertson",
]

IntArray = NDArray[np.int64]

# ---------------------------------------------------------------------------
# Lucene's one-byte document length (org.apache.lucene.util.SmallFloat)
# ---------------------------------------------------------------------------

_INT_MAX = 2**31 - 1


def _bit_length(values: IntArray) -> IntArray:
    """``64 - Long.numberOfLeadingZeros(v)`` for ``0 <= v < 2**53``, vectorised."""
    # frexp gives v = m * 2**e with 0.5 <= m < 1, so e is the bit length (0 for v = 0);
    # exact because every v below 2**53 is an exact float64.
    _, exponent = np.frexp(values.astype(np.float64))
    return exponent.astype(np.int64)


def _long_to_int4(values: IntArray) -> IntArray:
    """Lucene ``SmallFloat.longToInt4``: a float-like code keeping 4 significant bits.

    ``numBits < 4`` ("subnormal"): the value itself.  Otherwise, with
    ``shift = numBits - 4``: ``((v >>> shift) & 0x07) | ((shift + 1) << 3)``.
    """
    num_bits = _bit_length(values)
    shift = np.maximum(num_bits - 4, 0)
    normal = ((values >> shift) & 0x07) | ((shift + 1) << 3)
    return np.where(num_bits < 4, values, normal)


def _int4_to_long(codes: IntArray) -> IntArray:
    """Lucene ``SmallFloat.int4ToLong``, the inverse of :func:`_long_to_int4` on its image.

    ``bits = i & 0x07``, ``shift = (i >>> 3) - 1``; ``bits`` if ``shift == -1``
    (subnormal), else ``(bits | 0x08) << shift``.
    """
    bits = codes & 0x07
    shift = (codes >> 3) - 1
    normal = (bits | 0x08) << np.maximum(shift, 0)
    return np.where(shift == -1, bits, normal)


#: ``255 - longToInt4(Integer.MAX_VALUE)``: byte values below this encode a length
#: exactly (Lucene's ``SmallFloat.NUM_FREE_VALUES``, 24).
NUM_FREE_VALUES: int = 255 - int(_long_to_int4(np.array([_INT_MAX], dtype=np.int64))[0])


def int_to_byte4(lengths: ArrayLike) -> IntArray:
    """Lucene ``SmallFloat.intToByte4``: encode non-negative ints as one unsigned byte.

    ``i`` if ``i < NUM_FREE_VALUES`` else ``NUM_FREE_VALUES + longToInt4(i -
    NUM_FREE_VALUES)``.  Lengths up to 40 (``NUM_FREE_VALUES + 16``) survive the round
    trip exactly; above that, 4 significant bits of ``i - 24`` are kept (rounded down).

    Args:
        lengths: integers in ``[0, 2**31 - 1]``.

    Returns:
        The byte values as ``int64`` in ``[0, 255]`` (Lucene's byte read unsigned).

    Raises:
        ValueError: for a negative, too large or non-integer length.
    """
    values = np.asarray(lengths)
    fractional = values.size > 0 and not np.issubdtype(values.dtype, np.integer)
    if fractional and (not np.all(np.isfinite(values)) or np.any(values != np.floor(values))):
        raise ValueError("lengths must be whole numbers")
    ints = values.astype(np.int64)
    if ints.size and (ints.min() < 0 or ints.max() > _INT_MAX):
        raise ValueError(f"lengths must be in [0, {_INT_MAX}] (Lucene's int range)")
    low = ints < NUM_FREE_VALUES
    high = NUM_FREE_VALUES + _long_to_int4(np.where(low, 0, ints - NUM_FREE_VALUES))
    return np.where(low, ints, high)


def byte4_to_int(codes: ArrayLike) -> IntArray:
    """Lucene ``SmallFloat.byte4ToInt``: decode :func:`int_to_byte4`.

    ``b`` if ``b < NUM_FREE_VALUES`` else ``NUM_FREE_VALUES + int4ToLong(b -
    NUM_FREE_VALUES)``, reading the byte unsigned.

    Raises:
        ValueError: for a code outside ``[0, 255]``.
    """
    ints = np.asarray(codes).astype(np.int64)
    if ints.size and (ints.min() < 0 or ints.max() > 255):
        raise ValueError("byte codes must be in [0, 255]")
    low = ints < NUM_FREE_VALUES
    high = NUM_FREE_VALUES + _int4_to_long(np.where(low, 0, ints - NUM_FREE_VALUES))
    return np.where(low, ints, high)


#: Lucene ``BM25Similarity.LENGTH_TABLE``: the document length each norm byte stands for.
LENGTH_TABLE: IntArray = byte4_to_int(np.arange(256, dtype=np.int64))


def lucene_norm_length(lengths: ArrayLike) -> FloatArray:
    """The document length Lucene's BM25 actually scores with.

    ``BM25Similarity.computeNorm`` stores ``SmallFloat.intToByte4(numTerms)`` and the
    scorer reads ``LENGTH_TABLE[norm] = SmallFloat.byte4ToInt(norm)``, so the length is
    ``byte4ToInt(intToByte4(|d|))``: exact up to 40, then rounded down to 4
    significant bits of ``|d| - 24`` (e.g. 41 -> 40, 100 -> 96, 1000 -> 984).
    ``avgdl`` is not affected (Lucene takes ``sumTotalTermFreq / docCount``).

    ``numTerms`` is the field's token count, less overlapping tokens (position
    increment 0) when ``discountOverlaps`` is on (the default).

    Args:
        lengths: whole token counts ``>= 0``; non-integral float input is rejected.

    Returns:
        The decoded lengths as float64, same shape.
    """
    values = np.asarray(lengths, dtype=np.float64)
    rounded = np.rint(values)
    if values.size and not np.allclose(values, rounded, rtol=0.0, atol=1e-9):
        raise ValueError("Lucene norms need whole token counts as document lengths")
    return byte4_to_int(int_to_byte4(rounded.astype(np.int64))).astype(np.float64)


# ---------------------------------------------------------------------------
# Shared numeric helpers (``safe_divide`` and ``length_ratio`` live in ``common``)
# ---------------------------------------------------------------------------


def clipped_df(arrays: ChannelArrays) -> FloatArray:
    """The channel's ``df`` clipped to ``[0, N]``."""
    return np.clip(np.asarray(arrays.df, dtype=np.float64), 0.0, float(arrays.n_docs))


def as_real(value: object) -> float | None:
    """``value`` as a float if it is a real number (not a bool), else ``None``."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        return None
    return float(value)


def is_nonnegative_finite(value: object) -> bool:
    """Whether ``value`` is a real number (not a bool), finite and ``>= 0``."""
    x = as_real(value)
    return x is not None and math.isfinite(x) and x >= 0.0


def check_nonnegative_finite(owner: object, *names: str) -> None:
    """``ValueError`` naming the first of ``names`` on ``owner`` that is not finite or < 0."""
    for name in names:
        value = getattr(owner, name)
        if not is_nonnegative_finite(value):
            raise ValueError(f"{type(owner).__name__}.{name} must be finite and >= 0, got {value!r}")


def check_unit_interval(owner: object, *names: str) -> None:
    """``ValueError`` naming the first of ``names`` on ``owner`` outside ``[0, 1]``."""
    for name in names:
        value = getattr(owner, name)
        x = as_real(value)
        if x is None or not 0.0 <= x <= 1.0:
            raise ValueError(f"{type(owner).__name__}.{name} must be in [0, 1], got {value!r}")


def check_bool(owner: object, *names: str) -> None:
    """``ValueError`` naming the first of ``names`` on ``owner`` that is not a bool."""
    for name in names:
        value = getattr(owner, name)
        if not isinstance(value, bool):
            raise ValueError(f"{type(owner).__name__}.{name} must be a bool, got {value!r}")


# ---------------------------------------------------------------------------
# IDF variants not in esbridge.scoring.idf
# ---------------------------------------------------------------------------


def atire_idf(df: FloatArray, n_docs: int) -> FloatArray:
    """ATIRE's IDF: ``ln(N / df)``; 0 where ``df = 0``.

    Source: Trotman et al., "Improvements to BM25 and language models examined",
    ADCS 2014, as listed in Kamphuis et al. (ECIR 2020).
    """
    df = np.asarray(df, dtype=np.float64)
    return np.log(safe_divide(float(n_docs), df), where=df > 0.0, out=np.zeros_like(df))


def bm25l_idf(df: FloatArray, n_docs: int) -> FloatArray:
    """BM25L's IDF: ``ln((N + 1) / (df + 0.5))``.

    Source: Lv & Zhai, "When documents are very long, BM25 fails!", SIGIR 2011, as
    listed in Kamphuis et al. (ECIR 2020).
    """
    df = np.asarray(df, dtype=np.float64)
    return np.log((n_docs + 1.0) / (df + 0.5))


def bm25plus_idf(df: FloatArray, n_docs: int) -> FloatArray:
    """BM25+'s IDF: ``ln((N + 1) / df)``; 0 where ``df = 0``.

    Source: Lv & Zhai, "Lower-bounding term frequency normalization", CIKM 2011, as
    listed in Kamphuis et al. (ECIR 2020).
    """
    df = np.asarray(df, dtype=np.float64)
    return np.log(safe_divide(n_docs + 1.0, df), where=df > 0.0, out=np.zeros_like(df))


# ---------------------------------------------------------------------------
# Term-frequency components; ``ratio`` is |d|/avgdl with shape (D,)
# ---------------------------------------------------------------------------


def _length_norm(ratio: FloatArray, b: float) -> FloatArray:
    """``1 - b + b * |d|/avgdl`` as a ``(D, 1)`` column."""
    return (1.0 - b + b * np.asarray(ratio, dtype=np.float64))[:, None]


def tfc_lucene(tf: FloatArray, ratio: FloatArray, k1: float, b: float) -> FloatArray:
    """Lucene's TF component: ``tf / (tf + k1 * (1 - b + b * |d|/avgdl))``.

    Source: Lucene ``BM25Similarity`` since 8.0 (``LUCENE-8563`` dropped the
    ``k1 + 1`` factor, a rank-preserving constant); Kamphuis et al. (ECIR 2020),
    "Lucene" rows.
    """
    return safe_divide(tf, tf + k1 * _length_norm(ratio, b))


def tfc_robertson(tf: FloatArray, ratio: FloatArray, k1: float, b: float) -> FloatArray:
    """Robertson's TF component: ``(k1 + 1) tf / (tf + k1 * (1 - b + b * |d|/avgdl))``.

    Source: Robertson et al., "Okapi at TREC-3", 1994.  Kamphuis et al. (ECIR 2020)
    print it without ``k1 + 1``, which only rescales every score of a query by the
    same constant; the classic form is kept here.
    """
    return (k1 + 1.0) * safe_divide(tf, tf + k1 * _length_norm(ratio, b))


def tfc_atire(tf: FloatArray, ratio: FloatArray, k1: float, b: float) -> FloatArray:
    """ATIRE's TF component: ``(k1 + 1) tf / (tf + k1 * (1 - b + b * |d|/avgdl))``.

    Source: Trotman et al., ADCS 2014; Kamphuis et al. (ECIR 2020), "ATIRE" row.
    """
    return (k1 + 1.0) * safe_divide(tf, tf + k1 * _length_norm(ratio, b))


def tfc_bm25l(tf: FloatArray, ratio: FloatArray, k1: float, b: float, delta: float) -> FloatArray:
    """BM25L's TF component, for ``tf > 0`` (0 otherwise).

    ``c = tf / (1 - b + b * |d|/avgdl)``; ``(k1 + 1)(c + δ) / (k1 + c + δ)``.

    Source: Lv & Zhai, "When documents are very long, BM25 fails!", SIGIR 2011;
    Kamphuis et al. (ECIR 2020), "BM25L" row.
    """
    c = safe_divide(tf, _length_norm(ratio, b))
    value = (k1 + 1.0) * safe_divide(c + delta, k1 + c + delta)
    return np.where(tf > 0.0, value, 0.0)


def tfc_bm25plus(tf: FloatArray, ratio: FloatArray, k1: float, b: float, delta: float) -> FloatArray:
    """BM25+'s TF component, for ``tf > 0`` (0 otherwise).

    ``(k1 + 1) tf / (k1 * (1 - b + b * |d|/avgdl) + tf) + δ``.

    Source: Lv & Zhai, "Lower-bounding term frequency normalization", CIKM 2011;
    Kamphuis et al. (ECIR 2020), "BM25+" row.
    """
    value = (k1 + 1.0) * safe_divide(tf, k1 * _length_norm(ratio, b) + tf) + delta
    return np.where(tf > 0.0, value, 0.0)


# ---------------------------------------------------------------------------
# The shared sum
# ---------------------------------------------------------------------------


def bm25_family_score(arrays: ChannelArrays, idf: FloatArray, tfc: FloatArray) -> ScoreResult:
    """``score(d) = sum_t qtf(t) * idf(t) * tfc(d, t)``, with its parts.

    Args:
        arrays: the channel (for ``qtf`` and ``tf``).
        idf: ``(T,)`` IDF of each query term.
        tfc: ``(D, T)`` term-frequency component of each candidate and term.

    Returns:
        ``scores`` and the ``(D,)`` parts ``tf_part`` (``sum_t qtf * tfc``), ``idf``
        (``sum_t qtf * idf`` over the terms the candidate contains) and
        ``matched_terms`` (how many distinct query terms it contains).
    """
    qtf = np.asarray(arrays.qtf, dtype=np.float64)
    matched = (np.asarray(arrays.tf) > 0.0).astype(np.float64)
    scores = tfc @ (qtf * idf)
    return ScoreResult(
        scores=scores,
        parts={
            "tf_part": tfc @ qtf,
            "idf": matched @ (qtf * idf),
            "matched_terms": matched.sum(axis=1),
        },
    )


# ---------------------------------------------------------------------------
# Parameters
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class BM25Params:
    """Lucene / Pyserini BM25.

    Attributes:
        k1: term-frequency saturation (Pyserini default 0.9; the engines' 1.2).
        b: length normalisation in ``[0, 1]`` (Pyserini default 0.4; the engines' 0.75).
        k1_plus_one: multiply by ``k1 + 1``.  Lucene's ``BM25Similarity`` (>= 8.0, used
            by Anserini/Pyserini) does not; Elasticsearch's and OpenSearch's default
            ``BM25`` similarity is ``LegacyBM25Similarity``, which multiplies the boost
            by ``k1 + 1``, so parity with their ``_score`` needs ``True``.  Only rescales.
        lucene_norms: score with Lucene's one-byte length (:func:`lucene_norm_length`)
            instead of the exact length (``avgdl`` stays exact, as in Lucene).
    """

    k1: float = 0.9
    b: float = 0.4
    k1_plus_one: bool = False
    lucene_norms: bool = False

    def __post_init__(self) -> None:
        check_nonnegative_finite(self, "k1")
        check_unit_interval(self, "b")
        check_bool(self, "k1_plus_one", "lucene_norms")


@dataclass(frozen=True)
class BM25VariantParams:
    """Robertson and ATIRE BM25 (Kamphuis et al., ECIR 2020).

    Attributes:
        k1: term-frequency saturation (classic default 1.2).
        b: length normalisation in ``[0, 1]`` (classic default 0.75).
    """

    k1: float = 1.2
    b: float = 0.75

    def __post_init__(self) -> None:
        check_nonnegative_finite(self, "k1")
        check_unit_interval(self, "b")


@dataclass(frozen=True)
class BM25LParams(BM25VariantParams):
    """BM25L (Lv & Zhai, SIGIR 2011).

    Attributes:
        delta: shift of the normalised frequency, ``>= 0`` (paper's default 0.5).
    """

    delta: float = 0.5

    def __post_init__(self) -> None:
        super().__post_init__()
        check_nonnegative_finite(self, "delta")


@dataclass(frozen=True)
class BM25PlusParams(BM25VariantParams):
    """BM25+ (Lv & Zhai, CIKM 2011).

    Attributes:
        delta: lower bound added for every matched term, ``>= 0`` (paper's default 1.0).
    """

    delta: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        check_nonnegative_finite(self, "delta")


# ---------------------------------------------------------------------------
# Scorers
# ---------------------------------------------------------------------------


def score_bm25(inputs: ScoringInput, params: BM25Params) -> ScoreResult:
    """Lucene BM25 on the ``base`` channel.

    ``sum_t qtf * ln(1 + (N - df + 0.5)/(df + 0.5)) * tf / (tf + k1 (1 - b + b |d|/avgdl))``,
    times ``k1 + 1`` if ``params.k1_plus_one``; ``|d|`` is Lucene's one-byte length if
    ``params.lucene_norms``.
    """
    arrays = inputs.channel("base")
    doc_len = lucene_norm_length(arrays.doc_len) if params.lucene_norms else arrays.doc_len
    ratio = length_ratio(doc_len, arrays.avgdl)
    tfc = tfc_lucene(np.asarray(arrays.tf, dtype=np.float64), ratio, params.k1, params.b)
    if params.k1_plus_one:
        tfc = (params.k1 + 1.0) * tfc
    return bm25_family_score(arrays, lucene_idf(clipped_df(arrays), arrays.n_docs), tfc)


def score_bm25_robertson(inputs: ScoringInput, params: BM25VariantParams) -> ScoreResult:
    """Robertson BM25: ``sum_t qtf * ln((N - df + 0.5)/(df + 0.5)) * (k1 + 1) tf / (tf + K)``.

    ``K = k1 (1 - b + b |d|/avgdl)``.  The IDF is negative for terms in more than half
    of the documents; such a term lowers the score, more so the more often it occurs.
    """
    arrays = inputs.channel("base")
    ratio = length_ratio(arrays.doc_len, arrays.avgdl)
    tfc = tfc_robertson(np.asarray(arrays.tf, dtype=np.float64), ratio, params.k1, params.b)
    return bm25_family_score(arrays, robertson_idf(clipped_df(arrays), arrays.n_docs), tfc)


def score_bm25_atire(inputs: ScoringInput, params: BM25VariantParams) -> ScoreResult:
    """ATIRE BM25: ``sum_t qtf * ln(N/df) * (k1 + 1) tf / (tf + k1 (1 - b + b |d|/avgdl))``."""
    arrays = inputs.channel("base")
    ratio = length_ratio(arrays.doc_len, arrays.avgdl)
    tfc = tfc_atire(np.asarray(arrays.tf, dtype=np.float64), ratio, params.k1, params.b)
    return bm25_family_score(arrays, atire_idf(clipped_df(arrays), arrays.n_docs), tfc)


def score_bm25l(inputs: ScoringInput, params: BM25LParams) -> ScoreResult:
    """BM25L: ``sum_{t: tf > 0} qtf * ln((N + 1)/(df + 0.5)) * (k1 + 1)(c + δ)/(k1 + c + δ)``."""
    arrays = inputs.channel("base")
    ratio = length_ratio(arrays.doc_len, arrays.avgdl)
    tfc = tfc_bm25l(np.asarray(arrays.tf, dtype=np.float64), ratio, params.k1, params.b, params.delta)
    return bm25_family_score(arrays, bm25l_idf(clipped_df(arrays), arrays.n_docs), tfc)


def score_bm25plus(inputs: ScoringInput, params: BM25PlusParams) -> ScoreResult:
    """BM25+: ``sum_{t: tf > 0} qtf * ln((N + 1)/df) * ((k1 + 1) tf/(K + tf) + δ)``."""
    arrays = inputs.channel("base")
    ratio = length_ratio(arrays.doc_len, arrays.avgdl)
    tfc = tfc_bm25plus(np.asarray(arrays.tf, dtype=np.float64), ratio, params.k1, params.b, params.delta)
    return bm25_family_score(arrays, bm25plus_idf(clipped_df(arrays), arrays.n_docs), tfc)


BM25: Scorer[BM25Params] = register(
    Scorer(
        name="bm25",
        params_type=BM25Params,
        fn=score_bm25,
        channels=("base",),
        description="Lucene/Pyserini BM25 (k1=0.9, b=0.4; optional k1+1 factor and Lucene one-byte norms)",
    )
)
BM25_ROBERTSON: Scorer[BM25VariantParams] = register(
    Scorer(
        name="bm25_robertson",
        params_type=BM25VariantParams,
        fn=score_bm25_robertson,
        channels=("base",),
        description="Robertson et al. (1994) BM25: RSJ IDF, (k1+1) numerator",
    )
)
BM25_ATIRE: Scorer[BM25VariantParams] = register(
    Scorer(
        name="bm25_atire",
        params_type=BM25VariantParams,
        fn=score_bm25_atire,
        channels=("base",),
        description="ATIRE BM25: ln(N/df) IDF, (k1+1) numerator (Kamphuis et al., ECIR 2020)",
    )
)
BM25L: Scorer[BM25LParams] = register(
    Scorer(
        name="bm25l",
        params_type=BM25LParams,
        fn=score_bm25l,
        channels=("base",),
        description="BM25L (Lv & Zhai, SIGIR 2011): shifted normalised tf, delta=0.5",
    )
)
BM25PLUS: Scorer[BM25PlusParams] = register(
    Scorer(
        name="bm25plus",
        params_type=BM25PlusParams,
        fn=score_bm25plus,
        channels=("base",),
        description="BM25+ (Lv & Zhai, CIKM 2011): lower-bounded tf, delta=1.0",
    )
)
