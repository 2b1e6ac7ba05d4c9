"""Choose the hybrid pipeline's defaults on tuning judgments only, and report leave-one-collection-out.

For every collection, every judged query of the tuning and held-out parts is run once through the
pipeline's strategies (:class:`esbridge.hybrid.HybridSearcher`: the lexical rerank, the semantic
search and the keyword query for each keyword setting of the grid: its source, and the keyword
strategy's parameters — feedback documents, expansion terms, the expansion's weight λ — for the
variants in ``KEYWORD_VARIANTS``); each fusion setting of the grid
is then applied to those lists by the pipeline's own aggregator (``HybridSearcher.aggregate``,
which also runs the semantic feedback pass), so a setting is measured exactly as ``search`` would
rank, without repeating the engine work.

Parts: SciFact tunes on its training judgments and reports its test judgments; the other
collections, which have test judgments only, tune on a fixed seeded half of their test queries
(``test:tune``) and report the other half (``test:heldout``) and the whole test set.

Rule: the setting whose **worst** gain over the strongest BM25 row (the engine's 1.2/0.75 or
Pyserini's 0.9/0.4, nDCG@10 points) across the tuning parts is largest wins; the mean breaks ties.
Leave-one-collection-out: the same rule on the other collections' tuning parts only, reported on
the left-out collection's test judgments.

Usage (one command; starts esbridge's local node when no --url is given; ``DATA`` is the
folder that holds the BEIR-layout collections):

    python benchmarks/tune_hybrid.py --data DATA [--grid narrow]

``--grid narrow`` measures only the settings around the shipped ones (:func:`narrow_grid`), to
choose the weights again after a strategy changed without the whole grid's cost.

Writes ``benchmarks/results/hybrid-tuning.md`` and ``.json`` (every setting's mean nDCG@10 on every
part; ``--report-only`` rewrites the report from it).
"""

from __future__ import annotations

import argparse
import itertools
import json
import pickle
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from esbridge.engine.client import Engine
from esbridge.evaluation.datasets import SplitSpec, load_dataset
from esbridge.evaluation.indexing import PYSERINI_BM25, ensure_index, index_name
from esbridge.evaluation.metrics import per_query_metrics
from esbridge.evaluation.runner import BASELINE_DEFAULT, BASELINE_PYSERINI, EvalConfig, run_evaluation
from esbridge.features.cache import TermVectorCache
from esbridge.hybrid import HybridSearcher, PipelineParams, RankedList
from esbridge.hybrid.fusion import Fusion
from esbridge.hybrid.keyword import KeywordParams
from esbridge.nodes.provision import provision
from esbridge.rerank import Reranker

HERE = Path(__file__).resolve().parent
COLLECTIONS = ("scifact", "nfcorpus", "cranfield", "cisi", "med")
W_SEMANTIC = (2.0, 2.5, 3.0)
#: Keyword strategy variants measured beside the default (more or fewer feedback documents or
#: expansion terms, a heavier expansion), with the semantic weights and sources they are fused at.
KEYWORD_VARIANTS = (KeywordParams(lam=0.5), KeywordParams(fb_docs=5), KeywordParams(fb_docs=20),
                    KeywordParams(fb_terms=50))
W_SEMANTIC_VARIANTS = (2.5, 3.0)
#: Semantic weights of ``--grid narrow``.
W_SEMANTIC_NARROW = (2.0, 2.5, 3.0, 3.5)


def narrow_grid() -> list[PipelineParams]:
    """The settings around the shipped ones (z-score fusion, the keyword strategy fed by the first
    fusion, semantic feedback from 3 documents weighted by score), for choosing the weights again
    after a strategy changed: semantic weight, keyword weight, feedback window."""
    base = PipelineParams()
    return [replace(base, fusion=Fusion.ZSCORE, w_semantic=wd, w_keyword=wk, semantic_feedback=3, semantic_beta=1.0,
                    semantic_feedback_weighting="score", keyword_source="fusion", semantic_feedback_window=window)
            for wd, wk, window in itertools.product(W_SEMANTIC_NARROW, (0.5, 1.0), ("first", "best"))]


def grid() -> list[PipelineParams]:
    base = PipelineParams()
    out = []
    for wd, wk, source, (fb, weighting), window in itertools.product(
            W_SEMANTIC, (0.5, 1.0), ("lexical", "fusion"),
            ((0, "mean"), (3, "mean"), (5, "mean"), (3, "score"), (5, "score")), ("first", "best")):
        if fb == 0 and window == "best":
            continue
        out.append(replace(base, fusion=Fusion.ZSCORE, w_semantic=wd, w_keyword=wk, semantic_feedback=fb,
                           semantic_beta=1.0, semantic_feedback_weighting=weighting, keyword_source=source,
                           semantic_feedback_window=window))
    out.append(replace(base, fusion=Fusion.RRF, w_semantic=1.0, w_keyword=0.5, semantic_feedback=3,
                       semantic_beta=1.0, semantic_feedback_weighting="mean", keyword_source="lexical"))
    for kp, wd, wk, source in itertools.product(KEYWORD_VARIANTS, W_SEMANTIC_VARIANTS, (0.5, 1.0),
                                                ("lexical", "fusion")):
        out.append(replace(base, keyword=kp, fusion=Fusion.ZSCORE, w_semantic=wd, w_keyword=wk, semantic_feedback=3,
                           semantic_beta=1.0, semantic_feedback_weighting="score", keyword_source=source,
                           semantic_feedback_window="first"))
    return out


def label(p: PipelineParams) -> str:
    fb = (f"feedback {p.semantic_feedback}/{p.semantic_feedback_weighting}"
          f"{'/best window' if p.semantic_feedback_window == 'best' else ''}") if p.semantic_feedback else "no feedback"
    kp = p.keyword
    variant = (f" ({kp.fb_docs} docs, {kp.fb_terms} terms, λ {kp.lam:g})"
               if kp != KeywordParams(depth=kp.depth) else "")
    return (f"{p.fusion.value} sem {p.w_semantic:g} kw {p.w_keyword:g} keyword{variant} from {p.keyword_source}, "
            f"{fb}")


def keyword_key(p: PipelineParams) -> str:
    """The keyword list a setting fuses: from the lexical list, or from the first fusion (which
    depends on the semantic weight), with the setting's keyword parameters."""
    kp = p.keyword
    src = "keyword/lexical" if p.keyword_source == "lexical" else f"keyword/fusion/{p.w_semantic:g}"
    return f"{src}/{kp.fb_docs}/{kp.fb_terms}/{kp.lam:g}/{kp.min_docs}"


def parts_of(ds: Any) -> dict[str, SplitSpec]:
    if "train" in ds.splits():
        return {"tune": SplitSpec("train"), "heldout": SplitSpec("test"), "test": SplitSpec("test")}
    return {"tune": SplitSpec.parse("test:tune"), "heldout": SplitSpec.parse("test:heldout"),
            "test": SplitSpec("test")}


def strongest_bm25(engine: Engine, ds: Any, parts: dict[str, SplitSpec]) -> dict[str, float]:
    """Part -> nDCG@10 of the stronger of the engine's two BM25 rows on it."""
    strongest = {}
    for part, split in parts.items():
        res = run_evaluation(engine, ds, EvalConfig(scorers=(), split=split, progress=False))
        strongest[part] = max(res.means[BASELINE_PYSERINI]["ndcg@10"], res.means[BASELINE_DEFAULT]["ndcg@10"])
    return strongest


def eval_index(engine: Engine, ds: Any, *, progress: bool = False) -> str:
    """The index ``esbridge eval`` uses for ``ds`` (built when needed)."""
    return ensure_index(engine, ds, index_name("esbridge-eval", ds, PYSERINI_BM25), bm25=PYSERINI_BM25,
                        progress=progress)


def collect(engine: Engine, folder: Path, settings: list[PipelineParams], keep: Path | None = None) -> dict[str, Any]:
    ds = load_dataset(folder, progress=False)
    parts = parts_of(ds)
    strongest = strongest_bm25(engine, ds, parts)
    index = eval_index(engine, ds)
    base = PipelineParams()
    cache = TermVectorCache(max_entries=max(50_000, 2 * ds.corpus_size()))
    hs = HybridSearcher(engine, index, base, progress=True,
                        reranker=Reranker(engine, index, scorer=base.scorer, window=base.window, vector_cache=cache))
    queries: dict[str, str] = {}
    for split in parts.values():
        for q in ds.queries(split):
            queries[q.id] = q.text
    needed = list({keyword_key(p): p for p in settings}.values())  # one keyword list per distinct key
    lists: dict[str, dict[str, RankedList]] = {}
    qvecs: dict[str, np.ndarray] = {}
    t0 = time.perf_counter()
    saved = keep / f"{ds.name}.pickle" if keep else None
    if saved and saved.exists():  # the strategies' lists of an earlier run (--cache)
        lists, qvecs, collected_s = pickle.loads(saved.read_bytes())
        queries = {}
    for qid, text in queries.items():
        prepared = hs.reranker.analyze(text)
        lexical, versions = hs.lexical(text, prepared=prepared)
        qvecs[qid] = hs.vectors.embed_query(text)
        got = {"lexical": lexical, "semantic": hs.semantic(qvecs[qid])}
        for p in needed:
            fb_list, fb_versions = hs.keyword_feedback_documents(got, versions, params=p)
            got[keyword_key(p)] = hs.keyword(hs.keyword_terms(prepared, fb_list, fb_versions, params=p.keyword),
                                             depth=p.keyword.depth)
        lists[qid] = got
    collect_s = time.perf_counter() - t0
    if saved and queries:
        saved.parent.mkdir(parents=True, exist_ok=True)
        saved.write_bytes(pickle.dumps((lists, qvecs, collect_s)))
    elif saved:
        collect_s = collected_s
    scores: dict[str, dict[str, float]] = {}  # setting -> part -> mean nDCG@10
    for p in settings:
        runs = {}
        for qid, got in lists.items():
            strat = {"lexical": got["lexical"], "semantic": got["semantic"], "keyword": got[keyword_key(p)]}
            fused = hs.aggregate(strat, qvecs[qid], params=p)
            runs[qid] = list(fused.ids)  # best first, as search returns them
        scores[label(p)] = {}
        for part, split in parts.items():
            qrels = ds.qrels(split)
            per_q = per_query_metrics(qrels, {q: runs[q] for q in qrels})
            scores[label(p)][part] = float(np.mean([per_q[q]["ndcg@10"] for q in qrels]))
    hs.close()
    return {"strongest_bm25": strongest, "scores": scores, "queries": len(queries), "seconds": collect_s}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", help="folder holding the BEIR-layout collections")
    ap.add_argument("--collections", default=",".join(COLLECTIONS))
    ap.add_argument("--url", help="engine URL (default: esbridge's local node)")
    ap.add_argument("--out", default=str(HERE / "results" / "hybrid-tuning.md"))
    ap.add_argument("--cache", help="folder keeping each collection's strategy lists, so a later run "
                                    "measures other settings without the engine work")
    ap.add_argument("--grid", choices=["full", "narrow"], default="full",
                    help="every setting (default), or only those around the shipped ones (narrow_grid)")
    ap.add_argument("--report-only", action="store_true",
                    help="rewrite the report from the JSON of an earlier run (no engine work)")
    args = ap.parse_args()
    names = [c.strip() for c in args.collections.split(",") if c.strip()]
    settings = narrow_grid() if args.grid == "narrow" else grid()
    json_path = Path(args.out).with_suffix(".json")
    if args.report_only:
        saved = json.loads(json_path.read_text())
        data, engine_label = saved["collections"], saved["engine"]
    else:
        prov = provision("opensearch", url=args.url, use_docker=False, progress=True)
        engine = Engine.connect(prov.options())
        engine_label = engine.info.label
        data = {}
        for name in names:
            print(f"{name}: running the strategies ...", file=sys.stderr)
            data[name] = collect(engine, Path(args.data) / name, settings,
                                 keep=Path(args.cache) if args.cache else None)
        json_path.write_text(json.dumps({"engine": engine_label, "collections": data}, indent=1) + "\n")
    names = [n for n in names if n in data]
    labels = [label(p) for p in settings]

    def gain(s: str, c: str, part: str) -> float:
        return 100.0 * (float(data[c]["scores"][s][part]) - float(data[c]["strongest_bm25"][part]))

    def choose(cols: list[str]) -> str:
        return max(labels, key=lambda s: (round(min(gain(s, c, "tune") for c in cols), 9),
                                          float(np.mean([gain(s, c, "tune") for c in cols]))))

    best = choose(names)
    shipped = label(PipelineParams())
    lines = ["# Hybrid pipeline: choosing the defaults", "",
             f"Command: `python benchmarks/tune_hybrid.py --data <folder of the collections>"
             f"{' --grid narrow' if args.grid == 'narrow' else ''}`. Engine: "
             f"{engine_label}; {len(settings)} settings; nDCG@10 gains in points over the strongest BM25 "
             "row of each part.", "",
             "Rule: the largest worst-case gain over the tuning parts (SciFact: its training judgments; the "
             "others: the fixed half `test:tune`), the mean breaking ties.", "",
             f"Chosen: **{best}**. Shipped (`PipelineParams()`): **{shipped}**.", "",
             "| collection | tune | held-out | whole test | leave-one-out choice on the others | its test gain |",
             "|---|---:|---:|---:|---|---:|"]
    loco = []
    for c in names:
        if len(names) < 2:
            break
        pick = choose([n for n in names if n != c])
        loco.append(gain(pick, c, "test"))
        lines.append(f"| {c} | {gain(shipped, c, 'tune'):+.2f} | {gain(shipped, c, 'heldout'):+.2f} | "
                     f"{gain(shipped, c, 'test'):+.2f} | {pick} | {loco[-1]:+.2f} |")
    for part in ("tune", "heldout", "test"):
        g = [gain(shipped, c, part) for c in names]
        lines.append(f"\nShipped, {part}: mean {np.mean(g):+.2f}, worst {min(g):+.2f}.")
    if loco:
        lines.append(f"\nLeave-one-collection-out (test): mean {np.mean(loco):+.2f}, worst {min(loco):+.2f}.")
    lines += ["", "Every setting (tuning parts: worst and mean gain; whole test sets: mean):", "",
              "| setting | tune worst | tune mean | test mean |", "|---|---:|---:|---:|"]
    for s in sorted(labels, key=lambda s: -min(gain(s, c, "tune") for c in names)):
        lines.append(f"| {s} | {min(gain(s, c, 'tune') for c in names):+.2f} | "
                     f"{np.mean([gain(s, c, 'tune') for c in names]):+.2f} | "
                     f"{np.mean([gain(s, c, 'test') for c in names]):+.2f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
