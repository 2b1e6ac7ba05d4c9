"""Summarise benchmarks/results/<dataset>/results.json into one table and check the quality bar.

Usage (from the project root)::

    python benchmarks/summarize.py > benchmarks/results/summary.md

The quality bar, on each collection's test judgments: the best single esbridge system (by mean gain)
against the **strongest** BM25 row of each collection (the engine's two BM25 settings and esbridge's
own ``bm25``):

- at least +7 points nDCG@10 on average and +2 on every collection;
- R@100 never more than 0.5 points below that BM25 row's;
- SciFact nDCG@10 >= 0.76.

And against the engines' own hybrid search (the rows ``engine-hybrid-minmax`` and ``engine-hybrid-rrf``:
the engine's BM25 and a kNN over one vector per document with the same model, fused as OpenSearch and as
Elasticsearch fuse them), the strongest engine row of each collection (BM25 or engine-hybrid): at least
+2 points nDCG@10 on average and never below it.

Each gain comes with a two-sided paired randomisation (sign-flip) test over the collection's queries.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

DATASETS = ("scifact", "nfcorpus", "cranfield", "cisi", "med")


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
    bm25_rows = [n for n in systems if n in ("engine-bm25-pyserini", "engine-bm25-default", "bm25")]
    engine_rows = [n for n in systems if n.startswith("engine-")]
    esb = [n for n in systems if n not in bm25_rows and n not in engine_rows]

    def strongest(ds: str) -> str:
        return max(bm25_rows, key=lambda n: results[ds]["results"][n]["ndcg@10"])

    gains = {n: {ds: 100 * (results[ds]["results"][n]["ndcg@10"] - results[ds]["results"][strongest(ds)]["ndcg@10"])
                 for ds in DATASETS} for n in esb}
    best = max(esb, key=lambda n: sum(gains[n].values()))
    mean, worst = sum(gains[best].values()) / len(DATASETS), min(gains[best].values())
    out.append(f"Best single system: **{best}**, against the strongest BM25 row of each collection "
               "(paired randomisation test, 20,000 sign flips, two-sided):")
    out.append("")
    for ds in DATASETS:
        base = strongest(ds)
        p = paired_p(per_query(root, ds, best, "ndcg@10"), per_query(root, ds, base, "ndcg@10"))
        r_gap = 100 * (results[ds]["results"][best]["recall@100"] - results[ds]["results"][base]["recall@100"])
        p_text = "< 0.0001" if p < 1e-4 else f"= {p:.4f}"
        out.append(f"- {ds}: {gains[best][ds]:+.2f} points nDCG@10 over {base} (p {p_text}); "
                   f"R@100 {r_gap:+.2f} points")
    r_ok = all(results[ds]["results"][best]["recall@100"]
               >= max(results[ds]["results"][n]["recall@100"] for n in bm25_rows) - 0.005 for ds in DATASETS)
    sf = results["scifact"]["results"][best]["ndcg@10"]
    out += ["",
            f"- {'met' if mean >= 7 else 'MISSED'}: mean gain {mean:+.2f} points (target +7.00)",
            f"- {'met' if worst >= 2 else 'MISSED'}: worst collection {worst:+.2f} points (target +2.00)",
            f"- {'met' if r_ok else 'MISSED'}: R@100 never more than 0.5 points below the strongest BM25 row",
            f"- {'met' if sf >= 0.76 else 'MISSED'}: SciFact nDCG@10 {sf:.4f} (target 0.76)",
            "", "Mean gain of every esbridge system: "
            + ", ".join(f"{n} {sum(g.values()) / len(DATASETS):+.2f}" for n, g in gains.items())]
    hybrid_rows = [n for n in engine_rows if n.startswith("engine-hybrid")]
    if hybrid_rows:
        def strongest_engine(ds: str) -> str:
            return max(engine_rows, key=lambda n: results[ds]["results"][n]["ndcg@10"])

        vs = {n: {ds: 100 * (results[ds]["results"][n]["ndcg@10"]
                             - results[ds]["results"][strongest_engine(ds)]["ndcg@10"]) for ds in DATASETS}
              for n in esb}
        top = max(esb, key=lambda n: sum(vs[n].values()))
        m, w = sum(vs[top].values()) / len(DATASETS), min(vs[top].values())
        out += ["", "## Against the engines' own hybrid search", "",
                f"Best single system: **{top}**, against the strongest engine row of each collection (BM25 or "
                f"{' / '.join(hybrid_rows)}):", ""]
        for ds in DATASETS:
            base = strongest_engine(ds)
            p = paired_p(per_query(root, ds, top, "ndcg@10"), per_query(root, ds, base, "ndcg@10"))
            p_text = "< 0.0001" if p < 1e-4 else f"= {p:.4f}"
            out.append(f"- {ds}: {vs[top][ds]:+.2f} points nDCG@10 over {base} (p {p_text})")
        out += ["",
                f"- {'met' if m >= 2 else 'MISSED'}: mean gain {m:+.2f} points (target +2.00)",
                f"- {'met' if w >= 0 else 'MISSED'}: worst collection {w:+.2f} points (target never below)"]
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("benchmarks/results")))
