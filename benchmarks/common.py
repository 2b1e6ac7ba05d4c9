"""What the benchmarks share: engine arguments, the machine's description, percentiles in
milliseconds, the benchmark indices and plain bulk loading."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from esbridge.engine.calls import ndjson_lines
from esbridge.engine.client import Engine
from esbridge.engine.plan import run
from esbridge.engine.plugins import similarity_on_every_node_plan
from esbridge.index import VectorField
from esbridge.index.definitions import index_meta
from esbridge.ingest import ingest, read_jsonl
from esbridge.semantic.engine_vectors import vector_field_of


def engine_arguments(ap: argparse.ArgumentParser) -> None:
    """``--distribution`` and ``--url``: which engine a benchmark runs against."""
    ap.add_argument("--distribution", default="opensearch", choices=["opensearch", "elasticsearch", "elasticsearch8"],
                    help="elasticsearch8: esbridge's secured Elasticsearch 8.19 node (its credentials are used)")
    ap.add_argument("--url", help="engine URL (default: esbridge's local node)")


def connect_engine(args: argparse.Namespace) -> Engine:
    """A client of the engine ``--distribution`` / ``--url`` name (:func:`engine_arguments`), with the
    provisioned engine's options (a local node is started where none runs and no URL is given)."""
    from esbridge.nodes.provision import provision

    return Engine.connect(provision(args.distribution, url=args.url, use_docker=False, progress=True).options())


def judged_collection(engine: Engine, dataset: str, queries: int) -> tuple[Path, list[str], str, int]:
    """A BEIR folder's first ``queries`` judged query texts and its bench index
    (:func:`bench_index`): ``(folder, queries, index, documents)``."""
    folder = Path(dataset)
    index, expected = bench_index(engine, folder / "corpus.jsonl")
    return folder, judged_queries(folder, queries), index, expected


def machine() -> str:
    """One line on the machine, for the results' header."""
    from esbridge.evaluation.report import describe_machine

    return ", ".join(f"{k}: {v}" for k, v in describe_machine().items())


def ms(values: list[float], q: float) -> float:
    """The ``q``-th percentile of ``values`` (seconds), in milliseconds."""
    return float(np.percentile(np.array(values) * 1000.0, q))


def judged_queries(folder: Path, limit: int) -> list[str]:
    """The texts of the first ``limit`` queries judged in ``qrels/test.tsv`` of a BEIR folder."""
    with open(folder / "qrels" / "test.tsv") as f:
        next(f)
        judged = {line.split("\t")[0] for line in f}
    rows = [json.loads(line) for line in open(folder / "queries.jsonl")]
    return [q["text"] for q in rows if q["_id"] in judged][:limit]


def bench_index(engine: Engine, corpus: Path, vector: VectorField | None = None) -> tuple[str, int]:
    """``bench-<collection>`` holding ``corpus`` (indexed only when its document count differs, or
    it stores term vectors where esbridge would now create it without, or the other way round, or
    it predates the ids' doc values); with ``vector``, ``bench-<collection>-knn`` with that vector
    field."""
    index = f"bench-{corpus.parent.resolve().name}" + ("-knn" if vector is not None else "")
    expected = sum(1 for line in open(corpus) if line.strip())
    exists = engine.index_exists(index)
    held = vector_field_of(engine, index) if vector is not None and exists else None
    meta = index_meta(engine, index) if exists else {}
    stored = bool(meta.get("term_vectors", True)) if exists else None
    if not (exists and engine.count(index) == expected and (vector is None or held == vector.to_meta())
            and stored == (not run(similarity_on_every_node_plan(engine), engine)) and meta.get("id_values")):
        engine.delete_index(index)
        ingest(engine, index, read_jsonl(corpus), progress=True, strict=True, vector=vector)
    return index, expected


def settle_vector_index(engine: Engine, index: str, timeout: float = 300.0) -> None:
    """Flush ``index`` and merge it to one segment once its vectors are filled, as an index built
    once and then searched would be.

    The vectors are written by updates after indexing, and with them left out of ``_source`` the
    engine keeps a copy of each updated document's whole source for recovery (``_recovery_source``),
    vectors included, in the blocks every hit's ``_id`` is read from.  A merge drops that copy only
    once every retention lease has moved past the updates (the engine renews them in the
    background; waited for here, at most ``timeout`` seconds) and a commit holds them (the flush).
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        shards = engine.request("GET", f"/{index}/_stats", params={"level": "shards"})["indices"][index]["shards"]
        if all(int(lease["retaining_seq_no"]) > int(copy["seq_no"]["max_seq_no"])
               for copies in shards.values() for copy in copies
               for lease in (copy.get("retention_leases") or {}).get("leases", [])):
            break
        time.sleep(2.0)
    engine.request("POST", f"/{index}/_flush")
    engine.request("POST", f"/{index}/_forcemerge", params={"max_num_segments": 1})


def bulk_load(engine: Engine, index: str, docs: Iterable[dict[str, Any]],
              source: Callable[[dict[str, Any]], dict[str, Any]], *, batch: int = 500) -> int:
    """Index ``docs`` into the existing ``index`` with plain ``_bulk`` requests of ``batch``
    documents, each document's ``_source`` being ``source(doc)`` and its id ``doc["_id"]``; refresh;
    return how many were sent.  Raises when the engine reports an error for any document or holds
    a different number of documents afterwards, so a benchmark never times a partial load."""
    sent = 0
    lines: list[dict[str, Any]] = []

    def flush() -> None:
        if lines:
            resp = engine.request("POST", "/_bulk", body=ndjson_lines(lines), ndjson=True)
            if resp.get("errors"):
                items: list[dict[str, Any]] = resp.get("items") or []
                bad = next((item for item in items if any("error" in v for v in item.values())), {})
                raise RuntimeError(f"bulk indexing into {index!r} failed: {json.dumps(bad)[:500]}")
            lines.clear()

    for d in docs:
        lines += [{"index": {"_index": index, "_id": str(d["_id"])}}, source(d)]
        sent += 1
        if len(lines) >= 2 * batch:
            flush()
    flush()
    engine.refresh(index)
    count = engine.count(index)
    if count != sent:
        raise RuntimeError(f"{index!r} holds {count} documents after indexing {sent}")
    return sent


def write_report(text: str, dest: Path) -> None:
    """Print the markdown report and write it to ``dest``."""
    print(text)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(text + "\n", encoding="utf-8")


def weaken(vi: Any, alone: Callable[[], float], target: float, grid: Sequence[float],
           report: Callable[[float, float], None] | None = None) -> tuple[float, float]:
    """Gaussian noise (seeded) on a vector index's document vectors, normalised again, its standard
    deviation the first of ``grid`` at which ``alone()`` (the list alone, nDCG@10 on the tuning part)
    is at ``target`` or below, or the one closest to it; the vectors are left weakened with it.
    ``report(sigma, nDCG@10)`` hears every try.  Returns ``(sigma, nDCG@10)``."""
    orig = np.array(vi.vectors, dtype=np.float32)
    noise = np.random.default_rng(0).standard_normal(orig.shape).astype(np.float32)
    best: tuple[float, float] | None = None
    for sigma in grid:
        noisy = orig + sigma * noise
        vi.vectors = noisy / np.maximum(np.linalg.norm(noisy, axis=1, keepdims=True), 1e-12)
        nd = alone()
        if report is not None:
            report(sigma, nd)
        if best is None or abs(nd - target) < abs(best[1] - target):
            best = (sigma, nd)
        if nd < target:
            break
    assert best is not None
    noisy = orig + best[0] * noise
    vi.vectors = noisy / np.maximum(np.linalg.norm(noisy, axis=1, keepdims=True), 1e-12)
    return best


def engine_hybrid(engine: Engine, index: str, vectors: Any, first_stage: Callable[[str], dict[str, Any]],
                  q: str, depth: int) -> list[str]:
    """The engine's own hybrid for ``q``: the query embedded, the engine's BM25 and kNN top ``depth`` in one
    ``_msearch``, min-max normalised, averaged; the top 10."""
    qv = vectors.embed_query(q)
    lines = [{}, {**first_stage(q), "size": depth, "_source": False}, {},
             {"size": depth, "_source": False, "query": vectors.knn_query(qv, depth)}]
    resp = engine.request("POST", f"/{index}/_msearch", body=ndjson_lines(lines), ndjson=True)
    fused: dict[str, float] = {}
    for answer in resp["responses"]:
        hits = answer["hits"]["hits"]
        if not hits:
            continue
        top, low = float(hits[0]["_score"]), float(hits[-1]["_score"])
        for h in hits:
            norm = (float(h["_score"]) - low) / (top - low) if top > low else 1.0
            fused[h["_id"]] = fused.get(h["_id"], 0.0) + norm / 2
    return sorted(fused, key=lambda d: -fused[d])[:10]
