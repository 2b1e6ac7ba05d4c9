"""Candidates' term vectors on disk: the persistent tier behind :class:`~esbridge.features.cache.TermVectorCache`.

What a scorer needs of a document — per channel sub-field, its term frequencies and its
length — is kept in one folder per index *identity* (the index UUIDs an index name or
alias stands for, :func:`esbridge.index.facts.index_identity`), so a deleted and
recreated index, or an alias moved to another index, never reads another index's vectors.
Each folder holds:

``vectors.i32``
    an append-only array of ``(term id, tf)`` pairs of 32-bit integers, read through a
    read-only memory map; the pairs of one document's sub-field (a *block*) are in increasing
    term id, so a read for a query's terms looks each one up by binary search in every
    candidate's block instead of reading the blocks whole;
``vectors.sqlite``
    the term dictionary (term id → term) and one row per document and sub-field: the
    ``_seq_no`` and ``_primary_term`` the vectors were read at, where its pairs start in
    the array, how many there are, and the field's length.

The folder is named after the identity and the layout's version (:data:`FORMAT`): a store
written in another layout is never read, it is built again.

A row is used only when its ``_seq_no`` and ``_primary_term`` are those the first-stage
search returned for the hit, so an updated document is never scored from its old vectors:
it is fetched again and its row replaced (the old pairs stay in the array, unreferenced;
deleting the folder and building the store again reclaims them).  Pairs once written never
move, so a reader keeps where each document's blocks are in memory (at most :data:`ROW_CACHE`
rows) and serves a hit from that whenever the hit's ``_seq_no`` and ``_primary_term`` are
those the blocks were stored at, asking SQLite only for the others.

Several threads and several processes may read and write one store: a writer holds an
exclusive ``flock`` on the folder's ``write.lock`` while it appends pairs and then commits
their rows in one SQLite transaction (write-ahead log, so readers never wait and never see
rows whose pairs are not yet written).  A writer that dies between the two leaves only
unreferenced pairs behind.
"""

from __future__ import annotations

import fcntl
import hashlib
import mmap
import os
import sqlite3
import threading
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from esbridge.errors import ConfigurationError
from esbridge.features.termvectors import FieldVector, TermMatrix
from esbridge.home import cache_dir

#: ``(_id, _seq_no, _primary_term)`` of a document in one index identity.
VersionedId = tuple[str, int, int]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS terms (id INTEGER PRIMARY KEY, term TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS vectors (
    doc TEXT NOT NULL, subfield TEXT NOT NULL,
    seq_no INTEGER NOT NULL, primary_term INTEGER NOT NULL,
    start INTEGER NOT NULL, n INTEGER NOT NULL, length INTEGER NOT NULL,
    PRIMARY KEY (doc, subfield)
) WITHOUT ROWID;
"""
_PAIR = 8  # bytes of one (term id, tf) pair
_SQL_VARS = 500  # ids per SELECT (well under SQLite's bound-parameter limit)
#: The layout of a store's files (part of its folder's name): 2 — each block's pairs sorted by term id.
FORMAT = 2
#: Rows (document and sub-field) a reader keeps in memory per index identity; past it they are
#: dropped, all at once, and read from SQLite again as hits need them.
ROW_CACHE = 262_144

#: Where one document's blocks of some sub-fields are: ``(_seq_no, _primary_term, (start, count,
#: length) of each sub-field in turn)``.
_Blocks = tuple[int, int, tuple[int, ...]]


def default_store_root() -> Path:
    """``<esbridge's cache>/features`` (``$ESBRIDGE_HOME/features`` or ``~/.cache/esbridge/features``)."""
    return cache_dir() / "features"


@dataclass(frozen=True)
class StoreSize:
    """What one index identity's store holds."""

    documents: int
    rows: int
    terms: int
    bytes: int


class DiskVectorStore:
    """Term vectors of the documents of every index esbridge has read, one folder per identity.

    Args:
        root: the folder holding the stores (default: :func:`default_store_root`).
    """

    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root) if root is not None else default_store_root()
        self._parts: dict[str, _IdentityStore] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"DiskVectorStore({str(self.root)!r})"

    def part(self, identity: str) -> _IdentityStore:
        """The store of one index identity (created on first use)."""
        with self._lock:
            got = self._parts.get(identity)
            if got is None:
                digest = hashlib.sha256(identity.encode("utf-8")).hexdigest()[:32]
                got = self._parts[identity] = _IdentityStore(self.root / f"{digest}.v{FORMAT}", identity)
            return got

    def get_many(self, identity: str, keys: Sequence[VersionedId],
                 subfields: Sequence[str]) -> list[dict[str, FieldVector] | None]:
        """The vectors of ``subfields`` for each key, or ``None`` where some sub-field is
        missing or was stored at another ``_seq_no``/``_primary_term``."""
        return self.part(identity).get_many(keys, subfields)

    def read_terms(self, identity: str, keys: Sequence[VersionedId], subfields: Sequence[str],
                   terms: Mapping[str, Sequence[str]]) -> tuple[np.ndarray, dict[str, TermMatrix]]:
        """Only ``terms[sub-field]`` of each key's ``subfields``, as arrays: the positions in
        ``keys`` of those stored (at their version, with every sub-field), and per sub-field a
        :class:`~esbridge.features.termvectors.TermMatrix` whose rows are those positions (its
        lengths and distinct-term counts are the whole field's).  All a scorer needs of a
        candidate for one query, without building every other term of it."""
        return self.part(identity).read_terms(keys, subfields, terms)

    def put_many(self, identity: str, entries: Sequence[tuple[VersionedId, Mapping[str, FieldVector]]]) -> None:
        """Store (or replace) the vectors of several documents at once."""
        self.part(identity).put_many(entries)

    def close(self) -> None:
        with self._lock:
            for part in self._parts.values():
                part.close()
            self._parts.clear()


class _IdentityStore:
    """The store of one index identity (see the module's notes)."""

    def __init__(self, folder: Path, identity: str) -> None:
        self.folder = folder
        self.identity = identity
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise ConfigurationError(f"cannot create the feature store folder {folder}: {err.strerror}; "
                                     "give a writable folder") from err
        self.data_path = folder / "vectors.i32"
        self.db_path = folder / "vectors.sqlite"
        self.lock_path = folder / "write.lock"
        self._local = threading.local()
        self._cons: list[sqlite3.Connection] = []
        self._generation = 0
        self._lock = threading.Lock()  # the term table and the memory map of this process
        self._write_lock = threading.Lock()  # one writing thread per process (flock is per open file)
        self._terms: list[str] = [""]  # term id -> term (ids start at 1)
        self._term_array = np.empty(1024, dtype=object)  # the same, for vectorised look-ups
        self._term_array[0] = ""
        self._ids: dict[str, int] = {}
        # sub-fields -> doc -> where its blocks of those sub-fields are, as last read or written
        self._known: dict[tuple[str, ...], dict[str, _Blocks]] = {}
        self._mmap: mmap.mmap | None = None
        self._map: np.ndarray = np.zeros((0, 2), dtype=np.int32)
        with self._write_locked():
            con = self._con()
            con.executescript(_SCHEMA)
            con.execute("INSERT OR IGNORE INTO meta VALUES ('identity', ?)", (identity,))
            con.commit()
            stored = con.execute("SELECT value FROM meta WHERE key = 'identity'").fetchone()[0]
        if stored != identity:  # a digest collision: refuse rather than mix two indices
            raise ConfigurationError(f"feature store folder {folder} holds {stored!r}, not {identity!r}; "
                                     "remove the folder")

    # ---- plumbing ---------------------------------------------------------------------

    def _con(self) -> sqlite3.Connection:
        """This thread's connection (one per thread; :meth:`close` closes them all)."""
        con: sqlite3.Connection | None = getattr(self._local, "con", None)
        if con is None or getattr(self._local, "generation", -1) != self._generation:
            con = sqlite3.connect(self.db_path, timeout=60.0, isolation_level="DEFERRED", check_same_thread=False)
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=NORMAL")
            self._local.con, self._local.generation = con, self._generation
            with self._lock:
                self._cons.append(con)
        return con

    @contextmanager
    def _write_locked(self) -> Iterator[None]:
        with self._write_lock, open(self.lock_path, "a+b") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)

    def _sync_terms(self, con: sqlite3.Connection) -> None:
        """Read the terms other writers (threads or processes) added since the last look."""
        with self._lock:
            known = len(self._terms) - 1
        rows = con.execute("SELECT id, term FROM terms WHERE id > ? ORDER BY id", (known,)).fetchall()
        if rows:
            self._add_terms(rows)

    def _add_terms(self, rows: Sequence[tuple[int, str]]) -> None:
        """Remember committed terms (ids in increasing order; those already known are skipped)."""
        with self._lock:
            fresh = [(tid, term) for tid, term in rows if tid >= len(self._terms)]
            if not fresh:
                return
            need = len(self._terms) + len(fresh)
            if need > len(self._term_array):
                grown = np.empty(max(need, 2 * len(self._term_array)), dtype=object)
                grown[:len(self._terms)] = self._term_array[:len(self._terms)]
                self._term_array = grown
            for tid, term in fresh:
                if tid == len(self._terms):
                    self._term_array[tid] = term
                    self._terms.append(term)
                    self._ids[term] = tid

    def _term_ids(self, terms: Collection[str]) -> dict[str, int]:
        """Term → id of those of ``terms`` the dictionary holds (those this process knows, the
        rest looked up by term, without reading the whole dictionary)."""
        with self._lock:
            out = {t: self._ids[t] for t in terms if t in self._ids}
        rest = [t for t in terms if t not in out]
        con = self._con()
        for i in range(0, len(rest), _SQL_VARS):
            chunk = rest[i:i + _SQL_VARS]
            out.update(con.execute(f"SELECT term, id FROM terms WHERE term IN ({','.join('?' * len(chunk))})",
                                   chunk).fetchall())
        return out

    def _pairs(self, end: int) -> np.ndarray:
        """The memory-mapped pair array, mapped again when it must reach ``end`` pairs."""
        with self._lock:
            if len(self._map) < end:
                size = self.data_path.stat().st_size // _PAIR
                if size:
                    with open(self.data_path, "rb") as data:
                        self._mmap = mmap.mmap(data.fileno(), size * _PAIR, access=mmap.ACCESS_READ)
                    # a plain array over the map (slicing a numpy.memmap costs far more)
                    self._map = np.frombuffer(self._mmap, dtype=np.int32).reshape(size, 2)
            return self._map

    def close(self) -> None:
        with self._lock:
            for con in self._cons:
                con.close()
            self._cons.clear()
            self._generation += 1
            self._known = {}
            self._map = np.zeros((0, 2), dtype=np.int32)
            self._mmap = None  # closed once no array still views it

    # ---- reading and writing ------------------------------------------------------------

    def _locate(self, keys: Sequence[VersionedId], subfields: Sequence[str]) -> tuple[list[int], np.ndarray]:
        """The positions in ``keys`` of those stored at their ``_seq_no`` and ``_primary_term``
        with every one of ``subfields``, and ``(start, count, length)`` of each of their blocks
        in the pair array (shape: hits × sub-fields × 3)."""
        sfs = tuple(subfields)
        if not keys or not sfs:
            return [], np.zeros((0, len(sfs), 3), dtype=np.int64)
        known = self._known.get(sfs)
        if known is None:
            known = self._known.setdefault(sfs, {})
        hits: list[int] = []
        flat: list[tuple[int, ...]] = []
        missing: list[int] = []
        for pos, (doc, seq_no, primary) in enumerate(keys):
            got = known.get(doc)
            if got is not None and got[0] == seq_no and got[1] == primary:
                hits.append(pos)
                flat.append(got[2])
            else:
                missing.append(pos)
        if missing:
            # only hits this process has not seen at their version go to SQLite
            fresh = self._read_blocks(list(dict.fromkeys(keys[pos][0] for pos in missing)), sfs)
            for pos in missing:
                doc, seq_no, primary = keys[pos]
                got = fresh.get(doc)
                if got is not None and got[0] == seq_no and got[1] == primary:
                    hits.append(pos)
                    flat.append(got[2])
            self._remember(sfs, fresh)
            order = sorted(range(len(hits)), key=hits.__getitem__)
            hits = [hits[k] for k in order]
            flat = [flat[k] for k in order]
        return hits, np.array(flat, dtype=np.int64).reshape(len(hits), len(sfs), 3)

    def _read_blocks(self, docs: Sequence[str], subfields: tuple[str, ...]) -> dict[str, _Blocks]:
        """From SQLite: where each of ``docs`` has its blocks of every one of ``subfields``,
        if all of them were stored at one ``_seq_no`` and ``_primary_term``."""
        rows: dict[str, dict[str, tuple[int, int, int, int, int]]] = {}
        con = self._con()
        wanted = list(dict.fromkeys(subfields))
        sf_marks = ",".join("?" * len(wanted))
        per = max(1, _SQL_VARS - len(wanted))
        for i in range(0, len(docs), per):
            chunk = docs[i:i + per]
            marks = ",".join("?" * len(chunk))
            for doc, sf, seq, term, start, n, length in con.execute(
                    "SELECT doc, subfield, seq_no, primary_term, start, n, length FROM vectors "
                    f"WHERE doc IN ({marks}) AND subfield IN ({sf_marks})", [*chunk, *wanted]).fetchall():
                rows.setdefault(doc, {})[sf] = (seq, term, start, n, length)
        return {doc: blocks for doc, got in rows.items() if (blocks := _blocks_of(got, subfields)) is not None}

    def _remember(self, subfields: tuple[str, ...], blocks: Mapping[str, _Blocks]) -> None:
        """Keep where documents' blocks are (past :data:`ROW_CACHE` rows, start again: a new
        dict, so a reader still reads the one it had)."""
        if not blocks:
            return
        known = self._known.get(subfields, {})
        if (len(known) + len(blocks)) * len(subfields) > ROW_CACHE:
            known = {}
        known.update(blocks)
        self._known[subfields] = known

    def holds(self, keys: Sequence[VersionedId], subfields: Sequence[str]) -> list[bool]:
        """Whether each key is stored, at its version, with every one of ``subfields``."""
        hits = set(self._locate(keys, subfields)[0])
        return [pos in hits for pos in range(len(keys))]

    def get_many(self, keys: Sequence[VersionedId], subfields: Sequence[str]) -> list[dict[str, FieldVector] | None]:
        hits, blocks = self._locate(keys, subfields)
        out: list[dict[str, FieldVector] | None] = [None] * len(keys)
        if not hits:
            return out
        starts, counts, lengths = blocks.reshape(-1, 3).T
        end = int((starts + counts).max())
        pairs = self._pairs(end)
        if len(pairs) < end:  # only if the array file was cut
            return out
        sizes = lengths.tolist()
        offsets = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        # every block of every hit in one gather
        picked = pairs[np.repeat(starts - offsets[:-1], counts) + np.arange(offsets[-1])]
        tids = picked[:, 0]
        if len(tids) and int(tids.max()) >= len(self._terms):
            self._sync_terms(self._con())
        words = self._term_array[tids].tolist()
        tfs = picked[:, 1].tolist()
        bounds = offsets.tolist()
        b = 0
        for k in hits:
            entry = {}
            for sf in subfields:
                lo, hi = bounds[b], bounds[b + 1]
                entry[sf] = FieldVector(zip(words[lo:hi], tfs[lo:hi]), length=sizes[b])
                b += 1
            out[k] = entry
        return out

    def read_terms(self, keys: Sequence[VersionedId], subfields: Sequence[str],
                   terms: Mapping[str, Sequence[str]]) -> tuple[np.ndarray, dict[str, TermMatrix]]:
        """:meth:`DiskVectorStore.read_terms`: each (hit, sub-field, asked term) looked up in the
        hit's block by binary search over its sorted term ids, all lookups in step (a lookup
        per block and term, not a read of every pair).  Only the asked terms are looked up in
        the dictionary (a term it lacks is in no block: a row's terms commit with the row)."""
        hits, blocks = self._locate(keys, subfields)
        asked = {sf: tuple(dict.fromkeys(terms.get(sf, ()))) for sf in subfields}
        n = len(hits)
        pairs = self._map
        if n:
            end = int((blocks[:, :, 0] + blocks[:, :, 1]).max())
            pairs = self._pairs(end)
            if len(pairs) < end:  # only if the array file was cut
                hits, blocks, n = [], blocks[:0], 0
        rows = np.asarray(hits, dtype=np.int64)
        ids = self._term_ids({t for sf in subfields for t in asked[sf]}) if n else {}
        tf = _find_terms(pairs[:, 0], pairs[:, 1], blocks, subfields, asked, ids)
        return rows, {sf: TermMatrix(rows=rows, terms=asked[sf], tf=tf[sf],
                                     length=blocks[:, slot, 2].astype(np.float64),
                                     distinct=blocks[:, slot, 1].astype(np.float64))
                      for slot, sf in enumerate(subfields)}

    def put_many(self, entries: Sequence[tuple[VersionedId, Mapping[str, FieldVector]]]) -> None:
        if not entries:
            return
        with self._write_locked():
            con = self._con()
            try:
                self._sync_terms(con)
                known = self._ids  # the committed terms
                added: dict[str, int] = {}  # the terms this write adds
                next_id = len(self._terms)
                tids: list[int] = []
                tfs: list[int] = []
                rows: list[tuple[str, str, int, int, int, int, int]] = []
                with open(self.data_path, "ab") as data:
                    size = data.tell()
                    if size % _PAIR:  # a writer died mid-pair: pad to the next whole pair
                        data.write(b"\0" * (_PAIR - size % _PAIR))
                        size += _PAIR - size % _PAIR
                    start = size // _PAIR
                    for (doc, seq_no, primary), vectors in entries:
                        for sf, vec in vectors.items():
                            for term in vec:
                                if term not in known and term not in added:
                                    added[term] = next_id
                                    next_id += 1
                            tids += [known.get(t) or added[t] for t in vec]
                            tfs += vec.values()
                            rows.append((doc, sf, seq_no, primary, start, len(vec), int(vec.length)))
                            start += len(vec)
                    tid_arr = np.asarray(tids, dtype=np.int32)
                    tf_arr = np.asarray(tfs, dtype=np.int32)
                    # each block's pairs in increasing term id (blocks stay where they are)
                    block = np.repeat(np.arange(len(rows)), [r[5] for r in rows])
                    order = np.lexsort((tid_arr, block))
                    data.write(np.column_stack([tid_arr[order], tf_arr[order]]).tobytes())
                    data.flush()
                    os.fsync(data.fileno())
                new_terms = [(tid, term) for term, tid in added.items()]
                con.executemany("INSERT INTO terms VALUES (?, ?)", new_terms)
                con.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
                con.commit()
            except BaseException:
                con.rollback()
                raise
            self._add_terms(new_terms)
            # committed: readers may use them at once
            written: dict[str, dict[str, tuple[int, int, int, int, int]]] = {}
            for doc, sf, seq, primary_term, first, n, length in rows:
                written.setdefault(doc, {})[sf] = (seq, primary_term, first, n, length)
            for sfs in list(self._known):
                self._remember(sfs, {doc: got for doc, parts in written.items()
                                     if (got := _blocks_of(parts, sfs)) is not None})

    def size(self) -> StoreSize:
        con = self._con()
        docs, rows = con.execute("SELECT COUNT(DISTINCT doc), COUNT(*) FROM vectors").fetchone()
        terms = con.execute("SELECT COUNT(*) FROM terms").fetchone()[0]
        total = sum(p.stat().st_size for p in self.folder.iterdir() if p.is_file())
        return StoreSize(documents=int(docs), rows=int(rows), terms=int(terms), bytes=int(total))


def _blocks_of(rows: Mapping[str, tuple[int, int, int, int, int]], subfields: Sequence[str]) -> _Blocks | None:
    """A document's blocks of ``subfields`` from its rows (``seq_no, primary_term, start, n,
    length`` per sub-field), if it has every one, all at one ``_seq_no`` and ``_primary_term``."""
    got = [rows.get(sf) for sf in subfields]
    first = got[0]
    if first is None or any(r is None or r[0] != first[0] or r[1] != first[1] for r in got):
        return None
    return first[0], first[1], tuple(x for r in got if r is not None for x in r[2:])


def _find_terms(term_ids: np.ndarray, freqs: np.ndarray, blocks: np.ndarray, subfields: Sequence[str],
               asked: Mapping[str, Sequence[str]], ids: Mapping[str, int]) -> dict[str, np.ndarray]:
    """Per sub-field, the ``(hits, len(asked[sub-field]))`` frequencies of the asked terms in
    each hit's block: ``blocks[h, k]`` is ``(start, count, length)`` of hit ``h``'s block of
    ``subfields[k]`` in ``term_ids``/``freqs``, whose term ids increase within a block; ``ids``
    maps terms to ids (a term it lacks is in no block).  Each (block, term) is looked up by
    binary search, all lookups in step: a lookup per block and term, not a read of every pair."""
    n = len(blocks)
    tf = {sf: np.zeros((n, len(asked[sf])), dtype=np.float64) for sf in subfields}
    q_at: list[np.ndarray] = []
    q_size: list[np.ndarray] = []
    q_tid: list[np.ndarray] = []
    q_cell: list[np.ndarray] = []  # where a found tf goes in its sub-field's matrix (flat)
    spans: list[tuple[str, int, int]] = []  # each sub-field's part of the lookups
    done = 0
    for slot, sf in enumerate(subfields):
        cols = [(j, ids[t]) for j, t in enumerate(asked[sf]) if t in ids]
        if not cols or not n:
            continue
        col = np.array([j for j, _ in cols], dtype=np.int64)
        tid = np.array([t for _, t in cols], dtype=np.int64)
        size = np.repeat(blocks[:, slot, 1], len(cols))
        keep = size > 0  # an empty block holds nothing
        q_at.append(np.repeat(blocks[:, slot, 0], len(cols))[keep])
        q_size.append(size[keep])
        q_tid.append(np.tile(tid, n)[keep])
        q_cell.append((np.repeat(np.arange(n) * len(asked[sf]), len(cols)) + np.tile(col, n))[keep])
        spans.append((sf, done, done + int(keep.sum())))
        done = spans[-1][2]
    if done:
        at, size, target = np.concatenate(q_at), np.concatenate(q_size), np.concatenate(q_tid)
        # the last pair of [at, at + size) whose term id is at most the target (or the first
        # pair), every lookup in step; the span halves each round
        while int(size.max()) > 1:
            half = size >> 1
            probe = at + half
            at = np.where(term_ids[probe] <= target, probe, at)
            size -= half
        found = term_ids[at] == target
        cell = np.concatenate(q_cell)
        for sf, lo, hi in spans:
            hit = np.flatnonzero(found[lo:hi]) + lo
            tf[sf].ravel()[cell[hit]] = freqs[at[hit]]
    return tf
