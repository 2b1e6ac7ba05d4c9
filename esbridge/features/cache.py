"""Caches in front of the term-vector fetch.

* :class:`TermVectorCache` keeps candidates' term vectors keyed on
  ``(index UUID, _id, _seq_no, _primary_term)``: the first stage returns those for
  every hit, so an updated or deleted-and-re-added document has a new key and is
  never scored from stale vectors; the UUID keeps a recreated index (whose sequence
  numbers start again) or an alias moved to another index apart.  Bounded (LRU by entry count), with hit and
  miss counts.
* :class:`StatsCache` keeps index-wide term and field statistics for one index
  *identity* (UUID and state): both are read from ``_stats`` (document counts and indexing and
  deletion totals of the primaries) before each use (or at most every
  ``check_interval`` seconds, if set, trading freshness for one request).  A new UUID (a
  recreated index, an alias moved) drops every entry at once; writes to the same index drop
  them at most once per ``refresh_interval`` (default: the index's own
  ``index.refresh_interval``, the delay after which the engine itself shows a write to
  searches), so an index under constant writes does not refetch its statistics for every query.
* :class:`FeatureStore` puts both in front of
  :func:`esbridge.features.termvectors.fetch_raw`: one request fetches only what
  is missing.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

from esbridge.engine.client import EngineBase, sync_engine
from esbridge.engine.plan import Plan, run
from esbridge.errors import ConfigurationError
from esbridge.features.diskstore import DiskVectorStore, VersionedId
from esbridge.features.plugin import (
    Carried,
    candidates_from,
    check_feature_source,
    features_plugin_plan,
    features_tag,
    fetch_with_plugin_plan,
)
from esbridge.features.termvectors import (
    EMPTY_VECTOR,
    CandidateVectors,
    FetchResult,
    FieldStats,
    FieldVector,
    QueryChannel,
    ShardRouting,
    TermMatrix,
    analyze_with_stats_plan,
    fetch_raw_plan,
)
from esbridge.index.definitions import IndexLayout
from esbridge.index.facts import identity_plan, index_state, refresh_interval_plan

DocKey = tuple[str, str, int, int]  # index UUID, id, seq_no, primary_term


class HitVersion(NamedTuple):
    """What a first-stage hit says about the version of its document.

    ``_seq_no`` and ``_primary_term`` key the document's features; ``_version`` (present when
    the search asked for ``"version": true``) is compared with the one the term-vector fetch
    reports: ``_mtermvectors`` reads the newest copy of a document (real time), so a document
    written between the search and the fetch comes back newer than the hit.  It is then scored
    as it now is but not stored under the hit's key.
    """

    seq_no: int
    primary_term: int
    version: int | None = None


#: A hit's version as the feature caches take it: ``(_seq_no, _primary_term)`` or a :class:`HitVersion`.
DocVersion = tuple[int, int] | HitVersion


@dataclass(frozen=True)
class CacheCounts:
    hits: int
    misses: int
    size: int
    disk_hits: int = 0

    @property
    def hit_rate(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else 0.0


class TermVectorCache:
    """LRU cache of candidates' term vectors, keyed on sequence number and primary term.

    Args:
        max_entries: documents kept in memory.
        disk: a :class:`~esbridge.features.diskstore.DiskVectorStore` (or its folder) behind
            the memory: a miss in memory is looked up there, and what is fetched from the
            engine is written there too, so vectors outlive the process and are shared
            with other processes using the same folder.
    """

    def __init__(self, max_entries: int = 50_000, disk: DiskVectorStore | str | Path | None = None) -> None:
        if max_entries < 0:
            raise ValueError(f"max_entries must be >= 0, got {max_entries}")
        self.max_entries = max_entries
        self.disk = disk if disk is None or isinstance(disk, DiskVectorStore) else DiskVectorStore(disk)
        self._data: OrderedDict[DocKey, dict[str, FieldVector]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        #: the misses in memory found on disk (counted in ``hits`` too)
        self.disk_hits = 0

    def get_many(self, keys: Sequence[DocKey], subfields: Sequence[str]) -> list[dict[str, FieldVector] | None]:
        """:meth:`get` for several keys: memory first, then the disk store for the rest (what
        is found there is kept in memory too)."""
        out = self._from_memory(keys, subfields)
        todo = [i for i, e in enumerate(out) if e is None]
        from_disk = 0
        if todo and self.disk is not None:
            for identity, rows in _by_identity(keys, todo).items():
                got = self.disk.get_many(identity, [keys[i][1:] for i in rows], subfields)
                for i, entry in zip(rows, got, strict=True):
                    if entry is not None:
                        out[i] = entry
                        self._remember(keys[i], entry, subfields)
                        from_disk += 1
        self._count(len(out), sum(e is None for e in out), from_disk)
        return out

    def read_terms(self, keys: Sequence[DocKey], subfields: Sequence[str], terms: Mapping[str, Sequence[str]],
                   ) -> tuple[list[dict[str, FieldVector] | None], np.ndarray, dict[str, TermMatrix]]:
        """What a scorer needs of each key for one query.  With a disk store: only
        ``terms[sub-field]`` of each key, read from it as arrays
        (:meth:`DiskVectorStore.read_terms`; memory holds nothing the store lacks, and reading a
        query's terms from the store's arrays costs less than from memory's dictionaries);
        without one: the whole vectors memory holds.

        Returns:
            per key its vectors from memory or ``None``; the positions in ``keys`` read from
            disk; per sub-field the :class:`~esbridge.features.termvectors.TermMatrix` of
            those (rows: positions in ``keys``).
        """
        out: list[dict[str, FieldVector] | None] = \
            self._from_memory(keys, subfields) if self.disk is None else [None] * len(keys)
        todo = [i for i, e in enumerate(out) if e is None]
        read: list[np.ndarray] = []
        parts: dict[str, list[TermMatrix]] = {sf: [] for sf in subfields}
        if todo and self.disk is not None:
            for identity, rows in _by_identity(keys, todo).items():
                at, got = self.disk.read_terms(identity, [keys[i][1:] for i in rows], subfields, terms)
                where = np.asarray(rows, dtype=np.int64)
                read.append(where[at])
                for sf, matrix in got.items():
                    parts[sf].append(matrix.moved(where))
        from_disk = np.concatenate(read) if read else np.zeros(0, dtype=np.int64)
        matrices = {sf: ms[0] if len(ms) == 1 else _stacked(ms) for sf, ms in parts.items() if ms}
        self._count(len(out), len(todo) - len(from_disk), len(from_disk))
        return out, from_disk, matrices

    def _from_memory(self, keys: Sequence[DocKey], subfields: Sequence[str]) -> list[dict[str, FieldVector] | None]:
        out: list[dict[str, FieldVector] | None] = []
        wanted = set(subfields)
        with self._lock:
            for key in keys:
                entry = self._data.get(key)
                if entry is None or not entry.keys() >= wanted:
                    out.append(None)
                else:
                    self._data.move_to_end(key)
                    out.append(entry)
        return out

    def _count(self, asked: int, misses: int, from_disk: int) -> None:
        with self._lock:
            self.disk_hits += from_disk
            self.misses += misses
            self.hits += asked - misses

    def put_many(self, items: Sequence[tuple[DocKey, Mapping[str, FieldVector]]], subfields: Sequence[str]) -> None:
        """:meth:`put` for several documents, written to the disk store in one transaction."""
        for key, vectors in items:
            self._remember(key, vectors, subfields)
        if self.disk is not None and items:
            by_identity: dict[str, list[tuple[VersionedId, dict[str, FieldVector]]]] = {}
            for key, vectors in items:
                by_identity.setdefault(key[0], []).append(
                    (key[1:], {sf: vectors.get(sf, EMPTY_VECTOR) for sf in subfields}))
            for identity, entries in by_identity.items():
                self.disk.put_many(identity, entries)

    def _remember(self, key: DocKey, vectors: Mapping[str, FieldVector], subfields: Sequence[str]) -> None:
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

    def get(self, key: DocKey, subfields: Sequence[str]) -> dict[str, FieldVector] | None:
        """The vectors of ``subfields`` of one document version, or ``None``."""
        return self.get_many([key], subfields)[0]

    def put(self, key: DocKey, vectors: Mapping[str, FieldVector], subfields: Sequence[str]) -> None:
        self.put_many([(key, vectors)], subfields)

    def clear(self) -> None:
        """Forget what is in memory (the disk store keeps its vectors)."""
        with self._lock:
            self._data.clear()

    def counts(self) -> CacheCounts:
        return CacheCounts(self.hits, self.misses, len(self._data), self.disk_hits)


@dataclass
class _Generation:
    """The statistics cached for one identity (UUID and state) of the index."""

    identity: tuple[str, tuple[int, ...]] | None
    created: float = 0.0  # time.monotonic() when it was started
    fields: dict[str, tuple[int, int]] = field(default_factory=dict)  # subfield -> (doc_count, sum_ttf)
    df: dict[tuple[str, str], int] = field(default_factory=dict)  # (subfield, term) -> df

    @property
    def uuid(self) -> str | None:
        return self.identity[0] if self.identity is not None else None


class StatsCache:
    """Index-wide statistics of one index identity (UUID and state); replaced when it changes.

    Safe for threads: :meth:`validate` swaps in a fresh generation atomically, and a caller
    keeps using the generation it validated, so statistics are never read from a table another
    thread has just emptied.
    """

    def __init__(self, engine: EngineBase, index: str, check_interval: float = 0.0,
                 refresh_interval: float | None = None) -> None:
        for name, value in (("check_interval", check_interval), ("refresh_interval", refresh_interval)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or not value >= 0 or value == float("inf")):
                raise ConfigurationError(f"stats {name} must be a finite number of seconds >= 0, got {value!r}")
        self.engine = engine
        self.index = index
        self.check_interval = check_interval
        #: seconds statistics stay in use after the index was written to (``None``: the index's
        #: ``index.refresh_interval``, read on first need)
        self.refresh_interval = refresh_interval
        self._gen = _Generation(None)
        self._checked = 0.0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        self.refreshes = 0

    @property
    def fields(self) -> dict[str, tuple[int, int]]:
        return self._gen.fields

    @property
    def df(self) -> dict[tuple[str, str], int]:
        return self._gen.df

    def index_state(self) -> tuple[int, ...]:
        return index_state(sync_engine(self.engine), self.index)

    def current(self) -> _Generation:
        return self._gen

    def validate(self) -> _Generation:
        """The generation for the index as it is now (checked at most every ``check_interval`` s)."""
        return run(self.validate_plan(), sync_engine(self.engine))

    def validate_plan(self) -> Plan[_Generation]:
        """:meth:`validate` as a plan (no lock is held while the index state is read)."""
        now = time.monotonic()
        with self._lock:
            gen, checked = self._gen, self._checked
        if gen.identity is not None and now - checked < self.check_interval:
            return gen
        identity = yield from identity_plan(self.index)
        if gen.identity is not None and identity != gen.identity and identity[0] == gen.identity[0]:
            # the same index, written to since: its statistics stay for one refresh interval
            if self.refresh_interval is None:
                self.refresh_interval = yield from refresh_interval_plan(self.index)
            if now - gen.created < self.refresh_interval:
                with self._lock:
                    if self._gen is gen:
                        self._checked = now
                        return gen
        with self._lock:
            self._checked = now
            if identity != self._gen.identity:
                if self._gen.identity is not None:
                    self.refreshes += 1
                self._gen = _Generation(identity, created=now)
            return self._gen

    def missing(self, subfields: Sequence[str], query: Mapping[str, QueryChannel],
                layout: IndexLayout, fields: Sequence[str], gen: _Generation | None = None) -> dict[str, QueryChannel]:
        """The part of ``query`` whose statistics are not cached (per channel)."""
        g = gen or self._gen
        out = {}
        for ch, qc in query.items():
            sfs = [layout.subfield(f, ch) for f in fields]
            if any(sf not in g.fields for sf in sfs) or any(
                (sf, t) not in g.df for sf in sfs for t in qc.terms
            ):
                out[ch] = qc
                self.misses += 1
            else:
                self.hits += 1
        return out

    def store(self, stats: Mapping[str, FieldStats], query: Mapping[str, QueryChannel],
              layout: IndexLayout, fields: Sequence[str], gen: _Generation | None = None) -> None:
        g = gen or self._gen
        for ch, qc in query.items():
            for f in fields:
                sf = layout.subfield(f, ch)
                st = stats[sf]
                for t in qc.terms:
                    g.df[(sf, t)] = st.df.get(t, 0)
                g.fields[sf] = (st.doc_count, st.sum_ttf)  # last: marks the subfield complete

    def get(self, subfield: str, terms: Sequence[str], gen: _Generation | None = None) -> FieldStats:
        g = gen or self._gen
        doc_count, sum_ttf = g.fields[subfield]
        return FieldStats(doc_count=doc_count, sum_ttf=sum_ttf,
                          df={t: g.df[(subfield, t)] for t in terms})


def _doc_key(uuid: str, doc_id: str, ver: DocVersion) -> DocKey:
    return uuid, doc_id, int(ver[0]), int(ver[1])


def _by_identity(keys: Sequence[DocKey], positions: Sequence[int]) -> dict[str, list[int]]:
    """``positions`` grouped by their key's index identity."""
    out: dict[str, list[int]] = {}
    for i in positions:
        out.setdefault(keys[i][0], []).append(i)
    return out


def _stacked(matrices: Sequence[TermMatrix]) -> TermMatrix:
    """Several matrices of one sub-field and terms as one."""
    return TermMatrix(rows=np.concatenate([m.rows for m in matrices]), terms=matrices[0].terms,
                      tf=np.concatenate([m.tf for m in matrices]),
                      length=np.concatenate([m.length for m in matrices]),
                      distinct=np.concatenate([m.distinct for m in matrices]))


@dataclass
class _Gathered:
    """What :meth:`FeatureStore.fetch_plan` has of its ``n`` candidates so far, by position.

    Attributes:
        cached: whole vectors by position; ``{}`` for a candidate whose query terms are in
            ``matrices`` (or that was not found).
        matrices: per sub-field, the query's terms of the candidates read as arrays (rows:
            positions among the candidates).
        missing: the positions of candidates the engine no longer holds.
    """

    n: int
    cached: dict[int, dict[str, FieldVector]] = field(default_factory=dict)
    matrices: dict[str, TermMatrix] = field(default_factory=dict)
    missing: set[int] = field(default_factory=set)

    def take(self, cands: CandidateVectors, where: Sequence[int]) -> None:
        """Candidates read inside the engine (matrices of the query's terms) into their places."""
        for sf, m in cands.matrices.items():
            moved = m.moved(np.asarray(where, dtype=np.int64))
            self.matrices[sf] = _stacked([self.matrices[sf], moved]) if sf in self.matrices else moved
        for j, i in enumerate(where):
            self.cached[i] = {}
            if not cands.found[j]:
                self.missing.add(i)

    def todo(self) -> list[int]:
        """The positions of the candidates not had yet."""
        return [i for i in range(self.n) if i not in self.cached]


class FeatureStore:
    """Term vectors and statistics of one index, fetched once and reused while valid.

    ``stats_check_interval`` and ``stats_refresh_interval`` are :class:`StatsCache`'s
    ``check_interval`` and ``refresh_interval``.
    """

    def __init__(self, engine: EngineBase, index: str, layout: IndexLayout, *,
                 vector_cache: TermVectorCache | None = None, stats_check_interval: float = 0.0,
                 stats_refresh_interval: float | None = None, batch_size: int = 500,
                 features: str = "auto") -> None:
        #: how candidates' features are read (:data:`~esbridge.features.plugin.FEATURE_SOURCES`)
        self.features = check_feature_source(features)
        self.engine = engine
        self.index = index
        self.layout = layout
        self.vectors = vector_cache if vector_cache is not None else TermVectorCache()
        self.stats = StatsCache(engine, index, stats_check_interval, stats_refresh_interval)
        self.routing = ShardRouting(engine, index)
        self.batch_size = batch_size
        self.requests = 0
        #: candidates whose features came with the first stage's hits (the engine plugin),
        #: neither looked up in the caches nor read again
        self.carried = 0
        #: documents whose term vectors came back newer than their hit (not written back)
        self.raced = 0

    def analyze_plan(self, text: str, channels: Sequence[str]) -> Plan[dict[str, QueryChannel]]:
        """``text`` analysed in ``channels`` of the combined field by the engine, keeping the
        index-wide statistics of its terms that come with that analysis
        (:func:`~esbridge.features.termvectors.analyze_with_stats_plan`: one request per shard
        instead of one ``_analyze`` per channel and then one per shard for statistics).

        The statistics go into the generation of the statistics cache that was current before
        they were read (none before the first validation): had the index been recreated or
        written to since, the next validation replaces that generation — at once for a new
        UUID, after the refresh interval for writes — exactly as for statistics read after a
        validation.  An esbridge index only (not a plain one: ``IndexLayout.plain``)."""
        gen = self.stats.current()
        routings = yield from self.routing.routings_plan()
        query, stats = yield from analyze_with_stats_plan(self.index, self.layout, text, channels, routings)
        self.requests += len(routings)
        if gen.identity is not None:
            combined = self.layout.combined
            read = {ch: qc for ch, qc in query.items() if self.layout.subfield(combined, ch) in stats}
            self.stats.store(stats, read, self.layout, [combined], gen)
        return query

    def prefetch_stats(self, query: Mapping[str, QueryChannel], *, fields: Sequence[str]) -> None:
        """Validate the statistics cache and fetch what ``query`` lacks, without candidates.

        Needs only the analysed query, so a caller can run it while the first stage runs."""
        run(self.prefetch_stats_plan(query, fields=fields), sync_engine(self.engine))

    def prefetch_stats_plan(self, query: Mapping[str, QueryChannel], *, fields: Sequence[str]) -> Plan[None]:
        """:meth:`prefetch_stats` as a plan (:mod:`esbridge.engine.plan`)."""
        gen = yield from self.stats.validate_plan()
        stat_fields = list(dict.fromkeys([*fields, self.layout.combined]))
        subfields = [self.layout.subfield(f, ch) for f in fields for ch in query]
        need = self.stats.missing(subfields, query, self.layout, stat_fields, gen)
        if need:
            got = yield from fetch_raw_plan(self.index, self.layout, need, [], fields=fields,
                                            routing=self.routing, stats_query=need,
                                            copy_preference=self.engine.options.preference is not None)
            self.requests += got.requests
            self.stats.store(got.stats, need, self.layout, stat_fields, gen)

    def fetch(self, query: Mapping[str, QueryChannel], ids: Sequence[str],
              versions: Sequence[DocVersion | None], *, fields: Sequence[str],
              validate: bool = True, terms_only: bool = False) -> FetchResult:
        """Like :func:`fetch_raw`, through the caches.

        ``versions[i]`` is ``(_seq_no, _primary_term)`` of ``ids[i]`` as the search
        returned it, or ``None`` to bypass the vector cache for that id.  ``validate=False``
        skips the index-state check, for a caller that just ran :meth:`prefetch_stats`.
        ``terms_only``: candidates read from the disk store come as arrays of the query's
        terms of each channel (``candidates.matrices``, their ``vectors[i]`` empty; enough to
        score the query with one field, not for feedback or for adding fields up); those
        fetched from the engine, and without a disk store those memory holds, come as whole
        vectors.
        """
        return run(self.fetch_plan(query, ids, versions, fields=fields, validate=validate, terms_only=terms_only),
                   sync_engine(self.engine))

    def fetch_plan(self, query: Mapping[str, QueryChannel], ids: Sequence[str],
                   versions: Sequence[DocVersion | None], *, fields: Sequence[str],
                   validate: bool = True, terms_only: bool = False,
                   carried: Carried | None = None) -> Plan[FetchResult]:
        """:meth:`fetch` as a plan (:mod:`esbridge.engine.plan`).

        ``carried``: features the first stage's hits brought (the engine plugin's answer to
        :func:`~esbridge.features.plugin.features_ext` for ``query`` and ``fields``, by id:
        :func:`~esbridge.features.plugin.carried_features`), used with ``terms_only``.

        Each candidate's features come from the first of four sources that has them:

        1. the first stage's hits (``carried``, :meth:`_from_carried`): the freshest there
           are, so the caches are not asked for them;
        2. the caches (:meth:`_from_caches`: memory, and the disk store behind it);
        3. with ``terms_only``, esbridge's engine plugin where it runs (:meth:`_from_plugin_plan`),
           the query's terms only, kept nowhere;
        4. ``_mtermvectors`` (:meth:`_from_termvectors_plan`), whose vectors are written back to
           the caches (:meth:`_keep_fetched`).

        The statistics of the query's terms missing from the statistics cache come with the
        plugin's answer or with the ``_mtermvectors`` request (alone when no candidate is left).
        """
        gen = (yield from self.stats.validate_plan()) if validate else self.stats.current()
        # term vectors are keyed by the index's UUID: a recreated index restarts its sequence numbers
        uuid = gen.uuid or self.index
        stat_fields = list(dict.fromkeys([*fields, self.layout.combined]))
        subfields = [self.layout.subfield(f, ch) for f in fields for ch in query]
        if len(ids) != len(versions):
            raise ConfigurationError(f"{len(ids)} ids but {len(versions)} versions: give one version "
                                     "(or None) per id")
        carried_rows = self._carried_rows(query, ids, fields, terms_only, carried)
        need_stats = self.stats.missing(subfields, query, self.layout, stat_fields, gen)
        if carried is not None and carried_rows and len(carried_rows) == len(ids) and not need_stats:
            # every candidate's features came with the hits, and the statistics are at hand
            self.carried += len(ids)
            return FetchResult(candidates=candidates_from(self.index, self.layout, query, fields, ids, carried),
                               stats=self._query_stats(query, stat_fields, gen), requests=0)
        got = _Gathered(len(ids))
        self._from_caches(got, query, ids, versions, fields, uuid=uuid, subfields=subfields,
                          skip=set(carried_rows), terms_only=terms_only)
        if carried_rows and carried is not None:
            self._from_carried(got, query, ids, fields, carried_rows, carried)
        todo = got.todo()
        if terms_only and todo and not self.layout.plain and (
                yield from features_plugin_plan(self.engine, self.features)):
            need_stats = yield from self._from_plugin_plan(got, query, ids, fields, todo, need_stats,
                                                           stat_fields, gen)
            todo = []  # the statistics still missing, if any, are read below without candidates
        fetched: FetchResult | None = None
        if todo or need_stats:
            fetched = yield from self._from_termvectors_plan(query, ids, fields, todo, need_stats, stat_fields, gen)
        vectors: list[dict[str, FieldVector]] = [{} for _ in ids]
        found = [i not in got.missing for i in range(len(ids))]
        for i, entry in got.cached.items():
            vectors[i] = entry
        if fetched is not None:
            self._keep_fetched(fetched, ids, versions, todo, vectors, found, uuid=uuid, subfields=subfields)
        cands = CandidateVectors(ids=tuple(ids), vectors=tuple(vectors), found=tuple(found), matrices=got.matrices)
        return FetchResult(candidates=cands, stats=self._query_stats(query, stat_fields, gen),
                           requests=fetched.requests if fetched else 0)

    # ---- the sources of fetch_plan, in the order it asks them -------------------------

    def _carried_rows(self, query: Mapping[str, QueryChannel], ids: Sequence[str], fields: Sequence[str],
                      terms_only: bool, carried: Carried | None) -> list[int]:
        """The positions of the candidates whose features the first stage's hits brought, for
        this query and these fields (with ``terms_only`` only: they are the query's terms)."""
        if not (terms_only and carried and carried.tag == features_tag(self.layout, query, fields)):
            return []
        return [i for i, d in enumerate(ids) if d in carried]

    def _from_carried(self, got: _Gathered, query: Mapping[str, QueryChannel], ids: Sequence[str],
                      fields: Sequence[str], rows: Sequence[int], carried: Carried) -> None:
        """Source 1: the features the first stage's hits brought, for the candidates at ``rows``."""
        got.take(candidates_from(self.index, self.layout, query, fields, [ids[i] for i in rows], carried), rows)
        self.carried += len(rows)

    def _from_caches(self, got: _Gathered, query: Mapping[str, QueryChannel], ids: Sequence[str],
                     versions: Sequence[DocVersion | None], fields: Sequence[str], *, uuid: str,
                     subfields: Sequence[str], skip: set[int], terms_only: bool) -> None:
        """Source 2: the caches' entries of the candidates with a version, but those at ``skip``
        (:meth:`TermVectorCache.read_terms` with ``terms_only``: the query's terms of those on
        disk as matrices; else :meth:`TermVectorCache.get_many`, whole vectors)."""
        versioned = [(i, ver) for i, ver in enumerate(versions) if ver and i not in skip]
        keys = [_doc_key(uuid, ids[i], ver) for i, ver in versioned]
        if terms_only:
            wanted: dict[str, tuple[str, ...]] = {}
            for f in fields:
                for ch, qc in query.items():
                    sf = self.layout.subfield(f, ch)
                    wanted[sf] = tuple(dict.fromkeys((*wanted.get(sf, ()), *qc.terms)))
            entries, from_disk, read = self.vectors.read_terms(keys, subfields, wanted)
            where = np.array([i for i, _ in versioned], dtype=np.int64)
            got.matrices = {sf: m.moved(where) for sf, m in read.items()}
            for i in where[from_disk].tolist():
                got.cached[i] = {}
        else:
            entries = self.vectors.get_many(keys, subfields)
        for (i, _), entry in zip(versioned, entries, strict=True):
            if entry is not None:
                got.cached[i] = entry

    def _from_plugin_plan(self, got: _Gathered, query: Mapping[str, QueryChannel], ids: Sequence[str],
                          fields: Sequence[str], todo: Sequence[int], need_stats: dict[str, QueryChannel],
                          stat_fields: Sequence[str], gen: _Generation) -> Plan[dict[str, QueryChannel]]:
        """Source 3: the candidates at ``todo`` read inside the engine by its plugin, the query's
        terms only (nothing to keep for another query), with the missing statistics
        ``need_stats``.  Returns the statistics still missing."""
        shards = len((yield from self.routing.routings_plan()))
        through = yield from fetch_with_plugin_plan(
            self.index, self.layout, query, [ids[i] for i in todo], fields=fields,
            stats_query=need_stats, stat_fields=stat_fields, shards=shards)
        if through is None:  # no candidate was found, so no hit brought the statistics
            for i in todo:
                got.cached[i] = {}
                got.missing.add(i)
            return need_stats
        self.requests += through.requests
        if need_stats:
            self.stats.store(through.stats, need_stats, self.layout, stat_fields, gen)
            need_stats = {}
        got.take(through.candidates, todo)
        return need_stats

    def _from_termvectors_plan(self, query: Mapping[str, QueryChannel], ids: Sequence[str], fields: Sequence[str],
                               todo: Sequence[int], need_stats: dict[str, QueryChannel],
                               stat_fields: Sequence[str], gen: _Generation) -> Plan[FetchResult]:
        """Source 4: the term vectors of the candidates at ``todo`` and the missing statistics
        ``need_stats`` from ``_mtermvectors`` (:func:`~esbridge.features.termvectors.fetch_raw`);
        the statistics go into the statistics cache."""
        fetched = yield from fetch_raw_plan(
            self.index, self.layout, query, [ids[i] for i in todo],
            fields=fields, routing=self.routing, batch_size=self.batch_size,
            copy_preference=self.engine.options.preference is not None,
            stats_query=need_stats,
        )
        self.requests += fetched.requests
        if need_stats:
            self.stats.store(fetched.stats, need_stats, self.layout, stat_fields, gen)
        return fetched

    def _keep_fetched(self, fetched: FetchResult, ids: Sequence[str], versions: Sequence[DocVersion | None],
                      todo: Sequence[int], vectors: list[dict[str, FieldVector]], found: list[bool], *,
                      uuid: str, subfields: Sequence[str]) -> None:
        """The vectors ``_mtermvectors`` brought for the candidates at ``todo`` into ``vectors``
        and ``found``, and into the caches under each hit's key: but those without a version,
        not found, or written since the search (scored as they are now, counted in ``raced``)."""
        fresh: list[tuple[DocKey, dict[str, FieldVector]]] = []
        for j, i in enumerate(todo):
            vectors[i] = fetched.candidates.vectors[j]
            found[i] = fetched.candidates.found[j]
            ver = versions[i]
            if not ver or not found[i]:
                continue
            expected = ver[2] if len(ver) > 2 else None
            answered = fetched.candidates.versions[j] if fetched.candidates.versions else None
            if expected is not None and answered is not None and answered[0] != expected:
                # written since the search: scored as it is now, not stored under the hit's key
                self.raced += 1
                continue
            fresh.append((_doc_key(uuid, ids[i], ver), vectors[i]))
        self.vectors.put_many(fresh, subfields)

    def _query_stats(self, query: Mapping[str, QueryChannel], fields: Sequence[str],
                     gen: _Generation) -> dict[str, FieldStats]:
        """The cached statistics of ``query``'s terms in each channel's sub-field of ``fields``."""
        return {self.layout.subfield(f, ch): self.stats.get(self.layout.subfield(f, ch), qc.terms, gen)
                for f in fields for ch, qc in query.items()}
