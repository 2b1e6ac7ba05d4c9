"""The cost of reranking your own index: term vectors computed on the fly vs stored.

A BEIR corpus is indexed twice with a plain mapping of the kind an application has (``title``
and ``text`` as ``text`` fields, the standard analyzer, no esbridge sub-fields): once as it is,
so that ``_mtermvectors`` computes each candidate's term vectors from ``_source`` at query
time, and once with ``term_vector: yes`` on both fields, so they are read from the index.
For every judged query, in the same run and interleaved: the engine's own BM25 (the first
stage's query alone), and esbridge's ``bm25`` reranking the top ``--window`` on each index,
with a cold term-vector cache (every candidate's vectors fetched) and a warm one.

Usage (one command; starts esbridge's local node when no --url is given):

    python benchmarks/bench_own_index.py --dataset "$ESBRIDGE_DATA/scifact" --distribution opensearch

Results are printed as markdown and written to ``benchmarks/results/own-index-<distribution>.md``;
the two indices are created anew and deleted at the end.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from esbridge.engine.client import Engine
from esbridge.features import fetch_raw
from esbridge.nodes.provision import provision
from esbridge.rerank import Reranker

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import bulk_load, engine_arguments, judged_queries, machine, ms, write_report  # noqa: E402

KINDS = {
    "on the fly": {"type": "text"},
    "stored": {"type": "text", "term_vector": "yes"},
}


def plain_index(engine: Engine, name: str, field: dict[str, Any], docs: list[dict[str, Any]]) -> float:
    """``name`` (created anew) with ``title`` and ``text`` mapped as ``field`` holding ``docs``; the
    seconds it took to index them."""
    mapping = {"dynamic": False, "properties": {"title": dict(field), "text": dict(field)}}
    engine.delete_index(name)
    t0 = time.perf_counter()
    engine.request("PUT", f"/{name}", body={"settings": {"index": {"number_of_shards": 1, "number_of_replicas": 0}},
                                            "mappings": mapping})
    bulk_load(engine, name, docs, lambda d: {"title": d.get("title") or "", "text": d.get("text") or ""})
    return time.perf_counter() - t0


def store_size(engine: Engine, name: str) -> float:
    """The index's size on disk in MiB (primaries, after a flush)."""
    engine.request("POST", f"/{name}/_flush")
    resp = engine.request("GET", f"/{name}/_stats/store")
    return float(resp["_all"]["primaries"]["store"]["size_in_bytes"]) / 2**20


def jvm(engine: Engine) -> str:
    """The engine's Java runtime, as its node reports it."""
    resp = engine.request("GET", "/_nodes/jvm")
    for node in resp.get("nodes", {}).values():
        j = node.get("jvm") or {}
        vendor = str(j.get("vm_vendor", ""))
        name = "Temurin" if "Adoptium" in vendor else vendor
        return f"{name} {j.get('version', '')} ({vendor})".strip()
    return "unknown"


def load_average() -> str:
    """The machine's 1-minute load average (other processes share its two cores), where known."""
    try:
        return open("/proc/loadavg").read().split()[0]
    except OSError:
        return "unknown"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", required=True, help="a BEIR-layout folder, e.g. \"$ESBRIDGE_DATA/scifact\"")
    engine_arguments(ap)
    ap.add_argument("--queries", type=int, default=300, help="judged queries to time (default 300)")
    ap.add_argument("--window", type=int, default=100, help="candidates reranked (default 100)")
    ap.add_argument("--scorer", default="bm25", help="a scorer that reads only the base channel (default bm25)")
    ap.add_argument("--out", help="markdown output (default benchmarks/results/own-index-<distribution>.md)")
    args = ap.parse_args()

    prov = provision(args.distribution, url=args.url, use_docker=False, progress=True)
    engine = Engine.connect(prov.options())
    folder = Path(args.dataset)
    docs = [json.loads(line) for line in open(folder / "corpus.jsonl", encoding="utf-8") if line.strip()]
    judged = judged_queries(folder, args.queries + 20)
    queries, warmup = judged[:args.queries], judged[args.queries:] or judged[:20]
    name = folder.resolve().name
    indices = {kind: f"bench-own-{name}-{kind.replace(' ', '-')}" for kind in KINDS}
    seconds = {kind: plain_index(engine, indices[kind], KINDS[kind], docs) for kind in KINDS}
    sizes = {kind: store_size(engine, indices[kind]) for kind in KINDS}
    load_before = load_average()
    rerankers = {kind: Reranker(engine, indices[kind], scorer=args.scorer, window=args.window) for kind in KINDS}
    first = rerankers["on the fly"]
    layout = first.layout
    assert layout is not None

    engine_times: list[float] = []
    cold: dict[str, list[float]] = {k: [] for k in KINDS}
    warm: dict[str, list[float]] = {k: [] for k in KINDS}
    fetch: dict[str, list[float]] = {k: [] for k in KINDS}
    features: dict[str, float] = {k: 0.0 for k in KINDS}
    for q in warmup:  # warm-up (the JVM's compiler, the engine's caches) on queries not timed
        for rr in rerankers.values():
            rr.search(q, size=10)
    for q in queries:
        prepared = first.analyze(q)
        body = {"size": args.window, "_source": False, "query": first.first_stage_query(prepared, q)}
        t0 = time.perf_counter()
        hits = engine.search(indices["on the fly"], body)["hits"]["hits"]
        engine_times.append(time.perf_counter() - t0)
        ids = [h["_id"] for h in hits]
        for kind, rr in rerankers.items():
            t0 = time.perf_counter()
            fetch_raw(engine, indices[kind], layout, {"base": prepared.query["base"]}, ids, fields=[layout.combined],
                      stats_query={})
            fetch[kind].append(time.perf_counter() - t0)
            rr.store.vectors.clear()
            t0 = time.perf_counter()
            rr.search(q, size=10)
            cold[kind].append(time.perf_counter() - t0)
            features[kind] += rr.last.features
            t0 = time.perf_counter()
            rr.search(q, size=10)
            warm[kind].append(time.perf_counter() - t0)
    load_after = load_average()
    base = ms(engine_times, 50)
    out = [f"# Reranking your own index: term vectors on the fly vs stored ({engine.info.label})", "",
           f"Machine: {machine()}. Engine: {engine.info.label} (local node, 1 GiB heap, same machine), Java "
           f"{jvm(engine)}. Collection: {name} ({len(docs)} documents, {len(queries)} judged queries). 1-minute "
           f"load average when the timing began and ended: {load_before}, {load_after}.",
           "",
           f"Command: `python benchmarks/bench_own_index.py --dataset \"$ESBRIDGE_DATA/{name}\" --distribution "
           f"{args.distribution} --queries {args.queries} --window {args.window}`", "",
           "Both indices map `title` and `text` as plain `text` fields (standard analyzer, one shard, no esbridge "
           "sub-fields); esbridge reads them as a plain index: the base channel is each field itself and the combined "
           "field is virtual (both fields' term vectors added up). *On the fly*: no stored term vectors, so "
           "`_mtermvectors` re-analyses each candidate's `_source`; *stored*: `term_vector: yes` on both fields. "
           f"The engine's BM25 is the first stage alone (the same query, top {args.window}); esbridge's rerank is "
           f"that first stage plus the term vectors and statistics of the {args.window} candidates and {args.scorer} "
           "on them; cold: the term-vector cache emptied before each query; warm: the same query again.", "",
           "## Index", "",
           "| term vectors | index size MiB | indexing seconds |", "|---|---:|---:|"]
    for kind in KINDS:
        out.append(f"| {kind} | {sizes[kind]:.1f} | {seconds[kind]:.1f} |")
    out += ["", f"## Per-query latency ({len(queries)} queries, window {args.window}, size 10)", "",
            "| run | p50 ms | p95 ms | p50 ratio to the engine's BM25 |", "|---|---:|---:|---:|",
            f"| engine BM25 (first stage alone) | {base:.1f} | {ms(engine_times, 95):.1f} | 1.00x |"]
    for kind in KINDS:
        out.append(f"| `_mtermvectors` of the {args.window} candidates, {kind} | {ms(fetch[kind], 50):.1f} | "
                   f"{ms(fetch[kind], 95):.1f} | {ms(fetch[kind], 50) / base:.2f}x |")
    for kind in KINDS:
        for label, times in (("cold", cold[kind]), ("warm", warm[kind])):
            out.append(f"| esbridge {args.scorer} rerank, {kind}, {label} cache | {ms(times, 50):.1f} | "
                       f"{ms(times, 95):.1f} | {ms(times, 50) / base:.2f}x |")
    extra = ms(cold["on the fly"], 50) - ms(cold["stored"], 50)
    out += ["", f"Computing the candidates' term vectors at query time instead of reading stored ones costs "
                f"**{extra:.1f} ms** at the median per query with a cold cache "
                f"({ms(cold['on the fly'], 50):.1f} vs {ms(cold['stored'], 50):.1f} ms; mean time in term vectors "
                f"and statistics {features['on the fly'] / len(queries) * 1000:.1f} vs "
                f"{features['stored'] / len(queries) * 1000:.1f} ms); a warm cache hides it.", ""]
    text = "\n".join(out)
    write_report(text, Path(args.out) if args.out else HERE / "results" / f"own-index-{args.distribution}.md")
    for rr in rerankers.values():
        rr.close()
    for index in indices.values():
        engine.delete_index(index)
    return 0


if __name__ == "__main__":
    sys.exit(main())
