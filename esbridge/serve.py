"""``esbridge serve``: an HTTP server that speaks the engine's own REST API.

Every request goes on to the cluster unchanged (its body streamed both ways, its status, headers
and body answered back as the cluster gave them), except the searches of the indices the
configuration names: ``GET``/``POST /<index>/_search`` and ``/<index>/_msearch`` there are answered
by esbridge, in the engine's response shape, reranked (:class:`esbridge.aio.AsyncReranker`).
A client library of the engine pointed at the server needs no change.

The server holds no credentials: the ``Authorization`` header of each request (basic, ``ApiKey``,
``Bearer``) goes to the cluster with that request and every request esbridge makes to answer it
(:func:`esbridge.engine.calls.forwarded_headers`), and is never logged.

The configuration (:func:`load_config`) is a JSON file::

    {"indices": {"scifact": {"scorer": "evolved", "window": 100, "mode": "search"}}}

and a search may override it with ``"ext": {"esbridge": {...}}`` in its body (:data:`EXT_KEYS`),
which the cluster never sees.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import math
import signal
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from esbridge.engine.calls import forwarded_headers, path_segment
from esbridge.errors import ConfigurationError, EngineError, EngineUnavailableError, EsbridgeError

if TYPE_CHECKING:
    import argparse

    from aiohttp import ClientSession, web

    from esbridge.aio import AsyncEngine, AsyncReranker
    from esbridge.engine.client import Engine
    from esbridge.engine.connection import ConnectionOptions
    from esbridge.hybrid.pipeline import HybridSearcher, PipelineParams

__all__ = ["IndexConfig", "ServeConfig", "load_config", "parse_config", "build_app", "serve", "add_command",
           "EXT_KEYS", "INDEX_KEYS"]

log = logging.getLogger(__name__)
#: One line per request answered: method, path (no query string), status, milliseconds, handling.
access_log = logging.getLogger("esbridge.serve.access")

#: How a reranked index's searches find their candidates: ``search`` runs esbridge's pipeline (its
#: own first stage from the query text, :meth:`AsyncReranker.search`); ``rescore`` sends the
#: request's own query to the engine and reranks its top ``window`` (:meth:`AsyncReranker.rescore`).
MODES = ("search", "rescore")
#: The keys of an index's configuration.
INDEX_KEYS = ("scorer", "window", "mode", "first_stage", "fields", "field_weights", "params", "pipeline",
              "pipeline_params")
#: The keys of ``ext.esbridge`` in a search body.
EXT_KEYS = ("rerank", "explain", "window", "scorer", "mode", "query", "pipeline")
#: Body keys a search of a ``search``-mode index may have (the rest needs the engine's own query).
SEARCH_BODY_KEYS = ("query", "size", "from", "_source", "ext")
#: Query-string parameters such a search may have.
SEARCH_PARAMS = ("size", "from", "q")
#: Request headers that concern one connection only (RFC 9110 §7.6.1), not passed on; nor ``host``.
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
                        "trailers", "transfer-encoding", "upgrade", "host", "expect"})
#: Query clauses whose ``query`` is a text: the text reranked in ``search`` mode.
TEXT_QUERIES = ("match", "multi_match", "query_string", "simple_query_string")
#: The engine clients' loggers: their records hold the URLs and bodies of the requests they send
#: (query texts), so they are kept at WARNING while the server runs.
CLIENT_LOGGERS = ("opensearch", "opensearchpy.trace", "elasticsearch", "elasticsearch.trace", "elastic_transport")
#: Upper bounds (seconds) of the latency histogram's buckets.
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


# ---- configuration ---------------------------------------------------------------------------

@dataclass(frozen=True)
class IndexConfig:
    """How the searches of one index are reranked (the arguments of :class:`AsyncReranker`)."""

    scorer: str = "evolved"
    window: int = 100
    mode: str = "search"
    first_stage: str = "bm25"
    fields: tuple[str, ...] | None = None
    field_weights: tuple[tuple[str, float], ...] | None = None
    params: tuple[tuple[str, Any], ...] | None = None
    #: the hybrid pipeline's parameters where the index's searches run it (esbridge.hybrid)
    pipeline: PipelineParams | None = None


@dataclass(frozen=True)
class ServeConfig:
    """The indices whose searches are reranked, by name."""

    indices: Mapping[str, IndexConfig] = field(default_factory=dict)


def _check_index(where: str, name: str, raw: Any) -> IndexConfig:
    from esbridge.rerank.first_stage import parse_first_stage
    from esbridge.scoring import get_scorer

    at = f"{where}: indices.{name}"
    if not isinstance(raw, Mapping):
        raise ConfigurationError(f"{at} must be an object of settings ({', '.join(INDEX_KEYS)}), "
                                 f"got {type(raw).__name__}")
    unknown = [k for k in raw if k not in INDEX_KEYS]
    if unknown:
        raise ConfigurationError(f"{at}.{unknown[0]} is not a setting; the settings are {', '.join(INDEX_KEYS)}")
    cfg = IndexConfig()
    if "scorer" in raw:
        if not isinstance(raw["scorer"], str):
            raise ConfigurationError(f"{at}.scorer must be a scorer's name, got {raw['scorer']!r}")
        try:
            get_scorer(raw["scorer"])
        except ConfigurationError as err:
            raise ConfigurationError(f"{at}.scorer: {err}") from None
        cfg = replace(cfg, scorer=raw["scorer"])
    if "window" in raw:
        w = raw["window"]
        if isinstance(w, bool) or not isinstance(w, int) or w < 1:
            raise ConfigurationError(f"{at}.window must be a whole number >= 1, got {w!r}")
        cfg = replace(cfg, window=w)
    if "mode" in raw:
        if raw["mode"] not in MODES:
            raise ConfigurationError(f"{at}.mode must be one of {', '.join(MODES)}, got {raw['mode']!r}")
        cfg = replace(cfg, mode=raw["mode"])
    if "first_stage" in raw:
        fs = raw["first_stage"]
        if not isinstance(fs, str):
            raise ConfigurationError(f"{at}.first_stage must be a string, got {fs!r}")
        try:
            parse_first_stage(fs)
        except ConfigurationError as err:
            raise ConfigurationError(f"{at}.first_stage: {err}") from None
        cfg = replace(cfg, first_stage=fs)
    if "fields" in raw and raw["fields"] is not None:
        fl = raw["fields"]
        if isinstance(fl, str):
            fl = [fl]
        if not isinstance(fl, list) or not fl or not all(isinstance(f, str) and f for f in fl):
            raise ConfigurationError(f"{at}.fields must be a list of field names, got {raw['fields']!r}")
        cfg = replace(cfg, fields=tuple(fl))
    if "field_weights" in raw and raw["field_weights"] is not None:
        fw = raw["field_weights"]
        if not isinstance(fw, Mapping) or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
                for v in fw.values()):
            raise ConfigurationError(f"{at}.field_weights must map field names to numbers >= 0, got {fw!r}")
        cfg = replace(cfg, field_weights=tuple((str(k), float(v)) for k, v in fw.items()))
    if "params" in raw and raw["params"] is not None:
        ps = raw["params"]
        if not isinstance(ps, Mapping):
            raise ConfigurationError(f"{at}.params must be an object of the scorer's parameters, got {ps!r}")
        try:
            get_scorer(cfg.scorer).params_type(**ps)
        except TypeError as err:
            raise ConfigurationError(f"{at}.params: not parameters of scorer {cfg.scorer!r} ({err})") from None
        except ValueError as err:
            raise ConfigurationError(f"{at}.params: {err}") from None
        cfg = replace(cfg, params=tuple(ps.items()))
    if raw.get("pipeline", False) not in (True, False):
        raise ConfigurationError(f"{at}.pipeline must be true or false, got {raw['pipeline']!r}")
    pp = raw.get("pipeline_params")
    if pp is not None and not raw.get("pipeline"):
        raise ConfigurationError(f"{at}.pipeline_params is given but pipeline is not true")
    if raw.get("pipeline"):
        if cfg.mode != "search":
            raise ConfigurationError(f"{at}: the hybrid pipeline (pipeline true) finds its own candidates; "
                                     "it cannot be in mode rescore")
        if pp is not None and not isinstance(pp, Mapping):
            raise ConfigurationError(f"{at}.pipeline_params must be an object of the pipeline's parameters, "
                                     f"got {pp!r}")
        try:
            pipeline = _pipeline_params(cfg.scorer, raw.get("window"), pp or {})
        except (ConfigurationError, TypeError, ValueError) as err:
            raise ConfigurationError(f"{at}.pipeline_params: {err}") from None
        cfg = replace(cfg, pipeline=pipeline)
    return cfg


def _pipeline_params(scorer: str, window: int | None, overrides: Mapping[str, Any]) -> PipelineParams:
    """The shipped pipeline parameters with the index's scorer (and window, if given) and ``overrides``."""
    from esbridge.hybrid.pipeline import PipelineParams

    own: dict[str, Any] = {"scorer": scorer, **({"window": window} if window is not None else {})}
    return PipelineParams().with_overrides(**{**own, **overrides})


def parse_config(raw: Any, where: str = "the configuration") -> ServeConfig:
    """A :class:`ServeConfig` from the parsed JSON ``raw``; ``where`` (the file) starts every error.

    Raises:
        ConfigurationError: naming the file and the key that is wrong.
    """
    if not isinstance(raw, Mapping):
        raise ConfigurationError(f"{where} must be a JSON object with the key \"indices\", got {type(raw).__name__}")
    unknown = [k for k in raw if k != "indices"]
    if unknown:
        raise ConfigurationError(f"{where}: {unknown[0]!r} is not a setting; the only top-level key is \"indices\"")
    indices = raw.get("indices", {})
    if not isinstance(indices, Mapping):
        raise ConfigurationError(f"{where}: indices must be an object (index name → settings), "
                                 f"got {type(indices).__name__}")
    for name in indices:
        if not name or any(c in name for c in ",*/ ") or name.startswith("_"):
            raise ConfigurationError(f"{where}: indices.{name!r} is not one index name (no commas, wildcards, "
                                     "slashes or spaces, no leading '_')")
    return ServeConfig({str(name): _check_index(where, str(name), cfg) for name, cfg in indices.items()})


def load_config(path: str | Path) -> ServeConfig:
    """The configuration in the JSON file ``path`` (:func:`parse_config`).

    Raises:
        ConfigurationError: the file cannot be read, is not JSON, or a key is wrong (named).
    """
    where = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigurationError(f"cannot read the configuration {where}: {err.strerror or err}") from None
    except UnicodeDecodeError:
        raise ConfigurationError(f"the configuration {where} is not UTF-8 text") from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as err:
        raise ConfigurationError(f"the configuration {where} is not valid JSON: {err}") from None
    return parse_config(raw, where)


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


# ---- what a search asks ---------------------------------------------------------------------

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
    params: dict[str, str] = field(default_factory=dict)   # the query string's, but size and from


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


def read_search(index: str, config: IndexConfig, body: Any, params: Mapping[str, str]) -> SearchRequest | None:
    """What a search of ``index`` asks; ``None`` when it asks not to be reranked
    (``ext.esbridge.rerank`` false).  ``body`` keeps everything but ``ext.esbridge``."""
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
    if opts.get("rerank", True) is False:
        return None
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
    window = _whole(opts.get("window", config.window), "ext.esbridge.window", 1)
    unknown_params = [k for k in params if k not in SEARCH_PARAMS]
    if config.mode == "search":
        if unknown_params:
            raise _Refused(400, f"esbridge reranks searches of [{index}] with the parameters "
                                f"{', '.join(SEARCH_PARAMS)}; [{unknown_params[0]}] is not supported (set "
                                "ext.esbridge.rerank to false to send the search to the engine as it is)")
        unknown = [k for k in body if k not in SEARCH_BODY_KEYS]
        if unknown:
            raise _Refused(400, f"esbridge reranks searches of [{index}] with {', '.join(SEARCH_BODY_KEYS)}; "
                                f"[{unknown[0]}] is not supported (set ext.esbridge.rerank to false to send the "
                                "search to the engine as it is, or the index's mode to rescore)")
    elif "sort" in body or "scroll" in params:
        raise _Refused(400, f"a {'sorted' if 'sort' in body else 'scrolled'} search of [{index}] cannot be "
                            "reranked (set ext.esbridge.rerank to false)")
    size = _whole(params.get("size", body.get("size", 10)), "size")
    from_ = _whole(params.get("from", body.get("from", 0)), "from")
    explicit = opts.get("query")
    if explicit is not None and not isinstance(explicit, str):
        raise _Refused(400, f"ext.esbridge.query must be a string, got {explicit!r}")
    text: str | None = explicit
    if explicit is not None:
        filters = [body["query"]] if config.mode == "search" and body.get("query") is not None else []
    elif body.get("query") is None and "q" in params:  # a URI search
        text, filters = params["q"], []
    else:
        text, filters = query_text(body.get("query"))
    if text is None and config.mode == "search":
        raise _Refused(400, f"a search of [{index}] needs a query text to rerank: a match, multi_match, "
                            "query_string or simple_query_string query, the q parameter, or ext.esbridge.query")
    return SearchRequest(index=index, config=config, body=body, text=text, filter=filters, size=size,
                         from_=from_, explain=bool(opts.get("explain", False)), window=window,
                         source=body.get("_source"),
                         params={k: v for k, v in params.items() if k not in ("size", "from")})


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
    """esbridge's response as the engine's: hits ``from`` to ``from + size``, ``took`` the whole
    request's milliseconds, esbridge's details (``_esbridge``) only with ``explain``."""
    out = dict(response)
    out["took"] = int(round(took * 1000))
    hits = dict(out["hits"])
    page = []
    for h in hits["hits"][req.from_:req.from_ + req.size]:
        h = dict(h)
        if not req.explain:
            h.pop("_esbridge", None)
        if req.source is False:
            h.pop("_source", None)
        page.append(h)
    hits["hits"] = page
    out["hits"] = hits
    if not req.explain:
        out.pop("_esbridge", None)
    return out


# ---- metrics ---------------------------------------------------------------------------------

class Metrics:
    """Counters and a latency histogram per handling (``reranked``, ``passed_through``,
    ``esbridge``), in Prometheus' text format (:meth:`render`)."""

    def __init__(self) -> None:
        self.requests: dict[tuple[str, int], int] = {}
        self.buckets: dict[str, list[int]] = {}
        self.sums: dict[str, float] = {}
        self.counts: dict[str, int] = {}
        self.in_flight = 0

    def observe(self, handling: str, status: int, seconds: float) -> None:
        self.requests[(handling, status)] = self.requests.get((handling, status), 0) + 1
        counts = self.buckets.setdefault(handling, [0] * len(BUCKETS))
        for i, bound in enumerate(BUCKETS):
            if seconds <= bound:
                counts[i] += 1
        self.sums[handling] = self.sums.get(handling, 0.0) + seconds
        self.counts[handling] = self.counts.get(handling, 0) + 1

    def render(self) -> str:
        lines = ["# HELP esbridge_serve_requests_total Requests answered, by handling and HTTP status.",
                 "# TYPE esbridge_serve_requests_total counter"]
        for (handling, status), n in sorted(self.requests.items()):
            lines.append(f'esbridge_serve_requests_total{{handling="{handling}",status="{status}"}} {n}')
        lines += ["# HELP esbridge_serve_request_duration_seconds Time to answer a request, by handling.",
                  "# TYPE esbridge_serve_request_duration_seconds histogram"]
        for handling in sorted(self.counts):
            for bound, n in zip(BUCKETS, self.buckets[handling]):
                lines.append(f'esbridge_serve_request_duration_seconds_bucket{{handling="{handling}",'
                             f'le="{bound}"}} {n}')
            lines.append(f'esbridge_serve_request_duration_seconds_bucket{{handling="{handling}",le="+Inf"}} '
                         f'{self.counts[handling]}')
            lines.append(f'esbridge_serve_request_duration_seconds_sum{{handling="{handling}"}} '
                         f'{self.sums[handling]:.6f}')
            lines.append(f'esbridge_serve_request_duration_seconds_count{{handling="{handling}"}} '
                         f'{self.counts[handling]}')
        lines += ["# HELP esbridge_serve_in_flight Requests being answered.", "# TYPE esbridge_serve_in_flight gauge",
                  f"esbridge_serve_in_flight {self.in_flight}"]
        return "\n".join(lines) + "\n"


# ---- the server ------------------------------------------------------------------------------

def _tls_context(options: ConnectionOptions) -> ssl.SSLContext | None:
    """The TLS settings of the connections to an ``https`` cluster, as the engine clients have them."""
    if not any(u.startswith("https:") for u in options.urls):
        return None
    context = ssl.create_default_context(cafile=options.ca_certs)
    if not options.verify_certs:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def _without_credentials(options: ConnectionOptions) -> ConnectionOptions:
    """``options`` holding no credentials (the server passes on each request's own)."""
    for url in options.urls:
        if urlsplit(url).username is not None:
            raise ConfigurationError("esbridge serve passes on each request's own credentials and holds none: "
                                     "give the cluster's URL without user:password in it")
    return replace(options, username=None, password=None, api_key=None)


class Server:
    """The application's state: the cluster's URLs, one HTTP session for what passes through, one
    :class:`AsyncEngine` (connected at start, or with the first request's credentials where the
    cluster asks for them) and a reranker per index and setting."""

    def __init__(self, options: ConnectionOptions, config: ServeConfig, *, max_concurrency: int = 64,
                 request_timeout: float = 60.0, max_search_body: int = 16 * 1024 * 1024) -> None:
        if isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int) or max_concurrency < 1:
            raise ConfigurationError(f"--max-concurrency must be a whole number >= 1, got {max_concurrency!r}")
        if not request_timeout > 0:
            raise ConfigurationError(f"--request-timeout must be > 0 seconds, got {request_timeout}")
        # a connection to the cluster for each request answered at once
        self.options = replace(_without_credentials(options), connections=max(options.connections, max_concurrency))
        self.config = config
        self.max_concurrency = max_concurrency
        self.request_timeout = request_timeout
        #: the largest body of a search esbridge reranks (read whole); what passes through is streamed
        self.max_search_body = max_search_body
        self.metrics = Metrics()
        self._urls = itertools.cycle(self.options.urls)
        self._limit: asyncio.Semaphore | None = None
        self._session: ClientSession | None = None
        self._engine: AsyncEngine | None = None
        self._connecting: asyncio.Lock | None = None
        self._rerankers: dict[tuple[str, IndexConfig], AsyncReranker] = {}
        self._client_log_levels: dict[str, int] = {}
        #: the hybrid pipeline runs with blocking requests, on worker threads: its engine and searchers
        self._sync_engine: Engine | None = None
        self._searchers: dict[tuple[str, IndexConfig], tuple[HybridSearcher, threading.Lock]] = {}
        self._sync_lock = threading.Lock()

    # -- lifecycle

    async def start(self, app: web.Application) -> None:
        from aiohttp import ClientSession, ClientTimeout, TCPConnector

        for name in CLIENT_LOGGERS:
            logger = logging.getLogger(name)
            self._client_log_levels[name] = logger.level
            logger.setLevel(max(logger.level, logging.WARNING))
        self._limit = asyncio.Semaphore(self.max_concurrency)
        self._connecting = asyncio.Lock()
        self._session = ClientSession(
            connector=TCPConnector(ssl=_tls_context(self.options) or True, limit=self.max_concurrency),
            timeout=ClientTimeout(total=None, sock_connect=self.options.timeout, sock_read=self.options.timeout),
            auto_decompress=False, skip_auto_headers=("User-Agent", "Accept-Encoding", "Content-Type"))
        if self.config.indices:
            try:
                await self._engine_for_request()
            except EngineError as err:
                if err.status not in (401, 403):
                    await self.stop(app)  # the server does not start: nothing else closes them
                    raise
                log.info("the cluster at %s asks for credentials: it is identified with the first reranked "
                         "request's", self.options.display_url)
            except BaseException:
                await self.stop(app)
                raise

    async def stop(self, app: web.Application) -> None:
        if self._session is not None:
            await self._session.close()
        if self._engine is not None:
            await self._engine.close()
        for searcher, _ in self._searchers.values():
            searcher.close()
        if self._sync_engine is not None:
            self._sync_engine.close()
        for name, level in self._client_log_levels.items():
            logging.getLogger(name).setLevel(level)

    async def _engine_for_request(self) -> AsyncEngine:
        from esbridge.aio import AsyncEngine

        if self._engine is None:
            assert self._connecting is not None
            async with self._connecting:
                if self._engine is None:
                    self._engine = await AsyncEngine.connect(self.options)
                    log.info("reranking %s on %s at %s", ", ".join(self.config.indices), self._engine.info.label,
                             self.options.display_url)
        return self._engine

    def _searcher(self, index: str, config: IndexConfig) -> tuple[HybridSearcher, threading.Lock]:
        """The hybrid pipeline of ``index`` (made with the calling request's credentials, on a worker
        thread), with the lock its searches take one at a time."""
        from esbridge.engine.client import Engine
        from esbridge.hybrid.pipeline import HybridSearcher

        with self._sync_lock:
            if self._sync_engine is None:
                self._sync_engine = Engine.connect(self.options)
            key = (index, config)
            if key not in self._searchers:
                assert config.pipeline is not None
                self._searchers[key] = (HybridSearcher(self._sync_engine, index, config.pipeline,
                                                       fields=config.fields), threading.Lock())
            return self._searchers[key]

    async def _reranker(self, index: str, config: IndexConfig) -> AsyncReranker:
        from esbridge.aio import AsyncReranker
        from esbridge.scoring import get_scorer

        key = (index, replace(config, window=1, mode="search"))
        reranker = self._rerankers.get(key)
        if reranker is None:
            engine = await self._engine_for_request()
            params = get_scorer(config.scorer).params_type(**dict(config.params)) if config.params else None
            reranker = AsyncReranker(engine, index, scorer=config.scorer, params=params, window=config.window,
                                     first_stage=config.first_stage, fields=config.fields,
                                     field_weights=dict(config.field_weights) if config.field_weights else None)
            self._rerankers[key] = reranker
        return reranker

    # -- requests

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """Every request: esbridge's own endpoints, a reranked search, or the cluster's answer."""
        start = time.perf_counter()
        handling = "esbridge"
        status = 500
        try:
            if request.path == "/_esbridge/health":
                response: web.StreamResponse = await self._health()
            elif request.path == "/_esbridge/metrics":
                response = self._metrics()
            else:
                assert self._limit is not None
                self.metrics.in_flight += 1
                try:
                    async with self._limit:
                        handling, response = await self._answer(request)
                finally:
                    self.metrics.in_flight -= 1
            status = response.status
            return response
        except asyncio.CancelledError:
            status = 499  # the client went away
            raise
        finally:
            took = time.perf_counter() - start
            self.metrics.observe(handling, status, took)
            access_log.info("%s %s %d %.1fms %s", request.method, request.path, status, took * 1000, handling)

    async def _health(self) -> web.StreamResponse:
        from aiohttp import web

        return web.json_response({"status": "ok", "reranked_indices": sorted(self.config.indices),
                                  "in_flight": self.metrics.in_flight, "max_concurrency": self.max_concurrency})

    def _metrics(self) -> web.StreamResponse:
        from aiohttp import web

        return web.Response(text=self.metrics.render(), content_type="text/plain",
                            headers={"X-Content-Type-Options": "nosniff"}, charset="utf-8")

    def _reranked_target(self, request: web.Request) -> tuple[str, str] | None:
        """``(index, endpoint)`` of a search esbridge answers, else ``None``."""
        if request.method not in ("GET", "POST"):
            return None
        parts = request.raw_path.split("?", 1)[0].strip("/").split("/")
        if len(parts) != 2 or parts[1] not in ("_search", "_msearch"):
            return None
        index = unquote(parts[0])
        return (index, parts[1]) if index in self.config.indices else None

    async def _answer(self, request: web.Request) -> tuple[str, web.StreamResponse]:
        from aiohttp import web

        target = self._reranked_target(request)
        if target is None:
            return "passed_through", await self._forward(request)
        index, endpoint = target
        try:
            raw = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return "reranked", _error_response(413, f"the body of a search esbridge reranks may hold at most "
                                                    f"{self.max_search_body} bytes", "illegal_argument_exception")
        auth = {k.lower(): v for k, v in request.headers.items() if k.lower() == "authorization"}
        try:
            if endpoint == "_search":
                body = json.loads(raw) if raw.strip() else None
                req = read_search(index, self.config.indices[index], body, request.query)
                if req is None:
                    return "passed_through", await self._forward(request, _strip_ext(body))
                answer: Any = await asyncio.wait_for(self._search(req, auth), self.request_timeout)
            else:
                searches = _read_msearch(index, self.config.indices[index], raw, request.query)
                if all(s is None for s in searches):
                    return "passed_through", await self._forward(request, _strip_msearch_ext(raw))
                answer = await asyncio.wait_for(self._msearch(request, searches, raw, auth), self.request_timeout)
            return "reranked", web.json_response(answer, dumps=_dumps, headers=self._product_headers())
        except json.JSONDecodeError as err:
            return "reranked", _error_response(400, f"the search body is not valid JSON: {err}",
                                               "parsing_exception")
        except _Refused as err:
            return "reranked", _error_response(err.status, err.reason, err.error_type)
        except asyncio.TimeoutError:
            return "reranked", _error_response(504, f"esbridge did not answer the search of [{index}] within "
                                                    f"{self.request_timeout:g} s (--request-timeout)",
                                               "timeout_exception")
        except EsbridgeError as err:
            status, body = _engine_answer(err)
            return "reranked", web.json_response(body, status=status, dumps=_dumps)

    def _product_headers(self) -> dict[str, str]:
        """What the cluster's clients check a response by (the Elasticsearch clients 7.14+ refuse
        an answer without ``X-Elastic-Product``)."""
        if self._engine is not None and self._engine.info.distribution == "elasticsearch":
            return {"X-Elastic-Product": "Elasticsearch"}
        return {}

    async def _search(self, req: SearchRequest, auth: Mapping[str, str]) -> dict[str, Any]:


        start = time.perf_counter()
        fields = _fields_of(req.source)
        wanted = req.from_ + req.size
        with forwarded_headers(auth):
            if req.config.pipeline is not None:
                assert req.text is not None
                query = req.text

                def hybrid() -> dict[str, Any]:
                    searcher, lock = self._searcher(req.index, replace(req.config, window=1))
                    with lock:
                        return searcher.search(query, size=wanted, filter=req.filter or None, fields=fields,
                                               explain=req.explain)

                response = await asyncio.to_thread(hybrid)
                return engine_shaped(response, req, time.perf_counter() - start)
            reranker = await self._reranker(req.index, req.config)
            if req.config.mode == "search":
                assert req.text is not None
                response = await reranker.search(req.text, size=wanted, filter=req.filter or None, fields=fields,
                                                 explain=req.explain, window=max(req.window, wanted))
            else:
                body = dict(req.body)
                body["size"] = max(req.window, wanted)
                body["from"] = 0
                first = await reranker.engine.search(req.index, body, params=req.params or None)
                text = req.text
                if text is None:  # nothing to rerank by: the engine's own order
                    response = first
                else:
                    response = await reranker.rescore(first, text, window_size=max(req.window, wanted),
                                                      explain=req.explain)
        return engine_shaped(response, req, time.perf_counter() - start)

    async def _msearch(self, request: web.Request, searches: list[SearchRequest | None | _Refused],
                       raw: bytes, auth: Mapping[str, str]) -> dict[str, Any]:
        """Each search of an ``_msearch`` answered as ``_search`` would be, concurrently; those that
        ask not to be reranked go to the engine in one ``_msearch`` of their own."""


        start = time.perf_counter()
        lines = [ln for ln in raw.split(b"\n") if ln.strip()]

        async def one(s: SearchRequest) -> dict[str, Any]:
            try:
                out = await self._search(s, auth)
                out["status"] = 200
                return out
            except _Refused as err:
                return error_body(err.status, err.reason, err.error_type)
            except EsbridgeError as err:
                status, body = _engine_answer(err)
                return {**body, "status": status} if isinstance(body, Mapping) else error_body(status, str(err),
                                                                                              "esbridge_exception")

        plain = [i for i, s in enumerate(searches) if s is None]
        answers: list[Any] = [None] * len(searches)
        tasks = {i: asyncio.ensure_future(one(s)) for i, s in enumerate(searches) if isinstance(s, SearchRequest)}
        for i, s in enumerate(searches):
            if isinstance(s, _Refused):
                answers[i] = error_body(s.status, s.reason, s.error_type)
        try:
            if plain:
                body = b"".join(lines[2 * i] + b"\n" + _strip_ext_line(lines[2 * i + 1]) + b"\n" for i in plain)
                with forwarded_headers(auth):
                    engine = await self._engine_for_request()
                    where = path_segment(unquote(_index_of(request)), patterns=True)
                    resp = await engine.request("POST", f"/{where}/_msearch", body=body.decode(),
                                                ndjson=True, context="passing on an _msearch")
                for i, r in zip(plain, resp["responses"]):
                    answers[i] = r
            for i, task in tasks.items():
                answers[i] = await task
        finally:  # the engine refused the searches passed on, or the request timed out: stop the others
            for task in tasks.values():
                task.cancel()
            await asyncio.gather(*tasks.values(), return_exceptions=True)
        return {"took": int(round((time.perf_counter() - start) * 1000)), "responses": answers}

    async def _forward(self, request: web.Request, body: bytes | None = None) -> web.StreamResponse:
        """The cluster's answer to ``request`` (with ``body`` in place of its own, if given),
        streamed both ways."""
        from aiohttp import ClientConnectionError, ServerTimeoutError, web

        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        if body is not None:
            headers = {k: v for k, v in headers.items() if k.lower() != "content-length"}
        data: Any = body if body is not None else (request.content if request.body_exists else None)
        for attempt in range(len(self.options.urls)):
            base = next(self._urls).rstrip("/")
            try:
                upstream = await self._session.request(request.method, base + request.raw_path, headers=headers,
                                                       data=data, allow_redirects=False)
            except ClientConnectionError as err:
                if isinstance(err, ServerTimeoutError):
                    return _error_response(504, f"the cluster did not answer within {self.options.timeout:g} s "
                                                "(--timeout)", "timeout_exception")
                reached = data is None or isinstance(data, bytes)  # a streamed body cannot be sent again
                if attempt + 1 < len(self.options.urls) and reached:
                    continue
                from esbridge.engine.connection import redact_url

                return _error_response(502, f"the cluster at {redact_url(base)} could not be reached "
                                            f"({type(err).__name__})", "esbridge_engine_unavailable_exception")
            break
        try:
            response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
            for key, value in upstream.headers.items():
                if key.lower() not in HOP_BY_HOP and key.lower() != "content-length":
                    response.headers.add(key, value)
            if upstream.content_length is not None:
                response.content_length = upstream.content_length
            await response.prepare(request)
            async for chunk in upstream.content.iter_chunked(64 * 1024):
                await response.write(chunk)
            await response.write_eof()
            return response
        finally:
            upstream.release()


def _index_of(request: web.Request) -> str:
    return request.raw_path.split("?", 1)[0].strip("/").split("/")[0]


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _error_response(status: int, reason: str, error_type: str) -> web.Response:
    from aiohttp import web

    return web.json_response(error_body(status, reason, error_type), status=status, dumps=_dumps)


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


def _read_msearch(index: str, config: IndexConfig, raw: bytes,
                  params: Mapping[str, str]) -> list[SearchRequest | None | _Refused]:
    """Each search of an ``_msearch`` body: what it asks, ``None`` (pass it on), or why it is refused."""
    if params:
        raise _Refused(400, f"esbridge reranks _msearch of [{index}] without parameters; "
                            f"[{next(iter(params))}] is not supported")
    lines = [ln for ln in raw.split(b"\n") if ln.strip()]
    if len(lines) % 2:
        raise _Refused(400, "an _msearch body is pairs of lines (header, search); the last search is missing")
    out: list[SearchRequest | None | _Refused] = []
    for i in range(0, len(lines), 2):
        header = json.loads(lines[i])
        if not isinstance(header, Mapping):
            raise _Refused(400, f"line {i + 1} of the _msearch body must be a JSON object")
        if header.get("index", index) != index or any(k != "index" for k in header):
            raise _Refused(400, f"line {i + 1} of the _msearch body: esbridge reranks an _msearch of [{index}] "
                                "whose headers name no other index and no other option")
        try:
            out.append(read_search(index, config, json.loads(lines[i + 1]), {}))
        except _Refused as err:
            out.append(err)
    return out


def build_app(server: Server) -> web.Application:
    """The aiohttp application of ``server``: one handler for every method and path."""
    from aiohttp import web

    app = web.Application(client_max_size=server.max_search_body)
    app.router.add_route("*", "/{path:.*}", server.handle)
    app.on_startup.append(server.start)
    app.on_cleanup.append(server.stop)
    return app


async def serve(server: Server, host: str, port: int, *, ready: Callable[[str], None] | None = None,
                stop: asyncio.Event | None = None, shutdown_timeout: float = 30.0) -> None:
    """Serve until ``stop`` is set (by default: until SIGTERM or SIGINT), then stop taking
    connections, let the requests being answered finish (at most ``shutdown_timeout`` seconds)
    and close the cluster's connections.  ``ready`` is called with the server's URL once it listens."""
    from aiohttp import web

    runner = web.AppRunner(build_app(server), access_log=None, shutdown_timeout=shutdown_timeout,
                           handle_signals=False)
    await runner.setup()
    loop = asyncio.get_running_loop()
    signals = (signal.SIGTERM, signal.SIGINT) if stop is None else ()
    stopping = stop or asyncio.Event()
    for sig in signals:
        loop.add_signal_handler(sig, stopping.set)
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        url = f"http://{host}:{runner.addresses[0][1]}"
        log.info("listening on %s (forwarding to %s)", url, server.options.display_url)
        if ready is not None:
            ready(url)
        await stopping.wait()
        log.info("stopping: finishing the requests being answered")
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)
        await runner.cleanup()
    log.info("stopped")


# ---- the command -----------------------------------------------------------------------------

def _cmd_serve(args: argparse.Namespace, options_of: Callable[[argparse.Namespace], ConnectionOptions]) -> int:
    from esbridge.engine.transports import require_client

    require_client("aiohttp", "esbridge serve (pip install \"esbridge[serve]\")")
    if args.username is not None or args.api_key is not None:
        raise ConfigurationError("esbridge serve passes on each request's own credentials (its Authorization "
                                 "header) and holds none: leave out --username and --api-key")
    config = load_config(args.config) if args.config else ServeConfig()
    server = Server(options_of(args), config, max_concurrency=args.max_concurrency,
                    request_timeout=args.request_timeout)
    asyncio.run(serve(server, args.host, args.port, shutdown_timeout=args.shutdown_timeout))
    return 0


def add_command(sub: Any, connection_args: Callable[[argparse.ArgumentParser], None],
                options_of: Callable[[argparse.Namespace], ConnectionOptions]) -> None:
    """Register ``esbridge serve`` with the command line's sub-parsers."""
    p = sub.add_parser(
        "serve", help="serve the engine's REST API, reranking the searches of the configured indices",
        description="An HTTP server that speaks the engine's REST API: every request goes to the cluster "
                    "unchanged, except the _search and _msearch requests of the indices --config names, which "
                    "esbridge answers in the engine's response shape, reranked. Each request's Authorization "
                    "header is passed on to the cluster; the server holds no credentials. Health at "
                    "/_esbridge/health, Prometheus metrics at /_esbridge/metrics (docs/serve.md).")
    p.add_argument("--config", help="JSON file naming the reranked indices and their settings (default: none, "
                                    "every request passes through)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=9280, help="port to listen on (default 9280; 0: a free one)")
    p.add_argument("--max-concurrency", type=int, default=64,
                   help="requests answered at once; more wait their turn (default 64)")
    p.add_argument("--request-timeout", type=float, default=60.0,
                   help="seconds esbridge may take over a reranked search before answering 504 (default 60)")
    p.add_argument("--shutdown-timeout", type=float, default=30.0,
                   help="on SIGTERM or SIGINT, seconds the requests being answered may take to finish (default 30)")
    connection_args(p)
    p.set_defaults(func=lambda a: _cmd_serve(a, options_of))
