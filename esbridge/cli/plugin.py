"""``esbridge plugin``: esbridge's engine plugin for a cluster of one's own."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: The engine versions whose jars esbridge installs, which the plugin compiles against.
BUILDS = {"opensearch": ("3.8.0", "opensearch"), "elasticsearch": ("8.19.21", "elasticsearch8")}


def _cmd_build(args: argparse.Namespace) -> int:
    from esbridge.errors import ConfigurationError
    from esbridge.nodes import features_plugin
    from esbridge.nodes.artifacts import install, lib_dir, runner_spec
    from esbridge.nodes.java import find_java

    version, distribution = BUILDS[args.distribution]
    if args.version is not None and args.version != version:
        raise ConfigurationError(
            f"esbridge builds its plugin for {args.distribution} against the jars of the {args.distribution} it "
            f"installs, version {version}; --version {args.version} is another (a plugin runs only in the exact "
            "engine version it was built for)")
    spec = runner_spec(distribution)
    java = find_java(spec.min_java)
    where = install(distribution, progress=True)
    lib = lib_dir(spec) if spec.kind == "runner" else where / "lib"  # a distribution's own jars
    jar = features_plugin.compile_jar(spec.family, version, lib, java)
    print(features_plugin.pack_zip(spec.family, version, jar, Path(args.out)))
    return 0


def add_commands(sub: Any, connection_args: Callable[[argparse.ArgumentParser], None],
                 connect: Callable[[argparse.Namespace], Any]) -> None:
    """Register ``plugin`` on the ``esbridge`` parser."""
    p = sub.add_parser(
        "plugin", help="build esbridge's engine plugin for your own cluster",
        description="Build esbridge's engine plugin (esbridge-features): it returns each hit's term "
                    "frequencies, lengths and the terms' index-wide statistics with the search, so reranking "
                    "needs no _mtermvectors request and no client-side store. It is compiled with the JDK's "
                    "javac against the engine's own jars (downloaded from Maven Central like esbridge's local "
                    "nodes, which load it already) and written as the zip the engine's plugin tool installs; "
                    "on every node:\n\n"
                    "  bin/opensearch-plugin install file:///path/to/esbridge-features-1.0.0-opensearch-3.8.0.zip\n"
                    "  (bin/elasticsearch-plugin install ... for Elasticsearch)\n\n"
                    "then restart the nodes. A plugin runs only in the engine version it was built for. "
                    "esbridge finds it by itself (GET _nodes/plugins) and reads features with _mtermvectors "
                    "on a cluster without it.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("action", choices=["build"], help="build: write the plugin's zip")
    p.add_argument("--distribution", default="opensearch", choices=sorted(BUILDS),
                   help="the engine the plugin is for (default opensearch)")
    p.add_argument("--version", help="the engine's exact version: 3.8.0 for opensearch (the default), "
                                     "8.19.21 for elasticsearch")
    p.add_argument("--out", default=".", help="folder to write the zip to (default: the current one)")
    p.set_defaults(func=_cmd_build)
