"""A local engine node run from Maven Central artifacts, for machines without Docker.

``esbridge engine start`` installs the jars of an embedded-node runner
(:mod:`esbridge.nodes.artifacts`), starts one node in its own JVM (:mod:`esbridge.nodes.java`
finds one), and waits until it is healthy.  The node runs with the analysis-common, lang-painless
and mapper-extras modules, bound to 127.0.0.1, as a single-node cluster that joins no other.
Several such nodes form a multi-node cluster with
:func:`esbridge.nodes.cluster.start_cluster`; :func:`stop` and :func:`wipe` take a cluster's
name too.

``elasticsearch8`` is different: Elasticsearch 8.19's own distribution (a zip on
Maven Central, pinned the same way), with esbridge's analysis plugins built from
the sources in the package, run secured (TLS on HTTP, a superuser, an API key);
see :mod:`esbridge.nodes.es_distribution`.

Layout under the cache directory (``$ESBRIDGE_HOME``, default
``~/.cache/esbridge``)::

    engines/<distribution>-<version>/lib/*.jar    the runner and its dependencies
    nodes/<name>/                                 data, logs, config of one node
    nodes/<name>/node.json                        pid, port, distribution, version
                                                  (and for a secured node its URL, CA
                                                  file and credentials; mode 0600)
    nodes/<name>/console.log                      the JVM's output
    nodes/<name>/start.lock                       held while the node starts (the
                                                  starting process's id)
    nodes/<cluster>/cluster.json                  a cluster's distribution and nodes
                                                  (<cluster>-1, <cluster>-2, ..., each
                                                  a node directory as above)
    engines/launcher-<digest>/                    the compiled cluster-node launcher

An ``elasticsearch8`` node keeps its downloaded zip and built plugins under
``engines/elasticsearch8-<version>/``, its credentials and CA under ``nodes/<name>/``,
and its unpacked distribution, configuration, data and logs under the directory of
:func:`esbridge.nodes.es_distribution.runtime_root` (``$ESBRIDGE_HOME`` itself, or the
service user's home when esbridge runs as root).

Java: see :func:`esbridge.nodes.java.find_java` (OpenSearch 3.x and Elasticsearch 8.19 need
Java 21+, Elasticsearch 7.10 Java 11+).
"""

from __future__ import annotations

import base64
import json
import logging
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import IO, Any

from esbridge.errors import ConfigurationError, ProvisioningError
from esbridge.home import cache_dir
from esbridge.nodes import es_distribution
from esbridge.nodes.artifacts import DEFAULT_DISTRIBUTION, RunnerSpec, install, runner_spec
from esbridge.nodes.features_plugin import runner_plugin
from esbridge.nodes.java import find_java

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NodeInfo:
    """A local node that esbridge started (its record, ``nodes/<name>/node.json``).

    A secured node (``elasticsearch8``) also records how to reach it: ``https``, the CA
    file that signed its certificate, its superuser and password, and an API key
    (``id:key``).  The password and key never appear in ``repr``.
    """

    name: str
    distribution: str
    version: str
    #: the process that answers on the port (the server)
    pid: int
    port: int
    #: the directory of the node's data, logs and configuration
    home: str
    scheme: str = "http"
    #: the process group esbridge started (the launcher and the server); ``None``: ``pid``'s
    pgid: int | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    api_key: str | None = field(default=None, repr=False)
    ca_certs: str | None = None
    #: for a node of a multi-node cluster (:func:`~esbridge.nodes.cluster.start_cluster`): the cluster's name and the
    #: node's transport port (the other nodes find it there)
    cluster: str | None = None
    transport_port: int | None = None

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    @classmethod
    def from_record(cls, data: dict[str, Any]) -> NodeInfo:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def credentials(self) -> dict[str, Any]:
        """Connection options of this node (:class:`~esbridge.engine.connection.ConnectionOptions`
        keywords): its superuser and CA file; empty for a node without security."""
        if self.username is None:
            return {}
        return {"username": self.username, "password": self.password, "ca_certs": self.ca_certs}

    def auth_header(self) -> dict[str, str]:
        if self.username is None:
            return {}
        return {"Authorization": es_distribution.Credentials(self.username, self.password or "").basic_header()}


def write_record(path: Path, info: NodeInfo) -> None:
    es_distribution.write_private(path, json.dumps(asdict(info)))


def read_record(path: Path) -> NodeInfo:
    return NodeInfo.from_record(json.loads(path.read_text()))


def node_dir(name: str) -> Path:
    if not name or any(c in name for c in "/\\") or name.startswith("."):
        raise ConfigurationError(f"node name {name!r} must be a plain name such as 'default'")
    return cache_dir() / "nodes" / name


#: The runners accept HTTP ports up to 9299 only.
HTTP_PORTS = range(9201, 9300)


def known_nodes() -> list[str]:
    """The names of the nodes and clusters under the cache directory, running or not."""
    root = cache_dir() / "nodes"
    return sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


@contextmanager
def _starting(name: str) -> Iterator[None]:
    """Held while the node ``name`` starts (a lock on ``nodes/<name>/start.lock``): another
    start of the same node meanwhile fails at once, saying which process is starting it."""
    import fcntl

    home = node_dir(name)
    home.mkdir(parents=True, exist_ok=True)
    path = home / "start.lock"
    with open(path, "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "unknown"
            raise ProvisioningError(
                f"another start of node {name!r} is under way (process {holder} holds {path}); wait for it to "
                f"finish, then `esbridge engine status` shows the node"
            ) from None
        f.seek(0)
        f.truncate()
        f.write(str(os.getpid()))
        f.flush()
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def free_port(candidates: Sequence[int] | None = None) -> int:
    for port in candidates or ():
        if port_free(port):
            return port
    if candidates:
        raise ProvisioningError(
            f"no free HTTP port in {candidates[0]}-{candidates[-1]} on 127.0.0.1; stop a node "
            "(esbridge engine stop) or free a port"
        )
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_free(port: int) -> bool:
    """Whether a node could listen on ``port`` of 127.0.0.1: nothing listens there.  Connections
    of a node stopped a moment ago may linger in TIME_WAIT; like the engines, which listen with
    ``SO_REUSEADDR``, the check does not count them."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return True


def http_json(url: str, timeout: float = 5.0, node: NodeInfo | None = None, *, method: str = "GET",
               body: Any = None, headers: dict[str, str] | None = None) -> Any:
    """``url``'s JSON answer; for a secured ``node`` over TLS verified with its CA, as its
    superuser (or with ``headers``' own ``Authorization``)."""
    sent = {**(node.auth_header() if node is not None else {}), **(headers or {})}
    data = None
    if body is not None:
        data = json.dumps(body).encode("utf-8")
        sent["Content-Type"] = "application/json"
    context = None
    if url.startswith("https:"):
        context = ssl.create_default_context(cafile=node.ca_certs if node is not None else None)
    req = urllib.request.Request(url, data=data, headers=sent, method=method)
    with urllib.request.urlopen(req, timeout=timeout, context=context) as resp:
        return json.loads(resp.read().decode("utf-8"))


def status(name: str = "default") -> NodeInfo | None:
    """The node ``name`` if it is running and answering, else ``None``."""
    meta = node_dir(name) / "node.json"
    if not meta.exists():
        return None
    try:
        info = read_record(meta)
    except (OSError, ValueError, TypeError):
        return None
    if not _alive(info.pid):
        return None
    try:
        if info.pid not in answering_pids(info.url, info):
            return None  # another process answers on that port: not this node
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return info


def answering_pids(url: str, node: NodeInfo | None = None) -> set[int]:
    """The process ids of the node(s) answering at ``url`` (``GET /_nodes/_local/process``),
    so a node is never mistaken for another that took its port."""
    nodes = http_json(url + "/_nodes/_local/process", node=node)["nodes"]
    return {int(n["process"]["id"]) for n in nodes.values()}


def node_for_url(url: str) -> NodeInfo | None:
    """The running esbridge node whose URL is ``url`` (a loopback address and its port), if any."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.hostname not in ("127.0.0.1", "localhost") or parts.port is None:
        return None
    for node in running_nodes():
        if node.port == parts.port and node.scheme == parts.scheme:
            return node
    return None


def log_tail(name: str, lines: int = 40) -> str:
    """The last ``lines`` lines of the node's console log."""
    path = node_dir(name) / "console.log"
    if not path.exists():
        return "(no log)"
    with open(path, encoding="utf-8", errors="replace") as f:
        return "".join(f.readlines()[-lines:])


class PortTaken(ProvisioningError):
    """Another process answered on the port the node was to use."""


def start(
    distribution: str = DEFAULT_DISTRIBUTION,
    *,
    name: str | None = None,
    port: int | None = None,
    heap: str = "1g",
    timeout: float = 180.0,
    progress: bool = False,
) -> NodeInfo:
    """Start a local node (installing it first if needed) and wait until it is healthy.

    If a node of that name is already running it is returned as it is.  When another
    process takes the chosen port before the node binds it, the node is stopped and, if
    the port was chosen here (no ``port`` given), started again on another free port
    (up to three times); a given ``port`` is an error.  While one process starts a node,
    another start of the same node fails at once, naming that process.

    Args:
        distribution: ``"opensearch-knn"`` (the default: OpenSearch with its k-NN plugin, which keeps
            and searches document vectors), ``"opensearch"``, ``"elasticsearch"`` or ``"elasticsearch8"``.
        name: node name (directory under the cache), default the distribution.
        port: HTTP port on 127.0.0.1 (default: a free one).
        heap: JVM heap (``-Xms``/``-Xmx``).
        timeout: seconds to wait for the cluster to be at least yellow.

    Raises:
        ProvisioningError: with the node's log tail when it does not come up; when another
            process is starting the same node.
    """
    name = name or distribution
    taken: set[int] = set()
    with _starting(name):
        for attempt in range(3):
            chosen = port
            if chosen is None:
                chosen = free_port([p for p in HTTP_PORTS if p not in taken])
            try:
                return _start_once(distribution, name=name, port=chosen, heap=heap, timeout=timeout,
                                   progress=progress, given=port is not None)
            except PortTaken:
                if port is not None or attempt == 2:
                    raise
                taken.add(chosen)
    raise AssertionError("unreachable")  # pragma: no cover


def _start_once(
    distribution: str,
    *,
    name: str | None,
    port: int,
    heap: str,
    timeout: float,
    progress: bool,
    given: bool,
) -> NodeInfo:
    """One attempt of :func:`start` on ``port`` (``given``: the caller chose it)."""
    spec = runner_spec(distribution)
    name = name or distribution
    members = cluster_members(name)
    if members is not None:
        raise ConfigurationError(
            f"{name!r} is a cluster of {len(members)} nodes; start it with --nodes {len(members)} "
            "(start_cluster), or choose another --name for a single node"
        )
    marker = node_dir(name) / "cluster"
    if marker.exists():
        cluster = marker.read_text().strip()
        raise ConfigurationError(
            f"node {name!r} belongs to cluster {cluster!r}; start the cluster (esbridge engine start --name "
            f"{cluster} --nodes N), or choose another --name for a single node"
        )
    running = status(name)
    if running is not None:
        if running.distribution != distribution:
            raise ProvisioningError(
                f"node {name!r} is running {running.distribution}; stop it first "
                f"(esbridge engine stop --name {name})"
            )
        return running
    lib = install(distribution, progress=progress)
    java = find_java(spec.min_java)
    home = node_dir(name)
    home.mkdir(parents=True, exist_ok=True)
    if port not in HTTP_PORTS:
        raise ConfigurationError(f"port {port} is outside {HTTP_PORTS[0]}-{HTTP_PORTS[-1]}, "
                                 "the range the node runner accepts")
    elif not port_free(port):
        if not given:
            raise PortTaken(f"port {port} on 127.0.0.1 was taken")
        raise ProvisioningError(f"port {port} on 127.0.0.1 is in use; choose another with --port")
    transport_port = free_port()
    server_pid: Callable[[], int | None]
    if spec.kind == "distribution":
        proc, info, server_pid = _launch_distribution(spec, name, lib, java, port, transport_port, heap)
    else:
        proc, info = _launch_runner(spec, name, lib, java, port, transport_port, heap)
        server_pid = lambda: proc.pid  # noqa: E731
    write_record(home / "node.json", info)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log_tail(name)
            if spec.kind == "distribution" and not given and "BindHttpException" in log_tail(name, 1000):
                # another process bound the port first (the runner's JVM reports it by answering)
                raise PortTaken(f"port {port} on 127.0.0.1 was taken before the {distribution} node bound it")
            raise ProvisioningError(
                f"the {distribution} node exited with code {proc.returncode} while starting; "
                f"last lines of its log:\n{tail}"
            )
        try:
            health = http_json(f"{info.url}/_cluster/health?wait_for_status=yellow&timeout=2s", node=info)
            if health.get("status") in ("yellow", "green"):
                answering = answering_pids(info.url, info)
                pid = server_pid()
                if pid is not None and pid in answering:
                    if spec.kind == "distribution":
                        info = _finish_distribution(replace(info, pid=pid), home)
                    return info
                if pid is not None:  # (None: the server has not written its pid file yet)
                    # Someone else's node took the port between our check and our JVM binding it.
                    stop(name)
                    raise PortTaken(
                        f"another node (process {', '.join(map(str, sorted(answering)))}) answers on port "
                        f"{port}, which this {distribution} node was to use; it was stopped so nothing is "
                        "written to the wrong node. Start it again (a free port is chosen) or pass --port"
                    )
        except (OSError, ValueError, KeyError, TypeError):
            pass
        time.sleep(1.0)
    stop(name)
    raise ProvisioningError(
        f"the {distribution} node did not become healthy within {timeout:.0f}s; "
        f"last lines of its log:\n{log_tail(name)}"
    )


def jvm_command(java: str, heap: str, *options: str) -> list[str]:
    """The JVM and its options for an embedded-node runner (heap, ``options``, headless, UTF-8)."""
    return [java, f"-Xms{heap}", f"-Xmx{heap}", *options, "-Djava.awt.headless=true", "-Dfile.encoding=UTF-8",
            "-Dlog4j2.formatMsgNoLookups=true"]


def runner_args(spec: RunnerSpec, home: Path, port: int, cluster_name: str,
                plugins: Sequence[str] = ()) -> list[str]:
    """The embedded-node runner's own arguments: one node under ``home`` answering HTTP on ``port``,
    loading ``plugins`` (classes on the class path) besides the runner's own."""
    args = ["-basePath", str(home), "-numOfNode", "1", "-baseHttpPort", str(port - 1), "-clusterName", cluster_name]
    types = [*spec.plugin_types, *plugins]
    if types:
        args += ["-pluginTypes", ",".join(types)]
    return args


def spawn(cmd: list[str], console: IO[str], home: Path) -> subprocess.Popen[bytes]:
    """Start ``cmd`` in its own session under ``home``, its output into ``console`` (closed here)."""
    proc = subprocess.Popen(cmd, stdout=console, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True, cwd=home)
    console.close()
    return proc


def _launch_runner(spec: RunnerSpec, name: str, lib: Path, java: str, port: int, transport_port: int,
                   heap: str) -> tuple[subprocess.Popen[bytes], NodeInfo]:
    """Start an embedded-node runner's JVM on ``port``."""
    home = node_dir(name)
    conf = home / "node_1" / "config"
    conf.mkdir(parents=True, exist_ok=True)
    (conf / spec.config_name).write_text(
        "\n".join(
            [
                f"cluster.name: esbridge-{name}",
                "discovery.type: single-node",
                "network.host: 127.0.0.1",
                f"transport.port: {transport_port}",
                "action.destructive_requires_name: true",
                "cluster.routing.allocation.disk.threshold_enabled: false",
                "",
            ]
        )
    )
    jars, plugins = runner_plugin(spec.family, spec.version, lib, java)
    console = open(home / "console.log", "w")
    cmd = [
        *jvm_command(java, heap),
        "-cp",
        os.pathsep.join([str(lib / "*"), *jars]),
        spec.main_class,
        *runner_args(spec, home, port, f"esbridge-{name}", plugins),
    ]
    proc = spawn(cmd, console, home)
    return proc, NodeInfo(name=name, distribution=spec.distribution, version=spec.version, pid=proc.pid,
                          port=port, home=str(home), pgid=proc.pid)


def _launch_distribution(spec: RunnerSpec, name: str, es_home: Path, java: str, port: int, transport_port: int,
                         heap: str) -> tuple[subprocess.Popen[bytes], NodeInfo, Callable[[], int | None]]:
    """Start a distribution's node (``bin/elasticsearch``) on ``port``, as the service account
    when esbridge runs as root; returns the launcher's process, the node's record so far and
    how to read the server's process id once it is known."""
    record = node_dir(name)
    record.chmod(0o700)
    account = es_distribution.service_account()
    run = es_distribution.runtime_root(account, cache_dir()) / "nodes" / name
    run.mkdir(parents=True, exist_ok=True)
    (run / "es.pid").unlink(missing_ok=True)
    creds = es_distribution.prepare_node(name=name, record=record, run=run, es_home=es_home, java=java, port=port,
                                         transport_port=transport_port, heap=heap, account=account)
    console = open(record / "console.log", "w")
    proc = subprocess.Popen(es_distribution.launch_command(es_home, run, account), stdout=console,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, cwd=run,
                            env=es_distribution.launch_env(java, run, account))
    console.close()
    info = NodeInfo(name=name, distribution=spec.distribution, version=spec.version, pid=proc.pid, port=port,
                    home=str(run), scheme="https", pgid=proc.pid, username=creds.username,
                    password=creds.password, api_key=creds.api_key or None, ca_certs=str(record / "ca.crt"))
    return proc, info, lambda: es_distribution.server_pid(run)


def _finish_distribution(info: NodeInfo, record: Path) -> NodeInfo:
    """The node's API key: the recorded one if it still authenticates, else a new one created
    through ``POST /_security/api_key``; the record is rewritten with it and the server's pid."""
    key = info.api_key
    if key:
        encoded = base64.b64encode(key.encode()).decode()
        try:
            http_json(f"{info.url}/_security/_authenticate", node=info,
                       headers={"Authorization": f"ApiKey {encoded}"})
        except urllib.error.HTTPError:
            key = None
    if not key:
        created = http_json(f"{info.url}/_security/api_key", node=info, method="POST",
                             body=es_distribution.api_key_request(info.name), timeout=60.0)
        key = f"{created['id']}:{created['api_key']}"
        creds = es_distribution.read_credentials(record)
        if creds is not None:
            es_distribution.save_credentials(record, replace(creds, api_key=key))
    info = replace(info, api_key=key)
    write_record(record / "node.json", info)
    return info


def stop(name: str = "default", *, timeout: float = 30.0) -> bool:
    """Stop the node ``name``, or every node of the cluster ``name``; ``True`` if one was running.

    A cluster's record and data stay, so :func:`~esbridge.nodes.cluster.start_cluster` brings it back as it was."""
    members = cluster_members(name)
    if members is not None:
        with ThreadPoolExecutor(max_workers=len(members) or 1) as pool:
            return any(list(pool.map(lambda m: stop(m, timeout=timeout), members)))
    meta = node_dir(name) / "node.json"
    if not meta.exists():
        return False
    info = read_record(meta)
    group = info.pgid or info.pid

    def alive() -> bool:
        return _alive(info.pid) or _alive(group)

    was = alive()
    if was:
        try:
            os.killpg(group, signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + timeout
        while alive() and time.monotonic() < deadline:
            time.sleep(0.3)
        if alive():
            for target in {group, info.pid}:
                try:
                    os.killpg(target, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
    meta.unlink(missing_ok=True)
    return was


def wipe(name: str) -> None:
    """Stop the node (or every node of the cluster ``name``) and delete its data (for a
    distribution's node, also its own directory)."""
    members = cluster_members(name)
    if members is not None:
        stop(name)
        for member in members:
            wipe(member)
        shutil.rmtree(node_dir(name), ignore_errors=True)
        return
    stop(name)
    account = es_distribution.service_account() if os.geteuid() == 0 else None
    run = es_distribution.runtime_root(account, cache_dir()) / "nodes" / name
    if run != node_dir(name):
        shutil.rmtree(run, ignore_errors=True)
    shutil.rmtree(node_dir(name), ignore_errors=True)


def running_nodes() -> Sequence[NodeInfo]:
    """Every node under the cache directory that is running."""
    root = cache_dir() / "nodes"
    if not root.exists():
        return []
    return [n for n in (status(p.name) for p in sorted(root.iterdir()) if p.is_dir()) if n is not None]


# ---- the records of multi-node clusters --------------------------------------------------


def cluster_record(name: str) -> dict[str, Any] | None:
    path = node_dir(name) / "cluster.json"
    if not path.exists():
        return None
    try:
        record: dict[str, Any] = json.loads(path.read_text())
        [str(m) for m in record["members"]]
    except (OSError, ValueError, KeyError, TypeError):
        raise ProvisioningError(
            f"the record of cluster {name!r} ({path}) is unreadable; delete the directory {path.parent} "
            "and the node directories of its members, or choose another name"
        ) from None
    return record


def cluster_members(name: str) -> list[str] | None:
    """The node names of the cluster ``name`` in order, or ``None`` if ``name`` names no cluster."""
    record = cluster_record(name)
    return None if record is None else [str(m) for m in record["members"]]
