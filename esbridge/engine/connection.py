"""How esbridge reaches a cluster and what the cluster is.

:class:`ConnectionOptions` holds the nodes' URLs (one, several separated by commas, or
``ESBRIDGE_URL``'s), credentials, TLS options, timeouts and retries; URLs are checked and shown
without their passwords (:func:`redact_url`).  :class:`EngineInfo` is what the server said of
itself (``GET /``, or ``GET /_nodes/_local`` where that is not served): OpenSearch or
Elasticsearch, and its version.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from esbridge.errors import ConfigurationError, UnsupportedEngineError

Distribution = Literal["opensearch", "elasticsearch"]


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
