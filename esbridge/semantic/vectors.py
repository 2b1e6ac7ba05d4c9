"""Document vectors of one engine index, kept on disk, searched exactly.

Neither engine that esbridge runs here (OpenSearch 3.8 without the k-NN plugin,
Elasticsearch 7.10 without x-pack) has a vector field, so the semantic index is
esbridge's own: one float32 matrix of unit-length vectors and the document ids,
under ``$ESBRIDGE_HOME/vectors/<index uuid>/<model>/``.  Keying by the index's
UUID means a deleted and recreated index, or an alias that now points elsewhere,
never reuses another index's vectors.

Passages: a sentence-embedding model reads a fixed number of word pieces (256 for
all-MiniLM-L6-v2), and most scientific abstracts are longer.  With an encoder that has
windows (:meth:`esbridge.semantic.encoder.SentenceEncoder.windows`), every document is
embedded window by window — passages of ``passage_tokens`` word pieces (64 unless the model's
spec says otherwise),
overlapping by half — and scores the cosine of its *best* passage ("MaxP"); a document that
fits has one.  Measured with all-MiniLM-L6-v2, nDCG@10 of the semantic search alone:

| documents embedded as | SciFact train | SciFact test | NFCorpus tuning half | NFCorpus test |
|---|---:|---:|---:|---:|
| their first 256 word pieces (one vector) | 0.6602 | 0.6451 | | |
| windows of 256, best window | 0.6734 | 0.6762 | 0.2810 | 0.2986 |
| windows of 64, best window (default) | 0.6932 | 0.6899 | 0.3088 | 0.3276 |

A short passage matches a query by the few sentences that answer it instead of by a whole
abstract's average meaning.  A model may be given several passage lengths
(:attr:`esbridge.semantic.spec.ModelSpec.passages`): every document is then embedded at each,
and scores the mean over the lengths of its best passage's cosine (:func:`document_scores`;
docs/hybrid.md has the figures).  The cost at ingest is about the same (measured: 7.3 against 7.8
documents per second on SciFact): most word pieces are embedded twice (the overlap), as long
documents' were with windows of 256, and attention over 64 word pieces is cheaper than over
256.  The vectors record the passage length they were built with; another length rebuilds
them.

Search is exact: the cosine of the query with every window (a matrix-vector
product), the best window per document, then the top ``k``.  That covers the whole collection, not only the
lexical candidates, and costs about ``N × dim`` multiply-adds per query (measured on one core
of the benchmark machine: about 19 ms for 100,000 documents of dimension 384, top 1000
included; it grows linearly with ``N``).

Freshness: the vectors record the index state (document counts and indexing and
deletion totals, :func:`esbridge.index.facts.index_state`) they were built
at.  :meth:`VectorIndex.open` checks it (at most every ``check_interval``
seconds) and, if the index changed, re-reads the documents' text with a scroll
and embeds only texts the embedding cache has not seen.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from esbridge.engine.client import Engine
from esbridge.errors import ConfigurationError
from esbridge.home import cache_dir
from esbridge.index.facts import concrete_index, index_state
from esbridge.semantic.cache import EmbeddingCache, Encoder, WindowEncoder
from esbridge.semantic.text import document_text

__all__ = ["SemanticHits", "SemanticIndex", "VectorIndex", "document_scores", "level_starts"]


def level_starts(starts: Sequence[np.ndarray]) -> np.ndarray:
    """One row-offset array (:func:`document_scores`) for the windows of several passage lengths
    laid one length after another, from each length's own offsets."""
    out = [np.zeros(1, dtype=np.int64)]
    for st in starts:
        out.append(np.asarray(st[1:], dtype=np.int64) + out[-1][-1])
    return np.concatenate(out)


def document_scores(sims: np.ndarray, starts: np.ndarray, n: int) -> np.ndarray:
    """The scores of ``n`` documents from their windows' cosines ``sims``: each document's best
    window at each passage length, averaged over the lengths.

    ``starts`` holds ``L * n + 1`` row offsets for ``L`` passage lengths: the windows of document
    ``i`` at length ``l`` are ``sims[starts[l * n + i]:starts[l * n + i + 1]]`` (every document has
    at least one window at each length).  ``sims`` may have a second axis in front (one row per
    query).
    """
    if sims.shape[-1] == n and len(starts) == n + 1:
        return sims  # one vector per document
    best = np.maximum.reduceat(sims, starts[:-1], axis=-1)  # each document's best window at each length
    levels = best.shape[-1] // max(n, 1)
    return best if levels <= 1 else best.reshape(*best.shape[:-1], levels, n).mean(axis=-2)


def best_of(ids: Sequence[str], sims: np.ndarray, k: int) -> SemanticHits:
    """The ``k`` best of ``ids`` by ``sims``, best first, ties by position (``nan``: no vector, left out)."""
    sims = np.asarray(sims, dtype=np.float64)
    keep = np.flatnonzero(~np.isnan(sims))
    if k < len(keep):
        keep = keep[np.argpartition(-sims[keep], k - 1)[:k]]
    top = keep[np.lexsort((keep, -sims[keep]))]
    return SemanticHits([ids[i] for i in top], sims[top])


def _scroll_sources(engine: Engine, index: str, fields: Sequence[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    for h in engine.scroll(index, {"_source": list(fields)}):
        yield str(h["_id"]), h.get("_source") or {}


@dataclass(frozen=True)
class SemanticHits:
    """The top documents of a semantic search, best first."""

    ids: list[str]
    scores: np.ndarray


class SemanticIndex:
    """What every semantic index shares: the encoder that embeds its queries, the depth check, and
    how far its vectors lag the index (:attr:`pending`)."""

    encoder: Encoder
    #: documents of the index without a vector here, as of the last :meth:`refresh` (0: every
    #: document with text has one; for the on-disk index, documents added since it was built)
    pending: int = 0

    def refresh(self, *, force: bool = False, build: bool = True) -> bool:
        """Check the index (at most every ``check_interval`` seconds unless ``force``) and, with
        ``build``, embed what it holds that has no vector yet; ``True`` if vectors were written.
        Without ``build`` nothing is embedded, only :attr:`pending` is brought up to date: the
        search answers from the vectors there are, at once."""
        raise NotImplementedError

    def embed_query(self, text: str) -> np.ndarray:
        """The query's unit vector (queries are embedded as they are, not cached on disk)."""
        vec: np.ndarray = self.encoder.encode_queries([text])[0]
        return vec

    @staticmethod
    def _check_depth(k: int) -> None:
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ConfigurationError(f"semantic depth k must be an integer >= 1, got {k!r}")


class VectorIndex(SemanticIndex):
    """Unit-length vectors of every document of one index, with exact cosine search.

    Use :meth:`open`.  Safe to share between threads.
    """

    def __init__(self, engine: Engine, index: str, encoder: Encoder, *, fields: Sequence[str],
                 cache: EmbeddingCache | None = None, home: Path | None = None,
                 check_interval: float = 1.0, progress: bool = False, windows: bool = True) -> None:
        self.engine = engine
        self.index = index
        self.encoder = encoder
        self.fields = tuple(fields)
        self.cache = cache or EmbeddingCache.for_encoder(encoder, home)
        self.check_interval = check_interval
        self.progress = progress
        self.concrete, self.uuid = concrete_index(engine, index, purpose="semantic search")
        #: documents score by their best window (the encoder must have windows)
        self.windows = bool(windows) and all(hasattr(encoder, a) for a in ("at_length", "windows", "encode_ids"))
        # one vector per document is kept apart from the passages, so the two never replace each other
        self.path = (home or cache_dir()) / "vectors" / self.uuid / (
            encoder.cache_id if self.windows else f"{encoder.cache_id}-document")
        #: the passage lengths documents are embedded at (``None`` without windows): vectors built
        #: with other lengths are rebuilt, not mixed
        self.passage_tokens: tuple[int, ...] | None = \
            tuple(encoder.passage_lengths) if self.windows else None  # type: ignore[attr-defined]
        #: window groups per document: one per passage length
        self.levels = len(self.passage_tokens) if self.passage_tokens else 1
        self.ids: list[str] = []
        self.vectors = np.zeros((0, encoder.dim), dtype=np.float32)  # one row per window
        #: the rows of document i at passage length l: ``starts[l * N + i]:starts[l * N + i + 1]``
        #: (``N`` documents; every length's windows follow the previous length's)
        self.starts = np.zeros(1, dtype=np.int64)
        self._row: dict[str, int] = {}
        self._state: tuple[int, ...] | None = None
        self._checked = 0.0
        self._lock = threading.RLock()  # guards the arrays' swap
        self._building = threading.Lock()  # one build at a time, searches unblocked meanwhile

    @classmethod
    def open(cls, engine: Engine, index: str, encoder: Encoder, *, fields: Sequence[str], build: bool = True,
             **kwargs: Any) -> VectorIndex:
        """The vectors of ``index``, loaded from disk, and (with ``build``) built or brought up to date
        as needed; without, what is on disk as it is (:attr:`pending` says what it lacks)."""
        vi = cls(engine, index, encoder, fields=fields, **kwargs)
        vi._load()
        vi.refresh(force=True, build=build)
        return vi

    def _load(self) -> None:
        meta_path = self.path / "meta.json"
        if not meta_path.is_file():
            return
        try:
            meta = json.loads(meta_path.read_text())
            ids = json.loads((self.path / "ids.json").read_text())
            vecs = np.load(self.path / "vectors.npy", mmap_mode="r")
            starts = np.load(self.path / "starts.npy") if meta.get("windows") else np.arange(len(ids) + 1)
        except (OSError, ValueError):
            return  # a torn write, or vectors of an earlier layout: rebuild
        lengths = list(self.passage_tokens) if self.passage_tokens else None
        if meta.get("fields") != list(self.fields) or bool(meta.get("windows")) != self.windows \
                or meta.get("passage_tokens") != lengths or len(starts) != self.levels * len(ids) + 1 \
                or int(starts[-1]) != len(vecs) or vecs.shape[1:] != (self.encoder.dim,):
            return
        self.ids, self.vectors, self.starts, self._state = ids, vecs, starts, tuple(meta["state"])
        self._row = {d: i for i, d in enumerate(ids)}

    def refresh(self, *, force: bool = False, build: bool = True) -> bool:
        """Bring the vectors up to date with the index if it changed (``build``), or only count the
        documents they lack; ``True`` if they were rebuilt.  Searches go on from the vectors there
        are while a build embeds."""
        now = time.monotonic()
        if not force and now - self._checked < self.check_interval:
            return False
        self._checked = now
        state = index_state(self.engine, self.index)
        if state == self._state:
            self.pending = 0
            return False
        if not build:
            self.pending = max(1, self.engine.count(self.index) - len(self.ids))
            return False
        with self._building:
            if state == self._state:  # built by another thread meanwhile
                return False
            self._rebuild(state)
            self.pending = 0
            return True

    def _rebuild(self, state: tuple[int, ...]) -> None:
        ids: list[str] = []
        texts: list[str] = []
        for doc_id, source in _scroll_sources(self.engine, self.index, self.fields):
            ids.append(doc_id)
            texts.append(document_text(source, self.fields))
        window_encoder: WindowEncoder = self.encoder  # type: ignore[assignment]
        encoders = [window_encoder.at_length(n) for n in self.passage_tokens or ()]
        windows = [e.windows(texts) for e in encoders]
        bar = None
        progress: Callable[[int], None] | None = None
        if self.progress:
            from tqdm import tqdm

            total, unit = (sum(len(w) for ws in windows for w in ws), "window") if encoders else (len(texts), "doc")
            bar = tqdm(total=total, desc=f"embedding {self.index}", unit=unit, file=sys.stderr)
            progress = bar.update
        try:
            if encoders:
                parts = [self.cache.embed_windows(texts, e, progress=progress, windows=ws)
                         for e, ws in zip(encoders, windows, strict=True)]
                vecs = np.concatenate([v for v, _ in parts]) if len(parts) > 1 else parts[0][0]
                starts = level_starts([st for _, st in parts])
            else:
                vecs, starts = self.cache.embed(texts, self.encoder, progress=progress), np.arange(len(texts) + 1)
        finally:
            if bar is not None:
                bar.close()
        empty = np.array([not t for t in texts], dtype=bool)
        if empty.any():  # a document with no text matches nothing, at every length
            vecs[np.repeat(np.tile(empty, (len(starts) - 1) // max(len(texts), 1)), np.diff(starts))] = 0.0
        self.path.mkdir(parents=True, exist_ok=True)
        tmp = self.path / f".tmp-{os.getpid()}-{threading.get_ident()}"
        tmp.mkdir(exist_ok=True)
        np.save(tmp / "vectors.npy", vecs)
        np.save(tmp / "starts.npy", starts)
        (tmp / "ids.json").write_text(json.dumps(ids))
        (tmp / "meta.json").write_text(json.dumps({
            "index": self.concrete, "uuid": self.uuid, "model": self.encoder.name,
            "fields": list(self.fields), "state": list(state), "documents": len(ids),
            "windows": self.windows, "passage_tokens": list(self.passage_tokens) if self.passage_tokens else None}))
        for name in ("vectors.npy", "starts.npy", "ids.json", "meta.json"):  # meta last: it marks a whole set
            os.replace(tmp / name, self.path / name)
        tmp.rmdir()
        with self._lock:
            self.ids, self.vectors, self.starts, self._state = ids, vecs, starts, state
            self._row = {d: i for i, d in enumerate(ids)}

    def __len__(self) -> int:
        return len(self.ids)

    def search(self, query_vector: np.ndarray, k: int, *, among: Sequence[str] | None = None) -> SemanticHits:
        """The ``k`` documents of highest cosine with ``query_vector``, best first (ties by row);
        with ``among``, of those documents only (ids without a vector left out)."""
        self._check_depth(k)
        if among is not None:
            unique = list(dict.fromkeys(among))
            return best_of(unique, self.similarity(query_vector, unique), k)
        with self._lock:
            vecs, ids, starts = self.vectors, self.ids, self.starts
        if not ids:
            return SemanticHits([], np.zeros(0))
        sims = document_scores(np.asarray(vecs @ query_vector.astype(np.float32), dtype=np.float64),
                               starts, len(ids))
        return best_of(ids, sims, k)

    def vectors_of(self, ids: Sequence[str], query_vector: np.ndarray | None = None) -> np.ndarray:
        """The vectors of those ``ids`` that have one (ids without a vector are left out): each
        document's first window, or with ``query_vector`` its window closest to that query."""
        with self._lock:
            doc_rows = [r for r in (self._row.get(d, -1) for d in ids) if r >= 0]
            vecs, starts = self.vectors, self.starts
        if query_vector is None or len(vecs) == len(self.ids):
            return np.asarray(vecs[[int(starts[r]) for r in doc_rows]], dtype=np.float32)
        q = np.asarray(query_vector, dtype=np.float32)
        best = [int(starts[r]) + int(np.argmax(np.asarray(vecs[starts[r]:starts[r + 1]]) @ q)) for r in doc_rows]
        return np.asarray(vecs[best], dtype=np.float32)

    def similarity(self, query_vector: np.ndarray, ids: Sequence[str]) -> np.ndarray:
        """The documents ``ids``' scores for ``query_vector``, as :meth:`search` gives them (the
        cosine of their best passage, averaged over the passage lengths; ``nan`` for an id without
        a vector)."""
        with self._lock:
            rows = np.array([self._row.get(d, -1) for d in ids], dtype=np.int64)
            vecs, starts, n = self.vectors, self.starts, len(self.ids)
        out = np.full(len(ids), np.nan)
        ok = rows >= 0
        if ok.any():
            levels = max(1, (len(starts) - 1) // max(n, 1))
            # the documents asked for, at every length: group l * m + j is document j at length l
            groups = (rows[ok][None, :] + n * np.arange(levels)[:, None]).ravel()
            first, counts = starts[groups], starts[groups + 1] - starts[groups]
            heads = np.concatenate(([0], np.cumsum(counts)[:-1]))
            windows = np.arange(int(counts.sum())) + np.repeat(first - heads, counts)
            sims = np.asarray(vecs[windows] @ query_vector.astype(np.float32), dtype=np.float64)
            out[ok] = document_scores(sims, np.append(heads, len(windows)), int(ok.sum()))
        return out
