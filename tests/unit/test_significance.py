"""Significance tests on cases small enough to check by hand, and against scipy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from esbridge.evaluation.significance import compare_systems, holm, mean_ci, paired_t_test, randomization_test


def test_randomization_exact_by_hand() -> None:
    # differences 1, 2, 3: of the 8 sign assignments only +++ and --- reach |sum| 6, so p = 2/8
    assert randomization_test([1, 2, 3], [0, 0, 0]) == 0.25
    # four equal differences: 2 of 16 assignments reach the observed |mean|
    assert randomization_test([0.5] * 4, [0.25] * 4) == 0.125
    # a zero difference flips to itself: differences 0, 1, 2 reach |sum| 3 in 4 of 8 assignments
    assert randomization_test([1, 2, 3], [1, 1, 1]) == 0.5
    # one non-zero difference: either sign is as far from 0
    assert randomization_test([1, 1, 3], [1, 1, 1]) == 1.0
    assert randomization_test([1, 2], [1, 2]) == 1.0


def test_randomization_matches_scipys_exact_permutation_test() -> None:
    rng = np.random.default_rng(7)
    a, b = rng.random(11), rng.random(11)
    ref = stats.permutation_test((a, b), lambda x, y, axis=-1: np.mean(x - y, axis=axis), vectorized=True,
                                 permutation_type="samples", n_resamples=np.inf, alternative="two-sided")
    assert randomization_test(a, b) == pytest.approx(ref.pvalue, abs=1e-12)


def test_sampled_randomization_is_close_to_the_exact_value_and_reproducible() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.random(16) + 0.1, rng.random(16)
    exact = randomization_test(a, b, trials=2 ** 16)
    sampled = randomization_test(a, b, trials=4000)
    assert sampled == randomization_test(a, b, trials=4000)  # fixed seed
    assert abs(sampled - exact) < 0.03
    assert sampled > 0  # (1 + hits) / (1 + trials) is never 0


def test_paired_t_test_by_hand_and_against_scipy() -> None:
    # differences 1, 2, 3: mean 2, sd 1, t = 2 / (1 / sqrt 3) with 2 degrees of freedom
    t = 2 * math.sqrt(3)
    p = 2 * stats.t.sf(t, 2)
    assert paired_t_test([2, 4, 6], [1, 2, 3]) == pytest.approx(p, rel=1e-12)
    assert p == pytest.approx(0.0742, abs=1e-4)
    rng = np.random.default_rng(1)
    a, b = rng.random(30), rng.random(30)
    assert paired_t_test(a, b) == pytest.approx(stats.ttest_rel(a, b).pvalue, rel=1e-12)
    assert paired_t_test([1, 2], [1, 2]) == 1.0
    assert paired_t_test([2, 3, 4], [1, 2, 3]) == 0.0
    assert paired_t_test([1.0], [0.0]) == 1.0


def test_holm_by_hand() -> None:
    # sorted 0.005, 0.01, 0.03, 0.04 -> x4, x3, x2, x1 = 0.02, 0.03, 0.06, 0.04 -> non-decreasing: 0.04 -> 0.06
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.9]) == [1.0, 1.0]
    assert holm([0.2]) == [0.2]
    assert holm([]) == []


def test_mean_ci_by_hand() -> None:
    lo, hi = mean_ci([1, 2, 3])
    half = stats.t.ppf(0.975, 2) / math.sqrt(3)  # sd 1
    assert (lo, hi) == pytest.approx((2 - half, 2 + half))
    assert half == pytest.approx(2.4841, abs=1e-4)
    assert mean_ci([5.0]) == (5.0, 5.0)


def _per_query(values: dict[str, list[float]]) -> dict[str, dict[str, dict[str, float]]]:
    return {name: {f"q{i}": {"ndcg@10": v, "recall@100": v, "recall@1000": 1.0, "map": v, "p@5": v}
                   for i, v in enumerate(vals)} for name, vals in values.items()}


def test_compare_systems_marks_and_corrects() -> None:
    base = [0.2, 0.3, 0.4, 0.5, 0.1, 0.6, 0.2, 0.3, 0.4, 0.5, 0.1, 0.6]
    better = [v + 0.2 for v in base]  # better on every one of 12 queries: exact p = 2/4096
    noise = [v + (0.05 if i % 2 else -0.05) for i, v in enumerate(base)]
    pq = _per_query({"base": base, "better": better, "noise": noise})
    queries = [f"q{i}" for i in range(12)]
    out = compare_systems(pq, queries, ["base", "better", "noise"], ["base"], ["ndcg@10", "recall@1000"])
    assert out["trials"] == 4096 and out["seed"] is None and out["queries"] == 12
    cell = out["comparisons"]["base"]["better"]["ndcg@10"]
    assert cell["p_randomization"] == pytest.approx(2 / 4096)
    assert cell["p_randomization_holm"] == pytest.approx(2 * 2 / 4096)  # the smaller of 2 p-values, times 2
    assert cell["significant"] and cell["wins"] == 12 and cell["losses"] == 0
    assert cell["difference"] == pytest.approx(0.2) and cell["ci95"][0] == pytest.approx(0.2)
    quiet = out["comparisons"]["base"]["noise"]["ndcg@10"]
    assert not quiet["significant"] and quiet["p_randomization"] == 1.0
    assert quiet["wins"] == 6 and quiet["losses"] == 6
    assert out["comparisons"]["base"]["better"]["recall@1000"]["p_t"] == 1.0  # no difference at all
    assert set(out["comparisons"]) == {"base"} and set(out["comparisons"]["base"]) == {"better", "noise"}
    assert compare_systems(pq, queries, ["base"], ["base"], ["ndcg@10"])["comparisons"] == {}


def test_the_holm_family_is_named_and_a_raw_p_value_does_not_depend_on_it() -> None:
    base = [0.2, 0.3, 0.4, 0.5, 0.1, 0.6, 0.2, 0.3, 0.4, 0.5, 0.1, 0.6]
    better = [v + 0.2 for v in base]
    noise = [v + (0.05 if i % 2 else -0.05) for i, v in enumerate(base)]
    pq = _per_query({"base": base, "better": better, "noise": noise, "run": [v + 0.1 for v in base]})
    queries = [f"q{i}" for i in range(12)]
    two = compare_systems(pq, queries, ["base", "better", "noise"], ["base"], ["ndcg@10"])
    three = compare_systems(pq, queries, ["base", "better", "noise", "run"], ["base"], ["ndcg@10"])
    assert two["family"] == ["better", "noise"] and three["family"] == ["better", "noise", "run"]
    a, b = two["comparisons"]["base"]["better"]["ndcg@10"], three["comparisons"]["base"]["better"]["ndcg@10"]
    assert a["p_randomization"] == b["p_randomization"] == pytest.approx(2 / 4096)
    assert a["p_t"] == b["p_t"]
    # Holm: the smallest of m p-values times m, so the family's size shows in the adjusted value
    assert a["p_randomization_holm"] == pytest.approx(2 * 2 / 4096)
    assert b["p_randomization_holm"] == pytest.approx(3 * 2 / 4096)
    assert compare_systems(pq, queries, ["base"], ["base"], ["ndcg@10"])["family"] == []
