"""Run the judged queries of a collection through the engine and esbridge's scorers.

For every query, once:

1. the query is analysed by the index's own analyzers (:meth:`Reranker.analyze`);
2. the first stage, the engine's BM25 with Pyserini's parameters (k1 = 0.9,
   b = 0.4) on the combined field, returns the top ``window`` hits; their order
   by the engine's ``_score`` is the **engine-bm25-pyserini** baseline;
3. the same query on a second index of the same corpus with the engine's
   default similarity (k1 = 1.2, b = 0.75) gives the **engine-bm25-default**
   baseline;
4. each scorer's :class:`~esbridge.rerank.Reranker` ranks the first stage's
   hits (:meth:`Reranker.rank`, term vectors shared through one cache);
5. with the hybrid pipeline, the engines' own hybrid search is the **engine-hybrid-minmax** and
   **engine-hybrid-rrf** baselines: the engine's BM25 list (its default similarity) and an exact
   kNN over one vector per document with the pipeline's model, each cut to its top 100, fused
   with OpenSearch's and with Elasticsearch's arithmetic (:mod:`esbridge.hybrid.engine_style`).

Every ranking is ordered by score descending; equal scores keep the first stage's
order (:func:`~esbridge.rerank.rank_order`), the rule ``esbridge search`` and
``esbridge rescore`` follow, so a command ranks a query as the others do.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from esbridge.augment import AugmentationSpec
from esbridge.engine.client import Engine
from esbridge.errors import ConfigurationError, EngineError
from esbridge.evaluation.datasets import BeirDataset, DatasetError, Part, Query, SplitSpec, file_sha256
from esbridge.evaluation.indexing import ENGINE_DEFAULT_BM25, PYSERINI_BM25, ensure_index, index_name
from esbridge.evaluation.metrics import MEASURES, mean_metrics, per_query_metrics
from esbridge.evaluation.trecfiles import RunFile, Topic
from esbridge.features.cache import TermVectorCache
from esbridge.hybrid import engine_style
from esbridge.hybrid.fusion import RankedList
from esbridge.hybrid.pipeline import STRATEGIES, HybridSearcher, PipelineParams, PipelineResult
from esbridge.index.definitions import VectorField
from esbridge.index.facts import index_similarity, index_uuids
from esbridge.jsoninput import parse_json
from esbridge.rerank import FirstStage, Ranking, Reranker, SharedAnalysis
from esbridge.scoring import get_scorer
from esbridge.semantic.spec import VECTOR_PLACES

__all__ = [
    "BASELINE_DEFAULT",
    "BASELINE_INDEX",
    "BASELINE_PYSERINI",
    "ENGINE_HYBRIDS",
    "HYBRID",
    "PIPELINE_SYSTEMS",
    "EvalConfig",
    "EvalResult",
    "SystemRun",
    "SystemSet",
    "parse_param_overrides",
    "run_evaluation",
    "run_index_evaluation",
]

#: The engine's own BM25 ranking on the evaluation index (k1 = 0.9, b = 0.4).
BASELINE_PYSERINI = "engine-bm25-pyserini"
#: The engine's own BM25 ranking with its default similarity (k1 = 1.2, b = 0.75).
BASELINE_DEFAULT = "engine-bm25-default"
#: The engine's own BM25 ranking of an existing index, with the index's similarity.
BASELINE_INDEX = "engine-bm25"
#: The hybrid pipeline's fused ranking.
HYBRID = "hybrid"
#: The systems of the hybrid pipeline: its fused ranking and two of its strategies alone (the
#: third, lexical, is the row of the pipeline's scorer).
PIPELINE_SYSTEMS = (HYBRID, "semantic", "keyword")
#: The engines' own hybrid search, measured beside the pipeline (:mod:`esbridge.hybrid.engine_style`).
ENGINE_HYBRIDS = (engine_style.ENGINE_HYBRID_MINMAX, engine_style.ENGINE_HYBRID_RRF)


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
        pipeline_strategies: with the pipeline, also measure its semantic and keyword
            strategies alone (else only the fused ranking).
        augmentation: weighted variants of the queries for the rerankers (weighted query
            augmentation, :class:`~esbridge.augment.AugmentationSpec`): each reranker scores
            the union of the query's and its variants' first-stage candidates with
            ``w_0 · score(query) + Σ_i w_i · score(variant_i)``.  The engine's BM25 rows and
            the hybrid pipeline rank the original queries.  ``None``: no augmentation.
        fields: the text fields the rerankers read (:class:`~esbridge.rerank.Reranker`'s
            ``fields``; default all of an esbridge index's, or those found in a plain index).
        engine_hybrid_depth: with the pipeline and a baseline, also measure the engines' own hybrid
            search (:mod:`esbridge.hybrid.engine_style`), each list cut to this many documents;
            ``0``: not measured.
        vectors: with the pipeline and a collection, where the evaluation index keeps its passage
            vectors (:func:`~esbridge.semantic.engine_vectors.new_vector_field`): ``auto`` in the
            engine wherever it can search them, ``engine`` or ``disk``.
        vector_quantization: ``None``, ``"int8"`` or ``"bbq"``: the engine quantizes the vectors it
            searches (:attr:`~esbridge.index.VectorField.quantization`).
        vector_oversample: with a quantized Elasticsearch field, the nearest by the quantized
            vectors gathered per ``k`` and scored again by the floats
            (:attr:`~esbridge.index.VectorField.oversample`); ``None``: the engine's default.
    """

    scorers: tuple[str, ...]
    split: SplitSpec = field(default_factory=lambda: SplitSpec("test"))
    window: int = 1000
    params: Mapping[str, Any] = field(default_factory=dict)
    baselines: bool = True
    index_prefix: str = "esbridge-eval"
    reindex: bool = False
    progress: bool = False
    field_weights: Mapping[str, float] | None = None
    pipeline: PipelineParams | None = None
    pipeline_strategies: bool = True
    augmentation: AugmentationSpec | None = None
    fields: tuple[str, ...] | None = None
    engine_hybrid_depth: int = engine_style.DEPTH
    vectors: str = "auto"
    vector_quantization: str | None = None
    vector_oversample: float | None = None

    def __post_init__(self) -> None:
        if self.vectors not in VECTOR_PLACES:
            raise ConfigurationError(f"vectors must be one of {', '.join(VECTOR_PLACES)}, got {self.vectors!r}")
        if isinstance(self.engine_hybrid_depth, bool) or not isinstance(self.engine_hybrid_depth, int) \
                or self.engine_hybrid_depth < 0:
            raise ConfigurationError(f"the engine-style hybrid's depth must be an integer >= 0 (0: not measured), "
                                     f"got {self.engine_hybrid_depth!r}")
        if self.augmentation is not None and not self.scorers:
            raise ConfigurationError("query augmentation applies to esbridge's rerankers; give at least one scorer")
        if self.window < 1:
            raise ConfigurationError(f"window must be >= 1, got {self.window}")
        if len(set(self.scorers)) != len(self.scorers):
            raise ConfigurationError(f"scorers are repeated: {list(self.scorers)}")
        for name in self.scorers:
            if name in (BASELINE_PYSERINI, BASELINE_DEFAULT, BASELINE_INDEX, *PIPELINE_SYSTEMS, *ENGINE_HYBRIDS):
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
            stage), ``"semantic"``, ``"keyword"`` (a pipeline strategy alone), ``"pipeline"``
            or ``"external"`` (a run file given by the user).
        ranking: ``{qid: [doc_id, ...]}`` best first.
        scores: ``{qid: [score, ...]}`` aligned with ``ranking``.
        params: what produced the ranking (scorer and its parameters, pipeline parameters,
            the run file's name and SHA-256), for the JSON summary.
    """

    name: str
    description: str
    kind: str
    ranking: dict[str, list[str]] = field(default_factory=dict)
    scores: dict[str, list[float]] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class EvalResult:
    """Runs, per-query measures and means of every system on one collection and split.

    Attributes:
        engine_info: the engine's distribution, version and Lucene version.
        first_stage: how candidates were found (query, field, index, similarity).
        fingerprint: what was measured: SHA-256 of the collection's or the user's files
            (corpus, queries or topics, judgments) and one SHA-256 over them all.
        notes: what the reader must know about coverage: topics without judgments, judged
            queries without a topic, run files' queries that were not measured.
        baselines: the systems the others are compared with (default: those of kind
            ``baseline``, else ``bm25``).
        source: ``dataset`` (a BEIR-layout collection; ``split`` is its split) or ``index``
            (an existing index; ``split`` is the judgments file's name).
    """

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
    engine_info: dict[str, Any] = field(default_factory=dict)
    first_stage: dict[str, Any] = field(default_factory=dict)
    fingerprint: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    baselines: list[str] | None = None
    source: str = "dataset"
    _significance: dict[str, Any] | None = field(default=None, repr=False)

    def reference_systems(self) -> list[str]:
        """The baselines the other systems are compared with."""
        if self.baselines is not None:
            return [b for b in self.baselines if b in self.systems]
        found = [n for n, s in self.systems.items() if s.kind == "baseline"]
        return found or (["bm25"] if "bm25" in self.systems else [])

    def significance(self) -> dict[str, Any]:
        """Every system against every baseline on every measure
        (:func:`esbridge.evaluation.significance.compare_systems`), computed once."""
        if self._significance is None:
            from esbridge.evaluation.significance import compare_systems

            self._significance = compare_systems(self.per_query, self.queries, list(self.systems),
                                                 self.reference_systems(), (*MEASURES, "combined_score"))
        return self._significance

    def to_json(self, *, run_depth: int | None = None, command: str | None = None) -> dict[str, Any]:
        """``{"dataset", "split", "queries", "results": {system: {measure: value}}}``, then what
        produced them: ``esbridge_version``, ``engine``, ``index``, ``window``, ``run_depth``,
        ``first_stage``, ``systems`` (kind, description and parameters of each), ``baselines``,
        ``significance``, ``fingerprint``, ``notes`` and ``command``."""
        from esbridge.version import __version__

        return {
            "dataset": self.dataset,
            "split": self.split,
            "queries": len(self.queries),
            "results": {
                name: {k: float(self.means[name][k]) for k in (*MEASURES, "combined_score")}
                for name in self.systems
            },
            "esbridge_version": __version__,
            "engine": {"label": self.engine, **self.engine_info},
            "index": self.index,
            "window": self.window,
            "run_depth": run_depth,
            "first_stage": self.first_stage,
            "systems": {name: {"kind": run.kind, "description": run.description, "params": run.params}
                        for name, run in self.systems.items()},
            "baselines": self.reference_systems(),
            "significance": self.significance(),
            "fingerprint": self.fingerprint,
            "notes": list(self.notes),
            "command": command,
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
            value = parse_json(raw, f"--param {item!r}")
        except json.JSONDecodeError:
            value = raw
        grouped.setdefault(scorer, {})[name] = value
    out: dict[str, Any] = {}
    for scorer, overrides in grouped.items():
        try:
            out[scorer] = get_scorer(scorer).make_params(**overrides)
        except (TypeError, ValueError) as err:
            raise ConfigurationError(f"--param: {err}") from err  # the message names the scorer
    return out


def jsonable(value: Any) -> Any:
    """Parameters as JSON values: dataclasses as objects, enums as their values, tuples as lists."""
    import dataclasses
    import math
    from enum import Enum

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Enum):
        return jsonable(value.value)
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return jsonable(value.item())
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


class SystemSet:
    """The systems of an evaluation over one index, ranking one query at a time.

    For every query, once: the query is analysed by the index's analyzers (shared by the
    rerankers whose channels it covers); the first stage (:meth:`Reranker.fetch_candidates`)
    returns the top ``window`` hits, whose engine order is the baseline row; each scorer's
    :class:`~esbridge.rerank.Reranker` ranks those hits (:meth:`Reranker.rank`, term vectors
    shared through one cache); and the hybrid pipeline (:class:`HybridSearcher`) runs.
    ``esbridge eval`` and ``esbridge run`` rank through this one path, so a run file written by
    one is the other's.

    Args:
        engine, index: where to search.
        config: scorers, window, parameters and pipeline (``config.baselines`` is not read:
            ``baseline`` says whether the engine's own order is kept).
        baseline: the name of the engine's first-stage ranking row (``None``: not kept).
        baseline_description, baseline_params: that row's description and parameters.
        default_index: a second index of the same corpus with the engine's default BM25,
            searched with the same query for :data:`BASELINE_DEFAULT`.
        cache: the term-vector cache shared by the rerankers.
    """

    def __init__(self, engine: Engine, index: str, config: EvalConfig, *, baseline: str | None = None,
                 baseline_description: str = "", baseline_params: Mapping[str, Any] | None = None,
                 default_index: str | None = None, cache: TermVectorCache | None = None) -> None:
        self.engine = engine
        self.index = index
        self.config = config
        self.baseline = baseline
        self.default_index = default_index
        cache = cache if cache is not None else TermVectorCache(max_entries=50_000)
        self.rerankers = [Reranker(engine, index, scorer=name, params=config.params.get(name), window=config.window,
                                   vector_cache=cache, field_weights=config.field_weights, fields=config.fields)
                          for name in config.scorers]
        self.first: Reranker | None = None
        if self.rerankers or baseline is not None or default_index is not None:
            # the first stage needs an analysed query even with no scorer: a BM25 reranker provides it
            self.first = self.rerankers[0] if self.rerankers else Reranker(
                engine, index, scorer="bm25", window=config.window, vector_cache=cache, fields=config.fields)
            limit = self.first.max_result_window()
            if config.window > limit:
                raise ConfigurationError(f"window {config.window} is above index.max_result_window ({limit}) of "
                                         f"{index!r}; lower --window")
        self._prep = SharedAnalysis(self.rerankers or ([self.first] if self.first is not None else []))

        self.systems: dict[str, SystemRun] = {}
        if baseline is not None:
            self.systems[baseline] = SystemRun(baseline, baseline_description, "baseline",
                                               params=dict(baseline_params or {}))
        if default_index is not None:
            k1, b = ENGINE_DEFAULT_BM25
            self.systems[BASELINE_DEFAULT] = SystemRun(
                BASELINE_DEFAULT, f"{engine.info.label} BM25 k1=1.2 b=0.75 (the engine's default)", "baseline",
                params={"similarity": {"type": "BM25", "k1": k1, "b": b}, "index": default_index,
                        "window": config.window})
        aug = config.augmentation
        self._variants = aug.bind(self.first) if aug is not None and self.first is not None else None
        for rr in self.rerankers:
            description = f"esbridge {rr.scorer} reranking the top {config.window} of the first stage"
            params = {"scorer": rr.scorer, "scorer_params": jsonable(rr.params), "window": config.window,
                      "field_weights": jsonable(config.field_weights)}
            if aug is not None:
                description += f" and of each query variant, {aug.label()}"
                params["augmentation"] = jsonable(aug.describe())
            self.systems[rr.scorer] = SystemRun(rr.scorer, description, "rerank", params=params)

        self.searcher: HybridSearcher | None = None
        #: one vector per document, for the engines' own hybrid rows (``None``: not measured)
        self.document_vectors: Any = None
        #: the hybrid pipeline's strategies and fusion for the last query :meth:`run_query` ranked
        self.pipeline_result: PipelineResult | None = None
        if config.pipeline is not None:
            pp = config.pipeline
            searcher = HybridSearcher(
                engine, index, pp, progress=config.progress,
                reranker=Reranker(engine, index, scorer=pp.scorer, window=pp.window, vector_cache=cache,
                                  params=pp.make_scorer_params(), fields=config.fields))
            self.searcher = searcher
            _ = searcher.vectors  # build or check the semantic index before the queries
            encoder = searcher.vectors.encoder.name
            kept = getattr(searcher.vectors, "type", None)  # the engine's vector field type, or on disk
            params = {"pipeline": jsonable(pp), "encoder": encoder,
                      "vectors": f"in the engine ({kept}, HNSW)" if kept else "on disk (exact search)"}
            if config.pipeline_strategies:
                how = f"the engine's kNN search ({kept}, HNSW)" if kept else "exact cosine over every document"
                self.systems["semantic"] = SystemRun(
                    "semantic", f"esbridge semantic strategy: {encoder}, {how}, top {pp.semantic_depth}",
                    "semantic", params=params)
                kw = (f"the narrative's TopicRank keyphrases (none without one), {pp.scorer} over the top "
                      f"{pp.keyword.depth}" if pp.keyword.extractor == "topicrank" else
                      f"pseudo-relevance feedback from the top {pp.keyword.fb_docs} of {pp.scorer}, engine BM25")
                self.systems["keyword"] = SystemRun("keyword", f"esbridge keyword strategy: {kw}", "keyword",
                                                    params=params)
            described = searcher.describe()  # calibrates the weights on the index first, when they are
            weights = ", ".join(f"{k} {v:.3g}" for k, v in described["weights"].items())
            how = " (weights measured on the index)" if "calibration" in described else ""
            if pp.document_feedback and pp.document_lists:
                how += (f"; each whole-document list run again from the fused top {pp.document_feedback} "
                        f"(beta {pp.document_beta:g}, share {pp.document_feedback_share:g})")
            self.systems[HYBRID] = SystemRun(HYBRID, f"esbridge hybrid pipeline: {pp.fusion.value} fusion of {weights}"
                                             f"{how} (lexical = {pp.scorer} over the top {pp.window})", "pipeline",
                                             params={**params, "fusion": jsonable(described)})
            if config.engine_hybrid_depth and (baseline is not None or default_index is not None):
                self._engine_hybrid_systems(searcher, baseline, baseline_params, default_index)
        # the baselines first, in the order they were added (the tables list the systems in this order)
        self.systems = dict(sorted(self.systems.items(), key=lambda item: item[1].kind != "baseline"))

    def _engine_hybrid_systems(self, searcher: HybridSearcher, baseline: str | None,
                               baseline_params: Mapping[str, Any] | None, default_index: str | None) -> None:
        """The engines' own hybrid rows: their BM25 list is the default-similarity baseline's (else the
        first stage's), their kNN list an exact search over the pipeline's whole-document vectors."""
        config = self.config
        k = config.engine_hybrid_depth
        encoder = searcher.vectors.encoder
        # the pipeline's own whole-document vectors (its w_document list reads the same ones)
        self.document_vectors = searcher.document_vectors
        if default_index is not None:
            k1, b = ENGINE_DEFAULT_BM25
            bm25: dict[str, Any] = {"system": BASELINE_DEFAULT, "index": default_index,
                                    "similarity": {"type": "BM25", "k1": k1, "b": b}}
        else:
            bm25 = {"system": baseline, **{key: v for key, v in (baseline_params or {}).items() if key != "window"}}
        max_tokens = getattr(encoder, "max_tokens", None)
        params = {"depth": k, "bm25": bm25,
                  "knn": {"model": encoder.name, "vectors": "one per document", "max_tokens": max_tokens,
                          "search": "exact cosine over every document"},
                  "computed": "client-side: the two lists from the engine and esbridge's exact kNN, fused with the "
                              "engine's arithmetic"}
        lists = (f"the engine's BM25 ({bm25['system']}) and an exact kNN over one {encoder.name} vector per document"
                 f"{f' (its first {max_tokens} word pieces)' if max_tokens else ''}, each list's top {k}")
        self.systems[engine_style.ENGINE_HYBRID_MINMAX] = SystemRun(
            engine_style.ENGINE_HYBRID_MINMAX,
            f"the engine's own hybrid as OpenSearch fuses it: {lists}, min-max normalised, arithmetic mean "
            "(the normalization-processor's defaults); computed client-side", "baseline",
            params={**params, "fusion": {"normalization": "min_max", "combination": "arithmetic_mean",
                                         "weights": [1.0, 1.0], "min_score": engine_style.MIN_SCORE}})
        self.systems[engine_style.ENGINE_HYBRID_RRF] = SystemRun(
            engine_style.ENGINE_HYBRID_RRF,
            f"the engine's own hybrid as Elasticsearch fuses it: {lists}, reciprocal rank fusion with k = "
            f"{engine_style.RANK_CONSTANT:g} (the rrf retriever's default); computed client-side", "baseline",
            params={**params, "fusion": {"method": "rrf", "rank_constant": engine_style.RANK_CONSTANT,
                                         "rank_window_size": k}})

    def first_stage(self) -> dict[str, Any]:
        """How the candidates are found, for the JSON summary."""
        if self.first is None:
            return {"query": None, "index": self.index}
        layout = self.first.layout
        assert layout is not None
        fs = self.first.first_stage
        return {"query": fs.value if isinstance(fs, FirstStage) else jsonable(fs),
                "field": ",".join(layout.indexed(layout.combined, "base")), "index": self.index,
                "window": self.config.window}

    def run_query(self, qid: str, text: str, *, narrative: str | None = None) -> None:
        """Rank query ``qid`` (``text``) with every system; the rankings go to :attr:`systems`.

        ``narrative``: the topic's narrative, for the hybrid pipeline's keyword strategy.

        Raises:
            EngineError: a first-stage hit vanished before it could be rescored.
        """
        if self.first is not None:
            prepared = self._prep.analyse(text)
            fs_prepared = prepared[self.first.scorer]
            variants = self._variants(qid, text) if self._variants is not None else None
            var_prepared = [self._prep.analyse(v) for v, _ in variants or ()]
            if variants is None:
                hits = self.first.fetch_candidates(fs_prepared, text, window=self.config.window)["hits"]["hits"]
                first_hits = hits
            else:
                # the query's and every variant's candidates, one request; the baselines keep the query's own
                union = self.first.fetch_union(
                    [(fs_prepared, text), *((vp[self.first.scorer], v) for vp, (v, _) in zip(var_prepared, variants))],
                    window=self.config.window)
                hits, first_hits = union.hits, union.responses[0]["hits"]["hits"]
            if self.baseline is not None:
                self._keep(self.baseline, qid, Ranking.of([str(h["_id"]) for h in first_hits],
                                                          [float(h["_score"]) for h in first_hits]))
            engine_bm25 = first_hits
            if self.default_index is not None:
                dhits = self.engine.search(self.default_index, {
                    "size": self.config.window, "query": self.first.first_stage_query(fs_prepared, text),
                    "_source": False, "track_total_hits": False})["hits"]["hits"]
                self._keep(BASELINE_DEFAULT, qid, Ranking.of([str(h["_id"]) for h in dhits],
                                                             [float(h["_score"]) for h in dhits]))
                engine_bm25 = dhits
            if self.document_vectors is not None:
                k = self.config.engine_hybrid_depth
                if self.config.window < k:  # the BM25 list is k deep whatever the window
                    engine_bm25 = self.engine.search(self.default_index or self.index, {
                        "size": k, "query": self.first.first_stage_query(fs_prepared, text), "_source": False,
                        "track_total_hits": False})["hits"]["hits"]
                self._engine_hybrid(qid, text, engine_bm25)
            w0 = self.config.augmentation.original_weight if self.config.augmentation is not None else 1.0
            for rr in self.rerankers:
                ranking = rr.rank(prepared[rr.scorer], hits, original_weight=w0, variants=None if variants is None
                                  else [(vp[rr.scorer], w) for vp, (_, w) in zip(var_prepared, variants)])
                if ranking.dropped:
                    raise EngineError(f"{len(ranking.dropped)} first-stage hit(s) of query {qid!r} are no longer in "
                                      f"{self.index!r} (first: {ranking.dropped[0]}); is something writing to the "
                                      "index?", index=self.index)
                self._keep(rr.scorer, qid, ranking)
        if self.searcher is not None:
            res = self.searcher.run(text, narrative=narrative,
                                    strategies=STRATEGIES if self.config.pipeline_strategies else None)
            self.pipeline_result = res
            if self.config.pipeline_strategies:
                for name in ("semantic", "keyword"):
                    self._keep(name, qid, Ranking.of(list(res.lists[name].ids), res.lists[name].scores))
            self._keep(HYBRID, qid, Ranking.of(res.ids, res.scores))

    def _engine_hybrid(self, qid: str, text: str, bm25_hits: Sequence[Mapping[str, Any]]) -> None:
        """Rank query ``qid`` with the engines' own hybrid search (both fusions)."""
        k = self.config.engine_hybrid_depth
        vectors = self.document_vectors
        knn = vectors.search(vectors.embed_query(text), k)
        top = bm25_hits[:k]
        lexical = RankedList([str(h["_id"]) for h in top], np.array([float(h["_score"]) for h in top]))
        for name, (ids, scores) in engine_style.engine_hybrid(lexical, RankedList(knn.ids, knn.scores),
                                                              depth=k).items():
            self._keep(name, qid, Ranking.of(ids, scores))

    def _keep(self, system: str, qid: str, ranking: Ranking) -> None:
        """Store a system's ranking of query ``qid``."""
        self.systems[system].ranking[qid] = ranking.ids
        self.systems[system].scores[qid] = [float(s) for s in ranking.scores]

    def close(self) -> None:
        """Stop the rerankers' and the pipeline's worker threads."""
        if self.searcher is not None:
            self.searcher.close()
        for rr in self.rerankers:
            rr.close()
        if self.first is not None and self.first not in self.rerankers:
            self.first.close()

    def __enter__(self) -> SystemSet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _some(ids: Sequence[str], limit: int = 10) -> str:
    shown = ", ".join(ids[:limit])
    return shown + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


def add_runs(systems: dict[str, SystemRun], runs: Sequence[RunFile], qrels: Mapping[str, Any],
             queries: Sequence[str]) -> list[str]:
    """Add externally produced runs to ``systems`` as systems of kind ``external``; return notes on
    the queries of each run that are not measured (not judged, or judged but not evaluated) and
    the evaluated queries a run has no results for (they count 0, as in ``trec_eval -c``)."""
    notes = []
    evaluated = set(queries)
    for run in runs:
        name = run.name
        if name in systems:
            stem = run.path.name
            name = f"{name} ({stem})" if f"{name} ({stem})" not in systems else f"{name} ({run.path})"
        unjudged = [q for q in run.ranking if q not in qrels]
        outside = [q for q in run.ranking if q in qrels and q not in evaluated]
        absent = [q for q in queries if q not in run.ranking]
        where = f"run {name!r} ({run.path})"
        if unjudged:
            notes.append(f"{where}: {len(unjudged)} of its {len(run.ranking)} query ids "
                         f"{'is' if len(unjudged) == 1 else 'are'} not in the judgments, not measured: "
                         f"{_some(unjudged)}")
        if outside:
            notes.append(f"{where}: {_count(len(outside), 'query id', 'query ids')} judged but not among the "
                         f"evaluated queries, not measured: {_some(outside)}")
        if absent:
            notes.append(f"{where}: no results for {len(absent)} of the {len(queries)} evaluated queries, which "
                         f"count 0 on every measure: {_some(absent)}")
        systems[name] = SystemRun(
            name, f"run file `{run.path.name}` (tag {', '.join(run.tags)}), ordered as trec_eval orders it",
            "external",
            ranking={q: run.ranking[q] for q in queries if q in run.ranking},
            scores={q: run.scores[q] for q in queries if q in run.scores},
            params={"file": run.path.name, "sha256": run.sha256, "tags": list(run.tags),
                    "order": "score descending, then document id descending (trec_eval)"})
    return notes


def augmentation_notes(config: EvalConfig, queries: Sequence[tuple[str, str]]) -> list[str]:
    """What the reader must know about the query augmentation of ``config``: which rows it
    applies to, and the entries of its file that match none of ``queries`` (``(id, text)``)."""
    aug = config.augmentation
    if aug is None:
        return []
    notes = [f"{aug.label()} applies to the rerankers ({', '.join(config.scorers)}); the engine's BM25 rows"
             + (" and the hybrid pipeline" if config.pipeline is not None else "") + " rank the original queries"]
    unused = aug.unused_keys(queries)
    if unused:
        notes.append(f"{_count(len(unused), 'entry', 'entries')} of {aug.source} match no evaluated query id or "
                     f"text, not used: {_some(unused)}")
    return notes


def _combined_sha(files: Mapping[str, str]) -> str:
    import hashlib

    text = "".join(f"{name}\t{sha}\n" for name, sha in sorted(files.items()))
    return hashlib.sha256(text.encode()).hexdigest()


def _engine_info(engine: Engine) -> dict[str, Any]:
    return {"distribution": engine.distribution, "version": engine.info.number,
            "lucene_version": engine.info.lucene_version}


def _measure(systems: Mapping[str, SystemRun], qrels: Mapping[str, Mapping[str, int]],
             qids: Sequence[str]) -> tuple[dict[str, dict[str, dict[str, float]]], dict[str, dict[str, float]]]:
    per_query = {name: per_query_metrics(qrels, run.ranking) for name, run in systems.items()}
    means = {name: mean_metrics(pq, qids) for name, pq in per_query.items()}
    return per_query, means


def run_evaluation(engine: Engine, dataset: BeirDataset, config: EvalConfig, *,
                   runs: Sequence[RunFile] = ()) -> EvalResult:
    """Index ``dataset`` if needed, run every judged query of ``config.split``, measure.

    ``runs``: run files produced elsewhere, measured beside esbridge's systems.

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
    vector = None
    documents: list[VectorField] = []
    if config.pipeline is not None and config.vectors != "disk":
        from esbridge.semantic.engine_vectors import new_document_vector_fields, new_vector_field
        from esbridge.semantic.models import load_encoder

        pp = config.pipeline
        encoder = load_encoder(pp.model)
        vector = new_vector_field(engine, encoder, config.vectors, quantization=config.vector_quantization,
                                  oversample=config.vector_oversample)
        documents = new_document_vector_fields(engine, vector, ([encoder] if pp.w_document > 0 else [])
                                               + [load_encoder(m) for m in pp.ensemble])
    index = ensure_index(engine, dataset, index_name(config.index_prefix, dataset, PYSERINI_BM25),
                         bm25=PYSERINI_BM25, reindex=config.reindex, progress=config.progress,
                         corpus_sha256=corpus_sha, vector=vector, document_vectors=documents)
    default_index = None
    if config.baselines:
        default_index = ensure_index(engine, dataset,
                                     index_name(config.index_prefix, dataset, ENGINE_DEFAULT_BM25),
                                     bm25=ENGINE_DEFAULT_BM25, reindex=config.reindex,
                                     progress=config.progress, corpus_sha256=corpus_sha)
    cache = TermVectorCache(max_entries=max(50_000, 2 * dataset.corpus_size()))
    k1, b = PYSERINI_BM25
    system_set = SystemSet(
        engine, index, config, cache=cache, default_index=default_index,
        baseline=BASELINE_PYSERINI if config.baselines else None,
        baseline_description=f"{engine.info.label} BM25 k1=0.9 b=0.4 (Pyserini's), the first stage",
        baseline_params={"similarity": {"type": "BM25", "k1": k1, "b": b}, "index": index, "window": config.window})

    from tqdm import tqdm

    with system_set:
        for q in tqdm(queries, desc=f"eval {dataset.name}/{config.split}", unit="query",
                      disable=not config.progress, file=sys.stderr):
            system_set.run_query(q.id, q.text)
    systems = system_set.systems
    qids = [q.id for q in queries]
    notes = augmentation_notes(config, [(q.id, q.text) for q in queries]) + add_runs(systems, runs, qrels, qids)
    per_query, means = _measure(systems, qrels, qids)
    files = {"corpus.jsonl": corpus_sha, "queries.jsonl": file_sha256(dataset.path / "queries.jsonl"),
             f"qrels/{config.split.name}.tsv": file_sha256(dataset.path / "qrels" / f"{config.split.name}.tsv")}
    fingerprint: dict[str, Any] = {"sha256": _combined_sha(files), "files": files,
                                   "documents": dataset.corpus_size(), "split": str(config.split)}
    if config.split.part is not Part.ALL:
        fingerprint["half_seed"] = config.split.seed
    first_stage = {**system_set.first_stage(), "similarity": {"type": "BM25", "k1": k1, "b": b}}
    return EvalResult(
        dataset=dataset.name, split=str(config.split), queries=qids, window=config.window,
        engine=engine.info.label, index=index, systems=systems, per_query=per_query, means=means,
        seconds=time.perf_counter() - started, engine_info=_engine_info(engine), first_stage=first_stage,
        fingerprint=fingerprint, notes=notes,
    )


def run_index_evaluation(engine: Engine, index: str, topics: Sequence[Topic],
                         qrels: Mapping[str, Mapping[str, int]], config: EvalConfig, *,
                         topic_field: str = "title", narrative: bool = False, runs: Sequence[RunFile] = (),
                         topics_file: Path | None = None, qrels_file: Path | None = None) -> EvalResult:
    """Measure an existing index (created by esbridge) with the user's topics and judgments.

    The judged topics are run through the engine's BM25 (the index's own similarity, row
    :data:`BASELINE_INDEX`), each scorer's rerank of its top ``config.window`` and the hybrid
    pipeline, as :func:`run_evaluation` does; ``runs`` are measured beside them.  Topics
    without judgments, judged queries without a topic and run queries that are not measured
    are listed in the result's ``notes``.

    Args:
        topic_field: the topics' field used as query text (``title``, ``desc``, ``title+desc``).
        narrative: give the hybrid pipeline's keyword strategy each topic's narrative.
        topics_file, qrels_file: the files, for the fingerprint and the notes.

    Raises:
        IndexNotFoundError: ``index`` does not exist.
        DatasetError: no topic is judged.
    """
    from esbridge.errors import IndexNotFoundError

    if not config.scorers and not config.baselines and config.pipeline is None:
        raise ConfigurationError("nothing to evaluate: give at least one scorer or keep the baselines")
    if not engine.index_exists(index):
        raise IndexNotFoundError(f"index {index!r} does not exist at {engine.options.display_url}; create it with "
                                 "`esbridge index`", index=index)
    started = time.perf_counter()
    qname = str(qrels_file) if qrels_file else "the judgments"
    tname = str(topics_file) if topics_file else "the topics"
    judged = [t for t in topics if t.id in qrels]
    if not judged:
        raise DatasetError(f"none of the {len(topics)} topics of {tname} is judged in {qname} (topic ids: "
                           f"{_some([t.id for t in topics], 5)}; judged ids: {_some(list(qrels), 5)})")
    notes = []
    unjudged = [t.id for t in topics if t.id not in qrels]
    if unjudged:
        notes.append(f"{len(unjudged)} of the {len(topics)} topics of {tname} "
                     f"{'has' if len(unjudged) == 1 else 'have'} no judgments in {qname}, not measured: "
                     f"{_some(unjudged)}")
    topic_ids = {t.id for t in topics}
    orphans = [q for q in qrels if q not in topic_ids]
    if orphans:
        notes.append(f"{_count(len(orphans), 'judged query', 'judged queries')} of {qname} "
                     f"{'is' if len(orphans) == 1 else 'are'} not among the topics of {tname}, not measured: "
                     f"{_some(orphans)}")
    similarity = index_similarity(engine, index)
    sim_text = (f"BM25 k1={similarity['k1']:g} b={similarity['b']:g}" if similarity["type"].upper() == "BM25"
                else f"similarity {similarity['type']}")
    system_set = SystemSet(
        engine, index, config, cache=TermVectorCache(max_entries=max(50_000, 2 * engine.count(index))),
        baseline=BASELINE_INDEX if config.baselines else None,
        baseline_description=f"{engine.info.label} {sim_text} (the index's similarity), the first stage",
        baseline_params={"similarity": similarity, "index": index, "window": config.window})

    from tqdm import tqdm

    with system_set:
        for t in tqdm(judged, desc=f"eval {index}", unit="topic", disable=not config.progress, file=sys.stderr):
            system_set.run_query(t.id, t.text(topic_field), narrative=(t.narrative or None) if narrative else None)
    systems = system_set.systems
    qids = [t.id for t in judged]
    measured = {q: dict(qrels[q]) for q in qids}
    notes += augmentation_notes(config, [(t.id, t.text(topic_field)) for t in judged])
    notes += add_runs(systems, runs, qrels, qids)
    per_query, means = _measure(systems, measured, qids)
    files = {}
    if topics_file is not None:
        files[f"topics:{topics_file.name}"] = file_sha256(topics_file)
    if qrels_file is not None:
        files[f"qrels:{qrels_file.name}"] = file_sha256(qrels_file)
    try:
        uuid = ",".join(sorted(index_uuids(engine, index).values()))
    except (EngineError, KeyError, TypeError):
        uuid = ""
    documents = engine.count(index)
    fingerprint = {"sha256": _combined_sha({**files, "index_uuid": uuid, "documents": str(documents)}),
                   "files": files, "index": index, "index_uuid": uuid, "documents": documents,
                   "topic_field": topic_field, "narrative": narrative}
    first_stage = {**system_set.first_stage(), "similarity": similarity}
    for name in systems:
        if systems[name].kind in ("rerank", "baseline", "pipeline", "semantic", "keyword"):
            systems[name].params.setdefault("topic_field", topic_field)
    return EvalResult(
        dataset=index, split=qrels_file.name if qrels_file else "qrels", queries=qids, window=config.window,
        engine=engine.info.label, index=index, systems=systems, per_query=per_query, means=means,
        seconds=time.perf_counter() - started, engine_info=_engine_info(engine), first_stage=first_stage,
        fingerprint=fingerprint, notes=notes, source="index",
    )
