"""How the hybrid pipeline's cost grows with the collection, beside the engine's own hybrid search.

At each size ``N`` a synthetic corpus of ``N`` documents (drawn as in ``bench_scale.py`` from the words and
document lengths of the collections in ``DATA``) is indexed by esbridge into a node that searches vectors
(OpenSearch with its k-NN plugin by default), its passages' vectors kept in the engine as ``esbridge index``
keeps them. The vectors are **synthetic**: every passage is cut from the real word pieces by the shipped
model's tokenizer, as indexing cuts it, but its vector is a random unit vector instead of the model's (a
million documents' embedding would take this machine days); queries are embedded by the real model.
Random vectors are at least as hard for the engine's HNSW graph as real ones (they cluster less), so the
kNN figures err on the slow side; nothing here is about quality.

In the same run, against the same node, per query (``--queries`` of the collections' judged queries, each
system in turn on the same query):

* *engine BM25*: the lexical first stage's own query, ``size`` 10;
* *engine hybrid*: the engine's own hybrid with the same model: the query embedded, then the engine's
  BM25 and its kNN over the same passages (best passage per document) in one ``_msearch``, each list's top
  ``k``, min-max normalised and averaged as OpenSearch's normalization processor does by default, at
  ``k`` = 100 (the engines' usual) and ``k`` = 1,000 (the pipeline's depths);
* *esbridge*: the hybrid pipeline with its shipped defaults (``HybridSearcher.search``, size 10, its
  weights measured once on the index first), with where its time goes and which documents its second
  semantic pass searched (``semantic_feedback_scope``: by default the whole index below
  ``FEEDBACK_CANDIDATES_FROM`` documents, the first fusion's candidates from there);
* with ``--variant NAME=VALUE,...``: the pipeline with those parameters changed as well, in turn with
  the others on each query (e.g. ``--variant semantic_feedback_from=lexical_semantic``).

Also: the time to index and to fill the vectors, the index's size on disk, and this process's resident
memory after the searches (the model, Python, and whatever esbridge keeps: no vector is kept on the client).
Each index is merged to one segment before it is searched, as an index built once would be, or with
``--no-merge`` searched as written (the merge of 50,000 documents' passages takes about twenty minutes on
two cores); either way every system searches the same index.

Usage (one command; starts esbridge's local node with vector search when no --url is given):

    python benchmarks/bench_hybrid_scale.py --data DATA --sizes 5000,50000

Results go to ``benchmarks/results/hybrid-scale-<distribution>.md`` and ``.json`` (``--merge`` keeps
the earlier JSON's rows of sizes not run).
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, fields, replace
from pathlib import Path
from typing import Any

import numpy as np

from esbridge.cli.options import pipeline_params
from esbridge.engine.client import Engine
from esbridge.hybrid import HybridSearcher, PipelineParams
from esbridge.ingest import ingest, read_jsonl
from esbridge.nodes.provision import provision
from esbridge.semantic.cache import EmbeddingCache
from esbridge.semantic.engine_vectors import EngineVectors, new_vector_field
from esbridge.semantic.models import load_encoder

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_scale import corpora_and_queries, store_bytes  # noqa: E402
from common import engine_hybrid, machine, ms, settle_vector_index, write_report  # noqa: E402

ENGINE_DEPTHS = (100, 1000)


class SyntheticVectors:
    """An encoder that cuts texts exactly as ``real`` does (its tokenizer, windows and passage lengths) and
    embeds queries with it, but gives every document window a random unit vector: the engine's cost of
    holding and searching a corpus's vectors, without the days its embedding would take.  Its vectors are
    filed under a ``cache_id`` of their own, never mixed with the model's."""

    def __init__(self, real: Any, seed: int = 0) -> None:
        self._real = real
        self._rng = np.random.default_rng(seed)

    def __getattr__(self, name: str) -> Any:  # the real encoder's tokenizer, windows, lengths, name, dim
        return getattr(self._real, name)

    @property
    def cache_id(self) -> str:
        return f"synthetic-{self._real.cache_id}"

    def at_length(self, passage_tokens: int) -> SyntheticVectors:
        out = SyntheticVectors(self._real.at_length(passage_tokens))
        out._rng = self._rng
        return out

    def encode_ids(self, ids: Sequence[Sequence[int]], *, progress: Callable[[int], None] | None = None) -> np.ndarray:
        vecs = self._rng.standard_normal((len(ids), self._real.dim)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        if progress is not None:
            progress(len(ids))
        return vecs

    def encode(self, texts: Sequence[str], *, progress: Callable[[int], None] | None = None) -> np.ndarray:
        return self.encode_ids([[0]] * len(texts), progress=progress)


def rss_mb() -> tuple[float, float]:
    """This process's resident memory now and at its peak, MB."""
    now = 0.0
    try:
        for line in open("/proc/self/status", encoding="ascii"):
            if line.startswith("VmRSS:"):
                now = int(line.split()[1]) / 1024
    except OSError:
        pass
    return now, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def variant_params(text: str) -> tuple[PipelineParams, dict[str, Any]]:
    """``NAME=VALUE,...`` read as ``esbridge eval --pipeline-param`` reads each (refused here, naming the
    parameter, rather than after indexing): the parameters, and those that differ from the shipped ones."""
    params = pipeline_params([t.strip() for t in text.split(",") if t.strip()])
    shipped = PipelineParams()
    changed = {f.name: getattr(params, f.name) for f in fields(PipelineParams)
               if getattr(params, f.name) != getattr(shipped, f.name)}
    # as JSON writes them (an enum by its value, nested parameters as objects)
    return params, json.loads(json.dumps(changed, default=lambda o: getattr(o, "value", None) or asdict(o)))


def timed(searcher: HybridSearcher, q: str, times: list[float], steps: dict[str, list[float]]) -> None:
    """One search of ``searcher``: its wall time added to ``times``, its steps' to ``steps``."""
    t0 = time.perf_counter()
    resp = searcher.search(q, size=10)
    times.append(time.perf_counter() - t0)
    for step, s in resp["_esbridge"]["seconds"].items():
        steps.setdefault(step, []).append(s)


def one_size(engine: Engine, n: int, corpus: Path, queries: list[str], cache_dir: Path, *,
             reuse: dict[str, Any] | None = None, merge: bool = True,
             variant: tuple[PipelineParams, dict[str, Any]] | None = None) -> dict[str, Any]:
    """One size's row; with ``reuse`` (the earlier run's row of this size), an index of that size whose
    every vector is in place is searched as it is and its building figures are the earlier run's (an
    interrupted run's index, with no earlier row, has its missing vectors filled first); with
    ``variant``, the pipeline with those parameters timed as well (``esbridge variant``)."""
    params = PipelineParams()
    real = load_encoder(params.model)
    synthetic = SyntheticVectors(real)
    index = f"bench-hybrid-scale-{n}"
    cache = EmbeddingCache(cache_dir / str(n), real.dim)
    ev = None
    resumed = False
    if reuse is not None and engine.index_exists(index) and engine.count(index) == n:
        ev = EngineVectors.open(engine, index, synthetic, fields=("title", "text"), build=False,  # type: ignore[arg-type]
                                cache=cache, progress=True)
        if ev.pending and not reuse:  # an interrupted run's index, whole but for vectors: finish them
            print(f"{index}: {ev.pending} documents still without vectors; filling them", file=sys.stderr)
            ev.refresh(force=True)
            if not merge:
                engine.request("POST", f"/{index}/_flush")
            resumed = True
        elif ev.pending:
            ev = None
    if ev is not None and reuse is not None:
        if merge:
            engine.request("POST", f"/{index}/_forcemerge", params={"max_num_segments": 1})
        row: dict[str, Any] = {k: reuse.get(k) for k in ("index_s", "vectors_s", "settle_s")}
        if resumed:
            row["resumed"] = True
    else:
        engine.delete_index(index)
        vector = new_vector_field(engine, real, "engine")
        t0 = time.perf_counter()
        ingest(engine, index, read_jsonl(corpus), progress=True, strict=True, vector=vector)
        t_index = time.perf_counter() - t0
        t0 = time.perf_counter()
        ev = EngineVectors.open(engine, index, synthetic, fields=("title", "text"), progress=True,  # type: ignore[arg-type]
                                cache=cache)
        t_vectors = time.perf_counter() - t0
        t0 = time.perf_counter()
        if merge:
            settle_vector_index(engine, index)
        else:  # searched as written: the segments the engine's own merging left
            engine.request("POST", f"/{index}/_flush")
            engine.refresh(index)
        row = {"index_s": t_index, "vectors_s": t_vectors, "settle_s": time.perf_counter() - t0}
    row["merged"] = merge
    row["segments"] = len(engine.request("GET", f"/_cat/segments/{index}", params={"format": "json"}))
    passages = int(engine.request("GET", f"/{index}/_stats/docs")["_all"]["primaries"]["docs"]["count"]) - n
    row.update({"docs": n, "passages": passages, "mb": store_bytes(engine, index) / 1e6})
    other = HybridSearcher(engine, index, variant[0], vectors=ev) if variant else None
    with HybridSearcher(engine, index, params, vectors=ev) as hs:
        t0 = time.perf_counter()
        hs.prepare()  # the weights, measured once per index as a first search would
        row["calibrate_s"] = time.perf_counter() - t0
        rr = hs.reranker

        def first_stage(q: str) -> dict[str, Any]:
            return {"size": 10, "_source": False, "query": rr.first_stage_query(rr.analyze(q), q)}

        for q in queries:  # the analysis cache warm for every system alike
            rr.analyze(q)
        for q in queries[:10]:  # warm-up
            hs.search(q, size=10)
            if other is not None:
                other.search(q, size=10)
        times: dict[str, list[float]] = {"engine BM25": [], **{f"engine hybrid {k}": [] for k in ENGINE_DEPTHS},
                                         "esbridge": [], **({"esbridge variant": []} if other else {})}
        steps: dict[str, list[float]] = {}
        variant_steps: dict[str, list[float]] = {}
        for q in queries:
            t0 = time.perf_counter()
            engine.search(index, first_stage(q))
            times["engine BM25"].append(time.perf_counter() - t0)
            for k in ENGINE_DEPTHS:
                t0 = time.perf_counter()
                engine_hybrid(engine, index, ev, first_stage, q, k)
                times[f"engine hybrid {k}"].append(time.perf_counter() - t0)
            timed(hs, q, times["esbridge"], steps)
            if other is not None:
                timed(other, q, times["esbridge variant"], variant_steps)
    if other is not None:
        other.close()
        row["variant"] = variant[1]
        row["variant_steps"] = {step: ms(v, 50) for step, v in variant_steps.items()}
    row["latency"] = {name: [ms(v, 50), ms(v, 95)] for name, v in times.items()}
    row["steps"] = {step: ms(v, 50) for step, v in steps.items()}
    row["feedback_scope"] = hs.feedback_scope()
    row["rss_mb"], row["peak_rss_mb"] = rss_mb()
    return row


def report(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [f"# Hybrid pipeline at scale: {meta['engine']}", "",
             f"Machine: {meta['machine']}. Engine: {meta['engine']} (local node, same machine).", "",
             f"Corpus: synthetic, drawn from the words and the document lengths of {meta['collections']}; passages "
             f"cut by {meta['model']}'s tokenizer (64 word pieces, overlapping by half), each given a **random** unit "
             f"vector (see the script's text); {meta['queries']} of the collections' judged queries, embedded by the "
             "real model. The pipeline with the defaults of its run (every depth 1,000; *2nd pass*: which documents "
             "its second semantic pass searched, the whole index or the first fusion's candidates, "
             "`semantic_feedback_scope`); the engine's own hybrid at each list's top 100 and top 1,000.", "",
             f"Command: `{meta['command']}`", "",
             "## Per-query latency, p50 / p95 ms (ratios of p50)", "",
             "| docs | engine BM25 | engine hybrid, top 100 | engine hybrid, top 1,000 | esbridge | 2nd pass "
             "| esbridge / engine hybrid 100 | esbridge / engine hybrid 1,000 | esbridge / engine BM25 "
             "| esbridge p50 by step, ms |",
             "|---:|---:|---:|---:|---:|---|---:|---:|---:|---|"]
    def cell(lat: dict[str, list[float]], name: str) -> str:
        return f"{lat[name][0]:.1f} / {lat[name][1]:.1f}"

    for r in rows:
        lat = r["latency"]
        esb = lat["esbridge"][0]
        lines.append(f"| {r['docs']} | {cell(lat, 'engine BM25')} | {cell(lat, 'engine hybrid 100')} | "
                     f"{cell(lat, 'engine hybrid 1000')} | {cell(lat, 'esbridge')} | "
                     f"{r['feedback_scope']} | {esb / lat['engine hybrid 100'][0]:.2f}x | "
                     f"{esb / lat['engine hybrid 1000'][0]:.2f}x | {esb / lat['engine BM25'][0]:.1f}x | "
                     + ", ".join(f"{k} {v:.1f}" for k, v in r["steps"].items()) + " |")
    varied = [r for r in rows if "esbridge variant" in r["latency"]]
    if varied:
        lines += ["", "## The pipeline with other parameters (same run, in turn with the above on each query)", "",
                  "| docs | parameters | esbridge, p50 / p95 | / engine hybrid 100 | / engine hybrid 1,000 | "
                  "/ esbridge shipped | p50 by step, ms |", "|---:|---|---:|---:|---:|---:|---|"]
        for r in varied:
            lat = r["latency"]
            v = lat["esbridge variant"][0]
            lines.append(f"| {r['docs']} | " + ", ".join(f"`{k}={json.dumps(x)}`" for k, x in r["variant"].items())
                         + f" | {cell(lat, 'esbridge variant')} | {v / lat['engine hybrid 100'][0]:.2f}x | "
                         f"{v / lat['engine hybrid 1000'][0]:.2f}x | {v / lat['esbridge'][0]:.2f}x | "
                         + ", ".join(f"{k} {x:.1f}" for k, x in r["variant_steps"].items()) + " |")
    lines += ["", "## Building, size and memory", "",
              "| docs | passages | indexing s | vectors into the engine s | flush (and merge to one segment) s "
              "| segments searched | weights measured s | index MB | client RSS MB (now / peak) |",
              "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        earlier = "— (an interrupted run's index, finished here)" if r.get("resumed") else "— (an earlier run's index)"
        built = " | ".join(f"{r[k]:.0f}" if r.get(k) is not None else earlier
                           for k in ("index_s", "vectors_s", "settle_s"))
        lines.append(f"| {r['docs']} | {r['passages']} | {built} | {r.get('segments', '—')} | "
                     f"{r['calibrate_s']:.0f} | {r['mb']:.0f} | "
                     f"{r['rss_mb']:.0f} / {r['peak_rss_mb']:.0f} |")
    lines += ["", "The peak includes writing the vectors (built in batches here, as `esbridge index` builds them); "
              "the figure after the searches is what a client holds while it answers."]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="folder holding BEIR-layout collections")
    ap.add_argument("--sizes", default="5000,50000", help="corpus sizes, comma-separated (default 5000,50000)")
    ap.add_argument("--distribution", default="opensearch-knn", choices=["opensearch-knn", "elasticsearch8"])
    ap.add_argument("--url", help="engine URL (default: esbridge's local node)")
    ap.add_argument("--queries", type=int, default=100, help="queries to time at each size (default 100)")
    ap.add_argument("--out", default=None, help="output stem (default benchmarks/results/hybrid-scale-<distribution>)")
    ap.add_argument("--merge", action="store_true", help="keep the earlier JSON's rows of sizes not run")
    ap.add_argument("--reuse", action="store_true",
                    help="search a size's index of an earlier run as it is, where it is complete (its building "
                         "figures then come from the earlier JSON; the index is kept after every run); an "
                         "interrupted run's index, every document in but not every vector, has them finished first")
    ap.add_argument("--no-merge", action="store_true",
                    help="search each index as written (flushed, the engine's own merges only) instead of merged "
                         "to one segment (which takes about 20 minutes at 50,000 documents on two cores)")
    ap.add_argument("--timeout", type=float, default=3600.0,
                    help="seconds per request to the engine (default 3600: merging a large vector index to one "
                         "segment takes minutes)")
    ap.add_argument("--variant", default=None, metavar="NAME=VALUE,...",
                    help="also time the pipeline with these parameters changed (e.g. "
                         "semantic_feedback_from=lexical_semantic)")
    ap.add_argument("--report-only", action="store_true", help="rewrite the report from the JSON")
    args = ap.parse_args()
    variant = variant_params(args.variant) if args.variant else None
    stem = Path(args.out) if args.out else HERE / "results" / f"hybrid-scale-{args.distribution}"
    if args.report_only:
        saved = json.loads(stem.with_suffix(".json").read_text())
        write_report(report(saved["rows"], saved["meta"]), stem.with_suffix(".md"))
        return 0
    corpora, vocab, queries = corpora_and_queries(Path(args.data), args.queries)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    prov = provision(args.distribution, url=args.url, use_docker=False, progress=True)
    engine = Engine.connect(replace(prov.options(), timeout=args.timeout))
    if engine.vector_search() is None:
        raise SystemExit(f"{engine.info.label} has no vector search: use --distribution opensearch-knn or "
                         "elasticsearch8")
    saved = stem.with_suffix(".json")
    earlier = json.loads(saved.read_text()) if (args.merge or args.reuse) and saved.exists() else {"rows": []}
    before = {r["docs"]: r for r in earlier["rows"]}
    rows = [r for r in earlier["rows"] if r["docs"] not in sizes] if args.merge else []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            corpus = Path(tmp) / f"synthetic-{n}.jsonl"
            vocab.write_corpus(n, corpus)
            rows.append(one_size(engine, n, corpus, queries, Path(tmp) / "vectors",
                                 reuse=before.get(n, {}) if args.reuse else None, merge=not args.no_merge,
                                 variant=variant))
            rows.sort(key=lambda r: r["docs"])
            meta = {"engine": engine.info.label, "machine": machine(), "queries": len(queries),
                    "collections": ", ".join(c.parent.name for c in corpora), "model": PipelineParams().model,
                    "command": f"python benchmarks/bench_hybrid_scale.py --data <folder of collections> --sizes "
                               f"{','.join(str(r['docs']) for r in rows)} --distribution {args.distribution}"
                               + (" --no-merge" if args.no_merge else "") + (" --reuse" if args.reuse else "")
                               + (f" --variant {args.variant}" if args.variant else "")}
            saved.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))  # each size kept as it ends
            print(f"{n} documents: done", file=sys.stderr, flush=True)
    write_report(report(rows, meta), stem.with_suffix(".md"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
