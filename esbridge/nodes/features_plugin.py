"""esbridge's engine plugin ``esbridge-features``, built from the Java sources in the package.

The plugin (``esbridge/nodes/plugins/esbridge-features/``) adds the search extension
``esbridge_features`` and a fetch sub-phase that returns each hit's term frequencies, lengths and
the terms' index-wide statistics (:mod:`esbridge.features.plugin` reads them).  One set of
sources serves OpenSearch and Elasticsearch: a line that ends in ``//@opensearch`` or
``//@elasticsearch`` (an import, mostly) is kept only for that engine.  The plugin is compiled
with the JDK's ``javac`` against the jars of the engine it runs in (nothing else is downloaded),
and cached under ``$ESBRIDGE_HOME/engines/plugins/`` by a hash of its sources and the engine:

* esbridge's local OpenSearch nodes load it from the class path (:func:`runner_plugin`);
* its local Elasticsearch 8 node installs its zip (:mod:`esbridge.nodes.es_distribution`);
* :func:`pack_zip` writes the zip that ``bin/opensearch-plugin install`` (or
  ``bin/elasticsearch-plugin install``) takes, for a user's own cluster of the same engine
  version (``esbridge plugin build``).

Elasticsearch 7.10 (Lucene 8) lacks the Lucene API the plugin reads term vectors with; its
nodes read features with ``_mtermvectors``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import tempfile
import zipfile
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from esbridge.engine.plugins import CLASSNAME, PLUGIN_NAME
from esbridge.errors import ProvisioningError
from esbridge.home import cache_dir

__all__ = ["CLASSNAME", "CHECKED", "FAMILIES", "PLUGIN_NAME", "check", "compile_jar", "default_tests", "pack_zip",
           "runner_plugin"]

log = logging.getLogger(__name__)

PLUGIN_VERSION = "1.3.0"
#: ``--release`` of the class files (the engines' own jars need Java 21).
JAVA_RELEASE = 21
#: The engines the sources compile for (by the major version of their Lucene: 9.5 and later).
FAMILIES = ("opensearch", "elasticsearch")
_FOLDER = "esbridge-features"
#: A source line ending in this mark and an engine's family is that engine's only.
_MARK = "//@"


def _sources(family: str) -> list[tuple[str, bytes]]:
    """The plugin's files as ``family`` compiles them (the other engine's lines left out)."""
    # the end-of-line marks of the other engines' lines
    marks = tuple(_MARK + f for f in FAMILIES if f != family)
    base = resources.files("esbridge.nodes").joinpath("plugins", _FOLDER)
    out = []
    for p in sorted(base.iterdir(), key=lambda p: p.name):
        if p.name.endswith(".java"):
            lines = p.read_text("utf-8").splitlines(keepends=True)
            kept = [ln for ln in lines if not ln.rstrip().endswith(marks)]
            out.append((p.name, "".join(kept).encode("utf-8")))
        elif p.name.endswith(".properties"):
            out.append((p.name, p.read_bytes()))
    if not any(n.endswith(".java") for n, _ in out):
        raise ProvisioningError(f"the package has no sources of the {PLUGIN_NAME} plugin; reinstall esbridge")
    return out


def _javac(java: str) -> Path | None:
    javac = Path(os.path.realpath(java)).parent / "javac"
    return javac if javac.exists() else None


def compile_jar(family: str, version: str, lib: Path, java: str) -> Path:
    """The plugin's jar for ``family`` ``version``, compiled against the jars in ``lib`` (cached).

    Raises:
        ProvisioningError: ``java`` has no ``javac`` beside it, or the sources do not compile.
    """
    files = _sources(family)
    h = hashlib.sha256(f"{family}\0{version}\0{JAVA_RELEASE}\0{PLUGIN_VERSION}\0".encode())
    for name, data in files:
        h.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    out = cache_dir() / "engines" / "plugins" / f"{PLUGIN_NAME}-{family}-{version}-{h.hexdigest()[:16]}.jar"
    if out.exists():
        return out
    javac = _javac(java)
    if javac is None:
        raise ProvisioningError(
            f"building esbridge's {PLUGIN_NAME} plugin needs a JDK {JAVA_RELEASE}+ with javac, but {java} is a "
            f"runtime without it; install a full JDK (e.g. Eclipse Temurin {JAVA_RELEASE}) and point "
            "ESBRIDGE_JAVA or JAVA_HOME at its bin/java"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"{PLUGIN_NAME}-build-") as tmp_name:
        classes = _compile(javac, family, version, lib, files, Path(tmp_name))
        part = out.with_name(out.name + ".part")
        write_jar(part, classes)
        os.replace(part, out)
    return out


def _compile(javac: Path, family: str, version: str, lib: Path, files: list[tuple[str, bytes]], tmp: Path,
             extra: Sequence[Path] = ()) -> Path:
    """The class files of the ``.java`` files among ``files`` (and of the sources ``extra``),
    compiled against the jars in ``lib`` into a directory under ``tmp``."""
    src, classes = tmp / "src", tmp / "classes"
    src.mkdir()
    classes.mkdir()
    paths = []
    for name, data in files:
        if name.endswith(".java"):
            (src / name).write_bytes(data)
            paths.append(str(src / name))
    cmd = [str(javac), "--release", str(JAVA_RELEASE), "-encoding", "UTF-8", "-proc:none", "-nowarn",
           "-cp", str(lib / "*"), "-d", str(classes), *paths, *map(str, extra)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise ProvisioningError(f"compiling the {PLUGIN_NAME} plugin against {family} {version} failed:\n"
                                f"{(done.stderr or done.stdout)[-3000:]}")
    return classes


#: The class of the plugin's unit tests (``tests/java/esbridge-features/`` in the source tree).
TEST_CLASS = "org.esbridge.features.FeaturesPluginTest"
#: The engines :func:`main` checks the plugin against: (family, distribution esbridge installs).
CHECKED = (("opensearch", "opensearch"), ("elasticsearch", "elasticsearch8"))


def check(family: str, version: str, lib: Path, java: str, tests: Path) -> str:
    """Compiles the plugin's sources for ``family`` ``version`` with the unit tests in ``tests``
    (``*.java``) against the jars in ``lib``, runs the tests (:data:`TEST_CLASS`, a plain ``main``)
    and returns what they printed; no engine node is started.

    Raises:
        ProvisioningError: ``java`` has no ``javac``, the sources or the tests do not compile, or a
            test fails (the message holds the output).
    """
    javac = _javac(java)
    if javac is None:
        raise ProvisioningError(f"checking the {PLUGIN_NAME} plugin needs a JDK {JAVA_RELEASE}+ with javac; "
                                f"{java} has none")
    extra = sorted(tests.glob("*.java"))
    if not extra:
        raise ProvisioningError(f"no unit tests of the {PLUGIN_NAME} plugin (*.java) in {tests}")
    with tempfile.TemporaryDirectory(prefix=f"{PLUGIN_NAME}-check-") as tmp_name:
        classes = _compile(javac, family, version, lib, _sources(family), Path(tmp_name), extra)
        cmd = [str(javac.parent / "java"), "-cp", os.pathsep.join([str(classes), str(lib / "*")]), TEST_CLASS]
        done = subprocess.run(cmd, capture_output=True, text=True)
    output = (done.stdout + done.stderr).strip()
    if done.returncode != 0:
        raise ProvisioningError(f"the {PLUGIN_NAME} plugin's unit tests failed on {family} {version}:\n"
                                f"{output[-3000:]}")
    return output


def default_tests() -> Path:
    """Where the plugin's unit tests are in esbridge's source tree."""
    return Path(__file__).resolve().parents[2] / "tests" / "java" / _FOLDER


def write_jar(jar: Path, classes: Path) -> None:
    """A jar of the class files under ``classes`` (entries sorted, fixed timestamps)."""
    stamp = (1980, 1, 1, 0, 0, 0)
    with zipfile.ZipFile(jar, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(zipfile.ZipInfo("META-INF/MANIFEST.MF", stamp),
                    "Manifest-Version: 1.0\r\nCreated-By: esbridge\r\n\r\n")
        for path in sorted(classes.rglob("*.class")):
            info = zipfile.ZipInfo(path.relative_to(classes).as_posix(), stamp)
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, path.read_bytes())


def pack_zip(family: str, version: str, jar: Path, out_dir: Path) -> Path:
    """The plugin as the zip the engine's ``bin/*-plugin install`` takes, in ``out_dir``."""
    descriptor = next(data for name, data in _sources(family) if name.endswith(".properties")).decode("utf-8")
    text = descriptor.format(plugin_version=PLUGIN_VERSION, java_version=JAVA_RELEASE, engine=family,
                             engine_version=version)
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"{PLUGIN_NAME}-{PLUGIN_VERSION}-{family}-{version}.zip"
    part = out.with_name(out.name + ".part")
    with zipfile.ZipFile(part, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.write(jar, f"{PLUGIN_NAME}-{PLUGIN_VERSION}.jar")
        zf.writestr("plugin-descriptor.properties", "\n".join(
            ln for ln in text.splitlines() if not ln.startswith("#")) + "\n")
    os.replace(part, out)
    return out


def runner_plugin(family: str, version: str, lib: Path, java: str) -> tuple[list[str], list[str]]:
    """``(class path entries, plugin classes)`` that load the plugin into an embedded-runner node
    of ``family`` ``version`` whose jars are in ``lib``; nothing for an engine the plugin does not
    compile for (Elasticsearch 7), or when ``java`` has no ``javac`` (a warning says so)."""
    if family != "opensearch":
        return [], []
    if _javac(java) is None:
        log.warning("%s is a Java runtime without javac: the node starts without esbridge's %s plugin, "
                    "and candidates' features are read with _mtermvectors", java, PLUGIN_NAME)
        return [], []
    return [str(compile_jar(family, version, lib, java))], [CLASSNAME]
