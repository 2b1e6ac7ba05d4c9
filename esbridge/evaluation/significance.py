"""Paired significance tests, multiple-comparison correction and confidence intervals.

Every system is compared with each baseline on the same queries, measure by measure, with

- a **paired randomisation test** (sign flips): under the null hypothesis that the two systems
  are exchangeable on each query, each per-query difference is as likely to have either sign;
  the p-value is the share of sign assignments whose mean difference is at least as far from 0
  as the observed one (two-sided).  With at most :data:`TRIALS` assignments (``2**n`` for ``n``
  queries) every one is enumerated and the p-value is exact; otherwise :data:`TRIALS` random
  assignments (fixed seed) are drawn and ``p = (1 + hits) / (1 + TRIALS)``;
- a **paired two-sided t-test** (scipy's ``ttest_rel``).

For one baseline and one measure the systems compared with it form a family, whose p-values
are corrected with **Holm–Bonferroni** (step-down; it controls the family-wise error rate at
``alpha`` without assuming independence).  A difference is marked significant when the
randomisation test's Holm-adjusted p-value is below ``alpha``.  A system's adjusted p-value
depends on the family (adding a system, e.g. a run file, can raise it), its raw p-value does
not: both are reported, and the family is named (``family`` of :func:`compare_systems`).

The 95% confidence interval of a mean difference is t-based: ``mean ± t(0.975, n-1) · sd / √n``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from esbridge.errors import ConfigurationError

__all__ = [
    "ALPHA",
    "SEED",
    "TRIALS",
    "compare_systems",
    "holm",
    "mean_ci",
    "paired_t_test",
    "randomization_test",
]

#: Family-wise error rate of the marks in the tables.
ALPHA = 0.05
#: Random sign assignments of the randomisation test (fewer when all can be enumerated).
TRIALS = 10_000
#: Seed of the random sign assignments: reports are reproducible.
SEED = 0
_EPS = 1e-12
_CHUNK = 1024


def _scipy_stats() -> Any:
    try:
        from scipy import stats
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ConfigurationError(
            "significance tests need scipy; install it with: pip install 'esbridge[eval]'"
        ) from err
    return stats


def _sign_chunks(n: int, trials: int, seed: int) -> Iterator[np.ndarray]:
    """Sign assignments, ``(rows, n)`` arrays of ±1: all ``2**n`` of them when that is at most
    ``trials``, else ``trials`` random ones."""
    if n < 63 and 2 ** n <= trials:
        codes = np.arange(2 ** n, dtype=np.int64)
        bits = (codes[:, None] >> np.arange(n, dtype=np.int64)[None, :]) & 1
        yield (1 - 2 * bits).astype(np.float64)
        return
    rng = np.random.default_rng(seed)
    left = trials
    while left > 0:
        rows = min(_CHUNK, left)
        yield (1 - 2 * rng.integers(0, 2, size=(rows, n))).astype(np.float64)
        left -= rows


def _randomization(diffs: np.ndarray, trials: int, seed: int) -> np.ndarray:
    """Two-sided p-values of the columns of ``diffs`` (``(n, k)`` per-query differences)."""
    n, k = diffs.shape
    if n == 0:
        return np.ones(k)
    observed = np.abs(diffs.mean(axis=0))
    hits = np.zeros(k, dtype=np.int64)
    total = 0
    for signs in _sign_chunks(n, trials, seed):
        means = np.abs(signs @ diffs) / n
        hits += (means >= observed - _EPS).sum(axis=0)
        total += signs.shape[0]
    exact = n < 63 and 2 ** n <= trials
    p = hits / total if exact else (hits + 1) / (total + 1)
    return np.minimum(p, 1.0)


def randomization_test(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, *,
                       trials: int = TRIALS, seed: int = SEED) -> float:
    """Two-sided paired randomisation (sign-flip) test of ``mean(a - b) = 0``."""
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    return float(_randomization(d[:, None], trials, seed)[0])


def paired_t_test(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float:
    """Two-sided paired t-test of ``mean(a - b) = 0`` (1.0 when every difference is 0 or there
    are fewer than two pairs, 0.0 when every difference is the same non-zero number)."""
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    if d.size < 2 or not np.any(np.abs(d) > _EPS):
        return 1.0
    if float(np.std(d)) <= _EPS:
        return 0.0
    return float(_scipy_stats().ttest_rel(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)).pvalue)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values, in the input's order: the ``i``-th smallest of ``m``
    p-values is multiplied by ``m - i + 1``, made non-decreasing in that order, capped at 1."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: (pvalues[i], i))
    out = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * float(pvalues[i])))
        out[i] = running
    return out


def mean_ci(d: Sequence[float] | np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """t-based confidence interval of the mean of ``d`` (the mean itself with fewer than two values)."""
    x = np.asarray(d, dtype=np.float64)
    if x.size == 0:
        return 0.0, 0.0
    mean = float(x.mean())
    if x.size < 2:
        return mean, mean
    half = float(_scipy_stats().t.ppf(0.5 + level / 2, x.size - 1)) * float(x.std(ddof=1)) / math.sqrt(x.size)
    return mean - half, mean + half


def _values(per_query: Mapping[str, Mapping[str, float]], queries: Sequence[str], measure: str) -> np.ndarray:
    if measure == "combined_score":
        from esbridge.evaluation.metrics import combined_score

        return np.array([combined_score(per_query[q]["recall@100"], per_query[q]["ndcg@10"]) for q in queries])
    return np.array([per_query[q][measure] for q in queries], dtype=np.float64)


def compare_systems(per_query: Mapping[str, Mapping[str, Mapping[str, float]]], queries: Sequence[str],
                    systems: Sequence[str], baselines: Sequence[str], measures: Sequence[str], *,
                    trials: int = TRIALS, seed: int = SEED, alpha: float = ALPHA) -> dict[str, Any]:
    """Every system of ``systems`` (the baselines left out) against every baseline on every measure.

    Args:
        per_query: ``{system: {qid: {measure: value}}}``.
        queries: the queries compared (each system has a value for each).

    Returns:
        ``{"test", "correction", "family", "alpha", "trials", "seed", "queries", "comparisons":
        {baseline: {system: {measure: {"baseline", "system", "difference", "ci95", "wins",
        "losses", "p_randomization", "p_randomization_holm", "p_t", "p_t_holm",
        "significant"}}}}}`` where ``p_randomization`` and ``p_t`` are raw, their ``_holm``
        forms adjusted within the family, ``family`` the systems whose p-values against one
        baseline on one measure are corrected together (the compared systems, in order), and
        ``significant`` is ``p_randomization_holm < alpha``.
    """
    n = len(queries)
    exact = n < 63 and 2 ** n <= trials
    out: dict[str, Any] = {
        "test": ("paired randomisation test (sign flips), two-sided, "
                 + (f"exact over all {2 ** n} sign assignments" if exact else
                    f"{trials} random sign assignments, seed {seed}")
                 + "; paired t-test, two-sided, alongside"),
        "correction": "Holm-Bonferroni over the systems compared with one baseline, per measure (the family)",
        "family": [],
        "alpha": alpha,
        "trials": 2 ** n if exact else trials,
        "seed": None if exact else seed,
        "queries": n,
        "comparisons": {},
    }
    compared = [s for s in systems if s not in baselines]
    if not compared or not baselines or n == 0:
        return out
    out["family"] = list(compared)
    cells = [(base, name, m) for base in baselines for name in compared for m in measures]
    values = {(name, m): _values(per_query[name], queries, m) for name in (*baselines, *compared) for m in measures}
    diffs = np.stack([values[(name, m)] - values[(base, m)] for base, name, m in cells], axis=1)
    p_rand = _randomization(diffs, trials, seed)
    results: dict[tuple[str, str, str], dict[str, Any]] = {}
    for j, (base, name, m) in enumerate(cells):
        d = diffs[:, j]
        lo, hi = mean_ci(d)
        results[(base, name, m)] = {
            "baseline": float(values[(base, m)].mean()),
            "system": float(values[(name, m)].mean()),
            "difference": float(d.mean()),
            "ci95": [lo, hi],
            "wins": int((d > _EPS).sum()),
            "losses": int((d < -_EPS).sum()),
            "p_randomization": float(p_rand[j]),
            "p_t": paired_t_test(values[(name, m)], values[(base, m)]),
        }
    for base in baselines:
        for m in measures:
            family = [results[(base, name, m)] for name in compared]
            for key in ("p_randomization", "p_t"):
                for cell, adjusted in zip(family, holm([c[key] for c in family])):
                    cell[f"{key}_holm"] = adjusted
            for cell in family:
                cell["significant"] = bool(cell["p_randomization_holm"] < alpha)
    out["comparisons"] = {base: {name: {m: results[(base, name, m)] for m in measures} for name in compared}
                          for base in baselines}
    return out
