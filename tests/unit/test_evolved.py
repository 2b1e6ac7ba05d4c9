"""The evolved scorer (docs/scoring.md §5), checked against values worked out by hand.

Toy collection used throughout: N = 10 documents, average length 12, a base-channel
query of three distinct terms

    term    qtf  df   surprisal IDF = -ln((df + 1)/(N + 2))
    apple    1    2   -ln(3/12) = ln 4
    berry    2    5   -ln(6/12) = ln 2
    cocoa    1    1   -ln(2/12) = ln 6

and three candidates

    doc   tf(apple) tf(berry) tf(cocoa)  |d|
    d1        3         1         0       20
    d2        0         2         0        8
    d3        1         0         2        5
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from esbridge.scoring import ChannelArrays, ScoringInput, available_scorers, get_scorer
from esbridge.scoring.common import ChannelWeights, IdfVariant, channels_needed
from esbridge.scoring.evolved import (
    EvolvedParams,
    anchor_multiplier,
    coordination_multiplier,
    length_damper,
    mic_gate,
    score_evolved,
    specificity_multiplier,
    term_weight,
)
from tests.unit.toys import channel_arrays

LN = math.log

#: The starting values (docs/scoring.md §5.7: the published formula and architecture A) that
#: the hand-worked figures below were computed with.  The shipped defaults are tuned (see EvolvedParams and
#: benchmarks/results/tuning/), so these tests pin the values they work by hand.
START_VALUES = dict(alpha_qtf=1.0, gamma_e=0.6, gamma=1.0, beta_tf=0.0, gamma_cov=0.25, beta_spec=0.1,
                    c_spec=3.0, floor=10.0, gamma_coord=2.5, alpha_anc=0.2, pi_anchor=4.2, alpha_len=0.15,
                    w_pfx=0.18, w_bi=0.1, w_mic=0.05)


def start_params(**overrides: object) -> EvolvedParams:
    """:class:`EvolvedParams` at the starting values, with ``overrides``."""
    return EvolvedParams(**{**START_VALUES, **overrides})  # type: ignore[arg-type]


channel = channel_arrays


def toy_base() -> ChannelArrays:
    return channel([[3, 1, 0], [0, 2, 0], [1, 0, 2]], [2, 5, 1], [1, 2, 1], [20, 8, 5])


def empty_channel(n_candidates: int = 3) -> ChannelArrays:
    return channel([[] for _ in range(n_candidates)], [], [], [20, 8, 5][:n_candidates])


ONLY_BASE = start_params(w_pfx=0.0, w_bi=0.0, w_mic=0.0)


# Hand-worked term weights with the defaults (α_qtf = 1, γ_e = 0.6, β_tf = 0):
# w(t) = qtf · IDF · (IDF/(IDF + 1))^0.6
W_APPLE = 1 * LN(4) * (LN(4) / (LN(4) + 1)) ** 0.6
W_BERRY = 2 * LN(2) * (LN(2) / (LN(2) + 1)) ** 0.6
W_COCOA = 1 * LN(6) * (LN(6) / (LN(6) + 1)) ** 0.6
W_TOTAL = W_APPLE + W_BERRY + W_COCOA


def base_parts() -> dict[str, np.ndarray]:
    result = score_evolved(ScoringInput({"base": toy_base()}), ONLY_BASE)
    return dict(result.parts)


# --- term weight ------------------------------------------------------------------


def test_term_weight_defaults_match_hand_values() -> None:
    idf = np.array([LN(4), LN(2), LN(6)])
    got = term_weight(idf, np.array([1.0, 2.0, 1.0]), alpha_qtf=1.0, gamma_e=0.6, gamma=1.0, beta_tf=0.0)
    np.testing.assert_allclose(got, [W_APPLE, W_BERRY, W_COCOA], rtol=1e-12)


def test_term_weight_every_factor() -> None:
    # α_qtf = 1.5, γ_e = 0.6, γ = 2, β_tf = 0.5 on berry (qtf 2, IDF ln 2):
    # 2 · 1.5 · ln2 · (ln2/(ln2 + 1))^0.6 · (ln2/(ln2 + 2))^0.5
    expected = 2 * 1.5 * LN(2) * (LN(2) / (LN(2) + 1)) ** 0.6 * (LN(2) / (LN(2) + 2)) ** 0.5
    got = term_weight(np.array([LN(2)]), np.array([2.0]), alpha_qtf=1.5, gamma_e=0.6, gamma=2.0, beta_tf=0.5)
    assert got[0] == pytest.approx(expected, rel=1e-12)


def test_term_weight_zero_idf_is_zero() -> None:
    got = term_weight(np.array([0.0]), np.array([3.0]), alpha_qtf=1.0, gamma_e=0.6, gamma=1.0, beta_tf=0.0)
    assert got[0] == 0.0


# --- evidence and multipliers on the toy ------------------------------------------


def test_evidence() -> None:
    # E = Σ_{t in M} w(t)·ln(1 + tf)
    expected = [
        W_APPLE * LN(1 + 3) + W_BERRY * LN(1 + 1),  # d1: apple 3, berry 1
        W_BERRY * LN(1 + 2),  # d2: berry 2
        W_APPLE * LN(1 + 1) + W_COCOA * LN(1 + 2),  # d3: apple 1, cocoa 2
    ]
    np.testing.assert_allclose(base_parts()["base.evidence"], expected, rtol=1e-12)


def test_coverage_multiplier() -> None:
    # B_cov = 1 + 0.25 · Σ_M w / Σ_q w
    expected = [
        1 + 0.25 * (W_APPLE + W_BERRY) / W_TOTAL,
        1 + 0.25 * W_BERRY / W_TOTAL,
        1 + 0.25 * (W_APPLE + W_COCOA) / W_TOTAL,
    ]
    np.testing.assert_allclose(base_parts()["base.B_cov"], expected, rtol=1e-12)


def test_specificity_multiplier_with_floor() -> None:
    # |d|_eff = max(|d|, 10) = 20, 10, 10.  PMI = ln(tf·N/(|d|_eff·df)):
    # d1 apple 3·10/(20·2) = 0.75, berry 1·10/(20·5) = 0.1   -> both PMI < 0
    # d2 berry 2·10/(10·5) = 0.4                             -> PMI < 0
    # d3 apple 1·10/(10·2) = 0.5 (< 0), cocoa 2·10/(10·1) = 2 -> ln 2
    expected = [1.0, 1.0, 1 + 0.1 / W_TOTAL * W_COCOA * LN(2)]
    np.testing.assert_allclose(base_parts()["base.B_spec"], expected, rtol=1e-12)


def test_specificity_multiplier_cap_and_no_floor() -> None:
    # N = 1000, one term df = 1, w = 2, β_spec = 0.5, C_spec = 3.
    # d1: tf 5, |d| 10: PMI = ln(5·1000/(10·1)) = ln 500 ≈ 6.2 -> capped at 3
    # d2: tf 1, |d| 400: PMI = ln(1000/400) = ln 2.5
    # d3: tf 1, |d| 2, floor 0: PMI = ln(1000/2) = ln 500 -> capped at 3
    got = specificity_multiplier(
        np.array([[5.0], [1.0], [1.0]]),
        np.array([10.0, 400.0, 2.0]),
        np.array([1.0]),
        1000,
        np.array([2.0]),
        beta_spec=0.5,
        c_spec=3.0,
        floor=0.0,
    )
    # B_spec = 1 + 0.5/2 · 2 · min(PMI, 3)
    expected = [1 + 0.5 * 3.0, 1 + 0.5 * LN(2.5), 1 + 0.5 * 3.0]
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_coordination_multiplier() -> None:
    # B_coord = 1 + 2.5 · 2.5/(2.5 + ln(1 + Σ_q w)) · |M|/3, |M| = 2, 1, 2
    damp = 2.5 * 2.5 / (2.5 + LN(1 + W_TOTAL))
    expected = [1 + damp * 2 / 3, 1 + damp * 1 / 3, 1 + damp * 2 / 3]
    np.testing.assert_allclose(base_parts()["base.B_coord"], expected, rtol=1e-12)


def test_anchor_multiplier_is_one_below_pi() -> None:
    # toy IDFs ln 4, ln 2, ln 6 are all below π = 4.2
    np.testing.assert_allclose(base_parts()["base.B_anc"], [1.0, 1.0, 1.0])


def test_anchor_multiplier_best_rare_hit() -> None:
    # N = 1000; df 1, 10, 100 -> IDF ln(1002/2) ≈ 6.22, ln(1002/11) ≈ 4.51, ln(1002/101) ≈ 2.29
    idf_1, idf_10, idf_100 = LN(1002 / 2), LN(1002 / 11), LN(1002 / 101)
    tf = np.array([[1.0, 2.0, 1.0], [0.0, 1.0, 1.0], [0.0, 0.0, 4.0]])
    got = anchor_multiplier(tf, np.array([idf_1, idf_10, idf_100]), 4.2, 0.2)
    expected = [
        1 + 0.2 * LN(1 + (idf_1 - 4.2) / idf_1),  # max of the two rare hits is the rarer
        1 + 0.2 * LN(1 + (idf_10 - 4.2) / idf_10),
        1.0,  # only the common term: A = 0
    ]
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_anchor_multiplier_in_scorer_uses_surprisal_idf() -> None:
    # N = 1000, df = 1: IDF = ln(1002/2); candidate 2 does not contain the term
    arrays = channel([[1.0], [0.0]], [1.0], [1.0], [10.0, 10.0], n_docs=1000, avgdl=10.0)
    parts = score_evolved(ScoringInput({"base": arrays}), ONLY_BASE).parts
    idf = LN(1002 / 2)
    np.testing.assert_allclose(parts["base.B_anc"], [1 + 0.2 * LN(1 + (idf - 4.2) / idf), 1.0], rtol=1e-12)


def test_length_damper() -> None:
    # B_len = 1 + 0.15 · ln(1 + (|d| + 1)/(12 + 1))
    expected = [1 + 0.15 * LN(1 + 21 / 13), 1 + 0.15 * LN(1 + 9 / 13), 1 + 0.15 * LN(1 + 6 / 13)]
    np.testing.assert_allclose(base_parts()["base.B_len"], expected, rtol=1e-12)
    np.testing.assert_allclose(length_damper(np.array([0.0]), 0.0, 0.15), [1 + 0.15 * LN(2)])


def hand_r_base() -> list[float]:
    """R = ln(1 + E)·B_cov·B_spec·B_coord·B_anc/B_len for the three toy candidates."""
    damp = 2.5 * 2.5 / (2.5 + LN(1 + W_TOTAL))
    e = [W_APPLE * LN(4) + W_BERRY * LN(2), W_BERRY * LN(3), W_APPLE * LN(2) + W_COCOA * LN(3)]
    cov = [(W_APPLE + W_BERRY) / W_TOTAL, W_BERRY / W_TOTAL, (W_APPLE + W_COCOA) / W_TOTAL]
    spec = [1.0, 1.0, 1 + 0.1 / W_TOTAL * W_COCOA * LN(2)]
    matched = [2, 1, 2]
    length = [21, 9, 6]
    return [
        LN(1 + e[i])
        * (1 + 0.25 * cov[i])
        * spec[i]
        * (1 + damp * matched[i] / 3)
        * 1.0
        / (1 + 0.15 * LN(1 + length[i] / 13))
        for i in range(3)
    ]


def test_relevance_and_score_of_base_channel() -> None:
    result = score_evolved(ScoringInput({"base": toy_base()}), ONLY_BASE)
    np.testing.assert_allclose(result.parts["base.R"], hand_r_base(), rtol=1e-12)
    np.testing.assert_allclose(result.scores, hand_r_base(), rtol=1e-12)


# --- channels and gate ------------------------------------------------------------

# micro channel: one term, qtf 1, df 4 -> IDF = -ln(5/12) = ln(12/5); tf = 1, 0, 2
W_MIC = LN(12 / 5) * (LN(12 / 5) / (LN(12 / 5) + 1)) ** 0.6


def micro_channel() -> ChannelArrays:
    return channel([[1.0], [0.0], [2.0]], [4.0], [1.0], [20, 8, 5])


def hand_r_micro() -> list[float]:
    # B_spec: d1 1·10/(20·4) < 1, d3 2·10/(10·4) < 1 -> 1; B_anc = 1; |M|/|q| = 1, 0, 1
    damp = 2.5 * 2.5 / (2.5 + LN(1 + W_MIC))
    return [
        LN(1 + W_MIC * LN(2)) * 1.25 * (1 + damp) / (1 + 0.15 * LN(1 + 21 / 13)),
        0.0,
        LN(1 + W_MIC * LN(3)) * 1.25 * (1 + damp) / (1 + 0.15 * LN(1 + 6 / 13)),
    ]


def all_channels() -> ScoringInput:
    # prefix = a copy of base (same R); bigram has no terms (R = 0)
    return ScoringInput(
        {"base": toy_base(), "prefix": toy_base(), "bigram": empty_channel(), "micro": micro_channel()}
    )


def test_four_channel_sum_with_default_weights() -> None:
    # score = R_base + 0.18·R_pfx + 0.1·0 + 0.05·1·R_mic
    result = score_evolved(all_channels(), start_params())
    expected = [
        r + 0.18 * r + 0.05 * m for r, m in zip(hand_r_base(), hand_r_micro(), strict=True)
    ]
    np.testing.assert_allclose(result.scores, expected, rtol=1e-12)
    np.testing.assert_allclose(result.parts["micro.R"], hand_r_micro(), rtol=1e-12, atol=0)
    np.testing.assert_array_equal(result.parts["bigram.R"], [0.0, 0.0, 0.0])
    assert "micro.G" not in result.parts


def test_micro_gate_when_enabled() -> None:
    # G = sigmoid((mean IDF - π_L)/μ_m) = 1/(1 + exp(-(ln(12/5) - 2)/1))
    gate = 1 / (1 + math.exp(-(LN(12 / 5) - 2.0) / 1.0))
    assert mic_gate(np.array([LN(12 / 5)]), 2.0, 1.0) == pytest.approx(gate, rel=1e-12)
    result = score_evolved(all_channels(), start_params(mic_gate=True))
    expected = [
        r * 1.18 + 0.05 * gate * m for r, m in zip(hand_r_base(), hand_r_micro(), strict=True)
    ]
    np.testing.assert_allclose(result.scores, expected, rtol=1e-12)
    np.testing.assert_allclose(result.parts["micro.G"], [gate] * 3, rtol=1e-12)


def test_mic_gate_mean_over_terms_and_empty() -> None:
    # mean of (1, 3) is 2 = π_L -> sigmoid(0) = 0.5
    assert mic_gate(np.array([1.0, 3.0]), 2.0, 0.5) == pytest.approx(0.5)
    assert mic_gate(np.array([]), 2.0, 1.0) == 1.0


def test_lucene_idf_option() -> None:
    # Lucene IDF of apple (df 2, N 10): ln(1 + 8.5/2.5); one-term query, d1 tf = 3
    arrays = channel([[3.0], [0.0]], [2.0], [1.0], [20.0, 8.0])
    idf = LN(1 + 8.5 / 2.5)
    w = idf * (idf / (idf + 1)) ** 0.6
    params = start_params(w_pfx=0.0, w_bi=0.0, w_mic=0.0, idf=IdfVariant.LUCENE)
    parts = score_evolved(ScoringInput({"base": arrays}), params).parts
    np.testing.assert_allclose(parts["base.evidence"], [w * LN(4), 0.0], rtol=1e-12)


def test_idf_accepts_string_value_and_rejects_unknown() -> None:
    assert EvolvedParams(idf="lucene").idf is IdfVariant.LUCENE  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="surprisal"):
        EvolvedParams(idf="bm25")  # type: ignore[arg-type]


# --- empty channels, missing channels --------------------------------------------


def test_channel_with_no_terms_contributes_zero() -> None:
    params = start_params()
    inputs = ScoringInput({name: empty_channel() for name in ("base", "prefix", "bigram", "micro")})
    result = score_evolved(inputs, params)
    np.testing.assert_array_equal(result.scores, [0.0, 0.0, 0.0])
    for name in ("base", "micro"):
        np.testing.assert_array_equal(result.parts[f"{name}.B_cov"], [1.0, 1.0, 1.0])
        np.testing.assert_array_equal(result.parts[f"{name}.B_coord"], [1.0, 1.0, 1.0])


def test_missing_channel_with_zero_weight_is_fine() -> None:
    result = score_evolved(ScoringInput({"base": toy_base(), "prefix": toy_base()}), start_params(w_bi=0.0, w_mic=0.0))
    np.testing.assert_allclose(result.scores, [r * 1.18 for r in hand_r_base()], rtol=1e-12)
    assert not any(key.startswith("bigram.") for key in result.parts)


def test_missing_channel_with_weight_is_a_key_error_naming_it() -> None:
    inputs = ScoringInput({"base": toy_base(), "prefix": toy_base(), "micro": micro_channel()})
    with pytest.raises(KeyError, match="bigram"):
        score_evolved(inputs, start_params())


def test_channels_of_different_lengths_are_rejected() -> None:
    short = channel([[1.0]], [1.0], [1.0], [4.0])
    with pytest.raises(ValueError, match="candidates"):
        score_evolved(ScoringInput({"base": toy_base(), "prefix": short}), start_params(w_bi=0.0, w_mic=0.0))


def test_no_candidates() -> None:
    arrays = channel([], [2.0, 5.0], [1.0, 1.0], [])
    result = score_evolved(ScoringInput({"base": arrays}), ONLY_BASE)
    assert result.scores.shape == (0,)


def test_zero_avgdl_and_zero_length_documents() -> None:
    # an index of empty documents: B_len = 1 + 0.15·ln(1 + 1/1)
    arrays = channel([[0.0], [0.0]], [0.0], [1.0], [0.0, 0.0], n_docs=2, avgdl=0.0)
    result = score_evolved(ScoringInput({"base": arrays}), start_params(floor=0.0, w_pfx=0, w_bi=0, w_mic=0))
    np.testing.assert_array_equal(result.scores, [0.0, 0.0])
    np.testing.assert_allclose(result.parts["base.B_len"], [1 + 0.15 * LN(2)] * 2)


def test_coordination_multiplier_with_zero_gamma_and_zero_mass() -> None:
    np.testing.assert_array_equal(coordination_multiplier(np.array([1.0]), 1, 0.0, 0.0), [1.0])


# --- registry, channel weights, parameters -----------------------------------------


def test_registered_with_all_channels() -> None:
    assert "evolved" in available_scorers()
    scorer = get_scorer("evolved")
    assert scorer.channels == ("base", "prefix", "bigram", "micro")
    assert scorer.params_type is EvolvedParams
    np.testing.assert_allclose(scorer.score(all_channels()).scores,
                               score_evolved(all_channels(), EvolvedParams()).scores)


def test_channel_weights_and_channels_needed() -> None:
    params = start_params(w_bi=0.0)
    assert params.channel_weights == ChannelWeights(base=1.0, prefix=0.18, bigram=0.0, micro=0.05)
    assert channels_needed(params, get_scorer("evolved").channels) == ("base", "prefix", "micro")
    assert channels_needed(object(), ("base",)) == ("base",)


def test_defaults() -> None:
    # published values kept, tuned values as recorded in EvolvedParams (benchmarks/results/tuning/)
    p = EvolvedParams()
    assert (p.c_spec, p.gamma_coord, p.pi_anchor) == (3.0, 2.5, 4.2)
    assert (p.alpha_qtf, p.gamma_e, p.gamma, p.beta_tf, p.gamma_cov, p.alpha_len) == (
        0.205, 1.24, 7.37, 0.095, 0.055, 1.69)
    assert (p.beta_spec, p.floor, p.alpha_anc) == (0.1, 10.0, 0.2)
    assert p.channel_weights == ChannelWeights(base=1.0, prefix=0.45, bigram=0.2, micro=0.25)
    assert p.mic_gate is False
    assert p.idf is IdfVariant.SURPRISAL


@pytest.mark.parametrize(
    "name", ["alpha_qtf", "gamma_e", "beta_tf", "gamma_cov", "beta_spec", "c_spec", "floor",
             "gamma_coord", "alpha_anc", "pi_anchor", "alpha_len", "w_pfx", "w_bi", "w_mic", "pi_l"]
)
@pytest.mark.parametrize("value", [-0.1, math.nan, math.inf])
def test_invalid_parameters_are_value_errors_naming_them(name: str, value: float) -> None:
    with pytest.raises(ValueError, match=name):
        EvolvedParams(**{name: value})  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["gamma", "mu_m"])
def test_strictly_positive_parameters(name: str) -> None:
    with pytest.raises(ValueError, match=name):
        EvolvedParams(**{name: 0.0})  # type: ignore[arg-type]


def test_make_params_through_registry() -> None:
    p = get_scorer("evolved").make_params(w_bi=0.3)
    assert isinstance(p, EvolvedParams) and p.w_bi == 0.3
    with pytest.raises(ValueError, match="w_bigram"):
        get_scorer("evolved").make_params(w_bigram=0.3)


# --- the matched-cells path ---------------------------------------------------------


def test_hand_worked_values_hold_over_the_matched_cells_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forced onto the sparse path (every channel, however small or dense), the hand-worked
    relevance and the four-channel sum are unchanged."""
    import esbridge.scoring.evolved as evolved

    monkeypatch.setattr(evolved, "SPARSE_MIN_CELLS", 0)
    monkeypatch.setattr(evolved, "SPARSE_MAX_DENSITY", 1.0)
    assert evolved._Matches.of(toy_base().tf) is not None
    test_relevance_and_score_of_base_channel()
    test_four_channel_sum_with_default_weights()


@pytest.mark.parametrize("density", [0.0, 0.02, 0.2])
def test_matched_cells_path_equals_the_dense_functions(density: float) -> None:
    """A large sparse channel (the sparse path) gives the per-piece dense functions' values,
    with zero lengths, absent terms (df 0) and terms above and below the anchor threshold."""
    import esbridge.scoring.evolved as evolved

    rng = np.random.default_rng(7)
    d, t = 600, 24
    tf = np.where(rng.random((d, t)) < density, rng.geometric(0.4, (d, t)), 0).astype(np.float64)
    df = rng.integers(0, 50_000, t).astype(np.float64)
    df[:3] = [0.0, 1.0, 49_999.0]
    doc_len = tf.sum(axis=1) + rng.integers(0, 300, d)
    doc_len[:5] = 0.0
    arrays = ChannelArrays(terms=tuple(f"t{i}" for i in range(t)), qtf=rng.integers(1, 3, t).astype(np.float64),
                           df=df, n_docs=50_000, tf=tf, doc_len=doc_len, avgdl=120.0)
    assert tf.size >= evolved.SPARSE_MIN_CELLS and evolved._Matches.of(tf) is not None
    for params in (EvolvedParams(), start_params(), start_params(beta_spec=0.0, alpha_anc=0.0)):
        r, parts = evolved.channel_relevance(arrays, params)
        idf = params.idf.compute(df, 50_000)
        w = term_weight(idf, arrays.qtf, alpha_qtf=params.alpha_qtf, gamma_e=params.gamma_e, gamma=params.gamma,
                        beta_tf=params.beta_tf)
        matched_w, n_matched = evolved.matched_mass(tf, w)
        want = {
            "evidence": evolved.evidence(tf, w),
            "B_cov": evolved.coverage_multiplier(matched_w, float(w.sum()), params.gamma_cov),
            "B_spec": specificity_multiplier(tf, doc_len, df, 50_000, w, beta_spec=params.beta_spec,
                                             c_spec=params.c_spec, floor=params.floor),
            "B_coord": coordination_multiplier(n_matched, t, float(w.sum()), params.gamma_coord),
            "B_anc": anchor_multiplier(tf, idf, params.pi_anchor, params.alpha_anc),
        }
        for key, value in want.items():
            np.testing.assert_allclose(parts[key], value, rtol=1e-12, atol=1e-15, err_msg=key)
        np.testing.assert_allclose(r, np.log1p(want["evidence"]) * want["B_cov"] * want["B_spec"] * want["B_coord"]
                                   * want["B_anc"] / parts["B_len"], rtol=1e-12, atol=1e-15)
