"""Fill the on-disk feature store with every document of an index (``esbridge features build``).

One scroll page at a time (bounded memory): the page's ids with their ``_seq_no`` and
``_primary_term``, the documents of the page the store does not already hold at that version
(so an interrupted build resumes where it stopped, and a second build fetches only what
changed), their term vectors from ``_mtermvectors``, written to the store in one transaction
per page.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

from esbridge.engine.client import Engine
from esbridge.errors import ConfigurationError
from esbridge.features.diskstore import DiskVectorStore, StoreSize
from esbridge.features.termvectors import EMPTY_VECTOR, ShardRouting, fetch_raw
from esbridge.index.definitions import IndexLayout
from esbridge.index.facts import index_identity
from esbridge.index.plain import open_layout


@dataclass(frozen=True)
class BuildReport:
    """What :func:`build_store` did."""

    index: str
    identity: str
    documents: int
    fetched: int
    already: int
    gone: int
    seconds: float
    size: StoreSize

    def summary(self) -> str:
        return (f"feature store of {self.index!r}: {self.documents} documents read, {self.fetched} fetched, "
                f"{self.already} already stored at their current version"
                + (f", {self.gone} gone before their vectors were read" if self.gone else "")
                + f" in {self.seconds:.1f} s; the store holds {self.size.documents} documents, "
                f"{self.size.terms} terms, {self.size.bytes / 1e6:.1f} MB")


def store_channels(layout: IndexLayout, fields: Sequence[str] | None = None) -> dict[str, tuple[str, ...]]:
    """``{field: channels}`` a build reads: the combined field in every channel, each text field
    in its own (:attr:`IndexLayout.field_channels`)."""
    chosen = tuple(fields) if fields else (layout.combined, *layout.fields)
    unknown = [f for f in chosen if f != layout.combined and f not in layout.fields]
    if unknown:
        raise ConfigurationError(f"--fields names {', '.join(map(repr, unknown))}, not a text field of the index "
                                 f"({', '.join([layout.combined, *layout.fields])})")
    return {f: tuple(layout.channels if f == layout.combined else layout.field_channels) for f in chosen}


def build_store(engine: Engine, index: str, store: DiskVectorStore | None = None, *,
                fields: Sequence[str] | None = None, page: int = 500, progress: bool = False) -> BuildReport:
    """Read the term vectors of every document of ``index`` into the feature store.

    Args:
        store: the store (default: :class:`DiskVectorStore` in esbridge's cache folder).
        fields: the fields to store (default: the combined field and every text field).
        page: documents per scroll page and per ``_mtermvectors`` request.
    """
    from tqdm import tqdm

    if page < 1:
        raise ConfigurationError(f"page must be >= 1, got {page}")
    store = store or DiskVectorStore()
    started = time.monotonic()
    layout = open_layout(engine, index)
    identity = index_identity(engine, index)[0]
    part = store.part(identity)
    routing = ShardRouting(engine, index)
    channels = store_channels(layout, fields)
    subfields = [layout.subfield(f, ch) for f, chs in channels.items() for ch in chs]
    total = engine.count(index)
    read = fetched = already = gone = 0
    bar = tqdm(total=total, desc=f"feature store {index}", unit="doc", disable=not progress, file=sys.stderr)
    buffer: list[tuple[str, int, int]] = []

    def flush() -> None:
        nonlocal fetched, already, gone
        todo = [key for key, held in zip(buffer, part.holds(buffer, subfields), strict=True) if not held]
        already += len(buffer) - len(todo)
        if todo:
            got = fetch_raw(engine, index, layout, {}, [d for d, _, _ in todo], fields=list(channels),
                            routing=routing, batch_size=page, stats_query={}, field_channels=channels)
            entries = [(key, {sf: vec.get(sf, EMPTY_VECTOR) for sf in subfields})
                       for key, vec, ok in zip(todo, got.candidates.vectors, got.candidates.found, strict=True) if ok]
            part.put_many(entries)
            fetched += len(entries)
            gone += len(todo) - len(entries)
        bar.update(len(buffer))
        buffer.clear()

    try:
        for hit in engine.scroll(index, {"_source": False, "seq_no_primary_term": True,
                                         "query": {"match_all": {}}}, page=page,
                                 context=f"listing the documents of {index!r} for the feature store"):
            buffer.append((hit["_id"], int(hit["_seq_no"]), int(hit["_primary_term"])))
            read += 1
            if len(buffer) >= page:
                flush()
        if buffer:
            flush()
    finally:
        bar.close()
    return BuildReport(index=index, identity=identity, documents=read, fetched=fetched, already=already,
                       gone=gone, seconds=time.monotonic() - started, size=part.size())
