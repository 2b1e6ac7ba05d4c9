"""A persistent, content-addressed cache of embeddings.

Embedding is the slow step of semantic indexing, so every vector is kept under
``$ESBRIDGE_HOME/embeddings/<runtime>-<model>/`` (:attr:`Encoder.cache_id`),
keyed by the SHA-256 of the embedded text.  Re-indexing the same text, indexing
one corpus into a second index, or resuming an interrupted run costs nothing.

Layout: ``vectors.f32`` (rows of ``dim`` float32) and ``keys.txt`` (one hex key a
line, the i-th key naming the i-th row).  Both files are append-only; a batch is
appended under an exclusive ``fcntl`` lock, vectors first, and a reader takes
``min(keys, rows)`` entries, so a crash mid-append loses that batch only and
several processes may share one cache.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from esbridge.home import cache_dir

__all__ = ["EmbeddingCache", "Encoder", "WindowEncoder", "text_key", "window_key"]


class Encoder(Protocol):
    """What the cache needs of an encoder."""

    name: str

    @property
    def dim(self) -> int: ...

    @property
    def cache_id(self) -> str:
        """What its vectors are filed under: every runtime, model and precision whose vectors may
        differ has its own."""
        ...

    def encode(self, texts: Sequence[str], *, progress: Callable[[int], None] | None = None) -> np.ndarray:
        """Unit vectors of documents or passages."""
        ...

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors of queries (which some models prefix otherwise than documents)."""
        ...


class WindowEncoder(Encoder, Protocol):
    """An encoder that also embeds texts longer than it reads, window by window
    (:class:`esbridge.semantic.encoder.SentenceEncoder`)."""

    @property
    def first_window_is_text(self) -> bool:
        """Whether a text's first window is what :meth:`Encoder.encode` reads of it."""
        ...

    @property
    def passage_lengths(self) -> tuple[int, ...]:
        """The passage lengths a document is embedded at (:meth:`at_length` gives each)."""
        ...

    def at_length(self, passage_tokens: int) -> WindowEncoder:
        """This encoder cutting windows of ``passage_tokens`` word pieces only."""
        ...

    def windows(self, texts: Sequence[str]) -> list[list[list[int]]]: ...

    def encode_ids(self, ids: Sequence[Sequence[int]], *,
                   progress: Callable[[int], None] | None = None) -> np.ndarray: ...


def text_key(text: str) -> str:
    """The cache key of ``text``."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def window_key(text: str, window: int, ids: Sequence[int], *, first_is_text: bool = True) -> str:
    """The cache key of window ``window`` of ``text``, whose word pieces are ``ids``.

    With ``first_is_text`` (windows as long as the model reads), the first window's key is
    :func:`text_key`'s: it is what the truncating encoder embeds.  Every other window's key
    names its position and its word pieces, so windows of another length never share a key."""
    if window == 0 and first_is_text:
        return text_key(text)
    return text_key(f"window {window}\x00{','.join(map(str, ids))}\x00{text}")


class EmbeddingCache:
    """Embeddings of one model, on disk.

    Args:
        root: the cache folder of that model.
        dim: the model's dimension.
        chunk: texts embedded between two appends (what a crash can lose).
    """

    def __init__(self, root: Path, dim: int, *, chunk: int = 256) -> None:
        self.root = root
        self.dim = dim
        self.chunk = chunk
        root.mkdir(parents=True, exist_ok=True)
        self._keys_path = root / "keys.txt"
        self._vec_path = root / "vectors.f32"
        self._lock_path = root / ".lock"
        self._index: dict[str, int] = {}
        self._read_offset = 0  # bytes of keys.txt already read
        self._rows_read = 0  # rows of vectors.f32 already read (a key may repeat: two writers raced)
        self._mutex = threading.Lock()

    @classmethod
    def for_encoder(cls, encoder: Encoder, home: Path | None = None) -> EmbeddingCache:
        """The cache of ``encoder`` under ``$ESBRIDGE_HOME/embeddings``."""
        return cls((home or cache_dir()) / "embeddings" / encoder.cache_id, encoder.dim)

    def __len__(self) -> int:
        self._reload()
        return len(self._index)

    def _reload(self) -> None:
        """Read what other writers appended since the last look."""
        if not self._keys_path.exists():
            return
        with self._keys_path.open("rb") as f:
            f.seek(self._read_offset)
            data = f.read()
        end = data.rfind(b"\n") + 1
        if end == 0:
            return
        new_keys = data[:end].decode("ascii").split("\n")[:-1]
        rows = os.path.getsize(self._vec_path) // (4 * self.dim) if self._vec_path.exists() else 0
        start = self._rows_read
        usable = max(0, min(len(new_keys), rows - start))
        if usable == 0:
            return
        for i, k in enumerate(new_keys[:usable]):
            self._index.setdefault(k, start + i)
        self._rows_read += usable
        self._read_offset += len("".join(k + "\n" for k in new_keys[:usable]).encode("ascii"))

    def _append(self, keys: Sequence[str], vectors: np.ndarray) -> None:
        with self._lock_path.open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                # rows and keys must stay aligned: trim a torn tail left by a crash first
                n_keys = self._count_keys()
                rows = os.path.getsize(self._vec_path) // (4 * self.dim) if self._vec_path.exists() else 0
                if rows != n_keys:
                    self._truncate(min(rows, n_keys))
                with self._vec_path.open("ab") as vf:
                    vf.write(np.ascontiguousarray(vectors, dtype=np.float32).tobytes())
                    vf.flush()
                    os.fsync(vf.fileno())
                with self._keys_path.open("ab") as kf:
                    kf.write("".join(k + "\n" for k in keys).encode("ascii"))
                    kf.flush()
                    os.fsync(kf.fileno())
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _count_keys(self) -> int:
        if not self._keys_path.exists():
            return 0
        with self._keys_path.open("rb") as f:
            return f.read().count(b"\n")

    def _truncate(self, n: int) -> None:
        if self._vec_path.exists():
            os.truncate(self._vec_path, n * 4 * self.dim)
        if self._keys_path.exists():
            with self._keys_path.open("rb") as f:
                lines = f.read().split(b"\n")[:n]
            with self._keys_path.open("wb") as f:
                f.write(b"".join(line + b"\n" for line in lines))
        self._index.clear()
        self._read_offset = 0
        self._rows_read = 0

    def embed(self, texts: Sequence[str], encoder: Encoder, *,
              progress: Callable[[int], None] | None = None) -> np.ndarray:
        """Vectors of ``texts`` (``len(texts)`` × ``dim``), embedding only what the cache lacks.

        Args:
            progress: called with a count of texts done (cached ones at once, the rest per chunk).
        """
        if encoder.dim != self.dim:
            raise ValueError(f"encoder {encoder.name!r} has dimension {encoder.dim}, the cache {self.dim}")
        return self._embed_keyed([text_key(t) for t in texts], texts, encoder.encode, progress)

    def embed_windows(self, texts: Sequence[str], encoder: WindowEncoder, *,
                      progress: Callable[[int], None] | None = None,
                      windows: Sequence[Sequence[Sequence[int]]] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Every window's vector of ``texts`` (:meth:`WindowEncoder.windows`), embedding only what
        the cache lacks.

        Returns:
            ``(vectors, starts)``: the rows of text ``i`` are ``vectors[starts[i]:starts[i + 1]]``
            (``starts`` has ``len(texts) + 1`` entries), its first window first.

        Args:
            progress: called with a count of windows done.
            windows: ``encoder.windows(texts)``, when the caller has it already.
        """
        if encoder.dim != self.dim:
            raise ValueError(f"encoder {encoder.name!r} has dimension {encoder.dim}, the cache {self.dim}")
        if windows is None:
            windows = encoder.windows(texts)
        first_is_text = encoder.first_window_is_text
        keys: list[str] = []
        pieces: list[Sequence[int]] = []
        starts = np.zeros(len(texts) + 1, dtype=np.int64)
        for i, (text, ws) in enumerate(zip(texts, windows, strict=True)):
            for j, ids in enumerate(ws):
                keys.append(window_key(text, j, ids, first_is_text=first_is_text))
                pieces.append(ids)
            starts[i + 1] = len(keys)
        by_key = {k: i for i, k in enumerate(keys)}

        def encode(part: Sequence[str]) -> np.ndarray:
            return encoder.encode_ids([pieces[by_key[k]] for k in part])

        return self._embed_keyed(keys, keys, encode, progress), starts

    def _embed_keyed(self, keys: Sequence[str], items: Sequence[str],
                     encode: Callable[[Sequence[str]], np.ndarray],
                     progress: Callable[[int], None] | None) -> np.ndarray:
        """Rows for ``keys``; ``encode`` embeds the items of the keys the cache lacks."""
        texts = items
        with self._mutex:
            self._reload()
            missing = list(dict.fromkeys(k for k in keys if k not in self._index))
        missing_set = set(missing)
        if progress is not None and len(keys) - len(missing):
            progress(sum(1 for k in keys if k not in missing_set))
        if missing:
            by_key = {k: t for k, t in zip(keys, texts)}
            for start in range(0, len(missing), self.chunk):
                part = missing[start:start + self.chunk]
                vecs = encode([by_key[k] for k in part])
                with self._mutex:
                    self._append(part, vecs)
                    self._reload()
                if progress is not None:
                    part_set = set(part)
                    progress(sum(1 for k in keys if k in part_set))
        with self._mutex:
            self._reload()
            rows = np.fromiter((self._index[k] for k in keys), dtype=np.int64, count=len(keys))
            n_rows = self._rows_read
        if not len(rows):
            return np.zeros((0, self.dim), dtype=np.float32)
        # only the rows asked for are read (the file may hold far more than fit in memory)
        mm = np.memmap(self._vec_path, dtype=np.float32, mode="r", shape=(n_rows, self.dim))
        try:
            return np.array(mm[rows], dtype=np.float32)
        finally:
            del mm
