"""esbridge for asyncio: :class:`AsyncEngine` and :class:`AsyncReranker`.

For services that search concurrently::

    from esbridge.aio import AsyncEngine, AsyncReranker

    async with await AsyncEngine.connect("http://localhost:9200") as engine:
        async with AsyncReranker(engine, "scifact", scorer="evolved") as reranker:
            responses = await asyncio.gather(*(reranker.search(q, size=10) for q in queries))

:class:`AsyncReranker` takes the parameters of :class:`~esbridge.rerank.Reranker` and its
``search``, ``rescore`` and ``rank`` take theirs, return the same responses and raise the same errors: both
run the one pipeline of :mod:`esbridge.rerank` (written as plans, :mod:`esbridge.engine.plan`),
the synchronous reranker with blocking requests, this one with the asynchronous clients
(``pip install "esbridge[async]"``).  Requests that do not depend on each other (the analysis of
each channel, the first stage and the statistics it needs) run concurrently; scoring, and an
augmenter that is a plain function, run on worker threads so the event loop is not blocked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from esbridge.deprecation import renamed_keyword
from esbridge.engine.async_client import AsyncEngine
from esbridge.engine.plan import Plan, PlanLock, run_async
from esbridge.features.cache import DocVersion
from esbridge.rerank import AnalyzedQuery, Ranking, RerankerCore, Retrieved
from esbridge.rerank.candidates import check_page
from esbridge.scoring import ScoreResult, ScoringInput

__all__ = ["AsyncEngine", "AsyncReranker"]

T = TypeVar("T")


@dataclass
class AsyncReranker(RerankerCore):
    """:class:`~esbridge.rerank.Reranker` for asyncio code, over an :class:`AsyncEngine`.

    The arguments are :class:`~esbridge.rerank.Reranker`'s.  Those that need no engine are
    checked at once; the index's layout is read by :meth:`open` (``async with`` or
    :meth:`create` call it, and so does the first search if nothing did).  One reranker serves
    any number of concurrent searches; its caches (analysed queries, term vectors, statistics)
    are shared by them, and ``last`` holds the statistics of the search that finished last.
    """

    engine: AsyncEngine

    def __post_init__(self) -> None:
        super().__post_init__()
        self._ready = False
        self._opening = PlanLock()

    @classmethod
    async def create(cls, engine: AsyncEngine, index: str, **kwargs: Any) -> AsyncReranker:
        """A reranker over ``index``, opened (:meth:`open`)."""
        reranker = cls(engine, index, **kwargs)
        await reranker.open()
        return reranker

    async def open(self) -> AsyncReranker:
        """Read what the reranker needs from the engine before its first search (the index's
        layout; the scripted similarity of a ``similarity:<name>`` first stage), once.

        Raises:
            ConfigurationError: as :class:`~esbridge.rerank.Reranker`'s constructor does.
        """
        if self._ready:
            return self
        async with self._opening.for_loop():
            if not self._ready:
                await run_async(self._setup_plan(), self.engine)
                self._ready = True
        return self

    async def close(self) -> None:
        """Nothing to release (the engine connection stays open); for symmetry with ``async with``."""

    async def __aenter__(self) -> AsyncReranker:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _run(self, plan: Plan[T]) -> T:
        if not self._ready:
            await self.open()
        return await run_async(plan, self.engine)

    # ---- the pieces (see Reranker) ---------------------------------------------------

    async def max_result_window(self) -> int:
        """The index's ``index.max_result_window`` (asked once)."""
        return await self._run(self._max_result_window_plan())

    async def analyze(self, text: str) -> AnalyzedQuery:
        """The query's tokens per channel from the index's analyzers."""
        return await self._run(self._analyze_plan(text))

    async def retrieve(self, query_text: str, *, window: int | None = None, filter: Any = None) -> Retrieved:
        """:meth:`Reranker.retrieve <esbridge.rerank.Reranker.retrieve>`."""
        return await self._run(self._retrieve_plan(query_text, window=window, filter=filter))

    async def fetch_candidates(self, prepared: AnalyzedQuery, query_text: str, *, window: int | None = None,
                               filter: Any = None, source: Any = False) -> dict[str, Any]:
        """:meth:`Reranker.fetch_candidates <esbridge.rerank.Reranker.fetch_candidates>`."""
        return await self._run(self._fetch_candidates_plan(prepared, query_text, window=window, filter=filter,
                                                           source=source))

    async def scoring_input(self, prepared: AnalyzedQuery, ids: Sequence[str],
                            versions: Sequence[DocVersion | None], *,
                            stats_validated: bool = False) -> tuple[ScoringInput, list[bool]]:
        """:meth:`Reranker.scoring_input <esbridge.rerank.Reranker.scoring_input>`."""
        return await self._run(self._scoring_input_plan(prepared, ids, versions, stats_validated=stats_validated))

    async def score_hits(self, prepared: AnalyzedQuery, ids: Sequence[str],
                         versions: Sequence[DocVersion | None], *,
                         stats_validated: bool = False) -> tuple[ScoreResult, list[bool]]:
        """:meth:`Reranker.score_hits <esbridge.rerank.Reranker.score_hits>`."""
        return await self._run(self._score_hits_plan(prepared, ids, versions, stats_validated=stats_validated))

    # ---- public API --------------------------------------------------------------------

    async def rank(self, query: str | AnalyzedQuery, candidates: Sequence[Mapping[str, Any] | str], *,
                   variants: Sequence[tuple[AnalyzedQuery | str, float]] | None = None,
                   original_weight: float = 1.0, stats_validated: bool = False) -> Ranking:
        """Rank a candidate set (:meth:`Reranker.rank <esbridge.rerank.Reranker.rank>`: the same
        arguments, ranking and errors; equal scores keep the candidates' order)."""
        return await self._run(self._rank_plan(query, candidates, variants=variants,
                                               original_weight=original_weight, stats_validated=stats_validated))

    async def search(self, query_text: str, size: int = 10, *, filter: Any = None,
                     fields: Sequence[str] | None = None, explain: bool = False,
                     window: int | None = None, augmentations: Any = None,
                     original_weight: float = 1.0) -> dict[str, Any]:
        """Search ``query_text`` and return the top ``size`` hits, reranked
        (:meth:`Reranker.search <esbridge.rerank.Reranker.search>`: the same arguments,
        response and errors).  An augmenter may also be an ``async`` function."""
        return await self._run(self._search_plan(query_text, size, filter=filter, fields=fields, explain=explain,
                                                 window=window, augmentations=augmentations,
                                                 original_weight=original_weight))

    async def search_rescored(self, body: Mapping[str, Any], query_text: str, *, window: int | None = None,
                              params: Mapping[str, str] | None = None, explain: bool = False,
                              page: tuple[int, int] | None = None) -> dict[str, Any]:
        """Your own search ``body``, its top ``window`` hits reranked for ``query_text``
        (:meth:`Reranker.search_rescored <esbridge.rerank.Reranker.search_rescored>`: the same
        arguments, response and errors)."""
        return await self._run(self._search_rescored_plan(body, query_text, window=window or self.window,
                                                          params=params, explain=explain, page=check_page(page)))

    async def rescore(self, response: Mapping[str, Any] | Any, query_text: str, *, window: int | None = None,
                      explain: bool = False, augmentations: Any = None,
                      original_weight: float = 1.0, window_size: int | None = None) -> dict[str, Any]:
        """Rerank the top ``window`` hits of an engine search response
        (:meth:`Reranker.rescore <esbridge.rerank.Reranker.rescore>`: the same arguments,
        response and errors; ``window_size``, the former name of ``window``, warns)."""
        window = renamed_keyword("AsyncReranker.rescore", "window", window, "window_size", window_size)
        return await self._run(self._rescore_plan(response, query_text, window=window, explain=explain,
                                                  augmentations=augmentations, original_weight=original_weight))
