"""One definition of the scorers' numeric helpers, with one behaviour."""

from __future__ import annotations

import numpy as np

from esbridge.scoring import bm25, bmx, common


def test_helpers_are_defined_once() -> None:
    assert bm25.safe_divide is common.safe_divide is bmx.safe_divide
    assert bm25.length_ratio is common.length_ratio is bmx.length_ratio


def test_safe_divide_divides_except_by_zero() -> None:
    np.testing.assert_array_equal(common.safe_divide(np.array([1.0, 1.0, 0.0]), np.array([-2.0, 0.0, 0.0])),
                                  [-0.5, 0.0, 0.0])
    np.testing.assert_array_equal(common.safe_divide(3.0, np.array([2.0, 0.0])), [1.5, 0.0])


def test_length_ratio_with_degenerate_averages() -> None:
    lengths = np.array([1.0, 2.0])
    np.testing.assert_array_equal(common.length_ratio(lengths, 2.0), [0.5, 1.0])
    for avgdl in (0.0, -1.0, float("inf"), float("nan")):
        np.testing.assert_array_equal(common.length_ratio(lengths, avgdl), [1.0, 1.0])


def test_booleans_are_not_numbers_for_any_scorer() -> None:
    import pytest

    from esbridge.scoring import get_scorer

    for name, param in (("evolved", "alpha_len"), ("bm25", "k1"), ("bmx", "beta")):
        with pytest.raises(ValueError, match=param):
            get_scorer(name).make_params(**{param: True})
