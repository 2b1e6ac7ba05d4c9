"""The aggregator on hand-worked rankings."""

from __future__ import annotations

import numpy as np
import pytest

from esbridge.errors import ConfigurationError
from esbridge.hybrid.fusion import Fusion, RankedList, fuse, normalise


def _lists() -> dict[str, RankedList]:
    return {
        "semantic": RankedList(["a", "b", "c"], np.array([0.9, 0.5, 0.1])),
        "lexical": RankedList(["c", "d"], np.array([12.0, 4.0])),
    }


def test_normalise_by_hand() -> None:
    s = np.array([2.0, 4.0, 6.0])
    np.testing.assert_allclose(normalise(s, "minmax"), [0.0, 0.5, 1.0])
    # mean 4, population std sqrt(8/3)
    np.testing.assert_allclose(normalise(s, "zscore"), np.array([-2.0, 0.0, 2.0]) / np.sqrt(8 / 3))
    np.testing.assert_allclose(normalise(np.array([3.0, 3.0]), "minmax"), [1.0, 1.0])
    np.testing.assert_allclose(normalise(np.array([3.0, 3.0]), "zscore"), [0.0, 0.0])
    assert normalise(np.zeros(0), "zscore").size == 0
    with pytest.raises(ConfigurationError, match="rrf"):
        normalise(s, "rrf")


def test_minmax_sum_by_hand() -> None:
    # semantic: a 1, b 0.5, c 0 (and d, missing, 0); lexical: c 1, d 0 (a, b missing: 0)
    ids, scores, parts = fuse(_lists(), {"semantic": 1.0, "lexical": 2.0}, "minmax")
    expected = {"a": 1.0, "b": 0.5, "c": 2.0, "d": 0.0}
    assert ids == ["c", "a", "b", "d"]
    np.testing.assert_allclose(scores, [expected[i] for i in ids])
    np.testing.assert_allclose(parts["lexical"], [2.0, 0.0, 0.0, 0.0])
    np.testing.assert_allclose(parts["semantic"] + parts["lexical"], scores)


def test_zscore_missing_document_gets_the_lists_minimum() -> None:
    ids, scores, parts = fuse(_lists(), {"semantic": 1.0, "lexical": 1.0}, Fusion.ZSCORE)
    sem = normalise(np.array([0.9, 0.5, 0.1]), "zscore")
    lex = normalise(np.array([12.0, 4.0]), "zscore")  # [1, -1]
    expected = {"a": sem[0] + lex.min(), "b": sem[1] + lex.min(), "c": sem[2] + lex[0], "d": sem.min() + lex[1]}
    got = dict(zip(ids, scores))
    for k, v in expected.items():
        assert got[k] == pytest.approx(v)


def test_rrf_by_hand() -> None:
    ids, scores, _ = fuse(_lists(), {"semantic": 1.0, "lexical": 1.0}, "rrf", rrf_k=60)
    expected = {"a": 1 / 61, "b": 1 / 62, "c": 1 / 63 + 1 / 61, "d": 1 / 62}
    assert ids[0] == "c"
    got = dict(zip(ids, scores))
    for k, v in expected.items():
        assert got[k] == pytest.approx(v)
    # b and d tie: the order in which the lists first name them decides
    assert ids.index("b") < ids.index("d")


def test_raw_sum_by_hand() -> None:
    # the source's aggregator: raw scores added, a list without the document adds nothing
    ids, scores, parts = fuse(_lists(), {"semantic": 1.0, "lexical": 0.5}, "sum")
    expected = {"a": 0.9, "b": 0.5, "c": 0.1 + 0.5 * 12.0, "d": 0.5 * 4.0}
    assert ids == ["c", "d", "a", "b"]
    np.testing.assert_allclose(scores, [expected[i] for i in ids])
    np.testing.assert_allclose(parts["semantic"], [0.1, 0.0, 0.9, 0.5])
    np.testing.assert_allclose(normalise(np.array([2.0, -1.0]), "sum"), [2.0, -1.0])


def test_zero_weight_contributes_nothing_and_bad_weights_are_refused() -> None:
    ids, scores, _ = fuse(_lists(), {"semantic": 1.0, "lexical": 0.0}, "minmax")
    assert ids[:3] == ["a", "b", "c"]
    with pytest.raises(ConfigurationError, match="finite and >= 0"):
        fuse(_lists(), {"semantic": -1.0}, "minmax")
    with pytest.raises(ConfigurationError, match="not a strategy"):
        fuse(_lists(), {"keyword": 1.0}, "minmax")
    with pytest.raises(ConfigurationError, match="unknown fusion"):
        fuse(_lists(), {"semantic": 1.0}, "product")
    with pytest.raises(ConfigurationError, match="ids but"):
        RankedList(["a"], np.array([1.0, 2.0]))


def test_empty_lists() -> None:
    ids, scores, parts = fuse({"semantic": RankedList([], np.zeros(0))}, {"semantic": 1.0}, "zscore")
    assert ids == [] and scores.size == 0 and parts["semantic"].size == 0
