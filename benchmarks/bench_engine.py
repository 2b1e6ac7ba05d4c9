"""Engine-side benchmarks, each against the engine doing the same work in the same run.

1. Indexing throughput on a BEIR corpus: esbridge's mapping (four channel sub-fields per
   text field plus the combined field, term vectors) vs a plain one-text-field mapping.
2. The candidates' features alone for 100 and 1,000 candidates (all four channels):
   ``_mtermvectors``, and a search through esbridge's engine plugin.
3. The feature store: ``esbridge features build`` of the collection, time and size.
4. Per-query latency over the judged queries, p50 and p95: the engine's BM25 alone vs
   esbridge's rerank at windows 100 and 1,000 with the candidates' features read inside the
   engine by esbridge's plugin (where the engine runs it: nothing kept on the client), with
   never-seen candidates (term vectors from the engine), candidates in the on-disk feature
   store (none in memory) and candidates in memory, and where a rerank's time goes.  The
   engine's BM25 is timed after an untimed pass over the queries, each query side by side with
   the plugin's rerank and again with the warm rerank (alternating which goes first), so both
   run on equally warm caches.

Usage (one command; starts esbridge's local node when no --url is given; ``DATA`` is the
folder that holds the BEIR-layout collections):

    python benchmarks/bench_engine.py --dataset DATA/scifact --distribution opensearch

Results are printed as markdown and written to ``benchmarks/results/engine-<distribution>.md``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from esbridge.engine.client import Engine
from esbridge.engine.plan import run
from esbridge.features import fetch_raw
from esbridge.features.build import build_store
from esbridge.features.cache import TermVectorCache
from esbridge.features.diskstore import DiskVectorStore
from esbridge.features.plugin import features_plugin_plan, fetch_with_plugin_plan
from esbridge.ingest import ingest, read_jsonl
from esbridge.nodes.provision import provision
from esbridge.rerank import Reranker

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import bench_index, bulk_load, engine_arguments, judged_queries, machine, ms, write_report  # noqa: E402


def bench_indexing(engine: Engine, corpus: Path, repeats: int) -> list[str]:
    plain_body = {"settings": {"index": {"number_of_shards": 1, "number_of_replicas": 0}},
                  "mappings": {"dynamic": False, "properties": {"text": {"type": "text"}}}}
    docs = [json.loads(line) for line in open(corpus, encoding="utf-8") if line.strip()]
    lines = [f"| mapping | docs | seconds (median of {repeats}) | docs/s |", "|---|---:|---:|---:|"]
    results = {}
    for label in ("plain one-text-field", "esbridge channels"):
        times = []
        for r in range(repeats):
            name = f"bench-index-{r}"
            engine.delete_index(name)
            t0 = time.perf_counter()
            if label.startswith("plain"):
                engine.request("PUT", f"/{name}", body=plain_body)
                bulk_load(engine, name, docs, lambda d: {"text": (d.get("title") or "") + " " + (d.get("text") or "")})
            else:
                ingest(engine, name, read_jsonl(corpus), progress=False, strict=True)
            times.append(time.perf_counter() - t0)
            engine.delete_index(name)
        med = statistics.median(times)
        results[label] = med
        lines.append(f"| {label} | {len(docs)} | {med:.2f} | {len(docs) / med:.0f} |")
    ratio = results["esbridge channels"] / results["plain one-text-field"]
    lines.append(f"\nesbridge mapping / plain mapping indexing time: **{ratio:.2f}x**")
    return lines


def bench_termvectors(engine: Engine, index: str, queries: list[str], plugin: bool) -> list[str]:
    """The candidates' features alone: ``_mtermvectors`` (with the statistics), and where the
    engine runs esbridge's plugin, a search of the candidates' ids through it (with the same
    statistics)."""
    rr = Reranker(engine, index, scorer="evolved", window=1000)
    lines = ["| candidates | read with | requests | ms per fetch (median) | p95 |", "|---:|---|---:|---:|---:|"]
    for n in (100, 1000):
        times = []
        reqs = 0
        through: list[float] = []
        for q in queries[:20]:
            prepared = rr.analyze(q)
            hits = engine.search(index, {"size": n, "_source": False,
                                         "query": rr.first_stage_query(prepared, q)})["hits"]["hits"]
            ids = [h["_id"] for h in hits]
            t0 = time.perf_counter()
            layout = rr.layout
            assert layout is not None, "the benchmark index has esbridge's layout"
            res = fetch_raw(engine, index, layout, prepared.query, ids, fields=[layout.combined])
            times.append(time.perf_counter() - t0)
            reqs = res.requests
            if plugin:
                t0 = time.perf_counter()
                got = run(fetch_with_plugin_plan(index, layout, prepared.query, ids, fields=[layout.combined],
                                                 stats_query=prepared.query, stat_fields=[layout.combined],
                                                 shards=1), engine)
                through.append(time.perf_counter() - t0)
                plugin_reqs = got.requests if got else 0
        lines.append(f"| {n} | `_mtermvectors` | {reqs} | {ms(times, 50):.1f} | {ms(times, 95):.1f} |")
        if plugin:
            lines.append(f"| {n} | esbridge's engine plugin | {plugin_reqs} | {ms(through, 50):.1f} | "
                         f"{ms(through, 95):.1f} |")
    rr.close()
    return lines


def side_by_side(engine: Engine, index: str, bodies: list[dict[str, Any]], queries: list[str], rr: Reranker,
                 parts: dict[str, float]) -> tuple[list[float], list[float]]:
    """The engine's BM25 (``bodies``) and ``rr``'s rerank of each query timed side by side, in
    alternating order, so that neither runs on caches the other has just warmed more often; the
    rerank's time per step is added to ``parts``."""
    engine_times: list[float] = []
    rerank_times: list[float] = []
    for i, (q, body) in enumerate(zip(queries, bodies, strict=True)):
        for turn in ((0, 1) if i % 2 == 0 else (1, 0)):
            t0 = time.perf_counter()
            if turn == 0:
                engine.search(index, body)
                engine_times.append(time.perf_counter() - t0)
            else:
                rr.search(q, size=10)
                rerank_times.append(time.perf_counter() - t0)
                for k in parts:
                    parts[k] += getattr(rr.last, k)
    return engine_times, rerank_times


def first_touch(engine: Engine, index: str, queries: list[str], scorer: str, window: int) -> list[float]:
    """Reranks through the plugin on a clone of ``index`` (the same segment files, new segments to
    the engine): each document's length and distinct terms are read from its term vector the
    first time a query brings it, as on an index no search has read yet."""
    clone = f"{index}-fresh-copy"
    engine.delete_index(clone)
    engine.request("PUT", f"/{index}/_settings", body={"index.blocks.write": True})
    try:
        engine.request("POST", f"/{index}/_clone/{clone}", body={"settings": {"index.number_of_replicas": 0}})
    finally:
        engine.request("PUT", f"/{index}/_settings", body={"index.blocks.write": None})
    engine.request("PUT", f"/{clone}/_settings", body={"index.blocks.write": None})
    engine.request("GET", f"/_cluster/health/{clone}", params={"wait_for_status": "green", "timeout": "60s"})
    times = []
    rc = Reranker(engine, clone, scorer=scorer, window=window, features="plugin")
    for q in queries:
        t0 = time.perf_counter()
        rc.search(q, size=10)
        times.append(time.perf_counter() - t0)
    rc.close()
    engine.delete_index(clone)
    return times


def bench_latency(engine: Engine, index: str, queries: list[str], scorer: str,
                  store: DiskVectorStore, plugin: bool) -> list[str]:
    lines = ["| run | window | p50 ms | p95 ms | p50 ratio to engine |", "|---|---:|---:|---:|---:|"]
    rows: list[tuple[str, int, list[float]]] = []
    profile: dict[str, dict[str, float]] = {}
    for window in (100, 1000):
        if plugin:
            # the candidates' features read inside the engine; no store, nothing kept between queries.
            # Timed side by side with the engine's BM25, alternating which goes first.
            rp = Reranker(engine, index, scorer=scorer, window=window, features="plugin")
            field = rp.layout.subfield(rp.layout.combined, "base")  # type: ignore[union-attr]
            parts = {"analyze": 0.0, "first_stage": 0.0, "features": 0.0, "scoring": 0.0, "fetch_source": 0.0}
            for q in queries:  # untimed: both see every query once
                engine.search(index, {"size": window, "query": {"match": {field: q}}})
                rp.search(q, size=10)
            rp.close()  # timed: a new client, which has analysed no query yet
            rp = Reranker(engine, index, scorer=scorer, window=window, features="plugin")
            paired, plugin_times = side_by_side(
                engine, index, [{"size": window, "query": {"match": {field: q}}} for q in queries], queries, rp, parts)
            rp.close()
            rows.append(("engine BM25 (match, same window), timed beside the plugin runs", window, paired))
            rows.append((f"esbridge {scorer}, features from esbridge's engine plugin (no client-side store)",
                         window, plugin_times))
            rows.append((f"esbridge {scorer}, the plugin on a fresh copy of the index (no document read before)",
                         window, first_touch(engine, index, queries, scorer, window)))
            profile[f"{window}, engine plugin"] = {k: v / len(queries) * 1000 for k, v in parts.items()}
        # the other modes read term vectors (_mtermvectors), as on a cluster without the plugin
        rr = Reranker(engine, index, scorer=scorer, window=window, features="termvectors",
                      vector_cache=TermVectorCache(max_entries=max(50_000, 2 * window * len(queries))))
        field = rr.layout.subfield(rr.layout.combined, "base")  # type: ignore[union-attr]
        bodies = [{"size": window, "query": {"match": {field: q}}} for q in queries]
        for body in bodies:  # untimed: the engine sees every query once before it is timed
            engine.search(index, body)
        cold, stored = [], []
        parts = {"analyze": 0.0, "first_stage": 0.0, "features": 0.0, "scoring": 0.0, "fetch_source": 0.0}
        for q in queries:  # never-seen candidates: nothing in memory, no disk store
            rr.store.vectors.clear()
            t0 = time.perf_counter()
            rr.search(q, size=10)
            cold.append(time.perf_counter() - t0)
        for q in queries:  # fills the memory cache with every query's candidates
            rr.search(q, size=10)
        engine_times, warm = side_by_side(engine, index, bodies, queries, rr, parts)
        rows.append(("engine BM25 (match, same window), timed beside the warm runs", window, engine_times))
        profile[f"{window}, warm (memory)"] = {k: v / len(queries) * 1000 for k, v in parts.items()}
        # candidates in the on-disk store (built beforehand), none in memory: a new process, say
        disk = TermVectorCache(max_entries=window, disk=store)
        rs = Reranker(engine, index, scorer=scorer, window=window, vector_cache=disk, features="termvectors")
        for q in queries:
            rs.store.vectors.clear()
            t0 = time.perf_counter()
            rs.search(q, size=10)
            stored.append(time.perf_counter() - t0)
        rr.close()
        rs.close()
        rows.append((f"esbridge {scorer}, never-seen candidates (cold)", window, cold))
        rows.append((f"esbridge {scorer}, candidates in the disk store", window, stored))
        rows.append((f"esbridge {scorer}, candidates in memory (warm)", window, warm))
    # each esbridge row's ratio is to the engine row timed beside it (the plugin's), or to the
    # engine row timed beside the warm runs (the term-vector modes)
    base: dict[int, float] = {}
    for label, window, times in rows:
        if label.startswith("engine"):
            base[window] = ms(times, 50)
        lines.append(f"| {label} | {window} | {ms(times, 50):.1f} | {ms(times, 95):.1f} | "
                     f"{ms(times, 50) / base[window]:.2f}x |")
    lines.append("\nWhere a rerank's time goes (mean ms per query):\n")
    lines.append("| window, features from | analyze | first stage | features | scoring | fetch _source |")
    lines.append("|---|---:|---:|---:|---:|---:|")
    for window, p in profile.items():
        lines.append(f"| {window} | {p['analyze']:.1f} | {p['first_stage']:.1f} | {p['features']:.1f} | "
                     f"{p['scoring']:.1f} | {p['fetch_source']:.1f} |")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", required=True, help="BEIR-layout folder")
    engine_arguments(ap)
    ap.add_argument("--scorer", default="evolved")
    ap.add_argument("--queries", type=int, default=300, help="judged queries to time (default 300)")
    ap.add_argument("--repeats", type=int, default=3, help="indexing repeats (default 3)")
    ap.add_argument("--skip-indexing", action="store_true")
    ap.add_argument("--out", default=None, help="markdown output (default benchmarks/results/engine-<dist>.md)")
    args = ap.parse_args()

    prov = provision(args.distribution, url=args.url, use_docker=False, progress=True)
    engine = Engine.connect(prov.options())
    folder = Path(args.dataset)
    corpus = folder / "corpus.jsonl"
    queries = judged_queries(folder, args.queries)
    index, expected = bench_index(engine, corpus)
    plugin = run(features_plugin_plan(engine), engine)

    out: list[str] = [f"# Engine benchmarks: {engine.info.label}", "",
                      f"Machine: {machine()}. Engine: {engine.info.label} (local node, 1 GiB heap, "
                      f"same machine). Collection: {folder.resolve().name} ({expected} documents, "
                      f"{len(queries)} queries).", "",
                      f"Command: `python benchmarks/bench_engine.py --dataset <path to {folder.resolve().name}> "
                      f"--distribution {args.distribution} --queries {args.queries}`", ""]
    if not args.skip_indexing:
        out += ["## Indexing throughput", ""] + bench_indexing(engine, corpus, args.repeats) + [""]
    out += ["## The candidates' features alone (all four channels, combined field, with their statistics)", ""]
    out += bench_termvectors(engine, index, queries, plugin) + [""]
    with tempfile.TemporaryDirectory(prefix="esbridge-bench-store-") as store_dir:
        store = DiskVectorStore(store_dir)
        built = build_store(engine, index, store, progress=False)
        out += ["## Feature store", "",
                f"`esbridge features build` of the collection: {built.documents} documents in "
                f"{built.seconds:.1f} s ({built.documents / built.seconds:.0f} docs/s), "
                f"{built.size.bytes / 1e6:.1f} MB "
                f"on disk ({built.size.terms} distinct terms over every channel).", ""]
        out += [f"## Per-query latency ({len(queries)} queries, size 10)", ""]
        out += bench_latency(engine, index, queries, args.scorer, store, plugin) + [""]
        store.close()
    text = "\n".join(out)
    write_report(text, Path(args.out) if args.out else HERE / "results" / f"engine-{args.distribution}.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
