"""A local multi-node cluster: several local nodes (:mod:`esbridge.nodes.local`), each in its own
JVM, that form one cluster on loopback.

:func:`start_cluster` starts them; each node finds the others at their transport ports, and the
first start bootstraps the cluster from all of them.  The runners fix a node's name and, for
OpenSearch, make a lone node a single-node cluster; a small launcher
(``launcher/EsbridgeNode.java``, compiled once with the JDK's ``javac`` and cached under
``engines/launcher-<digest>/``) gives each node its own name, HTTP port and discovery type instead.
The cluster's record is ``nodes/<cluster>/cluster.json``: its distribution and nodes
(``<cluster>-1``, ``<cluster>-2``, ..., each a node directory of its own).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from esbridge.engine.calls import path_segment
from esbridge.errors import ConfigurationError, ProvisioningError
from esbridge.home import cache_dir
from esbridge.nodes import es_distribution
from esbridge.nodes.artifacts import RUNNERS, RunnerSpec, install, runner_spec
from esbridge.nodes.features_plugin import runner_plugin
from esbridge.nodes.java import find_java, find_javac
from esbridge.nodes.local import (
    HTTP_PORTS,
    NodeInfo,
    PortTaken,
    answering_pids,
    cluster_record,
    free_port,
    http_json,
    jvm_command,
    log_tail,
    node_dir,
    port_free,
    runner_args,
    spawn,
    status,
    stop,
    write_record,
)

#: The cluster-node launcher's source in the package, and its class.
LAUNCHER_SOURCE = "EsbridgeNode.java"
LAUNCHER_CLASS = "EsbridgeNode"
#: JVM heap of each node of a cluster: three nodes fit a small machine.
CLUSTER_HEAP = "512m"


@dataclass(frozen=True)
class ClusterInfo:
    """A local multi-node cluster that esbridge started (:func:`start_cluster`): its nodes in
    order (``<name>-1``, ``<name>-2``, ...), each a :class:`~esbridge.nodes.local.NodeInfo` of its own."""

    name: str
    distribution: str
    version: str
    nodes: tuple[NodeInfo, ...]

    @property
    def url(self) -> str:
        """The first node's URL (every node answers for the whole cluster)."""
        return self.nodes[0].url

    @property
    def urls(self) -> tuple[str, ...]:
        """Every node's URL."""
        return tuple(n.url for n in self.nodes)


def launcher_classes() -> Path:
    """The directory of the compiled cluster-node launcher, compiled on first use and cached
    under ``$ESBRIDGE_HOME/engines/`` by a hash of its source."""
    source = resources.files("esbridge.nodes").joinpath("launcher", LAUNCHER_SOURCE).read_bytes()
    target = cache_dir() / "engines" / f"launcher-{hashlib.sha256(source).hexdigest()[:16]}"
    if (target / f"{LAUNCHER_CLASS}.class").is_file():
        return target
    javac = find_javac()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".launcher-", dir=target.parent))
    try:
        (tmp / LAUNCHER_SOURCE).write_bytes(source)
        done = subprocess.run([javac, "--release", "11", "-encoding", "UTF-8", "-nowarn", "-d", str(tmp / "classes"),
                               str(tmp / LAUNCHER_SOURCE)], capture_output=True, text=True)
        if done.returncode != 0:
            raise ProvisioningError(f"compiling esbridge's node launcher with {javac} failed: "
                                    f"{(done.stderr or done.stdout).strip()[-1500:]}")
        try:
            os.replace(tmp / "classes", target)
        except OSError:
            if not (target / f"{LAUNCHER_CLASS}.class").is_file():
                raise
            # another process compiled it at the same time
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def cluster_status(name: str) -> ClusterInfo | None:
    """The cluster ``name`` if every one of its nodes is running and answering, else ``None``."""
    record = cluster_record(name)
    if record is None:
        return None
    nodes = [status(str(m)) for m in record["members"]]
    if any(n is None for n in nodes):
        return None
    return ClusterInfo(name=name, distribution=str(record["distribution"]), version=str(record["version"]),
                       nodes=tuple(n for n in nodes if n is not None))


def wait_for_health(url: str, *, status: str = "green", nodes: int | None = None, index: str | None = None,
                    timeout: float = 60.0, node: NodeInfo | None = None) -> dict[str, Any]:
    """Wait until the cluster at ``url`` (or only ``index`` in it) is at least ``status``
    (``"yellow"``: every primary shard assigned; ``"green"``: every copy), with at least
    ``nodes`` nodes if given; return its ``_cluster/health``.

    Raises:
        ProvisioningError: the status was not reached in ``timeout`` seconds (the message
            gives the last health seen).
    """
    if status not in ("yellow", "green"):
        raise ConfigurationError(f"status must be 'yellow' or 'green', got {status!r}")
    path = f"/_cluster/health/{path_segment(index, patterns=True)}" if index else "/_cluster/health"
    deadline = time.monotonic() + timeout
    last: Any = "no answer"
    while True:
        left = deadline - time.monotonic()
        wait = max(1, min(10, int(left)))
        params = {"wait_for_status": status, "timeout": f"{wait}s",
                  **({"wait_for_nodes": f">={nodes}"} if nodes else {})}
        query = urllib.parse.urlencode(params)
        try:
            health = http_json(f"{url}{path}?{query}", timeout=wait + 10.0, node=node)
            if not health.get("timed_out"):
                return dict(health)
            last = health
        except urllib.error.HTTPError as err:  # 408: timed out waiting, with the health as its body
            try:
                last = json.loads(err.read().decode("utf-8"))
            except (OSError, ValueError):
                last = f"HTTP {err.code}"
        except (OSError, ValueError) as err:
            last = str(err)
            time.sleep(1.0)
        if time.monotonic() >= deadline:
            seen = (f"status {last.get('status')}, {last.get('number_of_nodes')} node(s), "
                    f"{last.get('unassigned_shards')} unassigned shard(s)") if isinstance(last, dict) else last
            raise ProvisioningError(
                f"{index or 'the cluster'} at {url} did not become {status}"
                f"{f' with {nodes} nodes' if nodes else ''} within {timeout:.0f}s ({seen})"
            )


def start_cluster(
    distribution: str = "opensearch",
    *,
    name: str | None = None,
    nodes: int = 3,
    heap: str = CLUSTER_HEAP,
    timeout: float = 240.0,
    progress: bool = False,
    java_options: Sequence[str] = (),
) -> ClusterInfo:
    """Start a cluster of ``nodes`` local nodes on 127.0.0.1 and wait until it has formed.

    Each node runs in its own JVM with its own name (``<name>-1``, ``<name>-2``, ...), data
    directory, HTTP port (a free one in 9201-9299) and transport port; every node is
    cluster-manager-eligible and holds data, and the first start bootstraps the cluster from
    all of them.  Returns once every node answers as itself (the port and process checks of
    :func:`~esbridge.nodes.local.status`) and the cluster has all its nodes and is at least yellow.

    A cluster of that name that is running is returned as it is.  One whose nodes are partly
    or all stopped (:func:`~esbridge.nodes.local.stop`, or a node that died) is brought back from
    its data: the missing nodes start again (on their former transport port where it is free) and rejoin.

    Args:
        distribution: ``"opensearch"``, ``"opensearch-knn"`` or ``"elasticsearch"`` (not the
            secured ``elasticsearch8``).
        name: the cluster's name (default ``<distribution>-cluster``).
        nodes: how many nodes (at least 2; 3 lets the cluster lose one and keep a quorum).
        heap: each node's JVM heap.
        timeout: seconds to wait for the cluster to form.
        java_options: more JVM options for each node (e.g. ``-XX:TieredStopAtLevel=1``, which
            starts nodes faster on a small machine at some cost in throughput).

    Raises:
        ConfigurationError: a bad ``nodes``, or ``name`` taken by a single node or by a
            cluster of another size.
        ProvisioningError: with a node's log tail when the cluster does not come up.
    """
    spec = runner_spec(distribution)
    if spec.kind != "runner":
        raise ConfigurationError(
            f"a local multi-node cluster runs {', '.join(d for d, s in RUNNERS.items() if s.kind == 'runner')}; "
            f"not {distribution}"
        )
    if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 2:
        raise ConfigurationError(f"nodes must be an integer >= 2 for a cluster, got {nodes!r} (one node: start())")
    name = name or f"{distribution}-cluster"
    home = node_dir(name)
    record = cluster_record(name)
    if record is None:
        if (home / "node.json").exists() or (home / "node_1").exists():
            raise ConfigurationError(f"{name!r} is a single node's name; choose another name for the cluster")
        members = [f"{name}-{i}" for i in range(1, nodes + 1)]
        for member in members:
            if node_dir(member).exists():
                raise ConfigurationError(
                    f"a node directory named {member!r} exists ({node_dir(member)}), which cluster {name!r} would "
                    "use for its node; choose another cluster name or delete that directory"
                )
        record = {"distribution": distribution, "version": spec.version, "members": members, "transport_ports": {}}
    else:
        members = [str(m) for m in record["members"]]
        if record.get("distribution") != distribution:
            raise ProvisioningError(
                f"cluster {name!r} runs {record.get('distribution')}; stop it first "
                f"(esbridge engine stop --name {name}) or choose another name"
            )
        if len(members) != nodes:
            raise ConfigurationError(
                f"cluster {name!r} has {len(members)} nodes; start it with {len(members)} nodes, or choose "
                "another name for a cluster of another size"
            )
    lib = install(distribution, progress=progress)
    java = find_java(spec.min_java)
    launcher = launcher_classes()
    home.mkdir(parents=True, exist_ok=True)
    for attempt in range(3):
        try:
            return _start_members(spec, name, record, lib, launcher, java, heap, timeout, tuple(java_options))
        except PortTaken:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def _start_members(spec: RunnerSpec, name: str, record: dict[str, Any], lib: Path, launcher: Path, java: str,
                   heap: str, timeout: float, java_options: tuple[str, ...]) -> ClusterInfo:
    """Start the nodes of the cluster ``name`` that are not running and wait for the cluster
    (one attempt of :func:`start_cluster`; the nodes started here are stopped on failure)."""
    members = [str(m) for m in record["members"]]
    running = {m: status(m) for m in members}
    missing = [m for m in members if running[m] is None]
    ports: dict[str, int] = {m: int(p) for m, p in (record.get("transport_ports") or {}).items()}
    for m, info in running.items():
        if info is not None and info.transport_port:
            ports[m] = info.transport_port
    for m in missing:
        if m not in ports or not port_free(ports[m]) or list(ports.values()).count(ports[m]) > 1:
            ports[m] = free_port()
            while list(ports.values()).count(ports[m]) > 1:
                ports[m] = free_port()
    record = {**record, "transport_ports": {m: ports[m] for m in members}}
    es_distribution.write_private(node_dir(name) / "cluster.json", json.dumps(record))
    seeds = [f"127.0.0.1:{ports[m]}" for m in members]
    taken = {info.port for info in running.values() if info is not None}
    launched: dict[str, tuple[subprocess.Popen[bytes], NodeInfo]] = {}
    try:
        for m in missing:
            http = free_port([p for p in HTTP_PORTS if p not in taken])
            taken.add(http)
            launched[m] = _launch_member(spec, name, m, members, lib, launcher, java, http, ports[m], seeds, heap,
                                         java_options)
            write_record(node_dir(m) / "node.json", launched[m][1])
        answered: set[str] = set()
        deadline = time.monotonic() + timeout
        first = running[members[0]]
        url = (first if first is not None else launched[members[0]][1]).url
        while time.monotonic() < deadline:
            for m, (proc, info) in launched.items():
                if proc.poll() is not None:
                    tail = log_tail(m, 1000)
                    if "BindHttpException" in tail or "BindTransportException" in tail:
                        raise PortTaken(f"a port of node {m!r} was taken before it bound it")
                    raise ProvisioningError(
                        f"node {m!r} of cluster {name!r} exited with code {proc.returncode} while starting; "
                        f"last lines of its log:\n{log_tail(m)}"
                    )
                if m not in answered:
                    try:
                        pids = answering_pids(info.url)
                    except (OSError, ValueError, KeyError, TypeError):
                        continue
                    if proc.pid not in pids:
                        raise PortTaken(f"another node (process {', '.join(map(str, sorted(pids)))}) answers on "
                                         f"port {info.port}, which node {m!r} was to use")
                    answered.add(m)
            if len(answered) == len(launched):
                try:
                    query = urllib.parse.urlencode({"wait_for_nodes": f">={len(members)}", "wait_for_status": "yellow",
                                                    "timeout": "2s"})
                    health = http_json(f"{url}/_cluster/health?{query}", timeout=15.0)
                    if not health.get("timed_out") and int(health.get("number_of_nodes", 0)) >= len(members):
                        break
                except (OSError, ValueError, TypeError):
                    pass
            time.sleep(1.0)
        else:
            late = [m for m in launched if m not in answered]
            which = late[0] if late else members[0]
            raise ProvisioningError(
                f"cluster {name!r} did not form within {timeout:.0f}s"
                f"{f' (nodes not answering: {late})' if late else ''}; last lines of the log of {which!r}:\n"
                f"{log_tail(which)}"
            )
    except BaseException:
        for m in launched:
            stop(m)
        raise
    infos = {**{m: i for m, i in running.items() if i is not None}, **{m: li[1] for m, li in launched.items()}}
    return ClusterInfo(name=name, distribution=spec.distribution, version=spec.version,
                       nodes=tuple(infos[m] for m in members))


def _launch_member(spec: RunnerSpec, cluster: str, member: str, members: Sequence[str], lib: Path, launcher: Path,
                   java: str, port: int, transport_port: int, seeds: Sequence[str], heap: str,
                   java_options: Sequence[str]) -> tuple[subprocess.Popen[bytes], NodeInfo]:
    """Start one node of a cluster in its own JVM, through the launcher."""
    home = node_dir(member)
    conf = home / "node_1" / "config"
    conf.mkdir(parents=True, exist_ok=True)
    (home / "cluster").write_text(cluster)
    initial = ("cluster.initial_cluster_manager_nodes" if (spec.engine or spec.distribution) == "opensearch"
               else "cluster.initial_master_nodes")
    (conf / spec.config_name).write_text(
        "\n".join(
            [
                f"cluster.name: esbridge-{cluster}",
                "network.host: 127.0.0.1",
                f"transport.port: {transport_port}",
                f"discovery.seed_hosts: {json.dumps(list(seeds))}",
                f"{initial}: {json.dumps(list(members))}",
                "action.destructive_requires_name: true",
                "cluster.routing.allocation.disk.threshold_enabled: false",
                "",
            ]
        )
    )
    # given to the runner's settings builder: they override its defaults ("Node 1", the first
    # free port, and for OpenSearch a single-node cluster)
    settings = {"node.name": member, "http.port": str(port), "discovery.type": "zen"}
    jars, plugins = runner_plugin(spec.family, spec.version, lib, java)
    console = open(home / "console.log", "w")
    cmd = [
        *jvm_command(java, heap, *java_options),
        "-cp",
        os.pathsep.join([str(lib / "*"), str(launcher), *jars]),
        LAUNCHER_CLASS,
        spec.main_class,
        *(f"{k}={v}" for k, v in settings.items()),
        "--",
        *runner_args(spec, home, port, f"esbridge-{cluster}", plugins),
    ]
    proc = spawn(cmd, console, home)
    return proc, NodeInfo(name=member, distribution=spec.distribution, version=spec.version, pid=proc.pid,
                          port=port, home=str(home), pgid=proc.pid, cluster=cluster, transport_port=transport_port)
