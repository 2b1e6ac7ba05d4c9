"""Rerank and rescore through the engine.

A :class:`Reranker` is bound to an engine, an index, a scorer and a window.

* :meth:`Reranker.search` runs the first stage (built from the engine's own
  ``_analyze`` of the query text, per channel), fetches term vectors and
  index-wide statistics for the top ``window`` hits, rescores them exactly and
  returns an engine-shaped response whose ``_score`` is esbridge's and whose
  first-stage score is kept under ``_esbridge``.
* :meth:`Reranker.rescore` does the same to any Elasticsearch or OpenSearch
  search response: the top ``window_size`` hits are reordered, the hits beyond
  the window keep their order and scores below them, as the engine's own
  rescore API does.
* Both take ``augmentations``: weighted variants of the query (or an
  :class:`~esbridge.augment.Augmenter` that makes them), scored with the same
  scorer over the same candidates and added with their weights (weighted query
  augmentation, docs/scoring.md §4.6).  ``search`` then finds the candidates of
  the query and of every variant with one ``_msearch`` and reranks their union.

Query text is never interpolated into a query string or a script: the first
stage is a ``bool`` of ``term`` clauses on the analysed tokens.

The pipeline itself lives in :class:`RerankerCore` as plans (:mod:`esbridge.engine.plan`):
generators that yield the requests they need.  :class:`Reranker` runs them with blocking
requests; :class:`esbridge.aio.AsyncReranker` runs the same plans with an asyncio client.
"""

from __future__ import annotations

import copy
import json
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, TypeVar

import numpy as np

from esbridge.augment import (
    Augmentation,
    check_weight,
    merge_queries,
    resolve_augmentations_plan,
    score_augmented,
    select_terms,
)
from esbridge.engine.client import (
    Engine,
    EngineBase,
    engine_error,
    ndjson_lines,
    path_segment,
    raise_mget_errors,
    search_plan,
)
from esbridge.engine.plan import Call, Offload, Plan, gather, run
from esbridge.errors import ConfigurationError, EngineError
from esbridge.features.cache import FeatureStore, TermVectorCache
from esbridge.features.entropy import CollectionEntropy
from esbridge.features.termvectors import QueryChannel, analyze_query_plan, build_input
from esbridge.index.definitions import VECTOR_FIELD, IndexLayout, index_meta_plan
from esbridge.index.plain import missing_channels_message, open_layout_plan
from esbridge.scoring import ScoreResult, ScoringInput, get_scorer
from esbridge.scoring.common import channels_needed

T = TypeVar("T")

#: Distinct query terms sent to the first stage at most (the engines' clause limit is 1024).
MAX_FIRST_STAGE_TERMS = 1000
#: Windows up to this size fetch ``_source`` in the first stage (one request fewer).
INLINE_SOURCE_WINDOW = 200


class FirstStage(str, Enum):
    """How candidates are found.

    ``BM25``: the engine's BM25 over the combined all-fields field (``base``
    channel), the flat BM25 of Anserini/Pyserini; on a plain index, over its text
    fields (one clause per field and term: the sum of the fields' BM25 scores).
    ``MULTI_MATCH``: BM25 ``best_fields`` over the text fields' ``base`` sub-fields.
    ``BM25F``: the engine's ``combined_fields`` over the text fields (Elasticsearch
    7.13+; an error elsewhere).
    ``CHANNELS``: a ``bool`` over the four channels of the combined field, for recall.

    A string ``"similarity:<name>"`` ranks candidates inside the engine with one of
    esbridge's scripted similarities (``bm25_pyserini``, ``evolved``, ``bmx``; the index
    must have been created with it, see :func:`esbridge.index.create_index`).
    """

    BM25 = "bm25"
    MULTI_MATCH = "multi_match"
    BM25F = "bm25f"
    CHANNELS = "channels"


@dataclass(frozen=True)
class RerankStats:
    """Timings and cache figures of the last call (seconds); ``augment`` is the time an
    augmenter took to make the query's variants."""

    analyze: float = 0.0
    first_stage: float = 0.0
    features: float = 0.0
    scoring: float = 0.0
    fetch_source: float = 0.0
    candidates: int = 0
    dropped_terms: int = 0
    augment: float = 0.0


def _check_count(name: str, value: Any, *, allow_none: bool = False) -> None:
    """``value`` is an integer >= 1 (or ``None`` where allowed); the error names the parameter."""
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"{name} must be an integer >= 1, got {value!r}")


def hit_version(hit: Mapping[str, Any]) -> tuple[int, int] | None:
    """``(_seq_no, _primary_term)`` of a hit, ``None`` when it has none."""
    if "_seq_no" not in hit or "_primary_term" not in hit:
        return None
    try:
        return int(hit["_seq_no"]), int(hit["_primary_term"])
    except (TypeError, ValueError):
        raise ConfigurationError(
            f"hit {hit.get('_id')!r} has a _seq_no/_primary_term that is not an integer "
            f"({hit['_seq_no']!r}, {hit['_primary_term']!r}); pass the engine's response unchanged"
        ) from None


@dataclass
class AnalyzedQuery:
    """A query text as the index's analysers see it.

    Attributes:
        query: per channel, the distinct terms and their counts.
        dropped: terms left out of the first stage (above :data:`MAX_FIRST_STAGE_TERMS`);
            the scorer still reads them.
    """

    query: dict[str, QueryChannel]
    dropped: int


@dataclass
class CandidateUnion:
    """The first-stage candidates of a query and of its variants, found with one ``_msearch``.

    Attributes:
        responses: each query's engine response (0: the original query, then the variants
            in order); queries with the same first-stage request share one response.
        hits: the union: the original query's hits in its order, then each variant's hits
            not seen before, in that variant's order.
        ranks: per query, ``{id: rank}`` (from 1) of its hits.
    """

    responses: list[dict[str, Any]]
    hits: list[dict[str, Any]]
    ranks: list[dict[str, int]]


@dataclass
class RerankerCore:
    """What :class:`Reranker` and :class:`esbridge.aio.AsyncReranker` share: their settings,
    caches and the pipeline itself, as plans (:mod:`esbridge.engine.plan`) that each runs with
    its own driver.  Not used directly."""

    engine: EngineBase
    index: str
    scorer: str = "evolved"
    params: Any = None
    window: int = 100
    first_stage: FirstStage | str | Mapping[str, Any] = FirstStage.BM25
    field_weights: Mapping[str, float] | None = None
    dfs: bool | None = None
    vector_cache: TermVectorCache | None = None
    layout: IndexLayout | None = None
    fields: str | Sequence[str] | None = None
    last: RerankStats = field(default_factory=RerankStats)

    def __post_init__(self) -> None:
        """The checks that need no engine; :meth:`_setup_plan` does the rest."""
        self._scorer = get_scorer(self.scorer)
        if self.params is None:
            self.params = self._scorer.params_type()
        elif not isinstance(self.params, self._scorer.params_type):
            raise ConfigurationError(
                f"params for scorer {self.scorer!r} must be {self._scorer.params_type.__name__}, "
                f"got {type(self.params).__name__}"
            )
        _check_count("window", self.window)
        self._similarity_field: str | None = None
        if isinstance(self.first_stage, str) and not isinstance(self.first_stage, FirstStage) \
                and not self.first_stage.startswith("similarity:"):
            try:
                self.first_stage = FirstStage(self.first_stage)
            except ValueError:
                raise ConfigurationError(
                    f"unknown first stage {self.first_stage!r}; choose one of "
                    f"{', '.join(fs.value for fs in FirstStage)} or pass a query dict"
                ) from None
        self._entropy: CollectionEntropy | None = None
        self._analysis: OrderedDict[tuple[str, str], QueryChannel] = OrderedDict()
        self._max_window: int | None = None
        self._n_shards: int | None = None

    def _setup_plan(self) -> Plan[None]:
        """What needs the engine before the first search: the scripted similarity of a
        ``similarity:<name>`` first stage, the index's layout, the field weights checked
        against it, and the feature store."""
        if isinstance(self.first_stage, str) and self.first_stage.startswith("similarity:"):
            self._similarity_field = yield from self._scripted_subfield_plan(self.first_stage.split(":", 1)[1])
        self.layout = self.layout or (yield from open_layout_plan(self.index, self.fields))
        missing = [ch for ch in self.channels if ch not in self.layout.channels]
        if missing:
            raise ConfigurationError(missing_channels_message(self.scorer, missing, self.index, self.layout))
        for name, weight in (self.field_weights or {}).items():
            if name not in self.layout.fields:
                raise ConfigurationError(
                    f"field_weights names {name!r}, which is not a text field of {self.index!r} "
                    f"({', '.join(self.layout.fields)})"
                )
            if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not (
                    np.isfinite(weight) and weight >= 0):
                raise ConfigurationError(f"field weight of {name!r} must be a finite number >= 0, got {weight!r}")
        if self.field_weights is not None:
            weights = {f: float(self.field_weights.get(f, 1.0)) for f in self.layout.fields}
            if not any(w > 0 for w in weights.values()):
                raise ConfigurationError(
                    f"every field weight is 0 ({', '.join(f'{f}=0' for f in weights)}), so every document would "
                    "score 0; give at least one field a positive weight"
                )
            if self._scorer.needs_fields and self.field_weights:
                # BM25F scorers weigh fields themselves: the weights given here override theirs
                merged = {**dict(self.params.field_weights), **{f: float(w) for f, w in self.field_weights.items()}}
                try:
                    self.params = replace(self.params, field_weights=tuple(sorted(merged.items())))
                except ValueError as err:
                    raise ConfigurationError(f"field_weights: {err}") from err
        self.store = FeatureStore(self.engine, self.index, self.layout, vector_cache=self.vector_cache)

    # ---- the pieces ------------------------------------------------------------------

    @property
    def _layout(self) -> IndexLayout:
        if self.layout is None:  # set by _setup_plan
            raise RuntimeError("reranker has no index layout")
        return self.layout

    @property
    def channels(self) -> tuple[str, ...]:
        """The channels the scorer reads with these parameters."""
        return channels_needed(self.params, self._scorer.channels)

    def _fields(self) -> tuple[str, ...]:
        weights = self.field_weights or {}
        if self._scorer.needs_fields or any(w != 1.0 for w in weights.values()):
            return tuple(self._layout.fields)
        return (self._layout.combined,)

    def _max_result_window_plan(self) -> Plan[int]:
        if self._max_window is None:
            resp = yield Call(
                "GET", f"/{self.index}/_settings/index.max_result_window",
                params={"include_defaults": "true"}, context=f"reading settings of {self.index!r}")
            value = 10_000
            for spec in resp.values():
                for part in ("settings", "defaults"):
                    got = ((spec.get(part) or {}).get("index") or {}).get("max_result_window")
                    if got is not None:
                        value = int(got)
                        break
            self._max_window = value
        return self._max_window

    def _check_window_plan(self, window: int) -> Plan[None]:
        limit = yield from self._max_result_window_plan()
        if window > limit:
            raise ConfigurationError(
                f"window {window} is above index.max_result_window ({limit}) of {self.index!r}; "
                "lower the window or raise that index setting"
            )

    def _analyze_plan(self, text: str) -> Plan[AnalyzedQuery]:
        channels = list(dict.fromkeys(["base", *self.channels]))
        if self.first_stage == FirstStage.CHANNELS:
            channels = list(dict.fromkeys([*channels, *self._layout.channels]))
        query = yield from self._analyze_cached_plan(text, channels)
        dropped = sum(max(0, len(query[ch].terms) - MAX_FIRST_STAGE_TERMS) for ch in self._first_stage_channels())
        return AnalyzedQuery(query=query, dropped=dropped)

    def _first_stage_channels(self) -> tuple[str, ...]:
        """The channels whose terms the first stage sends as term clauses (a custom query or
        ``bm25f``'s ``combined_fields`` send none)."""
        if isinstance(self.first_stage, Mapping) or self.first_stage == FirstStage.BM25F:
            return ()
        if self.first_stage == FirstStage.CHANNELS:
            return tuple(self._layout.channels)
        return ("base",)

    def _analyze_cached_plan(self, text: str, channels: Sequence[str]) -> Plan[dict[str, QueryChannel]]:
        """Per-channel analysis, from an LRU of recent query texts or (concurrently, one
        ``_analyze`` per channel) from the engine.  An index's analyzers cannot change
        while it is open, so an entry stays valid for the reranker's lifetime."""
        missing = [ch for ch in channels if (text, ch) not in self._analysis]
        layout = self._layout
        if missing:
            parts = yield gather(*(analyze_query_plan(self.index, layout, text, [ch]) for ch in missing))
            for got in parts:
                for ch, qc in got.items():
                    self._analysis[(text, ch)] = qc
            while len(self._analysis) > 20_000:
                self._analysis.popitem(last=False)
        return {ch: self._analysis[(text, ch)] for ch in channels}

    def _first_stage_query_plan(self, prepared: AnalyzedQuery, text: str) -> Plan[dict[str, Any]]:
        layout = self._layout
        fs = self.first_stage
        if isinstance(fs, Mapping):
            return dict(fs)

        def clauses(ch: str, fields: Sequence[str], order: Sequence[int],
                    boost: float = 1.0) -> list[dict[str, Any]]:
            qc = prepared.query.get(ch) or QueryChannel((), ())
            out = []
            for j in order:
                for f in fields:
                    for sf in layout.indexed(f, ch):  # a plain index's combined field: each text field
                        out.append({"term": {sf: {"value": qc.terms[j], "boost": qc.qtf[j] * boost}}})
            return out

        def terms_plan(ch: str) -> Plan[list[int]]:
            return self._first_stage_terms_plan(ch, prepared.query.get(ch) or QueryChannel((), ()))

        if self._similarity_field is not None:
            sub = self._similarity_field
            should = [{"term": {f"{layout.combined}.{sub}": c["term"][layout.subfield(layout.combined, "base")]}}
                      for c in clauses("base", [layout.combined], (yield from terms_plan("base")))]
        elif fs == FirstStage.BM25:
            should = clauses("base", [layout.combined], (yield from terms_plan("base")))
        elif fs == FirstStage.MULTI_MATCH:
            # best_fields = the best field's score per document: a dis_max per field
            order = yield from terms_plan("base")
            should = [{"dis_max": {"queries": [{"bool": {"should": clauses("base", [f], order)}}
                                               for f in layout.fields]}}] if prepared.query["base"].terms else []
        elif fs == FirstStage.BM25F:
            if self.engine.distribution != "elasticsearch" or self.engine.info.version < (7, 13, 0):
                raise ConfigurationError(
                    f"first stage 'bm25f' needs the combined_fields query (Elasticsearch 7.13+); "
                    f"{self.engine.info.label} does not have it — use 'bm25' or 'multi_match'"
                )
            should = [{"combined_fields": {"query": text,
                                           "fields": [layout.subfield(f, "base") for f in layout.fields]}}]
        else:
            weights = {"base": 1.0, "prefix": 0.3, "bigram": 0.5, "micro": 0.2}
            should = []
            for ch in layout.channels:
                should += clauses(ch, [layout.combined], (yield from terms_plan(ch)), weights.get(ch, 0.2))
        if not should:
            return {"match_none": {}}
        return {"bool": {"should": should}}

    def _scripted_subfield_plan(self, name: str) -> Plan[str]:
        """The sub-field of the scripted similarity ``name`` (``similarity:<name>`` first stage)."""
        sims = (yield from index_meta_plan(self.index)).get("similarities") or {}
        if name not in sims:
            raise ConfigurationError(
                f"first stage 'similarity:{name}' needs an index created with similarity={name!r}; "
                f"{self.index!r} has {sorted(sims) or 'no scripted similarities'}"
            )
        return f"base_{name}"

    def _first_stage_terms_plan(self, channel: str, qc: QueryChannel) -> Plan[list[int]]:
        """Indices of the terms the first stage sends: all of them, or for a query with
        more than :data:`MAX_FIRST_STAGE_TERMS` distinct terms, the indexed ones of
        highest ``qtf * IDF`` (index-wide statistics); the scorer still reads every term."""
        if len(qc.terms) <= MAX_FIRST_STAGE_TERMS:
            return list(range(len(qc.terms)))
        layout = self._layout
        stats = (yield from self.store.fetch_plan({channel: qc}, [], [], fields=[layout.combined])).stats
        st = stats[layout.subfield(layout.combined, channel)]
        df = np.array([st.df.get(t, 0) for t in qc.terms], dtype=np.float64)
        idf = np.log1p((st.doc_count - df + 0.5) / (df + 0.5))
        weight = np.where(df > 0, np.asarray(qc.qtf, dtype=np.float64) * idf, -np.inf)  # absent terms match nothing
        return [int(j) for j in np.lexsort((np.arange(len(qc.terms)), -weight))[:MAX_FIRST_STAGE_TERMS]]

    def _search_params_plan(self) -> Plan[dict[str, Any]]:
        dfs = self.dfs
        if dfs is None:
            if self._n_shards is None:
                self._n_shards = len((yield from self.store.routing.routings_plan()))
            dfs = self._n_shards > 1
        return {"search_type": "dfs_query_then_fetch"} if dfs else {}

    def _scoring_input_plan(self, prepared: AnalyzedQuery, ids: Sequence[str],
                            versions: Sequence[tuple[int, int] | None], *,
                            stats_validated: bool = False) -> Plan[tuple[ScoringInput, list[bool]]]:
        build, found = yield from self._features_found_plan(prepared, ids, versions, stats_validated)
        inputs: ScoringInput = yield Offload(build)
        return inputs, found

    def _features_found_plan(self, prepared: AnalyzedQuery, ids: Sequence[str],
                             versions: Sequence[tuple[int, int] | None],
                             stats_validated: bool) -> Plan[tuple[Callable[[], ScoringInput], list[bool]]]:
        query = {ch: prepared.query[ch] for ch in self.channels}
        fields = self._fields()
        layout = self._layout
        fetched = yield from self.store.fetch_plan(query, ids, versions, fields=fields, validate=not stats_validated)
        entropy: dict[str, dict[str, float]] | None = None
        if self._scorer.needs_entropy:
            if self._entropy is None:
                self._entropy = CollectionEntropy(self.engine, self.index, layout)
            entropy = {}
            for ch in query:
                entropy[ch] = yield from self._entropy.table_plan(ch)
        field_weights = self.field_weights

        def build() -> ScoringInput:
            inputs: ScoringInput = build_input(fetched, layout, query, fields=fields,
                                               field_weights=field_weights, entropy=entropy)
            return inputs

        return build, list(fetched.candidates.found)

    def _score_hits_plan(self, prepared: AnalyzedQuery, ids: Sequence[str],
                         versions: Sequence[tuple[int, int] | None], *,
                         stats_validated: bool = False) -> Plan[tuple[ScoreResult, list[bool]]]:
        build, found = yield from self._features_found_plan(prepared, ids, versions, stats_validated)
        scorer, params = self._scorer, self.params
        result: ScoreResult = yield Offload(lambda: scorer.score(build(), params))
        return result, found

    def _augmented_inputs_plan(self, queries: Sequence[AnalyzedQuery], ids: Sequence[str],
                               versions: Sequence[tuple[int, int] | None], *,
                               stats_validated: bool = False) -> Plan[tuple[list[ScoringInput], list[bool]]]:
        merged = AnalyzedQuery(query=merge_queries([q.query for q in queries]), dropped=0)
        inputs, found = yield from self._scoring_input_plan(merged, ids, versions, stats_validated=stats_validated)
        return [select_terms(inputs, q.query) for q in queries], found

    def _score_augmented_plan(self, prepared: AnalyzedQuery, variants: Sequence[tuple[AnalyzedQuery, float]],
                              ids: Sequence[str], versions: Sequence[tuple[int, int] | None], *,
                              original_weight: float = 1.0,
                              stats_validated: bool = False) -> Plan[tuple[ScoreResult, list[bool]]]:
        merged = AnalyzedQuery(query=merge_queries([prepared.query, *(v.query for v, _ in variants)]), dropped=0)
        build, found = yield from self._features_found_plan(merged, ids, versions, stats_validated)
        scorer, params = self._scorer, self.params
        pairs = [(v.query, w) for v, w in variants]
        result: ScoreResult = yield Offload(lambda: score_augmented(scorer, params, build(), prepared.query, pairs,
                                                                    original_weight=original_weight))
        return result, found

    def _fetch_candidates_plan(self, prepared: AnalyzedQuery, query_text: str, *, window: int | None = None,
                               filter: Any = None, source: Any = False) -> Plan[dict[str, Any]]:
        window = window or self.window
        yield from self._check_window_plan(window)
        query = yield from self._first_stage_query_plan(prepared, query_text)
        if filter is not None:
            query = {"bool": {"must": [query], "filter": filter if isinstance(filter, list) else [filter]}}
        body = {"size": window, "query": query, "_source": source, "seq_no_primary_term": True}
        # index state and missing statistics depend only on the query: fetch them meanwhile
        scored_query = {ch: prepared.query[ch] for ch in self.channels}
        _, response = yield gather(self.store.prefetch_stats_plan(scored_query, fields=self._fields()),
                                   self._first_stage_search_plan(body))
        result: dict[str, Any] = response
        return result

    def _first_stage_search_plan(self, body: Mapping[str, Any]) -> Plan[dict[str, Any]]:
        params = yield from self._search_params_plan()
        return (yield from search_plan(self.index, body, params=params))

    def _fetch_union_plan(self, queries: Sequence[tuple[AnalyzedQuery, str]], *, window: int | None = None,
                          filter: Any = None, source: Any = False) -> Plan[CandidateUnion]:
        window = window or self.window
        yield from self._check_window_plan(window)
        if not queries:
            raise ConfigurationError("fetch_union needs at least one query")
        bodies = []
        for prepared, text in queries:
            query = yield from self._first_stage_query_plan(prepared, text)
            if filter is not None:
                query = {"bool": {"must": [query], "filter": filter if isinstance(filter, list) else [filter]}}
            bodies.append({"size": window, "query": query, "_source": source, "seq_no_primary_term": True})
        slot: dict[str, int] = {}
        sent: list[dict[str, Any]] = []
        which = []
        for body in bodies:
            key = json.dumps(body, sort_keys=True, default=str)
            if key not in slot:
                slot[key] = len(sent)
                sent.append(body)
            which.append(slot[key])
        merged = merge_queries([prepared.query for prepared, _ in queries])
        scored_query = {ch: merged[ch] for ch in self.channels}
        lines: list[dict[str, Any]] = []
        # _msearch takes the shard-copy preference per search, in each header
        preference = self.engine.options.preference
        header = {"preference": preference} if preference else {}
        for body in sent:
            lines += [header, body]
        _, resp = yield gather(self.store.prefetch_stats_plan(scored_query, fields=self._fields()),
                               self._msearch_plan(ndjson_lines(lines)))
        answers = resp.get("responses") if isinstance(resp, Mapping) else None
        if not isinstance(answers, list) or len(answers) != len(sent):
            raise EngineError(f"_msearch on {self.index!r} answered {len(answers or [])} responses for the "
                              f"{len(sent)} searches sent", index=self.index)
        for answer in answers:
            if "error" in answer:
                raise engine_error(answer.get("status"), answer, context=f"searching {self.index!r}")
        responses = [answers[i] for i in which]
        hits: list[dict[str, Any]] = []
        seen: set[str] = set()
        ranks = []
        for r in responses:
            ranks.append({str(h["_id"]): n for n, h in enumerate(r["hits"]["hits"], start=1)})
            for h in r["hits"]["hits"]:
                if str(h["_id"]) not in seen:
                    seen.add(str(h["_id"]))
                    hits.append(h)
        return CandidateUnion(responses=responses, hits=hits, ranks=ranks)

    def _msearch_plan(self, body: str) -> Plan[Any]:
        params = yield from self._search_params_plan()
        return (yield Call("POST", f"/{path_segment(self.index, patterns=True)}/_msearch", body=body,
                           ndjson=True, params=params, context=f"searching {self.index!r}"))

    def _analyze_variants_plan(self, variants: Sequence[Augmentation]) -> Plan[list[tuple[AnalyzedQuery, float]]]:
        out = []
        for text, weight in variants:
            out.append(((yield from self._analyze_plan(text)), weight))
        return out

    def _search_plan(self, query_text: str, size: int = 10, *, filter: Any = None,
                     fields: Sequence[str] | None = None, explain: bool = False,
                     window: int | None = None, augmentations: Any = None,
                     original_weight: float = 1.0) -> Plan[dict[str, Any]]:
        if size < 0:
            raise ConfigurationError(f"size must be >= 0, got {size}")
        _check_count("window", window, allow_none=True)
        w0 = check_weight(original_weight, "original_weight")
        if augmentations is not None or w0 != 1.0:
            return (yield from self._search_augmented_plan(
                query_text, size, filter=filter, fields=fields, explain=explain, window=window,
                augmentations=augmentations, original_weight=w0))
        window = max(self.window if window is None else window, size)
        # small windows bring _source with the first stage; large ones fetch it for the top hits only
        inline_source = window <= INLINE_SOURCE_WINDOW
        # all of _source but esbridge's own vector field (384 numbers nobody asked for)
        source: Any = (list(fields) if fields else {"excludes": [VECTOR_FIELD]}) if inline_source else False
        t0 = time.perf_counter()
        prepared = yield from self._analyze_plan(query_text)
        t1 = time.perf_counter()
        response = yield from self._fetch_candidates_plan(prepared, query_text, window=window, filter=filter,
                                                          source=source)
        t2 = time.perf_counter()
        hits = response["hits"]["hits"]
        reranked, feature_time = yield from self._rerank_hits_plan(prepared, hits, explain, stats_validated=True)
        t3 = time.perf_counter()
        top = reranked[:size]
        if not inline_source:
            yield from self._attach_sources_plan(top, fields)
        t4 = time.perf_counter()
        out = dict(response)
        out["hits"] = dict(response["hits"])
        out["hits"]["hits"] = top
        out["hits"]["max_score"] = top[0]["_score"] if top else None
        out["_esbridge"] = self._meta(prepared, len(hits))
        self.last = RerankStats(analyze=t1 - t0, first_stage=t2 - t1,
                                features=feature_time, scoring=t3 - t2 - feature_time,
                                fetch_source=t4 - t3, candidates=len(hits),
                                dropped_terms=prepared.dropped)
        return out

    def _search_augmented_plan(self, query_text: str, size: int, *, filter: Any, fields: Sequence[str] | None,
                               explain: bool, window: int | None, augmentations: Any,
                               original_weight: float) -> Plan[dict[str, Any]]:
        window = max(self.window if window is None else window, size)
        inline_source = window <= INLINE_SOURCE_WINDOW
        source: Any = (list(fields) if fields else {"excludes": [VECTOR_FIELD]}) if inline_source else False
        t0 = time.perf_counter()
        checked = (yield from resolve_augmentations_plan(augmentations, query_text)) \
            if augmentations is not None else ()
        t1 = time.perf_counter()
        prepared = yield from self._analyze_plan(query_text)
        variants = yield from self._analyze_variants_plan(checked)
        t2 = time.perf_counter()
        union = yield from self._fetch_union_plan(
            [(prepared, query_text), *((v, text) for (v, _), (text, _) in zip(variants, checked))],
            window=window, filter=filter, source=source)
        t3 = time.perf_counter()
        reranked, feature_time = yield from self._rerank_hits_plan(
            prepared, union.hits, explain, stats_validated=True, variants=variants,
            original_weight=original_weight, ranks=union.ranks)
        t4 = time.perf_counter()
        top = reranked[:size]
        if not inline_source:
            yield from self._attach_sources_plan(top, fields)
        t5 = time.perf_counter()
        first = union.responses[0]
        out = dict(first)
        out["hits"] = dict(first["hits"])
        out["hits"]["hits"] = top
        out["hits"]["max_score"] = top[0]["_score"] if top else None
        out["_esbridge"] = self._meta(prepared, len(union.hits), variants=variants, original_weight=original_weight,
                                      texts=[text for text, _ in checked])
        self.last = RerankStats(analyze=t2 - t1, first_stage=t3 - t2, features=feature_time,
                                scoring=t4 - t3 - feature_time, fetch_source=t5 - t4,
                                candidates=len(union.hits), dropped_terms=prepared.dropped, augment=t1 - t0)
        return out

    def _rescore_plan(self, response: Mapping[str, Any] | Any, query_text: str, *, window_size: int | None = None,
                      explain: bool = False, augmentations: Any = None,
                      original_weight: float = 1.0) -> Plan[dict[str, Any]]:
        body = getattr(response, "body", None)  # the elasticsearch 8/9 client's ObjectApiResponse
        if not isinstance(response, Mapping) and isinstance(body, Mapping):
            response = body
        if not isinstance(response, Mapping):
            raise ConfigurationError(
                f"the response is a {type(response).__name__}, not a search response: pass the body a _search "
                "request returned (a dict, or the client's response object)")
        if not isinstance(response.get("hits"), Mapping) or not isinstance(response["hits"].get("hits"), list):
            raise ConfigurationError("the response has no hits.hits list; pass the body a _search request returned")
        _check_count("window_size", window_size, allow_none=True)
        window = self.window if window_size is None else window_size
        hits = copy.deepcopy(response["hits"]["hits"])
        for i, h in enumerate(hits):
            if not isinstance(h, Mapping) or "_id" not in h:
                raise ConfigurationError(f"hit {i} of the response has no _id")
            other = h.get("_index")
            if other not in (None, self.index) and not (yield from self._same_index_plan(str(other))):
                raise ConfigurationError(
                    f"hit {h['_id']!r} comes from index {other!r}, not {self.index!r}; rescore "
                    "responses of one index at a time"
                )
        w0 = check_weight(original_weight, "original_weight")
        variants = None
        if augmentations is not None or w0 != 1.0:
            checked = (yield from resolve_augmentations_plan(augmentations, query_text)) \
                if augmentations is not None else ()
            variants = yield from self._analyze_variants_plan(checked)
        prepared = yield from self._analyze_plan(query_text)
        head, _ = yield from self._rerank_hits_plan(prepared, hits[:window], explain, variants=variants,
                                                    original_weight=w0)
        tail = hits[window:]
        out = copy.deepcopy(dict(response))
        out["hits"]["hits"] = head + tail
        out["hits"]["max_score"] = max((h["_score"] for h in head if h.get("_score") is not None),
                                       default=response["hits"].get("max_score"))
        out["_esbridge"] = self._meta(prepared, len(head), variants=variants, original_weight=w0)
        return out

    # ---- internals ---------------------------------------------------------------------

    _concrete: set[str] | None = None

    def _same_index_plan(self, name: str) -> Plan[bool]:
        if self._concrete is None:
            resp = yield Call("GET", f"/{path_segment(self.index, patterns=True)}/_settings/index.uuid",
                              context=f"resolving {self.index!r}")
            self._concrete = set(resp)
        return name in self._concrete

    def _meta(self, prepared: AnalyzedQuery, n: int, *,
              variants: Sequence[tuple[AnalyzedQuery, float]] | None = None, original_weight: float = 1.0,
              texts: Sequence[str] | None = None) -> dict[str, Any]:
        meta: dict[str, Any] = {"scorer": self.scorer, "window": n,
                                "terms": {ch: list(qc.terms) for ch, qc in prepared.query.items()}}
        if prepared.dropped:
            meta["first_stage_terms_dropped"] = prepared.dropped
        if variants is not None:
            meta["original_weight"] = original_weight
            meta["augmentations"] = [
                {**({"text": texts[i]} if texts is not None else {}), "weight": w,
                 "terms": {ch: list(qc.terms) for ch, qc in v.query.items()}}
                for i, (v, w) in enumerate(variants)]
        return meta

    def _rerank_hits_plan(self, prepared: AnalyzedQuery, hits: list[dict[str, Any]],
                          explain: bool, *, stats_validated: bool = False,
                          variants: Sequence[tuple[AnalyzedQuery, float]] | None = None, original_weight: float = 1.0,
                          ranks: Sequence[Mapping[str, int]] | None = None,
                          ) -> Plan[tuple[list[dict[str, Any]], float]]:
        """The hits reranked, and the seconds their features and scores took."""
        if not hits:
            return [], 0.0
        ids = [str(h["_id"]) for h in hits]
        versions = [hit_version(h) for h in hits]
        t0 = time.perf_counter()
        if variants is None:
            result, found = yield from self._score_hits_plan(prepared, ids, versions, stats_validated=stats_validated)
        else:
            result, found = yield from self._score_augmented_plan(
                prepared, variants, ids, versions, original_weight=original_weight, stats_validated=stats_validated)
        feature_time = time.perf_counter() - t0
        missing = [i for i, ok in zip(ids, found) if not ok]
        if missing:
            raise EngineError(
                f"{len(missing)} hit(s) are no longer in {self.index!r} (deleted since the search?): "
                f"{', '.join(missing[:5])}", index=self.index)
        order = np.lexsort((np.arange(len(hits)), -result.scores))
        out = []
        for rank in order:
            h = dict(hits[rank])
            meta: dict[str, Any] = {"first_stage_score": h.get("_score"), "first_stage_rank": int(rank) + 1}
            if ranks is not None:
                # the original query's first-stage score and rank (None: found by a variant only)
                own = ranks[0].get(ids[rank])
                meta = {"first_stage_score": h.get("_score") if own is not None else None, "first_stage_rank": own,
                        "variant_ranks": {str(i): r[ids[rank]] for i, r in enumerate(ranks[1:], start=1)
                                          if ids[rank] in r}}
            if explain:
                meta["parts"] = {k: float(v[rank]) for k, v in result.parts.items()
                                 if np.ndim(v) == 1 and len(v) == len(hits)}
            h["_score"] = float(result.scores[rank])
            h["_esbridge"] = meta
            out.append(h)
        return out, feature_time

    def _attach_sources_plan(self, hits: list[dict[str, Any]], fields: Sequence[str] | None) -> Plan[None]:
        if not hits:
            return
        body: dict[str, Any] = {"ids": [h["_id"] for h in hits]}
        params = {"_source_includes": ",".join(fields)} if fields else {"_source_excludes": VECTOR_FIELD}
        resp = yield Call("POST", f"/{path_segment(self.index, patterns=True)}/_mget", body=body, params=params,
                          context=f"fetching sources from {self.index!r}")
        raise_mget_errors(resp, self.index, "fetching sources")
        by_id = {d["_id"]: d.get("_source") for d in resp["docs"] if d.get("found")}
        for h in hits:
            if h["_id"] in by_id:
                h["_source"] = by_id[h["_id"]]




@dataclass
class Reranker(RerankerCore):
    """Exact rescoring of an engine's candidates with one of esbridge's scorers.

    Args:
        engine: the connected engine.
        index: an index created by esbridge (its layout is read from the mapping), or any
            other index with text fields (a plain index, see :func:`esbridge.index.open_layout`:
            scorers that read only the ``base`` channel work on it; the others name the
            channels it lacks and how to add them).
        scorer: a registered scorer name (see :func:`esbridge.scoring.available_scorers`).
        params: the scorer's parameter object (default: its defaults).
        window: how many first-stage hits are rescored.
        first_stage: how candidates are found (:class:`FirstStage`) or a query dict.
        field_weights: BM25F-style weights per text field (``{"title": 2.0}``); fields
            not named weigh 1.  With all weights 1 the combined field is read.
        dfs: use ``dfs_query_then_fetch`` in the first stage (index-wide statistics
            there too); default on for indices with more than one shard.
        vector_cache: a shared :class:`TermVectorCache` (default: a new one).
        layout: the index's layout (default: :func:`esbridge.index.open_layout`'s).
        fields: the text fields to read (default: every text field of an esbridge index,
            the text fields found in a plain index's mapping); a plain index's fields must
            share one analyzer.

    :class:`esbridge.aio.AsyncReranker` is the same over an asynchronous engine.
    """

    engine: Engine

    def __post_init__(self) -> None:
        super().__post_init__()
        self._executor: ThreadPoolExecutor | None = None
        self._run(self._setup_plan())

    def _run(self, plan: Plan[T]) -> T:
        """Run a plan of the pipeline against the engine (concurrent steps on the worker threads)."""
        return run(plan, self.engine, self._pool)

    def close(self) -> None:
        """Stop the reranker's worker threads (the engine connection stays open)."""
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    def __enter__(self) -> Reranker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _pool(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="esbridge-analyze")
        return self._executor

    # ---- the pieces ------------------------------------------------------------------

    def max_result_window(self) -> int:
        """The index's ``index.max_result_window`` (asked once)."""
        return self._run(self._max_result_window_plan())

    def analyze(self, text: str) -> AnalyzedQuery:
        """The query's tokens per channel from the index's analyzers."""
        return self._run(self._analyze_plan(text))

    def first_stage_query(self, prepared: AnalyzedQuery, text: str) -> dict[str, Any]:
        """The first-stage query (a ``bool`` of ``term`` clauses on analysed tokens)."""
        return self._run(self._first_stage_query_plan(prepared, text))

    def scoring_input(self, prepared: AnalyzedQuery, ids: Sequence[str],
                      versions: Sequence[tuple[int, int] | None], *,
                      stats_validated: bool = False) -> tuple[ScoringInput, list[bool]]:
        """The scorer's input for candidates ``ids`` of an analysed query (input order), and
        which of them the engine still holds: the one place where candidates become features
        (term vectors, index-wide statistics, collection entropies where the scorer reads them).

        ``stats_validated``: the statistics cache was validated (and filled) for this
        query moments ago by :meth:`FeatureStore.prefetch_stats`.
        """
        return self._run(self._scoring_input_plan(prepared, ids, versions, stats_validated=stats_validated))

    def score_hits(self, prepared: AnalyzedQuery, ids: Sequence[str],
                   versions: Sequence[tuple[int, int] | None], *,
                   stats_validated: bool = False) -> tuple[ScoreResult, list[bool]]:
        """Scores of candidates ``ids`` for an analysed query (input order), and which of
        them were found (see :meth:`scoring_input`)."""
        return self._run(self._score_hits_plan(prepared, ids, versions, stats_validated=stats_validated))

    # ---- public API --------------------------------------------------------------------

    def search(self, query_text: str, size: int = 10, *, filter: Any = None,
               fields: Sequence[str] | None = None, explain: bool = False,
               window: int | None = None, augmentations: Any = None,
               original_weight: float = 1.0) -> dict[str, Any]:
        """Search ``query_text`` and return the top ``size`` hits, reranked.

        Args:
            filter: a query clause (or list) restricting the candidates, as in a ``bool``
                filter; it does not score.
            fields: ``_source`` fields to return (default: all).
            explain: add each hit's score parts under ``_esbridge.parts``.
            window: hits to rescore (default: the reranker's window; at least ``size``).
            augmentations: weighted variants of the query, ``[(variant_text, weight), ...]``,
                or an :class:`~esbridge.augment.Augmenter` called with ``query_text``.  Each
                variant is analysed by the index's analyzers; the candidates are the union of
                the top ``window`` of the query and of every variant (one ``_msearch``); the
                features of all of them are fetched once; a candidate's score is
                ``original_weight · score(query) + Σ_i w_i · score(variant_i)`` with the
                reranker's scorer (weighted query augmentation, docs/scoring.md §4.6).
            original_weight: the original query's weight ``w_0`` (1, as in the paper).

        Returns:
            An engine-shaped search response.

        Raises:
            ConfigurationError: a bad size or window, or a malformed augmentation (a weight
                that is not a finite number >= 0, a text that is not a string).
        """
        return self._run(self._search_plan(query_text, size, filter=filter, fields=fields, explain=explain,
                                           window=window, augmentations=augmentations,
                                           original_weight=original_weight))

    def fetch_candidates(self, prepared: AnalyzedQuery, query_text: str, *, window: int | None = None,
                         filter: Any = None, source: Any = False) -> dict[str, Any]:
        """The engine's first-stage response for an analysed query: the top ``window`` hits
        with ``_seq_no``/``_primary_term``.  The index state and the statistics the scorer
        will need are fetched meanwhile, so :meth:`score_hits` can follow with
        ``stats_validated=True``."""
        return self._run(self._fetch_candidates_plan(prepared, query_text, window=window, filter=filter,
                                                     source=source))

    def fetch_union(self, queries: Sequence[tuple[AnalyzedQuery, str]], *, window: int | None = None,
                    filter: Any = None, source: Any = False) -> CandidateUnion:
        """The first-stage candidates of several analysed queries (the original and its
        variants), each query's top ``window``, found with **one** ``_msearch`` request.

        ``_msearch`` rather than one ``bool`` over every query: each query keeps exactly the
        candidates it would find alone (a combined query ranks by the summed scores, so a
        document in one variant's top ``window`` could fall out), and the original query's
        candidates are those of a search without variants, so augmentation only adds
        candidates.  The union has up to ``(1 + variants) · window`` documents.  Queries whose
        first-stage request is the same (e.g. a custom first-stage query dict) are sent once.
        The statistics of every query's terms are fetched meanwhile, as in
        :meth:`fetch_candidates`.
        """
        return self._run(self._fetch_union_plan(queries, window=window, filter=filter, source=source))

    def analyze_variants(self, variants: Sequence[Augmentation]) -> list[tuple[AnalyzedQuery, float]]:
        """Each checked variant analysed by the index's analyzers, with its weight."""
        return self._run(self._analyze_variants_plan(variants))

    def augmented_inputs(self, queries: Sequence[AnalyzedQuery], ids: Sequence[str],
                         versions: Sequence[tuple[int, int] | None], *,
                         stats_validated: bool = False) -> tuple[list[ScoringInput], list[bool]]:
        """Each query's scoring input over the same candidates ``ids``, from **one** fetch of
        the features of their merged terms (:meth:`scoring_input`), and which candidates the
        engine still holds."""
        return self._run(self._augmented_inputs_plan(queries, ids, versions, stats_validated=stats_validated))

    def score_augmented(self, prepared: AnalyzedQuery, variants: Sequence[tuple[AnalyzedQuery, float]],
                        ids: Sequence[str], versions: Sequence[tuple[int, int] | None], *,
                        original_weight: float = 1.0,
                        stats_validated: bool = False) -> tuple[ScoreResult, list[bool]]:
        """``w_0 · score(Q) + Σ_i w_i · score(Q_i)`` of candidates ``ids`` (input order) with the
        reranker's scorer (:func:`esbridge.augment.score_augmented`); the features of every
        query are fetched once (:meth:`scoring_input` of their merged terms)."""
        return self._run(self._score_augmented_plan(prepared, variants, ids, versions,
                                                    original_weight=original_weight,
                                                    stats_validated=stats_validated))

    def rescore(self, response: Mapping[str, Any] | Any, query_text: str, *, window_size: int | None = None,
                explain: bool = False, augmentations: Any = None,
                original_weight: float = 1.0) -> dict[str, Any]:
        """Rerank the top ``window_size`` hits of an engine search response.

        Hits beyond the window keep their order and scores, below the window, as the
        engine's rescore API does.  The response is not modified; a copy is returned.

        ``augmentations`` and ``original_weight`` are those of :meth:`search`; the variants
        are scored over the response's own hits (rescore has no first stage to widen).

        Raises:
            ConfigurationError: the response is not a search response, or an augmentation
                is malformed.
        """
        return self._run(self._rescore_plan(response, query_text, window_size=window_size, explain=explain,
                                            augmentations=augmentations, original_weight=original_weight))

    def _attach_sources(self, hits: list[dict[str, Any]], fields: Sequence[str] | None) -> None:
        self._run(self._attach_sources_plan(hits, fields))
