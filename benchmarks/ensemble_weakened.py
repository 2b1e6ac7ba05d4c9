"""The ensemble lever run through the hybrid pipeline itself, as the collections are and with every
embedding model deliberately weakened: does it still beat BM25 where the models are poor?

``benchmarks/engine_hybrid_levers.py`` chooses the lever offline from each strategy's kept lists.
Here the pipeline runs it: ``PipelineParams.preset("ensemble")`` (the lever chosen there on every
collection's tuning part: the whole-document lists of the shipped model and of e5-small-v2-q and
all-minilm-l6-v2-q, each run a second time from the fused ranking's top documents), beside the shipped
pipeline fused from the same strategy lists, on every collection's test judgments.

**Weakened.** On the shared collections the small models are about as good as BM25 or better; on a
user's collection they may be far below. As in ``benchmarks/calibrate_hybrid.py``, Gaussian noise is
added to every document vector (then normalised again), its standard deviation chosen on the tuning
part so that each vector list alone (the passages, and each model's whole documents) is about
``--weaken`` nDCG@10 points below the strongest BM25 row; the pipeline's weights are measured again on
the weakened vectors (its calibration, not recorded in the index).

Reported: each pipeline's gain in nDCG@10 points over the strongest BM25 row (the engine's two BM25
rows, from the lists ``engine_hybrid_levers.py`` keeps), as the collections are and weakened.

Usage (one command; run ``engine_hybrid_levers.py`` before, whose kept lists give the BM25 rows):

    python benchmarks/ensemble_weakened.py --data DATA --url URL

Writes ``benchmarks/results/ensemble-weakened.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from esbridge.engine.client import Engine
from esbridge.evaluation.datasets import load_dataset
from esbridge.evaluation.indexing import PYSERINI_BM25, index_name
from esbridge.evaluation.metrics import per_query_metrics
from esbridge.home import cache_dir
from esbridge.hybrid import HybridSearcher, PipelineParams
from esbridge.hybrid.calibration import measure

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import connect_engine, engine_arguments, machine, weaken  # noqa: E402
from engine_hybrid_levers import BM25_ROWS, COLLECTIONS, OTHER_MODELS, parts_of  # noqa: E402

#: the noise standard deviations tried, smallest first, until a list alone is below its target
NOISE = (0.02, 0.03, 0.04, 0.05, 0.06, 0.08, 0.1, 0.12, 0.15, 0.2)
ENSEMBLE = PipelineParams.preset("ensemble")
SHIPPED = PipelineParams()


def ndcg(qrels: dict[str, Any], runs: dict[str, list[str]]) -> float:
    pq = per_query_metrics(qrels, {q: runs.get(q, []) for q in qrels})
    return float(np.mean([pq[q]["ndcg@10"] for q in qrels]))


def run_both(hs: HybridSearcher, queries: dict[str, str]) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Every query through the ensemble pipeline, and the shipped one fused from the same lists."""
    ens: dict[str, list[str]] = {}
    shipped: dict[str, list[str]] = {}
    for n, (qid, text) in enumerate(queries.items()):
        res = hs.run(text)
        ens[qid] = list(res.ids)
        qvec = hs.vectors.embed_query(text)
        three: dict[str, Any] = {k: res.lists[k] for k in ("semantic", "lexical", "keyword") if k in res.lists}
        shipped[qid] = list(hs.aggregate(three, qvec, params=SHIPPED).ids)
        if n % 100 == 0:
            print(f"    {n}/{len(queries)} queries", file=sys.stderr, flush=True)
    return ens, shipped


def collection(engine: Engine, folder: Path, weaken_points: float) -> dict[str, Any]:
    ds = load_dataset(folder, progress=False)
    kept = pickle.loads((cache_dir() / "levers" / f"{ds.name}.pickle").read_bytes())
    parts = parts_of(ds)
    tune, test = ds.qrels(parts["tune"]), ds.qrels(parts["test"])
    bm25 = {part: max(ndcg(qrels, {q: list(g[row].ids) for q, g in kept["queries"].items()}) for row in BM25_ROWS)
            for part, qrels in (("tune", tune), ("test", test))}
    texts = {q.id: q.text for split in parts.values() for q in ds.queries(split)}
    test_queries = {q: texts[q] for q in test}
    index = index_name("esbridge-eval", ds, PYSERINI_BM25)
    out: dict[str, Any] = {"strongest_bm25": bm25}
    with HybridSearcher(engine, index, ENSEMBLE, progress=True) as hs:
        hs.calibration_check_interval = float("inf")
        for condition in ("clean", "weakened"):
            t0 = time.perf_counter()
            sigmas: dict[str, Any] = {}
            if condition == "weakened":
                target = bm25["tune"] - weaken_points / 100
                qv = {q: hs.vectors.embed_query(texts[q]) for q in tune}
                sigmas["passages"] = weaken(hs.vectors, lambda qv=qv: ndcg(  # type: ignore[misc]
                    tune, {q: list(hs.semantic(qv[q]).ids) for q in tune}), target, NOISE)
                for name, vi in [("document", hs.document_vectors),
                                 *[(f"document {m}", hs.ensemble_vectors(m)) for m in OTHER_MODELS]]:
                    mq = {q: vi.embed_query(texts[q]) for q in tune}
                    sigmas[name] = weaken(vi, lambda vi=vi, mq=mq: ndcg(  # type: ignore[misc]
                        tune, {q: vi.search(mq[q], 1000).ids for q in tune}), target, NOISE)
                print(f"  {ds.name} weakened: {sigmas}", file=sys.stderr, flush=True)
            # the weights as the pipeline measures them on these vectors (kept here, not recorded in the index)
            hs._calibration = measure(engine, index, hs.layout.fields, hs._known_item_rankings, ENSEMBLE.calibration,
                                      model=ENSEMBLE.model, scorer=ENSEMBLE.scorer)
            hs._calibration_checked = time.monotonic()
            ens, shipped = run_both(hs, test_queries)
            out[condition] = {"ensemble": ndcg(test, ens), "shipped": ndcg(test, shipped), "noise": sigmas,
                              "weights": hs.fusion_weights(), "seconds": time.perf_counter() - t0}
            print(f"  {ds.name} {condition}: {out[condition]}", file=sys.stderr, flush=True)
    return out


def report(results: dict[str, Any], meta: dict[str, Any]) -> str:
    cols = list(results)
    lines = ["# The ensemble lever through the pipeline, as the collections are and weakened", "",
             f"Made by `python benchmarks/ensemble_weakened.py` ({meta['engine']}). The ensemble: "
             "`PipelineParams.preset(\"ensemble\")` (`w_document=1`, `ensemble=(\"e5-small-v2-q\", "
             "\"all-minilm-l6-v2-q\")`, `document_feedback=3`, `document_beta=0.25`, the second pass replacing "
             "the first); the shipped pipeline fused from the same strategy lists. "
             "Gains in nDCG@10 points over the strongest BM25 row "
             "on each collection's test judgments; weakened: every vector list alone about "
             f"{meta['weaken']:g} points below that row on the tuning part.", "",
             "| pipeline | condition | " + " | ".join(cols) + " | mean | worst |",
             "|---|---|" + "---:|" * (len(cols) + 2)]
    for name in ("shipped", "ensemble"):
        for condition in ("clean", "weakened"):
            g = [100 * (results[c][condition][name] - results[c]["strongest_bm25"]["test"]) for c in cols]
            lines.append(f"| {name} | {condition} | " + " | ".join(f"{v:+.2f}" for v in g)
                         + f" | {np.mean(g):+.2f} | {min(g):+.2f} |")
    lines += ["", "nDCG@10 on the test judgments:", "", "| system | " + " | ".join(cols) + " |",
              "|---|" + "---|" * len(cols),
              "| strongest BM25 row | "
              + " | ".join(f"{results[c]['strongest_bm25']['test']:.4f}" for c in cols) + " |"]
    for name in ("shipped", "ensemble"):
        for condition in ("clean", "weakened"):
            lines.append(f"| {name}, {condition} | "
                         + " | ".join(f"{results[c][condition][name]:.4f}" for c in cols) + " |")
    lines += ["", "Noise standard deviations (and each list alone, nDCG@10 on the tuning part): "
              + "; ".join(f"{c}: " + ", ".join(f"{k} {v[0]:g} ({v[1]:.3f})"
                                               for k, v in results[c]["weakened"]["noise"].items()) for c in cols),
              "", f"Machine: {meta['machine']}; {meta['seconds']:.0f} s in all."]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True, help="folder holding the BEIR-layout collections")
    engine_arguments(ap)
    ap.add_argument("--collections", default=",".join(COLLECTIONS))
    ap.add_argument("--weaken", type=float, default=10.0, help="points below the strongest BM25 row")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "ensemble-weakened")
    args = ap.parse_args()
    engine = connect_engine(args)
    t0 = time.perf_counter()
    results: dict[str, Any] = {}
    for name in args.collections.split(","):
        results[name] = collection(engine, args.data / name, args.weaken)
        # each collection's figures kept as soon as they are measured
        args.out.with_suffix(".partial.json").write_text(json.dumps(results, indent=1))
    meta = {"engine": engine.info.label, "weaken": args.weaken, "machine": machine(),
            "seconds": time.perf_counter() - t0}
    args.out.with_suffix(".json").write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    args.out.with_suffix(".md").write_text(report(results, meta))
    args.out.with_suffix(".partial.json").unlink(missing_ok=True)
    print(args.out.with_suffix(".md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
