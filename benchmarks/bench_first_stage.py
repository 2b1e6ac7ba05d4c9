"""Scripted-similarity first stages against the BM25 first stage, on BEIR-layout collections.

For each collection: one index with the Pyserini BM25 default similarity (k1 0.9, b 0.4) and
esbridge's scripted similarities as extra sub-fields; then, over the judged test queries,

* recall@100 and recall@1000 of each first stage (the engine's own ranking);
* nDCG@10 after reranking the first stage's top 1,000 with the ``evolved`` scorer;
* p50 latency of the first stage alone and of the rerank at window 100, in the same run.

Usage (one command; starts esbridge's local node when no --url is given; ``DATA`` is the
folder that holds the BEIR-layout collections):

    python benchmarks/bench_first_stage.py --data DATA --distribution opensearch
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path

import numpy as np

from esbridge.engine.client import Engine
from esbridge.index import IndexLayout, create_index
from esbridge.ingest import ingest, read_jsonl
from esbridge.nodes.provision import provision
from esbridge.rerank import Reranker

HERE = Path(__file__).resolve().parent
STAGES = ["bm25", "similarity:bm25_pyserini", "similarity:evolved", "similarity:bmx"]


def qrels_and_queries(folder: Path) -> tuple[dict[str, dict[str, int]], list[tuple[str, str]]]:
    qrels: dict[str, dict[str, int]] = {}
    with open(folder / "qrels" / "test.tsv") as f:
        rows = list(csv.reader(f, delimiter="\t"))[1:]
    for qid, did, rel in rows:
        qrels.setdefault(qid, {})[did] = int(rel)
    queries = []
    for line in open(folder / "queries.jsonl", encoding="utf-8"):
        q = json.loads(line)
        if str(q["_id"]) in qrels:
            queries.append((str(q["_id"]), q["text"]))
    return qrels, queries


def main() -> int:
    import ir_measures
    from ir_measures import R, nDCG

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="folder holding BEIR-layout collections")
    ap.add_argument("--collections", default="scifact,nfcorpus,cranfield,cisi,med")
    ap.add_argument("--distribution", default="opensearch", choices=["opensearch", "elasticsearch"])
    ap.add_argument("--url")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    engine = Engine.connect(provision(args.distribution, url=args.url, use_docker=False).options())
    lines = [f"# First stages: engine BM25 vs scripted similarities ({engine.info.label})", "",
             "Command: `python benchmarks/bench_first_stage.py --data <data folder> "
             f"--distribution {args.distribution}`", "",
             "Recall of the first stage alone (the engine's ranking); nDCG@10 after the `evolved` "
             "rerank of its top 1,000; p50 latency of the first stage alone (size 100) and of the "
             "rerank at window 100, same run.", "",
             "| collection | first stage | R@100 | R@1000 | nDCG@10 after rerank | first stage p50 ms "
             "| rerank@100 p50 ms |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for name in [c.strip() for c in args.collections.split(",") if c.strip()]:
        folder = Path(args.data) / name
        qrels, queries = qrels_and_queries(folder)
        index = f"bench-fs-{name}"
        expected = sum(1 for line in open(folder / "corpus.jsonl") if line.strip())
        if not (engine.index_exists(index) and engine.count(index) == expected):
            engine.delete_index(index)
            create_index(engine, index, IndexLayout(), bm25=(0.9, 0.4),
                         similarity=["bm25_pyserini", "evolved", "bmx"])
            ingest(engine, index, read_jsonl(folder / "corpus.jsonl"), progress=False, strict=True)
        for stage in STAGES:
            rr = Reranker(engine, index, scorer="evolved", window=1000, first_stage=stage)
            first_run: dict[str, dict[str, float]] = {}
            rerank_run: dict[str, dict[str, float]] = {}
            fs_times, rr_times = [], []
            for qid, text in queries:
                prepared = rr.analyze(text)
                body = {"size": 1000, "_source": False, "query": rr.first_stage_query(prepared, text)}
                hits = engine.search(index, body)["hits"]["hits"]
                first_run[qid] = {h["_id"]: float(h["_score"]) for h in hits}
                t0 = time.perf_counter()
                engine.search(index, {"size": 100, "query": rr.first_stage_query(prepared, text)})
                fs_times.append(time.perf_counter() - t0)
                resp = rr.search(text, size=1000, window=1000)
                rerank_run[qid] = {h["_id"]: float(h["_score"]) for h in resp["hits"]["hits"]}
                t0 = time.perf_counter()
                rr.search(text, size=10, window=100)
                rr_times.append(time.perf_counter() - t0)
            rec = ir_measures.calc_aggregate([R @ 100, R @ 1000], qrels, first_run)
            ndcg = ir_measures.calc_aggregate([nDCG @ 10], qrels, rerank_run)
            lines.append(f"| {name} | {stage} | {rec[R @ 100]:.4f} | {rec[R @ 1000]:.4f} | "
                         f"{ndcg[nDCG @ 10]:.4f} | {np.median(fs_times) * 1000:.1f} | "
                         f"{np.median(rr_times) * 1000:.1f} |")
            print(lines[-1], flush=True)
    text = "\n".join(lines)
    dest = Path(args.out) if args.out else HERE / "results" / f"first-stage-{args.distribution}.md"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
