"""The reranked hits' ``_source``: what a search asks of it, and fetching it for the top hits.

A first stage of a small window brings each hit's ``_source`` with it; a large one brings none,
and the top hits' sources are fetched afterwards in one ``_mget``.  Either way esbridge's own
vector field (:data:`~esbridge.index.definitions.VECTOR_FIELD`), which nobody asked for, is left
out of what a caller sees.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from esbridge.engine.calls import path_segment, raise_mget_errors
from esbridge.engine.plan import Call, Plan
from esbridge.index.definitions import VECTOR_FIELD
from esbridge.rerank.candidates import dropped_hit

__all__ = ["Sources"]


class Sources:
    """The sources of one index's hits; remembers whether the index has esbridge's vector field."""

    def __init__(self, index: str) -> None:
        self.index = index
        #: a hit's _source has carried esbridge's vector field: ask the engine to leave it out
        self.vector_in_source = False

    def search_filter(self, fields: Sequence[str] | None) -> Any:
        """What a search asks of ``_source``: the fields a caller named, else all of it — but
        esbridge's own vector field (384 numbers nobody asked for) once a hit has shown the
        index has one.  Filtering costs the engine a parse of every hit's source (about 0.45 ms
        of a 4 ms window-100 query), so it is asked for only where there is a vector to drop."""
        if fields:
            return list(fields)
        return {"excludes": [VECTOR_FIELD]} if self.vector_in_source else True

    def drop_vectors(self, hits: Sequence[Mapping[str, Any]]) -> None:
        """Remove esbridge's vector field from the hits' ``_source`` (a search sent before the
        index was known to have one brought it), and filter it out in the engine from now on."""
        for h in hits:
            source = h.get("_source")
            if isinstance(source, dict) and VECTOR_FIELD in source:
                del source[VECTOR_FIELD]
                self.vector_in_source = True

    def attach_plan(self, hits: list[dict[str, Any]],
                    fields: Sequence[str] | None) -> Plan[tuple[list[dict[str, Any]], list[dict[str, Any]]]]:
        """``hits`` with their ``_source`` (:meth:`fetch_plan`), less those the engine no longer
        holds; and those, as :func:`~esbridge.rerank.candidates.dropped_hit` reports them."""
        missing = yield from self.fetch_plan(hits, fields)
        gone = set(missing)
        return ([h for h in hits if str(h["_id"]) not in gone],
                [dropped_hit(h, "deleted") for h in hits if str(h["_id"]) in gone])

    def fetch_plan(self, hits: list[dict[str, Any]], fields: Sequence[str] | None) -> Plan[list[str]]:
        """Put each hit's ``_source`` in it (only ``fields`` where given); the ids of those the
        engine no longer holds."""
        if not hits:
            return []
        body: dict[str, Any] = {"ids": [h["_id"] for h in hits]}
        params = {"_source_includes": ",".join(fields)} if fields else (
            {"_source_excludes": VECTOR_FIELD} if self.vector_in_source else None)
        resp = yield Call("POST", f"/{path_segment(self.index, patterns=True)}/_mget", body=body, params=params,
                          context=f"fetching sources from {self.index!r}")
        raise_mget_errors(resp, self.index, "fetching sources")
        by_id = {d["_id"]: d.get("_source") for d in resp["docs"] if d.get("found")}
        for h in hits:
            if h["_id"] in by_id:
                h["_source"] = by_id[h["_id"]]
        if not fields:
            self.drop_vectors(hits)
        return [str(h["_id"]) for h in hits if h["_id"] not in by_id]
