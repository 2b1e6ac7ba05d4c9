"""What the benchmarks share: the machine's description and percentiles in milliseconds."""

from __future__ import annotations

import numpy as np


def machine() -> str:
    """One line on the machine, for the results' header."""
    from esbridge.evaluation.report import describe_machine

    return ", ".join(f"{k}: {v}" for k, v in describe_machine().items())


def ms(values: list[float], q: float) -> float:
    """The ``q``-th percentile of ``values`` (seconds), in milliseconds."""
    return float(np.percentile(np.array(values) * 1000.0, q))
