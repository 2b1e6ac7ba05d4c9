"""Architectures A, B and C (docs/scoring.md §6), checked against values worked out by hand.

Toy collection: N = 10 documents, average length 12, a base-channel query

    term    qtf  df   surprisal IDF (A)      Lucene IDF (B, C) = ln(1 + (N - df + 0.5)/(df + 0.5))
    apple    1    2   -ln(3/12) = ln 4       ln(1 + 8.5/2.5) = ln 4.4
    berry    2    5   -ln(6/12) = ln 2       ln(1 + 5.5/5.5) = ln 2
    cocoa    1    1   -ln(2/12) = ln 6       ln(1 + 9.5/1.5) = ln(22/3)

and candidates

    doc   tf(apple) tf(berry) tf(cocoa)  |d|  distinct terms
    d1        3         1         0       20        12
    d2        0         2         0        8         6
    d3        1         0         2        5         4
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from esbridge.scoring import ChannelArrays, ScoringInput, get_scorer
from esbridge.scoring.architectures import (
    ArchAParams,
    ArchBParams,
    ArchCParams,
    anchor_mix,
    entropy_gate,
    pair_synergy,
    query_df_dropout,
    query_specificity,
    score_arch_a,
    score_arch_b,
    score_arch_c,
    specificity_gate,
)
from esbridge.scoring.common import ChannelWeights, IdfVariant, channels_needed
from tests.unit.toys import channel_arrays

LN = math.log
SQRT = math.sqrt

TF = [[3.0, 1.0, 0.0], [0.0, 2.0, 0.0], [1.0, 0.0, 2.0]]
QTF = [1.0, 2.0, 1.0]
DF = [2.0, 5.0, 1.0]
DOC_LEN = [20.0, 8.0, 5.0]
UNIQUE = [12.0, 6.0, 4.0]


def channel(
    tf: Sequence[Sequence[float]] = TF,
    df: Sequence[float] = DF,
    qtf: Sequence[float] = QTF,
    doc_len: Sequence[float] = DOC_LEN,
    **kwargs: Any,
) -> ChannelArrays:
    """The module's toy channel (see tests/unit/toys.py), with any part replaced."""
    return channel_arrays(tf, df, qtf, doc_len, **kwargs)


# =================================================================================
# A
# =================================================================================

# term masses m(t) = qtf · IDF · (IDF/(IDF + 1))^0.6 with surprisal IDFs ln 4, ln 2, ln 6
M_APPLE = 1 * LN(4) * (LN(4) / (LN(4) + 1)) ** 0.6
M_BERRY = 2 * LN(2) * (LN(2) / (LN(2) + 1)) ** 0.6
M_COCOA = 1 * LN(6) * (LN(6) / (LN(6) + 1)) ** 0.6
# coverage weights qtf · IDF (no clarity): ln 4, 2 ln 2, ln 6
Q_TOTAL = LN(4) + 2 * LN(2) + LN(6)


def hand_a(tf_log_base: float = 1.0) -> dict[str, list[float]]:
    b = tf_log_base
    e = [
        M_APPLE * LN(1 + 3 / b) + M_BERRY * LN(1 + 1 / b),
        M_BERRY * LN(1 + 2 / b),
        M_APPLE * LN(1 + 1 / b) + M_COCOA * LN(1 + 2 / b),
    ]
    cov = [(LN(4) + 2 * LN(2)) / Q_TOTAL, 2 * LN(2) / Q_TOTAL, (LN(4) + LN(6)) / Q_TOTAL]
    # 1 + 0.15 · ln(1 + |d|/12)
    b_len = [1 + 0.15 * LN(1 + 20 / 12), 1 + 0.15 * LN(1 + 8 / 12), 1 + 0.15 * LN(1 + 5 / 12)]
    r = [LN(1 + e[i]) * (1 + 0.25 * cov[i]) / b_len[i] for i in range(3)]
    return {"evidence": e, "coverage": cov, "B_len": b_len, "R": r}


def test_a_every_term_of_one_channel() -> None:
    hand = hand_a()
    params = ArchAParams(prefix_weight=0.0)
    result = score_arch_a(ScoringInput({"base": channel()}), params)
    for key in ("evidence", "coverage", "B_len", "R"):
        np.testing.assert_allclose(result.parts[f"base.{key}"], hand[key], rtol=1e-12, err_msg=key)
    np.testing.assert_allclose(result.parts["base.B_cov"], [1 + 0.25 * c for c in hand["coverage"]], rtol=1e-12)
    np.testing.assert_allclose(result.scores, hand["R"], rtol=1e-12)


def test_a_tf_log_base() -> None:
    result = score_arch_a(ScoringInput({"base": channel()}), ArchAParams(tf_log_base=2.0, prefix_weight=0.0))
    np.testing.assert_allclose(result.parts["base.evidence"], hand_a(2.0)["evidence"], rtol=1e-12)


def test_a_prefix_channel_weight() -> None:
    # prefix channel = a copy of the base channel: score = (1 + 0.18)·R
    result = get_scorer("arch_a").score(ScoringInput({"base": channel(), "prefix": channel()}))
    np.testing.assert_allclose(result.scores, [1.18 * r for r in hand_a()["R"]], rtol=1e-12)


def test_a_missing_prefix_channel() -> None:
    with pytest.raises(KeyError, match="prefix"):
        score_arch_a(ScoringInput({"base": channel()}), ArchAParams())


def test_a_defaults_and_channels() -> None:
    p = ArchAParams()
    assert (p.tf_log_base, p.clarity_power, p.coverage_gamma, p.dl_alpha, p.prefix_weight) == (
        1.0, 0.6, 0.25, 0.15, 0.18,
    )
    assert get_scorer("arch_a").channels == ("base", "prefix")
    assert p.channel_weights == ChannelWeights(base=1.0, prefix=0.18)
    assert channels_needed(ArchAParams(prefix_weight=0.0), ("base", "prefix")) == ("base",)


# =================================================================================
# B
# =================================================================================

# IDF_B = IDF_lucene^1.12 · penalty, penalty = 1 - 0.35·(df/N - 0.12)/(1 - 0.12) if df/N > 0.12
IB_APPLE = LN(4.4) ** 1.12 * (1 - 0.35 * (0.2 - 0.12) / 0.88)
IB_BERRY = LN(2.0) ** 1.12 * (1 - 0.35 * (0.5 - 0.12) / 0.88)
IB_COCOA = LN(22 / 3) ** 1.12 * 1.0  # df/N = 0.1 <= 0.12: no penalty


def sat(f: float, norm: float, k1: float = 1.2) -> float:
    """BM25 saturation with the (k1 + 1) factor."""
    return f * (k1 + 1) / (f + k1 * norm)


def hand_b(unique: list[float] | None) -> dict[str, list[float]]:
    if unique is None:
        d_eff = DOC_LEN
    else:
        # |d|_eff = 0.35·|d| + 0.65·distinct
        d_eff = [0.35 * DOC_LEN[i] + 0.65 * unique[i] for i in range(3)]
    norm = [0.25 + 0.75 * d / 12 for d in d_eff]
    tf_a1, tf_b1 = sat(3, norm[0]), sat(1, norm[0])
    tf_b2 = sat(2, norm[1])
    tf_a3, tf_c3 = sat(1, norm[2]), sat(2, norm[2])
    bm25 = [
        1 * IB_APPLE * tf_a1 + 2 * IB_BERRY * tf_b1,
        2 * IB_BERRY * tf_b2,
        1 * IB_APPLE * tf_a3 + 1 * IB_COCOA * tf_c3,
    ]
    spec = IB_COCOA / (IB_APPLE + IB_BERRY + IB_COCOA)  # ≈ 0.51
    gate = max(0.55, (1 - spec) ** 1.2)  # (0.49)^1.2 ≈ 0.42 -> the floor 0.55
    coord = [(1 + 0.25 * gate * m / 3) ** 0.75 for m in (2, 1, 2)]
    # r = max(0, IDF_B - 0.5·IB_COCOA): apple > 0, berry = 0, cocoa = 0.5·IB_COCOA
    r_apple = IB_APPLE - 0.5 * IB_COCOA
    r_cocoa = IB_COCOA - 0.5 * IB_COCOA
    assert r_apple > 0 and IB_BERRY - 0.5 * IB_COCOA < 0
    pair = [0.0, 0.0, r_apple * r_cocoa * SQRT(tf_a3 * tf_c3)]  # only d3 has two distinctive terms
    b_pair = [1 + 0.06 * gate * p for p in pair]
    return {
        "bm25": bm25,
        "spec": [spec] * 3,
        "gate_spec": [gate] * 3,
        "B_coord": coord,
        "pair": pair,
        "B_pair": b_pair,
        "score": [bm25[i] * coord[i] * b_pair[i] for i in range(3)],
    }


@pytest.mark.parametrize("unique", [UNIQUE, None], ids=["focus-prior", "no-unique-terms"])
def test_b_every_term(unique: list[float] | None) -> None:
    hand = hand_b(unique)
    result = score_arch_b(ScoringInput({"base": channel(unique_terms=unique)}), ArchBParams())
    for key in ("bm25", "spec", "gate_spec", "B_coord", "pair", "B_pair"):
        np.testing.assert_allclose(result.parts[f"base.{key}"], hand[key], rtol=1e-12, atol=1e-15, err_msg=key)
    np.testing.assert_allclose(result.scores, hand["score"], rtol=1e-12)


def test_b_specificity_gate_above_floor() -> None:
    # three equally rare terms: spec = 1/3, gate = max(0.55, (2/3)^1.2) = (2/3)^1.2 ≈ 0.615
    assert query_specificity(np.array([2.0, 2.0, 2.0])) == pytest.approx(1 / 3)
    assert specificity_gate(1 / 3, 0.55, 1.2) == pytest.approx((2 / 3) ** 1.2)
    # one term: spec = 1, gate = the floor
    assert specificity_gate(query_specificity(np.array([5.0])), 0.55, 1.2) == 0.55


def test_b_pair_synergy_three_distinctive_terms() -> None:
    # r = 2 - 0.5·2 = 1 for each; TF 1, 4, 9: sqrt(1·4) + sqrt(1·9) + sqrt(4·9) = 2 + 3 + 6
    got = pair_synergy(np.array([[1.0, 4.0, 9.0], [0.0, 4.0, 0.0]]), np.array([2.0, 2.0, 2.0]))
    np.testing.assert_allclose(got, [11.0, 0.0])


def test_b_defaults() -> None:
    p = ArchBParams()
    assert (p.k1, p.b, p.idf_power, p.focus_mix, p.spec_floor, p.spec_power) == (1.2, 0.75, 1.12, 0.65, 0.55, 1.20)
    assert (p.common_df_cut, p.common_penalty, p.coord_alpha, p.coord_beta, p.pair_boost) == (
        0.12, 0.35, 0.25, 0.75, 0.06,
    )
    assert p.idf is IdfVariant.LUCENE
    assert get_scorer("arch_b").channels == ("base",)


# =================================================================================
# C
# =================================================================================

LUC = [LN(4.4), LN(2.0), LN(22 / 3)]  # Lucene IDFs of apple, berry, cocoa


def hand_c(mean_idf: float) -> dict[str, list[float]]:
    # IDF lift: IDF · (IDF/mean)^0.45
    lift = [i * (i / mean_idf) ** 0.45 for i in LUC]
    top = max(lift)  # cocoa's
    # k1_eff = 1.2/(1 + 0.22·IDF/max) · (1 + 0.18·sqrt(df/N)), df/N = 0.2, 0.5, 0.1
    k = [1.2 / (1 + 0.22 * lift[j] / top) * (1 + 0.18 * SQRT(DF[j] / 10)) for j in range(3)]
    norm = [0.25 + 0.75 * d / 12 for d in DOC_LEN]
    tfs = [[sat(TF[i][j], norm[i], k[j]) for j in range(3)] for i in range(3)]
    full = [sum(QTF[j] * lift[j] * tfs[i][j] for j in range(3)) for i in range(3)]
    # anchors: lift >= 0.55·max -> apple and cocoa, not berry
    assert lift[0] >= 0.55 * top and lift[1] < 0.55 * top
    anchor = [QTF[0] * lift[0] * tfs[i][0] + QTF[2] * lift[2] * tfs[i][2] for i in range(3)]
    spec = top / sum(lift)
    w = 0.35 * spec**1.6
    mixed = [(1 - w) * full[i] + w * max(anchor[i], 0.15 * full[i]) for i in range(3)]
    gate_spec = max(0.55, (1 - spec) ** 1.2)
    p = [x / sum(lift) for x in lift]
    h_norm = -sum(x * LN(x) for x in p) / LN(3)
    gate_ent = max(0.35, h_norm**0.9)
    gate_and = gate_spec * gate_ent
    info = [sum(lift[j] * tfs[i][j] ** 0.55 for j in range(3) if TF[i][j] > 0) / sum(lift) for i in range(3)]
    b_info = [1 + 0.10 * gate_and * x**0.75 for x in info]
    sal = [(3 + 1) / 20, 2 / 8, (1 + 2) / 5]
    b_sal = [1 + 0.10 * s**0.5 for s in sal]
    return {
        "full": full,
        "anchor": anchor,
        "w_anchor": [w] * 3,
        "mixed": mixed,
        "gate_spec": [gate_spec] * 3,
        "gate_ent": [gate_ent] * 3,
        "gate_AND": [gate_and] * 3,
        "info_cov": info,
        "B_info": b_info,
        "salience": sal,
        "B_sal": b_sal,
        "score": [mixed[i] * b_info[i] * b_sal[i] for i in range(3)],
    }


@pytest.mark.parametrize("given_mean", [1.5, None], ids=["mean-from-index", "mean-over-query"])
def test_c_every_term(given_mean: float | None) -> None:
    mean = given_mean if given_mean is not None else sum(LUC) / 3
    hand = hand_c(mean)
    result = score_arch_c(ScoringInput({"base": channel(mean_idf=given_mean)}), ArchCParams())
    for key, values in hand.items():
        if key != "score":
            np.testing.assert_allclose(result.parts[f"base.{key}"], values, rtol=1e-12, err_msg=key)
    np.testing.assert_allclose(result.scores, hand["score"], rtol=1e-12)


def test_c_anchor_floor_applies_to_a_document_without_anchor_terms() -> None:
    # d2 matches only berry (not an anchor): anchor = 0, so mix = (1 - w)·full + w·0.15·full
    hand = hand_c(1.5)
    assert hand["anchor"][1] == 0.0
    w = hand["w_anchor"][0]
    assert hand["mixed"][1] == pytest.approx((1 - w) * hand["full"][1] + w * 0.15 * hand["full"][1])
    np.testing.assert_allclose(anchor_mix(np.array([10.0]), np.array([0.0]), 0.5), [0.5 * 10 + 0.5 * 1.5])


def test_c_query_dropout_for_eight_terms() -> None:
    # N = 100: df/N = 0.05, 0.30, 0.10, 0.22, 0.01, 0.50, 0.21, 0.02; θ = 0.22 keeps df/N < 0.22
    frac = np.array([0.05, 0.30, 0.10, 0.22, 0.01, 0.50, 0.21, 0.02])
    np.testing.assert_array_equal(
        query_df_dropout(frac, 8, 0.22), [True, False, True, False, True, False, True, True]
    )
    # seven terms: no dropout; every term common: all kept
    np.testing.assert_array_equal(query_df_dropout(frac[:7], 8, 0.22), [True] * 7)
    np.testing.assert_array_equal(query_df_dropout(np.full(9, 0.5), 8, 0.22), [True] * 9)


def test_c_dropout_scores_as_the_reduced_query() -> None:
    df = [5.0, 30.0, 10.0, 22.0, 1.0, 50.0, 21.0, 2.0]
    keep = [0, 2, 4, 6, 7]
    tf = [[1, 2, 0, 1, 1, 3, 0, 0], [0, 1, 1, 0, 0, 0, 2, 1], [0, 0, 0, 4, 0, 1, 0, 0]]
    doc_len = [30.0, 12.0, 9.0]
    full_q = channel(tf, df, [1.0] * 8, doc_len, n_docs=100, avgdl=15.0, mean_idf=2.0)
    reduced = channel(
        [[row[j] for j in keep] for row in tf], [df[j] for j in keep], [1.0] * 5, doc_len,
        n_docs=100, avgdl=15.0, mean_idf=2.0,
    )
    a = score_arch_c(ScoringInput({"base": full_q}), ArchCParams())
    b = score_arch_c(ScoringInput({"base": reduced}), ArchCParams())
    np.testing.assert_allclose(a.scores, b.scores, rtol=1e-12)
    # d3 matches only dropped terms: score 0
    assert a.scores[2] == 0.0


def test_c_entropy_gate_edge_cases() -> None:
    # uniform IDFs: H_norm = 1 -> gate 1; one dominant term: H_norm = 0 -> the floor
    assert entropy_gate(np.array([2.0, 2.0, 2.0, 2.0]), 0.35, 0.9) == pytest.approx(1.0)
    assert entropy_gate(np.array([3.0, 0.0]), 0.35, 0.9) == 0.35
    assert entropy_gate(np.array([3.0]), 0.35, 0.9) == 1.0
    # two terms p = 1/4, 3/4: H = -(1/4 ln 1/4 + 3/4 ln 3/4), H_norm = H/ln 2
    h = -(0.25 * LN(0.25) + 0.75 * LN(0.75)) / LN(2)
    assert entropy_gate(np.array([1.0, 3.0]), 0.35, 0.9) == pytest.approx(h**0.9)


def test_c_defaults() -> None:
    p = ArchCParams()
    assert (p.k1, p.b) == (1.2, 0.75)
    assert (p.tf_idf_gamma, p.tf_df_delta, p.idf_lift_power, p.q_drop_min_len, p.q_drop_df_ratio) == (
        0.22, 0.18, 0.45, 8, 0.22,
    )
    assert (p.entropy_floor, p.entropy_power, p.anchor_mix_alpha, p.anchor_mix_power, p.anchor_residual) == (
        0.35, 0.9, 0.35, 1.6, 0.55,
    )
    assert (p.info_cov_alpha, p.info_cov_gamma, p.info_cov_tf_gamma, p.salience_alpha, p.salience_power) == (
        0.10, 0.75, 0.55, 0.10, 0.5,
    )
    assert (p.spec_floor, p.spec_power, p.anchor_floor) == (0.55, 1.20, 0.15)
    assert get_scorer("arch_c").channels == ("base",)


def test_c_k1_and_b_choice_is_plain_bm25_for_flat_idf() -> None:
    # γ1 = γ2 = λ = 0 and one term: C's full score is BM25 with k1 = 1.2, b = 0.75 and the (k1 + 1) factor
    params = ArchCParams(tf_idf_gamma=0.0, tf_df_delta=0.0, idf_lift_power=0.0, anchor_mix_alpha=0.0)
    arrays = channel([[2.0], [1.0]], [3.0], [1.0], [24.0, 6.0])
    parts = score_arch_c(ScoringInput({"base": arrays}), params).parts
    idf = LN(1 + 7.5 / 3.5)
    expected = [idf * 2 * 2.2 / (2 + 1.2 * (0.25 + 0.75 * 24 / 12)), idf * 1 * 2.2 / (1 + 1.2 * (0.25 + 0.75 * 6 / 12))]
    np.testing.assert_allclose(parts["base.full"], expected, rtol=1e-12)


# =================================================================================
# shared
# =================================================================================


@pytest.mark.parametrize(
    ("params_type", "name"),
    [
        (ArchAParams, "coverage_gamma"),
        (ArchAParams, "dl_alpha"),
        (ArchBParams, "idf_power"),
        (ArchBParams, "pair_boost"),
        (ArchCParams, "idf_lift_power"),
        (ArchCParams, "salience_alpha"),
    ],
)
@pytest.mark.parametrize("value", [-1.0, math.nan, math.inf])
def test_invalid_parameters_name_themselves(params_type: type, name: str, value: float) -> None:
    with pytest.raises(ValueError, match=name):
        params_type(**{name: value})


@pytest.mark.parametrize(
    ("params_type", "name", "value"),
    [
        (ArchAParams, "tf_log_base", 0.0),
        (ArchBParams, "b", 1.5),
        (ArchBParams, "common_df_cut", 1.0),
        (ArchBParams, "common_penalty", 1.2),
        (ArchCParams, "anchor_mix_alpha", 1.1),
        (ArchCParams, "q_drop_min_len", 8.5),
    ],
)
def test_out_of_range_parameters(params_type: type, name: str, value: float) -> None:
    with pytest.raises(ValueError, match=name):
        params_type(**{name: value})


@pytest.mark.parametrize("scorer", ["arch_a", "arch_b", "arch_c"])
def test_empty_query_scores_zero(scorer: str) -> None:
    empty = channel([[], [], []], [], [], DOC_LEN)
    result = get_scorer(scorer).score(ScoringInput({"base": empty, "prefix": empty}))
    np.testing.assert_array_equal(result.scores, [0.0, 0.0, 0.0])


@pytest.mark.parametrize("scorer", ["arch_a", "arch_b", "arch_c"])
def test_zero_length_documents_and_empty_index(scorer: str) -> None:
    arrays = channel([[0.0], [0.0]], [0.0], [1.0], [0.0, 0.0], n_docs=1, avgdl=0.0, unique_terms=[0.0, 0.0])
    result = get_scorer(scorer).score(ScoringInput({"base": arrays, "prefix": arrays}))
    np.testing.assert_array_equal(result.scores, [0.0, 0.0])
