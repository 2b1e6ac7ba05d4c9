"""One :class:`AsyncEngine` over OpenSearch and Elasticsearch, through the clients' asyncio variants.

The asynchronous twin of :class:`esbridge.engine.client.Engine`: the server is identified the same
way (the same requests, :func:`~esbridge.engine.calls.identify_plan`) and driven through the
asynchronous client that matches it:

* OpenSearch: ``opensearchpy.AsyncOpenSearch``;
* Elasticsearch 7.x: ``elasticsearch7.AsyncElasticsearch`` where that client is installed
  (opensearch-py's otherwise, as for the synchronous engine);
* Elasticsearch 8.x and 9.x: ``elasticsearch.AsyncElasticsearch``, with the REST API
  compatibility headers of the server's major version.

All of them need ``aiohttp`` (``pip install "esbridge[async]"``).  :meth:`AsyncEngine.request`
retries and reports errors exactly as :meth:`Engine.request <esbridge.engine.client.Engine.request>`
does; waiting between retries never blocks the event loop.
"""

from __future__ import annotations

import asyncio
import os
import ssl
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from esbridge.engine.calls import analyze_plan, identify_plan, request_target, search_plan
from esbridge.engine.client import EngineBase, Perform, ProbeTls, advance, log, probe_options
from esbridge.engine.connection import ConnectionOptions, EngineInfo
from esbridge.engine.plan import run_async
from esbridge.engine.transports import (
    _client_url,
    _HttpError,
    _legacy_http_error,
    _tls_problem,
    _Unreachable,
    _urllib3_client_kwargs,
    causes,
    client_installed,
    elasticsearch_client_version,
    json_answer,
    refused_product_message,
    require_client,
    set_aside_connections,
    unreadable_answer,
    unsendable_request,
    warn_newer_client,
)
from esbridge.errors import ConfigurationError

__all__ = ["AsyncEngine"]


def _unreachable(err: Exception) -> _Unreachable:
    """A connection failure of an asynchronous client, described as the synchronous clients
    describe it (``[Errno 111] Connection refused``, ``timed out``), so that the one-line
    error is the same whichever API met it."""
    text = str(err)
    for exc in causes(err):
        if isinstance(exc, ssl.SSLError):
            return _Unreachable(f"{text} ({exc})")
        if isinstance(exc, OSError) and isinstance(exc.errno, int) and exc.errno != 0:
            # asyncio words a refused connection "Connect call failed": the system's text instead
            reason = os.strerror(exc.errno) if exc.errno > 0 else exc.strerror
            return _Unreachable(f"{text} ([Errno {exc.errno}] {reason})")
        if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
            return _Unreachable(f"{text} (timed out)")
    return _Unreachable(text)


class _AsyncTransport:
    """One awaitable ``perform(method, path, params, body, headers)`` per asynchronous client."""

    owned: bool
    client: Any

    async def perform(self, method: str, path: str, params: Mapping[str, Any] | None, body: Any,
                      headers: Mapping[str, str]) -> Any:
        raise NotImplementedError

    async def close(self) -> None:
        if self.owned:
            await self.client.close()
            if not isinstance(self, _AsyncElasticsearchTransport):  # elastic-transport closes every node
                for connection in set_aside_connections(self.client):
                    await connection.close()


class _AsyncOpenSearchTransport(_AsyncTransport):
    def __init__(self, options: ConnectionOptions | None, client: Any = None) -> None:
        self.owned = client is None
        if client is None:
            from opensearchpy import AsyncOpenSearch

            assert options is not None
            client = AsyncOpenSearch(hosts=list(options.urls), pool_maxsize=options.connections,
                                     **_urllib3_client_kwargs(options))
        self.client = client

    async def perform(self, method: str, path: str, params: Mapping[str, Any] | None, body: Any,
                      headers: Mapping[str, str]) -> Any:
        from opensearchpy import ConnectionError as OSConnectionError
        from opensearchpy import SerializationError, TransportError

        try:
            return json_answer(method, await self.client.transport.perform_request(
                method, path, params=dict(params or {}), body=body, headers=dict(headers)))
        except OSConnectionError as err:
            raise unreadable_answer(err) or _unreachable(err) from err
        except TransportError as err:
            raise _legacy_http_error(err) from err
        except (SerializationError, RecursionError) as err:
            raise unreadable_answer(err) or unsendable_request(err) from err


class _AsyncElasticsearch7Transport(_AsyncTransport):
    def __init__(self, options: ConnectionOptions | None, client: Any = None) -> None:
        self.owned = client is None
        if client is None:
            from elasticsearch7 import AsyncElasticsearch, AsyncTransport

            class _IdentifiedTransport(AsyncTransport):
                # esbridge identified the server from GET / before choosing this client.
                async def _do_verify_elasticsearch(self, headers: Any, timeout: Any) -> None:
                    self._verified_elasticsearch = True

            assert options is not None
            client = AsyncElasticsearch(list(options.urls), transport_class=_IdentifiedTransport,
                                        retry_on_timeout=False, maxsize=options.connections,
                                        **_urllib3_client_kwargs(options))
        self.client = client

    async def perform(self, method: str, path: str, params: Mapping[str, Any] | None, body: Any,
                      headers: Mapping[str, str]) -> Any:
        from elasticsearch7 import ConnectionError as ESConnectionError
        from elasticsearch7 import SerializationError, TransportError
        from elasticsearch7.exceptions import UnsupportedProductError

        sent = {"accept": "application/json", **headers}
        if body is not None:
            sent.setdefault("content-type", "application/json")
        try:
            return json_answer(method, await self.client.transport.perform_request(
                method, path, headers=sent, params=dict(params or {}), body=body))
        except ESConnectionError as err:
            raise unreadable_answer(err) or _unreachable(err) from err
        except TransportError as err:
            raise _legacy_http_error(err) from err
        except (SerializationError, RecursionError) as err:
            raise unreadable_answer(err) or unsendable_request(err) from err
        except UnsupportedProductError as err:
            raise ConfigurationError(
                "the given elasticsearch7 client refuses this server (it accepts only the default "
                "distribution of Elasticsearch 7.14+); pass the URL instead and esbridge builds a client "
                "that talks to it, or pass an opensearchpy.AsyncOpenSearch client"
            ) from err


class _AsyncElasticsearchTransport(_AsyncTransport):
    """Elasticsearch 8.x/9.x through ``elasticsearch.AsyncElasticsearch``."""

    def __init__(self, options: ConnectionOptions | None, server_major: int, client: Any = None) -> None:
        self.server_major = server_major
        self.owned = client is None
        if client is not None:
            self.client = client
            return
        from elasticsearch import AsyncElasticsearch

        from esbridge.engine.transports import _elasticsearch_client_kwargs

        assert options is not None
        self.client = AsyncElasticsearch(list(options.urls), **_elasticsearch_client_kwargs(options, server_major))

    async def perform(self, method: str, path: str, params: Mapping[str, Any] | None, body: Any,
                      headers: Mapping[str, str]) -> Any:
        from elastic_transport import ConnectionError as ESConnectionError
        from elastic_transport import SerializationError
        from elasticsearch import ApiError, UnsupportedProductError

        from esbridge.engine.transports import compatibility_headers

        try:
            resp = await self.client.perform_request(method, path, params=dict(params or {}),
                                                     headers=compatibility_headers(self.server_major, headers, body),
                                                     body=body)
        except ESConnectionError as err:
            raise unreadable_answer(err) or _unreachable(err) from err
        except UnsupportedProductError as err:
            raise ConfigurationError(refused_product_message(elasticsearch_client_version(), err.body)) from err
        except ApiError as err:
            raise _HttpError(err.meta.status, err.body) from err
        except (SerializationError, RecursionError) as err:
            raise unreadable_answer(err) or unsendable_request(err) from err
        return json_answer(method, resp.body, resp.meta.mimetype)


def _async_client_transport(client: Any) -> _AsyncTransport:
    """A transport over an asynchronous client object the caller built (never closed by esbridge)."""
    module = type(client).__module__.split(".")[0]
    name = type(client).__name__
    if not name.startswith("Async") and module in ("opensearchpy", "elasticsearch", "elasticsearch7"):
        raise ConfigurationError(f"{module}.{name} is synchronous; AsyncEngine needs the asynchronous client "
                                 f"(Async{name}), or use esbridge's Engine with this one")
    if module == "opensearchpy" and hasattr(client, "transport"):
        return _AsyncOpenSearchTransport(None, client)
    if module == "elasticsearch7" and hasattr(client, "transport"):
        return _AsyncElasticsearch7Transport(None, client)
    if module == "elasticsearch" and hasattr(client, "perform_request"):
        return _AsyncElasticsearchTransport(None, 8, client)
    raise ConfigurationError(
        f"cannot use a {type(client).__module__}.{name} as an asynchronous engine client; pass a URL, "
        "ConnectionOptions, or an opensearchpy.AsyncOpenSearch, elasticsearch.AsyncElasticsearch or "
        "elasticsearch7.AsyncElasticsearch client"
    )


class AsyncEngine(EngineBase):
    """A connection to one OpenSearch or Elasticsearch cluster for asyncio code.

    Use ``await AsyncEngine.connect(url_or_options_or_client)`` and close it with
    ``await engine.close()`` or ``async with``.  Every call goes through :meth:`request`, which
    retries and raises exactly as the synchronous :class:`~esbridge.engine.client.Engine` does.
    """

    def __init__(self, options: ConnectionOptions, info: EngineInfo, transport: _AsyncTransport,
                 sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep) -> None:
        super().__init__(options, info)
        self._transport = transport
        self._sleep = sleep

    @classmethod
    async def connect(cls, options: ConnectionOptions | str | Sequence[str] | Any) -> AsyncEngine:
        """Connect to the cluster at ``options`` (or a URL, comma-separated URLs or a list of
        URLs of its nodes) and identify it; an asynchronous client object is used as it is
        (:meth:`from_client`).  Nothing is started: the cluster must be running.

        Raises:
            ConfigurationError: ``aiohttp`` (the ``async`` extra) or the server's client library
                is not installed.
            EngineUnavailableError: nothing answered at the URLs.
            UnsupportedEngineError: the server is not OpenSearch or Elasticsearch >= 7.
        """
        if not isinstance(options, (str, list, tuple, ConnectionOptions)):
            return await cls.from_client(options)
        if not isinstance(options, ConnectionOptions):
            options = ConnectionOptions(urls=options)
        require_client("aiohttp", "esbridge's asynchronous API")
        probing = probe_options(options)
        probe = _AsyncOpenSearchTransport(probing)
        probe_engine = cls(probing, EngineInfo("opensearch", (0, 0, 0), "", "", ""), probe)
        try:
            info = await run_async(identify_plan(f"identifying the engine at {options.display_url}"), probe_engine)
        finally:
            await probe.close()
        transport: _AsyncTransport
        if info.distribution == "opensearch":
            transport = _AsyncOpenSearchTransport(options)
        elif info.version[0] == 7:
            transport = (_AsyncElasticsearch7Transport(options) if client_installed("elasticsearch7")
                         else _AsyncOpenSearchTransport(options))
        else:
            require_client("elasticsearch", f"{info.label} at {options.display_url}")
            transport = _AsyncElasticsearchTransport(options, info.version[0])
        log.debug("connected (asyncio) to %s at %s", info.label, options.display_url)
        return cls(options, info, transport)

    @classmethod
    async def from_client(cls, client: Any, *, max_retries: int = 5, backoff: float = 0.5) -> AsyncEngine:
        """Use an asynchronous client the caller built: an ``opensearchpy.AsyncOpenSearch``, an
        ``elasticsearch.AsyncElasticsearch`` (8/9) or an ``elasticsearch7.AsyncElasticsearch``.
        esbridge sends its requests through it and never closes it; a client of a later major
        version than the server is warned of, as by :meth:`Engine.from_client`.

        Raises:
            ConfigurationError: ``client`` is none of those (or a synchronous one), or refuses the
                server.
        """
        transport = _async_client_transport(client)
        options = ConnectionOptions(url=_client_url(client), max_retries=max_retries, backoff=backoff)
        probe = cls(options, EngineInfo("opensearch", (0, 0, 0), "", "", ""), transport)
        where = f"identifying the engine of the given {type(client).__name__} client"
        info = await run_async(identify_plan(where, es7_client=isinstance(transport, _AsyncElasticsearch7Transport)),
                               probe)
        if isinstance(transport, _AsyncElasticsearchTransport):
            transport.server_major = info.version[0]
            warn_newer_client(info)
        return cls(options, info, transport)

    async def close(self) -> None:
        """Close the connections esbridge opened (a client passed in by the caller stays open)."""
        await self._transport.close()

    async def __aenter__(self) -> AsyncEngine:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def request(
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
        """Send one request; retry what is worth retrying; raise typed errors
        (:meth:`Engine.request <esbridge.engine.client.Engine.request>`'s arguments and errors)."""
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
                    result = await self._transport.perform(method, path, None, body, headers)
                elif isinstance(step, ProbeTls):
                    # a probe is a TLS handshake with the node: off the event loop
                    result = (await asyncio.to_thread(_tls_problem, self.options, step.error, probe=True)
                              if step.probe else _tls_problem(self.options, step.error, probe=False))
                else:
                    await self._sleep(step.seconds)
            except Exception as err:  # thrown into the policy, which decides
                failure = err

    async def search(self, index: str, body: Mapping[str, Any], *,
                     params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """A ``_search`` of ``index`` (:meth:`Engine.search <esbridge.engine.client.Engine.search>`)."""
        return await run_async(search_plan(index, body, params=params), self)

    async def analyze(self, index: str, text: str, *, field: str | None = None,
                      analyzer: str | None = None) -> list[str]:
        """Tokens of ``text`` as the index's analyzer for ``field`` (or ``analyzer``) emits them."""
        return await run_async(analyze_plan(index, text, field=field, analyzer=analyzer), self)
