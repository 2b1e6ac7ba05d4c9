"""BM25F (PubMed: Fiorini et al. 2018; Robertson & Zaragoza 2009): a hand-worked two-field toy.

Formulas: docs/scoring.md §3.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from esbridge.scoring import ChannelArrays, FieldArrays, ScoringInput, get_scorer
from esbridge.scoring.bm25f import BM25FPubMedParams, BM25FRobertsonParams

# ---------------------------------------------------------------------------
# Toy: N = 10 documents; combined-field df(x) = 3, df(y) = 1.
# Fields: title (mean length 5 over the index), body (mean length 20).
# Query: x (qtf 1), y (qtf 2).
#   d0: title length 4 with x once; body length 10 with x twice.
#   d1: empty title (length 0); body length 30 with y three times.
# ---------------------------------------------------------------------------


def toy(field_order: tuple[str, ...] = ("title", "body")) -> ScoringInput:
    fields = {
        "title": FieldArrays(tf=np.array([[1.0, 0.0], [0.0, 0.0]]), doc_len=np.array([4.0, 0.0]), avgdl=5.0),
        "body": FieldArrays(
            tf=np.array([[2.0, 0.0], [0.0, 3.0]]), doc_len=np.array([10.0, 30.0]), avgdl=20.0
        ),
    }
    return ScoringInput(
        {
            "base": ChannelArrays(
                terms=("x", "y"),
                qtf=np.array([1.0, 2.0]),
                df=np.array([3.0, 1.0]),
                n_docs=10,
                tf=np.array([[3.0, 0.0], [0.0, 3.0]]),
                doc_len=np.array([14.0, 30.0]),
                avgdl=25.0,
                fields={name: fields[name] for name in field_order},
            )
        }
    )


def test_pubmed_hand_worked() -> None:
    # w(title) = 5, w(body) = 1, k1 = 1.2, b = 0.75
    # avg(dl) = 5 * 5 + 1 * 20 = 45
    # d0: tf(x) = 1 * 5/4 + 2 * 1/10 = 1.25 + 0.2 = 1.45
    #     dl = 4 * 5 + 10 * 1 = 30;  K = 1.2 (0.25 + 0.75 * 30/45) = 1.2 * 0.75 = 0.9
    #     x: 1.45/(0.9 + 1.45) = 1.45/2.35;  idf(x) = 1 + ln(10/(3 + 1)) = 1 + ln 2.5
    # d1: tf(y) = 0 (empty title) + 3 * 1/30 = 0.1;  dl = 0 + 30 = 30, K = 0.9
    #     y: 0.1/(0.9 + 0.1) = 0.1;  idf(y) = 1 + ln(10/2) = 1 + ln 5
    #     the published formula sums over the distinct terms of q ∩ d: y once despite qtf 2
    expected = [1.45 / 2.35 * (1 + math.log(2.5)), 0.1 * (1 + math.log(5))]
    result = get_scorer("bm25f_pubmed").score(toy())
    np.testing.assert_allclose(result.scores, expected, rtol=1e-12)
    np.testing.assert_allclose(result.parts["pseudo_length"], [30.0, 30.0])
    np.testing.assert_allclose(result.parts["tf_part"], [1.45 / 2.35, 0.1], rtol=1e-12)
    np.testing.assert_allclose(result.parts["idf"], [1 + math.log(2.5), 1 + math.log(5)], rtol=1e-12)


def test_pubmed_qtf_weighting() -> None:
    # as above, y counted twice in d1: 2 * 0.1 * (1 + ln 5)
    result = get_scorer("bm25f_pubmed").score(toy(), BM25FPubMedParams(qtf_weighting=True))
    np.testing.assert_allclose(result.scores, [1.45 / 2.35 * (1 + math.log(2.5)), 0.2 * (1 + math.log(5))])


def test_robertson_hand_worked() -> None:
    # w(title) = 2, w(body) = 1, b_f = 0.75, k1 = 1.2
    # d0: title: 1 - 0.75 + 0.75 * 4/5 = 0.85 -> 2 * 1/0.85
    #     body:  1 - 0.75 + 0.75 * 10/20 = 0.625 -> 1 * 2/0.625 = 3.2
    #     tf~(x) = 2/0.85 + 3.2;  idf(x) = ln(1 + (10 - 3 + 0.5)/(3 + 0.5)) = ln(1 + 7.5/3.5)
    # d1: body: 1 - 0.75 + 0.75 * 30/20 = 1.375 -> tf~(y) = 3/1.375
    #     idf(y) = ln(1 + 9.5/1.5);  qtf(y) = 2
    tf0 = 2 / 0.85 + 3.2
    tf1 = 3 / 1.375
    expected = [
        math.log(1 + 7.5 / 3.5) * tf0 / (1.2 + tf0),
        2 * math.log(1 + 9.5 / 1.5) * tf1 / (1.2 + tf1),
    ]
    result = get_scorer("bm25f_robertson").score(toy())
    np.testing.assert_allclose(result.scores, expected, rtol=1e-12)
    np.testing.assert_allclose(result.parts["pseudo_tf"], [tf0, 2 * tf1], rtol=1e-12)


def test_robertson_per_field_b() -> None:
    # b(body) = 0: body frequencies are not length-normalised.
    # d0: tf~ = 2/0.85 + 2;  d1: tf~ = 3
    params = BM25FRobertsonParams(field_b=(("body", 0.0),))
    tf0, tf1 = 2 / 0.85 + 2.0, 3.0
    expected = [
        math.log(1 + 7.5 / 3.5) * tf0 / (1.2 + tf0),
        2 * math.log(1 + 9.5 / 1.5) * tf1 / (1.2 + tf1),
    ]
    np.testing.assert_allclose(
        get_scorer("bm25f_robertson").score(toy(), params).scores, expected, rtol=1e-12
    )


@pytest.mark.parametrize("name", ["bm25f_pubmed", "bm25f_robertson"])
def test_field_order_does_not_matter(name: str) -> None:
    scorer = get_scorer(name)
    np.testing.assert_array_equal(
        scorer.score(toy(("title", "body"))).scores, scorer.score(toy(("body", "title"))).scores
    )


@pytest.mark.parametrize("name", ["bm25f_pubmed", "bm25f_robertson"])
def test_needs_field_arrays(name: str) -> None:
    base = toy().channel("base")
    no_fields = ChannelArrays(
        terms=base.terms,
        qtf=base.qtf,
        df=base.df,
        n_docs=base.n_docs,
        tf=base.tf,
        doc_len=base.doc_len,
        avgdl=base.avgdl,
    )
    with pytest.raises(ValueError, match="per-field arrays"):
        get_scorer(name).score(ScoringInput({"base": no_fields}))


@pytest.mark.parametrize("name", ["bm25f_pubmed", "bm25f_robertson"])
def test_field_shape_mismatch_is_an_error(name: str) -> None:
    base = toy().channel("base")
    bad = ChannelArrays(
        terms=base.terms,
        qtf=base.qtf,
        df=base.df,
        n_docs=base.n_docs,
        tf=base.tf,
        doc_len=base.doc_len,
        avgdl=base.avgdl,
        fields={"title": FieldArrays(tf=np.zeros((2, 3)), doc_len=np.zeros(2), avgdl=1.0)},
    )
    with pytest.raises(ValueError, match="'title'"):
        get_scorer(name).score(ScoringInput({"base": bad}))


def test_weights_lookup() -> None:
    p = BM25FPubMedParams()
    assert (p.weight("title"), p.weight("keywords"), p.weight("mesh"), p.weight("abstract")) == (
        5.0,
        5.0,
        5.0,
        1.0,
    )
    r = BM25FRobertsonParams(field_b=(("title", 0.5),))
    assert (r.weight("title"), r.weight("body"), r.b("title"), r.b("body")) == (2.0, 1.0, 0.5, 0.75)


@pytest.mark.parametrize(
    ("factory", "name"),
    [
        (lambda: BM25FPubMedParams(k1=-1.0), "k1"),
        (lambda: BM25FPubMedParams(b=1.01), "b"),
        (lambda: BM25FPubMedParams(field_weights=(("title", float("inf")),)), "field_weights"),
        (lambda: BM25FPubMedParams(field_weights=(("title", -1.0),)), "field_weights"),
        (lambda: BM25FPubMedParams(field_weights=(("title", 1.0), ("title", 2.0))), "field_weights"),
        (lambda: BM25FPubMedParams(field_weights="title=1"), "field_weights"),  # type: ignore[arg-type]
        (lambda: BM25FPubMedParams(default_weight=float("nan")), "default_weight"),
        (lambda: BM25FRobertsonParams(k1=float("inf")), "k1"),
        (lambda: BM25FRobertsonParams(field_b=(("title", 1.5),)), "field_b"),
        (lambda: BM25FRobertsonParams(default_b=-0.1), "default_b"),
        (lambda: BM25FRobertsonParams(qtf_weighting=None), "qtf_weighting"),  # type: ignore[arg-type]
    ],
)
def test_invalid_parameters_name_the_parameter(factory: object, name: str) -> None:
    with pytest.raises(ValueError, match=rf"\.{name}"):
        factory()  # type: ignore[operator]


def test_field_values_from_json_shapes_and_all_zero_weights() -> None:
    as_map = BM25FRobertsonParams(field_weights={"title": 3}, field_b=[["title", 0.5]])  # type: ignore[arg-type]
    assert as_map.field_weights == (("title", 3),) and as_map.field_b == (("title", 0.5),)
    assert as_map == BM25FRobertsonParams(field_weights=(("title", 3),), field_b=(("title", 0.5),))
    for cls in (BM25FPubMedParams, BM25FRobertsonParams):
        with pytest.raises(ValueError, match="every field weight"):
            cls(field_weights=(("title", 0.0),), default_weight=0.0)
        cls(field_weights=(("title", 0.0),), default_weight=0.5)  # some field still counts
