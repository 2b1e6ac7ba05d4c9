"""A local engine node run from Maven Central artifacts, for machines without Docker.

``esbridge engine start`` installs the jars of an embedded-node runner (pinned
with their SHA-1 in ``esbridge/engine/runners/*.txt``), starts one node in its
own JVM, and waits until it is healthy.  The node runs with the
analysis-common, lang-painless and mapper-extras modules, bound to 127.0.0.1,
as a single-node cluster that joins no other.

:func:`start_cluster` starts several such nodes, each in its own JVM, that form one
cluster on loopback (each node finds the others at their transport ports; the first
start bootstraps the cluster from all of them).  The runners fix a node's name and,
for OpenSearch, make a lone node a single-node cluster; a small launcher
(``launcher/EsbridgeNode.java``, compiled once with the JDK's ``javac`` and cached)
gives each node its own name, HTTP port and discovery type instead.

``elasticsearch8`` is different: Elasticsearch 8.19's own distribution (a zip on
Maven Central, pinned the same way), with esbridge's analysis plugins built from
the sources in the package, run secured (TLS on HTTP, a superuser, an API key);
see :mod:`esbridge.engine.es_distribution`.

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
:func:`esbridge.engine.es_distribution.runtime_root` (``$ESBRIDGE_HOME`` itself, or the
service user's home when esbridge runs as root).

Java: see :func:`find_java` (OpenSearch 3.x and Elasticsearch 8.19 need Java 21+,
Elasticsearch 7.10 Java 11+).
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields, replace
from importlib import resources
from pathlib import Path
from typing import IO, Any

from esbridge.engine import es_distribution
from esbridge.engine.client import path_segment
from esbridge.errors import ConfigurationError, ProvisioningError
from esbridge.home import cache_dir

log = logging.getLogger(__name__)

DEFAULT_MAVEN_REPO = "https://repo1.maven.org/maven2"


@dataclass(frozen=True)
class RunnerSpec:
    """An embedded-node runner: which engine, which main class, which jars."""

    distribution: str
    version: str
    main_class: str
    lockfile: str
    config_name: str
    min_java: int
    #: plugin classes the runner loads from the classpath (``-pluginTypes``)
    plugin_types: tuple[str, ...] = ()
    #: what the engine itself reports as its distribution
    engine: str = ""
    #: ``"runner"`` (jars on a class path, run in one JVM) or ``"distribution"`` (the engine's own
    #: distribution zip, started by its ``bin/`` script; secured)
    kind: str = "runner"

    @property
    def secured(self) -> bool:
        """Whether the node runs with TLS and authentication."""
        return self.kind == "distribution"


RUNNERS: dict[str, RunnerSpec] = {
    "opensearch": RunnerSpec(
        distribution="opensearch",
        version="3.8.0",
        main_class="org.codelibs.opensearch.runner.OpenSearchRunner",
        lockfile="opensearch-3.8.0.txt",
        config_name="opensearch.yml",
        min_java=21,
    ),
    "opensearch-knn": RunnerSpec(
        distribution="opensearch-knn",
        version="3.5.0",
        main_class="org.codelibs.opensearch.runner.OpenSearchRunner",
        lockfile="opensearch-knn-3.5.0.txt",
        config_name="opensearch.yml",
        min_java=21,
        plugin_types=("org.opensearch.knn.plugin.KNNPlugin",),
        engine="opensearch",
    ),
    "elasticsearch": RunnerSpec(
        distribution="elasticsearch",
        version="7.10.2",
        main_class="org.codelibs.elasticsearch.runner.ElasticsearchClusterRunner",
        lockfile="elasticsearch-7.10.2.txt",
        config_name="elasticsearch.yml",
        min_java=11,
    ),
    "elasticsearch8": RunnerSpec(
        distribution="elasticsearch8",
        version="8.19.21",
        main_class="",
        lockfile="elasticsearch-8.19.21.txt",
        config_name="elasticsearch.yml",
        min_java=21,
        engine="elasticsearch",
        kind="distribution",
    ),
}


def runner_spec(distribution: str) -> RunnerSpec:
    """The runner for ``distribution``; an error lists the valid ones."""
    try:
        return RUNNERS[distribution]
    except KeyError:
        raise ConfigurationError(
            f"no local runner for distribution {distribution!r}; choose one of {', '.join(RUNNERS)}"
        ) from None


@dataclass(frozen=True)
class Artifact:
    group: str
    artifact: str
    version: str
    classifier: str | None
    sha1: str
    extension: str = "jar"
    #: for a zip: the jars inside it to put on the classpath, with their SHA-1
    members: tuple[tuple[str, str], ...] = ()

    @property
    def filename(self) -> str:
        suffix = f"-{self.classifier}" if self.classifier else ""
        return f"{self.artifact}-{self.version}{suffix}.{self.extension}"

    @property
    def jars(self) -> tuple[str, ...]:
        """The jar files this artifact puts on the classpath."""
        return tuple(name for name, _ in self.members) if self.extension == "zip" else (self.filename,)

    def url(self, repo: str) -> str:
        return f"{repo.rstrip('/')}/{self.group.replace('.', '/')}/{self.artifact}/{self.version}/{self.filename}"


def read_lockfile(spec: RunnerSpec) -> list[Artifact]:
    """The pinned artifacts of ``spec``."""
    text = resources.files("esbridge.engine").joinpath("runners", spec.lockfile).read_text("utf-8")
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        coord, sha1, *member_specs = line.split()
        coord, _, extension = coord.partition("@")
        parts = coord.split(":")
        classifier = parts[3] if len(parts) == 4 else None
        members = tuple((m.split("=", 1)[0], m.split("=", 1)[1]) for m in member_specs)
        out.append(Artifact(parts[0], parts[1], parts[2], classifier, sha1, extension or "jar", members))
    return out


def lib_dir(spec: RunnerSpec) -> Path:
    return cache_dir() / "engines" / f"{spec.distribution}-{spec.version}" / "lib"


def _download(art: Artifact, dest: Path, repo: str, timeout: float = 120.0) -> None:
    if art.extension == "zip" and all((dest / n).exists() and _sha1(dest / n) == h for n, h in art.members):
        return
    _fetch(art, dest, repo, timeout)
    if art.extension == "zip":
        _extract(dest / art.filename, art.members, dest)


def _extract(archive: Path, members: Sequence[tuple[str, str]], dest: Path) -> None:
    """Copy ``members`` (matched by file name anywhere in the zip) out of ``archive``, checking each SHA-1."""
    import zipfile

    with zipfile.ZipFile(archive) as zf:
        by_name = {Path(i.filename).name: i for i in zf.infolist() if not i.is_dir()}
        for name, sha1 in members:
            if name not in by_name:
                raise ProvisioningError(f"{archive.name} has no {name}; the pinned runner list is out of date")
            tmp = dest / f"{name}.part"
            with zf.open(by_name[name]) as src, open(tmp, "wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
            got = _sha1(tmp)
            if got != sha1:
                tmp.unlink()
                raise ProvisioningError(f"{name} in {archive.name}: SHA-1 {got} does not match the pinned {sha1}")
            os.replace(tmp, dest / name)


def _fetch(art: Artifact, dest: Path, repo: str, timeout: float) -> None:
    target = dest / art.filename
    if target.exists() and _sha1(target) == art.sha1:
        return
    tmp = target.with_suffix(".part")
    url = art.url(repo)
    last: Exception | None = None
    for attempt in range(4):
        try:
            with urllib.request.urlopen(url, timeout=timeout) as resp, open(tmp, "wb") as out:
                shutil.copyfileobj(resp, out, 1 << 20)
            got = _sha1(tmp)
            if got != art.sha1:
                raise ProvisioningError(
                    f"{url}: SHA-1 {got} does not match the pinned {art.sha1}; refusing to use it"
                )
            os.replace(tmp, target)
            return
        except (urllib.error.URLError, OSError, TimeoutError) as err:
            last = err
            time.sleep(1.0 * (attempt + 1))
        finally:
            if tmp.exists():
                tmp.unlink()
    raise ProvisioningError(f"could not download {url}: {last}")


def _sha1(path: Path) -> str:
    h = hashlib.sha1()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def install(distribution: str, *, progress: bool = False) -> Path:
    """Download (or verify) the runner's jars; return the directory holding them.

    Idempotent: jars already present with the right SHA-1 are kept.  The Maven
    repository is ``$ESBRIDGE_MAVEN_REPO`` (default Maven Central).  For a
    distribution (``elasticsearch8``): download and verify its zip, unpack it, build
    and install esbridge's plugins, and return the unpacked distribution's directory.
    """
    spec = runner_spec(distribution)
    if spec.kind == "distribution":
        return _install_distribution(spec)
    artifacts = read_lockfile(spec)
    dest = lib_dir(spec)
    marker = dest / ".complete"
    if marker.exists() and marker.read_text() == spec.lockfile + str(len(artifacts)):
        return dest
    dest.mkdir(parents=True, exist_ok=True)
    repo = os.environ.get("ESBRIDGE_MAVEN_REPO", DEFAULT_MAVEN_REPO)
    from tqdm import tqdm

    bar = tqdm(total=len(artifacts), desc=f"installing {spec.distribution} {spec.version}",
               unit="jar", disable=not progress, file=sys.stderr)
    with ThreadPoolExecutor(max_workers=8) as pool:
        for fut in [pool.submit(_download, art, dest, repo) for art in artifacts]:
            fut.result()
            bar.update(1)
    bar.close()
    wanted = {jar for a in artifacts for jar in a.jars}
    for stray in dest.glob("*.jar"):
        if stray.name not in wanted:
            stray.unlink()
    marker.write_text(spec.lockfile + str(len(artifacts)))
    return dest


def distribution_root(spec: RunnerSpec, account: es_distribution.ServiceAccount | None) -> Path:
    """The directory holding the unpacked distribution of ``spec`` (see
    :func:`esbridge.engine.es_distribution.runtime_root`)."""
    return es_distribution.runtime_root(account, cache_dir()) / "engines" / f"{spec.distribution}-{spec.version}"


def _install_distribution(spec: RunnerSpec) -> Path:
    (art,) = read_lockfile(spec)
    downloads = cache_dir() / "engines" / f"{spec.distribution}-{spec.version}"
    account = es_distribution.service_account()
    root = distribution_root(spec, account)
    top = f"elasticsearch-{spec.version}"
    es_home = root / top
    marker = root / ".unpacked"
    if not (marker.exists() and marker.read_text() == art.sha1 and (es_home / "bin").is_dir()):
        downloads.mkdir(parents=True, exist_ok=True)
        doing = "unpacking" if (downloads / art.filename).exists() else "downloading (about 110 MB, once) and unpacking"
        log.info("%s %s in %s", doing, art.filename, downloads)
        repo = os.environ.get("ESBRIDGE_MAVEN_REPO", DEFAULT_MAVEN_REPO)
        _fetch(art, downloads, repo, timeout=600.0)
        root.mkdir(parents=True, exist_ok=True)
        (root / "plugins.json").unlink(missing_ok=True)
        es_distribution.unpack(downloads / art.filename, root, top)
        marker.write_text(art.sha1)
    java = find_java(spec.min_java)
    if not (root / "plugins.json").exists():
        log.info("building and installing esbridge's plugins for Elasticsearch %s", spec.version)
    es_distribution.install_plugins(es_home, spec.version, java, downloads / "plugins")
    es_distribution.chown_tree(root, account)
    return es_home


def find_java(min_version: int) -> str:
    """A Java runtime of at least ``min_version`` with full locale data.

    Tried in order: ``$ESBRIDGE_JAVA``, ``$JAVA_HOME/bin/java``, ``java`` on the
    PATH, then the JDKs under ``/usr/lib/jvm``.  A runtime qualifies only if it
    has the Thai locale data: the engines' analysis-common module builds a Thai
    analyzer for every index, and jlink-trimmed runtimes that drop that data
    make every index creation fail.

    Raises:
        ProvisioningError: with what to install when none qualifies.
    """
    seen: list[str] = []
    for cand in _java_candidates():
        version, full = java_probe(cand)
        if version is None:
            continue
        seen.append(f"{cand} (Java {version}{'' if full else ', no Thai locale data'})")
        if version >= min_version and full:
            return cand
    raise ProvisioningError(
        f"no Java {min_version}+ runtime with full locale data found "
        f"(tried: {', '.join(seen) or 'none found'}); install a full JDK {min_version} or later "
        "(e.g. Debian's openjdk-17-jre-headless for Java 17, or Eclipse Temurin) and point "
        "ESBRIDGE_JAVA or JAVA_HOME at it"
    )


def _java_candidates() -> list[str]:
    """The Java runtimes :func:`find_java` tries, in its order, without repeats."""
    candidates: list[str] = []
    if os.environ.get("ESBRIDGE_JAVA"):
        candidates.append(os.environ["ESBRIDGE_JAVA"])
    if os.environ.get("JAVA_HOME"):
        candidates.append(str(Path(os.environ["JAVA_HOME"]) / "bin" / "java"))
    on_path = shutil.which("java")
    if on_path:
        candidates.append(on_path)
    jvm_root = Path("/usr/lib/jvm")
    if jvm_root.is_dir():
        candidates.extend(str(p / "bin" / "java") for p in sorted(jvm_root.iterdir(), reverse=True))
    return list(dict.fromkeys(candidates))


def java_probe(java: str) -> tuple[int | None, bool]:
    """``(major version, has Thai locale data)`` of ``java``; ``(None, False)`` if it does not run."""
    try:
        out = subprocess.run([java, "-XshowSettings:all", "-version"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None, False
    version = None
    for line in out.stderr.splitlines():
        line = line.strip()
        if line.startswith("java.specification.version"):
            value = line.split("=", 1)[1].strip()
            version = int(value.split(".")[1] if value.startswith("1.") else value)
    locales = out.stderr.split("Available locales:", 1)[-1]
    has_thai = any(tok.strip().startswith("th_") or tok.strip() == "th" for tok in locales.split(","))
    return version, has_thai


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
    #: for a node of a multi-node cluster (:func:`start_cluster`): the cluster's name and the
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
        """Connection options of this node (:class:`~esbridge.engine.client.ConnectionOptions`
        keywords): its superuser and CA file; empty for a node without security."""
        if self.username is None:
            return {}
        return {"username": self.username, "password": self.password, "ca_certs": self.ca_certs}

    def auth_header(self) -> dict[str, str]:
        if self.username is None:
            return {}
        return {"Authorization": es_distribution.Credentials(self.username, self.password or "").basic_header()}


def _write_record(path: Path, info: NodeInfo) -> None:
    es_distribution.write_private(path, json.dumps(asdict(info)))


def _read_record(path: Path) -> NodeInfo:
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


def _free_port(candidates: Sequence[int] | None = None) -> int:
    for port in candidates or ():
        if _port_free(port):
            return port
    if candidates:
        raise ProvisioningError(
            f"no free HTTP port in {candidates[0]}-{candidates[-1]} on 127.0.0.1; stop a node "
            "(esbridge engine stop) or free a port"
        )
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
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


def _http_json(url: str, timeout: float = 5.0, node: NodeInfo | None = None, *, method: str = "GET",
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
        info = _read_record(meta)
    except (OSError, ValueError, TypeError):
        return None
    if not _alive(info.pid):
        return None
    try:
        if info.pid not in _answering_pids(info.url, info):
            return None  # another process answers on that port: not this node
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return info


def _answering_pids(url: str, node: NodeInfo | None = None) -> set[int]:
    """The process ids of the node(s) answering at ``url`` (``GET /_nodes/_local/process``),
    so a node is never mistaken for another that took its port."""
    nodes = _http_json(url + "/_nodes/_local/process", node=node)["nodes"]
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


class _PortTaken(ProvisioningError):
    """Another process answered on the port the node was to use."""


def start(
    distribution: str = "opensearch",
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
        distribution: ``"opensearch"``, ``"opensearch-knn"`` or ``"elasticsearch"``.
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
                chosen = _free_port([p for p in HTTP_PORTS if p not in taken])
            try:
                return _start_once(distribution, name=name, port=chosen, heap=heap, timeout=timeout,
                                   progress=progress, given=port is not None)
            except _PortTaken:
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
    elif not _port_free(port):
        if not given:
            raise _PortTaken(f"port {port} on 127.0.0.1 was taken")
        raise ProvisioningError(f"port {port} on 127.0.0.1 is in use; choose another with --port")
    transport_port = _free_port()
    server_pid: Callable[[], int | None]
    if spec.kind == "distribution":
        proc, info, server_pid = _launch_distribution(spec, name, lib, java, port, transport_port, heap)
    else:
        proc, info = _launch_runner(spec, name, lib, java, port, transport_port, heap)
        server_pid = lambda: proc.pid  # noqa: E731
    _write_record(home / "node.json", info)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log_tail(name)
            if spec.kind == "distribution" and not given and "BindHttpException" in log_tail(name, 1000):
                # another process bound the port first (the runner's JVM reports it by answering)
                raise _PortTaken(f"port {port} on 127.0.0.1 was taken before the {distribution} node bound it")
            raise ProvisioningError(
                f"the {distribution} node exited with code {proc.returncode} while starting; "
                f"last lines of its log:\n{tail}"
            )
        try:
            health = _http_json(f"{info.url}/_cluster/health?wait_for_status=yellow&timeout=2s", node=info)
            if health.get("status") in ("yellow", "green"):
                answering = _answering_pids(info.url, info)
                pid = server_pid()
                if pid is not None and pid in answering:
                    if spec.kind == "distribution":
                        info = _finish_distribution(replace(info, pid=pid), home)
                    return info
                if pid is not None:  # (None: the server has not written its pid file yet)
                    # Someone else's node took the port between our check and our JVM binding it.
                    stop(name)
                    raise _PortTaken(
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


def _jvm(java: str, heap: str, *options: str) -> list[str]:
    """The JVM and its options for an embedded-node runner (heap, ``options``, headless, UTF-8)."""
    return [java, f"-Xms{heap}", f"-Xmx{heap}", *options, "-Djava.awt.headless=true", "-Dfile.encoding=UTF-8",
            "-Dlog4j2.formatMsgNoLookups=true"]


def _runner_args(spec: RunnerSpec, home: Path, port: int, cluster_name: str) -> list[str]:
    """The embedded-node runner's own arguments: one node under ``home`` answering HTTP on ``port``."""
    args = ["-basePath", str(home), "-numOfNode", "1", "-baseHttpPort", str(port - 1), "-clusterName", cluster_name]
    if spec.plugin_types:
        args += ["-pluginTypes", ",".join(spec.plugin_types)]
    return args


def _spawn(cmd: list[str], console: IO[str], home: Path) -> subprocess.Popen[bytes]:
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
    console = open(home / "console.log", "w")
    cmd = [
        *_jvm(java, heap),
        "-cp",
        str(lib / "*"),
        spec.main_class,
        *_runner_args(spec, home, port, f"esbridge-{name}"),
    ]
    proc = _spawn(cmd, console, home)
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
            _http_json(f"{info.url}/_security/_authenticate", node=info,
                       headers={"Authorization": f"ApiKey {encoded}"})
        except urllib.error.HTTPError:
            key = None
    if not key:
        created = _http_json(f"{info.url}/_security/api_key", node=info, method="POST",
                             body=es_distribution.api_key_request(info.name), timeout=60.0)
        key = f"{created['id']}:{created['api_key']}"
        creds = es_distribution.read_credentials(record)
        if creds is not None:
            es_distribution.save_credentials(record, replace(creds, api_key=key))
    info = replace(info, api_key=key)
    _write_record(record / "node.json", info)
    return info


def stop(name: str = "default", *, timeout: float = 30.0) -> bool:
    """Stop the node ``name``, or every node of the cluster ``name``; ``True`` if one was running.

    A cluster's record and data stay, so :func:`start_cluster` brings it back as it was."""
    members = cluster_members(name)
    if members is not None:
        with ThreadPoolExecutor(max_workers=len(members) or 1) as pool:
            return any(list(pool.map(lambda m: stop(m, timeout=timeout), members)))
    meta = node_dir(name) / "node.json"
    if not meta.exists():
        return False
    info = _read_record(meta)
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


# ---- multi-node clusters -----------------------------------------------------------------

#: The cluster-node launcher's source in the package, and its class.
LAUNCHER_SOURCE = "EsbridgeNode.java"
LAUNCHER_CLASS = "EsbridgeNode"
#: JVM heap of each node of a cluster: three nodes fit a small machine.
CLUSTER_HEAP = "512m"


@dataclass(frozen=True)
class ClusterInfo:
    """A local multi-node cluster that esbridge started (:func:`start_cluster`): its nodes in
    order (``<name>-1``, ``<name>-2``, ...), each a :class:`NodeInfo` of its own."""

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


def find_javac() -> str:
    """The ``javac`` of a JDK among the Java installations :func:`find_java` tries (any
    version from 11 on: the launcher is compiled for Java 11).

    Raises:
        ProvisioningError: with what to install when no JDK is found.
    """
    tried = []
    for java in _java_candidates():
        javac = Path(os.path.realpath(java)).parent / "javac"
        if javac.is_file() and os.access(javac, os.X_OK):
            return str(javac)
        tried.append(java)
    raise ProvisioningError(
        "a multi-node cluster needs a JDK's javac (once, to compile esbridge's node launcher), but none of "
        f"the Java installations found has one (tried: {', '.join(tried) or 'none found'}); install a full "
        "JDK 11 or later (e.g. Debian's openjdk-17-jdk-headless) and point ESBRIDGE_JAVA or JAVA_HOME at its "
        "bin/java"
    )


def launcher_classes() -> Path:
    """The directory of the compiled cluster-node launcher, compiled on first use and cached
    under ``$ESBRIDGE_HOME/engines/`` by a hash of its source."""
    source = resources.files("esbridge.engine").joinpath("launcher", LAUNCHER_SOURCE).read_bytes()
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


def _cluster_record(name: str) -> dict[str, Any] | None:
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
    record = _cluster_record(name)
    return None if record is None else [str(m) for m in record["members"]]


def cluster_status(name: str) -> ClusterInfo | None:
    """The cluster ``name`` if every one of its nodes is running and answering, else ``None``."""
    record = _cluster_record(name)
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
            health = _http_json(f"{url}{path}?{query}", timeout=wait + 10.0, node=node)
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
    :func:`status`) and the cluster has all its nodes and is at least yellow.

    A cluster of that name that is running is returned as it is.  One whose nodes are partly
    or all stopped (:func:`stop`, or a node that died) is brought back from its data: the
    missing nodes start again (on their former transport port where it is free) and rejoin.

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
    record = _cluster_record(name)
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
        except _PortTaken:
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
        if m not in ports or not _port_free(ports[m]) or list(ports.values()).count(ports[m]) > 1:
            ports[m] = _free_port()
            while list(ports.values()).count(ports[m]) > 1:
                ports[m] = _free_port()
    record = {**record, "transport_ports": {m: ports[m] for m in members}}
    es_distribution.write_private(node_dir(name) / "cluster.json", json.dumps(record))
    seeds = [f"127.0.0.1:{ports[m]}" for m in members]
    taken = {info.port for info in running.values() if info is not None}
    launched: dict[str, tuple[subprocess.Popen[bytes], NodeInfo]] = {}
    try:
        for m in missing:
            http = _free_port([p for p in HTTP_PORTS if p not in taken])
            taken.add(http)
            launched[m] = _launch_member(spec, name, m, members, lib, launcher, java, http, ports[m], seeds, heap,
                                         java_options)
            _write_record(node_dir(m) / "node.json", launched[m][1])
        answered: set[str] = set()
        deadline = time.monotonic() + timeout
        first = running[members[0]]
        url = (first if first is not None else launched[members[0]][1]).url
        while time.monotonic() < deadline:
            for m, (proc, info) in launched.items():
                if proc.poll() is not None:
                    tail = log_tail(m, 1000)
                    if "BindHttpException" in tail or "BindTransportException" in tail:
                        raise _PortTaken(f"a port of node {m!r} was taken before it bound it")
                    raise ProvisioningError(
                        f"node {m!r} of cluster {name!r} exited with code {proc.returncode} while starting; "
                        f"last lines of its log:\n{log_tail(m)}"
                    )
                if m not in answered:
                    try:
                        pids = _answering_pids(info.url)
                    except (OSError, ValueError, KeyError, TypeError):
                        continue
                    if proc.pid not in pids:
                        raise _PortTaken(f"another node (process {', '.join(map(str, sorted(pids)))}) answers on "
                                         f"port {info.port}, which node {m!r} was to use")
                    answered.add(m)
            if len(answered) == len(launched):
                try:
                    query = urllib.parse.urlencode({"wait_for_nodes": f">={len(members)}", "wait_for_status": "yellow",
                                                    "timeout": "2s"})
                    health = _http_json(f"{url}/_cluster/health?{query}", timeout=15.0)
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
    console = open(home / "console.log", "w")
    cmd = [
        *_jvm(java, heap, *java_options),
        "-cp",
        os.pathsep.join([str(lib / "*"), str(launcher)]),
        LAUNCHER_CLASS,
        spec.main_class,
        *(f"{k}={v}" for k, v in settings.items()),
        "--",
        *_runner_args(spec, home, port, f"esbridge-{cluster}"),
    ]
    proc = _spawn(cmd, console, home)
    return proc, NodeInfo(name=member, distribution=spec.distribution, version=spec.version, pid=proc.pid,
                          port=port, home=str(home), pgid=proc.pid, cluster=cluster, transport_port=transport_port)
