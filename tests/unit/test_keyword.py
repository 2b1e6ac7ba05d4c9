"""The keyword strategy's pieces: narrative filtering, RM3-with-idf expansion, interpolation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from esbridge.errors import ConfigurationError
from esbridge.features.termvectors import FieldVector, QueryChannel
from esbridge.hybrid.keyword import (
    KeywordParams,
    expansion_candidates,
    expansion_terms,
    filter_narrative,
    rank_terms_by_idf,
    weighted_terms,
)


def test_filter_narrative_drops_statements_about_non_relevant_documents() -> None:
    text = ("Relevant documents discuss the causes of the resignation. Articles that only mention the "
            "minister are not relevant. Reports on the IPL controversy are relevant; "
            "documents about cricket scores are irrelevant.")
    assert filter_narrative(text) == ("Relevant documents discuss the causes of the resignation. "
                                      "Reports on the IPL controversy are relevant;")
    assert filter_narrative("") == ""


@pytest.mark.parametrize("sentence", [
    "Panels whose temperature is not uniform are of particular interest.",
    "Reports where the minister did not resign are relevant.",
    "Designs that should not overheat, and why, are wanted.",
    "Studies that will not be repeated are useful too.",
])
def test_filter_narrative_keeps_positive_sentences_that_say_not(sentence: str) -> None:
    # a "not" describing the subject matter is no statement about non-relevant documents
    assert filter_narrative(sentence) == sentence


@pytest.mark.parametrize("sentence", [
    "Documents about cricket scores are not relevant.",
    "Reports of the match will not be considered.",
    "Articles on the weather are not of interest.",
    "Mere mentions of the minister do not count.",
    "Opinion pieces are excluded.",
    "Press releases should not be retrieved.",
    "Non-relevant documents mention the election only.",
])
def test_filter_narrative_drops_statements_about_non_relevant_documents_each(sentence: str) -> None:
    assert filter_narrative(f"Relevant documents name the causes. {sentence}") == "Relevant documents name the causes."


def idf(df: int, n: int) -> float:
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


def test_expansion_weights_by_hand() -> None:
    docs = [FieldVector({"bone": 2, "vitamin": 1, "calcium": 1}),   # length 4
            FieldVector({"bone": 1, "calcium": 1}),                 # length 2
            FieldVector({"rare": 3})]                               # length 3
    scores = np.array([3.0, 1.0, 0.0])  # p = 0.75, 0.25, 0
    df = {"bone": 10, "calcium": 5, "vitamin": 50, "rare": 1}
    assert expansion_candidates(docs, 2) == ["bone", "calcium"]
    got = expansion_terms(docs, scores, df, 100, KeywordParams(fb_terms=5, min_docs=2))
    assert got == pytest.approx({
        "bone": (0.75 * 2 / 4 + 0.25 * 1 / 2) * idf(10, 100),
        "calcium": (0.75 * 1 / 4 + 0.25 * 1 / 2) * idf(5, 100),
    })
    # the query's own terms are not expansion terms; a document of weight 0 adds nothing
    # ("rare"); fb_terms keeps the best ("calcium" over "vitamin")
    got = expansion_terms(docs, scores, df, 100, KeywordParams(fb_terms=1, min_docs=1), exclude=["bone"])
    assert list(got) == ["calcium"]


def test_weighted_terms_interpolate() -> None:
    q = QueryChannel(("bone", "densiti"), (1, 1))
    out = weighted_terms(q, {"calcium": 3.0, "bone": 1.0}, 0.4)
    assert out == pytest.approx({"bone": 0.6 * 0.5 + 0.4 * 0.25, "densiti": 0.3, "calcium": 0.4 * 0.75})
    assert weighted_terms(q, {}, 0.4) == pytest.approx({"bone": 0.3, "densiti": 0.3})
    assert weighted_terms(QueryChannel((), ()), {"x": 2.0}, 0.4) == pytest.approx({"x": 1.0})


def test_rank_terms_by_idf_drops_absent_terms() -> None:
    qc = QueryChannel(("a", "b", "c"), (2, 1, 5))
    got = rank_terms_by_idf(qc, {"a": 1, "b": 1, "c": 0}, 10, keep=1)
    assert got == pytest.approx({"a": 2 * idf(1, 10)})


def test_keyword_params_are_checked() -> None:
    with pytest.raises(ConfigurationError, match="fb_docs"):
        KeywordParams(fb_docs=0)
    with pytest.raises(ConfigurationError, match="lam"):
        KeywordParams(lam=1.5)
    with pytest.raises(ConfigurationError, match="depth"):
        KeywordParams(depth=True)
