"""Where the engine's own time goes when it returns a window of hits: the query, or the hits.

The same BM25 ``match`` query on esbridge's base channel, at each window, returned five ways,
interleaved query by query: with each hit's ``_source``; without it (``_source: false``, each
hit's ``_id`` still read); with no stored field at all (``stored_fields: _none_``: no ``_id``,
the hits' ``_seq_no`` from doc values); with no stored field and each hit's ``_id`` from the doc
values every index esbridge creates keeps the ids in (``esbridge_id``), as esbridge's first stage
asks; and its ``count`` of matches alone (no hits).  An engine reads a hit's ``_id`` from the same
compressed stored-field blocks as its ``_source``, so the difference between the second and third
rows is what identifying the hits that way costs.

With ``--vectors``, the same rows for the collection's index with passage vectors in the engine
(``bench-<collection>-knn``, as ``esbridge index --vectors engine`` creates it: the vectors left out
of ``_source``), filled, flushed and merged once, beside the index without them, same queries, same
run.  Needs an engine with vector search (``elasticsearch8``).

Usage (one command; starts esbridge's local node when no --url is given; ``DATA`` is the folder
that holds the BEIR-layout collections):

    python benchmarks/bench_fetch.py --dataset DATA/scifact --distribution opensearch

Results go to ``benchmarks/results/fetch-<distribution>.md``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from esbridge.engine.client import Engine
from esbridge.index import VectorField, read_layout
from esbridge.index.definitions import ID_VALUES

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import (  # noqa: E402
    bench_index,
    connect_engine,
    engine_arguments,
    judged_collection,
    machine,
    ms,
    settle_vector_index,
    write_report,
)

#: How the hits come back: the label, and what the search body adds.
WAYS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("`_source` (the engine's BM25 as the other benchmarks time it)", {}),
    ("`_source: false` (each hit's `_id` read)", {"_source": False}),
    ("`stored_fields: _none_` (no `_id`; `_seq_no` from doc values)",
     {"stored_fields": "_none_", "seq_no_primary_term": True}),
    (f"`stored_fields: _none_`, `_id` from the doc values of `{ID_VALUES}` (esbridge's first stage)",
     {"stored_fields": "_none_", "docvalue_fields": [ID_VALUES], "seq_no_primary_term": True}),
)


def time_ways(engine: Engine, index: str, what: str, field: str, window: int, queries: list[str]) -> list[str]:
    """The table's rows for one index and window: each of :data:`WAYS`, interleaved query by query
    (every other query in reverse order), then the query's ``_count``."""
    for q in queries[:50]:  # untimed: compilation and the file cache favour no row
        for _, extra in WAYS:
            engine.search(index, {"size": window, "query": {"match": {field: q}}, **extra})
    wall: list[list[float]] = [[] for _ in WAYS]
    took: list[list[float]] = [[] for _ in WAYS]
    counts: list[float] = []
    for i, q in enumerate(queries):
        order = list(range(len(WAYS)))
        if i % 2:
            order.reverse()
        for k in order:
            body = {"size": window, "query": {"match": {field: q}}, **WAYS[k][1]}
            t0 = time.perf_counter()
            resp = engine.search(index, body)
            wall[k].append(time.perf_counter() - t0)
            took[k].append(float(resp["took"]) / 1000.0)
        t0 = time.perf_counter()
        engine.count(index, {"match": {field: q}})
        counts.append(time.perf_counter() - t0)
    first = ms(wall[0], 50)
    rows = [f"| {what} | {window} | {label} | {ms(w, 50):.1f} / {ms(w, 95):.1f} | {ms(t, 50):.0f} | "
            f"{ms(w, 50) / first:.2f}x |" for (label, _), w, t in zip(WAYS, wall, took, strict=True)]
    rows.append(f"| {what} | {window} | none: `_count` of the same query | {ms(counts, 50):.1f} / "
                f"{ms(counts, 95):.1f} | | {ms(counts, 50) / first:.2f}x |")
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", required=True, help="BEIR-layout folder")
    engine_arguments(ap)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--windows", default="100,1000", help="windows, comma-separated (default 100,1000)")
    ap.add_argument("--vectors", action="store_true",
                    help="also time the index with passage vectors in the engine (bench-<collection>-knn)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    engine = connect_engine(args)
    folder, queries, index, expected = judged_collection(engine, args.dataset, args.queries)
    layout = read_layout(engine, index)
    assert layout is not None
    field = layout.subfield(layout.combined, "base")
    windows = [int(w) for w in args.windows.split(",") if w.strip()]
    indices = [(index, "without vectors")]
    if args.vectors:
        from esbridge.semantic.engine_vectors import open_vectors
        from esbridge.semantic.models import load_encoder

        kind = engine.vector_search()
        if kind is None:
            ap.error(f"--vectors: {engine.info.label} has no vector search (use --distribution elasticsearch8)")
        encoder = load_encoder()
        knn, _ = bench_index(engine, folder / "corpus.jsonl",
                             VectorField(encoder.dim, encoder.name, passages=encoder.passage_tokens, type=kind))
        open_vectors(engine, knn, encoder, fields=layout.fields, progress=True)
        settle_vector_index(engine, knn)
        indices.append((knn, f"passage vectors in the engine ({encoder.name}, left out of `_source`)"))
    lines = [f"# Returning a window of hits: {engine.info.label}", "",
             f"Machine: {machine()}. Engine: {engine.info.label} (local node, same machine). Collection: "
             f"{folder.resolve().name} ({expected} documents, {len(queries)} judged queries), the `match` query on "
             f"`{field}`; p50 / p95 of the client's wall time, and p50 of the engine's `took`."
             + (" The index with vectors was flushed and merged to one segment after they were filled." if
                args.vectors else ""), "",
             f"Command: `python benchmarks/bench_fetch.py --dataset <path to {folder.resolve().name}> "
             f"--distribution {args.distribution}{' --vectors' if args.vectors else ''}`", "",
             "| index | window | hits returned with | ms p50 / p95 | engine `took` p50 | p50 / the first row |",
             "|---|---:|---|---:|---:|---:|"]
    for window in windows:
        for where, what in indices:
            lines += time_ways(engine, where, what, field, window, queries)
    write_report("\n".join(lines),
                 Path(args.out) if args.out else HERE / "results" / f"fetch-{args.distribution}.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
