"""The ensemble's cost against its quality: cheaper sets of lists than the ``ensemble`` preset, measured
the way ``engine_hybrid_levers.py`` measures levers, each with the embedding it adds per document.

The ``ensemble`` preset (the pipeline's passages, the shipped model's whole documents, and e5-small-v2
and all-MiniLM-L6-v2 whole documents, each whole-document list run a second time from the fused top 3)
is the one configuration measured to beat the engines' own hybrid by 2 points on average; it embeds
every document three more times than the shipped default. This benchmark asks whether something
cheaper keeps its quality. Families (each list weighted as in the pipeline: a multiple of the
semantic strategy's calibrated weight; the other models' lists times the calibrated factor of
sharpness 4, :func:`esbridge.hybrid.pipeline.ensemble_factor`):

* ``preset``: the ``ensemble`` preset, for reference;
* ``no passages``: the three whole-document lists without the passages' semantic strategy (its
  weight 0), the shipped model's whole documents weighted ``d``, the others ``o``; with the
  second pass;
* ``passage mean``: the shipped model's whole-document vector replaced by the mean of its passage
  vectors (no embedding beyond the passages), the others as in the preset; with the second pass (the
  mean vectors' own second pass, exact); its known-item effectiveness taken as the whole-document
  list's, which only scales the other models' factor;
* ``no own whole documents``: the passages and the other two models, the shipped model's
  whole-document list left out;
* ``own + MiniLM``: the passages, the shipped model's whole documents (``d``) and MiniLM's (``o``),
  e5 left out, with and without the second pass (``k × b``).

Every figure comes from the per-query lists ``engine_hybrid_levers.py`` keeps under
``$ESBRIDGE_HOME/levers/`` (run it first) and the whole-document vectors on disk; nothing is tuned on
test judgments: the table's order and the leave-one-collection-out choice use the tuning parts only
(SciFact's training judgments, the others' ``test:tune`` half).

Usage (one command; the evaluation indices must be those the levers benchmark used):

    python benchmarks/ensemble_frontier.py --data DATA --url URL

Writes ``benchmarks/results/ensemble-frontier.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from esbridge.evaluation.datasets import load_dataset
from esbridge.evaluation.indexing import PYSERINI_BM25, index_name
from esbridge.evaluation.metrics import per_query_metrics
from esbridge.home import cache_dir
from esbridge.hybrid import PipelineParams, RankedList
from esbridge.hybrid.fusion import Fusion, fuse
from esbridge.hybrid.pipeline import ensemble_factor

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import engine_hybrid_levers as levers  # noqa: E402
from common import connect_engine, engine_arguments, machine  # noqa: E402

E5, MINI = (f"document {m}" for m in levers.OTHER_MODELS)
#: the passages' mean vectors as a whole-document list (``feedback_fuse`` runs a second pass of each ``document…``)
MEAN = "document passage mean"
#: whole-document embeddings each family adds per document beyond the shipped default's passages
EXTRA = {"preset": "own, e5, MiniLM", "no passages": "own, e5, MiniLM (no passages)",
         "passage mean": "e5, MiniLM", "no own whole documents": "e5, MiniLM", "own + MiniLM": "own, MiniLM"}


class MeanVectors:
    """Each document's passage vectors averaged (:func:`engine_hybrid_levers.passage_means`), searched
    exactly, with the two calls the second pass makes."""

    def __init__(self, ids: list[str], vectors: np.ndarray) -> None:
        self.ids, self.vectors = ids, vectors
        self.row = {d: i for i, d in enumerate(ids)}

    def search(self, query: np.ndarray, k: int) -> RankedList:
        sims = self.vectors @ query
        top = np.argsort(-sims, kind="stable")[:k]
        return RankedList([self.ids[i] for i in top], sims[top].astype(np.float64))

    def vectors_of(self, ids: list[str]) -> np.ndarray:
        return self.vectors[[self.row[d] for d in ids]]


def variants(w0: Mapping[str, float], eff: Mapping[str, float]) -> dict[str, tuple[str, dict[str, float], int, float]]:
    """Name -> (family, weights, feedback documents, beta)."""
    s = w0["semantic"]

    def weights(semantic: float, own: str | None, d: float, others: dict[str, float]) -> dict[str, float]:
        w = {"lexical": w0["lexical"], "keyword": w0["keyword"]}
        if semantic:
            w["semantic"] = semantic * s
        if own:
            w[own] = d * s
        for name, o in others.items():
            w[name] = o * s * ensemble_factor(eff, name, 4.0)
        return w

    out = {"preset": ("preset", weights(1, "document", 1, {E5: 1, MINI: 1}), 3, 0.25),
           "no own whole documents": ("no own whole documents", weights(1, None, 0, {E5: 1, MINI: 1}), 3, 0.25)}
    for d in (1, 1.5, 2, 3):
        for o in (0.75, 1, 1.5):
            out[f"no passages, own {d:g}, others {o:g}"] = ("no passages", weights(0, "document", d, {E5: o, MINI: o}),
                                                            3, 0.25)
    for d in (0.5, 1, 1.5):
        for o in (0.75, 1):
            out[f"passage mean {d:g}, others {o:g}"] = ("passage mean", weights(1, MEAN, d, {E5: o, MINI: o}),
                                                        3, 0.25)
    for d in (1, 1.5, 2, 3):
        for o in (1, 1.5, 2):
            for k, beta in ((0, 0.0), (3, 0.25), (3, 0.5)):
                out[f"own {d:g} + MiniLM {o:g}" + (f", feedback {k} × {beta:g}" if k else "")] = (
                    "own + MiniLM", weights(1, "document", d, {MINI: o}), k, beta)
    return out


def measure(data: dict[str, Any], indices: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    qv = dict(data["query_vectors"])
    qv[MEAN] = qv["document"]  # the same model's query vector
    for g in data["queries"].values():  # a whole-document list like the others, so its second pass runs too
        g[MEAN] = g["passage mean"]
    out: dict[str, dict[str, Any]] = {}
    rankers: dict[str, tuple[str, Callable[[str, dict[str, RankedList]], list[str]]]] = {}
    for name, (family, w, k, beta) in variants(data["weights"], data["document_effectiveness"]).items():
        if k:
            rankers[name] = (family, lambda q, g, w=w, k=k, beta=beta: levers.feedback_fuse(  # type: ignore[misc]
                g, w, {n: qv[n][q] for n in qv}, indices, k, beta, 1.0))
        else:
            rankers[name] = (family, lambda q, g, w=w: fuse({n: g[n] for n in w}, w, Fusion.ZSCORE)[0])  # type: ignore[misc]
    for row in levers.ENGINE_ROWS:
        rankers[row] = ("engine", lambda q, g, row=row: list(g[row].ids))  # type: ignore[misc]
    for name, (family, rank) in rankers.items():
        runs = {qid: rank(qid, g) for qid, g in data["queries"].items()}
        out[name] = {"family": family}
        for part, qrels in data["qrels"].items():
            pq = per_query_metrics(qrels, {q: runs.get(q, []) for q in qrels})
            out[name][part] = {"ndcg@10": float(np.mean([pq[q]["ndcg@10"] for q in qrels])),
                               "recall@100": float(np.mean([pq[q]["recall@100"] for q in qrels]))}
    return out


def report(results: dict[str, Any], meta: dict[str, Any]) -> str:
    cols = list(results)
    tune = levers.gains(results, "tune", levers.ENGINE_ROWS)
    test = levers.gains(results, "test", levers.ENGINE_ROWS)
    names = [n for n in tune if n not in levers.ENGINE_ROWS]
    family = {n: results[cols[0]][n]["family"] for n in names}
    lines = ["# The ensemble's cost against its quality", "",
             f"Made by `python benchmarks/ensemble_frontier.py` ({meta['engine']}; {meta['machine']}). Gains in "
             "nDCG@10 points over the strongest engine row of each part (the engine's two BM25 rows and its own "
             "hybrid rows with the shipped model). *Tuning*: SciFact's training judgments, the others' `test:tune` "
             "half; *test*: every test judgment. Sorted by the tuning parts' worst collection.", "",
             "Whole-document embeddings per document, beyond the shipped default's passages: "
             + "; ".join(f"*{f}*: {e}" for f, e in EXTRA.items()) + ". On the README demo's 1,000 abstracts "
             "(this machine, one model at a time, batches of 16, the first 512 word pieces): the shipped model "
             f"{meta['seconds']['own']:.0f} s, e5 {meta['seconds']['e5']:.0f} s, "
             f"MiniLM {meta['seconds']['MiniLM']:.0f} s.",
             "", "| family | lever | tuning: " + " | ".join(cols) + " | tuning mean | tuning worst | test mean "
             "| test worst |", "|---|---|" + "---:|" * (len(cols) + 4)]
    for n in sorted(names, key=lambda n: (-min(tune[n].values()), -float(np.mean(list(tune[n].values()))))):
        t, s = [tune[n][c] for c in cols], [test[n][c] for c in cols]
        lines.append(f"| {family[n]} | {n} | " + " | ".join(f"{v:+.2f}" for v in t)
                     + f" | {np.mean(t):+.2f} | {min(t):+.2f} | {np.mean(s):+.2f} | {min(s):+.2f} |")
    lines += ["", "## Best of each family, leave-one-collection-out", "",
              "Each collection's lever chosen within the family on the other collections' tuning parts (worst "
              "first, then mean), reported on the left-out collection's test judgments (the preset is one lever: "
              "its row is its test gains; chosen among every lever of `engine_hybrid_levers.py`, its "
              "leave-one-collection-out estimate is in `engine-hybrid-levers.md`).", "",
              "| family | " + " | ".join(cols) + " | mean | worst |", "|---|" + "---:|" * (len(cols) + 2)]
    for f in EXTRA:
        members = {n: tune[n] for n in names if family[n] == f}
        got = [test[levers.choose(members, [x for x in cols if x != c])][c] for c in cols]
        lines.append(f"| {f} | " + " | ".join(f"{v:+.2f}" for v in got) + f" | {np.mean(got):+.2f} | {min(got):+.2f} |")
    return "\n".join(lines) + "\n"


def embedding_seconds() -> dict[str, float]:
    """Seconds each model takes to embed the demo sample's whole documents (one model at a time)."""
    import time

    from esbridge.demo import materialise_sample
    from esbridge.semantic.models import load_encoder
    from esbridge.semantic.text import document_text

    with open(materialise_sample().corpus_path, encoding="utf-8") as f:
        texts = [document_text(json.loads(line), ("title", "text")) for line in f if line.strip()]
    out = {}
    for label, model in (("own", PipelineParams().model), ("e5", levers.OTHER_MODELS[0]),
                         ("MiniLM", levers.OTHER_MODELS[1])):
        enc = load_encoder(model)
        t0 = time.perf_counter()
        enc.encode(texts)
        out[label] = time.perf_counter() - t0
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, help="folder holding the BEIR-layout collections")
    engine_arguments(ap)
    ap.add_argument("--keep", type=Path, default=None, help="where engine_hybrid_levers.py kept its lists")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "ensemble-frontier")
    ap.add_argument("--report-only", action="store_true", help="rewrite the report from the JSON")
    args = ap.parse_args()
    if args.report_only:
        saved = json.loads(args.out.with_suffix(".json").read_text())
        args.out.with_suffix(".md").write_text(report(saved["results"], saved["meta"]))
        return 0
    if args.data is None:
        ap.error("--data is required")
    engine = connect_engine(args)
    keep = args.keep or cache_dir() / "levers"
    results: dict[str, Any] = {}
    for name in levers.COLLECTIONS:
        path = keep / f"{name}.pickle"
        if not path.is_file():
            raise SystemExit(f"{path}: no kept lists; run benchmarks/engine_hybrid_levers.py first")
        data = pickle.loads(path.read_bytes())
        ds = load_dataset(args.data / name, progress=False)
        index = index_name("esbridge-eval", ds, PYSERINI_BM25)
        indices = dict(levers.whole_document_indices(engine, index))
        from esbridge.semantic.models import load_encoder
        from esbridge.semantic.vectors import VectorIndex

        passages = VectorIndex.open(engine, index, load_encoder(PipelineParams().model), fields=("title", "text"),
                                    build=False)
        indices[MEAN] = MeanVectors(*levers.passage_means(passages))
        results[name] = measure(data, indices)
        print(f"{name}: done", file=sys.stderr, flush=True)
    meta = {"engine": engine.info.label, "machine": machine(), "seconds": embedding_seconds()}
    args.out.with_suffix(".json").write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    args.out.with_suffix(".md").write_text(report(results, meta))
    print(args.out.with_suffix(".md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
