"""``python -m esbridge.nodes.check_plugin --check``: the engine plugin ``esbridge-features``
compiled and unit-tested against the jars of each engine it is built for
(:data:`~esbridge.nodes.features_plugin.CHECKED`) that ``esbridge engine install`` put in place,
before any node starts (CI runs it first)."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path

from esbridge.errors import ProvisioningError
from esbridge.nodes import artifacts
from esbridge.nodes.features_plugin import CHECKED, JAVA_RELEASE, PLUGIN_NAME, _javac, check, default_tests
from esbridge.nodes.java import find_java

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m esbridge.nodes.features_plugin --check``: the plugin compiled and unit-tested
    against the jars of each engine it is built for (:data:`CHECKED`) that ``esbridge engine
    install`` put in place, before any node starts.  Exit code 1 when the sources or the tests fail,
    or something needed is missing (named, with how to get it)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m esbridge.nodes.check_plugin",
                                     description=f"Compile the {PLUGIN_NAME} engine plugin and run its unit tests "
                                                 "against the engines' installed jars.")
    parser.add_argument("--check", action="store_true", required=True, help="compile and run the unit tests")
    parser.add_argument("--tests", type=Path, default=default_tests(),
                        help="the folder of the Java unit tests (default: %(default)s)")
    args = parser.parse_args(argv)
    problems: list[str] = []
    java = ""
    try:
        java = find_java(JAVA_RELEASE)
    except ProvisioningError as err:
        problems.append(str(err))
    if java and _javac(java) is None:
        problems.append(f"{java} is a Java runtime without javac: install a JDK {JAVA_RELEASE}+ (e.g. Eclipse "
                        "Temurin) and point ESBRIDGE_JAVA or JAVA_HOME at its bin/java")
    if not args.tests.is_dir():
        problems.append(f"no folder of unit tests at {args.tests}: give --tests DIR (they are in esbridge's "
                        f"source tree, tests/java/{PLUGIN_NAME})")
    checked = []
    for family, distribution in CHECKED:
        lib = artifacts.installed_lib(distribution)
        version = artifacts.runner_spec(distribution).version
        if lib is None:
            problems.append(f"the jars of {distribution} {version} are not installed: run "
                            f"`esbridge engine install --distribution {distribution}`")
        else:
            checked.append((family, version, lib))
    if problems:
        for p in problems:
            sys.stderr.write(f"{PLUGIN_NAME}: cannot check: {p}\n")
        return 1
    for family, version, lib in checked:
        t0 = time.perf_counter()
        try:
            output = check(family, version, lib, java, args.tests)
        except ProvisioningError as err:
            sys.stderr.write(f"{PLUGIN_NAME}: {err}\n")
            return 1
        last = output.splitlines()[-1] if output else "no output"
        sys.stdout.write(f"{PLUGIN_NAME} on {family} {version}: compiled, {last} ({time.perf_counter() - t0:.1f} s)\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
