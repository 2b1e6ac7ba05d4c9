"""BM25 family: hand-worked values, Lucene's one-byte norms, parameter checks, edge cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from esbridge.scoring import ChannelArrays, ScoringInput, get_scorer
from esbridge.scoring.bm25 import (
    LENGTH_TABLE,
    NUM_FREE_VALUES,
    BM25LParams,
    BM25Params,
    BM25PlusParams,
    BM25VariantParams,
    atire_idf,
    bm25plus_idf,
    byte4_to_int,
    int_to_byte4,
    lucene_norm_length,
)

# ---------------------------------------------------------------------------
# Toy collection: N = 10 documents, avgdl = 8.
# Query: "a" (qtf 1, df 2), "b" (qtf 2, df 4), "c" (qtf 1, df 0: not in the index).
# Candidates:  d0: tf(a)=3, tf(b)=1, |d|=12
#              d1: tf(b)=2,          |d|=4
#              d2: nothing,          |d|=0 (empty document)
# ---------------------------------------------------------------------------


def toy() -> ScoringInput:
    return ScoringInput(
        {
            "base": ChannelArrays(
                terms=("a", "b", "c"),
                qtf=np.array([1.0, 2.0, 1.0]),
                df=np.array([2.0, 4.0, 0.0]),
                n_docs=10,
                tf=np.array([[3.0, 1.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 0.0]]),
                doc_len=np.array([12.0, 4.0, 0.0]),
                avgdl=8.0,
            )
        }
    )


def test_lucene_bm25_hand_worked() -> None:
    # k1 = 0.9, b = 0.4
    # idf(a) = ln(1 + (10 - 2 + 0.5)/(2 + 0.5)) = ln(1 + 8.5/2.5) = ln(4.4)
    # idf(b) = ln(1 + (10 - 4 + 0.5)/(4 + 0.5)) = ln(1 + 6.5/4.5)
    # d0: K = 0.9 (0.6 + 0.4 * 12/8) = 0.9 * 1.2 = 1.08
    #     a: 3/(3 + 1.08) = 3/4.08;  b: 1/(1 + 1.08) = 1/2.08, counted twice (qtf 2)
    # d1: K = 0.9 (0.6 + 0.4 * 4/8) = 0.9 * 0.8 = 0.72;  b: 2/2.72, twice
    idf_a, idf_b = math.log(4.4), math.log(1 + 6.5 / 4.5)
    expected = [idf_a * 3 / 4.08 + 2 * idf_b * 1 / 2.08, 2 * idf_b * 2 / 2.72, 0.0]
    result = get_scorer("bm25").score(toy())
    np.testing.assert_allclose(result.scores, expected, rtol=1e-12)
    np.testing.assert_allclose(result.parts["tf_part"], [3 / 4.08 + 2 / 2.08, 2 * 2 / 2.72, 0.0], rtol=1e-12)
    np.testing.assert_allclose(result.parts["idf"], [idf_a + 2 * idf_b, 2 * idf_b, 0.0], rtol=1e-12)
    np.testing.assert_array_equal(result.parts["matched_terms"], [2.0, 1.0, 0.0])


def test_lucene_bm25_k1_plus_one_only_rescales() -> None:
    scorer = get_scorer("bm25")
    plain = scorer.score(toy()).scores
    legacy = scorer.score(toy(), BM25Params(k1_plus_one=True)).scores
    np.testing.assert_allclose(legacy, 1.9 * plain, rtol=1e-12)  # k1 + 1 = 1.9


def test_robertson_hand_worked() -> None:
    # k1 = 1.2, b = 0.75; idf = ln((N - df + 0.5)/(df + 0.5))
    # idf(a) = ln(8.5/2.5) = ln(3.4);  idf(b) = ln(6.5/4.5)
    # d0: K = 1.2 (0.25 + 0.75 * 1.5) = 1.2 * 1.375 = 1.65
    #     a: 2.2 * 3/(3 + 1.65) = 6.6/4.65;  b: 2.2 * 1/2.65 (twice)
    # d1: K = 1.2 (0.25 + 0.75 * 0.5) = 1.2 * 0.625 = 0.75;  b: 2.2 * 2/2.75 = 1.6 (twice)
    idf_a, idf_b = math.log(3.4), math.log(6.5 / 4.5)
    expected = [idf_a * 6.6 / 4.65 + 2 * idf_b * 2.2 / 2.65, 2 * idf_b * 1.6, 0.0]
    np.testing.assert_allclose(get_scorer("bm25_robertson").score(toy()).scores, expected, rtol=1e-12)


def test_atire_hand_worked() -> None:
    # idf = ln(N/df): idf(a) = ln(10/2) = ln 5, idf(b) = ln(10/4) = ln 2.5; tf parts as Robertson.
    expected = [math.log(5) * 6.6 / 4.65 + 2 * math.log(2.5) * 2.2 / 2.65, 2 * math.log(2.5) * 1.6, 0.0]
    np.testing.assert_allclose(get_scorer("bm25_atire").score(toy()).scores, expected, rtol=1e-12)


def test_bm25l_hand_worked() -> None:
    # idf = ln((N + 1)/(df + 0.5)): idf(a) = ln(11/2.5), idf(b) = ln(11/4.5); delta = 0.5
    # d0: 1 - b + b|d|/avgdl = 0.25 + 0.75 * 1.5 = 1.375
    #     c(a) = 3/1.375, term = 2.2 (c + 0.5)/(1.2 + c + 0.5)
    #     c(b) = 1/1.375 (twice)
    # d1: 0.25 + 0.75 * 0.5 = 0.625; c(b) = 2/0.625 = 3.2 -> 2.2 * 3.7/4.9 (twice)
    # d2: no term occurs, so no delta either.
    def f(c: float) -> float:
        return 2.2 * (c + 0.5) / (1.2 + c + 0.5)

    idf_a, idf_b = math.log(11 / 2.5), math.log(11 / 4.5)
    expected = [idf_a * f(3 / 1.375) + 2 * idf_b * f(1 / 1.375), 2 * idf_b * 2.2 * 3.7 / 4.9, 0.0]
    np.testing.assert_allclose(get_scorer("bm25l").score(toy()).scores, expected, rtol=1e-12)


def test_bm25plus_hand_worked() -> None:
    # idf = ln((N + 1)/df): idf(a) = ln(11/2), idf(b) = ln(11/4); delta = 1
    # d0: a: 6.6/4.65 + 1;  b: 2.2/2.65 + 1 (twice).  d1: b: 4.4/2.75 + 1 = 2.6 (twice)
    idf_a, idf_b = math.log(11 / 2), math.log(11 / 4)
    expected = [idf_a * (6.6 / 4.65 + 1) + 2 * idf_b * (2.2 / 2.65 + 1), 2 * idf_b * 2.6, 0.0]
    np.testing.assert_allclose(get_scorer("bm25plus").score(toy()).scores, expected, rtol=1e-12)


def test_variant_idfs_are_zero_for_absent_terms() -> None:
    df = np.array([0.0, 1.0])
    np.testing.assert_array_equal(atire_idf(df, 5), [0.0, math.log(5)])
    np.testing.assert_array_equal(bm25plus_idf(df, 5), [0.0, math.log(6)])


# ---------------------------------------------------------------------------
# Lucene's one-byte length (SmallFloat.intToByte4 / byte4ToInt)
# ---------------------------------------------------------------------------


def test_num_free_values_is_24() -> None:
    # longToInt4(2^31 - 1): 31 bits, shift 27, (2^31-1) >>> 27 = 15, & 7 = 7, | (28 << 3) = 231
    # NUM_FREE_VALUES = 255 - 231 = 24
    assert NUM_FREE_VALUES == 24


def test_lengths_up_to_40_are_exact() -> None:
    # < 24: stored as is; 24..39: i - 24 < 16 keeps all bits (shift 0); 40: 16 = 0b10000 loses a 0 bit.
    lengths = np.arange(41)
    np.testing.assert_array_equal(lucene_norm_length(lengths), lengths)
    np.testing.assert_array_equal(int_to_byte4(np.arange(24)), np.arange(24))


def test_larger_lengths_round_down() -> None:
    # 41: 17 = 0b10001 -> shift 1 -> 8 -> decodes to 8 << 1 = 16 -> 24 + 16 = 40
    # 100: 76 = 0b1001100 (7 bits), shift 3, 76 >> 3 = 9 = 0b1001, mantissa 1, code 1 | (4 << 3) = 33
    #      -> byte 24 + 33 = 57; decode (1 | 8) << 3 = 72 -> 96
    # 1000: 976 = 0b1111010000 (10 bits), shift 6, 976 >> 6 = 15, code 7 | (7 << 3) = 63 -> byte 87;
    #      decode (7 | 8) << 6 = 960 -> 984
    np.testing.assert_array_equal(int_to_byte4([41, 100, 1000]), [40, 57, 87])
    np.testing.assert_array_equal(lucene_norm_length([41, 42, 43, 100, 1000]), [40, 42, 42, 96, 984])


def test_length_table_extremes_and_fixed_points() -> None:
    # byte 255: 24 + int4ToLong(231) = 24 + (7 | 8) << 27 = 24 + 15 * 2^27
    assert int(int_to_byte4([2**31 - 1])[0]) == 255
    assert int(LENGTH_TABLE[255]) == 24 + 15 * 2**27
    assert np.all(np.diff(LENGTH_TABLE) > 0)
    # every table value encodes back to its own byte
    np.testing.assert_array_equal(int_to_byte4(LENGTH_TABLE), np.arange(256))
    np.testing.assert_array_equal(byte4_to_int(np.arange(256)), LENGTH_TABLE)


def test_norm_never_exceeds_length_and_keeps_four_bits() -> None:
    lengths = np.arange(0, 200_000, 7)
    decoded = lucene_norm_length(lengths)
    assert np.all(decoded <= lengths)
    # 4 significant bits of (len - 24): the loss is below 1/8 of it
    assert np.all(lengths - decoded <= np.maximum(lengths - 24, 0) / 8)


@pytest.mark.parametrize("bad", [[-1], [2**31], [1.5]])
def test_norm_rejects_invalid_lengths(bad: list[float]) -> None:
    with pytest.raises(ValueError):
        lucene_norm_length(bad)


def test_byte4_rejects_out_of_range() -> None:
    with pytest.raises(ValueError):
        byte4_to_int([256])


def test_lucene_norms_change_only_the_length() -> None:
    # One candidate: tf = 1, |d| = 100, avgdl = 50, N = 10, df = 1; k1 = 0.9, b = 0.4
    # idf = ln(1 + 9.5/1.5)
    # exact:  K = 0.9 (0.6 + 0.4 * 100/50) = 0.9 * 1.4 = 1.26   -> idf * 1/2.26
    # norms:  |d| -> 96, K = 0.9 (0.6 + 0.4 * 96/50) = 0.9 * 1.368 = 1.2312 -> idf * 1/2.2312
    inputs = ScoringInput(
        {
            "base": ChannelArrays(
                terms=("x",),
                qtf=np.array([1.0]),
                df=np.array([1.0]),
                n_docs=10,
                tf=np.array([[1.0]]),
                doc_len=np.array([100.0]),
                avgdl=50.0,
            )
        }
    )
    idf = math.log(1 + 9.5 / 1.5)
    scorer = get_scorer("bm25")
    np.testing.assert_allclose(scorer.score(inputs).scores, [idf / 2.26], rtol=1e-12)
    np.testing.assert_allclose(
        scorer.score(inputs, BM25Params(lucene_norms=True)).scores, [idf / 2.2312], rtol=1e-12
    )


# ---------------------------------------------------------------------------
# Parameters
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("factory", "name"),
    [
        (lambda: BM25Params(k1=-0.1), "k1"),
        (lambda: BM25Params(k1=float("nan")), "k1"),
        (lambda: BM25Params(k1=float("inf")), "k1"),
        (lambda: BM25Params(b=1.5), "b"),
        (lambda: BM25Params(b=-0.01), "b"),
        (lambda: BM25Params(k1_plus_one=1), "k1_plus_one"),  # type: ignore[arg-type]
        (lambda: BM25Params(lucene_norms="yes"), "lucene_norms"),  # type: ignore[arg-type]
        (lambda: BM25VariantParams(k1=-1.0), "k1"),
        (lambda: BM25VariantParams(b=2.0), "b"),
        (lambda: BM25LParams(delta=-0.5), "delta"),
        (lambda: BM25PlusParams(delta=float("inf")), "delta"),
        (lambda: BM25PlusParams(b=float("nan")), "b"),
    ],
)
def test_invalid_parameters_name_the_parameter(factory: object, name: str) -> None:
    with pytest.raises(ValueError, match=rf"\.{name} "):
        factory()  # type: ignore[operator]


def test_defaults() -> None:
    assert (BM25Params().k1, BM25Params().b, BM25Params().k1_plus_one) == (0.9, 0.4, False)
    assert (BM25VariantParams().k1, BM25VariantParams().b) == (1.2, 0.75)
    assert BM25LParams().delta == 0.5
    assert BM25PlusParams().delta == 1.0


def test_make_params_rejects_unknown_names() -> None:
    with pytest.raises(ValueError, match="k2"):
        get_scorer("bm25").make_params(k2=1.0)


def test_wrong_params_type_is_rejected() -> None:
    with pytest.raises(TypeError):
        get_scorer("bm25").score(toy(), BM25LParams())
