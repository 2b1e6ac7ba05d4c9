"""Caches in front of the term-vector fetch.

* :class:`TermVectorCache` keeps candidates' term vectors keyed on
  ``(index, _id, _seq_no, _primary_term)``: the first stage returns those for
  every hit, so an updated or deleted-and-re-added document has a new key and is
  never scored from stale vectors.  Bounded (LRU by entry count), with hit and
  miss counts.
* :class:`StatsCache` keeps index-wide term and field statistics for one index
  *state*: the state is read from ``_stats`` (document counts and indexing and
  deletion totals of the primaries) before each use (or at most every
  ``check_interval`` seconds, if set, trading freshness for one request), and
  every entry is dropped when it changes.
* :class:`FeatureStore` puts both in front of
  :func:`esbridge.features.termvectors.fetch_raw`: one request fetches only what
  is missing.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from esbridge.engine.client import Engine, path_segment
from esbridge.errors import ConfigurationError
from esbridge.features.termvectors import (
    EMPTY_VECTOR,
    CandidateVectors,
    FetchResult,
    FieldVector,
    FieldStats,
    QueryChannel,
    ShardRouting,
    fetch_raw,
)
from esbridge.index.definitions import IndexLayout

DocKey = tuple[str, str, int, int]  # index, id, seq_no, primary_term


def index_state(engine: Engine, index: str) -> tuple[int, ...]:
    """A cheap fingerprint of an index's content: live and deleted document counts and the
    indexing and deletion totals of its primaries (any write changes one of them)."""
    resp = engine.request("GET", f"/{path_segment(index, patterns=True)}/_stats/docs,indexing",
                          context=f"reading the state of {index!r}")
    prim = resp["_all"]["primaries"]
    return (int(prim["docs"]["count"]), int(prim["docs"]["deleted"]),
            int(prim["indexing"]["index_total"]), int(prim["indexing"]["delete_total"]))


@dataclass(frozen=True)
class CacheCounts:
    hits: int
    misses: int
    size: int

    @property
    def hit_rate(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else 0.0


class TermVectorCache:
    """LRU cache of candidates' term vectors, keyed on sequence number and primary term."""

    def __init__(self, max_entries: int = 50_000) -> None:
        if max_entries < 0:
            raise ValueError(f"max_entries must be >= 0, got {max_entries}")
        self.max_entries = max_entries
        self._data: OrderedDict[DocKey, dict[str, FieldVector]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: DocKey, subfields: Sequence[str]) -> dict[str, FieldVector] | None:
        with self._lock:
            entry = self._data.get(key)
            if entry is None or any(sf not in entry for sf in subfields):
                self.misses += 1
                return None
            self._data.move_to_end(key)
            self.hits += 1
            return entry

    def put(self, key: DocKey, vectors: Mapping[str, FieldVector], subfields: Sequence[str]) -> None:
        if self.max_entries == 0:
            return
        with self._lock:
            entry = dict(self._data.get(key, {}))
            for sf in subfields:
                entry[sf] = vectors.get(sf, EMPTY_VECTOR)
            self._data[key] = entry
            self._data.move_to_end(key)
            while len(self._data) > self.max_entries:
                self._data.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def counts(self) -> CacheCounts:
        return CacheCounts(self.hits, self.misses, len(self._data))


class StatsCache:
    """Index-wide statistics of one index state; cleared when the state changes."""

    def __init__(self, engine: Engine, index: str, check_interval: float = 0.0) -> None:
        self.engine = engine
        self.index = index
        self.check_interval = check_interval
        self._state: tuple[int, ...] | None = None
        self._checked = 0.0
        self.fields: dict[str, tuple[int, int]] = {}  # subfield -> (doc_count, sum_ttf)
        self.df: dict[tuple[str, str], int] = {}  # (subfield, term) -> df
        self.hits = 0
        self.misses = 0
        self.refreshes = 0

    def index_state(self) -> tuple[int, ...]:
        return index_state(self.engine, self.index)

    def validate(self) -> None:
        now = time.monotonic()
        if self._state is not None and now - self._checked < self.check_interval:
            return
        state = self.index_state()
        self._checked = now
        if state != self._state:
            if self._state is not None:
                self.refreshes += 1
            self._state = state
            self.fields.clear()
            self.df.clear()

    def missing(self, subfields: Sequence[str], query: Mapping[str, QueryChannel],
                layout: IndexLayout, fields: Sequence[str]) -> dict[str, QueryChannel]:
        """The part of ``query`` whose statistics are not cached (per channel)."""
        out = {}
        for ch, qc in query.items():
            sfs = [layout.subfield(f, ch) for f in fields]
            if any(sf not in self.fields for sf in sfs) or any(
                (sf, t) not in self.df for sf in sfs for t in qc.terms
            ):
                out[ch] = qc
                self.misses += 1
            else:
                self.hits += 1
        return out

    def store(self, stats: Mapping[str, FieldStats], query: Mapping[str, QueryChannel],
              layout: IndexLayout, fields: Sequence[str]) -> None:
        for ch, qc in query.items():
            for f in fields:
                sf = layout.subfield(f, ch)
                st = stats[sf]
                self.fields[sf] = (st.doc_count, st.sum_ttf)
                for t in qc.terms:
                    self.df[(sf, t)] = st.df.get(t, 0)

    def get(self, subfield: str, terms: Sequence[str]) -> FieldStats:
        doc_count, sum_ttf = self.fields[subfield]
        return FieldStats(doc_count=doc_count, sum_ttf=sum_ttf,
                          df={t: self.df[(subfield, t)] for t in terms})


class FeatureStore:
    """Term vectors and statistics of one index, fetched once and reused while valid."""

    def __init__(self, engine: Engine, index: str, layout: IndexLayout, *,
                 vector_cache: TermVectorCache | None = None, stats_check_interval: float = 0.0,
                 batch_size: int = 500) -> None:
        self.engine = engine
        self.index = index
        self.layout = layout
        self.vectors = vector_cache if vector_cache is not None else TermVectorCache()
        self.stats = StatsCache(engine, index, stats_check_interval)
        self.routing = ShardRouting(engine, index)
        self.batch_size = batch_size
        self.requests = 0

    def prefetch_stats(self, query: Mapping[str, QueryChannel], *, fields: Sequence[str]) -> None:
        """Validate the statistics cache and fetch what ``query`` lacks, without candidates.

        Needs only the analysed query, so a caller can run it while the first stage runs."""
        self.stats.validate()
        stat_fields = list(dict.fromkeys([*fields, self.layout.combined]))
        subfields = [self.layout.subfield(f, ch) for f in fields for ch in query]
        need = self.stats.missing(subfields, query, self.layout, stat_fields)
        if need:
            got = fetch_raw(self.engine, self.index, self.layout, need, [], fields=fields,
                            routing=self.routing, stats_query=need)
            self.requests += got.requests
            self.stats.store(got.stats, need, self.layout, stat_fields)

    def fetch(self, query: Mapping[str, QueryChannel], ids: Sequence[str],
              versions: Sequence[tuple[int, int] | None], *, fields: Sequence[str],
              validate: bool = True) -> FetchResult:
        """Like :func:`fetch_raw`, through the caches.

        ``versions[i]`` is ``(_seq_no, _primary_term)`` of ``ids[i]`` as the search
        returned it, or ``None`` to bypass the vector cache for that id.  ``validate=False``
        skips the index-state check, for a caller that just ran :meth:`prefetch_stats`.
        """
        if validate:
            self.stats.validate()
        stat_fields = list(dict.fromkeys([*fields, self.layout.combined]))
        subfields = [self.layout.subfield(f, ch) for f in fields for ch in query]
        cached: dict[int, dict[str, FieldVector]] = {}
        todo: list[int] = []
        if len(ids) != len(versions):
            raise ConfigurationError(f"{len(ids)} ids but {len(versions)} versions: give one version "
                                     "(or None) per id")
        for i, (doc_id, ver) in enumerate(zip(ids, versions, strict=True)):
            entry = self.vectors.get((self.index, doc_id, *ver), subfields) if ver else None
            if entry is None:
                todo.append(i)
            else:
                cached[i] = entry
        need_stats = self.stats.missing(subfields, query, self.layout, stat_fields)
        fetched: FetchResult | None = None
        if todo or need_stats:
            fetched = fetch_raw(
                self.engine, self.index, self.layout, query, [ids[i] for i in todo],
                fields=fields, routing=self.routing, batch_size=self.batch_size,
                stats_query=need_stats,
            )
            self.requests += fetched.requests
            if need_stats:
                self.stats.store(fetched.stats, need_stats, self.layout, stat_fields)
        vectors: list[dict[str, FieldVector]] = [{} for _ in ids]
        found = [True] * len(ids)
        for i, entry in cached.items():
            vectors[i] = entry
        if fetched is not None:
            for j, i in enumerate(todo):
                vectors[i] = fetched.candidates.vectors[j]
                found[i] = fetched.candidates.found[j]
                ver = versions[i]
                if ver and found[i]:
                    self.vectors.put((self.index, ids[i], *ver), vectors[i], subfields)
        stats = {
            self.layout.subfield(f, ch): self.stats.get(self.layout.subfield(f, ch), qc.terms)
            for f in stat_fields for ch, qc in query.items()
        }
        cands = CandidateVectors(ids=tuple(ids), vectors=tuple(vectors), found=tuple(found))
        return FetchResult(candidates=cands, stats=stats,
                           requests=fetched.requests if fetched else 0)
