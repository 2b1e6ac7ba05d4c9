"""The synchronous reranker: :meth:`Reranker.search` and :meth:`Reranker.rescore`.

* :meth:`Reranker.search` runs the first stage (built from the engine's own ``_analyze`` of
  the query text, per channel), fetches term vectors and index-wide statistics for the top
  ``window`` hits, rescores them exactly and returns an engine-shaped response whose
  ``_score`` is esbridge's and whose first-stage score is kept under ``_esbridge``.
* :meth:`Reranker.rescore` does the same to any Elasticsearch or OpenSearch search
  response: the top ``window`` hits are reordered, the hits beyond the window keep
  their order and scores below them, as the engine's own rescore API does.
* :meth:`Reranker.rank` ranks a candidate set (hits or ids): the one path from candidates to
  a ranking, which ``search``, ``rescore``, evaluation, the hybrid pipeline and the demo all
  take; equal scores keep the candidates' (first-stage) order.
* ``search`` and ``rescore`` take ``augmentations``: weighted variants of the query (or an
  :class:`~esbridge.augment.Augmenter` that makes them), scored with the same scorer over the
  same candidates and added with their weights (weighted query augmentation,
  docs/scoring.md §4.6).  ``search`` then finds the candidates of the query and of every
  variant with one ``_msearch`` and reranks their union.

The pipeline's steps are :class:`~esbridge.rerank.pipeline.RerankerCore`'s plans; the
methods here run them with blocking requests (concurrent steps on the reranker's worker
threads, stopped by :meth:`Reranker.close`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from esbridge.deprecation import renamed_keyword
from esbridge.engine.client import Engine
from esbridge.engine.plan import Plan, run
from esbridge.features.cache import DocVersion
from esbridge.rerank.augmentation import Augmentation
from esbridge.rerank.candidates import AnalyzedQuery, CandidateUnion, Ranking, Retrieved, check_page
from esbridge.rerank.pipeline import RerankerCore
from esbridge.scoring import ScoreResult, ScoringInput

T = TypeVar("T")


@dataclass
class Reranker(RerankerCore):
    """Exact rescoring of an engine's candidates with one of esbridge's scorers.

    Every ranking orders by score descending; equal scores keep the first stage's order
    (:meth:`rank`).

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
        feature_store: a :class:`~esbridge.features.diskstore.DiskVectorStore` (or its
            folder) that keeps candidates' term vectors on disk across processes and
            restarts (``esbridge features build`` fills it for a whole index); ignored when
            ``vector_cache`` is given (give it ``TermVectorCache(disk=...)`` instead).
        stats_refresh_interval: seconds the index-wide statistics stay in use after the index
            was written to (default: the index's ``index.refresh_interval``, the engine's own
            near-real-time delay; 0: refetched after every write).  A recreated index or a
            moved alias is noticed at once whatever this is.
        progress: a progress bar on stderr while a scorer's index-wide table is computed (bmx's
            collection entropy, once per index state); off by default.
        features: how the candidates' term frequencies and statistics are read: ``"auto"`` (the
            default) inside the engine by esbridge's plugin where every node runs it (an
            esbridge index read in one field; the first stage's hits then bring their features),
            else with ``_mtermvectors``; ``"plugin"`` always through the plugin (an error where
            it is missing); ``"termvectors"`` never (:mod:`esbridge.features.plugin`).

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
                      versions: Sequence[DocVersion | None], *,
                      stats_validated: bool = False) -> tuple[ScoringInput, list[bool]]:
        """The scorer's input for candidates ``ids`` of an analysed query (input order), and
        which of them the engine still holds: the one place where candidates become features
        (term vectors, index-wide statistics, collection entropies where the scorer reads them).

        ``stats_validated``: the statistics cache was validated (and filled) for this
        query moments ago by :meth:`FeatureStore.prefetch_stats`.
        """
        return self._run(self._scoring_input_plan(prepared, ids, versions, stats_validated=stats_validated))

    def score_hits(self, prepared: AnalyzedQuery, ids: Sequence[str],
                   versions: Sequence[DocVersion | None], *,
                   stats_validated: bool = False) -> tuple[ScoreResult, list[bool]]:
        """Scores of candidates ``ids`` for an analysed query (input order), and which of
        them were found (see :meth:`scoring_input`)."""
        return self._run(self._score_hits_plan(prepared, ids, versions, stats_validated=stats_validated))

    # ---- public API --------------------------------------------------------------------

    def rank(self, query: str | AnalyzedQuery, candidates: Sequence[Mapping[str, Any] | str], *,
             variants: Sequence[tuple[AnalyzedQuery | str, float]] | None = None, original_weight: float = 1.0,
             stats_validated: bool = False) -> Ranking:
        """Rank a candidate set: the one path every command ranks through (search, rescore,
        eval and run, the hybrid pipeline's lexical strategy, feature export, the demo).

        The candidates' features are fetched (term vectors, index-wide statistics:
        :meth:`scoring_input`), scored with the reranker's scorer and ordered by score
        descending; **equal scores keep the order the candidates were given in** — the first
        stage's (:func:`~esbridge.rerank.candidates.rank_order`).  A candidate the engine no
        longer holds (deleted since it was found) is left out of the ranking and listed in
        ``dropped``.

        Args:
            query: the query text (analysed by the index's analyzers) or an analysed query
                (:meth:`analyze`).
            candidates: first-stage hits (their ``_seq_no``/``_primary_term`` key the feature
                caches) or document ids.
            variants: weighted variants of the query, ``[(text or analysed query, weight), ...]``:
                a candidate's score is ``original_weight · score(query) + Σ_i w_i ·
                score(variant_i)`` (weighted query augmentation, docs/scoring.md §4.6).
            original_weight: the query's weight ``w_0`` with ``variants``.
            stats_validated: the statistics of the query's terms were validated moments ago
                (:meth:`fetch_candidates` does it while the first stage runs).

        Returns:
            A :class:`~esbridge.rerank.candidates.Ranking`: ids and scores best first, their
            positions among the candidates, which were found, and every candidate's score
            parts (in the candidates' order).

        Raises:
            ConfigurationError: a candidate that is neither a hit nor an id, a weight that is
                not a finite number >= 0.
        """
        return self._run(self._rank_plan(query, candidates, variants=variants, original_weight=original_weight,
                                         stats_validated=stats_validated))

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
            An engine-shaped search response.  A candidate deleted while the query runs is left
            out (the rest is ranked) and listed under ``_esbridge.dropped`` with its ``_index``,
            ``_id`` and reason ``"deleted"``; a warning is logged.

        Raises:
            ConfigurationError: a bad size or window, or a malformed augmentation (a weight
                that is not a finite number >= 0, a text that is not a string).
        """
        return self._run(self._search_plan(query_text, size, filter=filter, fields=fields, explain=explain,
                                           window=window, augmentations=augmentations,
                                           original_weight=original_weight))

    def retrieve(self, query_text: str, *, window: int | None = None, filter: Any = None) -> Retrieved:
        """The first stage of ``query_text`` and its top ``window`` hits ranked by the reranker's
        scorer: :meth:`search` without the response around it, for a caller that reads the
        whole ranking (the hybrid pipeline's lexical strategy).

        The requests are :meth:`search`'s: on an index of one shard read through esbridge's engine
        plugin, one search brings the query's analysis, its terms' statistics and every hit's
        features; elsewhere the query is analysed first and the statistics are fetched while
        the first stage runs.  The hits carry no ``_source``.

        Args:
            filter: a query clause (or list) restricting the candidates; it does not score.
            window: hits to rank (default: the reranker's window).

        Returns:
            A :class:`~esbridge.rerank.candidates.Retrieved`: the analysed query, the hits and
            their :class:`~esbridge.rerank.candidates.Ranking` (a hit deleted since the search is
            in ``ranking.dropped``, not in the ranking).
        """
        return self._run(self._retrieve_plan(query_text, window=window, filter=filter))

    def fetch_candidates(self, prepared: AnalyzedQuery, query_text: str, *, window: int | None = None,
                         filter: Any = None, source: Any = False) -> dict[str, Any]:
        """The engine's first-stage response for an analysed query: the top ``window`` hits
        with ``_seq_no``/``_primary_term``.  The index state and the statistics the scorer
        will need are fetched meanwhile, so :meth:`score_hits` can follow with
        ``stats_validated=True``.  Where the engine runs esbridge's plugin
        (:mod:`esbridge.features.plugin`), each hit also carries its features in
        ``fields._esbridge_features``, which :meth:`rank` reads (and takes out of the hits)
        instead of asking the engine for them again."""
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
                         versions: Sequence[DocVersion | None], *,
                         stats_validated: bool = False) -> tuple[list[ScoringInput], list[bool]]:
        """Each query's scoring input over the same candidates ``ids``, from **one** fetch of
        the features of their merged terms (:meth:`scoring_input`), and which candidates the
        engine still holds."""
        return self._run(self._augmented_inputs_plan(queries, ids, versions, stats_validated=stats_validated))

    def score_augmented(self, prepared: AnalyzedQuery, variants: Sequence[tuple[AnalyzedQuery, float]],
                        ids: Sequence[str], versions: Sequence[DocVersion | None], *,
                        original_weight: float = 1.0,
                        stats_validated: bool = False) -> tuple[ScoreResult, list[bool]]:
        """``w_0 · score(Q) + Σ_i w_i · score(Q_i)`` of candidates ``ids`` (input order) with the
        reranker's scorer (:func:`esbridge.rerank.augmentation.score_augmented`); the features of every
        query are fetched once (:meth:`scoring_input` of their merged terms)."""
        return self._run(self._score_augmented_plan(prepared, variants, ids, versions,
                                                    original_weight=original_weight,
                                                    stats_validated=stats_validated))

    def rescore(self, response: Mapping[str, Any] | Any, query_text: str, *, window: int | None = None,
                explain: bool = False, augmentations: Any = None,
                original_weight: float = 1.0, window_size: int | None = None) -> dict[str, Any]:
        """Rerank the top ``window`` hits of an engine search response (default: the reranker's
        window).

        Hits beyond the window keep their order and scores, below the window, as the
        engine's rescore API does.  The response is not modified; a copy is returned.

        ``augmentations`` and ``original_weight`` are those of :meth:`search`; the variants
        are scored over the response's own hits (rescore has no first stage to widen).

        A document given more than once (same ``_index`` and ``_id``) is kept where it first
        appears; a hit the engine no longer holds (deleted since the search) is left out and the
        rest ranked.  Both are listed under ``_esbridge.dropped`` (``_index``, ``_id`` and reason
        ``"duplicate"`` or ``"deleted"``) and logged as a warning.

        ``window_size`` is the former name of ``window``: it still works, with a
        :class:`DeprecationWarning`.

        Raises:
            ConfigurationError: the response is not a search response, nests deeper than
                :data:`~esbridge.jsoninput.MAX_JSON_DEPTH`, an augmentation is malformed, a bad
                window, or both ``window`` and ``window_size``.
        """
        window = renamed_keyword("Reranker.rescore", "window", window, "window_size", window_size)
        return self._run(self._rescore_plan(response, query_text, window=window, explain=explain,
                                            augmentations=augmentations, original_weight=original_weight))

    def search_rescored(self, body: Mapping[str, Any], query_text: str, *, window: int | None = None,
                        params: Mapping[str, str] | None = None, explain: bool = False,
                        page: tuple[int, int] | None = None) -> dict[str, Any]:
        """Run your own search ``body`` on the reranker's index and rerank its top ``window`` hits
        for ``query_text``: what :meth:`rescore` does to that search's response, in one request to
        the engine where its plugin can bring the hits' features and the query's analysis with the
        hits (an esbridge index of one shard read in its combined field, a text the first stage's
        ``match`` takes); else the search, then :meth:`rescore`.  The body's query, filters,
        aggregations, highlighting and paging are the engine's; ``params`` go with the search
        (e.g. ``typed_keys``, ``preference``).

        ``page``: the ``(from, size)`` of the hits you will show, of those answered.  Only they
        then carry what the body asks of each hit (``_source``, ``highlight``, ``fields``, ...);
        the others have ``_index``, ``_id``, ``_score`` and the named queries they matched.  Where
        the index keeps its ids in doc values, this spares the engine reading the stored fields of
        every candidate, for a second, small search that brings the page's hits.

        Raises:
            ConfigurationError: a bad window, or a text beyond the plugin's limits.
            EngineError: the engine refused the search.
        """
        return self._run(self._search_rescored_plan(body, query_text, window=window or self.window, params=params,
                                                    explain=explain, page=check_page(page)))

    def _attach_sources(self, hits: list[dict[str, Any]], fields: Sequence[str] | None) -> None:
        self._run(self._sources.fetch_plan(hits, fields))


class SharedAnalysis:
    """Analysed queries shared between rerankers whose channels they cover (one analysis
    of a query serves every reranker that reads no channel beyond it)."""

    def __init__(self, rerankers: Sequence[Reranker]) -> None:
        # analyse with the reranker that reads the most channels first; others reuse it
        self.order = sorted(rerankers, key=lambda r: -len(r.channels))

    def analyse(self, text: str) -> dict[str, AnalyzedQuery]:
        """``text`` analysed for each reranker, by scorer name."""
        done: list[tuple[frozenset[str], AnalyzedQuery]] = []
        out: dict[str, AnalyzedQuery] = {}
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
