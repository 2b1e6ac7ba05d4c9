"""What a local node runs: the embedded-node runners and distributions esbridge knows, their
artifacts pinned by SHA-1 in ``esbridge/nodes/runners/*.txt``, and their download from a Maven
repository (``$ESBRIDGE_MAVEN_REPO``, default Maven Central) into the cache directory::

    engines/<distribution>-<version>/lib/*.jar    the runner and its dependencies

An ``elasticsearch8`` node runs Elasticsearch's own distribution: its zip is kept under
``engines/elasticsearch8-<version>/`` and unpacked under the directory of
:func:`esbridge.nodes.es_distribution.runtime_root`, with esbridge's plugins built and installed.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from esbridge.errors import ConfigurationError, ProvisioningError
from esbridge.home import cache_dir
from esbridge.nodes import es_distribution
from esbridge.nodes.java import find_java

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
    def family(self) -> str:
        """``"opensearch"`` or ``"elasticsearch"``: the engine the runner runs."""
        return "opensearch" if (self.engine or self.distribution).startswith("opensearch") else "elasticsearch"

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


#: The distribution of esbridge's local node where none is named (``esbridge engine start``, the demo,
#: a command without ``--url`` when no node runs): one that keeps and searches document vectors itself,
#: so that the hybrid pipeline's vectors live in the engine and a client keeps no copy of them.
DEFAULT_DISTRIBUTION = "opensearch-knn"


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
    text = resources.files("esbridge.nodes").joinpath("runners", spec.lockfile).read_text("utf-8")
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
    :func:`esbridge.nodes.es_distribution.runtime_root`)."""
    return es_distribution.runtime_root(account, cache_dir()) / "engines" / f"{spec.distribution}-{spec.version}"


def installed_lib(distribution: str) -> Path | None:
    """The directory of the engine jars :func:`install` put in place for ``distribution`` (a
    runner's jars, or the unpacked distribution's ``lib/``); ``None`` where they are not all there.
    Nothing is downloaded or created."""
    spec = runner_spec(distribution)
    if spec.kind == "distribution":
        root = es_distribution.existing_root(cache_dir())
        if root is None:
            return None
        root = root / "engines" / f"{spec.distribution}-{spec.version}"
        lib = root / f"elasticsearch-{spec.version}" / "lib"
        return lib if (root / ".unpacked").exists() and lib.is_dir() else None
    lib = lib_dir(spec)
    marker = lib / ".complete"
    return lib if marker.exists() and marker.read_text() == spec.lockfile + str(len(read_lockfile(spec))) else None


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
