"""Cost of the hybrid pipeline, next to the engine's BM25 in the same run.

1. Embedding throughput at ingest (documents per second) on the first ``--embed-docs``
   documents of a collection, with an empty embedding cache (nothing reused).
2. Query embedding time (one query a call, p50 and p95).
3. Per-query latency, p50 and p95, over the judged queries: the engine's BM25 alone
   (``size`` 10, the first stage's own query) vs the pipeline's ``search`` with the
   shipped defaults, and where the pipeline's time goes (lexical, keyword, semantic,
   fusion; the semantic strategy runs beside the lexical one).  Both passes over the queries are
   shown: with esbridge's engine plugin the lexical strategy's features come with its first stage
   in both; without it, in the first a candidate's term vectors are fetched the first time any
   query needs them (on a small collection most are fetched by the first few queries), in the
   second all are cached.
4. Where the engine keeps the vectors: the semantic strategy alone, the engine's ``knn`` query
   against esbridge's exact search over the same passages; and the engine's own hybrid of its
   ``knn`` and BM25 queries (one ``_msearch``, the top 100 of each, min-max normalised and
   averaged client-side as OpenSearch's normalization processor does by default), query
   embedding included.

Usage (one command; starts esbridge's local node when no --url is given; ``DATA`` is the
folder that holds the BEIR-layout collections):

    python benchmarks/bench_hybrid.py --dataset DATA/scifact --distribution opensearch

Results are printed as markdown and written to ``benchmarks/results/hybrid-<distribution>.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from esbridge.engine.client import Engine
from esbridge.engine.plan import run
from esbridge.features.plugin import features_plugin_plan
from esbridge.hybrid import HybridSearcher, PipelineParams
from esbridge.index import VectorField
from esbridge.nodes.provision import provision
from esbridge.semantic.cache import EmbeddingCache
from esbridge.semantic.models import load_encoder
from esbridge.semantic.text import document_text
from esbridge.semantic.vectors import VectorIndex

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import bench_index, engine_hybrid, judged_queries, machine, ms, settle_vector_index, write_report  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", required=True, help="BEIR-layout folder")
    ap.add_argument("--distribution", default="opensearch",
                    choices=["opensearch", "opensearch-knn", "elasticsearch", "elasticsearch8"])
    ap.add_argument("--url", help="engine URL (default: esbridge's local node)")
    ap.add_argument("--queries", type=int, default=200, help="judged queries to time (default 200)")
    ap.add_argument("--embed-docs", type=int, default=500, help="documents embedded for throughput (default 500)")
    ap.add_argument("--out", default=None, help="markdown output (default benchmarks/results/hybrid-<dist>.md)")
    args = ap.parse_args()

    folder = Path(args.dataset)
    corpus = folder / "corpus.jsonl"
    docs = [json.loads(line) for line in open(corpus, encoding="utf-8") if line.strip()]
    queries = judged_queries(folder, args.queries)

    encoder = load_encoder()
    texts = [document_text(d, ("title", "text")) for d in docs[: args.embed_docs]]
    n_tokens = sum(len(ids) for ws in encoder.windows(texts) for ids in ws[:1]) + sum(
        len(ids) - 2 - encoder.window_stride for ws in encoder.windows(texts) for ids in ws[1:])
    with tempfile.TemporaryDirectory() as tmp:
        cache = EmbeddingCache(Path(tmp), encoder.dim)
        t0 = time.perf_counter()
        window_vectors, _ = cache.embed_windows(texts, encoder)  # what indexing embeds
        embed_s = time.perf_counter() - t0
    q_times = []
    for q in queries:
        t0 = time.perf_counter()
        encoder.encode_queries([q])
        q_times.append(time.perf_counter() - t0)

    prov = provision(args.distribution, url=args.url, use_docker=False, progress=True)
    engine = Engine.connect(prov.options())
    kind = engine.vector_search()
    knn = kind is not None
    index, _ = bench_index(engine, corpus, VectorField(encoder.dim, encoder.name, passages=encoder.passage_tokens,
                                                       type=kind) if kind else None)
    params = PipelineParams()
    out = [f"# Hybrid pipeline benchmarks: {engine.info.label}", "",
           f"Machine: {machine()}. Engine: {engine.info.label} (local node, 1 GiB heap, same machine). "
           f"Collection: {folder.resolve().name} ({len(docs)} documents, {len(queries)} queries). "
           f"Model: {encoder.name} (onnxruntime, {', '.join(encoder.providers)}).", "",
           f"Command: `python benchmarks/bench_hybrid.py --dataset <path to {folder.resolve().name}> "
           f"--distribution {args.distribution} --queries {args.queries} --embed-docs {args.embed_docs}`", "",
           "## Embedding", "",
           "| what | figure |", "|---|---:|",
           f"| documents embedded (empty cache) | {len(texts)} ({n_tokens / max(1, len(texts)):.0f} word pieces "
           f"each on average; {len(window_vectors)} passages of at most {encoder.passage_tokens}) |",
           f"| ingest embedding throughput | **{len(texts) / embed_s:.1f} docs/s** "
           f"({len(window_vectors) / embed_s:.1f} passages/s, {embed_s:.1f} s) |",
           f"| query embedding, p50 / p95 | {ms(q_times, 50):.1f} / {ms(q_times, 95):.1f} ms |", ""]

    with HybridSearcher(engine, index, params, progress=True) as hs:
        _ = hs.vectors
        settled: float | None = None  # seconds the flush and merge took
        if knn:
            t0 = time.perf_counter()
            settle_vector_index(engine, index)
            settled = time.perf_counter() - t0
        def bm25_body(q: str) -> dict[str, Any]:
            return {"size": 10, "_source": False, "query": hs.reranker.first_stage_query(hs.reranker.analyze(q), q)}

        def beside(q: str, other: Callable[[str], Any], engine_times: list[float], times: list[float]) -> Any:
            """The engine's BM25 for ``q``, then ``other(q)``, each timed into its list; ``other``'s answer."""
            body = bm25_body(q)
            t0 = time.perf_counter()
            engine.search(index, body)
            engine_times.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            answer = other(q)
            times.append(time.perf_counter() - t0)
            return answer

        for q in queries:  # analysis cache warm for both sides
            hs.reranker.analyze(q)
        rows = []
        plugin = run(features_plugin_plan(engine), engine)
        passes = (("first pass (the lexical strategy's features come with its first stage, from esbridge's "
                   "engine plugin)", "second pass (the same)") if plugin else
                  ("first pass (a document's term vectors are fetched when a query first needs them)",
                   "second pass (every candidate's term vectors cached)"))
        for label in passes:
            eng_t: list[float] = []
            hyb_t: list[float] = []
            parts: dict[str, list[float]] = {}
            for q in queries:
                resp = beside(q, lambda q: hs.search(q, size=10), eng_t, hyb_t)
                for k, v in resp["_esbridge"]["seconds"].items():
                    parts.setdefault(k, []).append(v)
            split = ", ".join(f"{k} {ms(v, 50):.1f}" for k, v in parts.items())
            rows.append(f"| {label} | {ms(eng_t, 50):.1f} / {ms(eng_t, 95):.1f} | "
                        f"{ms(hyb_t, 50):.1f} / {ms(hyb_t, 95):.1f} | {ms(hyb_t, 50) / ms(eng_t, 50):.1f}x | {split} |")
        if knn:  # the semantic strategy alone: the engine's kNN vs esbridge's exact search on disk
            # over the same vectors (passages, best passage per document), esbridge's own path for an
            # index without a vector field
            exact = VectorIndex.open(engine, index, encoder, fields=("title", "text"), progress=True)
            qvecs = [encoder.encode_queries([q])[0] for q in queries]
            searches = ((f"engine kNN (HNSW), nested passages of {encoder.passage_tokens}, best per document",
                         hs.vectors),
                        ("esbridge exact (on disk), the same passages", exact))
            depths = sorted({params.semantic_depth, 100}, reverse=True)
            sem: dict[str, list[float]] = {f"{name}, top {k}": [] for name, _ in searches for k in depths}
            for qv in qvecs:
                for name, vi in searches:
                    for k in depths:
                        t0 = time.perf_counter()
                        vi.search(qv, k)
                        sem[f"{name}, top {k}"].append(time.perf_counter() - t0)
            overlap = [len(set(hs.vectors.search(qv, 10).ids) & set(exact.search(qv, 10).ids)) / 10 for qv in qvecs]
            sem_rows = [f"| {name} | {ms(v, 50):.1f} / {ms(v, 95):.1f} |" for name, v in sem.items()]
            def own_hybrid(q: str) -> list[str]:
                return engine_hybrid(engine, index, hs.vectors, bm25_body, q, 100)

            eh_t: list[float] = []
            eb_t: list[float] = []
            for q in queries:
                beside(q, own_hybrid, eb_t, eh_t)
            sem_rows.append(f"| the engine's own hybrid: query embedding, then its `knn` and BM25 top 100 in one "
                            f"`_msearch`, min-max normalised and averaged | {ms(eh_t, 50):.1f} / {ms(eh_t, 95):.1f} "
                            f"({ms(eh_t, 50) / ms(eb_t, 50):.1f}x the engine's BM25 at size 10, "
                            f"{ms(eb_t, 50):.1f} ms beside it) |")
    weights = ", ".join(f"{k} {v:g}" for k, v in params.weights.items())
    out += [f"## Per-query latency (size 10; pipeline: {params.fusion.value} of {weights}, lexical "
            f"{params.scorer} over the top {params.window}, semantic top {params.semantic_depth})", "",
            "| pass | engine BM25 p50 / p95 ms | pipeline p50 / p95 ms | p50 ratio | pipeline p50 by step, ms |",
            "|---|---:|---:|---:|---|", *rows, ""]
    if settled is not None:  # its size once the merged-away files are gone (the answer to the merge comes before)
        stats = engine.request("GET", f"/{index}/_stats/store")
        size = stats["_all"]["primaries"]["store"]["size_in_bytes"] / 1e6
        out += ["The index with the vectors was flushed and merged to one segment after they were filled "
                f"({settled:.0f} s; {size:.0f} MB on disk at the end of the run).", ""]
    if knn:
        out += ["## Semantic strategy alone (query vector given)", "",
                "| search | p50 / p95 ms |", "|---|---:|", *sem_rows, "",
                f"Top-10 agreement of the engine's kNN with exact cosine over the same vectors: "
                f"{100 * sum(overlap) / len(overlap):.1f}% over {len(overlap)} queries.", ""]
    text = "\n".join(out)
    write_report(text, Path(args.out) if args.out else HERE / "results" / f"hybrid-{args.distribution}.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
