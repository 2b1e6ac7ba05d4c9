"""``esbridge engine``: esbridge's local engine nodes (install, start, stop, status)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from esbridge.cli.options import DEFAULT_DISTRIBUTION, DISTRIBUTIONS
from esbridge.errors import ConfigurationError, EsbridgeError


def _cmd_engine(args: argparse.Namespace) -> int:
    from esbridge.nodes import artifacts, cluster, local
    from esbridge.nodes.provision import find_local_node

    if args.nodes < 1:
        raise EsbridgeError(f"--nodes must be >= 1, got {args.nodes}")
    if args.action == "start" and args.nodes > 1:
        if args.port is not None:
            raise EsbridgeError("--port is for a single node; the nodes of a cluster take free ports in 9201-9299")
        started = cluster.start_cluster(args.distribution, name=args.name, nodes=args.nodes,
                                        heap=args.heap or cluster.CLUSTER_HEAP, timeout=args.wait, progress=True)
        for member in started.nodes:
            print(f"{member.name}\t{member.url}\tpid {member.pid}")
        print(f"{started.distribution} {started.version} cluster {started.name!r} of {len(started.nodes)} nodes "
              f"running (every node answers for the cluster; stop it with: esbridge engine stop --name "
              f"{started.name})")
        print(f"export ESBRIDGE_URL={','.join(started.urls)}")
        return 0
    # without --name (and, to start, without --port) the running node of the distribution is meant
    found = None
    if args.name is None and (args.action == "stop" or (args.action == "start" and args.port is None)):
        found = find_local_node(args.distribution)
    name = args.name or (found.name if found is not None else args.distribution)
    if args.action == "stop" and found is not None and found.cluster is not None:
        name = found.cluster  # a node of a cluster: the cluster is stopped
    if args.action == "install":
        path = artifacts.install(args.distribution, progress=True)
        print(f"{args.distribution} {artifacts.runner_spec(args.distribution).version} installed in {path}")
    elif args.action == "start":
        if found is not None:
            node, how = found, "already running"
        else:
            node, how = local.start(args.distribution, name=name, port=args.port, heap=args.heap or "1g",
                                    timeout=args.wait, progress=True), "running"
        print(f"{node.distribution} {node.version} {how} at {node.url} (pid {node.pid}, node {node.name!r})")
        if node.username is not None:
            record = local.node_dir(node.name) / "node.json"
            print(f"secured: TLS with the CA {node.ca_certs}, user {node.username!r}; its password and an API key "
                  f"are in {record} (readable by you only). esbridge commands given this URL use them.")
            print(f"export ESBRIDGE_CA_CERTS={node.ca_certs}")
        print(f"export ESBRIDGE_URL={node.url}")
    elif args.action == "stop":
        if name not in local.known_nodes():
            known = local.known_nodes()
            raise ConfigurationError(
                f"no local node or cluster named {name!r} to stop; "
                + (f"esbridge's nodes and clusters: {', '.join(known)}" if known else "esbridge has none")
                + " (`esbridge engine status` lists the running ones)")
        members = local.cluster_members(name)
        what = f"cluster {name!r} ({len(members)} nodes)" if members is not None else f"node {name!r}"
        stopped = local.stop(name)
        print(f"{what} stopped" if stopped else f"{what} was not running")
    else:
        nodes = local.running_nodes()
        if not nodes:
            print("no local node is running (start one with: esbridge engine start)")
            return 3
        for node in nodes:
            print(f"{node.name}\t{node.distribution} {node.version}\t{node.url}\tpid {node.pid}"
                  + (f"\tcluster {node.cluster}" if node.cluster else ""))
    return 0


def add_commands(sub: Any, connection_args: Callable[[argparse.ArgumentParser], None],
                 connect: Callable[[argparse.Namespace], Any]) -> None:
    """Register ``engine`` on the ``esbridge`` parser."""
    p = sub.add_parser(
        "engine", help="manage esbridge's local engine node",
        description="Manage esbridge's local engine node: a single-node OpenSearch or Elasticsearch "
                    "cluster on 127.0.0.1, run from Maven Central artifacts, with its data under "
                    "$ESBRIDGE_HOME; or with --nodes N, a cluster of N such nodes (each its own JVM) on "
                    "127.0.0.1. Other commands use a running node without --url.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="actions:\n"
               "  install   download and verify the node's jars (start does it too)\n"
               "  start     start a node, or report the one of --distribution already running;\n"
               "            prints its URL and an `export ESBRIDGE_URL=...` line; with --nodes N\n"
               "            (N >= 2) start the cluster --name (default DISTRIBUTION-cluster) of N\n"
               "            nodes, or the nodes of it that are not running, and wait until it formed\n"
               "  stop      stop the node or cluster (--name, else the running node of --distribution,\n"
               "            with its whole cluster if it is a cluster's node)\n"
               "  status    list the running nodes with their URLs (exit code 3 if none)",
    )
    p.add_argument("action", choices=["install", "start", "stop", "status"],
                   help="install, start, stop or status (see below)")
    p.add_argument("--distribution", choices=DISTRIBUTIONS, default=DEFAULT_DISTRIBUTION,
                   help="engine of the node: opensearch-knn (the default: OpenSearch 3.5 with the k-NN plugin, "
                        "which keeps and searches document vectors), opensearch (OpenSearch 3.8, no vector search: "
                        "each client keeps the vectors on disk), elasticsearch (Elasticsearch 7.10) or "
                        "elasticsearch8 (Elasticsearch 8.19, secured: HTTPS, a superuser and an API key, recorded "
                        "under $ESBRIDGE_HOME/nodes/NAME/)")
    p.add_argument("--name", help="node (or cluster) name, a directory under $ESBRIDGE_HOME/nodes (default: the "
                                  "running node of --distribution, else the distribution's name; for a cluster "
                                  "DISTRIBUTION-cluster, its nodes NAME-1, NAME-2, ...)")
    p.add_argument("--port", type=int, help="HTTP port on 127.0.0.1 (default: a free one in 9201-9299)")
    p.add_argument("--nodes", type=int, default=1,
                   help="start a cluster of this many nodes (opensearch, opensearch-knn or elasticsearch; "
                        "default 1: a single node)")
    p.add_argument("--heap", help="JVM heap (default 1g; 512m for each node of a cluster)")
    p.add_argument("--wait", type=float, default=180.0,
                   help="seconds to wait for the node to be healthy (default 180)")
    p.set_defaults(func=_cmd_engine)
