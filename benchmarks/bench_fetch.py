"""Where the engine's own time goes when it returns a window of hits: the query, or the hits.

The same BM25 ``match`` query on esbridge's base channel, at each window, returned four ways,
interleaved query by query: with each hit's ``_source``; without it (``_source: false``, each
hit's ``_id`` still read); with no stored field at all (``stored_fields: _none_``: no ``_id``,
the hits' ``_seq_no`` from doc values); and its ``count`` of matches alone (no hits).  An
engine reads a hit's ``_id`` from the same compressed stored-field blocks as its ``_source``, so
the difference between the second and third rows is what identifying the hits costs.

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

from esbridge.index import read_layout

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import connect_engine, engine_arguments, judged_collection, machine, ms, write_report  # noqa: E402

#: How the hits come back: the label, and what the search body adds.
WAYS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("`_source` (the engine's BM25 as the other benchmarks time it)", {}),
    ("`_source: false` (each hit's `_id` read)", {"_source": False}),
    ("`stored_fields: _none_` (no `_id`; `_seq_no` from doc values)",
     {"stored_fields": "_none_", "seq_no_primary_term": True}),
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", required=True, help="BEIR-layout folder")
    engine_arguments(ap)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--windows", default="100,1000", help="windows, comma-separated (default 100,1000)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    engine = connect_engine(args)
    folder, queries, index, expected = judged_collection(engine, args.dataset, args.queries)
    layout = read_layout(engine, index)
    assert layout is not None
    field = layout.subfield(layout.combined, "base")
    windows = [int(w) for w in args.windows.split(",") if w.strip()]
    lines = [f"# Returning a window of hits: {engine.info.label}", "",
             f"Machine: {machine()}. Engine: {engine.info.label} (local node, same machine). Collection: "
             f"{folder.resolve().name} ({expected} documents, {len(queries)} judged queries), the `match` query on "
             f"`{field}`; p50 / p95 of the client's wall time, and p50 of the engine's `took`.", "",
             f"Command: `python benchmarks/bench_fetch.py --dataset <path to {folder.resolve().name}> "
             f"--distribution {args.distribution}`", "",
             "| window | hits returned with | ms p50 / p95 | engine `took` p50 | p50 / the first row |",
             "|---:|---|---:|---:|---:|"]
    for window in windows:
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
        for (label, _), w, t in zip(WAYS, wall, took, strict=True):
            lines.append(f"| {window} | {label} | {ms(w, 50):.1f} / {ms(w, 95):.1f} | {ms(t, 50):.0f} | "
                         f"{ms(w, 50) / first:.2f}x |")
        lines.append(f"| {window} | none: `_count` of the same query | {ms(counts, 50):.1f} / {ms(counts, 95):.1f} "
                     f"| | {ms(counts, 50) / first:.2f}x |")
    write_report("\n".join(lines),
                 Path(args.out) if args.out else HERE / "results" / f"fetch-{args.distribution}.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
