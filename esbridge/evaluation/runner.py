"""Run the judged queries of a collection through the engine and esbridge's scorers.

For every query, once:

1. the query is analysed by the index's own analyzers (:meth:`Reranker.analyze`);
2. the first stage, the engine's BM25 with Pyserini's parameters (k1 = 0.9,
   b = 0.4) on the combined field, returns the top ``window`` hits; their order
   by the engine's ``_score`` is the **engine-bm25-pyserini** baseline;
3. the same query on a second index of the same corpus with the engine's
   default similarity (k1 = 1.2, b = 0.75) gives the **engine-bm25-default**
   baseline;
4. each scorer's :class:`~esbridge.rerank.Reranker` rescores the first stage's
   hits (:meth:`Reranker.score_hits`, term vectors shared through one cache).

Every ranking is ordered by score, then by document id (ascending), so that
two runs give identical rankings and figures.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from esbridge.engine.client import Engine
from esbridge.errors import ConfigurationError, EngineError
from esbridge.evaluation.datasets import BeirDataset, Query, SplitSpec
from esbridge.evaluation.indexing import ENGINE_DEFAULT_BM25, PYSERINI_BM25, ensure_index, index_name
from esbridge.evaluation.metrics import MEASURES, mean_metrics, per_query_metrics
from esbridge.features.cache import TermVectorCache
from esbridge.hybrid.pipeline import STRATEGIES, HybridSearcher, PipelineParams
from esbridge.rerank import Reranker
from esbridge.scoring import get_scorer

__all__ = [
    "BASELINE_DEFAULT",
    "BASELINE_PYSERINI",
    "HYBRID",
    "PIPELINE_SYSTEMS",
    "EvalConfig",
    "EvalResult",
    "SystemRun",
    "parse_param_overrides",
    "rank_by_score",
    "run_evaluation",
]

#: The engine's own BM25 ranking on the evaluation index (k1 = 0.9, b = 0.4).
BASELINE_PYSERINI = "engine-bm25-pyserini"
#: The engine's own BM25 ranking with its default similarity (k1 = 1.2, b = 0.75).
BASELINE_DEFAULT = "engine-bm25-default"
#: The hybrid pipeline's fused ranking.
HYBRID = "hybrid"
#: The systems of the hybrid pipeline: its fused ranking and two of its strategies alone (the
#: third, lexical, is the row of the pipeline's scorer).
PIPELINE_SYSTEMS = (HYBRID, "semantic", "keyword")


@dataclass(frozen=True)
class EvalConfig:
    """What to run.

    Attributes:
        scorers: esbridge scorer names (rerankers).
        split: the judgments and queries.
        window: first-stage hits rescored (and the run depth of the baselines).
        params: per scorer, a parameter object (default: the scorer's defaults).
        baselines: also run the engine's BM25 baselines.
        index_prefix: evaluation indices are ``<prefix>-<dataset>``.
        reindex: rebuild the indices even when their content matches.
        progress: show progress bars.
        field_weights: BM25F-style per-field weights for the rerankers
            (:class:`~esbridge.rerank.Reranker`'s ``field_weights``; default all 1).
        pipeline: also run the hybrid pipeline (:class:`~esbridge.hybrid.HybridSearcher`)
            with these parameters: the systems ``semantic`` and ``keyword`` (each strategy
            alone) and ``hybrid`` (the fused ranking).  ``None``: not run.
    """

    scorers: tuple[str, ...]
    split: SplitSpec = field(default_factory=lambda: SplitSpec("test"))
    window: int = 1000
    params: Mapping[str, Any] = field(default_factory=dict)
    baselines: bool = True
    index_prefix: str = "esbridge-eval"
    reindex: bool = False
    progress: bool = True
    field_weights: Mapping[str, float] | None = None
    pipeline: PipelineParams | None = None

    def __post_init__(self) -> None:
        if self.window < 1:
            raise ConfigurationError(f"window must be >= 1, got {self.window}")
        if len(set(self.scorers)) != len(self.scorers):
            raise ConfigurationError(f"scorers are repeated: {list(self.scorers)}")
        for name in self.scorers:
            if name in (BASELINE_PYSERINI, BASELINE_DEFAULT, *PIPELINE_SYSTEMS):
                raise ConfigurationError(f"{name!r} is a baseline, always run; leave it out of the scorers")
            get_scorer(name)  # raises, listing the valid names
        unknown = sorted(set(self.params) - set(self.scorers))
        if unknown:
            raise ConfigurationError(f"parameters given for {', '.join(unknown)}, which are not among the "
                                     f"scorers {', '.join(self.scorers)}")


@dataclass
class SystemRun:
    """One system's ranking of every query.

    Attributes:
        name: scorer name, or a baseline name.
        description: one line for the report.
        kind: ``"baseline"`` (the engine's own ranking), ``"rerank"`` (a scorer over the first
            stage), ``"semantic"``, ``"keyword"`` (a pipeline strategy alone) or ``"pipeline"``.
        ranking: ``{qid: [doc_id, ...]}`` best first.
        scores: ``{qid: [score, ...]}`` aligned with ``ranking``.
    """

    name: str
    description: str
    kind: str
    ranking: dict[str, list[str]] = field(default_factory=dict)
    scores: dict[str, list[float]] = field(default_factory=dict)


@dataclass
class EvalResult:
    """Runs, per-query measures and means of every system on one collection and split."""

    dataset: str
    split: str
    queries: list[str]
    window: int
    engine: str
    index: str
    systems: dict[str, SystemRun]
    per_query: dict[str, dict[str, dict[str, float]]]
    means: dict[str, dict[str, float]]
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """``{"dataset", "split", "queries", "results": {system: {measure: value}}}``."""
        return {
            "dataset": self.dataset,
            "split": self.split,
            "queries": len(self.queries),
            "results": {
                name: {k: float(self.means[name][k]) for k in (*MEASURES, "combined_score")}
                for name in self.systems
            },
        }


def parse_param_overrides(items: Sequence[str], scorers: Sequence[str]) -> dict[str, Any]:
    """``["evolved.w_bi=0.2", "bmx.alpha=1.0"]`` -> ``{"evolved": EvolvedParams(w_bi=0.2), ...}``.

    Values are read as JSON (numbers, ``true``/``false``, ``null``), else as strings.

    Raises:
        ConfigurationError: a malformed item, a scorer not being evaluated, or an
            unknown parameter (the message lists the valid ones).
    """
    import json

    grouped: dict[str, dict[str, Any]] = {}
    for item in items:
        key, eq, raw = item.partition("=")
        scorer, dot, name = key.partition(".")
        if not (eq and dot and scorer and name):
            raise ConfigurationError(f"--param {item!r} must look like SCORER.NAME=VALUE, e.g. evolved.w_bi=0.2")
        if scorer not in scorers:
            raise ConfigurationError(f"--param {item!r}: {scorer!r} is not among the scorers {', '.join(scorers)}")
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        grouped.setdefault(scorer, {})[name] = value
    out: dict[str, Any] = {}
    for scorer, overrides in grouped.items():
        try:
            out[scorer] = get_scorer(scorer).make_params(**overrides)
        except (TypeError, ValueError) as err:
            raise ConfigurationError(f"--param for {scorer!r}: {err}") from err
    return out


def rank_by_score(ids: Sequence[str], scores: Sequence[float] | np.ndarray) -> tuple[list[str], list[float]]:
    """``ids`` ordered by score descending, then id ascending; with their scores."""
    s = np.asarray(scores, dtype=np.float64)
    if len(ids) == 0:
        return [], []
    id_rank = np.empty(len(ids), dtype=np.int64)
    id_rank[np.argsort(np.array(ids, dtype=object), kind="stable")] = np.arange(len(ids))
    order = np.lexsort((id_rank, -s))
    return [ids[i] for i in order], [float(s[i]) for i in order]


def _hits(engine: Engine, index: str, query: Mapping[str, Any], size: int,
          versions: bool) -> list[dict[str, Any]]:
    body: dict[str, Any] = {"size": size, "query": dict(query), "_source": False, "track_total_hits": False}
    if versions:
        body["seq_no_primary_term"] = True
    resp = engine.search(index, body)
    hits: list[dict[str, Any]] = resp["hits"]["hits"]
    return hits


class _SharedAnalysis:
    """Analysed queries shared between rerankers whose channels they cover."""

    def __init__(self, rerankers: Sequence[Reranker]) -> None:
        # analyse with the reranker that reads the most channels first; others reuse it
        self.order = sorted(rerankers, key=lambda r: -len(r.channels))

    def analyse(self, text: str) -> dict[str, Any]:
        done: list[tuple[frozenset[str], Any]] = []
        out: dict[str, Any] = {}
        for rr in self.order:
            need = frozenset({"base", *rr.channels})
            for have, prepared in done:
                if need <= have:
                    out[rr.scorer] = prepared
                    break
            else:
                prepared = rr.analyze(text)
                done.append((frozenset(prepared.query), prepared))
                out[rr.scorer] = prepared
        return out


def run_evaluation(engine: Engine, dataset: BeirDataset, config: EvalConfig) -> EvalResult:
    """Index ``dataset`` if needed, run every judged query of ``config.split``, measure.

    Raises:
        ConfigurationError: no scorer and no baseline, or a window above the index's
            ``max_result_window``.
        EngineError: a first-stage hit vanished before it could be rescored.
    """
    if not config.scorers and not config.baselines:
        raise ConfigurationError("nothing to evaluate: give at least one scorer or keep the baselines")
    started = time.perf_counter()
    queries: list[Query] = dataset.queries(config.split)
    qrels = dataset.qrels(config.split)
    corpus_sha = dataset.fingerprint()
    index = ensure_index(engine, dataset, index_name(config.index_prefix, dataset, PYSERINI_BM25),
                         bm25=PYSERINI_BM25, reindex=config.reindex, progress=config.progress,
                         corpus_sha256=corpus_sha)
    default_index = None
    if config.baselines:
        default_index = ensure_index(engine, dataset,
                                     index_name(config.index_prefix, dataset, ENGINE_DEFAULT_BM25),
                                     bm25=ENGINE_DEFAULT_BM25, reindex=config.reindex,
                                     progress=config.progress, corpus_sha256=corpus_sha)
    cache = TermVectorCache(max_entries=max(50_000, 2 * dataset.corpus_size()))
    rerankers = [Reranker(engine, index, scorer=name, params=config.params.get(name), window=config.window,
                          vector_cache=cache, field_weights=config.field_weights) for name in config.scorers]
    # the first stage needs an analysed query even with no scorer: a BM25 reranker provides it
    first = rerankers[0] if rerankers else Reranker(engine, index, scorer="bm25", window=config.window,
                                                    vector_cache=cache)
    limit = first.max_result_window()
    if config.window > limit:
        raise ConfigurationError(f"window {config.window} is above index.max_result_window ({limit}) of "
                                 f"{index!r}; lower --window")
    prep = _SharedAnalysis(rerankers or [first])

    systems: dict[str, SystemRun] = {}
    if config.baselines:
        systems[BASELINE_PYSERINI] = SystemRun(
            BASELINE_PYSERINI, f"{engine.info.label} BM25 k1=0.9 b=0.4 (Pyserini's), the first stage", "baseline")
        systems[BASELINE_DEFAULT] = SystemRun(
            BASELINE_DEFAULT, f"{engine.info.label} BM25 k1=1.2 b=0.75 (the engine's default)", "baseline")
    for rr in rerankers:
        systems[rr.scorer] = SystemRun(
            rr.scorer, f"esbridge {rr.scorer} reranking the top {config.window} of the first stage", "rerank")

    searcher = None
    if config.pipeline is not None:
        pp = config.pipeline
        searcher = HybridSearcher(
            engine, index, pp, progress=config.progress,
            reranker=Reranker(engine, index, scorer=pp.scorer, window=pp.window, vector_cache=cache))
        _ = searcher.vectors  # build or check the semantic index before the queries
        weights = ", ".join(f"{k} {v:g}" for k, v in pp.weights.items())
        systems["semantic"] = SystemRun("semantic", f"esbridge semantic strategy: {searcher.vectors.encoder.name} "
                                        f"cosine over every document, top {pp.semantic_depth}", "semantic")
        systems["keyword"] = SystemRun("keyword", "esbridge keyword strategy: pseudo-relevance feedback from the "
                                       f"top {pp.keyword.fb_docs} of {pp.scorer}, engine BM25", "keyword")
        systems[HYBRID] = SystemRun(HYBRID, f"esbridge hybrid pipeline: {pp.fusion.value} fusion of {weights} "
                                    f"(lexical = {pp.scorer} over the top {pp.window})", "pipeline")

    from tqdm import tqdm

    for q in tqdm(queries, desc=f"eval {dataset.name}/{config.split}", unit="query",
                  disable=not config.progress, file=sys.stderr):
        prepared = prep.analyse(q.text)
        fs_query = first.first_stage_query(prepared[first.scorer], q.text)
        hits = _hits(engine, index, fs_query, config.window, versions=True)
        ids = [str(h["_id"]) for h in hits]
        if config.baselines:
            ranked = rank_by_score(ids, [float(h["_score"]) for h in hits])
            systems[BASELINE_PYSERINI].ranking[q.id], systems[BASELINE_PYSERINI].scores[q.id] = ranked
        if default_index is not None:
            dhits = _hits(engine, default_index, fs_query, config.window, versions=False)
            ranked = rank_by_score([str(h["_id"]) for h in dhits], [float(h["_score"]) for h in dhits])
            systems[BASELINE_DEFAULT].ranking[q.id], systems[BASELINE_DEFAULT].scores[q.id] = ranked
        versions = [(int(h["_seq_no"]), int(h["_primary_term"])) if "_seq_no" in h else None for h in hits]
        for rr in rerankers:
            if not ids:
                systems[rr.scorer].ranking[q.id], systems[rr.scorer].scores[q.id] = [], []
                continue
            result, found = rr.score_hits(prepared[rr.scorer], ids, versions)
            if not all(found):
                lost = [i for i, ok in zip(ids, found) if not ok]
                raise EngineError(f"{len(lost)} first-stage hit(s) of query {q.id!r} are no longer in "
                                  f"{index!r} (first: {lost[0]}); is something writing to the index?",
                                  index=index)
            ranked = rank_by_score(ids, result.scores)
            systems[rr.scorer].ranking[q.id], systems[rr.scorer].scores[q.id] = ranked
        if searcher is not None:
            res = searcher.run(q.text, strategies=STRATEGIES)
            for name in ("semantic", "keyword"):
                lst = res.lists[name]
                systems[name].ranking[q.id], systems[name].scores[q.id] = rank_by_score(list(lst.ids), lst.scores)
            systems[HYBRID].ranking[q.id], systems[HYBRID].scores[q.id] = rank_by_score(res.ids, res.scores)

    if searcher is not None:
        searcher.close()
    for rr in rerankers:
        rr.close()
    qids = [q.id for q in queries]
    per_query = {name: per_query_metrics(qrels, run.ranking) for name, run in systems.items()}
    means = {name: mean_metrics(pq, qids) for name, pq in per_query.items()}
    return EvalResult(
        dataset=dataset.name, split=str(config.split), queries=qids, window=config.window,
        engine=engine.info.label, index=index, systems=systems, per_query=per_query, means=means,
        seconds=time.perf_counter() - started,
    )
