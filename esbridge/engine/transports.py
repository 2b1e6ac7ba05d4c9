"""The client libraries esbridge sends its requests through, one adapter each.

* OpenSearch (any version), and Elasticsearch 7.x where the 7.x client is absent:
  ``opensearch-py``.
* Elasticsearch 7.x: ``elasticsearch7`` (the 7.x client under its own module name), with
  esbridge's identification of the server in place of the client's product check.
* Elasticsearch 8.x and 9.x: ``elasticsearch``, sending the REST API compatibility headers
  of the *server's* major version.

Each adapter's ``perform`` sends one request and turns the library's failures into a few kinds
of its own: the engine could not be reached (:class:`_Unreachable`), it answered with an error
status (:class:`_HttpError`), its answer could not be read (:class:`_BadAnswer`), or the request
could not be sent (:class:`_BadRequest`); the engine's client (:mod:`esbridge.engine.client`)
retries them or raises the one-line errors made here.
"""

from __future__ import annotations

import importlib.util
import json
import re
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from esbridge.engine.connection import ConnectionOptions, EngineInfo, parse_info, redact_url
from esbridge.errors import ConfigurationError, EngineError, EngineUnavailableError, UnsupportedEngineError

#: Client library (import name) → the esbridge extra that installs it.
CLIENT_EXTRAS: dict[str, str] = {"opensearchpy": "opensearch", "elasticsearch": "elasticsearch",
                                 "elasticsearch7": "elasticsearch7", "aiohttp": "async"}


def client_installed(module: str) -> bool:
    """Whether the client library ``module`` (import name) can be imported."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def require_client(module: str, needed_by: str) -> None:
    """Raise a one-line error naming the extra to install when ``module`` is missing.

    Raises:
        ConfigurationError: the client library is not installed.
    """
    if not client_installed(module):
        extra = CLIENT_EXTRAS[module]
        raise ConfigurationError(
            f"{needed_by} needs the {module!r} client library, which is not installed: "
            f'pip install "esbridge[{extra}]"'
        )


def elasticsearch_client_version() -> tuple[int, ...]:
    """The version of the installed ``elasticsearch`` client library (8/9), e.g. ``(9, 5, 1)``."""
    import elasticsearch

    return tuple(int(p) for p in elasticsearch.__version__)


def newer_client_message(client_version: Sequence[int], info: EngineInfo) -> str | None:
    """One line when an ``elasticsearch`` client of ``client_version`` is of a later major version
    than the Elasticsearch server ``info`` (``None`` otherwise): esbridge's requests through it carry
    the server's compatibility headers and work, but the client's own calls ask for its own major
    version, which the server refuses ("Accept version must be either version 8 or 7")."""
    major = info.version[0]
    if info.distribution != "elasticsearch" or client_version[0] <= major:
        return None
    return (f"the elasticsearch client {'.'.join(map(str, client_version))} is newer than {info.label}: esbridge's "
            "requests through it carry the server's compatibility headers, but the client's own calls (search(), "
            f"index(), ...) are refused by the server; install the client of the server's version: "
            f"pip install 'elasticsearch>={major},<{major + 1}'")


def refused_product_message(client_version: Sequence[int], root: Any) -> str:
    """One line for an ``elasticsearch`` client (8/9) that refuses the server (its product check:
    it talks only to Elasticsearch 8 and later, and 7.14+ of Elastic's default distribution);
    ``root`` is the server's ``GET /`` answer the client refused."""
    try:
        server = parse_info(root).label if isinstance(root, Mapping) else "this server"
    except UnsupportedEngineError:
        server = "this server"
    return (f"the given elasticsearch client {'.'.join(map(str, client_version))} refuses {server} (it talks only to "
            "Elasticsearch's own distribution, 7.14 and later); pass the URL instead and esbridge builds a client "
            "that talks to it, or pass an opensearchpy.OpenSearch client")


class _Transport:
    """A thin adapter: one ``perform(method, path, params, body, headers)`` per client."""

    def perform(
        self,
        method: str,
        path: str,
        params: Mapping[str, Any] | None,
        body: Any,
        headers: Mapping[str, str],
    ) -> Any:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


def failover_retries(options: ConnectionOptions) -> int:
    """The retries the client library makes itself: only after a connection error, each on
    another node (it leaves the failed one aside), so that a request fails over at once; every
    node given is tried once.  With sniffing the nodes are known only once discovered: the
    libraries' default, 3.  Nothing else is retried by the client: :meth:`~esbridge.engine.client.Engine.request`
    retries, with back-off, what every node failed (or a node refused with a status)."""
    return max(len(options.urls), 4 if options.sniff else 1) - 1


def _urllib3_client_kwargs(options: ConnectionOptions) -> dict[str, Any]:
    """Constructor options shared by opensearch-py and the 7.x Elasticsearch client
    (same lineage): timeouts, client-side retries only to fail over (:func:`failover_retries`),
    sniffing, TLS and auth."""
    kwargs: dict[str, Any] = {
        "timeout": options.timeout,
        "max_retries": failover_retries(options),
        "retry_on_status": (),
        "verify_certs": options.verify_certs,
        "ssl_show_warn": options.verify_certs,
        "headers": options.auth_header(),
    }
    if options.username is not None:
        kwargs["http_auth"] = (options.username, options.password)
    if options.ca_certs:
        kwargs["ca_certs"] = options.ca_certs
    if options.sniff:
        # the nodes discovered are given these options, not the given URLs' scheme
        kwargs.update(sniff_on_start=True, sniff_on_connection_fail=True, sniff_timeout=options.timeout,
                      use_ssl=urlsplit(options.url).scheme == "https")
    return kwargs


def _sniff_failed(options: ConnectionOptions, err: Exception) -> EngineUnavailableError:
    """The one-line error of a cluster whose nodes could not be discovered."""
    return EngineUnavailableError(
        f"discovering the nodes of the cluster at {options.display_url} failed ({_short_reason(err)}); "
        "check that the nodes' published HTTP addresses (GET /_nodes/_all/http) are reachable from here, "
        "or connect without sniffing and give the nodes' URLs"
    )


def set_aside_connections(client: Any) -> list[Any]:
    """The connections of an opensearch-py or elasticsearch7 client (synchronous or not) that
    its own ``close`` leaves open: those of the nodes its pool set aside as failed, and the
    given nodes' ones where sniffing replaced them."""
    transport = client.transport
    pool = transport.connection_pool
    live = {id(c) for c in getattr(pool, "connections", ())}
    every = [*getattr(pool, "orig_connections", ()), *getattr(transport, "seed_connections", ())]
    return [c for c in {id(c): c for c in every}.values() if id(c) not in live]


def _legacy_http_error(err: Any) -> _HttpError:
    """An opensearch-py / elasticsearch7 ``TransportError`` as status and body."""
    status = err.status_code if isinstance(err.status_code, int) else None
    return _HttpError(status, err.info if not isinstance(err.info, Exception) else str(err))


def causes(err: BaseException) -> Iterator[BaseException]:
    """``err`` and what it wraps: causes, contexts and the clients' wrapped exceptions
    (``info`` of opensearch-py and elasticsearch7, ``errors`` of elastic-transport,
    ``os_error`` of aiohttp)."""
    todo: list[Any] = [err]
    seen: set[int] = set()
    while todo:
        exc = todo.pop(0)
        if not isinstance(exc, BaseException) or id(exc) in seen:
            continue
        seen.add(id(exc))
        yield exc
        todo += [exc.__cause__, exc.__context__, getattr(exc, "info", None), getattr(exc, "os_error", None),
                 *(getattr(exc, "errors", None) or ())]


def unreadable_answer(err: BaseException) -> _BadAnswer | None:
    """When ``err`` (raised by a client while it sent a request or read the answer) is an answer
    that could not be read, as JSON or as UTF-8 text: that, described in one line; else ``None``.

    The clients report it in their own ways: a ``SerializationError`` (opensearch-py,
    elasticsearch7, elastic-transport), a ``ConnectionError`` wrapping the ``UnicodeDecodeError``
    of a binary body (opensearch-py, elasticsearch7), or the ``RecursionError`` of a body nested
    too deeply for Python's parser."""
    for exc in causes(err):
        if isinstance(exc, UnicodeDecodeError):
            return _BadAnswer(f"not UTF-8 text: byte {exc.start} is {bytes(exc.object[exc.start:exc.start + 1])!r}")
        if isinstance(exc, json.JSONDecodeError):
            return _BadAnswer(f"not valid JSON: {exc.msg} at character {exc.pos} of {len(exc.doc)}"
                              f"{_starting(exc.doc)}")
        if isinstance(exc, RecursionError) and "decoding" in str(exc):
            return _BadAnswer("JSON nested too deeply to parse")
        # an answer of a content type the client has no deserializer for (a proxy's text/html page);
        # never the request's: esbridge sends only JSON and NDJSON, which every client serializes
        unknown = _UNKNOWN_TYPE.search(str(exc))
        if unknown:
            return _BadAnswer(f"not JSON: its content type is {unknown.group(1)}")
    return None


#: The words of opensearch-py, elasticsearch7 and elastic-transport for a body of a content type
#: they cannot deserialize.
_UNKNOWN_TYPE = re.compile(r"Unknown mimetype, (?:unable to deserialize|not able to serialize or deserialize): "
                           r"(\S+)")


def _starting(text: str) -> str:
    """``, starting '...'`` with the start of ``text`` where it is printable ASCII (its runs of
    white space as one space), else nothing."""
    start = " ".join(text[:60].split())[:40]
    if not (start and start.isascii() and start.isprintable()):
        return ""
    return f", starting {start!r}{'...' if len(text) > 40 else ''}"


def json_answer(method: str, answer: Any, mimetype: str | None = None) -> Any:
    """``answer`` as a client library gave it, when it is what a JSON answer parses to (or the
    answer to ``HEAD``).  A client returns text, not an error, for a content type it reads as text
    (elastic-transport any ``text/*``, opensearch-py and elasticsearch7 ``text/plain``): every
    request esbridge sends wants JSON, so such an answer (a proxy's page) is one it cannot read.

    Raises:
        _BadAnswer: the answer is text (``mimetype``: its content type, where the client says).
    """
    if method == "HEAD" or not isinstance(answer, (str, bytes)):
        return answer
    text = answer if isinstance(answer, str) else answer.decode("utf-8", "replace")
    kind = f"its content type is {mimetype.partition(';')[0]}" if mimetype else "text"
    raise _BadAnswer(f"not JSON: {kind}{_starting(text)}")


def unsendable_request(err: BaseException) -> _BadRequest:
    """A request body the client could not serialise (``err``: its ``SerializationError`` or the
    ``RecursionError`` of a body nested too deeply), described in one line."""
    if isinstance(err, RecursionError):
        return _BadRequest("its body is nested too deeply to serialise as JSON")
    return _BadRequest(f"its body cannot be serialised as JSON ({' '.join(str(err).split())[:200]})")


class _OpenSearchTransport(_Transport):
    def __init__(self, options: ConnectionOptions | None, client: Any = None) -> None:
        self.owned = client is None
        if client is None:
            from opensearchpy import OpenSearch, TransportError

            assert options is not None
            try:
                client = OpenSearch(hosts=list(options.urls), pool_maxsize=options.connections,
                                    **_urllib3_client_kwargs(options))
            except TransportError as err:  # sniffing on start found no node
                raise _sniff_failed(options, err) from err
        self.client = client

    def perform(self, method: str, path: str, params: Mapping[str, Any] | None, body: Any,
                headers: Mapping[str, str]) -> Any:
        from opensearchpy import ConnectionError as OSConnectionError
        from opensearchpy import SerializationError, TransportError

        try:
            return json_answer(method, self.client.transport.perform_request(
                method, path, params=dict(params or {}), body=body, headers=dict(headers)
            ))
        except OSConnectionError as err:
            raise unreadable_answer(err) or _Unreachable(str(err)) from err
        except TransportError as err:
            raise _legacy_http_error(err) from err
        except (SerializationError, RecursionError) as err:
            raise unreadable_answer(err) or unsendable_request(err) from err

    def close(self) -> None:
        if self.owned:
            self.client.close()
            for connection in set_aside_connections(self.client):
                connection.close()


class _Elasticsearch7Transport(_Transport):
    def __init__(self, options: ConnectionOptions | None, client: Any = None) -> None:
        self.owned = client is None
        if client is None:
            from elasticsearch7 import Elasticsearch, Transport, TransportError

            class _IdentifiedTransport(Transport):
                # esbridge identified the server from GET / before choosing this client.
                def _do_verify_elasticsearch(self, headers: Any, timeout: Any) -> None:
                    self._verified_elasticsearch = True

            assert options is not None
            try:
                client = Elasticsearch(list(options.urls), transport_class=_IdentifiedTransport,
                                       retry_on_timeout=False, maxsize=options.connections,
                                       **_urllib3_client_kwargs(options))
            except TransportError as err:  # sniffing on start found no node
                raise _sniff_failed(options, err) from err
        self.client = client

    def perform(self, method: str, path: str, params: Mapping[str, Any] | None, body: Any,
                headers: Mapping[str, str]) -> Any:
        from elasticsearch7 import ConnectionError as ESConnectionError
        from elasticsearch7 import SerializationError, TransportError
        from elasticsearch7.exceptions import UnsupportedProductError

        sent = {"accept": "application/json", **headers}
        if body is not None:
            sent.setdefault("content-type", "application/json")
        try:
            return json_answer(method, self.client.transport.perform_request(
                method, path, headers=sent, params=dict(params or {}), body=body
            ))
        except ESConnectionError as err:
            raise unreadable_answer(err) or _Unreachable(str(err)) from err
        except TransportError as err:
            raise _legacy_http_error(err) from err
        except (SerializationError, RecursionError) as err:
            raise unreadable_answer(err) or unsendable_request(err) from err
        except UnsupportedProductError as err:
            raise ConfigurationError(
                "the given elasticsearch7 client refuses this server (it accepts only the default "
                "distribution of Elasticsearch 7.14+); pass the URL instead and esbridge builds a client "
                "that talks to it, or pass an opensearchpy.OpenSearch client"
            ) from err

    def close(self) -> None:
        if self.owned:
            self.client.close()
            for connection in set_aside_connections(self.client):
                connection.close()


def _elasticsearch_client_kwargs(options: ConnectionOptions, server_major: int) -> dict[str, Any]:
    """Constructor options of the ``elasticsearch`` 8/9 clients (synchronous or not): client-side
    retries only to fail over (:func:`failover_retries`), sniffing, TLS and auth.

    Raises:
        ConfigurationError: sniffing asked of a client newer than the server (it sniffs with its
            own version's compatibility headers, which an older server refuses).
    """
    kwargs: dict[str, Any] = {
        "request_timeout": options.timeout,
        "max_retries": failover_retries(options),
        "retry_on_status": (),
        "retry_on_timeout": False,
        "connections_per_node": options.connections,
    }
    if any(urlsplit(u).scheme == "https" for u in options.urls):
        # the client refuses TLS options for plain-HTTP URLs (an ESBRIDGE_CA_CERTS left set for
        # another cluster must not stop this one)
        kwargs.update(verify_certs=options.verify_certs, ssl_show_warn=options.verify_certs)
        if options.ca_certs:
            kwargs["ca_certs"] = options.ca_certs
    if options.username is not None:
        kwargs["basic_auth"] = (options.username, options.password or "")
    if options.api_key is not None:
        kwargs["api_key"] = options.api_key if ":" not in options.api_key else tuple(
            options.api_key.split(":", 1)
        )
    if options.sniff:
        installed = elasticsearch_client_version()
        client_major, client_version = installed[0], ".".join(map(str, installed))
        if client_major > server_major:
            raise ConfigurationError(
                f"the elasticsearch {client_version} client sniffs with version {client_major} headers, which an "
                f"Elasticsearch {server_major} server refuses: install the client of the server's version "
                f'(pip install "elasticsearch>={server_major},<{server_major + 1}"), or give the nodes\' URLs '
                "without sniffing"
            )
        kwargs.update(sniff_on_start=True, sniff_on_node_failure=True, sniff_timeout=options.timeout)
    return kwargs


def compatibility_headers(server_major: int, headers: Mapping[str, str], body: Any) -> dict[str, str]:
    """``headers`` with the REST API compatibility headers of an Elasticsearch ``server_major``
    server in place of their ``accept`` and ``content-type``."""
    mime = "application/vnd.elasticsearch+json"
    wanted = {k: v for k, v in headers.items() if k.lower() not in ("accept", "content-type")}
    wanted["accept"] = f"{mime}; compatible-with={server_major}"
    if body is not None:
        ctype = headers.get("content-type", "application/json")
        kind = "x-ndjson" if "ndjson" in ctype else "json"
        wanted["content-type"] = f"application/vnd.elasticsearch+{kind}; compatible-with={server_major}"
    return wanted


class _ElasticsearchTransport(_Transport):
    """Elasticsearch 8.x/9.x through the ``elasticsearch`` client."""

    def __init__(self, options: ConnectionOptions | None, server_major: int, client: Any = None) -> None:
        self.server_major = server_major
        self.owned = client is None
        if client is not None:
            self.client = client
            return
        from elastic_transport import TransportError
        from elasticsearch import Elasticsearch

        assert options is not None
        try:
            self.client = Elasticsearch(list(options.urls), **_elasticsearch_client_kwargs(options, server_major))
        except TransportError as err:  # sniffing on start found no node
            raise _sniff_failed(options, err) from err

    def perform(self, method: str, path: str, params: Mapping[str, Any] | None, body: Any,
                headers: Mapping[str, str]) -> Any:
        from elastic_transport import ConnectionError as ESConnectionError
        from elastic_transport import SerializationError
        from elasticsearch import ApiError, UnsupportedProductError

        try:
            resp = self.client.perform_request(method, path, params=dict(params or {}),
                                               headers=compatibility_headers(self.server_major, headers, body),
                                               body=body)
        except ESConnectionError as err:
            raise unreadable_answer(err) or _Unreachable(str(err)) from err
        except UnsupportedProductError as err:
            raise ConfigurationError(refused_product_message(elasticsearch_client_version(), err.body)) from err
        except ApiError as err:
            raise _HttpError(err.meta.status, err.body) from err
        except (SerializationError, RecursionError) as err:
            raise unreadable_answer(err) or unsendable_request(err) from err
        return json_answer(method, resp.body, resp.meta.mimetype)

    def close(self) -> None:
        if self.owned:
            self.client.close()


def _client_transport(client: Any) -> _Transport:
    """A transport over a client object the caller built (never closed by esbridge)."""
    module = type(client).__module__.split(".")[0]
    name = type(client).__name__
    if name.startswith("Async"):
        raise ConfigurationError(f"{module}.{name} is asynchronous; esbridge's Engine needs the synchronous "
                                 f"client ({name.removeprefix('Async')}), or use esbridge.aio.AsyncEngine with "
                                 "this one")
    if module == "opensearchpy" and hasattr(client, "transport"):
        return _OpenSearchTransport(None, client)
    if module == "elasticsearch7" and hasattr(client, "transport"):
        return _Elasticsearch7Transport(None, client)
    if module == "elasticsearch" and hasattr(client, "perform_request"):
        return _ElasticsearchTransport(None, 8, client)
    if module == "elasticsearch" and hasattr(client, "transport"):  # the 7.x client under its own name
        return _Elasticsearch7Transport(None, client)
    raise ConfigurationError(
        f"cannot use a {type(client).__module__}.{name} as an engine client; pass a URL, ConnectionOptions, "
        "or an opensearchpy.OpenSearch, elasticsearch.Elasticsearch or elasticsearch7.Elasticsearch client"
    )


def warn_newer_client(info: EngineInfo) -> None:
    """Warn (:func:`newer_client_message`) when the caller's ``elasticsearch`` client is of a later
    major version than the server."""
    message = newer_client_message(elasticsearch_client_version(), info)
    if message is not None:
        warnings.warn(message, stacklevel=3)


def _client_url(client: Any) -> str:
    """The first node's URL of a client object, without credentials (for messages)."""
    try:
        pool = getattr(client.transport, "node_pool", None)
        if pool is not None:  # elastic-transport (elasticsearch 8/9)
            url = str(pool.all()[0].base_url)
        else:
            host = client.transport.hosts[0]
            scheme = "https" if host.get("use_ssl") or host.get("scheme") == "https" else "http"
            url = f"{scheme}://{host.get('host', 'localhost')}:{host.get('port', 9200)}{host.get('url_prefix', '')}"
    except (AttributeError, IndexError, KeyError, TypeError):
        return "http://engine-of-the-given-client"
    return redact_url(url)


class _Unreachable(Exception):
    pass


class _HttpError(Exception):
    def __init__(self, status: int | None, body: Any) -> None:
        super().__init__(status)
        self.status = status
        self.body = body


class _BadAnswer(Exception):
    """The engine's answer could not be read (the message says why)."""


class _BadRequest(Exception):
    """The request could not be sent (the message says why)."""


def bad_answer_error(method: str, path: str, err: _BadAnswer, context: str) -> EngineError:
    """The one-line error of an answer that could not be read: names the request (its path
    without the query string) and what was wrong with the answer."""
    where = f"{context}: " if context else ""
    target = f"{method} {path.split('?', 1)[0]}"
    return EngineError(f"{where}the engine's answer to {target} could not be read ({err}); a proxy or load "
                       "balancer between esbridge and the engine may have cut or replaced it",
                       error_type="unreadable_answer", reason=str(err))


def bad_request_error(method: str, path: str, err: _BadRequest, context: str) -> ConfigurationError:
    """The one-line error of a request that could not be sent."""
    where = f"{context}: " if context else ""
    return ConfigurationError(f"{where}the request {method} {path.split('?', 1)[0]} could not be sent: {err}")


def unavailable_error(options: ConnectionOptions, err: Exception, context: str,
                      tls: str | None) -> EngineUnavailableError:
    """The one-line error of an engine that could not be reached."""
    where = f"{context}: " if context else ""
    return EngineUnavailableError(
        f"{where}cannot reach the engine at {options.display_url} ({_short_reason(err)}); "
        + (tls or "check the URL, that the engine is running, and TLS/auth options"),
    )


def _tls_problem(options: ConnectionOptions, err: Exception, *, probe: bool) -> str | None:
    """What to fix when a connection failed over TLS (or for want of it); ``None`` when the
    failure is not about TLS.  Certificate failures are not retried: they do not go away.
    ``probe``: when a plain-HTTP connection was closed unanswered, try a TLS handshake on the
    port to tell whether the server speaks HTTPS (only once the retries are spent)."""
    text = str(err)
    parts = urlsplit(options.url)
    if "CERTIFICATE_VERIFY_FAILED" in text or "certificate verify failed" in text:
        if "hostname" in text.lower() or "IP address mismatch" in text:
            return (f"the engine's certificate is not issued for {parts.hostname}; connect with the host "
                    "name the certificate names, or pass --no-verify-certs (ESBRIDGE_VERIFY_CERTS=false) "
                    "for local testing only")
        return ("the engine's certificate is not signed by a CA esbridge trusts; pass the engine's CA file "
                "with --ca-certs (ESBRIDGE_CA_CERTS), or --no-verify-certs (ESBRIDGE_VERIFY_CERTS=false) "
                "for local testing only")
    if parts.scheme == "https" and any(m in text for m in ("WRONG_VERSION_NUMBER", "wrong version number",
                                                          "record layer failure", "RECORD_LAYER_FAILURE")):
        http = redact_url(parts._replace(scheme="http").geturl())
        return f"the engine does not speak TLS on this port; use {http}"
    if probe and parts.scheme == "http" and ("RemoteDisconnected" in text or "Connection reset" in text
                                             or "Connection aborted" in text) and _speaks_tls(parts):
        https = redact_url(parts._replace(scheme="https").geturl())
        return f"the engine serves HTTPS on this port; use {https}"
    return None


def _speaks_tls(parts: Any) -> bool:
    """Whether the server at ``parts``' host and port completes a TLS handshake (certificate
    not checked: this only tells which protocol it speaks)."""
    import socket
    import ssl

    host, port = parts.hostname, parts.port or 80
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection((host, port), timeout=3.0) as sock:
            with context.wrap_socket(sock, server_hostname=host):
                return True
    except (OSError, ValueError):
        return False


def _short_reason(err: Exception) -> str:
    """The innermost cause of a connection failure, e.g. ``Connection refused``."""
    import re

    text = str(err)
    for pattern in (r"\[Errno -?\d+\] ([^)\]'\"]+)", r"(certificate verify failed[^)'\"(]*)",
                    r"(timed out|Read timed out)", r"(Remote end closed connection without response)",
                    r"(wrong version number|record layer failure)"):
        m = re.search(pattern, text)
        if m:
            return m.group(1).strip()
    return text[:160]
