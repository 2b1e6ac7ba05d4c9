"""The evolved multi-channel scorer (docs/scoring.md §5).

.. math::

    score = R(base) + w_pfx·R(pfx) + w_bi·R(bi) + w_mic·G(q_mic)·R(mic)

    R(q, d) = ln(1 + E) · B_cov · B_spec · B_coord · B_anc / B_len

Each channel's ``R`` is computed from that channel's :class:`ChannelArrays` alone;
the pieces are one small pure function each below, vectorised over the candidates.

Notation (per channel): ``T`` distinct query terms (``|q| = T``), ``D`` candidates,
``M = {t : tf(t, d) > 0}`` the matched terms of a candidate.  A channel with
``T = 0`` has ``R = 0``.  A channel weighted 0 is not computed (and may be missing
from the input); one weighted above 0 that is missing raises ``KeyError`` naming it.

Parts returned for explanations, per channel ``c`` that was computed:
``c.evidence`` (``E``), ``c.B_cov``, ``c.B_spec``, ``c.B_coord``, ``c.B_anc``,
``c.B_len``, ``c.R``; and ``micro.G`` (the gate, broadcast to ``(D,)``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from esbridge.scoring.arrays import CHANNELS, ChannelArrays, FloatArray, ScoreResult, ScoringInput
from esbridge.scoring.common import (
    ChannelWeights,
    IdfVariant,
    check_idf_variant,
    check_nonnegative,
    check_positive,
    sigmoid,
    weighted_channels,
)
from esbridge.scoring.registry import Scorer, register

#: The channel whose relevance the gate ``G`` multiplies.
GATED_CHANNEL = "micro"

__all__ = [
    "EVOLVED",
    "EvolvedParams",
    "GATED_CHANNEL",
    "IdfVariant",
    "anchor_multiplier",
    "channel_relevance",
    "coordination_multiplier",
    "coverage_multiplier",
    "evidence",
    "length_damper",
    "matched_mass",
    "mic_gate",
    "score_evolved",
    "specificity_multiplier",
    "term_weight",
]


@dataclass(frozen=True)
class EvolvedParams:
    """Parameters of the evolved scorer.

    Every number must be finite and >= 0; ``gamma`` and ``mu_m`` must be > 0.
    ``idf`` is an :class:`IdfVariant` (its string value is accepted and converted).
    """

    # Tuned values: optuna TPE on features fetched once, maximising the mean over five training sets
    # (SciFact train, and the fixed tuning half of NFCorpus, Cranfield, CISI and MED test) of
    # combined = 0.8·R@100 + 0.2·nDCG@10; "Δ" is the training objective lost when that one value is
    # reset to its starting value (benchmarks/results/tuning/: evolved-all-wide, ablation-evolved.md).
    # Values whose tuning gained less than 0.0005 stay at their starting value (docs/scoring.md §5.7).
    # term weight w(t) = qtf·alpha_qtf·IDF·(IDF/(IDF+1))^gamma_e·(IDF/(IDF+gamma))^beta_tf
    alpha_qtf: float = 0.205  # tuned (start 1.0; Δ 0.0083): a flatter ln(1 + E)
    gamma_e: float = 1.24  # tuned (architecture A's 0.6; Δ 0.0040)
    gamma: float = 7.37  # tuned (start 1.0; Δ 0.0014)
    beta_tf: float = 0.095  # tuned (start 0.0; Δ 0.0015)
    # multipliers
    gamma_cov: float = 0.055  # tuned (architecture A's 0.25; Δ 0.0020)
    beta_spec: float = 0.1  # starting value, kept: tuning gained < 0.0005 (B_spec <= 1 + 0.1·3)
    c_spec: float = 3.0  # published value (tuning gained < 0.0005)
    floor: float = 10.0  # starting value, kept: tuning gained < 0.0005 (a short passage, in tokens)
    gamma_coord: float = 2.5  # published value (tuning gained < 0.0005)
    alpha_anc: float = 0.2  # starting value, kept: tuning gained < 0.0005 (B_anc <= 1 + 0.2·ln 2)
    pi_anchor: float = 4.2  # published value (π; tuning gained < 0.0005 with alpha_anc = 0.2)
    alpha_len: float = 1.69  # tuned (published 0.15; Δ 0.0211, the largest): stronger length damping
    # channel weights (base is 1)
    w_pfx: float = 0.45  # tuned (architecture A's 0.18; Δ 0.0036)
    w_bi: float = 0.2  # tuned (start 0.1; Δ 0.0018)
    w_mic: float = 0.25  # tuned (start 0.05; Δ 0.0033)
    # micro-channel gate G(q) = sigmoid((mean IDF(q) - pi_l) / mu_m)
    mic_gate: bool = False  # docs/scoring.md §5.2: G tends to 1 in practice, so off by default
    pi_l: float = 2.0  # starting value, pending tuning on training data
    mu_m: float = 1.0  # starting value, pending tuning on training data
    idf: IdfVariant = IdfVariant.SURPRISAL  # docs/scoring.md §5.4 (architecture A's IDF)

    def __post_init__(self) -> None:
        check_idf_variant(self)
        check_nonnegative(self)
        check_positive(self, "gamma", "mu_m")

    @property
    def channel_weights(self) -> ChannelWeights:
        """``base = 1``, ``prefix = w_pfx``, ``bigram = w_bi``, ``micro = w_mic``."""
        return ChannelWeights(base=1.0, prefix=self.w_pfx, bigram=self.w_bi, micro=self.w_mic)


# --- term weight and evidence ----------------------------------------------------


def term_weight(
    idf: FloatArray,
    qtf: FloatArray,
    *,
    alpha_qtf: float,
    gamma_e: float,
    gamma: float,
    beta_tf: float,
) -> FloatArray:
    """Query-term weight.

    ``w(t) = qtf(t,q) · α_qtf · IDF(t) · (IDF/(IDF + 1))^γ_e · (IDF/(IDF + γ))^β_tf``

    Source: docs/scoring.md §5.4; the clarity factor ``(IDF/(IDF+1))^γ_e`` is
    architecture A's.  ``idf`` must be >= 0 and ``γ`` > 0.

    Returns:
        ``(T,)`` weights, >= 0.
    """
    idf = np.asarray(idf, dtype=np.float64)
    clarity = (idf / (idf + 1.0)) ** gamma_e
    focus = (idf / (idf + gamma)) ** beta_tf
    return np.asarray(qtf, dtype=np.float64) * (alpha_qtf * idf * clarity * focus)


def evidence(tf: FloatArray, w: FloatArray) -> FloatArray:
    """Evidence ``E = Σ_{t in M} w(t) · ln(1 + tf(t,d)/1.0)``.

    Unmatched terms add ``ln 1 = 0``, so the sum runs over all query terms.
    Source: docs/scoring.md §5.4.

    Returns:
        ``(D,)``.
    """
    return np.log1p(tf) @ w


def matched_mass(tf: FloatArray, w: FloatArray) -> tuple[FloatArray, FloatArray]:
    """``(Σ_{t in M} w(t), |M|)`` per candidate, ``M = {t : tf(t,d) > 0}``.

    Returns:
        two ``(D,)`` arrays.
    """
    both = np.asarray((tf > 0.0) @ np.column_stack((w, np.ones_like(w))), dtype=np.float64)
    return both[:, 0], both[:, 1]


# --- multipliers -----------------------------------------------------------------


def coverage_multiplier(matched_w: FloatArray, total_w: float, gamma_cov: float) -> FloatArray:
    """Coverage ``B_cov = 1 + γ_cov · Σ_{t in M} w(t) / Σ_{t in q} w(t)``.

    With ``Σ_q w = 0`` the ratio is taken as 0 (``B_cov = 1``).
    Source: docs/scoring.md §5.5 (architecture A's soft-AND coverage).
    """
    if total_w <= 0.0:
        return np.ones_like(matched_w)
    return 1.0 + (gamma_cov / total_w) * matched_w


def specificity_multiplier(
    tf: FloatArray,
    doc_len: FloatArray,
    df: FloatArray,
    n_docs: int,
    w: FloatArray,
    *,
    beta_spec: float,
    c_spec: float,
    floor: float,
) -> FloatArray:
    """Specificity ``B_spec = 1 + β_spec/Σ_q w · Σ_{t in M, PMI > 0} w(t) · min(PMI(t,d), C_spec)``.

    ``PMI(t,d) = ln(tf(t,d) · N / (|d|_eff · df(t)))``, ``|d|_eff = max(|d|, floor)``.

    Computed as ``Σ_t w(t) · ln(clip(tf·N/(|d|_eff·df), 1, e^C_spec))``: the clip at 1
    drops unmatched terms (``tf = 0``) and ``PMI <= 0``, the clip at ``e^C_spec`` is
    the cap.  ``df`` is floored at 1 (a term absent from the index is in no
    candidate) and a zero ``|d|_eff`` contributes nothing, so the value stays finite.
    With ``Σ_q w = 0``, ``B_spec = 1``.  Source: docs/scoring.md §5.5, §5.6.
    """
    total_w = float(np.sum(w))
    if total_w <= 0.0 or beta_spec == 0.0:
        return np.ones(tf.shape[0], dtype=np.float64)
    d_eff = np.maximum(np.asarray(doc_len, dtype=np.float64), floor)
    inv_len = np.zeros_like(d_eff)
    np.divide(1.0, d_eff, out=inv_len, where=d_eff > 0.0)
    x = tf * (float(n_docs) / np.maximum(df, 1.0))
    x *= inv_len[:, None]
    np.clip(x, 1.0, math.exp(c_spec), out=x)
    np.log(x, out=x)
    return 1.0 + (beta_spec / total_w) * (x @ w)


def coordination_multiplier(
    n_matched: FloatArray, n_terms: int, total_w: float, gamma_coord: float
) -> FloatArray:
    """Coordination ``B_coord = 1 + γ_coord · γ_coord/(γ_coord + ln(1 + Σ_q w)) · |M|/|q|``.

    ``|q| = T``, the number of distinct query terms; ``T = 0`` gives 1.  Long,
    common-term queries (large ``Σ_q w``) get a smaller reward per matched term.
    Source: docs/scoring.md §5.5.
    """
    den = gamma_coord + math.log1p(max(total_w, 0.0))
    if n_terms == 0 or den <= 0.0:
        return np.ones_like(n_matched)
    return 1.0 + (gamma_coord * gamma_coord / den / n_terms) * n_matched


def anchor_multiplier(tf: FloatArray, idf: FloatArray, pi_anchor: float, alpha_anc: float) -> FloatArray:
    """Anchor ``B_anc = 1 + α_anc · ln(1 + A)``, ``A = max_{t in M, IDF > π} (IDF − π)/IDF``.

    ``A = 0`` when no matched term has ``IDF > π``.  Rewards the single best rare
    term hit.  Source: docs/scoring.md §5.5.
    """
    idf = np.asarray(idf, dtype=np.float64)
    cols = np.flatnonzero(idf > pi_anchor)
    if cols.size == 0 or alpha_anc == 0.0:
        return np.ones(tf.shape[0], dtype=np.float64)
    excess = (idf[cols] - pi_anchor) / idf[cols]
    best = ((tf[:, cols] > 0.0) * excess).max(axis=1)
    out: FloatArray = 1.0 + alpha_anc * np.log1p(best)
    return out


def length_damper(doc_len: FloatArray, avgdl: float, alpha_len: float) -> FloatArray:
    """Length damper ``B_len = 1 + α_len · ln(1 + (|d| + 1)/(avgdl + 1))`` (a divisor, >= 1).

    Gentler than BM25's pivoted normalisation.  A negative ``avgdl`` is read as 0.
    Source: docs/scoring.md §5.5.
    """
    doc_len = np.asarray(doc_len, dtype=np.float64)
    return 1.0 + alpha_len * np.log1p((doc_len + 1.0) / (max(avgdl, 0.0) + 1.0))


def mic_gate(idf: FloatArray, pi_l: float, mu_m: float) -> float:
    """Micro-channel gate ``G(q) = sigmoid((mean_{t in q} IDF(t) − π_L) / μ_m)``.

    The mean is over the channel's distinct query terms; an empty query gives
    ``G = 1`` (its ``R`` is 0 anyway).  Source: docs/scoring.md §5.2.
    """
    idf = np.asarray(idf, dtype=np.float64)
    if idf.size == 0:
        return 1.0
    return sigmoid((float(idf.mean()) - pi_l) / mu_m)


# --- the same over the matched cells only ----------------------------------------

#: Below this many cells (candidates x terms) a channel is scored densely.
SPARSE_MIN_CELLS = 4096
#: Above this share of non-zero cells a channel is scored densely.
SPARSE_MAX_DENSITY = 0.25


@dataclass(frozen=True)
class _Matches:
    """A channel's non-zero ``tf`` cells, for computing the per-candidate sums and maxima
    above over the matched terms only (first-stage candidates match a few of the terms).

    Each piece equals its dense function's value (up to the order of floating-point sums)."""

    rows: np.ndarray  # candidate of each matched cell
    cols: np.ndarray  # query term of each matched cell
    tf: FloatArray  # its tf (> 0)
    n: int  # candidates

    @staticmethod
    def of(tf: FloatArray) -> _Matches | None:
        """The matched cells of ``tf``, or ``None`` when too many are matched to gain."""
        flat = np.flatnonzero(tf > 0.0)
        if flat.size > SPARSE_MAX_DENSITY * tf.size:
            return None
        rows, cols = np.divmod(flat, tf.shape[1])
        return _Matches(rows, cols, tf.reshape(-1)[flat], tf.shape[0])

    def _sum(self, values: FloatArray) -> FloatArray:
        out: FloatArray = np.bincount(self.rows, weights=values, minlength=self.n).astype(np.float64, copy=False)
        return out

    def pieces(self, w: FloatArray, idf: FloatArray, doc_len: FloatArray, df: FloatArray, n_docs: int,
               params: EvolvedParams) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray]:
        """``E``, ``Σ_M w``, ``|M|``, ``B_spec`` and ``B_anc`` per candidate."""
        w_cell = w[self.cols]
        e = self._sum(np.log1p(self.tf) * w_cell)
        matched_w = self._sum(w_cell)
        n_matched = np.bincount(self.rows, minlength=self.n).astype(np.float64)
        total_w = float(np.sum(w))
        if total_w <= 0.0 or params.beta_spec == 0.0:
            spec = np.ones(self.n, dtype=np.float64)
        else:
            d_eff = np.maximum(np.asarray(doc_len, dtype=np.float64), params.floor)
            inv_len = np.zeros_like(d_eff)
            np.divide(1.0, d_eff, out=inv_len, where=d_eff > 0.0)
            x = self.tf * (float(n_docs) / np.maximum(np.asarray(df, dtype=np.float64), 1.0))[self.cols]
            x *= inv_len[self.rows]
            np.clip(x, 1.0, math.exp(params.c_spec), out=x)
            np.log(x, out=x)
            spec = 1.0 + (params.beta_spec / total_w) * self._sum(x * w_cell)
        idf = np.asarray(idf, dtype=np.float64)
        anchored = idf > params.pi_anchor
        if params.alpha_anc == 0.0 or not anchored.any():
            anc = np.ones(self.n, dtype=np.float64)
        else:
            excess = np.where(anchored, (idf - params.pi_anchor) / np.where(anchored, idf, 1.0), 0.0)
            best = np.zeros(self.n, dtype=np.float64)
            np.maximum.at(best, self.rows, excess[self.cols])
            anc = 1.0 + params.alpha_anc * np.log1p(best)
        return e, matched_w, n_matched, spec, anc


# --- one channel, all channels ---------------------------------------------------


def channel_relevance(
    arrays: ChannelArrays, params: EvolvedParams
) -> tuple[FloatArray, dict[str, FloatArray]]:
    """One channel's ``R = ln(1 + E) · B_cov · B_spec · B_coord · B_anc / B_len``.

    Returns:
        ``R`` ``(D,)`` and the parts ``{"evidence", "B_cov", "B_spec", "B_coord",
        "B_anc", "B_len"}`` (without the channel prefix).
    """
    idf = params.idf.compute(arrays.df, arrays.n_docs)
    w = term_weight(
        idf,
        arrays.qtf,
        alpha_qtf=params.alpha_qtf,
        gamma_e=params.gamma_e,
        gamma=params.gamma,
        beta_tf=params.beta_tf,
    )
    total_w = float(w.sum())
    tf = np.asarray(arrays.tf, dtype=np.float64)
    sparse = _Matches.of(tf) if tf.size >= SPARSE_MIN_CELLS else None
    if sparse is not None:
        e, matched_w, n_matched, spec, anc = sparse.pieces(w, idf, arrays.doc_len, arrays.df, arrays.n_docs, params)
    else:
        e = evidence(tf, w)
        matched_w, n_matched = matched_mass(tf, w)
        spec = specificity_multiplier(tf, arrays.doc_len, arrays.df, arrays.n_docs, w, beta_spec=params.beta_spec,
                                      c_spec=params.c_spec, floor=params.floor)
        anc = anchor_multiplier(tf, idf, params.pi_anchor, params.alpha_anc)
    parts = {
        "evidence": e,
        "B_cov": coverage_multiplier(matched_w, total_w, params.gamma_cov),
        "B_spec": spec,
        "B_coord": coordination_multiplier(n_matched, arrays.n_terms, total_w, params.gamma_coord),
        "B_anc": anc,
        "B_len": length_damper(arrays.doc_len, arrays.avgdl, params.alpha_len),
    }
    r = np.log1p(e)
    r *= parts["B_cov"]
    r *= parts["B_spec"]
    r *= parts["B_coord"]
    r *= parts["B_anc"]
    r /= parts["B_len"]
    return r, parts


def score_evolved(inputs: ScoringInput, params: EvolvedParams) -> ScoreResult:
    """``score = R(base) + w_pfx·R(pfx) + w_bi·R(bi) + w_mic·G(q_mic)·R(mic)``.

    ``G = 1`` unless ``params.mic_gate``.  Source: docs/scoring.md §5.2.
    """
    channels = weighted_channels(inputs, params.channel_weights)
    n = channels[0][2].n_candidates if channels else inputs.n_candidates
    scores = np.zeros(n, dtype=np.float64)
    out_parts: dict[str, FloatArray] = {}
    for name, weight, arrays in channels:
        r, parts = channel_relevance(arrays, params)
        if params.mic_gate and name == GATED_CHANNEL:
            gate = mic_gate(params.idf.compute(arrays.df, arrays.n_docs), params.pi_l, params.mu_m)
            out_parts[f"{name}.G"] = np.full(n, gate)
            weight *= gate
        for key, value in parts.items():
            out_parts[f"{name}.{key}"] = value
        out_parts[f"{name}.R"] = r
        scores += weight * r
    return ScoreResult(scores=scores, parts=out_parts)


EVOLVED: Scorer[EvolvedParams] = register(
    Scorer(
        name="evolved",
        params_type=EvolvedParams,
        fn=score_evolved,
        channels=CHANNELS,
        description="Evolved multi-channel lexical scorer (base, prefix, bigram, micro channels)",
    )
)
