"""The semantic strategy alone at several passage lengths and their combinations.

For every collection, each document (title and text) is cut into passages of each length in
``--lengths`` (:meth:`esbridge.semantic.encoder.SentenceEncoder.windows`) and embedded once (the
embedding cache under ``$ESBRIDGE_HOME`` keeps them). A document's score is the cosine of its best
passage at one length, or for a combination the mean of those over its lengths, which is what
:class:`esbridge.semantic.vectors.VectorIndex` computes for an encoder with several lengths. Every
document is scored (exact search); nDCG@10 on the tuning part (SciFact: its training judgments; the
others: the fixed half ``test:tune``) and on the test judgments. The rule that chooses the lengths
is the pipeline's: the largest worst-case gain over the first length on the tuning parts, the mean
breaking ties. No engine is needed.

Usage (one command; ``DATA`` is the folder that holds the BEIR-layout collections):

    python benchmarks/bench_passages.py --data DATA [--model bge-small-en-v1.5-q] [--lengths 64,128,256]

Writes ``benchmarks/results/passages.md``.
"""

from __future__ import annotations

import argparse
import itertools
import platform
import sys
from pathlib import Path

import numpy as np

from esbridge.evaluation.datasets import SplitSpec, load_dataset
from esbridge.evaluation.metrics import mean_metrics, per_query_metrics
from esbridge.ingest import read_jsonl
from esbridge.semantic.cache import EmbeddingCache
from esbridge.semantic.models import load_encoder
from esbridge.semantic.text import document_text
from esbridge.semantic.vectors import document_scores, level_starts

HERE = Path(__file__).resolve().parent
COLLECTIONS = ("scifact", "nfcorpus", "cranfield", "cisi", "med")


def documents(path: Path) -> tuple[list[str], list[str]]:
    """The collection's ids and texts (title and text), as esbridge indexes and embeds them."""
    ids, texts = [], []
    for doc in read_jsonl(path):
        if doc.error is not None or doc.doc_id is None or doc.source is None:
            raise SystemExit(f"{path}, line {doc.line}: {doc.error or 'no document'}")
        ids.append(doc.doc_id)
        texts.append(document_text(doc.source, ("title", "text")))
    return ids, texts


def ndcg(qrels: dict[str, dict[str, int]], qids: list[str], ids: list[str], scores: np.ndarray) -> float:
    """nDCG@10 of the rankings ``scores`` (one row per query of ``qids``, one column per document)."""
    top = np.argsort(-scores, axis=1, kind="stable")[:, :100]
    runs = {q: [ids[j] for j in top[i]] for i, q in enumerate(qids)}
    return mean_metrics(per_query_metrics(qrels, {q: runs.get(q, []) for q in qrels}))["ndcg@10"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="folder holding the BEIR-layout collections")
    ap.add_argument("--collections", default=",".join(COLLECTIONS))
    ap.add_argument("--model", default="bge-small-en-v1.5-q")
    ap.add_argument("--lengths", default="64,128,256", help="passage lengths, comma-separated (the first is "
                    "the reference)")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "passages.md")
    args = ap.parse_args()
    lengths = [int(x) for x in args.lengths.split(",")]
    combos = [c for r in range(1, len(lengths) + 1) for c in itertools.combinations(lengths, r)]
    encoders = {n: load_encoder(args.model, passage_tokens=n) for n in lengths}
    names = [c.strip() for c in args.collections.split(",") if c.strip()]
    table: dict[tuple[int, ...], dict[str, dict[str, float]]] = {c: {} for c in combos}
    counts: dict[str, dict[int, int]] = {}
    for name in names:
        ds = load_dataset(Path(args.data) / name, progress=False)
        ids, texts = documents(ds.corpus_path)
        parts = {"tune": SplitSpec("train") if "train" in ds.splits() else SplitSpec.parse("test:tune"),
                 "test": SplitSpec("test")}
        vectors = {n: EmbeddingCache.for_encoder(enc).embed_windows(texts, enc) for n, enc in encoders.items()}
        counts[name] = {n: len(v) for n, (v, _) in vectors.items()}
        print(f"{name}: {counts[name]} passages", file=sys.stderr, flush=True)
        for part, split in parts.items():
            queries = ds.queries(split)
            qv = encoders[lengths[0]].encode_queries([q.text for q in queries])
            sims = {n: qv @ v.T for n, (v, _) in vectors.items()}
            qrels = ds.qrels(split)
            for combo in combos:
                # what VectorIndex computes for an encoder with these lengths
                scores = document_scores(np.concatenate([sims[n] for n in combo], axis=1),
                                         level_starts([vectors[n][1] for n in combo]), len(ids))
                table[combo].setdefault(name, {})[part] = ndcg(qrels, [q.id for q in queries], ids, scores)
    ref = (lengths[0],)
    default_out = HERE / "results" / "passages.md"
    out_arg = "" if args.out.resolve() == default_out else f" --out benchmarks/results/{args.out.name}"
    lines = ["# Semantic search alone: passage lengths", "",
             f"Command: `python benchmarks/bench_passages.py --data <folder of the collections> --model {args.model} "
             f"--lengths {args.lengths}{out_arg}`. Machine: {platform.machine()}, {platform.system()}, Python "
             f"{platform.python_version()}. nDCG@10 of the semantic search alone (exact cosine over every "
             "document); a document scores its best passage's cosine, with several lengths the mean of those. "
             "Tuning parts: SciFact's training judgments, the others' fixed half `test:tune`. Gains in points "
             f"over passages of {lengths[0]}, on the tuning parts.", "",
             "| passages of | " + " | ".join(f"{n} tune" for n in names) + " | worst / mean gain | "
             + " | ".join(f"{n} test" for n in names) + " |",
             "|---|" + "---:|" * len(names) + "---|" + "---:|" * len(names)]
    rows = []
    for combo in combos:
        gains = [100 * (table[combo][n]["tune"] - table[ref][n]["tune"]) for n in names]
        rows.append((combo, min(gains), float(np.mean(gains))))
        cells = " | ".join(f"{table[combo][n]['tune']:.4f}" for n in names)
        tests = " | ".join(f"{table[combo][n]['test']:.4f}" for n in names)
        gain = "" if combo == ref else f"{min(gains):+.2f} / {float(np.mean(gains)):+.2f}"
        lines.append(f"| {' and '.join(map(str, combo))} | {cells} | {gain} | {tests} |")
    chosen = max(rows, key=lambda r: (r[1], r[2]))[0]
    lines += ["", f"Best worst case on the tuning parts: passages of {' and '.join(map(str, chosen))}.", "",
              "Passages per collection:", "",
              "| collection | " + " | ".join(f"passages of {n}" for n in lengths) + " |",
              "|---|" + "---:|" * len(lengths)]
    for name in names:
        lines.append(f"| {name} | " + " | ".join(f"{counts[name][n]:,}" for n in lengths) + " |")
    args.out.write_text("\n".join(lines) + "\n")
    print(args.out.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
