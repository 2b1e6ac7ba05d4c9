"""What earns esbridge's hybrid pipeline a margin over the engines' own hybrid search: levers measured
on tuning judgments, chosen by the worst collection, reported leave-one-collection-out.

For every collection, every judged query of the tuning and test parts runs once through ``esbridge
eval``'s systems (:class:`esbridge.evaluation.runner.SystemSet`: the engine's two BM25 rows, the
engines' own hybrid rows ``engine-hybrid-minmax`` and ``engine-hybrid-rrf``, and the hybrid pipeline
with the shipped defaults); the pipeline's strategy lists (the semantic one after its feedback pass),
its fused ranking and a kNN over one vector per whole document (top 1,000) are kept, and each lever
is applied to them offline with the pipeline's own fusion (:func:`esbridge.hybrid.fusion.fuse`).

Levers:

* ``hybrid``: the pipeline as shipped;
* ``+ document kNN r``: the whole-document kNN list as a fourth strategy of the pipeline's z-score
  fusion, weighted ``r`` times the semantic strategy's calibrated weight (passages and whole
  documents make different mistakes);
* ``+ passage-mean kNN r``: the same with each document's vector the mean of its passages' vectors
  (normalised), which needs no embedding beyond the passages;
* ``+ engine-hybrid a``: the pipeline's fused list and ``engine-hybrid-minmax``'s, each min-max
  normalised, weighted ``1 - a`` and ``a``;
* ``+ document kNN d + other models o`` (``, calibrated s``): the ensemble, the shipped model's
  whole-document list and those of :data:`OTHER_MODELS` in the last fusion;
* ``…, feedback k × b, share f``: the ensemble with each whole-document list run again from its model's
  query vector moved towards the fused ranking's top ``k`` documents (``b`` times their weighted mean
  vector, :attr:`esbridge.hybrid.PipelineParams.document_feedback`), the second pass taking the share
  ``f`` of the list's weight, computed exactly as the pipeline does from the vectors on disk.

Parts: SciFact tunes on its training judgments; the other collections on a fixed seeded half of
their test queries (``test:tune``), the other half (``test:heldout``) never seen. Rule: the lever
whose **worst** gain over the strongest engine row (the two BM25 rows and the two engine-hybrid rows,
nDCG@10 points) across the tuning parts is largest wins; the mean breaks ties.
Leave-one-collection-out: the same rule on the other collections' tuning parts, reported on the
left-out collection's test judgments.

Usage (one command; ``DATA`` holds the BEIR-layout collections; the evaluation indices and vectors
are those ``esbridge eval`` builds, built here when missing):

    python benchmarks/engine_hybrid_levers.py --data DATA --url URL

Writes ``benchmarks/results/engine-hybrid-levers.md`` and ``.json``; the per-query lists are kept
under ``$ESBRIDGE_HOME/levers/`` (``--report-only`` rewrites the report from the JSON).
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from esbridge.engine.client import Engine
from esbridge.evaluation.datasets import SplitSpec, load_dataset
from esbridge.evaluation.indexing import ENGINE_DEFAULT_BM25, PYSERINI_BM25, ensure_index, index_name
from esbridge.evaluation.metrics import per_query_metrics
from esbridge.evaluation.runner import BASELINE_DEFAULT, BASELINE_PYSERINI, EvalConfig, SystemSet
from esbridge.features.cache import TermVectorCache
from esbridge.home import cache_dir
from esbridge.hybrid import PipelineParams, RankedList
from esbridge.hybrid.engine_style import ENGINE_HYBRID_MINMAX, ENGINE_HYBRID_RRF
from esbridge.hybrid.fusion import Fusion, fuse
from esbridge.hybrid.pipeline import ensemble_factor, feedback_vector

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import connect_engine, engine_arguments, machine  # noqa: E402

COLLECTIONS = ("scifact", "nfcorpus", "cranfield", "cisi", "med")
ENGINE_ROWS = (BASELINE_PYSERINI, BASELINE_DEFAULT, ENGINE_HYBRID_MINMAX, ENGINE_HYBRID_RRF)
BM25_ROWS = (BASELINE_PYSERINI, BASELINE_DEFAULT)
DOCUMENT_WEIGHTS = (0.25, 0.5, 1.0, 2.0, 3.0, 4.0)
ENGINE_SHARES = (0.2, 0.35, 0.5)
#: documents of the whole-document kNN list a lever fuses
DOCUMENT_DEPTH = 1000
#: second models whose whole-document kNN lists the ensemble levers fuse beside the shipped model's
OTHER_MODELS = ("e5-small-v2-q", "all-minilm-l6-v2-q")
#: their weights, times the semantic strategy's calibrated weight
OTHER_WEIGHTS = (0.5, 0.75, 1.0)
#: the shipped model's whole-document list's weight in the ensemble levers (times the semantic weight)
ENSEMBLE_DOCUMENT = (0.0, 1.0, 1.5, 2.0)
#: ``None``: the other models' lists weigh the same; ``s``: each is weighed by ``(m / m_doc) ** s``, its
#: mean reciprocal rank on the index's known-item pseudo-queries over the shipped model's whole-document list's
ENSEMBLE_SHARPNESS = (None, 2.0, 4.0)
#: the ensemble lever the levers below start from (chosen on every collection's tuning part before them)
ENSEMBLE_CHOSEN = (1.0, 1.0, 4.0)
#: agreement levers: the top k compared, and the power of the agreement's ratio to its mean
AGREEMENT_DEPTHS = (10, 20)
AGREEMENT_POWERS = (1.0, 2.0)
#: the whole-document lists' depth in the fusion, against DOCUMENT_DEPTH
SHORT_DEPTH = 100
#: the ensembles the whole-document feedback levers start from (document weight, other models' weight,
#: sharpness), the feedback documents, the feedback vector's weights and the second passes' shares
FEEDBACK_BASES = tuple((d, o, sharp) for d in (1.0, 1.5) for o in (0.75, 1.0) for sharp in (None, 4.0))
FEEDBACK_DOCUMENTS = (3, 5, 10)
FEEDBACK_BETAS = (0.25, 0.5)
FEEDBACK_SHARES = (0.5, 1.0)


def parts_of(ds: Any) -> dict[str, SplitSpec]:
    if "train" in ds.splits():
        return {"tune": SplitSpec("train"), "test": SplitSpec("test")}
    return {"tune": SplitSpec.parse("test:tune"), "heldout": SplitSpec.parse("test:heldout"),
            "test": SplitSpec("test")}


def collect(engine: Engine, folder: Path, keep: Path) -> dict[str, Any]:
    """Every judged query's rankings and lists on one collection, kept in ``keep``."""
    ds = load_dataset(folder, progress=False)
    path = keep / f"{ds.name}.pickle"
    if path.exists():
        got: dict[str, Any] = pickle.loads(path.read_bytes())
        return got
    parts = parts_of(ds)
    queries: dict[str, str] = {}
    for split in parts.values():
        for q in ds.queries(split):
            queries[q.id] = q.text
    index = ensure_index(engine, ds, index_name("esbridge-eval", ds, PYSERINI_BM25), bm25=PYSERINI_BM25,
                         progress=True)
    default_index = ensure_index(engine, ds, index_name("esbridge-eval", ds, ENGINE_DEFAULT_BM25),
                                 bm25=ENGINE_DEFAULT_BM25, progress=True)
    config = EvalConfig(scorers=(), pipeline=PipelineParams(), progress=True)
    per_query: dict[str, Any] = {}
    t0 = time.perf_counter()
    with SystemSet(engine, index, config, baseline=BASELINE_PYSERINI, default_index=default_index,
                   cache=TermVectorCache(max_entries=max(50_000, 2 * ds.corpus_size()))) as ss:
        assert ss.searcher is not None and ss.document_vectors is not None
        weights = ss.searcher.fusion_weights()
        pooled_ids, pooled = passage_means(ss.searcher.vectors)
        for n, (qid, text) in enumerate(queries.items()):
            ss.run_query(qid, text)
            res = ss.pipeline_result
            assert res is not None
            qvec = ss.document_vectors.embed_query(text)
            doc = ss.document_vectors.search(qvec, DOCUMENT_DEPTH)
            sims = pooled @ qvec
            top = np.argsort(-sims, kind="stable")[:DOCUMENT_DEPTH]
            per_query[qid] = {
                "lexical": res.lists["lexical"], "keyword": res.lists["keyword"],
                "semantic": res.lists.get("semantic_feedback", res.lists["semantic"]),
                "document": RankedList(doc.ids, doc.scores),
                "passage mean": RankedList([pooled_ids[i] for i in top], sims[top].astype(np.float64)),
                "hybrid": RankedList(res.ids, np.asarray(res.scores)),
                **{name: RankedList(ss.systems[name].ranking[qid], np.asarray(ss.systems[name].scores[qid]))
                   for name in ENGINE_ROWS}}
            if n % 100 == 0:
                print(f"  {ds.name}: {n}/{len(queries)} queries", file=sys.stderr, flush=True)
    data = {"name": ds.name, "weights": weights, "queries": per_query, "seconds": time.perf_counter() - t0,
            "qrels": {part: ds.qrels(split) for part, split in parts.items()}}
    keep.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(data))
    return data


def add_other_models(engine: Engine, folder: Path, keep: Path, data: dict[str, Any]) -> dict[str, Any]:
    """Each of :data:`OTHER_MODELS`' whole-document kNN lists (top :data:`DOCUMENT_DEPTH`, exact cosine)
    added to every query's lists, kept in ``keep`` beside them."""
    from esbridge.semantic.models import load_encoder
    from esbridge.semantic.vectors import VectorIndex

    missing = [m for m in OTHER_MODELS if f"document {m}" not in data.get("models", ())]
    if not missing and "document_effectiveness" in data and "query_vectors" in data:
        return data
    ds = load_dataset(folder, progress=False)
    index = index_name("esbridge-eval", ds, PYSERINI_BM25)
    texts = {q.id: q.text for split in parts_of(ds).values() for q in ds.queries(split)}
    for model in missing:
        t0 = time.perf_counter()
        vi = VectorIndex.open(engine, index, load_encoder(model), fields=("title", "text"), progress=True,
                              windows=False)
        built = time.perf_counter() - t0
        t1 = time.perf_counter()
        for qid, g in data["queries"].items():
            hits = vi.search(vi.embed_query(texts[qid]), DOCUMENT_DEPTH)
            g[f"document {model}"] = RankedList(hits.ids, hits.scores)
        data.setdefault("models", {})[f"document {model}"] = {
            "open_seconds": built, "query_seconds": (time.perf_counter() - t1) / max(len(data["queries"]), 1)}
        (keep / f"{ds.name}.pickle").write_bytes(pickle.dumps(data))
        print(f"  {ds.name}: {model} added", file=sys.stderr, flush=True)
    if "document_effectiveness" not in data:
        data["document_effectiveness"] = document_effectiveness(engine, index)
    if "query_vectors" not in data:
        data["query_vectors"] = {}
        for name, vi in whole_document_indices(engine, index).items():
            data["query_vectors"][name] = {qid: vi.embed_query(texts[qid]) for qid in data["queries"]}
    (keep / f"{ds.name}.pickle").write_bytes(pickle.dumps(data))
    return data


def whole_document_indices(engine: Engine, index: str) -> dict[str, Any]:
    """List name (``document``, ``document <model>``) -> the whole-document vectors it reads (on disk)."""
    from esbridge.semantic.models import load_encoder
    from esbridge.semantic.vectors import VectorIndex

    return {("document" if m == PipelineParams().model else f"document {m}"):
            VectorIndex.open(engine, index, load_encoder(m), fields=("title", "text"), windows=False)
            for m in (PipelineParams().model, *OTHER_MODELS)}


def document_effectiveness(engine: Engine, index: str) -> dict[str, float]:
    """Each whole-document kNN list's mean reciprocal rank (top 100) on the known-item pseudo-queries
    the pipeline calibrates its weights with (:mod:`esbridge.hybrid.calibration`): no judgment used."""
    from esbridge.hybrid.calibration import CalibrationParams, mean_reciprocal_rank, pseudo_queries

    params = CalibrationParams()
    pairs = pseudo_queries(engine, index, ("title", "text"), params)
    out = {}
    for name, vi in whole_document_indices(engine, index).items():
        ranks = [vi.search(vi.embed_query(text), params.depth).ids for _, text in pairs]
        out[name] = mean_reciprocal_rank([d for d, _ in pairs], ranks, params.depth)
    return out


def passage_means(vectors: Any) -> tuple[list[str], np.ndarray]:
    """Each document's passage vectors averaged and normalised again: a document vector that costs no
    embedding beyond the passages'."""
    vecs, starts, ids = np.asarray(vectors.vectors), vectors.starts, vectors.ids
    sums = np.add.reduceat(vecs, starts[:len(ids)], axis=0)
    return list(ids), (sums / np.maximum(np.linalg.norm(sums, axis=1, keepdims=True), 1e-12)).astype(np.float32)


def levers(weights: Mapping[str, float], effectiveness: Mapping[str, float] | None = None,
           indices: Mapping[str, Any] | None = None,
           query_vectors: Mapping[str, Mapping[str, np.ndarray]] | None = None,
           ) -> dict[str, Callable[[str, dict[str, RankedList]], list[str]]]:
    """Lever name -> the ranking it gives a query (its id and lists) (``effectiveness``: each
    whole-document list's mean reciprocal rank on the index's known-item pseudo-queries, for the
    calibrated ensemble levers; ``indices`` and ``query_vectors``: each whole-document list's vectors
    and query vectors, for the feedback levers)."""
    out: dict[str, Callable[[str, dict[str, RankedList]], list[str]]] = {
        name: (lambda q, g, f=f: f(g)) for name, f in single_pass_levers(weights, effectiveness).items()}  # type: ignore[misc]
    if effectiveness and indices and query_vectors:
        for base in FEEDBACK_BASES:
            w = ensemble_weights(weights, effectiveness, base)
            for k in FEEDBACK_DOCUMENTS:
                for beta in FEEDBACK_BETAS:
                    for share in FEEDBACK_SHARES:
                        out[f"{ensemble_name(base)}, feedback {k} × {beta:g}, share {share:g}"] = \
                            lambda q, g, w=w, k=k, beta=beta, share=share: feedback_fuse(  # type: ignore[misc]
                                g, w, {n: query_vectors[n][q] for n in query_vectors}, indices, k, beta, share)
    return out


def ensemble_name(chosen: tuple[float, float, float | None]) -> str:
    d, o, sharp = chosen
    return f"+ document kNN {d:g} + other models {o:g}" + ("" if sharp is None else f", calibrated {sharp:g}")


def feedback_fuse(g: Mapping[str, RankedList], weights: Mapping[str, float], query_vectors: Mapping[str, np.ndarray],
                  indices: Mapping[str, Any], k: int, beta: float, share: float) -> list[str]:
    """The ensemble's fusion, then each whole-document list run again from its query vector moved
    towards that fusion's top ``k`` documents, its weight shared with the second pass, fused again
    (the pipeline's ``document_feedback``)."""
    lists = {n: g[n] for n in weights}
    ids, scores, _ = fuse(lists, weights, Fusion.ZSCORE)
    final = dict(weights)
    for name in [n for n in weights if n.startswith("document")]:
        vi = indices[name]
        hits = vi.search(feedback_vector(query_vectors[name], vi.vectors_of(ids[:k]), scores, beta, "score"),
                         DOCUMENT_DEPTH)
        lists[f"{name} feedback"] = RankedList(hits.ids, hits.scores)
        final[f"{name} feedback"] = weights[name] * share
        final[name] = weights[name] * (1 - share)
    return fuse(lists, final, Fusion.ZSCORE)[0]


def single_pass_levers(weights: Mapping[str, float], effectiveness: Mapping[str, float] | None = None,
                       ) -> dict[str, Callable[[dict[str, RankedList]], list[str]]]:
    """The levers that fuse a query's lists as they are (see :func:`levers`)."""
    out: dict[str, Callable[[dict[str, RankedList]], list[str]]] = {"hybrid": lambda g: list(g["hybrid"].ids)}
    for name in ENGINE_ROWS:
        out[name] = lambda g, name=name: list(g[name].ids)  # type: ignore[misc]
    for r in DOCUMENT_WEIGHTS:
        w = {**weights, "document": r * weights["semantic"]}
        out[f"+ document kNN {r:g}"] = lambda g, w=w: fuse(  # type: ignore[misc]
            {k: g[k] for k in ("lexical", "semantic", "keyword", "document")}, w, Fusion.ZSCORE)[0]
    for r in DOCUMENT_WEIGHTS:
        w = {**weights, "passage mean": r * weights["semantic"]}
        out[f"+ passage-mean kNN {r:g}"] = lambda g, w=w: fuse(  # type: ignore[misc]
            {k: g[k] for k in ("lexical", "semantic", "keyword", "passage mean")}, w, Fusion.ZSCORE)[0]
    eff = effectiveness or {}
    for d in ENSEMBLE_DOCUMENT:
        for o in OTHER_WEIGHTS:
            for sharp in ENSEMBLE_SHARPNESS:
                if sharp is not None and not eff:
                    continue
                w = ensemble_weights(weights, eff, (d, o, sharp))
                out[ensemble_name((d, o, sharp))] = \
                    lambda g, w=w: fuse({k: g[k] for k in w}, w, Fusion.ZSCORE)[0]  # type: ignore[misc]
    if eff:
        base = ensemble_weights(weights, eff, ENSEMBLE_CHOSEN)
        for k in AGREEMENT_DEPTHS:
            for power in AGREEMENT_POWERS:
                out[f"+ ensemble, agreement top {k}, power {power:g}"] = \
                    lambda g, w=base, k=k, power=power: agreement_fuse(g, w, k, power)  # type: ignore[misc]
            out[f"+ ensemble, agreement top {k} left out, power 1"] = \
                lambda g, w=base, k=k: agreement_fuse(g, w, k, 1.0, leave_out=True)  # type: ignore[misc]
        out[f"+ ensemble, whole-document lists top {SHORT_DEPTH}"] = lambda g, w=base: fuse(  # type: ignore[misc]
            {k: truncated(g[k], SHORT_DEPTH) if k.startswith("document") else g[k] for k in w}, w, Fusion.ZSCORE)[0]
    for a in ENGINE_SHARES:
        out[f"+ engine-hybrid {a:g}"] = lambda g, a=a: fuse(  # type: ignore[misc]
            {"hybrid": g["hybrid"], "engine": g[ENGINE_HYBRID_MINMAX]}, {"hybrid": 1 - a, "engine": a},
            Fusion.MINMAX)[0]
    return out


def ensemble_weights(weights: Mapping[str, float], effectiveness: Mapping[str, float],
                     chosen: tuple[float, float, float | None]) -> dict[str, float]:
    """The fusion weights of the ensemble lever ``chosen`` (the shipped model's whole-document weight,
    the other models' weight, the sharpness: ``None``, the other models weigh alike), each times the
    semantic strategy's calibrated weight."""
    d, o, sharp = chosen
    w = {**weights, "document": d * weights["semantic"]}
    for m in OTHER_MODELS:
        factor = 1.0 if sharp is None else ensemble_factor(effectiveness, f"document {m}", sharp)
        w[f"document {m}"] = o * weights["semantic"] * factor
    return w


def truncated(lst: RankedList, depth: int) -> RankedList:
    return RankedList(list(lst.ids[:depth]), np.asarray(lst.scores[:depth]))


def agreement_fuse(g: Mapping[str, RankedList], weights: Mapping[str, float], k: int, power: float, *,
                   leave_out: bool = False) -> list[str]:
    """The lists fused twice: each list's weight is multiplied by ``(a / mean a) ** power``, ``a`` the share
    of its top ``k`` in the top ``k`` of the first fusion (``leave_out``: of the fusion of the other
    lists), so that a list that disagrees with the rest on this query counts less.  No judgment, no
    constant per strategy: the agreement is the query's own."""
    lists = {name: g[name] for name in weights}
    agree: dict[str, float] = {}
    consensus = set(fuse(lists, weights, Fusion.ZSCORE)[0][:k]) if not leave_out else set()
    for name in weights:
        if leave_out:
            others = {n: w for n, w in weights.items() if n != name}
            consensus = set(fuse({n: lists[n] for n in others}, others, Fusion.ZSCORE)[0][:k])
        agree[name] = len(consensus & set(lists[name].ids[:k])) / k
    mean = float(np.mean([agree[n] for n, w in weights.items() if w > 0]))
    if mean <= 0:
        return fuse(lists, weights, Fusion.ZSCORE)[0]
    moved = {n: w * (agree[n] / mean) ** power for n, w in weights.items()}
    return fuse(lists, moved, Fusion.ZSCORE)[0]


def measure(data: dict[str, Any], indices: Mapping[str, Any] | None = None) -> dict[str, dict[str, dict[str, float]]]:
    """Lever -> part -> mean nDCG@10 and R@100 (``indices``: the whole-document vectors, for the
    feedback levers)."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for name, rank in levers(data["weights"], data.get("document_effectiveness"), indices,
                             data.get("query_vectors")).items():
        runs = {qid: rank(qid, g) for qid, g in data["queries"].items()}
        out[name] = {}
        for part, qrels in data["qrels"].items():
            pq = per_query_metrics(qrels, {q: runs.get(q, []) for q in qrels})
            out[name][part] = {"ndcg@10": float(np.mean([pq[q]["ndcg@10"] for q in qrels])),
                               "recall@100": float(np.mean([pq[q]["recall@100"] for q in qrels]))}
    return out


def gains(results: dict[str, Any], part: str, against: tuple[str, ...]) -> dict[str, dict[str, float]]:
    """Lever -> collection -> nDCG@10 points over the strongest of ``against`` on ``part``."""
    out: dict[str, dict[str, float]] = {}
    for c, res in results.items():
        best = max(res[row][part]["ndcg@10"] for row in against)
        for lever, by_part in res.items():
            out.setdefault(lever, {})[c] = 100 * (by_part[part]["ndcg@10"] - best)
    return out


def choose(tune: dict[str, dict[str, float]], collections: list[str]) -> str:
    """The lever (not an engine row) whose worst tuning gain over ``collections`` is largest; mean breaks ties."""
    candidates = [lv for lv in tune if lv not in ENGINE_ROWS]
    return max(candidates, key=lambda lv: (round(min(tune[lv][c] for c in collections), 6),
                                           float(np.mean([tune[lv][c] for c in collections]))))


def report(results: dict[str, Any], meta: dict[str, Any]) -> str:
    cols = list(results)
    tune = gains(results, "tune", ENGINE_ROWS)
    test = gains(results, "test", ENGINE_ROWS)
    test_bm25 = gains(results, "test", BM25_ROWS)
    lines = ["# Levers against the engines' own hybrid search", "",
             f"Made by `python benchmarks/engine_hybrid_levers.py` ({meta['engine']}, model {meta['model']}). "
             "Gains in nDCG@10 points over the strongest engine row of each part (the engine's two BM25 rows and "
             "the engines' own hybrid rows, `engine-hybrid-minmax` and `engine-hybrid-rrf`: the engine's BM25 and "
             "an exact kNN over one vector per whole document, each list's top 100). Tuning parts: SciFact's "
             "training judgments, the other collections' `test:tune` half.", "",
             "## Every lever on the tuning parts", "",
             "| lever | " + " | ".join(cols) + " | mean | worst |", "|---|" + "---:|" * (len(cols) + 2)]
    for lever, g in tune.items():
        vals = [g[c] for c in cols]
        lines.append(f"| {lever} | " + " | ".join(f"{v:+.2f}" for v in vals)
                     + f" | {np.mean(vals):+.2f} | {min(vals):+.2f} |")
    chosen = choose(tune, cols)
    lines += ["", f"Chosen on every collection's tuning part (worst first, then mean): **{chosen}**.", "",
              "## Leave-one-collection-out", "",
              "Each collection's lever is chosen on the other collections' tuning parts only and reported on the "
              "left-out collection's test judgments (all of them).", "",
              "| left out | chosen on the others | gain over the strongest engine row | over the strongest BM25 row "
              "| shipped hybrid over the strongest engine row |", "|---|---|---:|---:|---:|"]
    loco = {}
    for c in (cols if len(cols) > 1 else []):
        lv = choose(tune, [x for x in cols if x != c])
        loco[c] = (lv, test[lv][c], test_bm25[lv][c])
        lines.append(f"| {c} | {lv} | {test[lv][c]:+.2f} | {test_bm25[lv][c]:+.2f} | {test['hybrid'][c]:+.2f} |")
    left_out = [v[1] for v in loco.values()] or [float("nan")]
    h = [test["hybrid"][c] for c in cols]
    lines += ["", f"Leave-one-collection-out against the strongest engine row: mean {np.mean(left_out):+.2f}, "
                  f"worst {min(left_out):+.2f} (the shipped hybrid: mean {np.mean(h):+.2f}, worst {min(h):+.2f}).", "",
              "## Test judgments, every lever", "",
              "nDCG@10 / R@100 on each collection's whole test set.", "",
              "| system | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    for lever in results[cols[0]]:
        lines.append(f"| {lever} | " + " | ".join(
            f"{results[c][lever]['test']['ndcg@10']:.4f} / {results[c][lever]['test']['recall@100']:.4f}"
            for c in cols) + " |")
    lines += ["", f"Collecting the lists took {meta['seconds']:.0f} s on this run's machine ({meta['machine']})."]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, help="folder holding the BEIR-layout collections")
    engine_arguments(ap)
    ap.add_argument("--collections", default=",".join(COLLECTIONS))
    ap.add_argument("--keep", type=Path, default=None, help="where the per-query lists are kept")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "engine-hybrid-levers")
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args()
    out_json = args.out.with_suffix(".json")
    if args.report_only:
        saved = json.loads(out_json.read_text())
        args.out.with_suffix(".md").write_text(report(saved["results"], saved["meta"]))
        return 0
    if args.data is None:
        ap.error("--data is required")
    engine = connect_engine(args)
    keep = args.keep or cache_dir() / "levers"
    results: dict[str, Any] = {}
    seconds = 0.0
    for name in args.collections.split(","):
        data = add_other_models(engine, args.data / name, keep, collect(engine, args.data / name, keep))
        seconds += data["seconds"]
        ds = load_dataset(args.data / name, progress=False)
        results[name] = measure(data, whole_document_indices(engine, index_name("esbridge-eval", ds, PYSERINI_BM25)))
        print(f"{name}: done", file=sys.stderr, flush=True)
    meta = {"engine": engine.info.label, "model": PipelineParams().model, "seconds": seconds,
            "machine": machine()}
    out_json.write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    args.out.with_suffix(".md").write_text(report(results, meta))
    print(args.out.with_suffix(".md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
