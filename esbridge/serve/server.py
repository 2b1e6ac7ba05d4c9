"""The server of ``esbridge serve``: an aiohttp application answering every request, the searches
of the configured indices reranked (:class:`Server`, :func:`build_app`, :func:`serve`)."""

from __future__ import annotations

import asyncio
import contextvars
import errno
import itertools
import json
import logging
import logging.handlers
import signal
import socket
import ssl
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from esbridge.engine.calls import first_stage_params, forwarded_headers, path_segment
from esbridge.errors import ConfigurationError, EngineError, EsbridgeError
from esbridge.serve.config import IndexConfig, ServeConfig
from esbridge.serve.metrics import Metrics
from esbridge.serve.readonly import is_read
from esbridge.serve.search import (
    MSEARCH_SEARCH_PARAMS,
    SearchRequest,
    Target,
    Unreranked,
    _engine_answer,
    _fields_of,
    _read_msearch,
    _Refused,
    _strip_ext,
    _strip_ext_line,
    _strip_msearch_ext,
    check_depth,
    engine_shaped,
    error_body,
    msearch_targets,
    read_search,
)
from esbridge.serve.shape import filter_path, render

if TYPE_CHECKING:
    from aiohttp import ClientSession, web
    from aiohttp.web import ContentCoding

    from esbridge.aio import AsyncEngine, AsyncReranker
    from esbridge.engine.client import Engine
    from esbridge.engine.connection import ConnectionOptions
    from esbridge.hybrid.pipeline import HybridSearcher

__all__ = ["Server", "build_app", "serve"]

#: The server's own lines (listening, the cluster it reranks on, stopping).
log = logging.getLogger("esbridge.serve")
#: One line per request answered: method, path (no query string), status, milliseconds, handling.
access_log = logging.getLogger("esbridge.serve.access")

#: Request headers that concern one connection only (RFC 9110 §7.6.1), not passed on; nor ``host``.
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
                        "trailers", "transfer-encoding", "upgrade", "host", "expect"})
#: The engine clients' loggers: their records hold the URLs and bodies of the requests they send
#: (query texts), so they are kept at WARNING while the server runs.
CLIENT_LOGGERS = ("opensearch", "opensearchpy.trace", "elasticsearch", "elasticsearch.trace", "elastic_transport")


def _tls_context(options: ConnectionOptions) -> ssl.SSLContext | None:
    """The TLS settings of the connections to an ``https`` cluster, as the engine clients have them."""
    if not any(u.startswith("https:") for u in options.urls):
        return None
    context = ssl.create_default_context(cafile=options.ca_certs)
    if not options.verify_certs:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


class _NotRerankable(Exception):
    """A search of a configured index esbridge cannot rerank as the index is now: the engine answers
    it (:meth:`Server._reranker`)."""


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
                 request_timeout: float = 60.0, max_search_body: int = 16 * 1024 * 1024,
                 header_timeout: float = 30.0, read_only: bool = False) -> None:
        if isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int) or max_concurrency < 1:
            raise ConfigurationError(f"--max-concurrency must be a whole number >= 1, got {max_concurrency!r}")
        if not request_timeout > 0:
            raise ConfigurationError(f"--request-timeout must be > 0 seconds, got {request_timeout}")
        if not header_timeout > 0:
            raise ConfigurationError(f"--header-timeout must be > 0 seconds, got {header_timeout}")
        # a connection to the cluster for each request answered at once
        self.options = replace(_without_credentials(options), connections=max(options.connections, max_concurrency))
        self.config = config
        self.max_concurrency = max_concurrency
        self.request_timeout = request_timeout
        #: the largest body of a search esbridge reranks (read whole); what passes through is streamed
        self.max_search_body = max_search_body
        #: seconds a connection may wait for a request's line and headers: from its opening, or from
        #: the answer to its previous request (then closed, idle or half-sent)
        self.header_timeout = header_timeout
        #: answer 403 to what is not a read (:func:`~esbridge.serve.readonly.is_read`), without asking the cluster
        self.read_only = read_only
        self.metrics = Metrics()
        self._urls = itertools.cycle(self.options.urls)
        self._limit: asyncio.Semaphore | None = None
        self._session: ClientSession | None = None
        self._engine: AsyncEngine | None = None
        self._connecting: asyncio.Lock | None = None
        #: per index and setting: the index's identity when its reranker was made, and the reranker
        self._rerankers: dict[tuple[str, IndexConfig], tuple[str, AsyncReranker]] = {}
        #: the indices esbridge cannot rerank as they are, and why (logged once)
        self._unrerankable: dict[str, str] = {}
        self._client_log_levels: dict[str, int] = {}
        #: the hybrid pipeline runs with blocking requests, on worker threads: its engine and searchers
        self._sync_engine: Engine | None = None
        self._searchers: dict[tuple[str, IndexConfig], tuple[HybridSearcher, threading.Lock]] = {}
        self._sync_lock = threading.Lock()
        #: a search never embeds documents or measures weights: one background thread prepares the
        #: searchers (their missing vectors, then their weights), one index after another
        self._preparer: ThreadPoolExecutor | None = None
        self._preparing: dict[tuple[str, IndexConfig], Future[None]] = {}

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
        if self._preparer is not None:
            self._preparer.shutdown(wait=False, cancel_futures=True)
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
                                                       fields=config.fields, build=False), threading.Lock())
            return self._searchers[key]

    def _prepare_later(self, key: tuple[str, IndexConfig], searcher: HybridSearcher, lock: threading.Lock) -> None:
        """Have the background thread prepare ``searcher`` (embed the documents without a vector, then
        measure its weights) if it needs it and is not being prepared; with the calling request's
        credentials.  Called on the worker thread of a search, after it answered."""
        if searcher.prepared():
            return
        with self._sync_lock:
            running = self._preparing.get(key)
            if running is not None and not running.done():
                return
            if self._preparer is None:
                self._preparer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="esbridge-prepare")
            context = contextvars.copy_context()  # the request's forwarded credentials
            self._preparing[key] = self._preparer.submit(context.run, self._prepare, key[0], searcher, lock)

    @staticmethod
    def _prepare(index: str, searcher: HybridSearcher, lock: threading.Lock) -> None:
        started = time.perf_counter()
        pending = searcher.vectors_pending()
        log.info("preparing the hybrid search of [%s] in the background: %s", index,
                 f"embedding {pending} documents without a vector" if pending else "measuring its strategies")
        try:
            left = searcher.build_vectors()
            with lock:  # measured on the index as the searches see it, between two of them
                if searcher.params.weighting == "calibrated":
                    searcher.calibration(may_measure=True)
        except Exception as err:  # logged; the next search of the index tries again
            log.warning("could not prepare the hybrid search of [%s]: %s", index, err)
            return
        log.info("the hybrid search of [%s] is prepared (%.0f s)%s", index, time.perf_counter() - started,
                 f"; {left} documents arrived meanwhile" if left else "")

    async def _reranked(self, index: str, config: IndexConfig,
                        attempt: Callable[[AsyncReranker], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        """``attempt`` with the reranker of ``index``.  Where one was made before, ``attempt`` runs with it
        while the index's identity is asked beside it (no wait for that request): its answer is kept
        when the index is still the one the reranker was made for, else :meth:`_reranker` makes the
        reranker again and ``attempt`` runs once more."""
        from esbridge.engine.plan import run_async
        from esbridge.index.facts import identity_plan

        held = self._rerankers.get((index, replace(config, window=1, mode="search")))
        if held is not None:
            engine = await self._engine_for_request()
            asked = asyncio.ensure_future(run_async(identity_plan(index), engine))
            answer: dict[str, Any] | None = None
            failure: ConfigurationError | EngineError | None = None
            try:
                answer = await attempt(held[1])
            except (ConfigurationError, EngineError) as err:
                failure = err  # the index may have changed: told below
            except BaseException:
                asked.cancel()
                raise
            try:
                same = (await asked)[0] == held[0]
            except (ConfigurationError, EngineError):
                same = False
            if same:
                if failure is not None:  # not the index's change: the failure stands
                    raise failure
                assert answer is not None
                return answer
        return await attempt(await self._reranker(index, config))

    async def _reranker(self, index: str, config: IndexConfig) -> AsyncReranker:
        """The reranker of ``index`` as the index is now, opened (its layout read).  The index's
        identity (the UUID of each index the name stands for) is asked at each search: a reranker
        made before the index was deleted and created again, or before an alias moved, read
        another index's layout, and is made again.

        Raises:
            _NotRerankable: the engine or esbridge cannot open the index for reranking (a missing
                or closed index, no text field esbridge can read, a configuration that does not fit it).
        """
        from esbridge.aio import AsyncReranker
        from esbridge.engine.plan import run_async
        from esbridge.index.facts import identity_plan
        from esbridge.scoring import get_scorer

        key = (index, replace(config, window=1, mode="search"))
        engine = await self._engine_for_request()
        try:
            identity, _ = await run_async(identity_plan(index), engine)
            held = self._rerankers.get(key)
            if held is not None and held[0] == identity:
                reranker = held[1]
            else:
                params = get_scorer(config.scorer).params_type(**dict(config.params)) if config.params else None
                reranker = AsyncReranker(engine, index, scorer=config.scorer, params=params, window=config.window,
                                         first_stage=config.first_stage, fields=config.fields,
                                         field_weights=dict(config.field_weights) if config.field_weights else None)
            await reranker.open()
            self._rerankers[key] = (identity, reranker)  # kept once it opened: a search may then skip this
        except (ConfigurationError, EngineError) as err:
            if isinstance(err, ConfigurationError) and self._unrerankable.get(index) != str(err):
                log.warning("searches of [%s] are answered by the engine unreranked: %s", index, err)
                self._unrerankable[index] = str(err)
            raise _NotRerankable(str(err)) from err
        if self._unrerankable.pop(index, None) is not None:
            log.info("searches of [%s] are reranked again", index)
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
            elif self.read_only and not is_read(request.method, request.raw_path):
                response = _error_response(403, f"esbridge serve runs with --read-only: [{request.method} "
                                                f"{request.path}] writes or administers the cluster; send it to the "
                                                "cluster itself, or start esbridge serve without --read-only",
                                           "esbridge_read_only_exception")
            else:
                assert self._limit is not None
                self.metrics.in_flight += 1
                try:
                    async with self._limit:
                        handling, response = await self._answer(request)
                finally:
                    self.metrics.in_flight -= 1
            if not response.prepared and _accepts_gzip(request):
                response.enable_compression(_gzip())
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

        preparing = sorted({key[0] for key, job in list(self._preparing.items()) if not job.done()})
        return web.json_response({"status": "ok", "reranked_indices": sorted(self.config.indices),
                                  "in_flight": self.metrics.in_flight, "max_concurrency": self.max_concurrency,
                                  "read_only": self.read_only, "preparing": preparing})

    def _metrics(self) -> web.StreamResponse:
        from aiohttp import web

        return web.Response(text=self.metrics.render(), content_type="text/plain",
                            headers={"X-Content-Type-Options": "nosniff"}, charset="utf-8")

    def _search_route(self, request: web.Request) -> tuple[str | None, str] | None:
        """``(index expression or None, endpoint)`` of a search that may be of a configured index
        (``/_search``, ``/<expr>/_search``, ``/_msearch``, ``/<expr>/_msearch``), else ``None``."""
        if request.method not in ("GET", "POST") or not self.config.indices:
            return None
        parts = request.raw_path.split("?", 1)[0].strip("/").split("/")
        if len(parts) == 1 and parts[0] in ("_search", "_msearch"):
            return None, parts[0]
        if len(parts) != 2 or parts[1] not in ("_search", "_msearch") or parts[0].startswith("_") \
                and parts[0] != "_all":
            return None
        return unquote(parts[0]), parts[1]

    async def _resolve(self, expr: str) -> dict[str, set[str]]:
        """What the engine resolves ``expr`` (names, wildcards, aliases, comma-separated) to: each
        index, alias or data stream it names, with the concrete indices behind it."""
        engine = await self._engine_for_request()
        try:
            got = await engine.request("GET", f"/_resolve/index/{path_segment(expr, patterns=True)}",
                                       context="resolving the indices of a search")
        except EngineError as err:
            if err.status == 404:
                return {}
            raise
        out: dict[str, set[str]] = {}
        for item in got.get("indices") or []:
            out[item["name"]] = {item["name"]}
        for item in got.get("aliases") or []:
            out[item["name"]] = set(item.get("indices") or [])
        for item in got.get("data_streams") or []:
            out[item["name"]] = set(item.get("backing_indices") or [])
        return out

    async def _msearch_targets(self, expr: str | None, config: IndexConfig | None, raw: bytes,
                               auth: Mapping[str, str]) -> tuple[dict[str, Target], bool]:
        """What each index an ``_msearch``'s searches name (in their headers, or the path's) is
        reranked as (:data:`~esbridge.serve.search.Target`), and whether any of them names a
        configured index at all."""
        names = {t for t in msearch_targets(raw) if t is not None}
        if config is None and expr is not None:
            names.add(expr)
        targets: dict[str, Target] = {}
        touched = config is not None
        with forwarded_headers(auth):
            for name in sorted(names):
                if name in self.config.indices:
                    targets[name] = (self.config.indices[name], None)
                    touched = True
                    continue
                owners, covered = await self._owners(name)
                touched = touched or bool(owners)
                targets[name] = (self.config.indices[sorted(set(owners.values()))[0]], owners) if covered \
                    else Unreranked("target_not_configured")
        if config is None and expr is None and not touched and self.config.indices:
            # searches of every index (no index named anywhere): they touch the configured ones
            touched = any(t is None for t in msearch_targets(raw))
        return targets, touched

    async def _owners(self, expr: str) -> tuple[dict[str, str], bool]:
        """For a search of ``expr``: the configured name each concrete index it names is reranked
        as, and whether every one of them is covered by a configured index or alias."""
        named = await self._resolve("*" if expr in ("", "_all") else expr)
        targets = set().union(*named.values()) if named else set()
        configured = await self._resolve(",".join(self.config.indices))
        owners: dict[str, str] = {}
        for name in self.config.indices:  # an index configured under its own name first, then aliases
            for target in sorted(configured.get(name, set()) & targets):
                if name == target or target not in owners:
                    owners[target] = name
        return owners, bool(targets) and set(owners) == targets

    async def _answer(self, request: web.Request) -> tuple[str, web.StreamResponse]:
        from aiohttp import web

        route = self._search_route(request)
        if route is None:
            return "passed_through", await self._forward(request)
        expr, endpoint = route
        index = expr or "_all"
        config = self.config.indices.get(index)
        owners: dict[str, str] | None = None
        auth = {k.lower(): v for k, v in request.headers.items() if k.lower() == "authorization"}
        if config is None and endpoint == "_search":
            # several indices, a wildcard, an alias: reranked where every index named is configured
            try:
                with forwarded_headers(auth):
                    owners, covered = await self._owners(index)
            except EsbridgeError as err:
                status, error = _engine_answer(err)
                return "reranked", self._json(request, error, status)
            if not owners:
                return "passed_through", await self._forward(request)
            if not covered:
                why = Unreranked("target_not_configured")
                if expr is None and request.body_exists:  # a point in time names no index: say so
                    try:
                        raw = await request.read()
                        body = json.loads(raw) if raw.strip() else None
                    except (web.HTTPRequestEntityTooLarge, ValueError, RecursionError):
                        return "unreranked", await self._unreranked(request, why, None)
                    if isinstance(body, Mapping) and body.get("pit") is not None:
                        why = Unreranked("pit")
                    return "unreranked", await self._unreranked(request, why, raw)
                return "unreranked", await self._unreranked(request, why, None)
            config = self.config.indices[sorted(set(owners.values()))[0]]
        if config is None and (request.content_length or 0) > self.max_search_body:
            return "passed_through", await self._forward(request)  # an _msearch too large to read: streamed
        try:
            raw = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return "reranked", self._json(request, error_body(
                413, f"the body of a search esbridge reranks may hold at most {self.max_search_body} bytes",
                "illegal_argument_exception"), 413)
        try:
            check_depth(raw)
            if endpoint == "_search":
                body = json.loads(raw) if raw.strip() else None
                assert config is not None
                req = read_search(index, config, body, request.query)
                if isinstance(req, SearchRequest) and owners is not None:
                    req.owners = owners
                    req.configs = {name: self.config.indices[name] for name in set(owners.values())}
                if req is None:
                    return "passed_through", await self._forward(request, _strip_ext(body) or raw)
                if isinstance(req, Unreranked):
                    return "unreranked", await self._unreranked(request, req, _strip_ext(body) or raw)
                try:
                    answer: Any = await asyncio.wait_for(self._search(req, auth), self.request_timeout)
                except _NotRerankable:
                    return "unreranked", await self._unreranked(request, Unreranked("index_not_rerankable"),
                                                                _strip_ext(body) or raw)
                notes = (answer.get("_esbridge") or {}).get("notes") if isinstance(answer, Mapping) else None
                if notes:  # e.g. a cold index answered without its vectors
                    return "reranked", self._json(request, answer, headers={
                        "X-Esbridge-Reranked": "true",
                        "X-Esbridge-Notes": ",".join(sorted({str(n).split(":", 1)[0] for n in notes}))})
            else:
                targets, touched = await self._msearch_targets(expr, config, raw, auth)
                searches = _read_msearch(expr, config, raw, request.query, targets)
                for s in searches:
                    if isinstance(s, SearchRequest) and s.owners is not None:
                        s.configs = {name: self.config.indices[name] for name in set(s.owners.values())}
                if not any(isinstance(s, (SearchRequest, _Refused)) for s in searches):
                    said = self._msearch_said(searches, touched)
                    return ("unreranked" if said else "passed_through"), await self._forward(
                        request, _strip_msearch_ext(raw), extra_headers=said)
                answer = await asyncio.wait_for(self._msearch(request, searches, raw, auth), self.request_timeout)
                return "reranked", self._json(request, answer, headers=self._msearch_said(searches, touched))
            return "reranked", self._json(request, answer, headers={"X-Esbridge-Reranked": "true"})
        except json.JSONDecodeError as err:
            refused = _Refused(400, f"the search body is not valid JSON: {err}", "parsing_exception")
        except RecursionError:  # not expected within MAX_BODY_DEPTH: answered as a body nested too deep
            refused = _Refused(400, "the search body nests objects and arrays too deep for esbridge to read: send a "
                                    "flatter body", "parsing_exception")
        except _Refused as err:
            refused = err
        except asyncio.TimeoutError:
            refused = _Refused(504, f"esbridge did not answer the search of [{index}] within "
                                    f"{self.request_timeout:g} s (--request-timeout)", "timeout_exception")
        except EsbridgeError as err:
            status, body = _engine_answer(err)
            return "reranked", self._json(request, body, status)
        return "reranked", self._json(request, error_body(refused.status, refused.reason, refused.error_type),
                                      refused.status)

    def _msearch_said(self, searches: list[Any], touched: bool) -> dict[str, str]:
        """The headers of an ``_msearch`` that touched a configured index (none otherwise), its
        searches not reranked counted by reason."""
        if not touched:
            return {}
        for s in searches:
            if isinstance(s, Unreranked):
                self.metrics.unreranked(s.reason)
        return _msearch_headers(searches)

    def _json(self, request: web.Request, body: Any, status: int = 200,
              headers: Mapping[str, str] | None = None) -> web.Response:
        """esbridge's answer to ``request`` as the engine would give it: ``filter_path`` applied to a
        success (the engine leaves errors whole), indented with ``pretty``."""
        from aiohttp import web

        if status == 200 and "filter_path" in request.query and isinstance(body, Mapping):
            body = filter_path(body, request.query["filter_path"])
        return web.Response(text=render(body, request.query), status=status, content_type="application/json",
                            headers={**self._product_headers(), **(headers or {})})

    async def _unreranked(self, request: web.Request, why: Unreranked, body: bytes | None) -> web.StreamResponse:
        """The engine's answer to a search of a reranked index that is not reranked (its order is the
        user's, it has no text to score by, ...), with the headers saying so; counted by reason."""
        self.metrics.unreranked(why.reason)
        return await self._forward(request, body, extra_headers=why.headers)

    def _product_headers(self) -> dict[str, str]:
        """What the cluster's clients check a response by (the Elasticsearch clients 7.14+ refuse
        an answer without ``X-Elastic-Product``)."""
        if self._engine is not None and self._engine.info.distribution == "elasticsearch":
            return {"X-Elastic-Product": "Elasticsearch"}
        return {}

    async def _search(self, req: SearchRequest, auth: Mapping[str, str]) -> dict[str, Any]:
        """A search answered reranked: by esbridge's own first stage (``search`` mode, or the hybrid
        pipeline), or by the rule (``rescore`` mode): the engine's answer to the request's own search,
        its top ``window`` hits reranked."""
        start = time.perf_counter()
        wanted = req.from_ + req.size
        with forwarded_headers(auth):
            if req.config.mode != "search":
                return engine_shaped(await self._rescored(req), req, time.perf_counter() - start)
            fields = _fields_of(req.source)
            if req.config.pipeline is not None:
                assert req.text is not None
                query = req.text

                def hybrid() -> dict[str, Any]:
                    config = replace(req.config, window=1)
                    searcher, lock = self._searcher(req.index, config)
                    with lock:
                        answer = searcher.search(query, size=wanted, filter=req.filter or None, fields=fields,
                                                 explain=req.explain)
                    self._prepare_later((req.index, config), searcher, lock)
                    return answer

                with first_stage_params(req.params):
                    response = await asyncio.to_thread(hybrid)
                return engine_shaped(response, req, time.perf_counter() - start)
            reranker = await self._reranker(req.index, req.config)
            assert req.text is not None
            with first_stage_params(req.params):
                response = await reranker.search(req.text, size=wanted, filter=req.filter or None,
                                                 fields=fields, explain=req.explain,
                                                 window=max(req.window, wanted))
        return engine_shaped(response, req, time.perf_counter() - start)

    async def _rescored(self, req: SearchRequest) -> dict[str, Any]:
        """The rule: the engine runs the request's own search (its query, filters, aggregations,
        highlighting, ...) for the top ``window`` hits (``from + size`` where that is more, within the
        index's ``max_result_window``), and esbridge reranks the top ``window``; the hits beyond keep
        the engine's order."""
        names = sorted(set(req.owners.values())) if req.owners else [req.index]
        # one configured name: its configuration as the request set it (ext.esbridge); several: each its own
        configs = req.configs if req.configs and len(names) > 1 else {names[0]: req.config}
        wanted = req.from_ + req.size
        body = dict(req.body)
        body.pop("sort", None)  # by _score only (any other sort is answered unreranked)
        body["from"] = 0
        explain = req.explain or req.engine_explain
        if len(names) == 1 and req.text is not None:
            text = req.text

            async def one(reranker: AsyncReranker) -> dict[str, Any]:
                fetch = max(req.window, wanted)
                if fetch > wanted:
                    fetch = max(wanted, min(fetch, await reranker.max_result_window()))
                return await reranker.search_rescored({**body, "size": fetch if wanted else 0}, text,
                                                      window=min(req.window, fetch), params=req.params or None,
                                                      explain=explain, page=(req.from_, req.size))

            return await self._reranked(names[0], configs[names[0]], one)
        rerankers = {name: await self._reranker(name, configs[name]) for name in names}
        fetch = max(req.window, wanted)
        if fetch > wanted:
            limits = [await r.max_result_window() for r in rerankers.values()]
            fetch = max(wanted, min(fetch, *limits))
        body["size"] = fetch if wanted else 0
        engine = await self._engine_for_request()
        first = await engine.search(req.index, body, params=req.params or None)
        if req.text is None or not first.get("hits", {}).get("hits"):
            return first
        window = min(req.window, fetch)
        if len(names) == 1:
            return await rerankers[names[0]].rescore(first, req.text, window=window, explain=explain)
        # several indices: each one's hits in the window scored by its own reranker, merged by score
        assert req.owners is not None
        hits = first["hits"]["hits"]
        head: list[tuple[float, int, dict[str, Any]]] = []
        for name, reranker in rerankers.items():
            mine = [(i, h) for i, h in enumerate(hits[:window]) if req.owners.get(h.get("_index", "")) == name]
            if not mine:
                continue
            got = await reranker.rescore({**first, "hits": {**first["hits"], "hits": [h for _, h in mine]}},
                                         req.text, window=len(mine), explain=explain)
            rank = {(h.get("_index"), h["_id"]): i for i, h in mine}
            head += [(float(h["_score"]), rank[(h.get("_index"), h["_id"])], h) for h in got["hits"]["hits"]]
        head.sort(key=lambda item: (-item[0], item[1]))
        out = dict(first)
        out["hits"] = {**first["hits"], "hits": [h for _, _, h in head] + hits[window:]}
        out["hits"]["max_score"] = head[0][0] if head else first["hits"].get("max_score")
        return out

    async def _msearch(self, request: web.Request, searches: list[SearchRequest | Unreranked | None | _Refused],
                       raw: bytes, auth: Mapping[str, str]) -> dict[str, Any]:
        """Each search of an ``_msearch`` answered as ``_search`` would be, concurrently (at most
        ``max_concurrent_searches`` at once, if given); those that ask not to be reranked, or that
        esbridge cannot rerank, go to the engine in an ``_msearch`` of their own.  A search found
        not rerankable is marked so in ``searches`` (``index_not_rerankable``)."""
        start = time.perf_counter()
        lines = [ln for ln in raw.split(b"\n") if ln.strip()]
        at_once = request.query.get("max_concurrent_searches", "")
        limit = asyncio.Semaphore(int(at_once) if at_once.isdigit() and int(at_once) > 0 else len(searches) or 1)

        async def one(i: int, s: SearchRequest) -> dict[str, Any] | None:
            try:
                async with limit:
                    out = await self._search(s, auth)
                out["status"] = 200
                return out
            except _NotRerankable:
                searches[i] = Unreranked("index_not_rerankable")
                return None
            except _Refused as err:
                return error_body(err.status, err.reason, err.error_type)
            except EsbridgeError as err:
                status, body = _engine_answer(err)
                return {**body, "status": status} if isinstance(body, Mapping) else error_body(status, str(err),
                                                                                              "esbridge_exception")

        async def pass_on(which: list[int]) -> None:
            body = b"".join(lines[2 * i] + b"\n" + _strip_ext_line(lines[2 * i + 1]) + b"\n" for i in which)
            with forwarded_headers(auth):
                engine = await self._engine_for_request()
                path = request.raw_path.split("?", 1)[0].rstrip("/")
                where = path.removesuffix("/_msearch").strip("/")
                where = f"/{path_segment(unquote(where), patterns=True)}" if where else ""
                params = {k: v for k, v in request.query.items()
                          if k in MSEARCH_SEARCH_PARAMS or k == "max_concurrent_searches"}
                resp = await engine.request("POST", f"{where}/_msearch", body=body.decode(), ndjson=True,
                                            params=params, context="passing on an _msearch")
            for i, r in zip(which, resp["responses"]):
                answers[i] = r

        plain = [i for i, s in enumerate(searches) if s is None or isinstance(s, Unreranked)]
        answers: list[Any] = [None] * len(searches)
        tasks = {i: asyncio.ensure_future(one(i, s)) for i, s in enumerate(searches) if isinstance(s, SearchRequest)}
        for i, s in enumerate(searches):
            if isinstance(s, _Refused):
                answers[i] = error_body(s.status, s.reason, s.error_type)
        try:
            if plain:
                await pass_on(plain)
            for i, task in tasks.items():
                answers[i] = await task
            late = [i for i in tasks if answers[i] is None]
            if late:
                await pass_on(late)
        finally:  # the engine refused the searches passed on, or the request timed out: stop the others
            for task in tasks.values():
                task.cancel()
            await asyncio.gather(*tasks.values(), return_exceptions=True)
        return {"took": int(round((time.perf_counter() - start) * 1000)), "responses": answers}

    async def _forward(self, request: web.Request, body: bytes | None = None,
                       extra_headers: Mapping[str, str] | None = None) -> web.StreamResponse:
        """The cluster's answer to ``request`` (with ``body`` in place of its own, if given),
        streamed both ways.  A node that cannot be reached passes the request on to the next, its
        streamed body too where no connection was made (nothing of the body read yet)."""
        from aiohttp import ClientConnectionError, ClientConnectorError, ServerTimeoutError, web

        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        if body is not None or _decoded(request):
            # a body of esbridge's own, or the client's as aiohttp decompressed it: of another length, plain
            headers = {k: v for k, v in headers.items() if k.lower() not in ("content-length", "content-encoding")}
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
                # the next node, where the request can be sent again whole: one without a body, or with
                # esbridge's own; a streamed body only where the connection could not be made (none of
                # it was read), never once part of it may have gone to a node
                again = data is None or isinstance(data, bytes) or isinstance(err, ClientConnectorError)
                if attempt + 1 < len(self.options.urls) and again:
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
            for key, value in (extra_headers or {}).items():
                response.headers[key] = value
            has_body = request.method != "HEAD" and upstream.status >= 200 and upstream.status not in (204, 304)
            if has_body and upstream.content_length != 0 and "content-encoding" not in upstream.headers \
                    and _accepts_gzip(request):
                response.enable_compression(_gzip())  # the cluster's answer was not compressed: gzip it here
            elif upstream.content_length is not None:
                response.content_length = upstream.content_length
            await response.prepare(request)
            async for chunk in upstream.content.iter_chunked(64 * 1024):
                await response.write(chunk)
            await response.write_eof()
            return response
        finally:
            upstream.release()


#: The request bodies aiohttp decompresses as it reads them (its ``Content-Encoding`` values).
DECODED_ENCODINGS = frozenset({"gzip", "deflate", "br", "zstd"})


def _decoded(request: web.Request) -> bool:
    """Whether aiohttp decompressed ``request``'s body (its ``Content-Encoding``): what is read from
    it is then the plain body."""
    return request.headers.get("Content-Encoding", "").strip().lower() in DECODED_ENCODINGS


def _accepts_gzip(request: web.Request) -> bool:
    """Whether the client takes a gzip-compressed answer (``Accept-Encoding: gzip``, not with ``q=0``)."""
    for item in request.headers.get("Accept-Encoding", "").split(","):
        name, _, params = item.partition(";")
        if name.strip().lower() in ("gzip", "x-gzip", "*"):
            q = params.strip().lower().removeprefix("q=").strip()
            try:
                return not params.strip() or float(q) > 0
            except ValueError:
                return True
    return False


def _gzip() -> ContentCoding:
    from aiohttp.web import ContentCoding

    return ContentCoding.gzip


def _msearch_headers(searches: list[Any]) -> dict[str, str]:
    """The headers of an ``_msearch`` answer: for each search in turn, whether it was reranked
    (``X-Esbridge-Reranked``) and, where it was not, why (``X-Esbridge-Reason``, ``-`` for one reranked)."""
    return {"X-Esbridge-Reranked": ",".join("false" if isinstance(s, Unreranked) or s is None else "true"
                                            for s in searches),
            "X-Esbridge-Reason": ",".join(s.reason if isinstance(s, Unreranked) else "rerank_false" if s is None
                                          else "-" for s in searches)}


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _error_response(status: int, reason: str, error_type: str) -> web.Response:
    from aiohttp import web

    return web.json_response(error_body(status, reason, error_type), status=status, dumps=_dumps)


def _version(text: str) -> tuple[int, ...]:
    """``"3.14.4"`` as ``(3, 14, 4)`` (a pre-release's suffix left out)."""
    parts = []
    for part in text.split(".")[:3]:
        digits = "".join(itertools.takewhile(str.isdigit, part))
        parts.append(int(digits or 0))
    return tuple(parts)


def _listen_error(host: str, port: int, err: OSError) -> str:
    """Why the server cannot listen on ``host:port``, and what to do, in one line."""
    if err.errno == errno.EADDRINUSE:
        return (f"port {port} on {host} is already in use (another esbridge serve, the engine, or another "
                "program listens there): stop that program, or give another --port (--port 0 takes a free one)")
    if err.errno == errno.EACCES:
        return (f"no permission to listen on port {port} of {host} (ports below 1024 need administrator rights): "
                "give a --port of 1024 or more")
    if err.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT) or isinstance(err, socket.gaierror):
        return (f"cannot listen on {host}: it is not an address of this machine ({err.strerror or err}); "
                "give --host an address of this machine, e.g. 127.0.0.1 or 0.0.0.0")
    return f"cannot listen on {host}:{port}: {err.strerror or err}"


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
    import aiohttp
    from aiohttp import web

    if _version(aiohttp.__version__) < (3, 14, 4):
        log.warning("aiohttp %s does not time out a connection that has not sent its first request: "
                    "--header-timeout applies only after a first answer (pip install -U \"aiohttp>=3.14.4\")",
                    aiohttp.__version__)
    # aiohttp's keep-alive timeout closes a connection whose handler has waited that long for a
    # request's head (none, or part of one) since the connection opened or its last answer
    runner = web.AppRunner(build_app(server), access_log=None, shutdown_timeout=shutdown_timeout,
                           handle_signals=False, keepalive_timeout=server.header_timeout)
    await runner.setup()
    loop = asyncio.get_running_loop()
    lines_off_loop = _log_off_loop(access_log)
    signals = (signal.SIGTERM, signal.SIGINT) if stop is None else ()
    stopping = stop or asyncio.Event()
    for sig in signals:
        loop.add_signal_handler(sig, stopping.set)
    try:
        site = web.TCPSite(runner, host, port)
        try:
            await site.start()
        except OSError as err:
            raise ConfigurationError(_listen_error(host, port, err)) from None
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
        if lines_off_loop is not None:
            lines_off_loop()  # the lines still queued are written first
    log.info("stopped")


def _log_off_loop(logger: logging.Logger) -> Callable[[], None] | None:
    """The lines of ``logger`` (one per request answered) written by a thread of their own: a
    handler that blocks (a full pipe, a slow disk) never holds up the event loop.  The handlers its
    records reach are read once.  Returns what writes the lines still queued and puts the logger
    back as it was; ``None`` where its records reach no handler (nothing is written)."""
    import queue
    from logging.handlers import QueueHandler, QueueListener

    handlers: list[logging.Handler] = []
    current: logging.Logger | None = logger
    while current is not None:
        handlers += current.handlers
        current = current.parent if current.propagate else None
    if not handlers:
        return None
    own, propagate = list(logger.handlers), logger.propagate
    lines: queue.SimpleQueue[logging.LogRecord] = queue.SimpleQueue()
    listener = QueueListener(lines, *handlers, respect_handler_level=True)
    logger.handlers = [QueueHandler(lines)]
    logger.propagate = False
    listener.start()

    def stop() -> None:
        listener.stop()
        logger.handlers, logger.propagate = own, propagate

    return stop
