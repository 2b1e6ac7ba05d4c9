"""The engines' own hybrid fusions (esbridge.hybrid.engine_style) against values worked by hand."""

from __future__ import annotations

import numpy as np
import pytest

from esbridge.errors import ConfigurationError
from esbridge.hybrid.engine_style import (
    ENGINE_HYBRID_MINMAX,
    ENGINE_HYBRID_RRF,
    MIN_SCORE,
    engine_hybrid,
    minmax_mean,
    minmax_normalise,
    rrf,
)
from esbridge.hybrid.fusion import RankedList

BM25 = RankedList(["a", "b", "c"], np.array([10.0, 6.0, 2.0]))
KNN = RankedList(["b", "d", "e"], np.array([0.9, 0.7, 0.5]))


def test_minmax_normalise_follows_opensearch() -> None:
    np.testing.assert_allclose(minmax_normalise(np.array([10.0, 6.0, 2.0])), [1.0, 0.5, MIN_SCORE])
    # all equal (one result, or ties): every score is 1
    np.testing.assert_array_equal(minmax_normalise(np.array([3.0])), [1.0])
    np.testing.assert_array_equal(minmax_normalise(np.array([2.0, 2.0])), [1.0, 1.0])
    assert minmax_normalise(np.array([])).size == 0


def test_minmax_mean_by_hand() -> None:
    # bm25 normalised: a 1, b 0.5, c 0.001; knn: b 1, d 0.5, e 0.001; a list that lacks a document gives it 0
    ids, scores = minmax_mean({"bm25": BM25, "knn": KNN}, depth=5)
    assert ids == ["b", "a", "d", "c", "e"]  # c and e tie: c is named first
    np.testing.assert_allclose(scores, [0.75, 0.5, 0.25, 0.0005, 0.0005])
    # the engine keeps as many documents as its longest list
    assert minmax_mean({"bm25": BM25, "knn": KNN})[0] == ["b", "a", "d"]


def test_minmax_mean_weights() -> None:
    ids, scores = minmax_mean({"bm25": BM25, "knn": KNN}, {"bm25": 0.3, "knn": 0.7}, depth=2)
    # b: 0.3 * 0.5 + 0.7 * 1 = 0.85; d: 0.7 * 0.5 = 0.35; a: 0.3 * 1 = 0.3 (the weights sum to 1)
    assert ids == ["b", "d"]
    np.testing.assert_allclose(scores, [0.85, 0.35])


def test_rrf_by_hand() -> None:
    ids, scores = rrf({"bm25": BM25, "knn": KNN}, depth=5)
    assert ids == ["b", "a", "d", "c", "e"]
    np.testing.assert_allclose(scores, [1 / 62 + 1 / 61, 1 / 61, 1 / 62, 1 / 63, 1 / 63])
    # ranks follow the scores, not the order the list is given in
    shuffled = RankedList(["e", "b", "d"], np.array([0.5, 0.9, 0.7]))
    assert rrf({"bm25": BM25, "knn": shuffled}, depth=5)[0] == ids


def test_engine_hybrid_cuts_each_list_first() -> None:
    lexical = RankedList([f"l{i}" for i in range(10)], np.arange(10.0, 0.0, -1.0))
    semantic = RankedList([f"s{i}" for i in range(10)] + ["l9"], np.append(np.linspace(0.9, 0.5, 10), 0.95))
    out = engine_hybrid(lexical, semantic, depth=3)
    assert set(out) == {ENGINE_HYBRID_MINMAX, ENGINE_HYBRID_RRF}
    for ids, scores in out.values():
        assert len(ids) == 3 and len(scores) == 3
        assert set(ids) <= {"l0", "l1", "l2", "l9", "s0", "s1"}  # only each list's top three count
    # l9 is the kNN's best but BM25's last: from the kNN alone it ties with l0, BM25's best
    ids, scores = out[ENGINE_HYBRID_MINMAX]
    assert ids[:2] == ["l0", "l9"] and scores[0] == scores[1] == 0.5


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ConfigurationError, match="depth"):
        engine_hybrid(BM25, KNN, depth=0)
    with pytest.raises(ConfigurationError, match="not among the lists"):
        minmax_mean({"bm25": BM25}, {"knn": 1.0})
    with pytest.raises(ConfigurationError, match="rank_constant"):
        rrf({"bm25": BM25}, rank_constant=0)
    with pytest.raises(ConfigurationError, match="at least one"):
        minmax_mean({})
