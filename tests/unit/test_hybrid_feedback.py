"""The aggregator's feedback rules, on hand-worked numbers."""

from __future__ import annotations

import numpy as np
import pytest

from esbridge.errors import ConfigurationError
from esbridge.hybrid import PipelineParams, RankedList
from esbridge.hybrid.pipeline import HybridSearcher, feedback_centroid


def test_mean_weighting_is_the_plain_mean() -> None:
    v = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    assert np.allclose(feedback_centroid(v, np.array([9.0, 5.0, 4.0, 1.0]), "mean"), [2 / 3, 2 / 3])


def test_score_weighting_uses_margins_over_the_first_document_not_taken() -> None:
    v = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    # margins over the 4th score (1.0): 8, 4, 3 -> weights 8/15, 4/15, 3/15
    got = feedback_centroid(v, np.array([9.0, 5.0, 4.0, 1.0, 0.5]), "score")
    assert np.allclose(got, [(8 + 3) / 15, (4 + 3) / 15])


def test_score_weighting_without_a_next_document_and_with_ties() -> None:
    v = np.array([[1.0, 0.0], [0.0, 1.0]])
    # no third document: the floor is the last taken score, so the second weighs 0
    assert np.allclose(feedback_centroid(v, np.array([3.0, 1.0]), "score"), [1.0, 0.0])
    # all margins zero: equal weights
    assert np.allclose(feedback_centroid(v, np.array([2.0, 2.0, 2.0]), "score"), [0.5, 0.5])


def test_unknown_choices_are_refused_by_name() -> None:
    with pytest.raises(ConfigurationError, match="semantic_feedback_weighting"):
        PipelineParams(semantic_feedback_weighting="median")
    with pytest.raises(ConfigurationError, match="keyword_source"):
        PipelineParams(keyword_source="semantic")
    with pytest.raises(ConfigurationError, match="semantic_feedback_from must be one of all, lexical_semantic"):
        PipelineParams(semantic_feedback_from="keyword")


def _searcher(params: PipelineParams) -> HybridSearcher:
    hs = HybridSearcher.__new__(HybridSearcher)  # no engine needed for the list arithmetic
    hs.params = params
    return hs


def test_keyword_feedback_from_the_lexical_list() -> None:
    lexical = RankedList(["a", "b"], np.array([2.0, 1.0]))
    hs = _searcher(PipelineParams(keyword_source="lexical"))
    got, versions = hs.keyword_feedback_documents({"lexical": lexical}, [(1, 1), (2, 1)])
    assert got is lexical and versions == [(1, 1), (2, 1)]


def test_keyword_feedback_from_the_first_fusion() -> None:
    # z-scores: semantic c +1.22, a 0, b -1.22 (weight 3); lexical a +1.22, b 0, d -1.22 (weight 1);
    # an id absent from a list takes its lowest normalised score:
    # c 3.67 - 1.22 = 2.45, a 0 + 1.22 = 1.22, b -3.67 + 0, d -3.67 - 1.22
    semantic = RankedList(["c", "a", "b"], np.array([0.9, 0.5, 0.1]))
    lexical = RankedList(["a", "b", "d"], np.array([3.0, 2.0, 1.0]))
    p = PipelineParams(keyword_source="fusion", weighting="fixed", w_semantic=3.0, w_lexical=1.0)
    hs = _searcher(p.with_overrides(keyword_fb_docs=3))
    got, versions = hs.keyword_feedback_documents({"semantic": semantic, "lexical": lexical}, [(5, 1), (6, 1), None])
    assert got.ids == ["c", "a", "b"]
    assert np.allclose(got.scores, [1.0, 0.75, 0.5])
    assert versions == [None, (5, 1), (6, 1)]


def test_a_search_among_some_documents_keeps_the_best_of_those_that_have_a_vector() -> None:
    from esbridge.semantic.vectors import best_of

    got = best_of(["a", "b", "c", "d"], np.array([0.2, np.nan, 0.7, 0.2]), 3)
    assert got.ids == ["c", "a", "d"]  # b has no vector; the tie keeps the order asked for
    np.testing.assert_allclose(got.scores, [0.7, 0.2, 0.2])
    assert best_of(["a", "b", "c", "d"], np.array([0.2, np.nan, 0.7, 0.2]), 1).ids == ["c"]
    assert best_of([], np.zeros(0), 5).ids == []
    with pytest.raises(ConfigurationError, match="semantic_feedback_scope must be one of auto, index, candidates"):
        PipelineParams(semantic_feedback_scope="passages")


class _Counted:
    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n


def test_the_automatic_feedback_scope_follows_the_documents_with_a_vector() -> None:
    from esbridge.hybrid.pipeline import FEEDBACK_CANDIDATES_FROM

    hs = _searcher(PipelineParams())
    assert hs.params.semantic_feedback_scope == "auto"
    for n, scope in ((0, "index"), (FEEDBACK_CANDIDATES_FROM - 1, "index"), (FEEDBACK_CANDIDATES_FROM, "candidates")):
        hs._vectors = _Counted(n)  # type: ignore[assignment]
        assert hs.feedback_scope() == scope
        # a scope given by name is kept, whatever the size
        assert hs.feedback_scope(PipelineParams(semantic_feedback_scope="index")) == "index"
        assert hs.feedback_scope(PipelineParams(semantic_feedback_scope="candidates")) == "candidates"
