"""BMX: entropy-weighted similarity on top of BM25 (docs/scoring.md §4).

Source: Li, Lipp, Shakir, Huang and Li, "BMX: Entropy-weighted Similarity and
Semantic-enhanced Lexical Search", 2024, arXiv:2408.06643, eq. 2-7 (§3.1), WQA eq. 9
(§3.2), normalisation eq. 10-11 (§3.3) and appendix B (normalised BM25):

.. math::

    score(D, Q) = \\sum_{i=1}^{m} IDF(q_i) \\frac{F(q_i, D)(α + 1)}{F(q_i, D) + α |D|/avgdl + α Ē}
                  + β E(q_i) S(Q, D)

- ``IDF`` is Lucene's; ``Ẽ(q) = -sum_{j: F(q, D_j) > 0} p_j ln p_j`` with
  ``p_j = sigmoid(F(q, D_j))`` over the whole collection (``ChannelArrays.entropy``,
  computed by the feature layer with :func:`collection_entropy` or
  :func:`collection_entropy_from_histogram`); ``E(q_i) = Ẽ(q_i) / max_k Ẽ(q_k)``;
  ``Ē = (1/m) sum_i E(q_i)``; ``S(Q, D) = |Q ∩ D| / m``.
- Defaults ``α = max(min(1.5, avgdl/100), 0.5)``, ``β = 1/ln(1 + N)`` (eq. 3).

Readings where the paper is ambiguous (docs/scoring.md §4.4):

- The sum runs over the query tokens ``q_1 .. q_m`` with repetition, so a term
  occurring ``qtf`` times counts ``qtf`` times everywhere: ``m = sum_t qtf(t)``,
  ``Ē = sum_t qtf E / m``, ``|Q ∩ D| = sum_t qtf [F(t, D) > 0]`` (query tokens found
  in ``D``), and each term's contributions are multiplied by ``qtf``.
- ``β E(q_i) S(Q, D)`` is inside the sum over ``i`` (eq. 2), so a document gets
  ``β S(Q, D) sum_i E(q_i)`` over all ``m`` query tokens; it vanishes where ``S = 0``.
  Within one query ``sum_i E(q_i)`` is the same for every document, so under this
  reading the entropies rescale ``S`` but do not reorder documents; the paper's
  prose ("weight the similarity scores between the related documents for that
  token and the query") and baguetter both restrict the sum to the tokens ``D``
  contains (``entropy_over_matched_terms``).
- A query term absent from the index (``df = 0``) is still one of the ``m`` tokens:
  its ``Ẽ`` is 0 (an empty sum), it lowers ``Ē`` and ``S`` through ``m``.

The reference implementation (``baguetter`` 0.1.1) reads two of these differently;
``BMXParams`` can switch to its reading, which the comparison test uses:

- ``entropy_over_matched_terms=True``: ``β S(Q, D) sum_{i: q_i in D} E(q_i)``
  (baguetter adds each token's term only to the documents in its posting list);
- ``drop_absent_terms=True``: tokens absent from the index are removed from the
  query before anything is computed (baguetter's ``to_token_ids``), so they do not
  count in ``m``.

Both agree on repeated tokens (counted per occurrence).  baguetter's normalised BMX
divides by ``m ln(1 + (N - 0.5)/1.5)`` (the BM25 bound) where eq. 10 adds 1.  WQA
differs too: the paper (and :func:`weighted_query_augmentation`) adds separately
computed scores, baguetter's ``search_weighted`` scores one merged query whose
``E``, ``Ē`` and ``S`` run over the tokens of all queries together.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
from numpy.typing import ArrayLike

from esbridge.scoring.arrays import ChannelArrays, FloatArray, ScoreResult, ScoringInput
from esbridge.scoring.bm25 import (
    BM25Params,
    check_bool,
    clipped_df,
    is_nonnegative_finite,
    length_ratio,
    safe_divide,
    score_bm25,
)
from esbridge.scoring.idf import lucene_idf
from esbridge.scoring.registry import Scorer, register

__all__ = [
    "BM25_NORMALIZED",
    "BMX",
    "BMX_NORMALIZED",
    "BMXParams",
    "bm25_max_score",
    "bmx_max_score",
    "bmx_term_part",
    "collection_entropy",
    "collection_entropy_from_histogram",
    "default_alpha",
    "default_beta",
    "mean_entropy",
    "normalized_entropy",
    "query_similarity",
    "score_bm25_normalized",
    "score_bmx",
    "score_bmx_normalized",
    "sigmoid_entropy",
    "weighted_query_augmentation",
]

P = TypeVar("P")


# ---------------------------------------------------------------------------
# Collection entropy (eq. 5), for the feature layer
# ---------------------------------------------------------------------------


def sigmoid_entropy(tf: ArrayLike) -> FloatArray:
    """``-p ln p`` with ``p = sigmoid(tf) = 1/(1 + exp(-tf))``, elementwise (eq. 5).

    Computed as ``p * softplus(-tf)`` (``-ln sigmoid(x) = ln(1 + exp(-x))``), which is
    accurate for large ``tf`` where ``p`` rounds to 1.
    """
    x = np.asarray(tf, dtype=np.float64)
    neg_log_p = np.logaddexp(0.0, -x)
    return np.exp(-neg_log_p) * neg_log_p


def collection_entropy(tf_values: ArrayLike) -> float:
    """``Ẽ(q) = -sum_j p_j ln p_j``, ``p_j = sigmoid(F(q, D_j))``, over the documents containing ``q``.

    Source: BMX paper, eq. 5.

    Args:
        tf_values: 1-D frequencies of the term in the documents of the collection;
            zeros (documents without the term) are not part of the sum and are ignored,
            so a dense column works too.

    Raises:
        ValueError: for a negative or non-finite frequency or a non-1-D input.
    """
    tf = np.asarray(tf_values, dtype=np.float64)
    if tf.ndim != 1:
        raise ValueError(f"tf_values must be 1-D, got shape {tf.shape}")
    if tf.size and (not np.all(np.isfinite(tf)) or tf.min() < 0.0):
        raise ValueError("tf_values must be finite and >= 0")
    return float(sigmoid_entropy(tf[tf > 0.0]).sum())


def collection_entropy_from_histogram(counts: ArrayLike) -> FloatArray:
    """``Ẽ`` from a frequency histogram: ``sum_{k>=1} counts[..., k-1] * (-σ(k) ln σ(k))``.

    ``counts[..., k-1]`` is the number of documents in which the term occurs exactly
    ``k`` times, so this equals :func:`collection_entropy` on the expanded values.
    ``-σ(k) ln σ(k)`` falls below ``1e-16`` for ``k > 37``; a histogram may lump the
    tail into its last bins without visible error.

    Args:
        counts: ``(..., K)`` non-negative counts; leading axes (e.g. one row per term)
            are kept.

    Returns:
        ``(...)`` entropies (a 0-d array for 1-D input).
    """
    c = np.asarray(counts, dtype=np.float64)
    if c.ndim == 0:
        raise ValueError("counts must have at least one axis (tf = 1, 2, ..., K)")
    if c.size and (not np.all(np.isfinite(c)) or c.min() < 0.0):
        raise ValueError("counts must be finite and >= 0")
    k = np.arange(1, c.shape[-1] + 1, dtype=np.float64)
    result: FloatArray = np.asarray(c @ sigmoid_entropy(k), dtype=np.float64)
    return result


# ---------------------------------------------------------------------------
# The pieces of eq. 2
# ---------------------------------------------------------------------------


def default_alpha(avgdl: float) -> float:
    """``α = max(min(1.5, avgdl/100), 0.5)`` (eq. 3); 0.5 for a non-finite or negative ``avgdl``."""
    if not math.isfinite(avgdl) or avgdl < 0.0:
        return 0.5
    return max(min(1.5, avgdl / 100.0), 0.5)


def default_beta(n_docs: int) -> float:
    """``β = 1/ln(1 + N)`` (eq. 3); 0 for an empty index (``N = 0``), where no document can match."""
    if n_docs <= 0:
        return 0.0
    return 1.0 / math.log1p(n_docs)


def normalized_entropy(entropy: FloatArray, token_weights: FloatArray) -> FloatArray:
    """``E(q) = Ẽ(q) / max_k Ẽ(q_k)`` over the query's tokens (eq. 5).

    Args:
        entropy: ``(T,)`` collection entropies ``Ẽ``.
        token_weights: ``(T,)`` how many query tokens each term stands for; the max runs
            over the terms with weight above 0.

    Returns:
        ``(T,)``; all 0 if no counted term has positive entropy.
    """
    counted = token_weights > 0.0
    top = float(entropy[counted].max()) if np.any(counted) else 0.0
    if top <= 0.0:
        return np.zeros_like(entropy)
    return entropy / top


def mean_entropy(normalized: FloatArray, token_weights: FloatArray) -> float:
    """``Ē = (1/m) sum_i E(q_i)`` with ``m = sum_t qtf`` (eq. 6); 0 for an empty query."""
    m = float(token_weights.sum())
    return float(normalized @ token_weights) / m if m > 0.0 else 0.0


def query_similarity(tf: FloatArray, token_weights: FloatArray) -> FloatArray:
    """``S(Q, D) = |Q ∩ D| / m``: the share of query tokens found in each candidate (eq. 7); ``(D,)``."""
    m = float(token_weights.sum())
    if m <= 0.0:
        return np.zeros(tf.shape[0], dtype=np.float64)
    return ((tf > 0.0).astype(np.float64) @ token_weights) / m


def bmx_term_part(
    tf: FloatArray, ratio: FloatArray, idf: FloatArray, alpha: float, mean_ent: float
) -> FloatArray:
    """``IDF(q) F (α + 1) / (F + α |D|/avgdl + α Ē)`` per candidate and term (eq. 2); ``(D, T)``."""
    denominator = tf + alpha * np.asarray(ratio, dtype=np.float64)[:, None] + alpha * mean_ent
    return idf[None, :] * safe_divide(tf * (alpha + 1.0), denominator)


# ---------------------------------------------------------------------------
# Parameters and scorers
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class BMXParams:
    """BMX parameters.

    Attributes:
        alpha: ``α >= 0``; ``None`` is the paper's ``max(min(1.5, avgdl/100), 0.5)``.
        beta: ``β >= 0``; ``None`` is the paper's ``1/ln(1 + N)``.
        entropy_over_matched_terms: ``β S sum_{q_i in D} E(q_i)`` (default): each
            token's entropy weights the similarity of the documents related to that
            token, as the paper's prose and its reference code read eq. 2; ``False``
            is the literal ``β S sum_i E(q_i)`` over all query tokens, under which the
            entropies cannot reorder a query's documents.
        drop_absent_terms: baguetter's reading, terms with ``df = 0`` are not query
            tokens at all (not counted in ``m``).
    """

    alpha: float | None = None
    beta: float | None = None
    entropy_over_matched_terms: bool = True
    drop_absent_terms: bool = False

    def __post_init__(self) -> None:
        for name in ("alpha", "beta"):
            value = getattr(self, name)
            if value is None:
                continue
            if not is_nonnegative_finite(value):
                raise ValueError(f"BMXParams.{name} must be None or finite and >= 0, got {value!r}")
        check_bool(self, "entropy_over_matched_terms", "drop_absent_terms")


def _entropy_of(arrays: ChannelArrays) -> FloatArray:
    if arrays.entropy is None:
        raise ValueError(
            "BMX needs the collection entropy of each query term (ChannelArrays.entropy, "
            "computed over the whole collection by the feature layer); this input has none"
        )
    entropy = np.asarray(arrays.entropy, dtype=np.float64)
    if entropy.shape != (arrays.n_terms,):
        raise ValueError(f"entropy must have shape ({arrays.n_terms},), got {entropy.shape}")
    if entropy.size and (not np.all(np.isfinite(entropy)) or entropy.min() < 0.0):
        raise ValueError("entropy must be finite and >= 0")
    # Ẽ is a sum over the documents containing the term: 0 for a term absent from the index.
    return np.where(np.asarray(arrays.df) > 0.0, entropy, 0.0)


def score_bmx(inputs: ScoringInput, params: BMXParams) -> ScoreResult:
    """BMX (eq. 2) on the ``base`` channel.

    Parts: ``bm25_part`` (the IDF-weighted saturation summed over the query tokens),
    ``similarity`` (``S(Q, D)``), ``entropy_weight`` (the ``sum E(q_i)`` that
    multiplies ``β S``), ``entropy_similarity`` (``β S sum E``).
    """
    arrays = inputs.channel("base")
    entropy = _entropy_of(arrays)
    df = clipped_df(arrays)
    tf = np.asarray(arrays.tf, dtype=np.float64)
    weights = np.asarray(arrays.qtf, dtype=np.float64)
    if params.drop_absent_terms:
        weights = np.where(df > 0.0, weights, 0.0)
    alpha = default_alpha(arrays.avgdl) if params.alpha is None else float(params.alpha)
    beta = default_beta(arrays.n_docs) if params.beta is None else float(params.beta)

    e_norm = normalized_entropy(entropy, weights)
    e_mean = mean_entropy(e_norm, weights)
    ratio = length_ratio(arrays.doc_len, arrays.avgdl)
    bm25_part = bmx_term_part(tf, ratio, lucene_idf(df, arrays.n_docs), alpha, e_mean) @ weights
    similarity = query_similarity(tf, weights)
    if params.entropy_over_matched_terms:
        entropy_weight = (tf > 0.0).astype(np.float64) @ (weights * e_norm)
    else:
        entropy_weight = np.full(tf.shape[0], float(weights @ e_norm))
    entropy_similarity = beta * similarity * entropy_weight
    return ScoreResult(
        scores=bm25_part + entropy_similarity,
        parts={
            "bm25_part": bm25_part,
            "similarity": similarity,
            "entropy_weight": entropy_weight,
            "entropy_similarity": entropy_similarity,
        },
    )


def _query_tokens(arrays: ChannelArrays, drop_absent: bool) -> float:
    qtf = np.asarray(arrays.qtf, dtype=np.float64)
    if drop_absent:
        qtf = np.where(clipped_df(arrays) > 0.0, qtf, 0.0)
    return float(qtf.sum())


def bmx_max_score(m: float, n_docs: int) -> float:
    """The paper's estimate of BMX's largest score: ``m (ln(1 + (N - 0.5)/1.5) + 1)`` (eq. 10).

    ``ln(1 + (N - 0.5)/1.5)`` is Lucene's IDF at ``df = 1``, the largest of a term that
    occurs at all, and the 1 stands for ``β E(q_i) S`` (at most 1 once ``N >= 2``); the
    saturation can exceed 1 (up to ``α + 1``), so this is an estimate, not a bound.
    """
    return m * (math.log1p((n_docs - 0.5) / 1.5) + 1.0)


def bm25_max_score(m: float, n_docs: int) -> float:
    """Largest Lucene BM25 score of an ``m``-token query: ``m ln(1 + (N - 0.5)/1.5)`` (appendix B, eq. 14).

    A bound for Lucene's form (``tf/(tf + K) < 1``); with ``k1_plus_one`` scores can
    reach ``k1 + 1`` times it.
    """
    return m * math.log1p((n_docs - 0.5) / 1.5)


def _normalized(result: ScoreResult, max_score: float) -> ScoreResult:
    """Scores divided by ``max_score`` (all 0 when ``max_score <= 0``); parts kept, plus ``max_score``."""
    if not max_score > 0.0:
        zero = np.zeros_like(result.scores)
        return ScoreResult(scores=zero, parts={**result.parts, "max_score": zero.copy()})
    parts = dict(result.parts)
    parts["max_score"] = np.full_like(result.scores, max_score)
    return ScoreResult(scores=result.scores / max_score, parts=parts)


def score_bmx_normalized(inputs: ScoringInput, params: BMXParams) -> ScoreResult:
    """BMX divided by :func:`bmx_max_score` (eq. 11); parts as :func:`score_bmx` plus ``max_score``.

    ``m`` is the number of query tokens (terms with ``df = 0`` left out under
    ``drop_absent_terms``); an empty query, or ``N = 0``, scores 0.
    """
    arrays = inputs.channel("base")
    raw = score_bmx(inputs, params)
    return _normalized(raw, bmx_max_score(_query_tokens(arrays, params.drop_absent_terms), arrays.n_docs))


def score_bm25_normalized(inputs: ScoringInput, params: BM25Params) -> ScoreResult:
    """Lucene BM25 divided by :func:`bm25_max_score` (appendix B, eq. 15).

    ``m = sum_t qtf``; an empty query, or ``N = 0`` (where the bound is not positive),
    scores 0.
    """
    arrays = inputs.channel("base")
    raw = score_bm25(inputs, params)
    return _normalized(raw, bm25_max_score(_query_tokens(arrays, False), arrays.n_docs))


# ---------------------------------------------------------------------------
# Weighted query augmentation (eq. 9, appendix B eq. 13)
# ---------------------------------------------------------------------------


def weighted_query_augmentation(
    scorer: Scorer[P],
    original: ScoringInput,
    augmented: Sequence[tuple[float, ScoringInput]],
    params: P | None = None,
    *,
    original_weight: float = 1.0,
) -> ScoreResult:
    """``w_0 score(D, Q) + sum_i w_i score(D, Q_i)`` (BMX paper eq. 9; for BM25, eq. 13).

    Each query is scored on its own with ``scorer`` and ``params`` (so ``E``, ``Ē`` and
    ``S`` of BMX are per query, as in the paper) and the scores are added; the original
    query weighs ``w_0 = original_weight`` (1 in the paper).

    Args:
        scorer: any registered scorer.
        original: the original query's input.
        augmented: ``(w_i, input_i)`` for each augmented query, over the same candidates
            in the same order as ``original``.
        params: the scorer's parameters (its defaults if ``None``).
        original_weight: ``w_0 >= 0``.

    Returns:
        ``scores`` and the parts ``original`` (``score(D, Q)``, unweighted), ``augmentation``
        (``sum_i w_i score(D, Q_i)``) and ``augmented_<i>`` (``score(D, Q_i)``, from 1).

    Raises:
        ValueError: for a weight that is negative or not finite, or an augmented input
            whose candidates differ from the original's (another count, or other
            document lengths in a channel the scorer reads).
    """
    if not is_nonnegative_finite(original_weight):
        raise ValueError(f"original_weight must be finite and >= 0, got {original_weight!r}")
    n = original.n_candidates
    for i, (weight, other) in enumerate(augmented, start=1):
        if not is_nonnegative_finite(weight):
            raise ValueError(f"augmented query {i}: weight must be finite and >= 0, got {weight!r}")
        if other.n_candidates != n:
            raise ValueError(
                f"augmented query {i} has {other.n_candidates} candidates, the original has {n}; "
                "all queries must be scored over the same candidates in the same order"
            )
        for channel in scorer.channels:
            if channel not in original.channels or channel not in other.channels:
                continue
            if not np.array_equal(original.channels[channel].doc_len, other.channels[channel].doc_len):
                raise ValueError(
                    f"augmented query {i}: channel {channel!r} has other document lengths than the "
                    "original; all queries must be scored over the same candidates in the same order"
                )
    base = scorer.score(original, params)
    parts: dict[str, FloatArray] = {"original": base.scores}
    augmentation = np.zeros_like(base.scores)
    for i, (weight, other) in enumerate(augmented, start=1):
        scores = scorer.score(other, params).scores
        parts[f"augmented_{i}"] = scores
        augmentation = augmentation + float(weight) * scores
    parts["augmentation"] = augmentation
    return ScoreResult(scores=float(original_weight) * base.scores + augmentation, parts=parts)


BMX: Scorer[BMXParams] = register(
    Scorer(
        name="bmx",
        params_type=BMXParams,
        fn=score_bmx,
        channels=("base",),
        needs_entropy=True,
        description="BMX (Li et al. 2024): BM25-like saturation plus entropy-weighted query similarity",
    )
)
BMX_NORMALIZED: Scorer[BMXParams] = register(
    Scorer(
        name="bmx_normalized",
        params_type=BMXParams,
        fn=score_bmx_normalized,
        channels=("base",),
        needs_entropy=True,
        description="BMX divided by its estimated maximum m(ln(1 + (N - 0.5)/1.5) + 1)",
    )
)
BM25_NORMALIZED: Scorer[BM25Params] = register(
    Scorer(
        name="bm25_normalized",
        params_type=BM25Params,
        fn=score_bm25_normalized,
        channels=("base",),
        description="Lucene BM25 divided by its maximum m ln(1 + (N - 0.5)/1.5) (BMX paper, appendix B)",
    )
)
