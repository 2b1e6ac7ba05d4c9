"""Collection entropy of terms, for BMX.

BMX weighs each query term by ``Ẽ(t) = -sum_j p_j ln p_j`` over the documents
containing ``t``, with ``p_j = sigmoid(tf(t, d_j))``.  That needs the whole
collection's term frequencies, which no engine API returns per term; esbridge
reads every document's term vectors of a channel once (``_mtermvectors`` over
all ids, in batches, with a progress bar on stderr), keeps a per-term histogram
of term frequencies, and turns it into a table ``{term: Ẽ(term)}``.  On a large
index this is a one-off cost proportional to the index size.

The table is kept in memory and persisted for the next process under
``$ESBRIDGE_HOME/entropy/<index UUID>/`` (one file per channel sub-field and
index state), so it is computed once per index state, not once per process.
The UUID key means a recreated index, or an alias now pointing elsewhere, never
reuses another index's table; the state (:func:`esbridge.features.cache.index_state`:
document counts and indexing and deletion totals) means any write makes the
table stale.  Files are written to a temporary name and moved into place with
``os.replace``, so concurrent processes each see a whole file or none; a table
whose index changed while it was read is used but not persisted.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import threading
import uuid
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from esbridge.engine.client import Engine, path_segment
from esbridge.engine.local import cache_dir
from esbridge.errors import EngineError
from esbridge.features.cache import index_state
from esbridge.index.definitions import IndexLayout
from esbridge.scoring.bmx import collection_entropy_from_histogram

#: Term frequencies above this share the last histogram bin; -σ(k) ln σ(k) < 1e-16 there,
#: so the entropy is exact to float precision.
MAX_TF_BIN = 40

#: Version of the persisted tables; raise it whenever the computation changes.
FORMAT = 1

_SAFE_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")


def _all_ids(engine: Engine, index: str, page: int = 5000) -> Iterator[str]:
    for h in engine.scroll(index, {"_source": False}, page=page,
                           context=f"listing the documents of {index!r}"):
        yield str(h["_id"])


def index_key(engine: Engine, index: str) -> str:
    """The UUID of the index ``index`` names (a hash of the sorted UUIDs if an alias or
    pattern names several): a key that changes when the index is recreated."""
    resp = engine.request("GET", f"/{path_segment(index, patterns=True)}/_settings/index.uuid",
                          context=f"reading the UUID of {index!r}")
    uuids = sorted(str(spec["settings"]["index"]["uuid"]) for spec in resp.values())
    if len(uuids) == 1 and _SAFE_NAME.match(uuids[0]) and not uuids[0].startswith("."):
        return uuids[0]
    return "multi-" + hashlib.sha256("\n".join(uuids).encode("utf-8")).hexdigest()[:32]


class CollectionEntropy:
    """Per-term collection entropy of one index's channels, computed once per index state.

    Args:
        persist: keep the tables under ``home`` for later processes (default ``True``).
        home: the cache directory (default ``$ESBRIDGE_HOME``, see
            :func:`esbridge.engine.local.cache_dir`).
        progress: a progress bar on stderr while a table is computed.
    """

    def __init__(self, engine: Engine, index: str, layout: IndexLayout, *, batch_size: int = 500,
                 progress: bool = True, persist: bool = True, home: Path | None = None) -> None:
        self.engine = engine
        self.index = index
        self.layout = layout
        self.batch_size = batch_size
        self.progress = progress
        self.persist = persist
        self.home = home
        self._tables: dict[str, dict[str, float]] = {}
        self._state: object = None
        self._key: str | None = None
        self._lock = threading.Lock()
        #: tables computed from the engine and read from disk by this object
        self.computed = 0
        self.loaded = 0

    def table(self, channel: str) -> dict[str, float]:
        """``{term: Ẽ(term)}`` for every term of ``channel`` in the combined field."""
        with self._lock:
            state = index_state(self.engine, self.index)
            if state != self._state:
                self._tables.clear()
                self._state = state
                self._key = None
            if channel not in self._tables:
                self._tables[channel] = self._obtain(channel, state)
            return self._tables[channel]

    def for_terms(self, channel: str, terms: Sequence[str]) -> np.ndarray:
        table = self.table(channel)
        return np.array([table.get(t, 0.0) for t in terms], dtype=np.float64)

    # ---- persistence ------------------------------------------------------------------

    def path(self, channel: str, state: tuple[int, ...]) -> Path:
        """Where the table of ``channel`` at index state ``state`` is persisted."""
        if self._key is None:
            self._key = index_key(self.engine, self.index)
        tag = "-".join(str(int(v)) for v in state)
        return (self.home or cache_dir()) / "entropy" / self._key / f"{self._stem(channel)}.v{FORMAT}.{tag}.json"

    def _stem(self, channel: str) -> str:
        subfield = self.layout.subfield(self.layout.combined, channel)
        return subfield if _SAFE_NAME.match(subfield) else hashlib.sha256(subfield.encode("utf-8")).hexdigest()[:32]

    def _obtain(self, channel: str, state: tuple[int, ...]) -> dict[str, float]:
        path = self.path(channel, state) if self.persist else None
        if path is not None:
            table = _load(path, self._key, state)
            if table is not None:
                self.loaded += 1
                return table
        table = self._compute(channel)
        self.computed += 1
        if path is not None and index_state(self.engine, self.index) == state:
            _save(path, table, {"index": self.index, "uuid": self._key, "channel": channel,
                                "state": list(state)}, stale=f"{self._stem(channel)}.v*.json")
        return table

    def _compute(self, channel: str) -> dict[str, float]:
        from tqdm import tqdm

        subfield = self.layout.subfield(self.layout.combined, channel)
        hist: dict[str, np.ndarray] = {}
        ids = list(_all_ids(self.engine, self.index))
        bar = tqdm(total=len(ids), desc=f"collection entropy of {self.index}/{channel}", unit="doc",
                   disable=not self.progress, file=sys.stderr)
        for start in range(0, len(ids), self.batch_size):
            chunk = ids[start:start + self.batch_size]
            resp = self.engine.request(
                "POST", f"/{self.index}/_mtermvectors",
                body={"ids": chunk, "parameters": {"fields": [subfield], "positions": False,
                                                   "offsets": False, "term_statistics": False,
                                                   "field_statistics": False}},
                context=f"reading term vectors of {self.index!r} for collection entropy",
            )
            for doc in resp["docs"]:
                if "error" in doc:
                    err = doc["error"] if isinstance(doc["error"], dict) else {"reason": doc["error"]}
                    raise EngineError(
                        f"term vectors of document {doc.get('_id')!r} in {self.index!r} failed while computing "
                        f"collection entropy ({err.get('type', 'error')}: "
                        f"{' '.join(str(err.get('reason', '')).split())}); retry when every shard has an active copy",
                        index=self.index, body=doc,
                    )
                terms = ((doc.get("term_vectors") or {}).get(subfield) or {}).get("terms") or {}
                for term, info in terms.items():
                    row = hist.get(term)
                    if row is None:
                        row = hist[term] = np.zeros(MAX_TF_BIN, dtype=np.float64)
                    row[min(int(info["term_freq"]), MAX_TF_BIN) - 1] += 1
            bar.update(len(chunk))
        bar.close()
        if not hist:
            return {}
        terms = list(hist)
        values = collection_entropy_from_histogram(np.stack([hist[t] for t in terms]))
        return dict(zip(terms, (float(v) for v in values)))


def _load(path: Path, key: str | None, state: tuple[int, ...]) -> dict[str, float] | None:
    """The persisted table at ``path``, or ``None`` if there is none or it is unreadable."""
    try:
        with open(path, encoding="utf-8") as f:
            doc: Any = json.load(f)
    except (OSError, ValueError):
        return None
    if not (isinstance(doc, dict) and doc.get("format") == FORMAT and doc.get("uuid") == key
            and doc.get("state") == list(state) and isinstance(doc.get("entropy"), dict)):
        return None
    return {str(t): float(v) for t, v in doc["entropy"].items()}


def _save(path: Path, table: dict[str, float], meta: dict[str, Any], *, stale: str) -> None:
    """Write ``table`` atomically (temporary file, then ``os.replace``) and drop the files
    matching ``stale`` (the same channel at other index states); a failure to write only
    costs a recomputation."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"format": FORMAT, **meta, "entropy": table}, f, ensure_ascii=False)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        warnings.warn(f"collection entropy not persisted under {path.parent}: {err}; "
                      "it will be computed again in the next process", RuntimeWarning, stacklevel=3)
        return
    for other in path.parent.glob(stale):
        if other != path:
            other.unlink(missing_ok=True)
