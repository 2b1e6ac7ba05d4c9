"""Collection entropy of terms, for BMX.

BMX weighs each query term by ``Ẽ(t) = -sum_j p_j ln p_j`` over the documents
containing ``t``, with ``p_j = sigmoid(tf(t, d_j))``.  That needs the whole
collection's term frequencies, which no engine API returns per term; esbridge
reads every document's term vectors of a channel once (``_mtermvectors`` over
all ids, in batches, with a progress bar), keeps a per-term histogram of term
frequencies, and caches it for the index state it was read at.  On a large
index this is a one-off cost proportional to the index size.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence

import numpy as np

from esbridge.engine.client import Engine
from esbridge.features.cache import index_state
from esbridge.index.definitions import IndexLayout
from esbridge.scoring.bmx import collection_entropy_from_histogram

#: Term frequencies above this share the last histogram bin; -σ(k) ln σ(k) < 1e-16 there,
#: so the entropy is exact to float precision.
MAX_TF_BIN = 40


def _all_ids(engine: Engine, index: str, page: int = 5000) -> Iterator[str]:
    for h in engine.scroll(index, {"_source": False}, page=page,
                           context=f"listing the documents of {index!r}"):
        yield str(h["_id"])


class CollectionEntropy:
    """Per-term collection entropy of one index's channels, computed once per index state."""

    def __init__(self, engine: Engine, index: str, layout: IndexLayout, *, batch_size: int = 500,
                 progress: bool = True) -> None:
        self.engine = engine
        self.index = index
        self.layout = layout
        self.batch_size = batch_size
        self.progress = progress
        self._tables: dict[str, dict[str, float]] = {}
        self._state: object = None

    def table(self, channel: str) -> dict[str, float]:
        """``{term: Ẽ(term)}`` for every term of ``channel`` in the combined field."""
        state = index_state(self.engine, self.index)
        if state != self._state:
            self._tables.clear()
            self._state = state
        if channel not in self._tables:
            self._tables[channel] = self._compute(channel)
        return self._tables[channel]

    def for_terms(self, channel: str, terms: Sequence[str]) -> np.ndarray:
        table = self.table(channel)
        return np.array([table.get(t, 0.0) for t in terms], dtype=np.float64)

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
