"""Summarise benchmarks/results/<dataset>/results.json into one table and check the quality bar.

Usage (from the project root)::

    python benchmarks/summarize.py > benchmarks/results/summary.md

The quality bar (the evaluation issue), on each collection's test judgments, against the
engine's BM25 with Pyserini's parameters (``engine-bm25-pyserini``, same analyzer):

- ``evolved`` and ``bmx`` at least match it on nDCG@10 and R@100 on every collection;
- the best esbridge scorer is >= 2 points nDCG@10 above it on average;
- SciFact nDCG@10 >= 0.70.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

DATASETS = ("scifact", "nfcorpus", "cranfield", "cisi", "med")
BASE = "engine-bm25-pyserini"
RERANKERS = ("bmx", "evolved")


def per_query(root: Path, ds: str, system: str, measure: str) -> dict[str, float]:
    """One system's per-query values from ``<ds>/per_query.tsv``."""
    out = {}
    with open(root / ds / "per_query.tsv") as f:
        header = next(f).rstrip("\n").split("\t")
        col = header.index(measure)
        for line in f:
            cols = line.rstrip("\n").split("\t")
            if cols[0] == system:
                out[cols[1]] = float(cols[col])
    return out


def paired_p(a: dict[str, float], b: dict[str, float], trials: int = 20_000, seed: int = 0) -> float:
    """Two-sided paired randomisation (sign-flip) test of mean(a - b) = 0."""
    d = np.array([a[q] - b[q] for q in sorted(a)])
    observed = abs(d.mean())
    signs = np.random.default_rng(seed).choice([-1.0, 1.0], size=(trials, d.size))
    return float((np.abs((signs * d).mean(axis=1)) >= observed - 1e-15).mean())


def main(root: Path) -> int:
    results = {}
    for ds in DATASETS:
        path = root / ds / "results.json"
        if not path.is_file():
            print(f"missing {path}", file=sys.stderr)
            return 1
        results[ds] = json.loads(path.read_text())
    systems = list(next(iter(results.values()))["results"])
    out = ["# All collections, test judgments", "",
           "nDCG@10 / R@100 per collection (window 1000, first stage = the engine's BM25 k1=0.9 b=0.4).", "",
           "| system | " + " | ".join(DATASETS) + " | mean nDCG@10 | mean R@100 |",
           "|---|" + "---:|" * (len(DATASETS) + 2)]
    for name in systems:
        cells, nd, rc = [], [], []
        for ds in DATASETS:
            r = results[ds]["results"][name]
            cells.append(f"{r['ndcg@10']:.4f} / {r['recall@100']:.4f}")
            nd.append(r["ndcg@10"])
            rc.append(r["recall@100"])
        out.append(f"| {name} | " + " | ".join(cells) + f" | {sum(nd) / len(nd):.4f} | {sum(rc) / len(rc):.4f} |")
    out += ["", "## Quality bar", ""]
    for scorer in RERANKERS:
        for ds in DATASETS:
            r, b = results[ds]["results"][scorer], results[ds]["results"][BASE]
            for m in ("ndcg@10", "recall@100"):
                ok = r[m] >= b[m]
                line = (f"- {'met' if ok else 'MISSED'}: {scorer} {m} on {ds}: {r[m]:.4f} vs {b[m]:.4f} "
                        f"({r[m] - b[m]:+.4f})")
                if not ok:
                    p = paired_p(per_query(root, ds, scorer, m), per_query(root, ds, BASE, m))
                    line += f"; paired randomisation test p = {p:.2f}"
                out.append(line)
    esb = [n for n in systems if not n.startswith("engine-")]
    gains = {n: sum(results[ds]["results"][n]["ndcg@10"] - results[ds]["results"][BASE]["ndcg@10"]
                    for ds in DATASETS) / len(DATASETS) for n in esb}
    best = max(gains, key=lambda n: gains[n])
    out.append(f"- {'met' if gains[best] >= 0.02 else 'MISSED'}: best esbridge scorer ({best}) is "
               f"{100 * gains[best]:+.2f} points nDCG@10 above {BASE} on average (target +2.00); "
               + ", ".join(f"{n} {100 * g:+.2f}" for n, g in gains.items()))
    sf = max(results["scifact"]["results"][n]["ndcg@10"] for n in esb)
    out.append(f"- {'met' if sf >= 0.70 else 'MISSED'}: best SciFact nDCG@10 {sf:.4f} (target 0.70)")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("benchmarks/results")))
