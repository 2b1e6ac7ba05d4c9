"""What a search of a reranked index asks, and esbridge's answers in the engine's shape.

A search may override its index's configuration with ``"ext": {"esbridge": {...}}`` in its body
(:data:`EXT_KEYS`), which the cluster never sees.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from esbridge.errors import ConfigurationError, EngineError, EngineUnavailableError, EsbridgeError
from esbridge.serve.config import MODES, IndexConfig, _pipeline_params

__all__ = ["SearchRequest", "Unreranked", "error_body", "query_text", "scoring_text", "fixed_order", "read_search",
           "engine_shaped", "EXT_KEYS", "SEARCH_PARAMS", "MSEARCH_PARAMS", "MSEARCH_SEARCH_PARAMS",
           "FIRST_STAGE_PARAMS", "RESPONSE_PARAMS", "REASONS"]

#: The keys of ``ext.esbridge`` in a search body.
EXT_KEYS = ("rerank", "explain", "window", "scorer", "mode", "query", "pipeline")
#: Body keys a search of a ``search``-mode index may have (the rest needs the engine's own query).
SEARCH_BODY_KEYS = ("query", "size", "from", "_source", "ext")
#: Query-string parameters that shape esbridge's answer, not its hits: applied to the answer
#: (``filter_path``, ``pretty``; :mod:`esbridge.serve.shape`) or changing nothing in it (``human``,
#: ``error_trace``), never sent with esbridge's own requests.
RESPONSE_PARAMS = ("filter_path", "pretty", "human", "error_trace")
#: Query-string parameters that go with the search finding a ``search``-mode search's candidates
#: (its first stage), as the engine takes them with a search.
FIRST_STAGE_PARAMS = ("preference", "request_cache", "timeout")
#: Query-string parameters a search of a ``search``-mode index may have (``typed_keys`` renames
#: aggregations and suggestions, which such a search has none of).
SEARCH_PARAMS = ("size", "from", "q", "typed_keys", *FIRST_STAGE_PARAMS, *RESPONSE_PARAMS)
#: The parameters of an ``_msearch`` that the engine applies to each of its searches: they go with
#: each search to the engine, reranked or not.
MSEARCH_SEARCH_PARAMS = ("typed_keys", "rest_total_hits_as_int", "search_type", "max_concurrent_shard_requests",
                         "pre_filter_shard_size", "ccs_minimize_roundtrips")
#: Query-string parameters an ``_msearch`` of a reranked index may have: the engine's own (those of
#: each search, and ``max_concurrent_searches``, the searches run at once) and the answer's form.
MSEARCH_PARAMS = (*MSEARCH_SEARCH_PARAMS, "max_concurrent_searches", *RESPONSE_PARAMS)
#: Query clauses whose ``query`` is a text: the text reranked in ``search`` mode.
TEXT_QUERIES = ("match", "multi_match", "query_string", "simple_query_string")
#: Query clauses whose text scores, read for the text esbridge scores by (:func:`scoring_text`):
#: by field (``{"match": {"title": ...}}``) or with a ``query`` key.
FIELD_TEXT_QUERIES = ("match", "match_phrase", "match_phrase_prefix", "match_bool_prefix")
KEY_TEXT_QUERIES = ("multi_match", "query_string", "simple_query_string", "combined_fields")
#: Compound queries, and the keys of their clauses that score (a ``filter`` or ``must_not`` does not).
SCORING_CLAUSES = {"bool": ("must", "should"), "dis_max": ("queries",), "function_score": ("query",),
                   "script_score": ("query",), "boosting": ("positive",), "nested": ("query",)}
#: Why a search of a reranked index is answered by the engine unreranked (the
#: ``X-Esbridge-Reason`` header of the answer, the ``reason`` label of its metric).
REASONS = {
    "sort": "the search sorts by something other than _score",
    "search_after": "the search pages with search_after",
    "scroll": "the search is scrolled",
    "collapse": "the search collapses its hits",
    "rescore": "the search rescores its hits itself",
    "pit": "the search is of a point in time",
    "no_query_text": "the query has no text to score (no match, multi_match, query_string or simple_query_string "
                     "clause that scores)",
    "target_not_configured": "not every index the search names is one esbridge reranks",
    "bad_size_or_from": "size or from is not a whole number >= 0 (the engine's answer is its error)",
    "index_not_rerankable": "esbridge cannot rerank the index as it is now (no text field it can read, a missing "
                            "index, ...; the server's log says why)",
}
#: How deeply the body of a search esbridge reads may nest objects and arrays: far deeper than a
#: search needs (each level of a ``bool`` query takes three), far shallower than
#: Python's parser and esbridge's own reading of the query can go.
MAX_BODY_DEPTH = 100


# ---- errors in the engine's shape -----------------------------------------------------------

class _Refused(Exception):
    """A request esbridge answers itself with an engine-shaped error."""

    def __init__(self, status: int, reason: str, error_type: str = "illegal_argument_exception") -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.error_type = error_type


def error_body(status: int, reason: str, error_type: str) -> dict[str, Any]:
    """An error body as the engine writes its own."""
    cause = {"type": error_type, "reason": reason}
    return {"error": {"root_cause": [cause], **cause}, "status": status}


def _engine_answer(err: EsbridgeError) -> tuple[int, Any]:
    """The status and body answering an esbridge error: the engine's own where it refused a request."""
    if isinstance(err, EngineUnavailableError):
        return 502, error_body(502, str(err), "esbridge_engine_unavailable_exception")
    if isinstance(err, EngineError) and err.status is not None and isinstance(err.body, Mapping) \
            and "error" in err.body:
        return err.status, err.body
    if isinstance(err, EngineError) and err.status is not None:
        return err.status, error_body(err.status, str(err), err.error_type or "esbridge_exception")
    if isinstance(err, ConfigurationError):
        return 400, error_body(400, str(err), "illegal_argument_exception")
    return 500, error_body(500, str(err), "esbridge_exception")


# ---- reading a body -------------------------------------------------------------------------

#: A JSON string (or the rest of the text, for one never closed), its escapes included.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"?', re.DOTALL)
#: Every byte but the brackets of objects and arrays.
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"{}[]")
#: Opening brackets as 2, closing ones as 0 (one more and one less level once 1 is taken away).
_STEPS = bytes.maketrans(b"{[}]", b"\x02\x02\x00\x00")


def nesting_depth(raw: bytes) -> int:
    """How deeply the JSON text ``raw`` nests objects and arrays (brackets inside strings do not
    count), read without parsing it: linear in its length, whatever its depth."""
    import numpy as np

    brackets = _STRING.sub(b"", raw).translate(None, _NOT_BRACKETS)
    if not brackets:
        return 0
    steps = np.frombuffer(brackets.translate(_STEPS), dtype=np.uint8).astype(np.int64) - 1
    return max(0, int(np.cumsum(steps).max()))


def check_depth(raw: bytes, what: str = "the search body") -> None:
    """Refuse (400, ``parsing_exception``) a body nested deeper than :data:`MAX_BODY_DEPTH`, before
    anything parses it."""
    depth = nesting_depth(raw)
    if depth > MAX_BODY_DEPTH:
        raise _Refused(400, f"{what} nests objects and arrays {depth} levels deep; esbridge reads a search "
                            f"nested at most {MAX_BODY_DEPTH} levels deep: send a flatter body",
                       "parsing_exception")


# ---- what a search asks ---------------------------------------------------------------------

@dataclass
class Unreranked:
    """A search of a reranked index answered by the engine as it is, unreranked: its order is the
    user's (:func:`fixed_order`), there is no text to score by, or esbridge cannot read it or its
    index.  ``reason`` is a key of :data:`REASONS`."""

    reason: str
    detail: str = ""

    @property
    def headers(self) -> dict[str, str]:
        """The headers saying so, on the engine's answer."""
        return {"X-Esbridge-Reranked": "false", "X-Esbridge-Reason": self.reason}


@dataclass
class SearchRequest:
    """A search of a reranked index, as esbridge reads it."""

    index: str
    config: IndexConfig
    body: dict[str, Any]            # without ext.esbridge
    text: str | None
    filter: list[Any]
    size: int
    from_: int
    explain: bool
    window: int
    source: Any
    #: the query-string parameters sent to the engine: with the request's body (``rescore`` mode:
    #: all but size, from and :data:`RESPONSE_PARAMS`), or with the first stage (``search`` mode:
    #: :data:`FIRST_STAGE_PARAMS`)
    params: dict[str, str] = field(default_factory=dict)
    #: the body asks the engine to explain each hit's score (``"explain": true``): esbridge's
    #: score is explained for the hits it reranked
    engine_explain: bool = False
    #: the body sorts by ``_score`` (each hit's ``sort`` is its score)
    score_sort: bool = False
    #: where ``index`` is not one configured name (several indices, a wildcard, an alias): the
    #: configured name each concrete index it names is reranked as, and their configurations
    owners: dict[str, str] | None = None
    configs: dict[str, IndexConfig] | None = None


def _whole(value: Any, name: str, minimum: int = 0) -> int:
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise _Refused(400, f"{name} must be a whole number >= {minimum}, got {value!r}")
    return value


def query_text(query: Any) -> tuple[str | None, list[Any]]:
    """The text a query searches and the clauses that only restrict it: a ``match``,
    ``multi_match``, ``query_string`` or ``simple_query_string`` clause, alone or as the one
    scoring clause (``must``/``should``) of a ``bool`` whose other clauses (``filter``,
    ``must_not``) become the filter; ``match_all`` or no query: no text."""
    if query is None:
        return None, []
    if not isinstance(query, Mapping) or len(query) != 1:
        raise _Refused(400, "query must be an object with one clause")
    (kind, clause), = query.items()
    if kind == "match_all":
        return None, []
    if kind in TEXT_QUERIES:
        if not isinstance(clause, Mapping):
            raise _Refused(400, f"[{kind}] must be an object")
        if kind == "match":
            if len(clause) != 1:
                raise _Refused(400, "[match] must name one field")
            (_, spec), = clause.items()
            text = spec.get("query") if isinstance(spec, Mapping) else spec
        else:
            text = clause.get("query")
        if not isinstance(text, str):
            raise _Refused(400, f"the text of [{kind}] must be a string, got {text!r}")
        return text, []
    if kind == "bool" and isinstance(clause, Mapping):
        def listed(key: str) -> list[Any]:
            value = clause.get(key, [])
            return list(value) if isinstance(value, list) else [value]

        unknown = [k for k in clause if k not in ("must", "should", "filter", "must_not")]
        if unknown:
            raise _Refused(400, f"esbridge reranks a [bool] of must, should, filter and must_not; "
                                f"[{unknown[0]}] is not supported")
        scoring = listed("must") + listed("should")
        if len(scoring) != 1:
            raise _Refused(400, f"esbridge reranks a [bool] with one scoring clause (must or should) holding the "
                                f"query text; this one has {len(scoring)}")
        text, inner = query_text(scoring[0])
        filters = inner + listed("filter")
        if clause.get("must_not"):
            filters.append({"bool": {"must_not": listed("must_not")}})
        return text, filters
    raise _Refused(400, f"esbridge reranks the text of a {', '.join(TEXT_QUERIES)} or bool query; a [{kind}] "
                        "query has none: give the text as ext.esbridge.query (the query then only filters), "
                        "or set the index's mode to rescore")


_QUERY_SYNTAX = re.compile(r"(?<![\w\\])[\w.*]+:(?!/)|\b(?:AND|OR|NOT)\b|&&|\|\||[+\-!(){}\[\]^\"~*?\\/|]")


def _plain(text: str, syntax: bool) -> str:
    """The words of a query text (a ``query_string``'s field names, operators and syntax left out)."""
    return " ".join((_QUERY_SYNTAX.sub(" ", text) if syntax else text).split())


def _texts(query: Any, out: list[str], depth: int = 0) -> None:
    if not isinstance(query, Mapping) or depth > MAX_BODY_DEPTH:
        return
    for kind, clause in query.items():
        if kind in FIELD_TEXT_QUERIES and isinstance(clause, Mapping):
            for spec in clause.values():
                text = spec.get("query") if isinstance(spec, Mapping) else spec
                if isinstance(text, (str, int, float)) and not isinstance(text, bool):
                    out.append(_plain(str(text), False))
        elif kind in KEY_TEXT_QUERIES and isinstance(clause, Mapping):
            text = clause.get("query")
            if isinstance(text, (str, int, float)) and not isinstance(text, bool):
                out.append(_plain(str(text), kind != "multi_match" and kind != "combined_fields"))
        elif kind in SCORING_CLAUSES and isinstance(clause, Mapping):
            for key in SCORING_CLAUSES[kind]:
                inner = clause.get(key)
                for q in (inner if isinstance(inner, list) else [inner]):
                    _texts(q, out, depth + 1)


def scoring_text(query: Any) -> str | None:
    """The text esbridge scores a query's candidates by: the texts of its ``match``,
    ``multi_match``, ``query_string`` and ``simple_query_string`` clauses (and ``match_phrase``,
    ``match_bool_prefix``, ``combined_fields``) wherever they score (in a ``bool``'s ``must`` and
    ``should``, a ``dis_max``, a ``function_score``, ...; not in a ``filter`` or ``must_not``),
    each once, joined; ``None`` where the query has none (``term``, ``match_all``, ...)."""
    found: list[str] = []
    _texts(query, found)
    texts = list(dict.fromkeys(t for t in found if t))
    return " ".join(texts) if texts else None


def _by_score(sort: Any) -> bool:
    """Whether a ``sort`` (of a body, or the ``sort`` URL parameter) is by ``_score`` descending only."""
    items = sort if isinstance(sort, list) else [sort]
    for item in items:
        if isinstance(item, str):
            name, _, order = item.partition(":")
            if name != "_score" or order not in ("", "desc"):
                return False
        elif isinstance(item, Mapping) and len(item) == 1 and "_score" in item:
            order = item["_score"]
            order = order.get("order", "desc") if isinstance(order, Mapping) else order
            if order != "desc":
                return False
        else:
            return False
    return True


def fixed_order(body: Mapping[str, Any], params: Mapping[str, str]) -> Unreranked | None:
    """Why a search's order is the user's, not a score's (``None``: it is by score): a ``sort``
    other than ``_score``, ``search_after``, ``scroll``, ``collapse``, a ``rescore`` of its own,
    a point in time."""
    if body.get("pit") is not None:
        return Unreranked("pit")
    if "scroll" in params or "scroll" in body:
        return Unreranked("scroll")
    for key in ("search_after", "collapse", "rescore"):
        if body.get(key) is not None:
            return Unreranked(key)
    if ("sort" in body and not _by_score(body["sort"])) or \
            ("sort" in params and not _by_score(params["sort"].split(","))):
        return Unreranked("sort")
    return None


def _fits_search_mode(body: Mapping[str, Any], params: Mapping[str, str], explicit: Any) -> bool:
    """Whether esbridge's own first stage (``search`` mode) can answer a search: its body and
    parameters are those it takes, and its query has one text (or the text is given apart)."""
    if any(k not in SEARCH_PARAMS for k in params) or any(k not in SEARCH_BODY_KEYS for k in body):
        return False
    try:
        _fields_of(body.get("_source"))
        if explicit is not None or (body.get("query") is None and "q" in params):
            return True
        return query_text(body.get("query"))[0] is not None
    except _Refused:
        return False


def read_search(index: str, config: IndexConfig, body: Any,
                params: Mapping[str, str]) -> SearchRequest | Unreranked | None:
    """What a search of ``index`` asks; ``None`` when it asks not to be reranked
    (``ext.esbridge.rerank`` false).  ``body`` keeps everything but ``ext.esbridge``."""
    body, opts = _split_ext(body)
    if opts.get("rerank", True) is False:
        return None
    config = _with_options(index, config, opts)
    window = _whole(opts.get("window", config.window), "ext.esbridge.window", 1)
    try:
        size = _whole(params.get("size", body.get("size", 10)), "size")
        from_ = _whole(params.get("from", body.get("from", 0)), "from")
    except _Refused:  # the engine's own error says what is wrong
        return Unreranked("bad_size_or_from")
    explicit = opts.get("query")
    if explicit is not None and not isinstance(explicit, str):
        raise _Refused(400, f"ext.esbridge.query must be a string, got {explicit!r}")
    user_order = fixed_order(body, params)
    if user_order is not None:
        return user_order
    if config.mode == "search" and not _fits_search_mode(body, params, explicit):
        # what esbridge's own first stage cannot take is answered by the rule: the engine's answer
        # to the request, its top hits reranked
        config = replace(config, mode="rescore", pipeline=None)
    found = _text_and_filters(config.mode, body, params, explicit)
    if isinstance(found, Unreranked):
        return found
    text, filters = found
    return SearchRequest(index=index, config=config, body=body, text=text, filter=filters, size=size,
                         from_=from_, explain=bool(opts.get("explain", False)), window=window,
                         source=body.get("_source"), params=_engine_params(config.mode, params),
                         engine_explain=body.get("explain") is True or params.get("explain") == "true",
                         score_sort="sort" in body or "sort" in params)


def _split_ext(body: Any) -> tuple[dict[str, Any], Mapping[str, Any]]:
    """The search body without ``ext.esbridge``, and esbridge's options from there (checked: an
    object of :data:`EXT_KEYS`)."""
    if body is None:
        body = {}
    if not isinstance(body, Mapping):
        raise _Refused(400, "the search body must be a JSON object")
    body = dict(body)
    ext = body.get("ext")
    opts: Mapping[str, Any] = {}
    if isinstance(ext, Mapping) and "esbridge" in ext:
        opts = ext["esbridge"]
        rest = {k: v for k, v in ext.items() if k != "esbridge"}
        if rest:
            body["ext"] = rest
        else:
            del body["ext"]
        if not isinstance(opts, Mapping):
            raise _Refused(400, "ext.esbridge must be an object")
        unknown = [k for k in opts if k not in EXT_KEYS]
        if unknown:
            raise _Refused(400, f"ext.esbridge.{unknown[0]} is not an option; the options are {', '.join(EXT_KEYS)}")
    return body, opts


def _with_options(index: str, config: IndexConfig, opts: Mapping[str, Any]) -> IndexConfig:
    """The index's configuration with a search's ``ext.esbridge`` options (scorer, mode, pipeline) applied."""
    for key in ("rerank", "explain"):
        if not isinstance(opts.get(key, False), bool):
            raise _Refused(400, f"ext.esbridge.{key} must be true or false, got {opts[key]!r}")
    if "scorer" in opts:
        from esbridge.scoring import get_scorer

        try:
            get_scorer(opts["scorer"]) if isinstance(opts["scorer"], str) else None
        except ConfigurationError as err:
            raise _Refused(400, f"ext.esbridge.scorer: {err}") from None
        if not isinstance(opts["scorer"], str):
            raise _Refused(400, f"ext.esbridge.scorer must be a scorer's name, got {opts['scorer']!r}")
        config = replace(config, scorer=opts["scorer"], params=None)
    if "mode" in opts:
        if opts["mode"] not in MODES:
            raise _Refused(400, f"ext.esbridge.mode must be one of {', '.join(MODES)}, got {opts['mode']!r}")
        config = replace(config, mode=opts["mode"])
    if "pipeline" in opts:
        if not isinstance(opts["pipeline"], bool):
            raise _Refused(400, f"ext.esbridge.pipeline must be true or false, got {opts['pipeline']!r}")
        if opts["pipeline"] and config.pipeline is None:
            config = replace(config, pipeline=_pipeline_params(config.scorer, config.window, {}), mode="search")
        elif not opts["pipeline"]:
            config = replace(config, pipeline=None)
    if config.pipeline is not None:
        fixed = [k for k in ("window", "scorer", "mode") if k in opts]
        if fixed:
            raise _Refused(400, f"ext.esbridge.{fixed[0]} cannot be given to the hybrid pipeline of [{index}]: "
                                "set it in the configuration's pipeline_params")
    return config


def _text_and_filters(mode: str, body: Mapping[str, Any], params: Mapping[str, str],
                      explicit: str | None) -> tuple[str | None, list[Any]] | Unreranked:
    """The text esbridge scores by and (``search`` mode) the filters of its own first stage; or why
    there is no text to score by."""
    if mode == "search":
        if explicit is not None:
            return explicit, [body["query"]] if body.get("query") is not None else []
        if body.get("query") is None and "q" in params:  # a URI search
            return params["q"], []
        return query_text(body.get("query"))
    if explicit is not None:
        return explicit, []
    text = scoring_text(body["query"]) if body.get("query") is not None else (
        _plain(params["q"], True) or None if "q" in params else None)
    return (text, []) if text is not None else Unreranked("no_query_text")


def _engine_params(mode: str, params: Mapping[str, str]) -> dict[str, str]:
    """What of a search's query-string parameters goes to the engine (:attr:`SearchRequest.params`)."""
    if mode == "search":
        return {k: v for k, v in params.items() if k in FIRST_STAGE_PARAMS}
    return {k: v for k, v in params.items() if k not in ("size", "from", *RESPONSE_PARAMS)}


def _fields_of(source: Any) -> list[str] | None:
    if source is None or source is True:
        return None
    if isinstance(source, str):
        return [source]
    if isinstance(source, list) and all(isinstance(f, str) for f in source):
        return list(source)
    if source is False:
        return None
    raise _Refused(400, "_source of a reranked search must be true, false, a field name or a list of them")


def engine_shaped(response: dict[str, Any], req: SearchRequest, took: float) -> dict[str, Any]:
    """esbridge's response as the engine's: hits ``from`` to ``from + size``, esbridge's details
    (``_esbridge``) only with ``explain``.  ``took`` is the whole request's milliseconds where
    esbridge found the candidates itself (``search`` mode), the engine's where it ran the
    request's own search; with the body's ``explain``, each reranked hit's ``_explanation`` is
    esbridge's score's."""
    out = dict(response)
    if req.config.mode == "search" or "took" not in out:
        out["took"] = int(round(took * 1000))
    hits = dict(out["hits"])
    page = []
    scorer = req.config.scorer
    for h in hits["hits"][req.from_:req.from_ + req.size]:
        h = dict(h)
        meta = h.get("_esbridge")
        if req.engine_explain and isinstance(meta, Mapping) and "parts" in meta:
            h["_explanation"] = explanation(h["_score"], scorer, meta)
        if req.score_sort and isinstance(meta, Mapping):
            h["sort"] = [h["_score"]]
        if not req.explain:
            h.pop("_esbridge", None)
        if req.source is False:
            h.pop("_source", None)
        page.append(h)
    hits["hits"] = page
    out["hits"] = hits
    if not req.explain:
        # what the reader must know (e.g. documents not searched semantically) stays, alone
        notes = (out.pop("_esbridge", None) or {}).get("notes")
        if notes:
            out["_esbridge"] = {"notes": notes}
    return out


def explanation(score: float, scorer: str, meta: Mapping[str, Any]) -> dict[str, Any]:
    """A hit's ``_explanation`` (the engine's shape) of esbridge's score: its value the hit's
    ``_score``, its details the scorer's parts and the engine's first-stage score and rank."""
    details = [{"value": float(v), "description": f"{name} (a part of the {scorer} score)", "details": []}
               for name, v in (meta.get("parts") or {}).items()]
    if meta.get("first_stage_score") is not None:
        details.append({"value": float(meta["first_stage_score"]),
                        "description": f"the engine's score (rank {meta.get('first_stage_rank')} of the "
                                       "candidates), not part of this score", "details": []})
    return {"value": float(score), "description": f"esbridge's {scorer} score of the query's terms, "
                                                  "reranking the engine's top hits", "details": details}


# ---- bodies without ext.esbridge, and _msearch ----------------------------------------------

def _strip_ext(body: Any) -> bytes | None:
    """The search body without ``ext.esbridge`` (the engine knows no such extension)."""
    if not isinstance(body, Mapping):
        return None
    body = dict(body)
    ext = body.get("ext")
    if isinstance(ext, Mapping) and "esbridge" in ext:
        rest = {k: v for k, v in ext.items() if k != "esbridge"}
        if rest:
            body["ext"] = rest
        else:
            del body["ext"]
    return json.dumps(body).encode()


def _strip_ext_line(line: bytes) -> bytes:
    return _strip_ext(json.loads(line)) or line


def _strip_msearch_ext(raw: bytes) -> bytes:
    lines = [ln for ln in raw.split(b"\n") if ln.strip()]
    return b"".join((ln if i % 2 == 0 else _strip_ext_line(ln)) + b"\n" for i, ln in enumerate(lines))


def msearch_targets(raw: bytes) -> list[str | None]:
    """The index each search of an ``_msearch`` body names in its header (``None``: the path's);
    headers that cannot be read are left to :func:`_read_msearch` to refuse."""
    out: list[str | None] = []
    lines = [ln for ln in raw.split(b"\n") if ln.strip()]
    for i in range(0, len(lines) - 1, 2):
        try:
            header = json.loads(lines[i])
        except ValueError:
            header = None
        named = header.get("index") if isinstance(header, Mapping) else None
        if isinstance(named, list):
            named = ",".join(str(n) for n in named)
        out.append(named if isinstance(named, str) else None)
    return out


#: What a search of an ``_msearch`` header's index is reranked as: the configuration, and where the
#: header names several indices, a wildcard or an alias, the configured name of each index
#: (:attr:`SearchRequest.owners`); or why it is not.
Target = tuple[IndexConfig, dict[str, str] | None] | Unreranked


def _read_msearch(index: str | None, config: IndexConfig | None, raw: bytes, params: Mapping[str, str],
                  targets: Mapping[str, Target] | None = None) -> list[SearchRequest | Unreranked | None | _Refused]:
    """Each search of an ``_msearch`` body: what it asks, ``None`` (pass it on), or why it is
    refused.  A search whose header names an index is read as a search of that index
    (``targets``); its other header options go with it as a search's parameters."""
    where = index or "_all"
    unknown = [k for k in params if k not in MSEARCH_PARAMS]
    if unknown:
        raise _Refused(400, f"esbridge reranks _msearch of [{where}] with the parameters {', '.join(MSEARCH_PARAMS)}; "
                            f"[{unknown[0]}] is not supported: leave it out, or send this _msearch to the cluster "
                            "itself")
    each = {k: v for k, v in params.items() if k in MSEARCH_SEARCH_PARAMS}
    lines = [ln for ln in raw.split(b"\n") if ln.strip()]
    if len(lines) % 2:
        raise _Refused(400, "an _msearch body is pairs of lines (header, search); the last search is missing")
    named = msearch_targets(raw)
    out: list[SearchRequest | Unreranked | None | _Refused] = []
    for i in range(0, len(lines), 2):
        header = json.loads(lines[i])
        if not isinstance(header, Mapping):
            raise _Refused(400, f"line {i + 1} of the _msearch body must be a JSON object")
        target = named[i // 2]
        key = target if target is not None else index
        got: Target = Unreranked("target_not_configured")
        if key is not None and key == index and config is not None:
            got = (config, None)
        elif key is not None and targets is not None and key in targets:
            got = targets[key]
        if isinstance(got, Unreranked):
            out.append(got)
            continue
        options = {k: ("true" if v is True else "false" if v is False else str(v)) for k, v in header.items()
                   if k != "index"}
        try:
            req = read_search(key or where, got[0], json.loads(lines[i + 1]), {**each, **options})
            if isinstance(req, SearchRequest) and got[1] is not None:
                req.owners = got[1]
            out.append(req)
        except _Refused as err:
            out.append(err)
    return out
