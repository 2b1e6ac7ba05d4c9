"""What the benchmarks share: the machine's description and percentiles in milliseconds."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from esbridge.engine.client import Engine
from esbridge.index import VectorField
from esbridge.ingest import ingest, read_jsonl


def engine_arguments(ap: argparse.ArgumentParser) -> None:
    """``--distribution`` and ``--url``: which engine a benchmark runs against."""
    ap.add_argument("--distribution", default="opensearch", choices=["opensearch", "elasticsearch"])
    ap.add_argument("--url", help="engine URL (default: esbridge's local node)")


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
    """``bench-<collection>`` holding ``corpus`` (indexed only when its document count differs);
    with ``vector``, ``bench-<collection>-knn`` with that vector field."""
    index = f"bench-{corpus.parent.resolve().name}" + ("-knn" if vector is not None else "")
    expected = sum(1 for line in open(corpus) if line.strip())
    if not (engine.index_exists(index) and engine.count(index) == expected):
        engine.delete_index(index)
        ingest(engine, index, read_jsonl(corpus), progress=True, strict=True, vector=vector)
    return index, expected


def write_report(text: str, dest: Path) -> None:
    """Print the markdown report and write it to ``dest``."""
    print(text)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(text + "\n", encoding="utf-8")
