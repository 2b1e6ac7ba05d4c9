"""Collection entropy of terms, for BMX.

BMX weighs each query term by ``Ẽ(t) = -sum_j p_j ln p_j`` over the documents
containing ``t``, with ``p_j = sigmoid(tf(t, d_j))``.  That needs the whole
collection's term frequencies, which no engine API returns per term; esbridge
reads every document's term vectors of a channel once (``_mtermvectors`` over
all ids, in batches, with a progress bar on stderr; on an index without stored term
vectors the engine analyses each document's text again, as for candidates), keeps a per-term histogram
of term frequencies, and turns it into a table ``{term: Ẽ(term)}``.  On a large
index this is a one-off cost proportional to the index size.

The table is kept in memory and persisted for the next process under
``$ESBRIDGE_HOME/entropy/<index UUID>/`` (one file per channel sub-field), so it
is computed once per index state, not once per process.  The UUID key means a
recreated index, or an alias now pointing elsewhere, never reuses another index's
table.  The state (:func:`esbridge.index.facts.index_state`: document counts and
indexing and deletion totals) bounds how stale a table may be: it is reused while
the documents written since it was computed (indexed, updated or deleted) are at
most ``stale_writes`` (default 1%) of the documents it was computed over, and
computed again beyond that, so a write or a few no longer cost a full scan each.
Terms that appeared only since (not in the table) weigh as a term of entropy 0
until then.  The engine's indexing totals restart when a shard is reopened (a node
restart); the table is then computed again.  ``stale_writes=0`` recomputes after
every write.  Files are written to a temporary name and moved into place with
``os.replace``, so concurrent processes each see a whole file or none; a table
whose index changed while it was read is used but not persisted.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import uuid
import warnings
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from esbridge.engine.calls import scroll_plan
from esbridge.engine.client import EngineBase, sync_engine
from esbridge.engine.plan import Exclusive, Offload, Plan, PlanLock, run
from esbridge.errors import ConfigurationError
from esbridge.features.termvectors import QueryChannel, ShardRouting, fetch_raw_plan
from esbridge.home import cache_dir
from esbridge.index.definitions import IndexLayout
from esbridge.index.facts import identity_plan, index_key_plan
from esbridge.scoring.bmx import collection_entropy_from_histogram

#: Term frequencies above this share the last histogram bin; -σ(k) ln σ(k) < 1e-16 there,
#: so the entropy is exact to float precision.
MAX_TF_BIN = 40

#: Share of an index's documents that may be written after a table was computed before it is
#: computed again (:class:`CollectionEntropy`'s ``stale_writes``).
DEFAULT_STALE_WRITES = 0.01

#: Version of the persisted tables; raise it whenever the computation changes.
FORMAT = 1

_SAFE_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")


def _all_ids_plan(index: str, page: int = 5000) -> Plan[list[str]]:
    hits = yield from scroll_plan(index, {"_source": False}, page=page,
                                  context=f"listing the documents of {index!r}")
    return [str(h["_id"]) for h in hits]


class CollectionEntropy:
    """Per-term collection entropy of one index's channels, computed once per index state.

    Args:
        persist: keep the tables under ``home`` for later processes (default ``True``).
        home: the cache directory (default ``$ESBRIDGE_HOME``, see
            :func:`esbridge.home.cache_dir`).
        progress: a progress bar on stderr while a table is computed.
        stale_writes: how many documents may have been written since a table was computed,
            as a share of the documents it was computed over, before it is computed again
            (default 0.01; 0: after every write).
    """

    def __init__(self, engine: EngineBase, index: str, layout: IndexLayout, *, batch_size: int = 500,
                 progress: bool = False, persist: bool = True, home: Path | None = None,
                 stale_writes: float = DEFAULT_STALE_WRITES) -> None:
        if not (isinstance(stale_writes, (int, float)) and not isinstance(stale_writes, bool)
                and 0.0 <= stale_writes <= 1.0):
            raise ConfigurationError(f"stale_writes must be a share between 0 and 1, got {stale_writes!r}")
        self.stale_writes = float(stale_writes)
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
        self._locks = PlanLock()  # one table computation at a time (threads or tasks)
        self._lock = self._locks.thread
        #: tables computed from the engine and read from disk by this object
        self.computed = 0
        self.loaded = 0

    def table(self, channel: str) -> dict[str, float]:
        """``{term: Ẽ(term)}`` for every term of ``channel`` in the combined field (of a plain
        index: in its text fields taken together, term frequencies added up per document)."""
        return run(self.table_plan(channel), sync_engine(self.engine))

    def table_plan(self, channel: str) -> Plan[dict[str, float]]:
        """:meth:`table` as a plan (:mod:`esbridge.engine.plan`): one table is obtained at a
        time, so concurrent callers compute it once."""
        table: dict[str, float] = yield Exclusive(self._locks, self._table_plan(channel))
        return table

    def _table_plan(self, channel: str) -> Plan[dict[str, float]]:
        state = (yield from identity_plan(self.index))[1]
        if state != self._state and not (self._tables and self.fresh_enough(self._state, state)):
            self._tables.clear()
            self._state = state
            self._key = None
        if channel not in self._tables:
            self._tables[channel] = yield from self._obtain_plan(channel, state)
        return self._tables[channel]

    def fresh_enough(self, computed_at: object, now: tuple[int, ...]) -> bool:
        """Whether a table computed at index state ``computed_at`` may serve the index at state
        ``now``: the same state, or at most ``stale_writes`` of its documents written since
        (never when the indexing totals went back, as on a shard's restart)."""
        if computed_at == now:
            return True
        if not (isinstance(computed_at, tuple) and len(computed_at) == 4 and len(now) == 4):
            return False
        docs, indexed, deleted = int(computed_at[0]), int(computed_at[2]), int(computed_at[3])
        if now[2] < indexed or now[3] < deleted:
            return False
        return (now[2] - indexed) + (now[3] - deleted) <= self.stale_writes * docs

    def for_terms(self, channel: str, terms: Sequence[str]) -> np.ndarray:
        table = self.table(channel)
        return np.array([table.get(t, 0.0) for t in terms], dtype=np.float64)

    # ---- persistence ------------------------------------------------------------------

    def path(self, channel: str, state: tuple[int, ...]) -> Path:
        """Where the table of ``channel`` at index state ``state`` is persisted."""
        return run(self._path_plan(channel, state), sync_engine(self.engine))

    def _path_plan(self, channel: str, state: tuple[int, ...]) -> Plan[Path]:
        if self._key is None:
            self._key = yield from index_key_plan(self.index)
        tag = "-".join(str(int(v)) for v in state)
        return (self.home or cache_dir()) / "entropy" / self._key / f"{self._stem(channel)}.v{FORMAT}.{tag}.json"

    def _stem(self, channel: str) -> str:
        subfield = self.layout.subfield(self.layout.combined, channel)
        return subfield if _SAFE_NAME.match(subfield) else hashlib.sha256(subfield.encode("utf-8")).hexdigest()[:32]

    def _obtain_plan(self, channel: str, state: tuple[int, ...]) -> Plan[dict[str, float]]:
        path = (yield from self._path_plan(channel, state)) if self.persist else None
        if path is not None:
            # this state's table, else the channel's table of an earlier state still fresh enough
            candidates = [path, *sorted(set(path.parent.glob(f"{self._stem(channel)}.v{FORMAT}.*.json")) - {path})]
            for candidate in candidates:
                loaded: dict[str, float] | None = yield Offload(
                    partial(_load, candidate, self._key, lambda at: self.fresh_enough(at, state)))
                if loaded is not None:
                    self.loaded += 1
                    return loaded
        table = yield from self._compute_plan(channel)
        self.computed += 1
        if path is not None and (yield from identity_plan(self.index))[1] == state:
            yield Offload(partial(_save, path, table, {"index": self.index, "uuid": self._key, "channel": channel,
                                                       "state": list(state)}, stale=f"{self._stem(channel)}.v*.json"))
        return table

    def _compute_plan(self, channel: str) -> Plan[dict[str, float]]:
        from tqdm import tqdm

        # the combined field's sub-field, or for a plain index every text field (added up per document)
        key = self.layout.subfield(self.layout.combined, channel)
        hist: dict[str, np.ndarray] = {}
        ids = yield from _all_ids_plan(self.index)
        routing = ShardRouting(self.engine, self.index)
        bar = tqdm(total=len(ids), desc=f"collection entropy of {self.index}/{channel}", unit="doc",
                   disable=not self.progress, file=sys.stderr)
        for start in range(0, len(ids), self.batch_size):
            chunk = ids[start:start + self.batch_size]
            # the candidates' path: stored term vectors, or the text analysed again where there are none
            got = yield from fetch_raw_plan(self.index, self.layout, {channel: QueryChannel((), ())}, chunk,
                                            fields=[self.layout.combined], routing=routing, stats_query={},
                                            batch_size=len(chunk))
            for vectors in got.candidates.vectors:
                for term, tf in (vectors.get(key) or {}).items():
                    row = hist.get(term)
                    if row is None:
                        row = hist[term] = np.zeros(MAX_TF_BIN, dtype=np.float64)
                    row[min(tf, MAX_TF_BIN) - 1] += 1
            bar.update(len(chunk))
        bar.close()
        if not hist:
            return {}
        terms = list(hist)
        values = yield Offload(lambda: collection_entropy_from_histogram(np.stack([hist[t] for t in terms])))
        return dict(zip(terms, (float(v) for v in values)))


def _load(path: Path, key: str | None, accept: Callable[[tuple[int, ...]], bool]) -> dict[str, float] | None:
    """The persisted table at ``path`` if its index state is one ``accept`` takes, or ``None``
    if there is none, it is unreadable or of another state."""
    try:
        with open(path, encoding="utf-8") as f:
            doc: Any = json.load(f)
    except (OSError, ValueError):
        return None
    if not (isinstance(doc, dict) and doc.get("format") == FORMAT and doc.get("uuid") == key
            and isinstance(doc.get("state"), list) and isinstance(doc.get("entropy"), dict)):
        return None
    try:
        at = tuple(int(v) for v in doc["state"])
    except (TypeError, ValueError):
        return None
    if not accept(at):
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
