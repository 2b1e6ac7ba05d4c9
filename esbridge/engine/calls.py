"""The requests esbridge sends and what their answers mean, whichever client sends them.

Index names checked and quoted for request paths (:func:`check_index_name`,
:func:`path_segment`), query strings and the shard-copy ``preference`` (:func:`request_target`),
the plans of common reads (``_analyze``, ``_search``, a scroll, identifying the server), answers
some of whose shards failed (:func:`usable_answer`) and the typed error of an engine's error
answer (:func:`engine_error`).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from http import HTTPStatus
from typing import Any
from urllib.parse import urlencode

from esbridge.engine.connection import EngineInfo, parse_info, parse_nodes_info
from esbridge.engine.plan import Call, Plan
from esbridge.errors import ConfigurationError, EngineError, EngineUnavailableError, IndexNotFoundError

log = logging.getLogger(__name__)

_FORBIDDEN_IN_NAME = set('\\/*?"<>| ,#:')


def check_index_name(index: str, *, what: str = "index name") -> str:
    """``index`` if it names one index the engine would accept; a clear error otherwise.

    Used wherever esbridge writes or deletes, so a name can never reach another index
    through a pattern (``logs*``), a list (``a,b``), ``_all`` or characters that change the
    request's path (``a/_doc/x?``).  The rules are the engines' own: lowercase, at most 255
    bytes, none of ``\\ / * ? " < > | , # :`` or spaces, not starting with ``-``, ``_`` or
    ``+``, not ``.`` or ``..``.

    Raises:
        ConfigurationError: naming the index and the rule it breaks.
    """
    if not isinstance(index, str) or not index:
        raise ConfigurationError(f"{what} must be a non-empty string, got {index!r}")
    bad = sorted({c for c in index if c in _FORBIDDEN_IN_NAME or ord(c) < 32})
    problem = None
    if bad:
        problem = "it contains " + " ".join(repr(c) for c in bad)
    elif index in (".", ".."):
        problem = "'.' and '..' are not index names"
    elif index[0] in "-_+":
        problem = f"it starts with {index[0]!r}"
    elif index != index.lower():
        problem = "it has upper-case letters"
    elif len(index.encode("utf-8")) > 255:
        problem = "it is longer than 255 bytes"
    if problem:
        raise ConfigurationError(
            f"{what} {index!r} is not a single index name ({problem}); the engine's index names are "
            "lower-case and contain none of \\ / * ? \" < > | , # : or spaces"
        )
    return index


def path_segment(index: str, *, patterns: bool = False) -> str:
    """``index`` quoted for a request path.

    ``patterns=True`` keeps ``*`` and ``,`` (reads may target several indices, as the
    engines allow); otherwise ``index`` must be one index (:func:`check_index_name`).
    Every other character that would change the path (``/``, ``?``, ``#``) is escaped.
    """
    from urllib.parse import quote

    if not isinstance(index, str) or not index:
        raise ConfigurationError(f"index name must be a non-empty string, got {index!r}")
    if not patterns:
        check_index_name(index)
    return quote(index, safe=",*" if patterns else "")


def ndjson_lines(items: Sequence[Mapping[str, Any]]) -> str:
    """NDJSON text for bulk/msearch bodies (one compact JSON object a line)."""
    return "".join(json.dumps(item, ensure_ascii=False, separators=(",", ":")) + "\n" for item in items)


def _param(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


#: Headers every request sent in the current context carries (:func:`forwarded_headers`).
_forwarded: ContextVar[Mapping[str, str] | None] = ContextVar("esbridge_forwarded_headers", default=None)


@contextmanager
def forwarded_headers(headers: Mapping[str, str]) -> Iterator[None]:
    """Within the block (and the tasks, worker threads and plans it starts), every request an
    :class:`~esbridge.engine.client.Engine` or :class:`~esbridge.engine.async_client.AsyncEngine`
    sends carries ``headers`` over the engine's own (e.g. the ``Authorization`` of the request a
    server is answering, so that the cluster authorises each caller as itself).  Nothing keeps them
    after the block."""
    token = _forwarded.set(dict(headers))
    try:
        yield
    finally:
        _forwarded.reset(token)


#: Query-string parameters of the first stages searched in the current context (:func:`first_stage_params`).
_first_stage: ContextVar[Mapping[str, str] | None] = ContextVar("esbridge_first_stage_params", default=None)


@contextmanager
def first_stage_params(params: Mapping[str, str]) -> Iterator[None]:
    """Within the block (and the tasks, worker threads and plans it starts), the ``_search`` that
    finds a query's candidates (a reranker's first stage) carries ``params`` in its query string
    too, where it does not set them itself: the ``preference``, ``request_cache`` or ``timeout`` of
    the search a server is answering.  The reranker's other requests (statistics, features,
    sources) do not; nothing keeps them after the block."""
    token = _first_stage.set(dict(params))
    try:
        yield
    finally:
        _first_stage.reset(token)


def current_first_stage_params() -> dict[str, str]:
    """The parameters :func:`first_stage_params` gives the first stages of the current context."""
    return dict(_first_stage.get() or {})


def request_target(path: str, params: Mapping[str, Any] | None, ndjson: bool,
                   preference: str | None = None) -> tuple[str, dict[str, str]]:
    """The path with ``params`` in its query string, and the headers of a request (with those of
    :func:`forwarded_headers`); a read whose answer depends on the shard copy serving it carries
    ``preference`` unless it names one."""
    headers = {"content-type": "application/x-ndjson"} if ndjson else {}
    headers.update(_forwarded.get() or {})
    if preference is not None and _endpoint(path) in _COPY_READS and "preference" not in (params or {}):
        params = {**(params or {}), "preference": preference}
    if params:
        # In the URL ourselves: the clients treat some names (``timeout``) as their own.
        query = urlencode({k: _param(v) for k, v in params.items() if v is not None})
        path = f"{path}{'&' if '?' in path else '?'}{query}"
    return path, headers


#: Endpoints whose answer depends on which copy of a shard serves it; they are sent with
#: :attr:`~esbridge.engine.connection.ConnectionOptions.preference`.
_COPY_READS = frozenset({"_search", "_count", "_mtermvectors", "_termvectors", "_mget", "_explain"})


#: Endpoints whose answers report shard failures under ``_shards`` (``scroll``: a scroll's next page).
_SHARDED_ANSWERS = frozenset({"_search", "_count", "_msearch", "scroll"})


def _endpoint(path: str) -> str | None:
    """The API a request path calls: its first segment starting with ``_`` (``"scroll"`` for
    a scroll's next page, ``/_search/scroll``); index names never start with ``_``."""
    segments = [s for s in path.split("?", 1)[0].split("/") if s]
    for i, seg in enumerate(segments):
        if seg.startswith("_"):
            return "scroll" if seg == "_search" and segments[i + 1:i + 2] == ["scroll"] else seg
    return None


def _shard_failures(endpoint: str | None, answer: Any) -> str | None:
    """For a search, count or multi-search answer some of whose shards failed: a one-line
    account of it (the answer lacks those shards' documents, so it must not be used)."""
    if endpoint not in _SHARDED_ANSWERS or not isinstance(answer, Mapping):
        return None
    parts = answer.get("responses") if endpoint == "_msearch" else [answer]
    for part in parts if isinstance(parts, list) else []:
        shards = part.get("_shards") if isinstance(part, Mapping) else None
        if not isinstance(shards, Mapping) or not shards.get("failed"):
            continue
        why = ""
        failures = shards.get("failures") or []
        if failures and isinstance(failures[0], Mapping):
            reason = failures[0].get("reason") or {}
            if isinstance(reason, Mapping):
                why = f"{reason.get('type', 'error')}: {reason.get('reason', '')}"
            else:
                why = str(reason)
            where = [str(failures[0][k]) for k in ("index", "shard") if failures[0].get(k) is not None]
            if where:
                why = f"shard {'/'.join(where)}: {why}"
        why = " ".join(why.split())[:300]
        return (f"{shards.get('failed')} of {shards.get('total')} shards failed"
                f"{f' ({why})' if why else ''}, so the answer lacks their documents and was not used; "
                "retry when every shard has an active copy (GET _cluster/health)")
    return None


def usable_answer(path: str, answer: Any, *, final: bool, context: str) -> bool:
    """Whether ``answer`` to the request sent to ``path`` may be used: ``False`` when some of its
    shards failed and the request is worth sending again; raises :class:`~esbridge.errors.EngineError`
    (``error_type`` ``"shard_failure"``, status 503) when they failed and ``final`` is set, or
    the request is a scroll's next page (which cannot be repeated)."""
    endpoint = _endpoint(path)
    failed = _shard_failures(endpoint, answer)
    if failed is None:
        return True
    if final or endpoint == "scroll" or "scroll=" in path:
        where = f"{context}: " if context else ""
        raise EngineError(f"{where}{failed}", status=503, error_type="shard_failure", reason=failed, body=answer)
    return False


def raise_mget_errors(resp: Mapping[str, Any], index: str, doing: str) -> None:
    """An ``_mget`` answer with a per-document failure raises :class:`~esbridge.errors.EngineError`: a document
    the engine failed to read is never treated as a missing one."""
    for d in resp.get("docs", []):
        err = d.get("error")
        if err:
            reason = f"{err.get('type', 'error')}: {err.get('reason', '')}" if isinstance(err, Mapping) else str(err)
            raise EngineError(f"{doing} from {index!r}: the engine failed on document {d.get('_id')!r} "
                              f"({reason[:300]})")


def _status_text(status: int | None) -> str:
    """``400 Bad Request`` (``no status`` without one)."""
    if status is None:
        return "no status"
    try:
        return f"{status} {HTTPStatus(status).phrase}"
    except ValueError:
        return str(status)


def engine_error(status: int | None, body: Any, *, context: str = "") -> EngineError:
    """Build the typed error for an engine error body (``{"error": {...}, "status": ...}``)."""
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if isinstance(body, str):
        try:
            body = json.loads(body) if body.strip() else None
        except (ValueError, RecursionError):
            body = {"error": {"type": "http_error", "reason": body[:500]}}
    err = body.get("error") if isinstance(body, Mapping) else None
    if isinstance(err, str):
        err = {"type": "error", "reason": err}
    err = err or {}
    root = list(err.get("root_cause") or [])
    caused = err.get("caused_by") or {}
    error_type = err.get("type") or (root[0].get("type") if root else None)
    reason = err.get("reason") or (root[0].get("reason") if root else None)
    if not reason and body and not (isinstance(body, Mapping) and "error" in body):
        reason = str(body)[:500]  # an answer not shaped as an error, e.g. {"found": false}
    reason = reason or None
    script_stack = list(err.get("script_stack") or caused.get("script_stack") or [])
    for rc in root:
        script_stack = script_stack or list(rc.get("script_stack") or [])
    index = err.get("index") or (root[0].get("index") if root else None)
    if reason is None:
        # e.g. the answer to a HEAD request, which has no body
        detail = f"{error_type or 'error'} (HTTP {_status_text(status)}; the engine gave no reason)"
    else:
        detail = f"{error_type}: {reason}" if error_type else str(reason)
    if caused and caused.get("reason") and caused.get("reason") != reason:
        detail += f" (caused by {caused.get('type')}: {caused.get('reason')})"
    if status == 401:
        detail += ("; the engine did not accept the credentials: check --username and ESBRIDGE_PASSWORD, "
                   "or --api-key / ESBRIDGE_API_KEY (id:key or its base64 form)")
    elif status == 403 and error_type == "security_exception":
        detail += "; the user or API key lacks the privilege this needs"
    message = " ".join((f"{context}: {detail}" if context else detail).split())  # one line, as the engine's may not be
    cls = IndexNotFoundError if error_type == "index_not_found_exception" else EngineError
    return cls(
        message,
        status=status,
        error_type=error_type,
        reason=reason,
        root_cause=root,
        index=index,
        script_stack=script_stack,
        body=body,
    )


def analyze_plan(index: str, text: str, *, field: str | None = None,
                 analyzer: str | None = None) -> Plan[list[str]]:
    """Tokens of ``text`` as the index's analyzer for ``field`` (or ``analyzer``) emits them."""
    body: dict[str, Any] = {"text": text}
    if field is not None:
        body["field"] = field
    if analyzer is not None:
        body["analyzer"] = analyzer
    resp = yield Call("POST", f"/{path_segment(index, patterns=True)}/_analyze", body=body,
                      context=f"analysing text with {field or analyzer!r} of {index!r}")
    return [str(tok["token"]) for tok in resp.get("tokens", [])]


def search_plan(index: str, body: Mapping[str, Any], *,
                params: Mapping[str, Any] | None = None) -> Plan[dict[str, Any]]:
    """A ``_search`` of ``index`` with ``body``."""
    resp: dict[str, Any] = yield Call("POST", f"/{path_segment(index, patterns=True)}/_search", body=dict(body),
                                      params=params, context=f"searching {index!r}")
    return resp


def ids_from_values(hits: Sequence[dict[str, Any]], id_values: str) -> bool:
    """Give each hit its ``_id`` from its doc values ``fields[id_values]`` (taken out of ``fields``,
    which goes when nothing else is in it); ``False``, leaving the rest as they are, at the first hit
    without one."""
    for hit in hits:
        fields = hit.get("fields")
        got = fields.pop(id_values, None) if isinstance(fields, dict) else None
        if not got:
            return False
        hit["_id"] = str(got[0])
        if not fields:
            del hit["fields"]
    return True


#: Seconds the searches of an index read their hits' ids from the stored fields after one of its hits
#: lacked its id value (:func:`ids_search_plan`), before the doc values are tried again.
IDS_RETRY_SECONDS = 60.0
#: index (as named in the search) → when one of its hits last lacked its id value (time.monotonic)
_IDS_MISSED: dict[str, float] = {}


def msearch_answers(index: str, resp: Any, sent: int) -> list[dict[str, Any]]:
    """The answers of an ``_msearch`` of ``sent`` searches of ``index``.

    Raises:
        EngineError: another number of answers, or an answer that is an error.
    """
    answers = resp.get("responses") if isinstance(resp, Mapping) else None
    if not isinstance(answers, list) or len(answers) != sent:
        raise EngineError(f"_msearch on {index!r} answered {len(answers or [])} responses for the "
                          f"{sent} searches sent", index=index)
    for answer in answers:
        if "error" in answer:
            raise engine_error(answer.get("status"), answer, context=f"searching {index!r}")
    return answers


def ids_search_plan(index: str, body: Mapping[str, Any], id_values: str | None, *,
                    params: Mapping[str, Any] | None = None) -> Plan[dict[str, Any]]:
    """A ``_search`` of ``index`` whose hits need no ``_source``: where the index keeps its ids in the
    doc values of ``id_values`` (:attr:`~esbridge.index.definitions.IndexLayout.id_values`), the
    engine reads no stored field (each hit's ``_id`` would cost it the decompression of a block of
    them) and the hits get their ``_id`` from those values.  Should a hit lack one (a document
    written by another client), the search is sent again as given, and so are the searches of that
    index for the next :data:`IDS_RETRY_SECONDS`."""
    lean = ids_body(index, body, id_values)
    if lean is not None:
        resp = yield from search_plan(index, lean, params=params)
        if ids_taken(index, [resp], id_values):
            return resp
    return (yield from search_plan(index, body, params=params))


def ids_body(index: str, body: Mapping[str, Any], id_values: str | None) -> dict[str, Any] | None:
    """``body`` asking for no stored field and for the doc values of ``id_values`` instead, where that
    serves (:func:`ids_search_plan`); ``None`` where it does not."""
    missed = _IDS_MISSED.get(index)
    if not id_values or body.get("_source") is not False or "stored_fields" in body or (
            missed is not None and time.monotonic() - missed <= IDS_RETRY_SECONDS):
        return None
    return {**body, "stored_fields": "_none_", "docvalue_fields": [*body.get("docvalue_fields", ()), id_values]}


def ids_taken(index: str, responses: Sequence[Mapping[str, Any]], id_values: str | None) -> bool:
    """Whether every hit of the answers to :func:`ids_body`'s searches got its ``_id`` from
    ``id_values`` (:func:`ids_from_values`); where one did not, the index's searches read stored fields
    for a while."""
    if id_values and all(ids_from_values(r["hits"]["hits"], id_values) for r in responses):
        _IDS_MISSED.pop(index, None)
        return True
    if index not in _IDS_MISSED:
        log.info("some documents of %r have no id value (written by another client than esbridge): its "
                 "searches read their hits' ids from the stored fields for a while", index)
    if len(_IDS_MISSED) >= 10_000:  # a cache of where not to try: it may forget
        _IDS_MISSED.clear()
    _IDS_MISSED[index] = time.monotonic()
    return False


def identify_plan(where: str, *, es7_client: bool = False) -> Plan[EngineInfo]:
    """Identify the server: ``GET /``, or ``GET /_nodes/_local`` where the root endpoint is not
    served (Elasticsearch's minimal distribution answers 405).  ``es7_client``: the requests go
    through a caller's elasticsearch7 client, whose product check needs ``GET /``."""
    try:
        return parse_info((yield Call("GET", "/", context=where)))
    except EngineError as err:
        if err.status not in (400, 404, 405) or isinstance(err, EngineUnavailableError):
            raise
        try:
            return parse_nodes_info((yield Call(
                "GET", "/_nodes/_local", params={"filter_path": "cluster_name,nodes.*.version,nodes.*.build_flavor"},
                context=where)))
        except EngineError as again:
            if es7_client and again.status == err.status:
                # the 7.x client checks the product with GET / before every first request
                raise ConfigurationError(
                    "the given elasticsearch7 client cannot talk to this server: its product check "
                    "reads GET /, which this server does not serve; pass the URL instead and esbridge "
                    "builds a client that talks to it, or pass an elasticsearch.Elasticsearch client"
                ) from again
            raise


def scroll_call(index: str, body: Mapping[str, Any], *, page: int, context: str) -> Call:
    """The first request of a scroll over ``body``'s hits of ``index``, in index order."""
    first = {**dict(body), "size": page, "sort": ["_doc"]}
    return Call("POST", f"/{path_segment(index, patterns=True)}/_search", params={"scroll": "2m"}, body=first,
                context=context)


def scroll_next_call(scroll_id: Any, *, context: str) -> Call:
    """The next page of a scroll."""
    return Call("POST", "/_search/scroll", body={"scroll": "2m", "scroll_id": scroll_id}, context=context)


def scroll_clear_call(scroll_id: Any) -> Call:
    """Clear a scroll."""
    return Call("DELETE", "/_search/scroll", body={"scroll_id": [scroll_id]}, context="clearing a scroll")


def scroll_plan(index: str, body: Mapping[str, Any], *, page: int = 2000,
                context: str = "") -> Plan[list[dict[str, Any]]]:
    """Every hit of ``body``'s query over ``index``, in index order (:meth:`~esbridge.engine.client.Engine.scroll`
    collected, as a plan); the scroll is cleared at the end."""
    what = context or f"reading the documents of {index!r}"
    resp = yield scroll_call(index, body, page=page, context=what)
    scroll_id = resp.get("_scroll_id")
    hits: list[dict[str, Any]] = []
    try:
        while resp["hits"]["hits"]:
            hits += resp["hits"]["hits"]
            resp = yield scroll_next_call(scroll_id, context=what)
            scroll_id = resp.get("_scroll_id", scroll_id)
    finally:
        if scroll_id:
            yield scroll_clear_call(scroll_id)
    return hits
