"""The Java a local node runs on: a runtime of the version the engine needs, with full locale data;
and for a multi-node cluster's launcher, a JDK's ``javac``.

:func:`find_java` tries ``$ESBRIDGE_JAVA``, ``$JAVA_HOME/bin/java``, ``java`` on the ``PATH`` and the
usual installation directories (OpenSearch 3.x and Elasticsearch 8.19 need Java 21+, Elasticsearch
7.10 Java 11+).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from esbridge.errors import ProvisioningError


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
