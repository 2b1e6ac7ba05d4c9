"""Query cost of the ensemble preset and of its second pass over the whole-document lists, next to the
engine's BM25 in the same run.

On the evaluation index ``esbridge eval`` builds for a collection (every vector already made, on disk,
exact search), each judged query runs through three pipelines, one after the other, with the engine's
BM25 (the first stage's own query, ``size`` 10) timed just before each:

* ``shipped``: ``PipelineParams()``;
* ``ensemble, one pass``: ``PipelineParams.preset("ensemble")`` with ``document_feedback=0``;
* ``ensemble``: ``PipelineParams.preset("ensemble")`` (each whole-document list run a second time from
  the fused ranking's top documents).

Two passes over the queries; the second is reported (every candidate's features and every query's
analysis warm, as on a busy index).  Reported: per-query latency p50 / p95 of each pipeline, its ratio
to the engine's BM25 timed beside it, and the second pass's own share (``document_feedback``).

Usage (one command; ``DATA`` holds the BEIR-layout collections; the evaluation index and its vectors
are built when missing):

    python benchmarks/bench_ensemble.py --data DATA --collection scifact --url URL

Writes ``benchmarks/results/ensemble-cost.md``.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

from esbridge.evaluation.datasets import load_dataset
from esbridge.evaluation.indexing import PYSERINI_BM25, ensure_index, index_name
from esbridge.hybrid import HybridSearcher, PipelineParams

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import connect_engine, engine_arguments, judged_queries, machine, ms, write_report  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True, help="folder holding the BEIR-layout collections")
    ap.add_argument("--collection", default="scifact")
    ap.add_argument("--queries", type=int, default=200, help="judged queries to time (default 200)")
    engine_arguments(ap)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "ensemble-cost.md")
    args = ap.parse_args()
    folder = args.data / args.collection
    engine = connect_engine(args)
    ds = load_dataset(folder, progress=False)
    index = ensure_index(engine, ds, index_name("esbridge-eval", ds, PYSERINI_BM25), bm25=PYSERINI_BM25,
                         progress=True)
    queries = judged_queries(folder, args.queries)
    ensemble = PipelineParams.preset("ensemble")
    pipelines = {"shipped": PipelineParams(), "ensemble, one pass": replace(ensemble, document_feedback=0),
                 "ensemble": ensemble}
    rows = []
    for name, params in pipelines.items():
        with HybridSearcher(engine, index, params, progress=True) as hs:
            hs.prepare()  # every vector made, the weights measured
            bm25 = {"size": 10, "_source": False}
            eng_t: list[float] = []
            t: list[float] = []
            fb: list[float] = []
            for _ in range(2):
                eng_t, t, fb = [], [], []
                for q in queries:
                    body = {**bm25, "query": hs.reranker.first_stage_query(hs.reranker.analyze(q), q)}
                    t0 = time.perf_counter()
                    engine.search(index, body)
                    eng_t.append(time.perf_counter() - t0)
                    t0 = time.perf_counter()
                    res = hs.run(q)
                    t.append(time.perf_counter() - t0)
                    fb.append(res.seconds.get("document_feedback", 0.0))
            rows.append((name, ms(t, 50), ms(t, 95), ms(eng_t, 50), ms(fb, 50)))
            print(f"{name}: {rows[-1]}", file=sys.stderr, flush=True)
    lines = [f"# The ensemble's query cost: {engine.info.label}", "",
             f"Machine: {machine()}. Collection: {ds.name} ({ds.corpus_size()} documents, {len(queries)} judged "
             "queries), its evaluation index; vectors on disk, exact search. Second of two passes over the queries.",
             "", f"Command: `python benchmarks/bench_ensemble.py --data DATA --collection {args.collection} "
             f"--queries {args.queries}`", "",
             "| pipeline | p50 ms | p95 ms | engine BM25 p50 ms, same run | p50 ratio | second pass p50 ms |",
             "|---|---:|---:|---:|---:|---:|"]
    for name, p50, p95, e50, f50 in rows:
        lines.append(f"| {name} | {p50:.1f} | {p95:.1f} | {e50:.1f} | {p50 / e50:.1f}x | {f50:.1f} |")
    write_report("\n".join(lines), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
