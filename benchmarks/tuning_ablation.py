"""Which tuned values of the evolved scorer carry the gain: put each back to its starting value.

Reads a tuning JSON (``esbridge tune ... --out DIR``) and the features that run cached
(``<esbridge cache>/features/*.pickle``, written by ``esbridge tune``), so no engine is needed.
For every parameter whose tuned value differs from the shipped one, the training objective
(mean combined score over the training sets) is recomputed with that single parameter
reset; a parameter whose reset costs less than ``--tolerance`` is not worth changing.

Usage (from the project root)::

    python benchmarks/tuning_ablation.py benchmarks/results/tuning/evolved-all-wide/tune-evolved.json \
        > benchmarks/results/tuning/ablation.md
"""

from __future__ import annotations

import argparse
import json
import pickle
from dataclasses import replace
from pathlib import Path

import numpy as np

from esbridge.evaluation.tune import QuerySet, evaluate
from esbridge.home import cache_dir
from esbridge.scoring import get_scorer


def _sets(labels: list[str], scorer: str) -> list[QuerySet]:
    found: dict[str, QuerySet] = {}
    for path in sorted((cache_dir() / "features").glob(f"*-{scorer}-*.pickle")):
        with open(path, "rb") as f:
            qs = pickle.load(f)
        if qs.label in labels:
            found[qs.label] = qs
    missing = [x for x in labels if x not in found]
    if missing:
        raise SystemExit(f"no cached features for {missing}; run the `esbridge tune` command first")
    return [found[x] for x in labels]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("tune_json", type=Path)
    ap.add_argument("--start", type=Path, help="JSON of the starting values (default: the run's 'defaults')")
    ap.add_argument("--tolerance", type=float, default=0.0005)
    args = ap.parse_args()
    run = json.loads(args.tune_json.read_text())
    scorer = run["scorer"]
    start = json.loads(args.start.read_text()) if args.start else run["defaults"]
    train = _sets(list(run["train"]), scorer)
    held = _sets(list(run["heldout"]), scorer)
    ptype = get_scorer(scorer).params_type
    best = ptype(**run["best"])

    def objective(params: object, sets: list[QuerySet]) -> float:
        return float(np.mean([evaluate(qs, scorer, params).combined for qs in sets]))

    base_train, base_held = objective(best, train), objective(best, held)
    print(f"# Ablation of `{scorer}` tuned values ({args.tune_json})\n")
    print(f"Tuned: training objective {base_train:.4f}, held-out {base_held:.4f}. Each row resets one "
          "parameter to its starting value, others tuned.\n")
    print("| parameter | start | tuned | training Δ if reset | held-out Δ if reset | keep tuned? |")
    print("|---|---:|---:|---:|---:|---|")
    for name, value in run["best"].items():
        if start.get(name) == value or not isinstance(value, float):
            continue
        p = replace(best, **{name: start[name]})
        dt, dh = objective(p, train) - base_train, objective(p, held) - base_held
        keep = "yes" if -dt >= args.tolerance else "no (gain below tolerance)"
        print(f"| {name} | {start[name]:.4g} | {value:.4g} | {dt:+.4f} | {dh:+.4f} | {keep} |")


if __name__ == "__main__":
    main()
