"""Embedding throughput at ingest, by batch size and threads: what the encoder's defaults should be.

On the first ``--docs`` documents of the shipped SciFact sample (title and abstract), each of the three
models esbridge ships embeds, with no cache:

- whole documents, each up to the model's maximum (one vector a document: the whole-document lists and
  the ensemble);
- passages, each document's windows of 64 word pieces overlapping by half (the semantic index).

Batching: a number of texts a batch (texts sorted by length, as the encoder sorts them; 16 is the
default); threads: onnxruntime's intra-op threads (the machine's cores, the default, and one for the
shipped model).  The settings take turns, ``--rounds`` rounds in one process; the median round is
reported, with the slowest and fastest beside it (the machine's speed varies from run to run).

Usage (one command, from the repository's root):

    python benchmarks/bench_ingest.py

Writes ``benchmarks/results/ingest.md``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import machine, write_report  # noqa: E402

from esbridge.semantic.models import load_encoder  # noqa: E402
from esbridge.semantic.text import document_text  # noqa: E402

CORPUS = HERE.parent / "esbridge" / "resources" / "demo" / "scifact-sample" / "corpus.jsonl.gz"
MODELS = ("bge-small-en-v1.5-q", "e5-small-v2-q", "all-minilm-l6-v2-q")
FIXED = (4, 8, 16, 32)


def rate(enc: Any, ids: list[list[int]]) -> float:
    """Texts a second, one run."""
    t = time.perf_counter()
    enc.encode_ids(ids)
    return len(ids) / (time.perf_counter() - t)


def spread(values: list[float]) -> str:
    v = sorted(values)
    return f"{v[len(v) // 2]:.1f} ({v[0]:.1f}–{v[-1]:.1f})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=60, help="documents of the SciFact sample (default 60)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of every setting, taking turns (default 3)")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "ingest.md")
    args = ap.parse_args()
    with gzip.open(CORPUS, "rt", encoding="utf-8") as f:
        texts = [document_text(json.loads(line), ("title", "text")) for line in f][:args.docs]
    cores = os.cpu_count() or 1
    rows: list[str] = []
    mean_len, passages = 0.0, 0
    for model in MODELS:
        base = load_encoder(model)
        whole = base.tokenize(texts)
        windows = [w for ws in base.windows(texts) for w in ws]
        if model == MODELS[0]:
            mean_len, passages = sum(len(r) for r in whole) / len(whole), len(windows)
        runs = [(cores, b) for b in FIXED]
        if model == MODELS[0] and cores > 1:
            runs.append((1, 16))  # the threads compared on the shipped model alone
        encoders = {run: load_encoder(model, threads=run[0], batch_size=run[1]) for run in runs}
        got: dict[tuple[int, int], tuple[list[float], list[float]]] = {run: ([], []) for run in runs}
        for enc in encoders.values():
            enc.encode_ids(whole[:8])  # warm-up
        for _ in range(args.rounds):
            for run, enc in encoders.items():
                got[run][0].append(rate(enc, whole))
                got[run][1].append(rate(enc, windows))
        for (threads, batch), (w, p) in got.items():
            rows.append(f"| {model} | {threads} | {batch}{' (default)' if batch == 16 and threads == cores else ''} "
                        f"| {spread(w)} | {spread(p)} |")
            print(rows[-1], file=sys.stderr, flush=True)
    lines = ["# Embedding throughput at ingest, by batch size and threads", "",
             f"Machine: {machine()}. onnxruntime, CPU execution provider; load average (1 min) at the end "
             f"{os.getloadavg()[0]:.1f} on {cores} cores.", "",
             f"Data: the first {len(texts)} documents of the shipped SciFact sample (title and abstract; "
             f"{mean_len:.0f} word pieces on average with bge-small-en-v1.5's tokenizer, whole documents cut at the "
             f"model's maximum); {passages} passages of 64 word pieces (bge-small-en-v1.5). {args.rounds} rounds, "
             "the settings taking turns; the median round, the slowest and fastest in brackets. Command: "
             "`python benchmarks/bench_ingest.py`.", "",
             "| model | threads | texts a batch | whole documents/s | passages/s |", "|---|---:|---|---:|---:|", *rows]
    write_report("\n".join(lines), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
