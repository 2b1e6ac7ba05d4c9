"""One way to get an engine, used by the CLI, the tests and CI alike.

In order:

1. an existing cluster: explicit URLs, or ``ESBRIDGE_URL`` (one URL, or several nodes' URLs
   separated by commas; with the authentication and TLS options of
   :class:`~esbridge.engine.connection.ConnectionOptions`);
2. where a Docker engine answers, a container started with testcontainers
   (images of :data:`DOCKER_IMAGES`, configured like ``docker-compose.yml``);
3. otherwise esbridge's local node of the distribution that is already running
   (found with :func:`esbridge.nodes.local.running_nodes`, whatever its name and
   port), and only when none runs, a new one started from Maven Central artifacts
   (:mod:`esbridge.nodes.local`); or, when a node name is given, that node only
   (started when it is not running), never another running node.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

from esbridge.engine.client import Engine
from esbridge.engine.connection import ConnectionOptions, given_urls
from esbridge.errors import ConfigurationError, ProvisioningError
from esbridge.nodes import artifacts, local

#: Images used where Docker is available; the same as docker-compose.yml.
DOCKER_IMAGES: dict[str, str] = {
    "opensearch": "opensearchproject/opensearch:3.8.0",
    "elasticsearch": "docker.elastic.co/elasticsearch/elasticsearch:7.10.2",
    "elasticsearch8": "docker.elastic.co/elasticsearch/elasticsearch:8.19.21",
}

_DOCKER_ENV: dict[str, dict[str, str]] = {
    "opensearch": {
        "discovery.type": "single-node",
        "DISABLE_SECURITY_PLUGIN": "true",
        "DISABLE_INSTALL_DEMO_CONFIG": "true",
        "OPENSEARCH_JAVA_OPTS": "-Xms1g -Xmx1g",
    },
    "elasticsearch": {
        "discovery.type": "single-node",
        "xpack.security.enabled": "false",
        "ES_JAVA_OPTS": "-Xms1g -Xmx1g",
    },
    # secured: the built-in superuser ``elastic`` with a password made for the container
    "elasticsearch8": {
        "discovery.type": "single-node",
        "xpack.security.enabled": "true",
        "xpack.security.http.ssl.enabled": "false",
        "xpack.security.transport.ssl.enabled": "false",
        "ES_JAVA_OPTS": "-Xms1g -Xmx1g",
    },
}

#: Environment variables that carry a secret: the compose file takes them from the user's
#: environment, esbridge generates them per container (never written down).
SECRET_ENV: dict[str, tuple[str, ...]] = {"elasticsearch8": ("ELASTIC_PASSWORD",)}


@dataclass
class ProvisionedEngine:
    """Where an engine came from, and how to let it go."""

    url: str
    source: str  # "url", "docker" or "local"
    distribution: str
    handle: Any = None
    #: for a local node: its name, and whether this call started it (``False``: it was running)
    node: str | None = None
    started: bool = False
    #: for a secured engine esbridge provisioned (or a URL of one of its running nodes):
    #: :class:`ConnectionOptions` keywords (user, password, CA file)
    credentials: dict[str, Any] = field(default_factory=dict, repr=False)
    #: every node's URL where several were given (``url`` is the first)
    urls: tuple[str, ...] = ()

    def options(self, **explicit: Any) -> ConnectionOptions:
        """Connection options: ``explicit`` ones, then the ``ESBRIDGE_*`` variables
        (:meth:`ConnectionOptions.from_env`), then what this engine was provisioned with: its
        CA file when neither gives one (whatever credentials they give), its user and password
        when neither gives a user, an API key or a URL with a user in it."""
        opts = ConnectionOptions.from_env(self.urls or self.url, **explicit)
        creds = dict(self.credentials)
        if opts.ca_certs is not None or not opts.verify_certs:
            creds.pop("ca_certs", None)
        if opts.username is not None or opts.api_key is not None or any(urlsplit(u).username for u in opts.urls):
            creds.pop("username", None)
            creds.pop("password", None)
        return replace(opts, **creds) if creds else opts

    def release(self) -> None:
        """Stop what was started here (a container); local nodes keep running until
        ``esbridge engine stop``."""
        if self.source == "docker" and self.handle is not None:
            self.handle.stop()
            self.handle = None


def docker_available() -> bool:
    """Whether a Docker engine answers (not just a client on the PATH).

    Asked with ``docker info`` where the ``docker`` CLI is installed (it knows the user's Docker
    contexts), else through the Docker Engine API with docker-py (testcontainers' own client,
    which honours ``DOCKER_HOST``): an engine can answer with no CLI installed.
    """
    if os.environ.get("ESBRIDGE_NO_DOCKER"):
        return False
    if shutil.which("docker") is None:
        return _docker_api_answers()
    try:
        out = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0 and bool(out.stdout.strip())


def _docker_api_answers() -> bool:
    try:
        import docker
    except ImportError:
        return False
    try:
        client = docker.from_env(timeout=10)  # asks the engine for its API version
    except Exception:  # docker-py raises DockerException, or requests' errors, for no engine
        return False
    try:
        return bool(client.ping()) and bool(client.info().get("ServerVersion"))
    except Exception:
        return False
    finally:
        client.close()


def start_container(distribution: str) -> ProvisionedEngine:
    """Start the distribution's image with testcontainers and wait until it answers (``opensearch-knn``:
    OpenSearch's image, which bundles the k-NN plugin)."""
    try:
        from testcontainers.core.container import DockerContainer
        from testcontainers.core.waiting_utils import wait_for_logs
    except ImportError as err:
        raise ProvisioningError(
            'testcontainers is not installed; `pip install "esbridge[test]"`'
        ) from err
    if distribution == "opensearch-knn":
        distribution = "opensearch"
    if distribution not in DOCKER_IMAGES:
        raise ConfigurationError(
            f"no image for distribution {distribution!r}; choose one of {', '.join(DOCKER_IMAGES)}"
        )
    image = os.environ.get(f"ESBRIDGE_{distribution.upper()}_IMAGE", DOCKER_IMAGES[distribution])
    container = DockerContainer(image).with_exposed_ports(9200)
    for key, value in _DOCKER_ENV[distribution].items():
        container = container.with_env(key, value)
    credentials: dict[str, Any] = {}
    if distribution == "elasticsearch8":
        credentials = {"username": "elastic", "password": secrets.token_urlsafe(18)}
        container = container.with_env("ELASTIC_PASSWORD", credentials["password"])
    container.start()
    wait_for_logs(container, r"started", timeout=180)
    url = f"http://{container.get_container_host_ip()}:{container.get_exposed_port(9200)}"
    return ProvisionedEngine(url=url, source="docker", distribution=distribution, handle=container,
                             credentials=credentials)


def find_local_node(distribution: str | None = None) -> local.NodeInfo | None:
    """A running esbridge local node of ``distribution`` (any distribution if ``None``).

    Nodes are looked up under ``$ESBRIDGE_HOME``, so one started with any ``--name`` or
    on any port is found.  Where several run, the one named after its distribution
    comes first, then the default distribution's (:data:`~esbridge.nodes.artifacts.DEFAULT_DISTRIBUTION`),
    then OpenSearch before Elasticsearch, then by name.
    """
    if distribution is not None:
        artifacts.runner_spec(distribution)  # an unknown distribution is an error that lists the valid ones
    nodes = [n for n in local.running_nodes() if distribution is None or n.distribution == distribution]
    if not nodes:
        return None
    order = [artifacts.DEFAULT_DISTRIBUTION, *(d for d in artifacts.RUNNERS if d != artifacts.DEFAULT_DISTRIBUTION)]
    nodes.sort(key=lambda n: (n.name != n.distribution,
                              order.index(n.distribution) if n.distribution in order else len(order), n.name))
    return nodes[0]


def provision(distribution: str | None = artifacts.DEFAULT_DISTRIBUTION, *, url: str | Sequence[str] | None = None,
              use_docker: bool | None = None, progress: bool = False,
              name: str | None = None) -> ProvisionedEngine:
    """An engine URL by the rules of this module (see the module docstring).

    ``url``: one URL, several separated by commas, or a list of them (repeated ``--url``).
    ``distribution`` defaults to :data:`~esbridge.nodes.artifacts.DEFAULT_DISTRIBUTION` (OpenSearch
    with its k-NN plugin); ``None`` takes any running esbridge local node, and starts one of the
    default distribution when none runs.  ``name`` asks for esbridge's local node of that name: it
    is used when running and started otherwise, whatever other node runs.
    """
    urls = given_urls(url)
    if urls:
        # the URL of one of esbridge's running secured nodes: its recorded credentials apply
        ours = next((n for n in map(_local_node, urls) if n is not None), None)
        return ProvisionedEngine(url=urls[0], urls=urls, source="url", distribution=distribution or "opensearch",
                                 credentials=ours.credentials() if ours is not None else {})
    if use_docker is None:
        use_docker = docker_available()
    if use_docker:
        return start_container(distribution or artifacts.DEFAULT_DISTRIBUTION)
    running = find_local_node(distribution) if name is None else local.status(name)
    if running is not None and (distribution is None or running.distribution == distribution):
        return ProvisionedEngine(url=running.url, source="local", distribution=running.distribution,
                                 node=running.name, started=False, credentials=running.credentials())
    node = local.start(distribution or artifacts.DEFAULT_DISTRIBUTION, name=name, progress=progress)
    return ProvisionedEngine(url=node.url, source="local", distribution=node.distribution,
                             node=node.name, started=True, credentials=node.credentials())


def _local_node(url: str) -> local.NodeInfo | None:
    """esbridge's running node at ``url`` (``None`` also for a malformed URL, which the
    connection options report)."""
    try:
        return local.node_for_url(url)
    except ValueError:
        return None


def connect(distribution: str | None = artifacts.DEFAULT_DISTRIBUTION, *, url: str | Sequence[str] | None = None,
            **options: Any) -> Engine:
    """Connect to the engine at ``url``/``ESBRIDGE_URL``, or to esbridge's running local node
    of ``distribution`` (a secured node is reached with the credentials in its record).

    **This may start a Java process.**  With no ``url``, no ``ESBRIDGE_URL`` and no local node
    of ``distribution`` running (``None``: of any distribution), a new local node (OpenSearch
    with its k-NN plugin for ``None``) is installed under ``$ESBRIDGE_HOME``, its artifacts downloaded from Maven
    Central the first time, and started in a JVM of its own (an installed Java:
    :func:`esbridge.nodes.java.find_java`), which keeps running after this program exits
    (``esbridge engine stop`` stops it).  Docker is not used.
    :meth:`Engine.connect <esbridge.engine.client.Engine.connect>` never starts anything: it
    connects to the cluster it is given, or fails.

    ``options``: :class:`~esbridge.engine.connection.ConnectionOptions` fields (credentials,
    timeouts, ...), over the ``ESBRIDGE_*`` variables.
    """
    prov = provision(distribution, url=url, use_docker=False)
    return Engine.connect(prov.options(**options))
