"""What ``esbridge serve --read-only`` lets through (:func:`is_read`): ``GET`` and ``HEAD`` (but
the index maintenance the engines also take as ``GET``: ``_refresh``, ``_flush``), and the reads
that clients send as ``POST`` (their body is a query, not data) or, to release what a read holds,
as ``DELETE``.  The rest (writes, deletions, index and cluster administration) is answered 403
without reaching the cluster."""

from __future__ import annotations

from urllib.parse import unquote

__all__ = ["is_read", "POST_READS", "DELETE_READS", "GET_MAINTENANCE"]

#: APIs the engines take as ``GET`` too that are not reads (index maintenance).
GET_MAINTENANCE = frozenset({"_refresh", "_flush"})
#: APIs whose ``POST`` reads, whatever follows them in the path (``/<index>/_explain/<id>``, ...).
POST_READS = frozenset({"_count", "_mget", "_field_caps", "_explain", "_termvectors", "_mtermvectors",
                        "_analyze", "_pit"})
#: What may follow ``_search`` / ``_msearch`` in a ``POST`` that reads: nothing (a search), a
#: scroll's next page, a point in time (OpenSearch's ``_search/point_in_time``), a template.  Not
#: ``_search/pipeline`` (OpenSearch's search pipelines, which are written there).
_SEARCH_READS = ("scroll", "point_in_time", "template")
#: ``DELETE`` requests that release what a read holds: a scroll, a point in time (OpenSearch's,
#: Elasticsearch's), with whatever follows in the path.
DELETE_READS = ("_search/scroll", "_search/point_in_time", "_pit")


def _api(path: str) -> tuple[str, list[str]]:
    """The API a request path calls (its first segment starting with ``_``, the ``_all`` indices
    apart) and the segments after it; ``("", [])`` for a path without one (an index, a document
    of an index of types)."""
    segments = [unquote(s) for s in path.split("?", 1)[0].split("/") if s]
    for i, segment in enumerate(segments):
        if segment.startswith("_") and not (i == 0 and segment == "_all"):
            return segment, segments[i + 1:]
    return "", []


def is_read(method: str, path: str) -> bool:
    """Whether a request of ``method`` to ``path`` only reads (:mod:`esbridge.serve.readonly`)."""
    method = method.upper()
    api, rest = _api(path)
    if method in ("GET", "HEAD"):
        return api not in GET_MAINTENANCE
    if method == "DELETE":
        called = [api, *rest]
        return any(called[:len(read.split("/"))] == read.split("/") for read in DELETE_READS)
    if method != "POST":
        return False
    if api == "_search":
        return not rest or rest[0] in _SEARCH_READS
    if api == "_msearch":
        return rest in ([], ["template"])
    if api == "_validate":
        return rest == ["query"]
    if api == "_render":
        return rest[:1] == ["template"]
    return api in POST_READS
