"""One :class:`Engine` over OpenSearch and Elasticsearch.

The engine is identified from ``GET /`` (or, on a server without that endpoint,
such as Elasticsearch's minimal distribution, from ``GET /_nodes/_local``) and
driven through the official client that matches it:

* OpenSearch (any version): ``opensearch-py``.
* Elasticsearch 7.x: ``elasticsearch7`` (the 7.x client under its own module
  name).  Elasticsearch 7.0-7.13 servers that do not report the ``default``
  build flavour (embedded nodes) fail that client's product check although
  esbridge has already identified them from ``GET /``; esbridge's own check
  replaces it.
* Elasticsearch 8.x and 9.x: ``elasticsearch``, sending the REST API
  compatibility headers of the *server's* major version so that a 9.x client
  can talk to an 8.x server.

Every request goes through :meth:`Engine.request`, which retries 429, 502, 503,
504 and connection errors with exponential backoff and turns engine errors into
:class:`~esbridge.errors.EngineError` with the engine's type and reason.  Given several
nodes' URLs (:attr:`ConnectionOptions.urls`), the client library fails a request over to the
next node at once when one cannot be reached; esbridge's back-off comes only after every node
failed.
"""

from __future__ import annotations

import base64
import importlib.util
import inspect
import json
import logging
import os
import random
import re
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Literal
from urllib.parse import urlencode, urlsplit

from esbridge.engine.plan import Call, Plan, run
from esbridge.errors import (
    ConfigurationError,
    EngineError,
    EngineUnavailableError,
    IndexNotFoundError,
    UnsupportedEngineError,
)

log = logging.getLogger(__name__)

Distribution = Literal["opensearch", "elasticsearch"]

#: Statuses worth retrying: the engine asked us to slow down or is not ready.
RETRY_STATUSES = frozenset({429, 502, 503, 504})


def _url_pieces(text: str) -> list[str]:
    """``text`` cut at its commas, except a comma in the user part of a URL (in a password:
    what follows it up to the host has an ``@``)."""
    pieces: list[str] = []
    for piece in text.split(","):
        before = pieces[-1].split("://", 1)[1] if pieces and "://" in pieces[-1] else None
        if before is not None and not any(c in before for c in "/@") and "@" in piece.split("/", 1)[0]:
            pieces[-1] += "," + piece
        else:
            pieces.append(piece)
    return pieces


def split_urls(value: str | Sequence[str]) -> tuple[str, ...]:
    """The engine URLs in ``value``: a string of one URL or several separated by commas, or a
    sequence of such strings (repeated ``--url``); empty entries are dropped.

    Raises:
        ConfigurationError: an entry is not a string.
    """
    texts = [value] if isinstance(value, str) else list(value)
    urls: list[str] = []
    for text in texts:
        if not isinstance(text, str):
            raise ConfigurationError(f"engine URLs must be strings, got {type(text).__name__}")
        urls += [u.strip() for u in _url_pieces(text) if u.strip()]
    return tuple(urls)


def given_urls(url: str | Sequence[str] | None = None) -> tuple[str, ...]:
    """The engine URLs of ``url`` (:func:`split_urls`), else those of ``ESBRIDGE_URL``; ``()``
    when neither names one."""
    urls = split_urls(url) if url else ()
    return urls or split_urls(os.environ.get("ESBRIDGE_URL") or "")


def redact_url(url: str) -> str:
    """``url`` without the password of its user part (``https://user:***@host``); of every URL
    of a comma-separated list."""
    return ",".join(_redact_one(u) for u in _url_pieces(url))


def _redact_one(url: str) -> str:
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
    except ValueError:  # not a URL urllib can take apart (``http://[::1``): hide any user part
        return re.sub(r"(//[^/@]*?:)[^/]*@", r"\1***@", url)
    host = parts.netloc.rsplit("@", 1)[1]
    return parts._replace(netloc=f"{parts.username}:***@{host}").geturl()


def _url_problem(url: str) -> str | None:
    """Why ``url`` is not the base URL of an engine node (``None`` when it is one)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises for a port that is not a number)
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        return "is not an http(s) URL such as http://localhost:9200"
    if any(c.isspace() or c == "," for c in parts.hostname):
        return f"has no valid host name ({parts.hostname!r})"
    return None


def _check_urls(urls: Sequence[str], where: str) -> None:
    """A one-line error naming the first of ``urls`` that is not an engine node's URL (redacted)."""
    for i, url in enumerate(urls, 1):
        problem = _url_problem(url)
        if problem is not None:
            which = f" {i} of {len(urls)}" if len(urls) > 1 else ""
            raise ConfigurationError(f"{where}{which} {redact_url(url)!r} {problem}")


@dataclass(frozen=True)
class ConnectionOptions:
    """How to reach a cluster.

    Attributes:
        url: base URL, e.g. ``https://search.example.com:9200``; several nodes' URLs separated by
            commas are taken as ``urls``.  With ``urls``, the first of them.
        username: basic-auth user (with ``password``).
        password: basic-auth password.
        api_key: an API key, either ``id:key`` or already base64-encoded.
        ca_certs: path of a CA bundle to verify the server's certificate.
        verify_certs: verify TLS certificates (turn off only for local testing).
        timeout: seconds per request.
        max_retries: retries for 429/5xx/connection errors and for searches some of whose
            shards failed (0 = no retry).  A connection error is retried once every node given
            failed (the client library moves the request on to the next node at once), and not
            at all while the cluster did not answer the previous request through its retries.
        backoff: first retry delay in seconds (doubles each time, capped at 30 s).
        preference: the ``preference`` sent with every read whose answer depends on which copy
            of a shard serves it (searches, counts, term vectors, multi-gets): with the same
            string the engine picks the same copy of each shard for every request (while the
            cluster's shard copies stay the same), so a query's first stage, term vectors and
            statistics come from one consistent view of the index, and a repeated query ranks
            alike even where a replica's segments, hence its not-yet-merged deletions and the
            statistics that count them, differ from its primary's.  ``None``: the engine
            chooses a copy per request (adaptive replica selection).
        connections: HTTP connections kept open to the engine for reuse (per node).  Threads
            sharing one connection, and a pipeline's concurrent requests, each need one; with
            fewer, every request beyond them opens and closes a TCP connection of its own.
        urls: the base URLs of several nodes of one cluster (a list, or one string of URLs
            separated by commas).  Requests go to them in turn; one that cannot reach a node goes
            on to the next at once, and the node is left aside for a while (60 s, longer each
            time it fails again) as the client libraries do.  The credentials and TLS options
            apply to every URL.  Given alone, ``url`` is its only URL.
        sniff: discover the cluster's nodes from the given URLs (``GET /_nodes/_all/http``, the
            client libraries' sniffing) when connecting and again when a node fails, and send
            requests to all of them.  The nodes' published HTTP addresses must be reachable from
            here, with the scheme of the given URLs (not through a proxy or a load balancer).
    """

    url: str = ""
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    api_key: str | None = field(default=None, repr=False)
    ca_certs: str | None = None
    verify_certs: bool = True
    timeout: float = 60.0
    max_retries: int = 5
    backoff: float = 0.5
    preference: str | None = "esbridge"
    connections: int = 10
    urls: Sequence[str] = ()
    sniff: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.url, str):
            raise ConfigurationError(f"url is one engine URL (a string), got {type(self.url).__name__}; "
                                     "give several as urls=[...]")
        urls = split_urls(self.urls)
        if not urls:
            urls = split_urls(self.url)
        elif self.url and self.url != urls[0]:
            raise ConfigurationError(f"url {redact_url(self.url)!r} is not the first of urls "
                                     f"({redact_url(','.join(urls))}); give one URL as url, or several as urls")
        if not urls:
            raise ConfigurationError("no engine URL: give url (or urls for several nodes)")
        _check_urls(urls, "engine URL")
        urls = tuple(dict.fromkeys(urls))
        if self.sniff and len({urlsplit(u).scheme for u in urls}) > 1:
            raise ConfigurationError(f"sniffing gives the nodes it discovers the scheme of the URLs given, which "
                                     f"differ ({redact_url(','.join(urls))}); give URLs of one scheme")
        object.__setattr__(self, "urls", urls)
        object.__setattr__(self, "url", urls[0])
        if (self.username is None) != (self.password is None):
            raise ConfigurationError("give both username and password for basic auth, or neither")
        if self.username is not None and self.api_key is not None:
            raise ConfigurationError("give either basic auth (username/password) or api_key, not both")
        if self.ca_certs is not None and not os.path.exists(self.ca_certs):
            raise ConfigurationError(f"CA file {self.ca_certs!r} (ca_certs) does not exist")
        if self.timeout <= 0:
            raise ConfigurationError(f"timeout must be > 0 seconds, got {self.timeout}")
        if self.max_retries < 0:
            raise ConfigurationError(f"max_retries must be >= 0, got {self.max_retries}")
        if isinstance(self.connections, bool) or not isinstance(self.connections, int) or self.connections < 1:
            raise ConfigurationError(f"connections must be a whole number >= 1, got {self.connections!r}")
        if self.preference is not None and (not self.preference or self.preference.startswith("_")):
            raise ConfigurationError(
                f"preference {self.preference!r} must be a custom string that does not start with '_' "
                "(e.g. 'esbridge'), or None to let the engine choose shard copies"
            )

    @classmethod
    def from_env(cls, url: str | Sequence[str] | None = None, **overrides: Any) -> ConnectionOptions:
        """Options from ``ESBRIDGE_URL`` (one URL, or several separated by commas),
        ``ESBRIDGE_USERNAME``, ``ESBRIDGE_PASSWORD``, ``ESBRIDGE_API_KEY``, ``ESBRIDGE_CA_CERTS``,
        ``ESBRIDGE_VERIFY_CERTS`` and ``ESBRIDGE_SNIFF``; explicit arguments win (``url``: one
        URL, comma-separated URLs, or a list of them, as repeated ``--url`` give)."""
        env = os.environ
        urls = split_urls(url) if url else ()
        if not urls:
            urls = given_urls()
            _check_urls(urls, "ESBRIDGE_URL entry")
        if not urls:
            raise ConfigurationError("no engine URL: pass --url or set ESBRIDGE_URL")
        values: dict[str, Any] = {
            "username": env.get("ESBRIDGE_USERNAME"),
            "password": env.get("ESBRIDGE_PASSWORD"),
            "api_key": env.get("ESBRIDGE_API_KEY"),
            "ca_certs": env.get("ESBRIDGE_CA_CERTS"),
        }
        verify = env.get("ESBRIDGE_VERIFY_CERTS")
        if verify is not None:
            values["verify_certs"] = verify.strip().lower() not in ("0", "false", "no", "off")
        sniff = env.get("ESBRIDGE_SNIFF")
        if sniff is not None:
            values["sniff"] = sniff.strip().lower() in ("1", "true", "yes", "on")
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(urls=urls, **values)

    @property
    def display_url(self) -> str:
        """The URLs (comma-separated) with any password in them replaced by ``***`` (for
        messages and logs)."""
        return ",".join(redact_url(u) for u in self.urls)

    def __repr__(self) -> str:
        auth = ("basic" if self.username is not None else "api_key" if self.api_key is not None else "none")
        return (f"ConnectionOptions(url={self.display_url!r}, auth={auth}, ca_certs={self.ca_certs!r}, "
                f"verify_certs={self.verify_certs}, timeout={self.timeout}, max_retries={self.max_retries}"
                + (", sniff=True)" if self.sniff else ")"))

    def auth_header(self) -> dict[str, str]:
        """The ``Authorization`` header for the API key (empty without one)."""
        if self.api_key is None:
            return {}
        key = self.api_key
        if ":" in key:
            key = base64.b64encode(key.encode()).decode()
        return {"authorization": f"ApiKey {key}"}


@dataclass(frozen=True)
class EngineInfo:
    """What ``GET /`` said about the server."""

    distribution: Distribution
    version: tuple[int, int, int]
    number: str
    cluster_name: str
    lucene_version: str

    @property
    def lucene_major(self) -> int:
        """Major version of the engine's Lucene (0 if not reported)."""
        head = self.lucene_version.split(".")[0]
        return int(head) if head.isdigit() else 0

    @property
    def bm25_k1_plus_one(self) -> bool:
        """Whether the engine's default BM25 multiplies by ``k1 + 1``.

        Elasticsearch (7.x to 9.x) registers Lucene's ``LegacyBM25Similarity``, which
        does; so did OpenSearch before 3.0.  OpenSearch 3.x uses Lucene's
        ``BM25Similarity``, which does not.
        """
        if self.distribution == "elasticsearch":
            return True
        return self.version[0] < 3

    @property
    def label(self) -> str:
        """``OpenSearch 3.8.0`` / ``Elasticsearch 7.10.2``."""
        name = "OpenSearch" if self.distribution == "opensearch" else "Elasticsearch"
        return f"{name} {self.number}"


def parse_info(body: Mapping[str, Any]) -> EngineInfo:
    """Identify the server from its ``GET /`` body.

    Raises:
        UnsupportedEngineError: for anything that is not OpenSearch >= 1 or
            Elasticsearch >= 7.
    """
    version = body.get("version") or {}
    number = str(version.get("number", ""))
    try:
        major, minor, patch = (int(p) for p in number.split("-")[0].split(".")[:3])
    except ValueError:
        raise UnsupportedEngineError(
            f"the server at this URL did not report a version number (GET / gave {dict(body)!r})"
        ) from None
    if version.get("distribution") == "opensearch":
        dist: Distribution = "opensearch"
        if major < 1:
            raise UnsupportedEngineError(f"OpenSearch {number} is too old; esbridge needs 1.0 or later")
    elif body.get("tagline") == "You Know, for Search":
        dist = "elasticsearch"
        if major < 7:
            raise UnsupportedEngineError(
                f"Elasticsearch {number} is too old; esbridge needs 7.0 or later"
            )
    else:
        raise UnsupportedEngineError(
            f"the server is neither OpenSearch nor Elasticsearch (GET / gave {dict(body)!r})"
        )
    return EngineInfo(
        distribution=dist,
        version=(major, minor, patch),
        number=number,
        cluster_name=str(body.get("cluster_name", "")),
        lucene_version=str(version.get("lucene_version", "")),
    )


def parse_nodes_info(body: Mapping[str, Any]) -> EngineInfo:
    """Identify the server from ``GET /_nodes/_local`` where ``GET /`` is not served.

    Elasticsearch reports a ``build_flavor`` for its nodes; OpenSearch does not (and always
    serves ``GET /``).

    Raises:
        UnsupportedEngineError: as :func:`parse_info`.
    """
    nodes = [n for n in (body.get("nodes") or {}).values() if isinstance(n, Mapping)]
    if not nodes or not nodes[0].get("version"):
        raise UnsupportedEngineError(
            f"the server at this URL answers neither GET / nor GET /_nodes/_local as OpenSearch or "
            f"Elasticsearch do (got {dict(body)!r:.300})"
        )
    node = nodes[0]
    fake_root: dict[str, Any] = {"cluster_name": body.get("cluster_name", ""),
                                 "version": {"number": str(node["version"])}}
    if node.get("build_flavor"):
        fake_root["tagline"] = "You Know, for Search"
    else:
        fake_root["version"]["distribution"] = "opensearch"
    return parse_info(fake_root)


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
    libraries' default, 3.  Nothing else is retried by the client: :meth:`Engine.request`
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
            start = exc.doc[:40]
            shown = ""
            if start.isascii() and start.isprintable():
                shown = f", starting {start!r}{'...' if len(exc.doc) > 40 else ''}"
            return _BadAnswer(f"not valid JSON: {exc.msg} at character {exc.pos} of {len(exc.doc)}{shown}")
        if isinstance(exc, RecursionError) and "decoding" in str(exc):
            return _BadAnswer("JSON nested too deeply to parse")
    return None


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
            return self.client.transport.perform_request(
                method, path, params=dict(params or {}), body=body, headers=dict(headers)
            )
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
            return self.client.transport.perform_request(
                method, path, headers=sent, params=dict(params or {}), body=body
            )
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
        return resp.body

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


def probe_options(options: ConnectionOptions) -> ConnectionOptions:
    """The options of the request that identifies the engine (at most 2 retries, to the URLs
    given: the nodes are discovered once the engine is known)."""
    from dataclasses import replace

    return replace(options, max_retries=min(options.max_retries, 2), sniff=False)


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


#: Headers every request sent in the current context carries (:func:`forwarded_headers`).
_forwarded: ContextVar[Mapping[str, str] | None] = ContextVar("esbridge_forwarded_headers", default=None)


@contextmanager
def forwarded_headers(headers: Mapping[str, str]) -> Iterator[None]:
    """Within the block (and the tasks, worker threads and plans it starts), every request an
    :class:`Engine` or :class:`~esbridge.engine.async_client.AsyncEngine` sends carries ``headers``
    over the engine's own (e.g. the ``Authorization`` of the request a server is answering, so
    that the cluster authorises each caller as itself).  Nothing keeps them after the block."""
    token = _forwarded.set(dict(headers))
    try:
        yield
    finally:
        _forwarded.reset(token)


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


def usable_answer(path: str, answer: Any, *, final: bool, context: str) -> bool:
    """Whether ``answer`` to the request sent to ``path`` may be used: ``False`` when some of its
    shards failed and the request is worth sending again; raises :class:`EngineError`
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


def unavailable_error(options: ConnectionOptions, err: Exception, context: str,
                      tls: str | None) -> EngineUnavailableError:
    """The one-line error of an engine that could not be reached."""
    where = f"{context}: " if context else ""
    return EngineUnavailableError(
        f"{where}cannot reach the engine at {options.display_url} ({_short_reason(err)}); "
        + (tls or "check the URL, that the engine is running, and TLS/auth options"),
    )


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
        its k-NN plugin, Lucene HNSW) or ``None`` (esbridge keeps them on disk and searches them
        exactly).  Elasticsearch's ``dense_vector`` is not used yet: esbridge's test engines do not
        include an Elasticsearch with it, so that path would be unproven."""
        if self.distribution == "opensearch":
            names = self.plugins()
            if "opensearch-knn" in names or "org.opensearch.knn.plugin.KNNPlugin" in names:
                return "knn_vector"
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
        attempts = 1 + (self.options.max_retries if retry else 0)
        delay = self.options.backoff
        for attempt in range(attempts):
            last = attempt == attempts - 1
            try:
                answer = self._transport.perform(method, path, None, body, headers)
                self._down = False
                if usable_answer(path, answer, final=last or not retry, context=context):
                    return answer
                log.debug("shards failed; retrying %s %s", method, path)
            except _Unreachable as err:
                give_up = last or self._down
                tls = _tls_problem(self.options, err, probe=give_up)
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
            self._sleep(wait)
            delay *= 2
        raise AssertionError("unreachable")  # pragma: no cover

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
    """Every hit of ``body``'s query over ``index``, in index order (:meth:`Engine.scroll`
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


#: Endpoints whose answer depends on which copy of a shard serves it; they are sent with
#: :attr:`ConnectionOptions.preference`.
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


def _param(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


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


def raise_mget_errors(resp: Mapping[str, Any], index: str, doing: str) -> None:
    """An ``_mget`` answer with a per-document failure raises :class:`EngineError`: a document
    the engine failed to read is never treated as a missing one."""
    for d in resp.get("docs", []):
        err = d.get("error")
        if err:
            reason = f"{err.get('type', 'error')}: {err.get('reason', '')}" if isinstance(err, Mapping) else str(err)
            raise EngineError(f"{doing} from {index!r}: the engine failed on document {d.get('_id')!r} "
                              f"({reason[:300]})")


def ndjson_lines(items: Sequence[Mapping[str, Any]]) -> str:
    """NDJSON text for bulk/msearch bodies (one compact JSON object a line)."""
    return "".join(json.dumps(item, ensure_ascii=False, separators=(",", ":")) + "\n" for item in items)
