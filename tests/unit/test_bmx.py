"""BMX, normalised BMX/BM25, WQA and the collection entropy: hand-worked values."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from esbridge.scoring import ChannelArrays, ScoringInput, get_scorer
from esbridge.scoring.bm25 import BM25Params
from esbridge.scoring.bmx import (
    BMXParams,
    collection_entropy,
    collection_entropy_from_histogram,
    default_alpha,
    default_beta,
    weighted_query_augmentation,
)

# ---------------------------------------------------------------------------
# Toy: N = 4 documents, avgdl = 5  ->  α = max(min(1.5, 5/100), 0.5) = 0.5,  β = 1/ln(1 + 4) = 1/ln 5
# Query tokens: a (qtf 1, df 2, Ẽ 2.0), b (qtf 1, df 1, Ẽ 1.0), c (qtf 1, df 0: not in the index)
#   IDF(a) = ln(1 + (4 - 2 + 0.5)/(2 + 0.5)) = ln 2;  IDF(b) = ln(1 + 3.5/1.5) = ln(10/3)
# Candidates: d0: tf(a) = 2, |d| = 4;  d1: tf(a) = 1, tf(b) = 1, |d| = 6;  d2: nothing, |d| = 5
# ---------------------------------------------------------------------------

BETA = 1 / math.log(5)
IDF_A, IDF_B = math.log(2), math.log(10 / 3)


def channel(qtf: tuple[float, ...] = (1.0, 1.0, 1.0), entropy_c: float = 0.0) -> ChannelArrays:
    return ChannelArrays(
        terms=("a", "b", "c"),
        qtf=np.array(qtf),
        df=np.array([2.0, 1.0, 0.0]),
        n_docs=4,
        tf=np.array([[2.0, 0.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 0.0]]),
        doc_len=np.array([4.0, 6.0, 5.0]),
        avgdl=5.0,
        entropy=np.array([2.0, 1.0, entropy_c]),
    )


def toy(qtf: tuple[float, ...] = (1.0, 1.0, 1.0), entropy_c: float = 0.0) -> ScoringInput:
    return ScoringInput({"base": channel(qtf, entropy_c)})


def test_bmx_paper_reading_hand_worked() -> None:
    # m = 3 tokens; E = Ẽ/max Ẽ = (1, 0.5, 0);  Ē = (1 + 0.5 + 0)/3 = 0.5
    # d0: a: ln2 * 2 * 1.5/(2 + 0.5 * 4/5 + 0.5 * 0.5) = ln2 * 3/2.65
    #     S = 1/3;  β E S summed over all three tokens: β * (1/3) * 1.5
    # d1: a: ln2 * 1 * 1.5/(1 + 0.5 * 6/5 + 0.25) = ln2 * 1.5/1.85;  b: ln(10/3) * 1.5/1.85
    #     S = 2/3;  β * (2/3) * 1.5
    # d2: 0
    bm25_part = [IDF_A * 3 / 2.65, (IDF_A + IDF_B) * 1.5 / 1.85, 0.0]
    ent = [BETA * (1 / 3) * 1.5, BETA * (2 / 3) * 1.5, 0.0]
    result = get_scorer("bmx").score(toy(), BMXParams(entropy_over_matched_terms=False))
    np.testing.assert_allclose(result.parts["bm25_part"], bm25_part, rtol=1e-12)
    np.testing.assert_allclose(result.parts["similarity"], [1 / 3, 2 / 3, 0.0], rtol=1e-12)
    np.testing.assert_allclose(result.parts["entropy_similarity"], ent, rtol=1e-12)
    np.testing.assert_allclose(result.scores, np.add(bm25_part, ent), rtol=1e-12)


def test_entropy_given_for_an_absent_term_is_ignored() -> None:
    # Ẽ is a sum over the documents containing the term: 0 when df = 0, whatever the input says.
    np.testing.assert_allclose(
        get_scorer("bmx").score(toy(entropy_c=5.0)).scores, get_scorer("bmx").score(toy()).scores
    )


def test_bmx_entropy_over_matched_terms() -> None:
    # d0 contains only a: β * (1/3) * E(a) = β/3;  d1 contains a and b: β * (2/3) * 1.5
    params = BMXParams(entropy_over_matched_terms=True)
    result = get_scorer("bmx").score(toy(), params)
    np.testing.assert_allclose(result.parts["entropy_similarity"], [BETA / 3, BETA, 0.0], rtol=1e-12)


def test_bmx_drop_absent_terms() -> None:
    # c is removed: m = 2, E = (1, 0.5), Ē = 0.75
    # d0: a: ln2 * 3/(2 + 0.4 + 0.375) = ln2 * 3/2.775;  S = 1/2;  β * 0.5 * 1.5
    # d1: (ln2 + ln(10/3)) * 1.5/(1 + 0.6 + 0.375) = ... * 1.5/1.975;  S = 1;  β * 1.5
    params = BMXParams(drop_absent_terms=True, entropy_over_matched_terms=False)
    expected = [IDF_A * 3 / 2.775 + BETA * 0.75, (IDF_A + IDF_B) * 1.5 / 1.975 + BETA * 1.5, 0.0]
    np.testing.assert_allclose(get_scorer("bmx").score(toy(), params).scores, expected, rtol=1e-12)


def test_bmx_repeated_token_counts_per_occurrence() -> None:
    # Query a a b c: m = 4; E = (1, 0.5, 0);  Ē = (2 * 1 + 0.5 + 0)/4 = 0.625
    # d0: 2 * ln2 * 3/(2 + 0.4 + 0.5 * 0.625);  S = 2/4;  Σ_i E(q_i) = 2 * 1 + 0.5 = 2.5
    # d1: (2 ln2 + ln(10/3)) * 1.5/(1 + 0.6 + 0.3125);  S = 3/4
    denominator0 = 2 + 0.4 + 0.5 * 0.625
    denominator1 = 1 + 0.6 + 0.5 * 0.625
    expected = [
        2 * IDF_A * 3 / denominator0 + BETA * (2 / 4) * 2.5,
        (2 * IDF_A + IDF_B) * 1.5 / denominator1 + BETA * (3 / 4) * 2.5,
        0.0,
    ]
    got = get_scorer("bmx").score(toy(qtf=(2.0, 1.0, 1.0)), BMXParams(entropy_over_matched_terms=False))
    np.testing.assert_allclose(got.scores, expected, rtol=1e-12)


def test_bmx_explicit_alpha_beta() -> None:
    # α = 1, β = 0: d0: ln2 * 2 * 2/(2 + 4/5 + 0.5) = ln2 * 4/3.3
    params = BMXParams(alpha=1.0, beta=0.0)
    result = get_scorer("bmx").score(toy(), params)
    assert result.scores[0] == pytest.approx(IDF_A * 4 / 3.3, rel=1e-12)
    assert result.parts["entropy_similarity"][0] == 0.0


def test_default_alpha_beta() -> None:
    assert default_alpha(5.0) == 0.5
    assert default_alpha(120.0) == 1.2
    assert default_alpha(1000.0) == 1.5
    assert default_alpha(0.0) == 0.5
    assert default_beta(4) == pytest.approx(1 / math.log(5))
    assert default_beta(0) == 0.0


def test_bmx_normalized_hand_worked() -> None:
    # max = m (ln(1 + (N - 0.5)/1.5) + 1) = 3 (ln(1 + 3.5/1.5) + 1) = 3 (ln(10/3) + 1)
    raw = get_scorer("bmx").score(toy()).scores
    result = get_scorer("bmx_normalized").score(toy())
    np.testing.assert_allclose(result.scores, raw / (3 * (math.log(10 / 3) + 1)), rtol=1e-12)
    np.testing.assert_allclose(result.parts["max_score"], 3 * (math.log(10 / 3) + 1), rtol=1e-12)


def test_bm25_normalized_hand_worked() -> None:
    # Lucene BM25, k1 = 0.9, b = 0.4.  d0: K = 0.9 (0.6 + 0.4 * 4/5) = 0.9 * 0.92 = 0.828
    #   a: ln2 * 2/(2 + 0.828);  max = 3 ln(1 + 3.5/1.5) = 3 ln(10/3)
    result = get_scorer("bm25_normalized").score(toy())
    assert result.scores[0] == pytest.approx(IDF_A * 2 / 2.828 / (3 * math.log(10 / 3)), rel=1e-12)
    assert result.scores[2] == 0.0
    assert np.all(result.scores <= 1.0)


def test_normalized_scores_are_zero_for_empty_index() -> None:
    # N = 0: ln(1 + (0 - 0.5)/1.5) < 0, no positive maximum -> all 0
    empty_index = ChannelArrays(
        terms=("a",),
        qtf=np.array([1.0]),
        df=np.array([0.0]),
        n_docs=0,
        tf=np.array([[1.0]]),
        doc_len=np.array([3.0]),
        avgdl=0.0,
        entropy=np.array([0.0]),
    )
    for name in ("bm25_normalized", "bmx_normalized"):
        scores = get_scorer(name).score(ScoringInput({"base": empty_index})).scores
        assert np.all(np.isfinite(scores))
    assert get_scorer("bm25_normalized").score(ScoringInput({"base": empty_index})).scores[0] == 0.0


def test_bmx_needs_entropy() -> None:
    base = channel()
    no_entropy = ChannelArrays(
        terms=base.terms,
        qtf=base.qtf,
        df=base.df,
        n_docs=base.n_docs,
        tf=base.tf,
        doc_len=base.doc_len,
        avgdl=base.avgdl,
    )
    for name in ("bmx", "bmx_normalized"):
        with pytest.raises(ValueError, match="collection entropy"):
            get_scorer(name).score(ScoringInput({"base": no_entropy}))


def test_bmx_entropy_shape_is_checked() -> None:
    base = channel()
    bad = ChannelArrays(
        terms=base.terms,
        qtf=base.qtf,
        df=base.df,
        n_docs=base.n_docs,
        tf=base.tf,
        doc_len=base.doc_len,
        avgdl=base.avgdl,
        entropy=np.array([1.0]),
    )
    with pytest.raises(ValueError, match="entropy must have shape"):
        get_scorer("bmx").score(ScoringInput({"base": bad}))


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"alpha": -0.1}, "alpha"),
        ({"alpha": float("nan")}, "alpha"),
        ({"beta": float("inf")}, "beta"),
        ({"beta": -1.0}, "beta"),
        ({"entropy_over_matched_terms": 1}, "entropy_over_matched_terms"),
        ({"drop_absent_terms": "no"}, "drop_absent_terms"),
    ],
)
def test_invalid_parameters_name_the_parameter(kwargs: dict[str, object], name: str) -> None:
    with pytest.raises(ValueError, match=rf"\.{name} "):
        BMXParams(**kwargs)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------
# Weighted query augmentation
# ---------------------------------------------------------------------------


def test_wqa_adds_weighted_scores() -> None:
    bmx = get_scorer("bmx")
    original = toy()
    augmented = toy(qtf=(0.0, 1.0, 0.0))  # the query "b" alone, same candidates
    result = weighted_query_augmentation(bmx, original, [(0.5, augmented), (0.0, original)])
    s0 = bmx.score(original).scores
    s1 = bmx.score(augmented).scores
    # d1 for the query "b": m = 1, E(b) = 1, Ē = 1; IDF(b) 1.5/(1 + 0.6 + 0.5) + β * 1 * 1
    assert s1[1] == pytest.approx(IDF_B * 1.5 / 2.1 + BETA, rel=1e-12)
    np.testing.assert_allclose(result.scores, s0 + 0.5 * s1, rtol=1e-12)
    np.testing.assert_allclose(result.parts["augmentation"], 0.5 * s1, rtol=1e-12)
    np.testing.assert_array_equal(result.parts["original"], s0)
    np.testing.assert_array_equal(result.parts["augmented_1"], s1)


def test_wqa_works_for_bm25_too() -> None:
    bm25 = get_scorer("bm25")
    result = weighted_query_augmentation(bm25, toy(), [(0.25, toy())], BM25Params(k1=1.2))
    np.testing.assert_allclose(result.scores, 1.25 * bm25.score(toy(), BM25Params(k1=1.2)).scores)


def test_wqa_without_augmentation_is_the_original() -> None:
    bmx = get_scorer("bmx")
    np.testing.assert_array_equal(weighted_query_augmentation(bmx, toy(), []).scores, bmx.score(toy()).scores)


@pytest.mark.parametrize("weight", [-0.1, float("nan"), float("inf")])
def test_wqa_rejects_bad_weights(weight: float) -> None:
    with pytest.raises(ValueError, match="weight"):
        weighted_query_augmentation(get_scorer("bmx"), toy(), [(weight, toy())])


def test_wqa_rejects_other_candidates() -> None:
    base = channel()
    fewer = ChannelArrays(
        terms=base.terms,
        qtf=base.qtf,
        df=base.df,
        n_docs=4,
        tf=base.tf[:2],
        doc_len=base.doc_len[:2],
        avgdl=5.0,
        entropy=base.entropy,
    )
    with pytest.raises(ValueError, match="same candidates"):
        weighted_query_augmentation(get_scorer("bmx"), toy(), [(0.5, ScoringInput({"base": fewer}))])
    reordered = ChannelArrays(
        terms=base.terms,
        qtf=base.qtf,
        df=base.df,
        n_docs=4,
        tf=base.tf[::-1],
        doc_len=base.doc_len[::-1],
        avgdl=5.0,
        entropy=base.entropy,
    )
    with pytest.raises(ValueError, match="same candidates"):
        weighted_query_augmentation(get_scorer("bmx"), toy(), [(0.5, ScoringInput({"base": reordered}))])


# ---------------------------------------------------------------------------
# Collection entropy
# ---------------------------------------------------------------------------


def _sig(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def test_collection_entropy_hand_worked() -> None:
    # documents with tf 1, 2 (the 0 is a document without the term: not in the sum)
    # Ẽ = -(σ(1) ln σ(1) + σ(2) ln σ(2)) = 0.229013 + 0.111797
    s1, s2 = _sig(1), _sig(2)
    expected = -(s1 * math.log(s1) + s2 * math.log(s2))
    assert collection_entropy([1.0, 2.0, 0.0]) == pytest.approx(expected, rel=1e-14)
    assert collection_entropy([1.0]) == pytest.approx(0.22901264401630875, rel=1e-14)
    assert collection_entropy([]) == 0.0
    # very frequent terms: σ(1000) = 1 within float64, the contribution vanishes but stays finite
    assert collection_entropy([1000.0]) == 0.0


def test_histogram_agrees_with_values() -> None:
    # two documents with tf 1, none with tf 2, three with tf 3
    values = [1, 1, 3, 3, 3]
    assert float(collection_entropy_from_histogram([2, 0, 3])) == pytest.approx(
        collection_entropy(values), rel=1e-14
    )
    rows = collection_entropy_from_histogram([[2, 0, 3], [0, 1, 0]])
    np.testing.assert_allclose(rows, [collection_entropy(values), collection_entropy([2])], rtol=1e-14)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=60), max_size=40))
def test_histogram_agrees_with_values_property(values: list[int]) -> None:
    k = max(values, default=0)
    counts = np.bincount(np.asarray(values, dtype=np.int64), minlength=k + 1)[1:].astype(np.float64)
    if counts.size == 0:
        counts = np.zeros(1)
    assert float(collection_entropy_from_histogram(counts)) == pytest.approx(
        collection_entropy(np.asarray(values, dtype=np.float64)), rel=1e-12, abs=1e-15
    )


@pytest.mark.parametrize("bad", [[-1.0], [float("nan")], [[1.0, 2.0]]])
def test_collection_entropy_rejects_bad_input(bad: list[object]) -> None:
    with pytest.raises(ValueError):
        collection_entropy(bad)  # type: ignore[arg-type]


def test_histogram_rejects_negative_counts() -> None:
    with pytest.raises(ValueError):
        collection_entropy_from_histogram([1, -1])
