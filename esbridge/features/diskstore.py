"""Candidates' term vectors on disk: the persistent tier behind :class:`~esbridge.features.cache.TermVectorCache`.

What a scorer needs of a document — per channel sub-field, its term frequencies and its
length — is kept in one folder per index *identity* (the index UUIDs an index name or
alias stands for, :func:`esbridge.features.cache.index_identity`), so a deleted and
recreated index, or an alias moved to another index, never reads another index's vectors.
Each folder holds:

``vectors.i32``
    an append-only array of ``(term id, tf)`` pairs of 32-bit integers, read through a
    read-only memory map;
``vectors.sqlite``
    the term dictionary (term id → term) and one row per document and sub-field: the
    ``_seq_no`` and ``_primary_term`` the vectors were read at, where its pairs start in
    the array, how many there are, and the field's length.

A row is used only when its ``_seq_no`` and ``_primary_term`` are those the first-stage
search returned for the hit, so an updated document is never scored from its old vectors:
it is fetched again and its row replaced (the old pairs stay in the array as garbage until
:meth:`DiskVectorStore.compact`).

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
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from esbridge.errors import ConfigurationError
from esbridge.features.termvectors import FieldVector

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


def default_store_root() -> Path:
    """``<esbridge's cache>/features`` (``$ESBRIDGE_HOME/features`` or ``~/.cache/esbridge/features``)."""
    root = os.environ.get("ESBRIDGE_HOME")
    return (Path(root) if root else Path.home() / ".cache" / "esbridge") / "features"


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
                got = self._parts[identity] = _IdentityStore(self.root / digest, identity)
            return got

    def get_many(self, identity: str, keys: Sequence[VersionedId],
                 subfields: Sequence[str]) -> list[dict[str, FieldVector] | None]:
        """The vectors of ``subfields`` for each key, or ``None`` where some sub-field is
        missing or was stored at another ``_seq_no``/``_primary_term``."""
        return self.part(identity).get_many(keys, subfields)

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
        self._lock = threading.Lock()  # the term table and the memory map of this process
        self._write_lock = threading.Lock()  # one writing thread per process (flock is per open file)
        self._terms: list[str] = [""]  # term id -> term (ids start at 1)
        self._term_array = np.empty(1024, dtype=object)  # the same, for vectorised look-ups
        self._term_array[0] = ""
        self._ids: dict[str, int] = {}
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
        con: sqlite3.Connection | None = getattr(self._local, "con", None)
        if con is None:
            con = sqlite3.connect(self.db_path, timeout=60.0, isolation_level="DEFERRED")
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=NORMAL")
            self._local.con = con
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
        con = getattr(self._local, "con", None)
        if con is not None:
            con.close()
            self._local.con = None
        with self._lock:
            self._map = np.zeros((0, 2), dtype=np.int32)
            self._mmap = None  # closed once no array still views it

    # ---- reading and writing ------------------------------------------------------------

    def get_many(self, keys: Sequence[VersionedId], subfields: Sequence[str]) -> list[dict[str, FieldVector] | None]:
        if not keys or not subfields:
            return [None] * len(keys)
        con = self._con()
        wanted = set(subfields)
        ids = list(dict.fromkeys(k[0] for k in keys))
        rows: dict[tuple[str, str], tuple[int, int, int, int, int]] = {}
        for i in range(0, len(ids), _SQL_VARS):
            chunk = ids[i:i + _SQL_VARS]
            marks = ",".join("?" * len(chunk))
            for doc, sf, seq, term, start, n, length in con.execute(
                    f"SELECT doc, subfield, seq_no, primary_term, start, n, length FROM vectors WHERE doc IN ({marks})",
                    chunk):
                if sf in wanted:
                    rows[(doc, sf)] = (seq, term, start, n, length)
        if not rows:
            return [None] * len(keys)
        end = max(start + n for _, _, start, n, _ in rows.values())
        pairs = self._pairs(end)
        if len(pairs) < end:  # rows committed after pairs written: cannot happen unless the file was cut
            return [None] * len(keys)
        # every wanted block of every key that has them all at its version, read in one gather
        hits: list[int] = []
        starts: list[int] = []
        counts: list[int] = []
        lengths: list[int] = []
        for k, (doc, seq_no, primary) in enumerate(keys):
            got = [rows.get((doc, sf)) for sf in subfields]
            if all(r is not None and r[0] == seq_no and r[1] == primary for r in got):
                hits.append(k)
                for r in got:
                    assert r is not None
                    starts.append(r[2])
                    counts.append(r[3])
                    lengths.append(r[4])
        out: list[dict[str, FieldVector] | None] = [None] * len(keys)
        if not hits:
            return out
        n = np.asarray(counts, dtype=np.int64)
        offsets = np.zeros(len(n) + 1, dtype=np.int64)
        np.cumsum(n, out=offsets[1:])
        where = np.repeat(np.asarray(starts, dtype=np.int64) - offsets[:-1], n) + np.arange(offsets[-1])
        picked = pairs[where]
        tids = picked[:, 0]
        if len(tids) and int(tids.max()) >= len(self._terms):
            self._sync_terms(con)
        words = self._term_array[tids].tolist()
        tfs = picked[:, 1].tolist()
        bounds = offsets.tolist()
        b = 0
        for k in hits:
            entry = {}
            for sf in subfields:
                lo, hi = bounds[b], bounds[b + 1]
                entry[sf] = FieldVector(dict(zip(words[lo:hi], tfs[lo:hi])), length=lengths[b])
                b += 1
            out[k] = entry
        return out

    def put_many(self, entries: Sequence[tuple[VersionedId, Mapping[str, FieldVector]]]) -> None:
        if not entries:
            return
        with self._write_locked():
            con = self._con()
            try:
                self._sync_terms(con)
                new_terms: list[tuple[int, str]] = []
                known = self._ids  # the committed terms
                ids: dict[str, int] = {}  # the terms this write adds
                next_id = len(self._terms)
                blocks: list[np.ndarray] = []
                rows: list[tuple[str, str, int, int, int, int, int]] = []
                with open(self.data_path, "ab") as data:
                    size = data.tell()
                    if size % _PAIR:  # a writer died mid-pair: pad to the next whole pair
                        data.write(b"\0" * (_PAIR - size % _PAIR))
                        size += _PAIR - size % _PAIR
                    start = size // _PAIR
                    for (doc, seq_no, primary), vectors in entries:
                        for sf, vec in vectors.items():
                            tids = []
                            for term in vec:
                                tid = known.get(term) or ids.get(term)
                                if tid is None:
                                    tid = ids[term] = next_id
                                    new_terms.append((next_id, term))
                                    next_id += 1
                                tids.append(tid)
                            block = np.empty((len(tids), 2), dtype=np.int32)
                            block[:, 0] = tids
                            block[:, 1] = list(vec.values())
                            blocks.append(block)
                            rows.append((doc, sf, seq_no, primary, start, len(tids), int(vec.length)))
                            start += len(tids)
                    if blocks:
                        data.write(np.concatenate(blocks).tobytes())
                    data.flush()
                    os.fsync(data.fileno())
                con.executemany("INSERT INTO terms VALUES (?, ?)", new_terms)
                con.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
                con.commit()
            except BaseException:
                con.rollback()
                raise
            self._add_terms(new_terms)

    def versions(self, ids: Sequence[str], subfields: Sequence[str]) -> dict[str, tuple[int, int]]:
        """``{_id: (_seq_no, _primary_term)}`` of the documents stored with every one of ``subfields``."""
        con = self._con()
        seen: dict[str, set[tuple[int, int]]] = {}
        count: dict[str, int] = {}
        wanted = set(subfields)
        for i in range(0, len(ids), _SQL_VARS):
            chunk = list(ids[i:i + _SQL_VARS])
            marks = ",".join("?" * len(chunk))
            for doc, sf, seq, term in con.execute(
                    f"SELECT doc, subfield, seq_no, primary_term FROM vectors WHERE doc IN ({marks})", chunk):
                if sf in wanted:
                    seen.setdefault(doc, set()).add((seq, term))
                    count[doc] = count.get(doc, 0) + 1
        return {doc: next(iter(v)) for doc, v in seen.items() if len(v) == 1 and count[doc] == len(wanted)}

    def size(self) -> StoreSize:
        con = self._con()
        docs, rows = con.execute("SELECT COUNT(DISTINCT doc), COUNT(*) FROM vectors").fetchone()
        terms = con.execute("SELECT COUNT(*) FROM terms").fetchone()[0]
        total = sum(p.stat().st_size for p in self.folder.iterdir() if p.is_file())
        return StoreSize(documents=int(docs), rows=int(rows), terms=int(terms), bytes=int(total))
