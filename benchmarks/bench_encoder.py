"""Embedding throughput of the shipped models (and of the numpy encoder they replaced), and the
encoder's forward-pass limits against its former batching.

On the first ``--docs`` documents of the shipped SciFact sample (title and abstract), each
encoder embeds, with no cache:

- documents: each whole document up to the model's maximum (256 word pieces for
  all-MiniLM-L6-v2, 512 for bge-small-en-v1.5 and e5-small-v2), one vector a document;
- passages: each document's windows of 64 word pieces overlapping by half (what the semantic
  index embeds by default).

The encoders: the numpy forward pass of all-MiniLM-L6-v2 (esbridge's before onnxruntime, read
from the git history at ``--numpy-commit`` with its PyPI-wheel model; skipped when git or the
commit is not at hand), and onnxruntime with all-minilm-l6-v2 (fp32), all-minilm-l6-v2-q,
bge-small-en-v1.5-q and e5-small-v2-q (int8; the last three are the ``ensemble`` preset's whole-document
models).  Each is timed ``--repeat`` times, the best run kept, in one process
on one machine.

Then the forward passes: the three int8 models embed the same documents and passages with each
limit of :data:`BATCHINGS` in turn (at most so many texts, and so many word pieces padding
included, per pass; the first is the encoder's former 16 texts a pass, whatever their length),
each row's speed also as a ratio to that former batching; the encoder's defaults
(``esbridge.semantic.encoder.BATCH_SIZE``, ``BATCH_TOKENS``) are one of them.

Usage (one command, from the repository's root):

    python benchmarks/bench_encoder.py

Results are printed as markdown and written to ``benchmarks/results/encoder.md``.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from esbridge.semantic.encoder import BATCH_SIZE, BATCH_TOKENS
from esbridge.semantic.models import load_encoder
from esbridge.semantic.text import document_text

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "esbridge" / "resources" / "demo" / "scifact-sample" / "corpus.jsonl.gz"
#: (texts, word pieces) per forward pass timed by the second table; the first is the former batching
BATCHINGS: tuple[tuple[int, int | None], ...] = ((16, None), (32, 512), (32, 1024), (32, 2048), (64, 2048))
#: the models of the second table
BATCHING_MODELS = ("all-minilm-l6-v2-q", "bge-small-en-v1.5-q", "e5-small-v2-q")
#: the last commit with the numpy encoder (esbridge/semantic/encoder.py) and its PyPI-wheel model
NUMPY_COMMIT = "b5f9ba7"


def machine() -> str:
    """CPU model and core count (from /proc/cpuinfo where there is one)."""
    model, cores = platform.processor() or platform.machine(), os.cpu_count() or 1
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model}, {cores} logical cores visible to the process"


def _module(name: str, source: str, folder: Path) -> ModuleType:
    path = folder / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def numpy_encoder(commit: str, folder: Path) -> Any:
    """The numpy encoder of ``commit``, on its verified all-MiniLM-L6-v2 weights."""
    def show(path: str) -> str:
        return subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:{path}"], check=True,
                              capture_output=True, text=True).stdout

    enc = _module("numpy_encoder", show("esbridge/semantic/encoder.py"), folder)
    models = _module("numpy_models", show("esbridge/semantic/models.py"), folder)
    return enc.SentenceEncoder(models.model_dir("all-MiniLM-L6-v2"), name="numpy all-MiniLM-L6-v2")


def timed(fn: Any, repeat: int) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def limit(batching: tuple[int, int | None]) -> str:
    texts, pieces = batching
    return f"{texts} texts" + (f", {pieces} word pieces" if pieces else " (any length)")


def batching_rows(texts: list[str], repeat: int) -> list[tuple[str, str, list[float]]]:
    """``(model, what, speed under each of BATCHINGS)``: documents/s whole, passages/s."""
    rows = []
    for name in BATCHING_MODELS:
        enc = load_encoder(name)
        whole = enc.tokenize(texts)
        windows = [w for ws in enc.windows(texts) for w in ws]
        enc.encode_ids(whole[:16])  # warm-up
        for what, items in (("documents/s, whole", whole), ("passages/s, 64 word pieces", windows)):
            speeds = []
            for size, pieces in BATCHINGS:
                enc.batch_size, enc.batch_tokens = size, pieces or 1 << 30
                t, _ = timed(lambda enc=enc, items=items: enc.encode_ids(items), repeat)
                speeds.append(len(items) / t)
            print(f"{name} {what}: " + ", ".join(f"{v:.1f}" for v in speeds), file=sys.stderr)
            rows.append((name, what, speeds))
    return rows


def batching_table(rows: list[tuple[str, str, list[float]]]) -> list[str]:
    head = " | ".join(limit(b) + (" (former)" if j == 0 else "") for j, b in enumerate(BATCHINGS))
    out = ["Texts and word pieces per forward pass (speed, and its ratio to the former batching):", "",
           f"| model | speed | {head} |", "|---|---|" + "---:|" * len(BATCHINGS)]
    for name, what, v in rows:
        out.append(f"| {name} | {what} | " + " | ".join(
            f"{x:.1f}" + ("" if j == 0 else f" ({x / v[0]:.2f}x)") for j, x in enumerate(v)) + " |")
    if (BATCH_SIZE, BATCH_TOKENS) in BATCHINGS:
        j = BATCHINGS.index((BATCH_SIZE, BATCH_TOKENS))
        spans = []
        for what in dict.fromkeys(w for _, w, _ in rows):
            ratios = [v[j] / v[0] for _, w, v in rows if w == what]
            spans.append(f"{min(ratios):.2f}x–{max(ratios):.2f}x in {what.split(',')[0]}")
        out += ["", f"The encoder's defaults ({limit(BATCHINGS[j])} per pass) against the former batching: "
                + ", ".join(spans) + "."]
    return [*out, ""]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=300, help="documents of the SciFact sample (default 300)")
    ap.add_argument("--repeat", type=int, default=1, help="runs per measurement, the best kept (default 1)")
    ap.add_argument("--numpy-commit", default=NUMPY_COMMIT, help=f"the numpy encoder's commit (default {NUMPY_COMMIT})")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "encoder.md")
    args = ap.parse_args()
    with gzip.open(CORPUS, "rt", encoding="utf-8") as f:
        texts = [document_text(json.loads(line), ("title", "text")) for line in f][:args.docs]
    encoders: list[tuple[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            encoders.append(("numpy (replaced), all-MiniLM-L6-v2 fp32", numpy_encoder(args.numpy_commit, Path(tmp))))
        except (subprocess.CalledProcessError, OSError, ImportError) as err:  # the old code no longer loads
            print(f"numpy encoder skipped: {err}", file=sys.stderr)
        for name in ("all-minilm-l6-v2", "all-minilm-l6-v2-q", "bge-small-en-v1.5-q", "e5-small-v2-q"):
            encoders.append((f"onnxruntime, {name}", load_encoder(name)))
        rows = []
        reference: np.ndarray | None = None
        for label, enc in encoders:
            enc.encode(texts[:16])  # warm-up
            windows = [w for ws in enc.windows(texts) for w in ws]
            t_docs, vecs = timed(lambda enc=enc: enc.encode(texts), args.repeat)
            t_pass, _ = timed(lambda enc=enc, windows=windows: enc.encode_ids(windows), args.repeat)
            diff = ""
            if "all-MiniLM-L6-v2 fp32" in label:
                reference = vecs
            elif reference is not None and label.endswith("all-minilm-l6-v2"):
                diff = f"{float(np.abs(vecs - reference).max()):.1e}"
            rows.append((label, len(texts) / t_docs, len(windows), len(windows) / t_pass, diff))
            print(f"{label}: {len(texts) / t_docs:.1f} docs/s, {len(windows) / t_pass:.1f} passages/s", file=sys.stderr)
        batching = batching_rows(texts, args.repeat)
    import onnxruntime

    with_numpy = any(label.startswith("numpy") for label, *_ in rows)
    options = "".join(f" --{k} {v}" for k, v, default in (("docs", args.docs, 300), ("repeat", args.repeat, 1))
                      if v != default)
    lines = [
        "# Embedding throughput" + (": onnxruntime against the numpy encoder it replaced" if with_numpy else ""),
        "",
        f"Machine: {machine()}; Python {platform.python_version()}, numpy {np.__version__}, "
        f"onnxruntime {onnxruntime.__version__} (CPU execution provider); load average at the end "
        f"{os.getloadavg()[0]:.1f} (other work on the machine slows every row).",
        f"Data: the first {len(texts)} documents of the shipped SciFact sample (title and abstract). "
        f"Best of {args.repeat} runs each, one process. Command: `python benchmarks/bench_encoder.py{options}`."
        + ("" if with_numpy else " The numpy encoder esbridge used before no longer loads from the git history "
           "(it imports modules esbridge has since moved or no longer installs): left out."),
        "",
        "| encoder | documents/s (whole, up to the model's maximum) | passages | passages/s (64 word pieces) "
        "| max abs diff from numpy |",
        "|---|---:|---:|---:|---:|",
        *(f"| {label} | {d:.1f} | {n} | {p:.1f} | {diff} |" for label, d, n, p, diff in rows),
        "",
        f"The rows above embed with the encoder's defaults: at most {BATCH_SIZE} texts and {BATCH_TOKENS} word "
        "pieces (padding included) per forward pass.",
        "",
        *batching_table(batching),
    ]
    args.out.write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
