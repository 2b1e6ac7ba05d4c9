"""Architectures A, B and C (docs/scoring.md §6).

- ``arch_a``: smoothed-surprisal IDF, clarity, log evidence, coverage, log length
  damping, plus a prefix channel weighted ``λ = 0.18``.
- ``arch_b``: BM25 with a sharpened, soft-stopword-penalised IDF on a focus-prior
  length, times a specificity-gated coordination reward and pair synergy.
- ``arch_c``: BM25 with IDF lift and an IDF/DF-aware ``k1``, query DF dropout, an
  AND gate (specificity x entropy) on information coverage, salience, and
  full/anchor score mixing.

Choices where the published description is silent are listed in each scorer's
docstring and tested in ``tests/unit/test_architectures.py``.  Notation: ``T``
distinct query terms of the channel (``|q| = T``), ``D`` candidates, ``M`` a
candidate's matched terms.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from esbridge.scoring.arrays import ChannelArrays, FloatArray, ScoreResult, ScoringInput
from esbridge.scoring.common import (
    ChannelWeights,
    IdfVariant,
    bm25_saturation,
    check_at_most,
    check_idf_variant,
    check_nonnegative,
    check_positive,
    df_ratio,
    length_ratio,
    safe_divide,
    weighted_channels,
)
from esbridge.scoring.registry import Scorer, register

__all__ = [
    "ARCH_A",
    "ARCH_B",
    "ARCH_C",
    "ArchAParams",
    "ArchBParams",
    "ArchCParams",
    "anchor_mix",
    "anchor_terms",
    "anchor_weight",
    "arch_a_relevance",
    "clarity",
    "common_term_penalty",
    "coordination_reward",
    "dynamic_k1",
    "entropy_gate",
    "focus_length",
    "idf_lift",
    "information_coverage",
    "log_evidence",
    "log_length_damping",
    "pair_synergy",
    "query_df_dropout",
    "query_specificity",
    "salience",
    "score_arch_a",
    "score_arch_b",
    "score_arch_c",
    "sharpened_idf",
    "specificity_gate",
    "weighted_coverage",
]


BoolArray = npt.NDArray[np.bool_]


def _pow0(x: FloatArray, power: float) -> FloatArray:
    """``x^power`` where ``x > 0``, else 0 (so an absent quantity adds nothing, even for power 0)."""
    x = np.asarray(x, dtype=np.float64)
    out = np.zeros_like(x)
    np.power(x, power, out=out, where=x > 0.0)
    return out


def _full(n: int, value: float) -> FloatArray:
    return np.full(n, value, dtype=np.float64)


# =================================================================================
# Architecture A: two-channel prefix matching
# =================================================================================


@dataclass(frozen=True)
class ArchAParams:
    """Architecture A's parameters (published defaults); all finite and >= 0, ``tf_log_base`` > 0."""

    tf_log_base: float = 1.0  # β, published tf_log_base
    clarity_power: float = 0.6  # published clarity exponent
    coverage_gamma: float = 0.25  # γ, published coverage_gamma
    dl_alpha: float = 0.15  # α, published dl_alpha
    prefix_weight: float = 0.18  # λ, published prefix_weight

    def __post_init__(self) -> None:
        check_nonnegative(self)
        check_positive(self, "tf_log_base")

    @property
    def channel_weights(self) -> ChannelWeights:
        """``base = 1``, ``prefix = λ``."""
        return ChannelWeights(base=1.0, prefix=self.prefix_weight)


def clarity(idf: FloatArray, power: float) -> FloatArray:
    """Clarity ``(IDF/(IDF + 1))^p`` (architecture A, ``p = 0.6``); in ``[0, 1)`` for ``IDF >= 0``.

    Source: docs/scoring.md §6.1.
    """
    idf = np.asarray(idf, dtype=np.float64)
    return (idf / (idf + 1.0)) ** power


def log_evidence(tf: FloatArray, term_mass: FloatArray, tf_log_base: float) -> FloatArray:
    """Concave evidence ``E = Σ_t m(t) · ln(1 + f(t,d)/β)``.

    ``m(t) = w_q(t)·IDF(t)·clarity(t)`` is the per-term mass (architecture A).
    Source: architecture A's concave evidence (docs/scoring.md §6.1).
    """
    return np.log1p(tf / tf_log_base) @ term_mass


def weighted_coverage(tf: FloatArray, weights: FloatArray) -> FloatArray:
    """Coverage ``C = Σ_{t in q ∩ d} w(t) / Σ_{t in q} w(t)`` (0 when ``Σ_q w = 0``).

    Architecture A weighs by ``w_q(t)·IDF(t)``.  Source: docs/scoring.md §6.1.
    """
    weights = np.asarray(weights, dtype=np.float64)
    total = float(weights.sum())
    if total <= 0.0:
        return np.zeros(tf.shape[0], dtype=np.float64)
    return ((tf > 0.0) @ weights) / total


def log_length_damping(doc_len: FloatArray, avgdl: float, alpha: float) -> FloatArray:
    """Length damper ``1 + α·ln(1 + |d|/avgdl)`` (a divisor, >= 1).

    With ``avgdl <= 0`` the ratio is taken as 1.  Source: docs/scoring.md §6.1.
    """
    return 1.0 + alpha * np.log1p(length_ratio(doc_len, avgdl))


def arch_a_relevance(
    arrays: ChannelArrays, params: ArchAParams
) -> tuple[FloatArray, dict[str, FloatArray]]:
    """One channel of architecture A.

    ``R = ln(1 + E) · (1 + γ·C) / (1 + α·ln(1 + |d|/avgdl))`` with
    ``E = Σ_t w_q(t)·IDF(t)·clarity(t)·ln(1 + f(t,d)/β)``, ``IDF = −ln((df + 1)/(N + 2))``.

    Choices: the query-term weight ``w_q(t)`` is ``qtf(t, q)``; coverage weighs
    terms by ``w_q(t)·IDF(t)`` exactly as published (without clarity).
    """
    idf = IdfVariant.SURPRISAL.compute(arrays.df, arrays.n_docs)
    qw = np.asarray(arrays.qtf, dtype=np.float64) * idf
    e = log_evidence(arrays.tf, qw * clarity(idf, params.clarity_power), params.tf_log_base)
    cov = weighted_coverage(arrays.tf, qw)
    b_cov = 1.0 + params.coverage_gamma * cov
    b_len = log_length_damping(arrays.doc_len, arrays.avgdl, params.dl_alpha)
    r = np.log1p(e) * b_cov / b_len
    return r, {"evidence": e, "coverage": cov, "B_cov": b_cov, "B_len": b_len}


def score_arch_a(inputs: ScoringInput, params: ArchAParams) -> ScoreResult:
    """``score = R_A(base) + λ·R_A(prefix)`` (architecture A's prefix channel; docs/scoring.md §6.1).

    Parts per channel ``c``: ``c.evidence``, ``c.coverage``, ``c.B_cov``, ``c.B_len``, ``c.R``.
    """
    channels = weighted_channels(inputs, params.channel_weights)
    scores = np.zeros(channels[0][2].n_candidates, dtype=np.float64)
    out: dict[str, FloatArray] = {}
    for name, weight, arrays in channels:
        r, parts = arch_a_relevance(arrays, params)
        out.update({f"{name}.{k}": v for k, v in parts.items()})
        out[f"{name}.R"] = r
        scores += weight * r
    return ScoreResult(scores=scores, parts=out)


# =================================================================================
# Architecture B: query specificity gating
# =================================================================================


@dataclass(frozen=True)
class ArchBParams:
    """Architecture B's parameters.

    All finite and >= 0; ``b``, ``focus_mix``, ``spec_floor``, ``common_penalty`` and
    ``pair_rel`` <= 1; ``common_df_cut`` < 1.
    """

    k1: float = 1.2  # the BM25 baseline's k1 (B's TF form is not given; BM25 chosen)
    b: float = 0.75  # the BM25 baseline's b
    idf_power: float = 1.12  # ρ, published idf_power
    focus_mix: float = 0.65  # μ, published focus_mix
    spec_floor: float = 0.55  # φ, published spec_floor
    spec_power: float = 1.20  # ψ, published spec_power
    common_df_cut: float = 0.12  # τ, published common_df_cut
    common_penalty: float = 0.35  # δ, published common_penalty
    coord_alpha: float = 0.25  # α_c, published
    coord_beta: float = 0.75  # β_c, published
    pair_boost: float = 0.06  # β_p, published pair_boost
    pair_rel: float = 0.5  # published: r_t = max(0, IDF − 0.5·max IDF)
    idf: IdfVariant = IdfVariant.LUCENE  # the BM25 baseline's IDF (B does not replace it)

    def __post_init__(self) -> None:
        check_idf_variant(self)
        check_nonnegative(self)
        check_at_most(self, 1.0, "b", "focus_mix", "spec_floor", "common_penalty", "pair_rel")
        check_at_most(self, 1.0, "common_df_cut", strict=True)

    @property
    def channel_weights(self) -> ChannelWeights:
        """Base channel only."""
        return ChannelWeights(base=1.0)


def sharpened_idf(idf: FloatArray, rho: float) -> FloatArray:
    """IDF sharpening ``IDF^ρ`` (architecture B, ``ρ = 1.12``; docs/scoring.md §6.2)."""
    return np.asarray(idf, dtype=np.float64) ** rho


def common_term_penalty(df: FloatArray, n_docs: int, tau: float, delta: float) -> FloatArray:
    """Soft stopword factor: ``1 − δ·(df/N − τ)/(1 − τ)`` if ``df/N > τ``, else 1.

    In ``[1 − δ, 1]``; multiplies the IDF.  Source: docs/scoring.md §6.2.
    """
    p = df_ratio(df, n_docs)
    return np.where(p > tau, 1.0 - delta * (p - tau) / (1.0 - tau), 1.0)


def focus_length(doc_len: FloatArray, unique_terms: FloatArray | None, mu: float) -> FloatArray:
    """Focus prior ``|d|_eff = (1 − μ)·|d| + μ·|{t : f(t,d) > 0}|``.

    ``unique_terms = None`` (unknown) falls back to ``|d|`` (``|d|_eff = |d|``).
    Source: docs/scoring.md §6.2.
    """
    doc_len = np.asarray(doc_len, dtype=np.float64)
    if unique_terms is None:
        return doc_len
    return (1.0 - mu) * doc_len + mu * np.asarray(unique_terms, dtype=np.float64)


def query_specificity(idf: FloatArray) -> float:
    """Specificity ``spec(q) = max_t IDF(t) / Σ_t IDF(t)`` over the distinct query terms.

    In ``[1/|q|, 1]``.  Choices: all-zero IDFs read as equal IDFs (``1/|q|``); an empty
    query gives 1.  Source: docs/scoring.md §6.2.
    """
    idf = np.asarray(idf, dtype=np.float64)
    if idf.size == 0:
        return 1.0
    total = float(idf.sum())
    if total <= 0.0:
        return 1.0 / idf.size
    return float(idf.max()) / total


def specificity_gate(spec: float, floor: float, power: float) -> float:
    """``gate_spec = max(φ, (1 − spec)^ψ)`` (docs/scoring.md §6.2); peaky queries get ``φ``."""
    return max(floor, float(max(1.0 - spec, 0.0) ** power))


def coordination_reward(
    n_matched: FloatArray, n_terms: int, gate: float, alpha: float, beta: float
) -> FloatArray:
    """Coordination multiplier ``(1 + α_c · gate · |M|/|q|)^β_c`` (>= 1; 1 for ``|q| = 0``).

    Source: docs/scoring.md §6.2.
    """
    coord = n_matched / n_terms if n_terms > 0 else np.zeros_like(n_matched)
    return (1.0 + alpha * gate * coord) ** beta


def pair_synergy(tf_sat: FloatArray, idf: FloatArray, rel: float = 0.5) -> FloatArray:
    """Pair synergy ``Σ_{i<j} r_i·r_j·sqrt(TF_i·TF_j)``, ``r_t = max(0, IDF(t) − rel·max IDF)``.

    Computed as ``((Σ v)² − Σ v²)/2`` with ``v_t = r_t·sqrt(TF_t)``, clipped at 0
    against rounding.  Choice: ``TF`` is B's saturated BM25 TF (bounded, so the
    synergy is too).  Source: docs/scoring.md §6.2.
    """
    idf = np.asarray(idf, dtype=np.float64)
    if idf.size < 2:
        return np.zeros(tf_sat.shape[0], dtype=np.float64)
    r = np.maximum(idf - rel * float(idf.max()), 0.0)
    cols = np.flatnonzero(r > 0.0)
    if cols.size < 2:
        return np.zeros(tf_sat.shape[0], dtype=np.float64)
    v = np.sqrt(tf_sat[:, cols]) * r[cols]
    s = v.sum(axis=1)
    out: FloatArray = np.maximum(0.5 * (s * s - (v * v).sum(axis=1)), 0.0)
    return out


def score_arch_b(inputs: ScoringInput, params: ArchBParams) -> ScoreResult:
    """Architecture B on the base channel.

    ``score = Σ_t qtf·IDF_B(t)·TF(t,d) · (1 + α_c·gate·|M|/|q|)^β_c · (1 + β_p·gate·pair)``

    with ``IDF_B = IDF^ρ · penalty(df/N)``, ``TF = f·(k1 + 1)/(f + k1·(1 − b + b·|d|_eff/avgdl))``,
    ``gate = max(φ, (1 − spec(q))^ψ)``.

    Choices where the published description is silent (docs/scoring.md §6.2):

    - the base score is BM25 (``k1 = 1.2``, ``b = 0.75``, the BM25 baseline's) on the
      focus-prior length ``|d|_eff``; no collection mean of ``|d|_eff`` is given,
      so it is divided by the collection's ``avgdl``;
    - the IDF is Lucene's (the baseline's; B does not replace it), sharpened and then
      penalised; this ``IDF_B`` is the IDF in ``spec(q)`` and in ``r_t`` too;
    - ``unique_terms = None`` falls back to ``|d|``.

    Parts: ``base.bm25`` (the sum), ``base.spec``, ``base.gate_spec``, ``base.B_coord``,
    ``base.pair``, ``base.B_pair``.
    """
    channels = weighted_channels(inputs, params.channel_weights)
    arrays = channels[0][2]
    n, t = arrays.n_candidates, arrays.n_terms
    idf = sharpened_idf(params.idf.compute(arrays.df, arrays.n_docs), params.idf_power)
    idf = idf * common_term_penalty(arrays.df, arrays.n_docs, params.common_df_cut, params.common_penalty)
    d_eff = focus_length(arrays.doc_len, arrays.unique_terms, params.focus_mix)
    norm = 1.0 - params.b + params.b * length_ratio(d_eff, arrays.avgdl)
    tf_sat = bm25_saturation(arrays.tf, params.k1, norm)
    base = tf_sat @ (np.asarray(arrays.qtf, dtype=np.float64) * idf)
    spec = query_specificity(idf)
    gate = specificity_gate(spec, params.spec_floor, params.spec_power)
    n_matched = np.count_nonzero(arrays.tf > 0.0, axis=1).astype(np.float64)
    b_coord = coordination_reward(n_matched, t, gate, params.coord_alpha, params.coord_beta)
    pair = pair_synergy(tf_sat, idf, params.pair_rel)
    b_pair = 1.0 + params.pair_boost * gate * pair
    parts = {
        "base.bm25": base,
        "base.spec": _full(n, spec),
        "base.gate_spec": _full(n, gate),
        "base.B_coord": b_coord,
        "base.pair": pair,
        "base.B_pair": b_pair,
    }
    return ScoreResult(scores=base * b_coord * b_pair, parts=parts)


# =================================================================================
# Architecture C: anchor-first two-channel scoring
# =================================================================================


@dataclass(frozen=True)
class ArchCParams:
    """Architecture C's parameters.

    All finite and >= 0; ``b``, ``spec_floor``, ``entropy_floor``, ``anchor_mix_alpha``,
    ``anchor_residual`` and ``anchor_floor`` <= 1.
    """

    k1: float = 1.2  # not given for C: the BM25 baseline's value
    b: float = 0.75  # not given for C: the BM25 baseline's value
    tf_idf_gamma: float = 0.22  # γ1, published
    tf_df_delta: float = 0.18  # γ2, published
    idf_lift_power: float = 0.45  # λ, published
    q_drop_min_len: int = 8  # published
    q_drop_df_ratio: float = 0.22  # θ, published
    entropy_floor: float = 0.35  # φ_e, published
    entropy_power: float = 0.9  # ψ_e, published
    spec_floor: float = 0.55  # φ, architecture B's (C uses B's gate_spec)
    spec_power: float = 1.20  # ψ, architecture B's
    anchor_mix_alpha: float = 0.35  # α_a, published
    anchor_mix_power: float = 1.6  # ψ_a, published
    anchor_residual: float = 0.55  # θ_a, published
    anchor_floor: float = 0.15  # published: max(score_anchor, 0.15·score_full)
    info_cov_alpha: float = 0.10  # α_i, published
    info_cov_gamma: float = 0.75  # γ4, published
    info_cov_tf_gamma: float = 0.55  # γ3, published
    salience_alpha: float = 0.10  # α_s, published
    salience_power: float = 0.5  # γ_s, published
    idf: IdfVariant = IdfVariant.LUCENE  # the BM25 baseline's IDF (C lifts it)

    def __post_init__(self) -> None:
        check_idf_variant(self)
        check_nonnegative(self)
        check_at_most(
            self,
            1.0,
            "b",
            "spec_floor",
            "entropy_floor",
            "anchor_mix_alpha",
            "anchor_residual",
            "anchor_floor",
        )
        if not isinstance(self.q_drop_min_len, int) or isinstance(self.q_drop_min_len, bool):
            raise ValueError(
                f"ArchCParams.q_drop_min_len must be an int, got {self.q_drop_min_len!r}"
            )

    @property
    def channel_weights(self) -> ChannelWeights:
        """Base channel only (C's two "channels" are two scores over it)."""
        return ChannelWeights(base=1.0)


def idf_lift(idf: FloatArray, mean_idf: float, power: float) -> FloatArray:
    """IDF lift ``IDF·(IDF/mean IDF)^λ`` (architecture C, ``λ = 0.45``; docs/scoring.md §6.3).

    A non-positive ``mean_idf`` leaves the IDF unchanged.
    """
    idf = np.asarray(idf, dtype=np.float64)
    if mean_idf <= 0.0:
        return idf.copy()
    return idf * (idf / mean_idf) ** power


def dynamic_k1(
    k1: float, idf: FloatArray, df_frac: FloatArray, gamma1: float, gamma2: float
) -> FloatArray:
    """IDF/DF-aware saturation ``k1_eff(t) = k1/(1 + γ1·IDF(t)/max IDF) · (1 + γ2·sqrt(df(t)/N))``.

    The max is over the query's terms; an all-zero IDF gives ratio 0.
    Source: docs/scoring.md §6.3.
    """
    idf = np.asarray(idf, dtype=np.float64)
    top = float(idf.max()) if idf.size else 0.0
    ratio = idf / top if top > 0.0 else np.zeros_like(idf)
    return k1 / (1.0 + gamma1 * ratio) * (1.0 + gamma2 * np.sqrt(df_frac))


def query_df_dropout(df_frac: FloatArray, min_len: int, max_ratio: float) -> FloatArray:
    """Terms kept by query DF dropout: all if ``|q| < min_len``, else ``{t : df(t)/N < θ}``.

    Choice: if dropout would remove every term, all are kept.
    Source: docs/scoring.md §6.3.

    Returns:
        ``(T,)`` boolean mask of kept terms.
    """
    df_frac = np.asarray(df_frac, dtype=np.float64)
    keep = np.ones(df_frac.shape, dtype=bool)
    if df_frac.size >= min_len:
        drop_keep = df_frac < max_ratio
        if drop_keep.any():
            keep = drop_keep
    return keep


def entropy_gate(idf: FloatArray, floor: float, power: float) -> float:
    """Entropy gate ``max(φ_e, H_norm^ψ_e)``.

    ``H = −Σ p_t ln p_t``, ``p_t = IDF(t)/Σ IDF``, ``H_norm = H/ln|q|``.
    Choices: ``|q| <= 1`` or all-zero IDFs give ``H_norm = 1`` (nothing to be uneven).
    Source: docs/scoring.md §6.3.
    """
    idf = np.asarray(idf, dtype=np.float64)
    total = float(idf.sum())
    if idf.size <= 1 or total <= 0.0:
        return max(floor, 1.0)
    p = idf[idf > 0.0] / total
    h_norm = float(-(p * np.log(p)).sum()) / float(np.log(idf.size))
    return max(floor, float(min(max(h_norm, 0.0), 1.0) ** power))


def information_coverage(tf_sat: FloatArray, idf: FloatArray, tf_gamma: float) -> FloatArray:
    """Information-mass coverage ``Σ_{t in q ∩ d} IDF(t)·TF(t,d)^γ3 / Σ_{t in q} IDF(t)``.

    Unmatched terms add 0 even for ``γ3 = 0``; ``Σ_q IDF = 0`` gives 0.
    Source: docs/scoring.md §6.3.
    """
    idf = np.asarray(idf, dtype=np.float64)
    total = float(idf.sum())
    if total <= 0.0:
        return np.zeros(tf_sat.shape[0], dtype=np.float64)
    return (_pow0(tf_sat, tf_gamma) @ idf) / total


def salience(tf: FloatArray, doc_len: FloatArray) -> FloatArray:
    """Salience ``Σ_{t in q} f(t,d) / |d|`` (0 for ``|d| = 0``).  Source: docs/scoring.md §6.3."""
    return safe_divide(tf.sum(axis=1), doc_len)


def anchor_terms(idf: FloatArray, residual: float) -> BoolArray:
    """Anchor mask ``IDF(t) >= θ_a·max_t' IDF(t')`` (architecture C, ``θ_a = 0.55``).

    Source: docs/scoring.md §6.3.
    """
    idf = np.asarray(idf, dtype=np.float64)
    if idf.size == 0:
        return np.zeros(0, dtype=bool)
    return idf >= residual * float(idf.max())


def anchor_weight(spec: float, alpha: float, power: float) -> float:
    """Anchor mixture weight ``w_anchor = α_a·spec(q)^ψ_a`` (docs/scoring.md §6.3)."""
    return float(alpha * spec**power)


def anchor_mix(full: FloatArray, anchor: FloatArray, weight: float, floor: float = 0.15) -> FloatArray:
    """``(1 − w)·full + w·max(anchor, floor·full)`` (architecture C, ``floor = 0.15``).

    Source: docs/scoring.md §6.3.
    """
    return (1.0 - weight) * full + weight * np.maximum(anchor, floor * full)


def score_arch_c(inputs: ScoringInput, params: ArchCParams) -> ScoreResult:
    """Architecture C on the base channel.

    ``score = mix(full, anchor) · (1 + α_i·gate_AND·info_cov^γ4) · (1 + α_s·salience^γ_s)``

    with, over the kept query terms ``q'`` (query DF dropout),
    ``IDF_C = IDF·(IDF/mean IDF)^λ``, ``TF = f·(k1_eff + 1)/(f + k1_eff·(1 − b + b·|d|/avgdl))``,
    ``full = Σ_{q'} qtf·IDF_C·TF``, ``anchor`` the same sum over anchor terms only,
    ``mix = (1 − w)·full + w·max(anchor, 0.15·full)``, ``w = α_a·spec(q')^ψ_a``,
    ``gate_AND = gate_spec·gate_ent``.

    Choices where the published description is silent (docs/scoring.md §6.3):

    - ``k1 = 1.2``, ``b = 0.75`` (the BM25 baseline's), with the ``k1 + 1``
      factor of that baseline, and plain ``|d|`` (the focus prior is B's);
    - the IDF is Lucene's (the baseline's), lifted; ``IDF_C`` is the IDF in
      ``k1_eff``, ``spec``, the entropy gate, information coverage and the anchor rule;
    - ``mean IDF`` is ``ChannelArrays.mean_idf`` (same IDF variant as ``params.idf``)
      or, when ``None``, the mean over the query's distinct terms before dropout;
    - after dropout every quantity uses ``q'`` (salience too);
    - ``gate_AND`` scales information coverage, C's only soft-AND factor; the
      information-coverage and salience multipliers apply after the anchor mixing.

    Parts: ``base.full``, ``base.anchor``, ``base.w_anchor``, ``base.mixed``,
    ``base.gate_spec``, ``base.gate_ent``, ``base.gate_AND``, ``base.info_cov``,
    ``base.B_info``, ``base.salience``, ``base.B_sal``.
    """
    channels = weighted_channels(inputs, params.channel_weights)
    arrays = channels[0][2]
    n = arrays.n_candidates
    raw_idf = params.idf.compute(arrays.df, arrays.n_docs)
    if arrays.mean_idf is not None:
        mean_idf = float(arrays.mean_idf)
    else:
        mean_idf = float(raw_idf.mean()) if raw_idf.size else 0.0
    frac = df_ratio(arrays.df, arrays.n_docs)
    keep = query_df_dropout(frac, params.q_drop_min_len, params.q_drop_df_ratio)
    tf = arrays.tf[:, keep]
    qtf = np.asarray(arrays.qtf, dtype=np.float64)[keep]
    idf = idf_lift(raw_idf[keep], mean_idf, params.idf_lift_power)
    k1 = dynamic_k1(params.k1, idf, frac[keep], params.tf_idf_gamma, params.tf_df_delta)
    norm = 1.0 - params.b + params.b * length_ratio(arrays.doc_len, arrays.avgdl)
    tf_sat = bm25_saturation(tf, k1, norm)
    mass = qtf * idf
    full = tf_sat @ mass
    anchor = tf_sat @ (mass * anchor_terms(idf, params.anchor_residual))
    spec = query_specificity(idf)
    w_anchor = anchor_weight(spec, params.anchor_mix_alpha, params.anchor_mix_power)
    mixed = anchor_mix(full, anchor, w_anchor, params.anchor_floor)
    gate_spec = specificity_gate(spec, params.spec_floor, params.spec_power)
    gate_ent = entropy_gate(idf, params.entropy_floor, params.entropy_power)
    gate_and = gate_spec * gate_ent
    info = information_coverage(tf_sat, idf, params.info_cov_tf_gamma)
    b_info = 1.0 + params.info_cov_alpha * gate_and * _pow0(info, params.info_cov_gamma)
    sal = salience(tf, arrays.doc_len)
    b_sal = 1.0 + params.salience_alpha * _pow0(sal, params.salience_power)
    parts = {
        "base.full": full,
        "base.anchor": anchor,
        "base.w_anchor": _full(n, w_anchor),
        "base.mixed": mixed,
        "base.gate_spec": _full(n, gate_spec),
        "base.gate_ent": _full(n, gate_ent),
        "base.gate_AND": _full(n, gate_and),
        "base.info_cov": info,
        "base.B_info": b_info,
        "base.salience": sal,
        "base.B_sal": b_sal,
    }
    return ScoreResult(scores=mixed * b_info * b_sal, parts=parts)


# --- registration ----------------------------------------------------------------

ARCH_A: Scorer[ArchAParams] = register(
    Scorer(
        name="arch_a",
        params_type=ArchAParams,
        fn=score_arch_a,
        channels=("base", "prefix"),
        description="Architecture A: surprisal IDF, coverage, prefix channel",
    )
)
ARCH_B: Scorer[ArchBParams] = register(
    Scorer(
        name="arch_b",
        params_type=ArchBParams,
        fn=score_arch_b,
        channels=("base",),
        needs_distinct=True,
        description="Architecture B: query-specificity-gated BM25",
    )
)
ARCH_C: Scorer[ArchCParams] = register(
    Scorer(
        name="arch_c",
        params_type=ArchCParams,
        fn=score_arch_c,
        channels=("base",),
        description="Architecture C: anchor-first two-score BM25",
    )
)
