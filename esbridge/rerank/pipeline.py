"""The rerank pipeline: query text → analysis → first stage → candidates → features → scores.

:class:`RerankerCore` holds a reranker's settings and caches and the pipeline itself, written
once as plans (:mod:`esbridge.engine.plan`): generators that yield the requests they need.
:class:`esbridge.rerank.Reranker` runs them with blocking requests;
:class:`esbridge.aio.AsyncReranker` runs the same plans with an asyncio client.  Evaluation,
tuning, feature export and the in-engine rescorer go through the same steps
(:meth:`Reranker.analyze <esbridge.rerank.Reranker.analyze>`,
:meth:`~esbridge.rerank.Reranker.fetch_candidates`,
:meth:`~esbridge.rerank.Reranker.scoring_input`).

The pieces that need no engine live beside it: :mod:`esbridge.rerank.first_stage` builds the
first-stage query, :mod:`esbridge.rerank.candidates` holds the types passed along and reorders
hits by their scores.
"""

from __future__ import annotations

import copy
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from esbridge.engine.calls import (
    current_first_stage_params,
    ids_body,
    ids_search_plan,
    ids_taken,
    msearch_answers,
    ndjson_lines,
    path_segment,
    search_plan,
)
from esbridge.engine.client import EngineBase
from esbridge.engine.plan import Call, Offload, Plan, gather
from esbridge.errors import ConfigurationError, EngineError
from esbridge.features.cache import DocVersion, FeatureStore, TermVectorCache
from esbridge.features.diskstore import DiskVectorStore
from esbridge.features.entropy import CollectionEntropy
from esbridge.features.plugin import (
    Carried,
    analysing_ext,
    analysis_from,
    carried_features,
    check_feature_source,
    features_ext,
    features_plugin_plan,
    features_tag,
    limit_error,
    within_limits_plan,
)
from esbridge.features.termvectors import QueryChannel, analyze_query_plan, build_input
from esbridge.index.definitions import IndexLayout, index_meta_plan
from esbridge.index.facts import max_result_window_plan, uuids_plan
from esbridge.index.plain import missing_channels_message, open_layout_plan
from esbridge.jsoninput import check_text
from esbridge.rerank.augmentation import (
    Augmentation,
    check_weight,
    merge_queries,
    resolve_augmentations_plan,
    score_augmented,
    select_terms,
)
from esbridge.rerank.candidates import (
    AnalyzedQuery,
    CandidateUnion,
    Ranking,
    RerankStats,
    Retrieved,
    candidate_keys,
    check_count,
    dropped_hit,
    fields_to_read,
    reorder_hits,
    response_hits,
    response_meta,
    union_of,
    unique_hits,
)
from esbridge.rerank.first_stage import (
    MATCH_TEXT_LIMIT,
    MAX_FIRST_STAGE_TERMS,
    FirstStage,
    FirstStageSpec,
    analysed_channels,
    build_query,
    dropped_terms,
    match_query,
    parse_first_stage,
    similarity_name,
    term_channels,
    terms_sent,
    with_filter,
)
from esbridge.rerank.sources import Sources
from esbridge.scoring import ScoreResult, ScoringInput, get_scorer
from esbridge.scoring.common import channels_needed

log = logging.getLogger(__name__)

#: What esbridge's first stage asks the engine for to key its caches, left out of the hits it answers.
_VERSION_KEYS = ("_seq_no", "_primary_term", "_version")

#: Candidates up to this many are scored in the asynchronous reranker's event loop, not on a worker
#: thread: their features and scores take less than handing them to a thread and back; more would
#: hold the loop too long.
SMALL_SCORING = 200

#: What a search body asks of each hit it answers, apart from its ``_id`` and ``_score``: a search whose
#: page is fetched apart (:func:`page_body`) leaves them out of the search of its candidates.
FETCH_KEYS = ("_source", "highlight", "stored_fields", "docvalue_fields", "fields", "script_fields", "version",
              "seq_no_primary_term")


#: The URL parameters that ask the same of each hit as :data:`FETCH_KEYS`.
FETCH_PARAMS = ("_source", "_source_includes", "_source_excludes", "stored_fields", "docvalue_fields", "version",
                "seq_no_primary_term")


def fetched_apart(body: Mapping[str, Any], params: Mapping[str, str] | None = None) -> bool:
    """Whether ``body``'s candidates can be searched without what it asks of each hit, the page's
    hits fetched afterwards (:func:`page_body`): not where the engine explains its hits or leaves
    out their ``_id`` (``stored_fields: _none_``), nor for a search whose query is the URL's ``q``."""
    p = params or {}
    return (not body.get("explain") and body.get("stored_fields") != "_none_" and "q" not in p
            and str(p.get("explain", "false")).lower() == "false" and p.get("stored_fields") != "_none_")


def needs_page_fetch(body: Mapping[str, Any], params: Mapping[str, str] | None = None) -> bool:
    """Whether ``body``'s hits need more than ``_index``, ``_id`` and ``_score`` (its ``_source``,
    which the engine returns unless told not to, or any other of :data:`FETCH_KEYS`, in the body or
    as URL parameters :data:`FETCH_PARAMS`)."""
    return (body.get("_source", True) is not False or any(k in body for k in FETCH_KEYS if k != "_source")
            or any(k in (params or {}) for k in FETCH_PARAMS))


def page_body(body: Mapping[str, Any], ids: Sequence[str]) -> dict[str, Any]:
    """The search that brings the hits ``ids`` as ``body`` would have answered them: its own query
    (which highlighting and named queries read) restricted to those ids, and what it asks of each
    hit (:data:`FETCH_KEYS`); no aggregation, suggestion or total."""
    out = {k: body[k] for k in FETCH_KEYS if k in body}
    only = {"ids": {"values": list(ids)}}
    query = body.get("query")
    out["query"] = {"bool": {"must": [query], "filter": [only]}} if query is not None else {"bool": {"filter": [only]}}
    out["size"] = len(ids)
    out["track_total_hits"] = False
    return out


#: Windows up to this size fetch ``_source`` in the first stage (one request fewer), unless the index
#: keeps its ids in doc values (:attr:`~esbridge.index.definitions.IndexLayout.id_values`) and the engine
#: is reached over plain HTTP: then the first stage reads no stored field and the top hits' sources
#: come in one ``_mget`` (:meth:`RerankerCore._inline_sources`).
INLINE_SOURCE_WINDOW = 200


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
    first_stage: FirstStageSpec = FirstStage.BM25
    field_weights: Mapping[str, float] | None = None
    dfs: bool | None = None
    vector_cache: TermVectorCache | None = None
    layout: IndexLayout | None = None
    fields: str | Sequence[str] | None = None
    feature_store: DiskVectorStore | str | Path | None = None
    stats_refresh_interval: float | None = None
    progress: bool = False
    features: str = "auto"
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
        check_count("window", self.window)
        check_feature_source(self.features)
        self._similarity_field: str | None = None
        self.first_stage = parse_first_stage(self.first_stage)
        self._entropy: CollectionEntropy | None = None
        self._analysis: OrderedDict[tuple[str, str], QueryChannel] = OrderedDict()
        self._max_window: int | None = None
        self._n_shards: int | None = None
        self._channels_of: tuple[object, object, tuple[str, ...]] | None = None
        self._sources = Sources(self.index)
        #: the cluster's plugin refused to analyse a query (a version before 1.2.0)
        self._older_plugin = False

    def _setup_plan(self) -> Plan[None]:
        """What needs the engine before the first search: the scripted similarity of a
        ``similarity:<name>`` first stage, the index's layout, the field weights checked
        against it, and the feature store."""
        similarity = similarity_name(self.first_stage)
        if similarity is not None:
            self._similarity_field = yield from self._scripted_subfield_plan(similarity)
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
        lacking = self.layout.lacks(self._fields(), self.channels)
        if lacking:
            raise ConfigurationError(
                f"scorer {self.scorer!r} with field weights reads the {', '.join(lacking)} channel(s) of each text "
                f"field, and {self.index!r} has them only in its combined field; drop the field weights, or "
                "re-create the index with every channel in every field (esbridge index --per-field-channels; "
                "in Python IndexLayout(field_channels=...))")
        if self.vector_cache is None and self.feature_store is not None:
            self.vector_cache = TermVectorCache(disk=self.feature_store)
        self.store = FeatureStore(self.engine, self.index, self.layout, vector_cache=self.vector_cache,
                                  stats_refresh_interval=self.stats_refresh_interval, features=self.features)

    # ---- the pieces ------------------------------------------------------------------

    @property
    def _layout(self) -> IndexLayout:
        if self.layout is None:  # set by _setup_plan
            raise RuntimeError("reranker has no index layout")
        return self.layout

    @property
    def channels(self) -> tuple[str, ...]:
        """The channels the scorer reads with these parameters."""
        got = self._channels_of  # parameters are frozen: worked out once per parameters object
        if got is None or got[0] is not self.params or got[1] is not self._scorer:
            got = self._channels_of = (self.params, self._scorer, channels_needed(self.params, self._scorer.channels))
        return got[2]

    def _fields(self) -> tuple[str, ...]:
        return fields_to_read(self._scorer, self._layout, self.field_weights)

    def _max_result_window_plan(self) -> Plan[int]:
        if self._max_window is None:
            self._max_window = yield from max_result_window_plan(self.index)
        return self._max_window

    def _check_window_plan(self, window: int) -> Plan[None]:
        limit = yield from self._max_result_window_plan()
        if window > limit:
            raise ConfigurationError(
                f"window {window} is above index.max_result_window ({limit}) of {self.index!r}; "
                "lower the window or raise that index setting"
            )

    def _analyze_plan(self, text: str) -> Plan[AnalyzedQuery]:
        check_text(text, "query text")
        channels = analysed_channels(self.first_stage, self._layout, self.channels)
        query = yield from self._analyze_cached_plan(text, channels)
        return AnalyzedQuery(query=query, dropped=dropped_terms(self.first_stage, self._layout, query))

    def _analyze_cached_plan(self, text: str, channels: Sequence[str]) -> Plan[dict[str, QueryChannel]]:
        """Per-channel analysis, from an LRU of recent query texts or from the engine: for an
        esbridge index one ``_termvectors`` per shard, which also brings the statistics of the
        text's terms (:meth:`FeatureStore.analyze_plan`); for a plain index one ``_analyze``
        per channel, concurrently.  An index's analyzers cannot change while it is open, so an
        entry stays valid for the reranker's lifetime."""
        missing = [ch for ch in channels if (text, ch) not in self._analysis]
        layout = self._layout
        if missing:
            got: dict[str, QueryChannel] = {}
            if layout.plain or not text:
                for part in (yield gather(*(analyze_query_plan(self.index, layout, text, [ch]) for ch in missing))):
                    got.update(part)
            else:
                got = yield from self.store.analyze_plan(text, missing)
            for ch, qc in got.items():
                self._analysis[(text, ch)] = qc
            while len(self._analysis) > 20_000:
                self._analysis.popitem(last=False)
        return {ch: self._analysis[(text, ch)] for ch in channels}

    def _first_stage_query_plan(self, prepared: AnalyzedQuery, text: str) -> Plan[dict[str, Any]]:
        """The first-stage query (:func:`~esbridge.rerank.first_stage.build_query`), with the
        index-wide statistics that choose the terms sent when a query has too many."""
        fs = self.first_stage
        if fs == FirstStage.BM25F and (self.engine.distribution != "elasticsearch"
                                       or self.engine.info.version < (7, 13, 0)):
            raise ConfigurationError(
                f"first stage 'bm25f' needs the combined_fields query (Elasticsearch 7.13+); "
                f"{self.engine.info.label} does not have it — use 'bm25' or 'multi_match'"
            )
        sent = {}
        for ch in term_channels(fs, self._layout):
            sent[ch] = yield from self._first_stage_terms_plan(ch, prepared.query.get(ch) or QueryChannel((), ()))
        return build_query(fs, self._layout, prepared, text, sent, similarity_subfield=self._similarity_field)

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
        """:func:`~esbridge.rerank.first_stage.terms_sent`, with the channel's index-wide
        statistics where the query has more than :data:`MAX_FIRST_STAGE_TERMS` terms."""
        stats = None
        if len(qc.terms) > MAX_FIRST_STAGE_TERMS:
            layout = self._layout
            fetched = yield from self.store.fetch_plan({channel: qc}, [], [], fields=[layout.combined])
            stats = fetched.stats[layout.subfield(layout.combined, channel)]
        return terms_sent(qc, stats)

    def _search_params_plan(self) -> Plan[dict[str, Any]]:
        dfs = self.dfs
        if dfs is None:
            if self._n_shards is None:
                self._n_shards = len((yield from self.store.routing.routings_plan()))
            dfs = self._n_shards > 1
        return {"search_type": "dfs_query_then_fetch"} if dfs else {}

    def _scoring_input_plan(self, prepared: AnalyzedQuery, ids: Sequence[str],
                            versions: Sequence[DocVersion | None], *,
                            stats_validated: bool = False) -> Plan[tuple[ScoringInput, list[bool]]]:
        build, found = yield from self._features_found_plan(prepared, ids, versions, stats_validated)
        inputs: ScoringInput = yield Offload(build, small=len(ids) <= SMALL_SCORING)
        return inputs, found

    def _features_found_plan(self, prepared: AnalyzedQuery, ids: Sequence[str],
                             versions: Sequence[DocVersion | None], stats_validated: bool,
                             carried: Carried | None = None,
                             ) -> Plan[tuple[Callable[[], ScoringInput], list[bool]]]:
        query = {ch: prepared.query[ch] for ch in self.channels}
        fields = self._fields()
        layout = self._layout
        # one field, or a scorer that does not count distinct terms over several: the scorer reads
        # only the query's terms (and each field's length), so the disk store need not build every
        # term of every candidate, and the engine plugin can read them
        distinct = self._scorer.needs_distinct
        fetched = yield from self.store.fetch_plan(query, ids, versions, fields=fields, validate=not stats_validated,
                                                   terms_only=len(fields) == 1 or not distinct, carried=carried)
        entropy: dict[str, dict[str, float]] | None = None
        if self._scorer.needs_entropy:
            if self._entropy is None:
                self._entropy = CollectionEntropy(self.engine, self.index, layout, progress=self.progress)
            entropy = {}
            for ch in query:
                entropy[ch] = yield from self._entropy.table_plan(ch)
        field_weights = self.field_weights

        def build() -> ScoringInput:
            inputs: ScoringInput = build_input(fetched, layout, query, fields=fields,
                                               field_weights=field_weights, entropy=entropy, distinct=distinct)
            return inputs

        return build, list(fetched.candidates.found)

    def _score_hits_plan(self, prepared: AnalyzedQuery, ids: Sequence[str],
                         versions: Sequence[DocVersion | None], *, stats_validated: bool = False,
                         carried: Carried | None = None,
                         ) -> Plan[tuple[ScoreResult, list[bool]]]:
        build, found = yield from self._features_found_plan(prepared, ids, versions, stats_validated, carried)
        scorer, params = self._scorer, self.params
        result: ScoreResult = yield Offload(lambda: scorer.score(build(), params), small=len(ids) <= SMALL_SCORING)
        return result, found

    def _augmented_inputs_plan(self, queries: Sequence[AnalyzedQuery], ids: Sequence[str],
                               versions: Sequence[DocVersion | None], *,
                               stats_validated: bool = False) -> Plan[tuple[list[ScoringInput], list[bool]]]:
        merged = AnalyzedQuery(query=merge_queries([q.query for q in queries]), dropped=0)
        inputs, found = yield from self._scoring_input_plan(merged, ids, versions, stats_validated=stats_validated)
        return [select_terms(inputs, q.query) for q in queries], found

    def _score_augmented_plan(self, prepared: AnalyzedQuery, variants: Sequence[tuple[AnalyzedQuery, float]],
                              ids: Sequence[str], versions: Sequence[DocVersion | None], *,
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
        query = with_filter((yield from self._first_stage_query_plan(prepared, query_text)), filter)
        body = {"size": window, "query": query, "_source": source, "seq_no_primary_term": True,
                "version": True}
        # index state and missing statistics depend only on the query: fetch them meanwhile
        scored_query = {ch: prepared.query[ch] for ch in self.channels}
        carries = yield from self._carries_features_plan()
        if carries:
            # the engine plugin adds each hit's features to it (taken out again by _rank_plan)
            body["ext"] = features_ext(self._layout, scored_query, self._fields())
        search = self._first_stage_search_plan(body)
        if carries:  # a query beyond the plugin's limits: an error saying what to do
            search = within_limits_plan(search, self.index)
        _, response = yield gather(self.store.prefetch_stats_plan(scored_query, fields=self._fields()), search)
        result: dict[str, Any] = response
        return result

    def _analyses_inline_plan(self, text: str) -> Plan[bool]:
        """Whether ``text``'s first stage is one search that brings its analysis too
        (:meth:`_fetch_analysed_plan`): ``bm25`` on an esbridge index of one shard (index-wide
        statistics) read in its combined field by the plugin, a short text.

        Also for a text analysed before: the one search brings its statistics fresh from the
        searcher that found the hits, where searching by its known terms would first have to ask
        the engine whether the index changed (``_stats``), a second request every query."""
        check_text(text, "query text")
        layout = self._layout
        if (not text or len(text) > MATCH_TEXT_LIMIT or self.first_stage != FirstStage.BM25 or self.dfs
                or layout.plain or self._fields() != (layout.combined,) or self._older_plugin):
            return False
        if not (yield from self._carries_features_plan()):
            return False
        if self._n_shards is None:
            self._n_shards = len((yield from self.store.routing.routings_plan()))
        return self._n_shards == 1

    def _fetch_analysed_plan(self, text: str, *, window: int, filter: Any = None, source: Any = False,
                             ) -> Plan[tuple[AnalyzedQuery, dict[str, Any], Carried | None] | None]:
        """The first stage as the engine's ``match`` query, its hits bringing the plugin's analysis
        of ``text``, its terms' statistics and each hit's features: the analysed query, the response
        and the features (``None`` where nothing was found; then analysed the usual way); ``None``
        where the cluster's plugin predates ``analyze`` (logged once; the usual path from then on)."""
        yield from self._check_window_plan(window)
        layout = self._layout
        channels = analysed_channels(self.first_stage, layout, self.channels)
        # no _seq_no, _primary_term or _version: they key the caches, which carried features bypass
        body = {"size": window, "query": with_filter(match_query(layout, text), filter), "_source": source,
                "ext": analysing_ext(layout, text, channels, self.channels)}
        try:
            response = yield from ids_search_plan(self.index, body, layout.id_values,
                                                  params=current_first_stage_params() or None)
        except EngineError as err:
            if (clear := limit_error(err, self.index)) is not None:
                raise clear from err
            if err.status != 400 or "has no parameter [analyze" not in str(err):
                raise
            self._older_plugin = True
            log.warning("the esbridge-features plugin on %r's cluster predates 1.2.0: each query is analysed by a "
                        "request of its own first; install the version this esbridge builds (esbridge plugin build)",
                        self.index)
            return None
        taken = yield from self._analysis_taken_plan(text, channels, response["hits"]["hits"])
        if taken is None:  # no hit: nothing analysed
            return (yield from self._analyze_plan(text)), response, None
        return taken[0], response, taken[1]

    def _analysis_taken_plan(self, text: str, channels: Sequence[str], hits: list[dict[str, Any]],
                             ) -> Plan[tuple[AnalyzedQuery, Carried] | None]:
        """The plugin's analysis of ``text`` (:func:`analysing_ext`) and the features it added, taken
        out of ``hits`` (which are then as the search would have returned them without it): the
        analysed query and the features; ``None`` where no hit carries them (nothing was found)."""
        layout = self._layout
        got = analysis_from(self.index, layout, channels, hits)
        if got is None:
            return None
        for ch, qc in got.query.items():
            self._analysis[(text, ch)] = qc
        # statistics and features from the searcher that found the hits: no cache is read, so the
        # index's state needs no check — unless the features are read again (by id, via the caches)
        gen = self.store.stats.current() if got.in_order else (yield from self.store.stats.validate_plan())
        self.store.stats.store(got.stats, got.query, layout, [layout.combined], gen)
        carried = carried_features(hits)
        scored = {ch: got.query[ch] for ch in self.channels}
        carried.tag = features_tag(layout, scored, self._fields()) if got.in_order else None
        prepared = AnalyzedQuery(query=got.query, dropped=dropped_terms(self.first_stage, layout, got.query))
        return prepared, carried

    def _found_plan(self, text: str, *, window: int, filter: Any = None, source: Any = False,
                    ) -> Plan[tuple[AnalyzedQuery, dict[str, Any], Carried | None, float]]:
        """A query text's first stage: the analysed query, the engine's response, the features its
        hits brought (``None``: taken out of the hits where :meth:`_rank_plan` reads them) and the
        seconds its analysis took apart from the search (0 when one search brought both).  One
        search where it can be (:meth:`_analyses_inline_plan`), else the analysis and then the
        first stage with the statistics fetched meanwhile; either way the statistics need no
        further check before the hits are ranked."""
        if (yield from self._analyses_inline_plan(text)):
            inline = yield from self._fetch_analysed_plan(text, window=window, filter=filter, source=source)
            if inline is not None:
                return (*inline, 0.0)
        t0 = time.perf_counter()
        prepared = yield from self._analyze_plan(text)
        analysed = time.perf_counter() - t0
        response = yield from self._fetch_candidates_plan(prepared, text, window=window, filter=filter,
                                                          source=source)
        return prepared, response, None, analysed

    def _retrieve_plan(self, text: str, *, window: int | None = None, filter: Any = None) -> Plan[Retrieved]:
        """The first stage of ``text`` and its hits ranked (:meth:`Reranker.retrieve`)."""
        check_count("window", window, allow_none=True)
        prepared, response, carried, _ = yield from self._found_plan(text, window=window or self.window,
                                                                      filter=filter)
        hits = response["hits"]["hits"]
        ranking = yield from self._rank_plan(prepared, hits, stats_validated=True, carried=carried)
        return Retrieved(query=prepared, hits=hits, ranking=ranking)

    def _carries_features_plan(self) -> Plan[bool]:
        """Whether the first stage asks the plugin for its hits' features: where every node runs it
        (:func:`~esbridge.features.plugin.features_plugin_plan`), for an esbridge index read in one field."""
        if self._layout.plain or len(self._fields()) != 1:
            return False
        has: bool = yield from features_plugin_plan(self.engine, self.features)
        return has

    def _first_stage_search_plan(self, body: Mapping[str, Any]) -> Plan[dict[str, Any]]:
        params = {**current_first_stage_params(), **(yield from self._search_params_plan())}
        return (yield from ids_search_plan(self.index, body, self._layout.id_values, params=params))

    def _fetch_union_plan(self, queries: Sequence[tuple[AnalyzedQuery, str]], *, window: int | None = None,
                          filter: Any = None, source: Any = False) -> Plan[CandidateUnion]:
        window = window or self.window
        yield from self._check_window_plan(window)
        if not queries:
            raise ConfigurationError("fetch_union needs at least one query")
        bodies = []
        for prepared, text in queries:
            query = with_filter((yield from self._first_stage_query_plan(prepared, text)), filter)
            bodies.append({"size": window, "query": query, "_source": source, "seq_no_primary_term": True,
                "version": True})
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
        # no stored field read where the index keeps its ids in doc values (else as sent)
        id_values = self._layout.id_values
        lean = [ids_body(self.index, body, id_values) for body in sent]
        leaned = [b for b in lean if b is not None]
        by_values = len(leaned) == len(sent)
        _, answers = yield gather(self.store.prefetch_stats_plan(scored_query, fields=self._fields()),
                                  self._msearch_answers_plan(leaned if by_values else sent))
        if by_values and not ids_taken(self.index, answers, id_values):
            answers = yield from self._msearch_answers_plan(sent)  # a hit had no id value: as sent
        return union_of([answers[i] for i in which])

    def _msearch_answers_plan(self, bodies: Sequence[Mapping[str, Any]]) -> Plan[list[dict[str, Any]]]:
        """The answers to one ``_msearch`` of ``bodies`` (an engine error for any that failed)."""
        lines: list[Mapping[str, Any]] = []
        # _msearch takes the shard-copy preference per search, in each header
        preference = self.engine.options.preference
        header = {"preference": preference} if preference else {}
        for body in bodies:
            lines += [header, body]
        return msearch_answers(self.index, (yield from self._msearch_plan(ndjson_lines(lines))), len(bodies))

    def _msearch_plan(self, body: str) -> Plan[Any]:
        params = yield from self._search_params_plan()
        return (yield Call("POST", f"/{path_segment(self.index, patterns=True)}/_msearch", body=body,
                           ndjson=True, params=params, context=f"searching {self.index!r}"))

    def _inline_sources(self, window: int) -> bool:
        """Whether a first stage of ``window`` hits brings their ``_source`` (else the top hits' come
        with one ``_mget`` afterwards): windows up to :data:`INLINE_SOURCE_WINDOW` of an index that
        does not keep its ids in doc values, whose first stage reads each hit's stored fields for its
        ``_id`` anyway.  Where it keeps them there, the first stage reads no stored field, which saves
        the engine more than the one more request costs, over TLS too."""
        return window <= INLINE_SOURCE_WINDOW and not self._layout.id_values

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
        check_count("window", window, allow_none=True)
        w0 = check_weight(original_weight, "original_weight")
        augmented = augmentations is not None or w0 != 1.0
        window = max(self.window if window is None else window, size)
        # small windows bring _source with the first stage; large ones fetch it for the top hits only
        inline_source = self._inline_sources(window)
        source: Any = self._sources.search_filter(fields) if inline_source else False
        t0 = time.perf_counter()
        checked = (yield from resolve_augmentations_plan(augmentations, query_text)) \
            if augmentations is not None else ()
        t1 = time.perf_counter()
        ranks: list[dict[str, int]] | None = None
        carried: Carried | None = None
        variants: list[tuple[AnalyzedQuery, float]] | None = None
        if not augmented:
            # one request where it can be: the engine's match query, its hits bringing the text's analysis
            prepared, response, carried, analysed = yield from self._found_plan(query_text, window=window,
                                                                                filter=filter, source=source)
            hits = response["hits"]["hits"]
            t2 = t1 + analysed
        else:
            prepared = yield from self._analyze_plan(query_text)
            variants = yield from self._analyze_variants_plan(checked)
            t2 = time.perf_counter()
            # the candidates of the query and of every variant, one _msearch; the response's shell is the query's
            union = yield from self._fetch_union_plan(
                [(prepared, query_text), *((v, text) for (v, _), (text, _) in zip(variants, checked))],
                window=window, filter=filter, source=source)
            response, hits, ranks = union.responses[0], union.hits, union.ranks
        t3 = time.perf_counter()
        if inline_source and not fields:
            self._sources.drop_vectors(hits)
        reranked, feature_time, dropped = yield from self._rerank_hits_plan(
            prepared, hits, explain, stats_validated=True, variants=variants, original_weight=w0, ranks=ranks,
            limit=size, carried=carried)
        t4 = time.perf_counter()
        top = reranked[:size]
        if not inline_source:
            top, gone = yield from self._sources.attach_plan(top, fields)
            dropped += gone
        t5 = time.perf_counter()
        for h in top:  # what esbridge asked for to key its caches, not part of the answer
            for key in _VERSION_KEYS:
                h.pop(key, None)
        out = dict(response)
        out["hits"] = dict(response["hits"])
        out["hits"]["hits"] = top
        out["hits"]["max_score"] = top[0]["_score"] if top else None
        out["_esbridge"] = response_meta(self.scorer, self.index, prepared, len(hits), variants=variants,
                                         original_weight=w0, texts=[text for text, _ in checked],
                                         dropped=dropped)
        self.last = RerankStats(analyze=t2 - t1, first_stage=t3 - t2, features=feature_time,
                                scoring=t4 - t3 - feature_time, fetch_source=t5 - t4,
                                candidates=len(hits), dropped_terms=prepared.dropped, augment=t1 - t0)
        return out

    def _rescore_plan(self, response: Mapping[str, Any] | Any, query_text: str, *, window: int | None = None,
                      explain: bool = False, augmentations: Any = None,
                      original_weight: float = 1.0) -> Plan[dict[str, Any]]:
        response, hits = response_hits(response)
        check_count("window", window, allow_none=True)
        window = self.window if window is None else window
        hits, dropped = unique_hits(hits, self.index)
        for h in hits:
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
        head, _, gone = yield from self._rerank_hits_plan(prepared, hits[:window], explain, variants=variants,
                                                          original_weight=w0)
        dropped += gone
        tail = hits[window:]
        out = copy.deepcopy(dict(response))
        out["hits"]["hits"] = head + tail
        out["hits"]["max_score"] = max((h["_score"] for h in head if h.get("_score") is not None),
                                       default=response["hits"].get("max_score"))
        out["_esbridge"] = response_meta(self.scorer, self.index, prepared, len(head), variants=variants,
                                         original_weight=w0, dropped=dropped)
        return out

    def _search_rescored_plan(self, body: Mapping[str, Any], query_text: str, *, window: int,
                              params: Mapping[str, str] | None = None, explain: bool = False,
                              page: tuple[int, int] | None = None) -> Plan[dict[str, Any]]:
        """The engine's answer to ``body`` (a search of the reranker's index as an application sent
        it: its own query, filters, aggregations, highlighting) with its top ``window`` hits
        reranked for ``query_text``, as :meth:`_rescore_plan` reranks a response.  Where the
        plugin can (:meth:`_analyses_inline_plan`), the one search brings with its hits the
        analysis of ``query_text``, the terms' statistics and each hit's features (the plugin's
        extension beside the body's own ``ext``): no other request; else the search, then
        :meth:`_rescore_plan`.

        ``page`` (``from``, ``size`` of the hits answered): only those hits need what the body asks
        each hit for (``_source``, ``highlight``, ``fields``, ...).  Where the index keeps its ids in
        doc values, the search then reads no stored field for the others, and a second search brings
        the page's hits (:func:`page_body`); the hits outside the page have ``_index``, ``_id``,
        ``_score`` and the named queries they matched only."""
        check_count("window", window)
        if (yield from self._analyses_inline_plan(query_text)):
            channels = analysed_channels(self.first_stage, self._layout, self.channels)
            sent = dict(body)
            sent["ext"] = {**(body.get("ext") or {}),
                           **analysing_ext(self._layout, query_text, channels, self.channels)}
            apart = page is not None and bool(self._layout.id_values) and fetched_apart(body, params)
            try:
                if apart:
                    lean = {k: v for k, v in sent.items() if k not in FETCH_KEYS}
                    lean["_source"] = False
                    answer = yield from ids_search_plan(self.index, lean, self._layout.id_values, params={
                        k: v for k, v in (params or {}).items() if k not in FETCH_PARAMS})
                else:
                    answer = yield from search_plan(self.index, sent, params=params)
            except EngineError as err:
                if (clear := limit_error(err, self.index)) is not None:
                    raise clear from err
                raise
            # the engine's own answer to esbridge's request: its hits are changed in place (no copy, no
            # check of a response given by a caller, which costs more than the ranking here)
            response: dict[str, Any] = answer
            hits: list[dict[str, Any]] = list(response["hits"]["hits"])
            taken = yield from self._analysis_taken_plan(query_text, channels, hits)
            if taken is None:
                return response
            prepared, carried = taken
            head, _, gone = yield from self._rerank_hits_plan(prepared, hits[:window], explain,
                                                              stats_validated=True, carried=carried)
            ranked = head + hits[window:]
            shown = ranked[page[0]:page[0] + page[1]] if apart and page is not None else []
            if shown and needs_page_fetch(body, params):
                assert page is not None
                try:
                    got = yield from search_plan(self.index, page_body(body, [str(h["_id"]) for h in shown]),
                                                 params=params)
                except EngineError:  # a body the page's search cannot take (e.g. a query that must be alone)
                    return (yield from self._search_rescored_plan(body, query_text, window=window, params=params,
                                                                  explain=explain))
                whole = {str(h["_id"]): h for h in got["hits"]["hits"]}
                page_hits = []
                for h in shown:
                    full = whole.get(str(h["_id"]))
                    if full is None:  # deleted since the first search
                        gone.append(dropped_hit(h, "deleted"))
                        continue
                    full = dict(full)
                    full["_score"] = h["_score"]
                    if "_esbridge" in h:
                        full["_esbridge"] = h["_esbridge"]
                    page_hits.append(full)
                ranked[page[0]:page[0] + page[1]] = page_hits
            out = dict(response)
            out["hits"] = {**response["hits"], "hits": ranked}
            out["hits"]["max_score"] = max((h["_score"] for h in head if h.get("_score") is not None),
                                           default=response["hits"].get("max_score"))
            out["_esbridge"] = response_meta(self.scorer, self.index, prepared, len(head), dropped=gone)
            return out
        response = yield from search_plan(self.index, body, params=params)
        return (yield from self._rescore_plan(response, query_text, window=window, explain=explain))

    # ---- internals ---------------------------------------------------------------------

    _concrete: set[str] | None = None

    def _same_index_plan(self, name: str) -> Plan[bool]:
        """Whether ``name`` is (one of) the concrete index(es) the reranker's index names."""
        if self._concrete is None:
            self._concrete = set((yield from uuids_plan(self.index)))
        return name in self._concrete

    def _rank_plan(self, query: str | AnalyzedQuery, candidates: Sequence[Mapping[str, Any] | str], *,
                   variants: Sequence[tuple[AnalyzedQuery | str, float]] | None = None,
                   original_weight: float = 1.0, stats_validated: bool = False,
                   carried: Carried | None = None) -> Plan[Ranking]:
        """The one ranking path: candidates → features → scores → :class:`Ranking`
        (:func:`~esbridge.rerank.candidates.rank_order`: equal scores keep the candidates' order).
        ``carried``: the features the plugin added to the candidates, already taken out of them
        (else they are taken out here)."""
        prepared = query if isinstance(query, AnalyzedQuery) else (yield from self._analyze_plan(query))
        ids, versions = candidate_keys(candidates)
        if not ids:
            return Ranking.of([], [])
        if variants is None:
            if carried is None:
                carried = carried_features([c for c in candidates if isinstance(c, dict)])
            result, found = yield from self._score_hits_plan(prepared, ids, versions, stats_validated=stats_validated,
                                                             carried=carried)
        else:
            analysed = []
            for v, w in variants:
                analysed.append((v if isinstance(v, AnalyzedQuery) else (yield from self._analyze_plan(v)),
                                 check_weight(w, "variant weight")))
            result, found = yield from self._score_augmented_plan(
                prepared, analysed, ids, versions, original_weight=check_weight(original_weight, "original_weight"),
                stats_validated=stats_validated)
        return Ranking.of(ids, result, found)

    def _rerank_hits_plan(self, prepared: AnalyzedQuery, hits: list[dict[str, Any]],
                          explain: bool, *, stats_validated: bool = False,
                          variants: Sequence[tuple[AnalyzedQuery, float]] | None = None, original_weight: float = 1.0,
                          ranks: Sequence[Mapping[str, int]] | None = None, limit: int | None = None,
                          carried: Carried | None = None,
                          ) -> Plan[tuple[list[dict[str, Any]], float, list[dict[str, Any]]]]:
        """The hits reranked (:meth:`_rank_plan`; the first ``limit`` of them, if given), the
        seconds their features and scores took, and the hits left out because the engine no
        longer holds them (deleted since the search: :func:`~esbridge.rerank.candidates.dropped_hit`)."""
        if not hits:
            return [], 0.0, []
        t0 = time.perf_counter()
        ranking = yield from self._rank_plan(prepared, hits, variants=variants, original_weight=original_weight,
                                             stats_validated=stats_validated, carried=carried)
        feature_time = time.perf_counter() - t0
        gone = [dropped_hit(h, "deleted") for h, ok in zip(hits, ranking.found) if not ok]
        return reorder_hits(hits, ranking, explain=explain, ranks=ranks, limit=limit), feature_time, gone
