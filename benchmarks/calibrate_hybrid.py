"""Choose how the hybrid pipeline weighs its strategies, on tuning judgments only, with a weakened
semantic strategy in the selection, and report leave-one-collection-out.

For every collection, every judged query of the tuning and held-out parts is run once through the
pipeline's strategies (the lexical rerank, the semantic search with ``--model``, the keyword query
fed by the lexical list and by first fusions of several semantic:lexical weight ratios), and the
pipeline's calibration (:mod:`esbridge.hybrid.calibration`) is measured on the index. Each weighting
is then applied to those lists by the pipeline's own aggregator (semantic feedback included).

**Weakened semantic strategy.** On the shared collections the embedding model is about as good as
BM25 or better; on a user's collection it may be far below. So every collection is measured twice:
as it is, and with Gaussian noise added to every document vector (then normalised again), its
standard deviation chosen on the tuning part so that the semantic strategy alone is about
``--weaken`` nDCG@10 points below the strongest BM25 row. The strategies' lists and the calibration
are measured again on the weakened vectors.

Rule: the weighting whose worst gain over the strongest BM25 row (nDCG@10 points) across the tuning
parts of every collection, as it is and weakened, is largest wins; the mean breaks ties.
Leave-one-collection-out: the same rule on the other collections' tuning parts, reported on the
left-out collection's test judgments (as it is and weakened).

Usage (one command; ``DATA`` is the folder that holds the BEIR-layout collections):

    python benchmarks/calibrate_hybrid.py --data DATA --url URL [--model bge-small-en-v1.5-q]

Writes ``benchmarks/results/hybrid-calibration.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import pickle
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from esbridge.engine.client import Engine
from esbridge.evaluation.datasets import SplitSpec, load_dataset
from esbridge.evaluation.metrics import per_query_metrics
from esbridge.features.cache import TermVectorCache
from esbridge.hybrid import HybridSearcher, PipelineParams
from esbridge.hybrid.calibration import Calibration, measure
from esbridge.hybrid.fusion import Fusion
from esbridge.rerank import Reranker
from esbridge.semantic.engine_vectors import open_vectors
from esbridge.semantic.models import load_encoder, spec_for

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import weaken as add_noise  # noqa: E402
from tune_hybrid import eval_index, strongest_bm25  # noqa: E402

COLLECTIONS = ("scifact", "nfcorpus", "cranfield", "cisi", "med")
#: semantic:lexical weight ratios of the first fusion that feeds the keyword strategy
RATIOS = (0.125, 0.25, 0.5, 1.0, 2.0, 4.0)
NOISE = (0.0, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08, 0.09, 0.1, 0.12, 0.14, 0.16, 0.2)


def settings(grid: str = "full") -> list[PipelineParams]:
    """The weightings compared: every one, or (``grid="focus"``) the calibrated ones around the
    defaults (sharpness 2, semantic priors 3 and 4, keyword priors 0, 0.25 and 0.5)."""
    base = PipelineParams(weighting="fixed", w_semantic=1.0, w_lexical=1.0, w_keyword=1.0)
    if grid == "focus":
        return [replace(base, weighting="calibrated", w_semantic=ws, w_keyword=wk,
                        calibration=replace(base.calibration, sharpness=2.0))
                for ws, wk in itertools.product((3.0, 4.0), (0.0, 0.25, 0.5))]
    out = [replace(base, w_semantic=ws, w_keyword=wk) for ws, wk in itertools.product((1.0, 1.5, 2.0, 3.0), (0.5, 1.0))]
    out.append(replace(base, fusion=Fusion.RRF, semantic_feedback=0))
    out.append(replace(base, fusion=Fusion.MINMAX, w_keyword=0.0, semantic_feedback=0, keyword_source="lexical"))
    for ws, wk, sharp in itertools.product((2.0, 3.0, 4.0), (0.0, 0.25, 0.5, 1.0), (0.5, 1.0, 2.0)):
        out.append(replace(base, weighting="calibrated", w_semantic=ws, w_keyword=wk,
                           calibration=replace(base.calibration, sharpness=sharp)))
    return out


def label(p: PipelineParams) -> str:
    if p.fusion is Fusion.RRF:
        return "rrf, equal weights"
    if p.fusion is Fusion.MINMAX:
        return "plain: minmax semantic + lexical, equal weights"
    head = f"sem {p.w_semantic:g} lex {p.w_lexical:g} kw {p.w_keyword:g}"
    if p.weighting == "calibrated":
        return f"calibrated, sharpness {p.calibration.sharpness:g}, priors {head}"
    return f"fixed {head}"


def parts_of(ds: Any) -> dict[str, SplitSpec]:
    if "train" in ds.splits():
        return {"tune": SplitSpec("train"), "test": SplitSpec("test")}
    return {"tune": SplitSpec.parse("test:tune"), "test": SplitSpec("test")}


def nearest_ratio(r: float) -> float:
    return min(RATIOS, key=lambda x: abs(math.log(max(r, 1e-9)) - math.log(x)))


def ndcg_of(ds: Any, split: SplitSpec, runs: dict[str, list[str]]) -> tuple[float, float]:
    qrels = ds.qrels(split)
    per_q = per_query_metrics(qrels, {q: runs.get(q, []) for q in qrels})
    return (float(np.mean([per_q[q]["ndcg@10"] for q in qrels])),
            float(np.mean([per_q[q]["recall@100"] for q in qrels])))


def strategy_lists(hs: HybridSearcher, queries: dict[str, str], lexical: dict[str, Any] | None) -> dict[str, Any]:
    """Every query's lists: lexical (and versions), semantic, keyword from the lexical list and from
    first fusions at every ratio of :data:`RATIOS`."""
    out: dict[str, Any] = {}
    for n, (qid, text) in enumerate(queries.items()):
        prepared = hs.reranker.analyze(text)
        if lexical is None:
            lex, versions = hs.lexical(text, prepared=prepared)
        else:
            lex, versions = lexical[qid]["lexical"], lexical[qid]["versions"]
        qvec = hs.vectors.embed_query(text)
        got: dict[str, Any] = {"lexical": lex, "versions": versions, "qvec": qvec, "semantic": hs.semantic(qvec)}
        if lexical is None:
            got["keyword/lexical"] = hs.keyword(hs.keyword_terms(prepared, lex, versions))
        else:
            got["keyword/lexical"] = lexical[qid]["keyword/lexical"]
        for r in RATIOS:
            p = PipelineParams(weighting="fixed", w_semantic=r, w_lexical=1.0)
            fb, fbv = hs.keyword_feedback_documents(got, versions, params=p)
            got[f"keyword/fusion/{r:g}"] = hs.keyword(hs.keyword_terms(prepared, fb, fbv))
        out[qid] = got
        if n % 100 == 0:
            print(f"  {n}/{len(queries)} queries", file=sys.stderr, flush=True)
    return out


def evaluate(hs: HybridSearcher, ds: Any, parts: dict[str, SplitSpec], lists: dict[str, Any],
             cal: Calibration, grid: str) -> dict[str, Any]:
    hs._calibration = cal
    hs.calibration_check_interval = float("inf")
    hs._calibration_checked = time.monotonic()
    out: dict[str, Any] = {"calibration": {"effectiveness": cal.effectiveness, "queries": cal.queries}}
    alone = {}
    for name in ("lexical", "semantic", "keyword/lexical"):
        runs = {q: list(g[name].ids) for q, g in lists.items()}
        alone[name] = {part: ndcg_of(ds, split, runs) for part, split in parts.items()}
    out["alone"] = alone
    scores = {}
    for p in settings(grid):
        w = hs.fusion_weights(p)
        ratio = w.get("semantic", 0.0) / max(w.get("lexical", 0.0), 1e-9)
        kw_key = "keyword/lexical" if p.keyword_source == "lexical" else f"keyword/fusion/{nearest_ratio(ratio):g}"
        runs = {}
        for qid, g in lists.items():
            strat = {"semantic": g["semantic"], "lexical": g["lexical"], "keyword": g[kw_key]}
            fused = hs.aggregate(strat, g["qvec"], params=p)
            runs[qid] = list(fused.ids)  # best first, as search returns them
        scores[label(p)] = {"weights": w, **{part: ndcg_of(ds, split, runs) for part, split in parts.items()}}
    out["settings"] = scores
    return out


def collect(engine: Engine, folder: Path, model: str, passages: tuple[int, ...], weaken: float, keep: Path,
            grid: str) -> dict[str, Any]:
    ds = load_dataset(folder, progress=False)
    lengths = "+".join(map(str, passages))
    tag = f"{ds.name}-{model}-p{lengths}"
    # the lexical strategy's lists do not depend on the vectors: another passage setting's are reused
    reuse = None
    for other in sorted(keep.glob(f"{ds.name}-{model}-p*.pickle")):
        if "-weakened-" not in other.name and other.name != f"{tag}.pickle":
            reuse = pickle.loads(other.read_bytes())[0]
            break
    parts = parts_of(ds)
    strongest = strongest_bm25(engine, ds, parts)
    index = eval_index(engine, ds, progress=True)
    base = PipelineParams(model=model, weighting="fixed", w_semantic=1.0)
    cache = TermVectorCache(max_entries=max(50_000, 2 * ds.corpus_size()))
    reranker = Reranker(engine, index, scorer=base.scorer, window=base.window, vector_cache=cache)
    assert reranker.layout is not None
    vectors = open_vectors(engine, index, load_encoder(model, passage_tokens=passages), fields=reranker.layout.fields,
                           progress=True)
    hs = HybridSearcher(engine, index, base, progress=True, reranker=reranker, vectors=vectors)
    vi: Any = hs.vectors
    queries: dict[str, str] = {}
    for split in parts.values():
        for q in ds.queries(split):
            queries[q.id] = q.text

    def lists_and_calibration(path: Path, lexical: dict[str, Any] | None) -> tuple[dict[str, Any], Calibration]:
        """Every query's lists and the calibration with the vectors as they are now, kept in ``path``."""
        if path.exists():
            got: tuple[dict[str, Any], Calibration] = pickle.loads(path.read_bytes())
            return got
        lists = strategy_lists(hs, queries, lexical)
        cal = measure(engine, index, hs.layout.fields, hs._known_item_rankings, base.calibration,
                      model=model, scorer=base.scorer)
        path.write_bytes(pickle.dumps((lists, cal)))
        return lists, cal

    t0 = time.perf_counter()
    clean, cal_clean = lists_and_calibration(keep / f"{tag}.pickle", reuse)
    collect_s = time.perf_counter() - t0
    result = {"strongest_bm25": strongest, "queries": len(queries), "seconds": collect_s,
              "clean": evaluate(hs, ds, parts, clean, cal_clean, grid)}
    # the weakened semantic strategy
    orig = np.array(vi.vectors, dtype=np.float32)
    tune_qrels = ds.qrels(parts["tune"])
    target = strongest["tune"] - weaken

    def alone() -> float:
        return ndcg_of(ds, parts["tune"], {q: list(hs.semantic(clean[q]["qvec"]).ids) for q in tune_qrels})[0]

    def said(sigma: float, nd: float) -> None:
        print(f"  noise {sigma:g}: semantic alone {nd:.4f} (target {target:.4f})", file=sys.stderr, flush=True)

    sigma, _ = add_noise(vi, alone, target, NOISE, said)
    weak, cal_weak = lists_and_calibration(keep / f"{tag}-weakened-{weaken:g}-{sigma:g}.pickle", clean)
    result["weakened"] = {"sigma": sigma, **evaluate(hs, ds, parts, weak, cal_weak, grid)}
    vi.vectors = orig
    hs.close()
    return result


def gains(res: dict[str, Any], setting: str, part: str) -> list[float]:
    """The setting's gain in points over the strongest BM25 row: as it is and weakened."""
    s = res["strongest_bm25"][part]
    return [100 * (res[v]["settings"][setting][part][0] - s) for v in ("clean", "weakened")]


def choose(results: dict[str, Any], names: list[str]) -> str:
    labels = list(next(iter(results.values()))["clean"]["settings"])

    def key(lbl: str) -> tuple[float, float]:
        g = [x for c in names for x in gains(results[c], lbl, "tune")]
        return (min(g), float(np.mean(g)))

    return max(labels, key=key)


def report(results: dict[str, Any], model: str, weaken: float, engine_label: str,
           passages: list[int] | None = None, grid: str = "full") -> str:
    names = list(results)
    chosen = choose(results, names)
    options = (f" --passages {','.join(map(str, passages))}" if passages and list(passages) != [64] else "") \
        + (f" --grid {grid}" if grid != "full" else "")
    lines = ["# Hybrid pipeline: weights from the index", "",
             f"Command: `python benchmarks/calibrate_hybrid.py --data <folder of the collections> --model {model}"
             f"{options}`. Engine: {engine_label}. Semantic model: {model}, documents as passages of "
             f"{', '.join(map(str, passages or [64]))} word pieces. nDCG@10 gains in points over the strongest "
             "BM25 row of each part; *weakened*: document vectors with noise added until the semantic strategy "
             "alone is "
             f"about {weaken * 100:g} points below that row on the tuning part.", "",
             "Rule: the largest worst-case gain over the tuning parts (SciFact: its training judgments; the others: "
             "the fixed half `test:tune`) of every collection, as it is and weakened; the mean breaks ties.", "",
             f"Chosen: **{chosen}**.", "",
             "## Each strategy alone and the calibration (test judgments)", "",
             "| collection | strongest BM25 | lexical | semantic | keyword | measured (MRR: lex / sem / kw) | "
             "weakened: noise σ | semantic | measured (lex / sem / kw) |",
             "|---|---:|---:|---:|---:|---|---:|---:|---|"]
    for c, r in results.items():
        cl, wk = r["clean"], r["weakened"]
        e, ew = cl["calibration"]["effectiveness"], wk["calibration"]["effectiveness"]
        lines.append(f"| {c} | {r['strongest_bm25']['test']:.4f} | {cl['alone']['lexical']['test'][0]:.4f} | "
                     f"{cl['alone']['semantic']['test'][0]:.4f} | {cl['alone']['keyword/lexical']['test'][0]:.4f} | "
                     f"{e.get('lexical', 0):.3f} / {e.get('semantic', 0):.3f} / {e.get('keyword', 0):.3f} | "
                     f"{wk['sigma']:g} | {wk['alone']['semantic']['test'][0]:.4f} | "
                     f"{ew.get('lexical', 0):.3f} / {ew.get('semantic', 0):.3f} / {ew.get('keyword', 0):.3f} |")
    lines += ["", "## Leave-one-collection-out (chosen on the other collections' tuning parts, as they are and "
              "weakened; reported on the left-out collection's test judgments)", "",
              "| collection | choice | test gain | weakened test gain |", "|---|---|---:|---:|"]
    loo = []
    for c in names:
        pick = choose(results, [n for n in names if n != c] or names)
        g = gains(results[c], pick, "test")
        loo.append(g)
        lines.append(f"| {c} | {pick} | {g[0]:+.2f} | {g[1]:+.2f} |")
    a = np.array(loo)
    lines += ["", f"Leave-one-collection-out: mean {a[:, 0].mean():+.2f}, worst {a[:, 0].min():+.2f}; "
              f"weakened: mean {a[:, 1].mean():+.2f}, worst {a[:, 1].min():+.2f}.", "",
              "## Every setting (test judgments: gain as it is / weakened, per collection; tuning worst)", "",
              "| setting | " + " | ".join(names) + " | mean | worst | weakened mean | weakened worst | tune worst |",
              "|---|" + "---:|" * (len(names) + 5)]
    labels = list(next(iter(results.values()))["clean"]["settings"])
    rows = []
    for lbl in labels:
        g = np.array([gains(results[c], lbl, "test") for c in names])
        tw = min(x for c in names for x in gains(results[c], lbl, "tune"))
        rows.append((tw, lbl, g))
    for tw, lbl, g in sorted(rows, key=lambda r: -r[0]):
        cells = " | ".join(f"{x:+.2f} / {y:+.2f}" for x, y in g)
        lines.append(f"| {lbl} | {cells} | {g[:, 0].mean():+.2f} | {g[:, 0].min():+.2f} | {g[:, 1].mean():+.2f} | "
                     f"{g[:, 1].min():+.2f} | {tw:+.2f} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", help="folder holding the BEIR-layout collections")
    ap.add_argument("--collections", default=",".join(COLLECTIONS))
    ap.add_argument("--url", help="engine URL")
    ap.add_argument("--model", default="bge-small-en-v1.5-q")
    ap.add_argument("--passages", help="the passage lengths to embed documents at, comma-separated "
                    "(default: the model's own, esbridge.semantic.models)")
    ap.add_argument("--grid", choices=["full", "focus"], default="full",
                    help="every setting, or the calibrated ones around the defaults")
    ap.add_argument("--weaken", type=float, default=0.10, help="how far below BM25 the weakened semantic "
                    "strategy is made (nDCG@10, default 0.10)")
    ap.add_argument("--cache", default=str(Path.home() / ".cache" / "esbridge-calibration"),
                    help="folder keeping each collection's strategy lists")
    ap.add_argument("--out", default=str(HERE / "results" / "hybrid-calibration.md"))
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args()
    json_path = Path(args.out).with_suffix(".json")
    if args.report_only:
        saved = json.loads(json_path.read_text())
        Path(args.out).write_text(report(saved["collections"], saved["model"], saved["weaken"], saved["engine"],
                                         saved.get("passages"), saved.get("grid", "full")))
        return 0
    if not args.data or not args.url:
        ap.error("--data and --url are needed (except with --report-only)")
    passages = tuple(int(x) for x in args.passages.split(",")) if args.passages else spec_for(args.model).passages
    engine = Engine.connect(args.url)
    keep = Path(args.cache)
    keep.mkdir(parents=True, exist_ok=True)
    results = {}
    for name in [c.strip() for c in args.collections.split(",") if c.strip()]:
        print(f"{name}:", file=sys.stderr, flush=True)
        results[name] = collect(engine, Path(args.data) / name, args.model, passages, args.weaken, keep, args.grid)
        json_path.write_text(json.dumps({"engine": engine.info.label, "model": args.model, "weaken": args.weaken,
                                         "passages": list(passages), "grid": args.grid,
                                         "collections": results}, indent=1))
    Path(args.out).write_text(report(results, args.model, args.weaken, engine.info.label,
                                     list(passages), args.grid))
    print(Path(args.out).read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
