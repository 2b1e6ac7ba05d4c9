"""One :class:`Engine` over OpenSearch and Elasticsearch.

The engine is identified from ``GET /`` (or, on a server without that endpoint,
such as Elasticsearch's minimal distribution, from ``GET /_nodes/_local``) and
driven through the official client that matches it (:mod:`esbridge.engine.transports`):
``opensearch-py`` for OpenSearch, ``elasticsearch7`` for Elasticsearch 7.x, ``elasticsearch``
for Elasticsearch 8.x and 9.x.  How it is reached is a :class:`ConnectionOptions`
(:mod:`esbridge.engine.connection`).

Every request goes through :meth:`Engine.request`, which retries 429, 502, 503,
504 and connection errors with exponential backoff and turns engine errors into
:class:`~esbridge.errors.EngineError` with the engine's type and reason
(:mod:`esbridge.engine.calls`).  Given several nodes' URLs (:attr:`ConnectionOptions.urls`),
the client library fails a request over to the next node at once when one cannot be reached;
esbridge's back-off comes only after every node failed.
"""

from __future__ import annotations

import inspect
import logging
import random
import time
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from esbridge.engine.calls import (
    analyze_plan,
    check_index_name,
    engine_error,
    identify_plan,
    path_segment,
    request_target,
    scroll_call,
    scroll_clear_call,
    scroll_next_call,
    search_plan,
    usable_answer,
)
from esbridge.engine.connection import ConnectionOptions, Distribution, EngineInfo
from esbridge.engine.plan import Call, run
from esbridge.engine.transports import (
    _BadAnswer,
    _BadRequest,
    _client_transport,
    _client_url,
    _Elasticsearch7Transport,
    _ElasticsearchTransport,
    _HttpError,
    _OpenSearchTransport,
    _tls_problem,
    _Transport,
    _Unreachable,
    bad_answer_error,
    bad_request_error,
    client_installed,
    require_client,
    unavailable_error,
    warn_newer_client,
)
from esbridge.errors import ConfigurationError, EngineError, EngineUnavailableError, IndexNotFoundError

__all__ = ["RETRY_STATUSES", "ConnectionOptions", "Engine", "EngineBase", "backoff_wait", "probe_options",
           "sync_engine"]

log = logging.getLogger(__name__)


#: Statuses worth retrying: the engine asked us to slow down or is not ready.
RETRY_STATUSES = frozenset({429, 502, 503, 504})


def probe_options(options: ConnectionOptions) -> ConnectionOptions:
    """The options of the request that identifies the engine (at most 2 retries, to the URLs
    given: the nodes are discovered once the engine is known)."""
    from dataclasses import replace

    return replace(options, max_retries=min(options.max_retries, 2), sniff=False)


def backoff_wait(delay: float) -> float:
    """Seconds to wait before a retry whose nominal delay is ``delay`` (capped at 30 s, with jitter)."""
    return min(30.0, delay) * (0.5 + random.random())


class EngineBase:
    """What the synchronous :class:`Engine` and :class:`~esbridge.engine.async_client.AsyncEngine`
    share: how the cluster is reached and what it is."""

    def __init__(self, options: ConnectionOptions, info: EngineInfo) -> None:
        self.options = options
        self.info = info
        #: the cluster did not answer the last request through its retries: a connection error
        #: is then not retried (each node the client knows is tried once), until it answers
        self._down = False

    @property
    def distribution(self) -> Distribution:
        return self.info.distribution

    def _attempts(self, method: str, path: str, *, context: str, retry: bool) -> Generator[Step, Any, Any]:
        """The retry policy of one request, written once for both engines: a generator of the steps
        it takes (:class:`Perform` the request, :class:`ProbeTls` after a connection error,
        :class:`Wait` before the next attempt), which :meth:`Engine.request` and
        :meth:`AsyncEngine.request <esbridge.engine.async_client.AsyncEngine.request>` carry out,
        sending each step's result back in or throwing its exception in; it returns the answer or
        raises the typed error."""
        attempts = 1 + (self.options.max_retries if retry else 0)
        delay = self.options.backoff
        for attempt in range(attempts):
            last = attempt == attempts - 1
            try:
                answer = yield Perform()
                self._down = False
                if usable_answer(path, answer, final=last or not retry, context=context):
                    return answer
                log.debug("shards failed; retrying %s %s", method, path)
            except _Unreachable as err:
                give_up = last or self._down
                tls = yield ProbeTls(err, probe=give_up)
                if give_up or tls is not None:
                    if not last:
                        log.debug("not retrying %s %s: the engine did not answer the last request either",
                                  method, path)
                    self._down = self._down or retry
                    raise unavailable_error(self.options, err, context, tls) from err
            except _HttpError as err:
                self._down = False
                if err.status not in RETRY_STATUSES or last:
                    raise engine_error(err.status, err.body, context=context) from err
            except _BadAnswer as err:
                raise bad_answer_error(method, path, err, context) from err
            except _BadRequest as err:
                raise bad_request_error(method, path, err, context) from err
            wait = backoff_wait(delay)
            log.debug("engine busy or unreachable; retrying %s %s in %.1fs", method, path, wait)
            yield Wait(wait)
            delay *= 2
        raise AssertionError("unreachable")  # pragma: no cover


@dataclass(frozen=True)
class Perform:
    """A step of :meth:`EngineBase._attempts`: send the request (its result: the parsed answer)."""


@dataclass(frozen=True)
class ProbeTls:
    """A step of :meth:`EngineBase._attempts`: what TLS problem explains the connection error ``error``
    (its result: a sentence, or ``None``); ``probe``: a TLS handshake with the node may tell."""

    error: Exception
    probe: bool


@dataclass(frozen=True)
class Wait:
    """A step of :meth:`EngineBase._attempts`: sleep this many seconds (no result)."""

    seconds: float


#: What :meth:`EngineBase._attempts` asks its engine to do.
Step = Perform | ProbeTls | Wait


def advance(steps: Generator[Step, Any, Any], result: Any, failure: BaseException | None) -> tuple[Step | None, Any]:
    """The policy's next step, given the last step's ``result`` (or its ``failure``, thrown in): ``(step,
    None)``, or ``(None, answer)`` once the policy returned (what it raises goes through)."""
    try:
        return (steps.throw(failure) if failure is not None else steps.send(result)), None
    except StopIteration as done:
        return None, done.value


def sync_engine(engine: EngineBase) -> Engine:
    """``engine`` for a synchronous call; a clear error for an asynchronous engine.

    Raises:
        ConfigurationError: ``engine`` is an :class:`~esbridge.engine.async_client.AsyncEngine`.
    """
    if inspect.iscoroutinefunction(getattr(engine, "request", None)):
        raise ConfigurationError(f"{type(engine).__name__} is asynchronous; this call needs a synchronous "
                                 "Engine (or use esbridge.aio's asynchronous API)")
    return engine  # type: ignore[return-value]


class Engine(EngineBase):
    """A connection to one OpenSearch or Elasticsearch cluster.

    Use :meth:`connect`; the engine is identified from ``GET /`` and the client
    matching it is chosen.  All calls go through :meth:`request`.
    """

    def __init__(self, options: ConnectionOptions, info: EngineInfo, transport: _Transport,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        super().__init__(options, info)
        self._transport = transport
        self._sleep = sleep

    @classmethod
    def connect(cls, options: ConnectionOptions | str | Sequence[str] | Any) -> Engine:
        """Connect to the cluster at ``options`` (or a URL, comma-separated URLs or a list of
        URLs of its nodes) and identify it; a client object is used as it is (:meth:`from_client`).

        Nothing is started: the cluster must be running.  :func:`esbridge.connect`
        (:func:`esbridge.nodes.provision.connect`) is the one that may start a local node.

        Raises:
            EngineUnavailableError: nothing answered at the URLs.
            UnsupportedEngineError: the server is not OpenSearch or Elasticsearch >= 7.
        """
        if not isinstance(options, (str, list, tuple, ConnectionOptions)):
            return cls.from_client(options)
        if not isinstance(options, ConnectionOptions):
            options = ConnectionOptions(urls=options)
        probing = probe_options(options)
        probe = _OpenSearchTransport(probing)
        probe_engine = cls(probing, EngineInfo("opensearch", (0, 0, 0), "", "", ""), probe)
        try:
            info = run(identify_plan(f"identifying the engine at {options.display_url}"), probe_engine)
        finally:
            probe.close()
        transport: _Transport
        if info.distribution == "opensearch":
            transport = _OpenSearchTransport(options)
        elif info.version[0] == 7:
            # the 7.x client where installed; opensearch-py (the same 7.10 lineage) otherwise
            transport = (_Elasticsearch7Transport(options) if client_installed("elasticsearch7")
                         else _OpenSearchTransport(options))
        else:
            require_client("elasticsearch", f"{info.label} at {options.display_url}")
            transport = _ElasticsearchTransport(options, info.version[0])
        log.debug("connected to %s at %s", info.label, options.display_url)
        return cls(options, info, transport)

    @classmethod
    def from_client(cls, client: Any, *, max_retries: int = 5, backoff: float = 0.5) -> Engine:
        """Use a client the caller built (custom transport, AWS SigV4 signing, ``cloud_id``,
        connection pools): an ``opensearchpy.OpenSearch``, an ``elasticsearch.Elasticsearch``
        (8/9) or an ``elasticsearch7.Elasticsearch``.  esbridge sends its requests through it and
        never closes it; its own retry settings apply on top of the client's.

        An ``elasticsearch`` client of a later major version than the server works for esbridge
        (its requests carry the server's compatibility headers), but the server refuses the
        client's own calls: a warning names the client to install.

        Raises:
            ConfigurationError: ``client`` is none of those (or an asynchronous one), or refuses the
                server (an ``elasticsearch`` 8/9 client and OpenSearch or Elasticsearch before 7.14).
        """
        transport = _client_transport(client)
        options = ConnectionOptions(url=_client_url(client), max_retries=max_retries, backoff=backoff)
        probe = cls(options, EngineInfo("opensearch", (0, 0, 0), "", "", ""), transport)
        where = f"identifying the engine of the given {type(client).__name__} client"
        info = run(identify_plan(where, es7_client=isinstance(transport, _Elasticsearch7Transport)), probe)
        if isinstance(transport, _ElasticsearchTransport):
            transport.server_major = info.version[0]
            warn_newer_client(info)
        return cls(options, info, transport)

    def close(self) -> None:
        """Close the connections esbridge opened (a client passed in by the caller stays open)."""
        self._transport.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def plugins(self) -> frozenset[str]:
        """Names and class names of the plugins every node of the cluster has (asked once)."""
        cached: frozenset[str] | None = getattr(self, "_plugins", None)
        if cached is None:
            resp = self.request("GET", "/_nodes/plugins", params={"filter_path": "nodes.*.plugins"},
                                context="listing the cluster's plugins")
            per_node = [{v for p in (n.get("plugins") or []) for v in (p.get("name"), p.get("classname")) if v}
                        for n in (resp.get("nodes") or {}).values()]
            cached = frozenset(set.intersection(*per_node)) if per_node else frozenset()
            self._plugins = cached
        return cached

    def has_painless(self) -> bool:
        """Whether the cluster runs Painless scripts (``GET /_script_language``, asked once).

        Elasticsearch's minimal distribution (the ``elasticsearch8`` local node) has no
        lang-painless module; an engine too old to answer is taken to have it."""
        cached: bool | None = getattr(self, "_painless", None)
        if cached is None:
            try:
                resp = self.request("GET", "/_script_language", context="listing the cluster's script languages")
                cached = any(c.get("language") == "painless" for c in resp.get("language_contexts") or [])
            except EngineError as err:
                if isinstance(err, EngineUnavailableError) or err.status not in (400, 404, 405):
                    raise
                cached = True
            self._painless = cached
        return cached

    def vector_search(self) -> str | None:
        """How esbridge keeps document vectors in this cluster: ``"knn_vector"`` (OpenSearch with
        its k-NN plugin, Lucene HNSW), ``"dense_vector"`` (Elasticsearch 8.12 and later: HNSW,
        and the ``knn`` query over nested passages) or ``None`` (esbridge keeps them on disk and
        searches them exactly)."""
        if self.distribution == "opensearch":
            names = self.plugins()
            if "opensearch-knn" in names or "org.opensearch.knn.plugin.KNNPlugin" in names:
                return "knn_vector"
        elif self.distribution == "elasticsearch" and tuple(self.info.version[:2]) >= (8, 12):
            return "dense_vector"
        return None

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
        ndjson: bool = False,
        context: str = "",
        retry: bool = True,
    ) -> Any:
        """Send one request; retry what is worth retrying; raise typed errors.

        Args:
            method: HTTP method.
            path: path below the base URL, starting with ``/``.
            params: query-string parameters.
            body: a JSON-serialisable body, or for ``ndjson`` the NDJSON text.
            ndjson: send ``body`` as ``application/x-ndjson`` (bulk, msearch).
            context: what the call is for, put in front of error messages.
            retry: retry 429/502/503/504, connection errors, and searches and counts some of
                whose shards failed.  A connection error is not retried while the cluster did
                not answer the previous request through its retries: it fails at once (each node
                tried once) until the cluster answers again.

        Searches, counts and term-vector and multi-get reads carry
        :attr:`ConnectionOptions.preference` unless ``params`` gives one.  An answer some of
        whose shards failed (``_shards.failed``; for ``_msearch``, in any of its responses)
        is never returned: it lacks those shards' documents, so a ranking made from it would
        be wrong.

        Raises:
            EngineUnavailableError: the engine could not be reached after the retries.
            EngineError: the engine answered with an error (typed, with its reason), or
                shards failed (``error_type`` ``"shard_failure"``, status 503).
        """
        path, headers = request_target(path, params, ndjson, self.options.preference)
        steps = self._attempts(method, path, context=context, retry=retry)
        result: Any = None
        failure: BaseException | None = None
        while True:
            step, answer = advance(steps, result, failure)
            if step is None:
                return answer
            result, failure = None, None
            try:
                if isinstance(step, Perform):
                    result = self._transport.perform(method, path, None, body, headers)
                elif isinstance(step, ProbeTls):
                    result = _tls_problem(self.options, step.error, probe=step.probe)
                else:
                    self._sleep(step.seconds)
            except Exception as err:  # thrown into the policy, which decides
                failure = err

    # ---- small helpers used across the package --------------------------------

    def index_exists(self, index: str) -> bool:
        """Whether ``index`` (or an alias of that name) exists."""
        where = f"/{path_segment(index, patterns=True)}"
        context = f"checking index {index!r}"
        try:
            found = self.request("HEAD", where, context=context)
        except IndexNotFoundError:
            return False
        except EngineError as err:
            if err.status == 404:
                return False
            if err.reason is None and not isinstance(err, EngineUnavailableError):
                # the answer to a HEAD request has no body: the engine's reason comes with a GET
                self.request("GET", where, params={"filter_path": "*.settings.index.uuid"}, context=context)
            raise
        return found is not False  # some clients answer HEAD with a bool

    def refresh(self, index: str) -> None:
        self.request("POST", f"/{path_segment(index, patterns=True)}/_refresh",
                     context=f"refreshing index {index!r}")

    def delete_index(self, index: str, *, missing_ok: bool = True) -> None:
        """Delete one index, named exactly: patterns, lists and ``_all`` are refused."""
        check_index_name(index, what="index to delete")
        try:
            self.request("DELETE", f"/{path_segment(index)}", context=f"deleting index {index!r}")
        except IndexNotFoundError:
            if not missing_ok:
                raise

    def count(self, index: str, query: Mapping[str, Any] | None = None) -> int:
        body = {"query": query} if query is not None else None
        resp = self.request("POST", f"/{path_segment(index, patterns=True)}/_count", body=body,
                            context=f"counting {index!r}")
        return int(resp["count"])

    def analyze(self, index: str, text: str, *, field: str | None = None,
                analyzer: str | None = None) -> list[str]:
        """Tokens of ``text`` as the index's analyzer for ``field`` (or ``analyzer``) emits them."""
        return run(analyze_plan(index, text, field=field, analyzer=analyzer), self)

    def search(self, index: str, body: Mapping[str, Any], *,
               params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return run(search_plan(index, body, params=params), self)


    def scroll(self, index: str, body: Mapping[str, Any], *, page: int = 2000,
               context: str = "") -> Iterator[dict[str, Any]]:
        """Every hit of ``body``'s query over ``index``, in index order, a scroll page at a time
        (the scroll is cleared when the iteration ends or is abandoned)."""
        what = context or f"reading the documents of {index!r}"
        resp = self.perform(scroll_call(index, body, page=page, context=what))
        scroll_id = resp.get("_scroll_id")
        try:
            while resp["hits"]["hits"]:
                yield from resp["hits"]["hits"]
                resp = self.perform(scroll_next_call(scroll_id, context=what))
                scroll_id = resp.get("_scroll_id", scroll_id)
        finally:
            if scroll_id:
                self.perform(scroll_clear_call(scroll_id))

    def perform(self, call: Call) -> Any:
        """Send the request ``call`` describes (:meth:`request`)."""
        return self.request(call.method, call.path, params=call.params, body=call.body, ndjson=call.ndjson,
                            context=call.context, retry=call.retry)
