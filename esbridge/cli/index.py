"""``esbridge engine``, ``esbridge index`` and ``esbridge indices``: esbridge's local engine nodes, and
the indices on an engine."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from esbridge.cli.options import DEFAULT_DISTRIBUTION, DISTRIBUTIONS, model_args, model_option
from esbridge.errors import ConfigurationError, EsbridgeError, IngestError
from esbridge.semantic.spec import VECTOR_PLACES

if TYPE_CHECKING:
    from esbridge.ingest import IngestReport


def _cmd_engine(args: argparse.Namespace) -> int:
    from esbridge.engine import artifacts, cluster, local
    from esbridge.engine.provision import find_local_node

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


def _cmd_add_channels(args: argparse.Namespace, connect: Callable[[argparse.Namespace], Any]) -> int:
    from esbridge.errors import IndexNotFoundError
    from esbridge.index.plain import add_channels

    wrong = [opt for opt, value in (("--dataset", args.dataset), ("--input", args.input),
                                    ("--recreate", args.recreate), ("--allow-partial", args.allow_partial)) if value]
    if wrong:
        raise EsbridgeError(f"{', '.join(wrong)} cannot go with --add-channels, which works on the existing index "
                            "--index names")
    if not args.index:
        raise EsbridgeError("--add-channels needs --index: the existing index to give esbridge's channels")
    engine = connect(args)
    if not engine.index_exists(args.index):
        raise IndexNotFoundError(f"index {args.index!r} does not exist at {engine.options.display_url}",
                                 index=args.index)
    report = add_channels(engine, args.index, fields=tuple(args.field) if args.field else None,
                          progress=not args.quiet)
    print(report.summary())
    return 0


def _cmd_index(args: argparse.Namespace, connect: Callable[[argparse.Namespace], Any]) -> int:
    from esbridge.index.definitions import IndexLayout
    from esbridge.ingest import count_lines, ingest, read_jsonl

    if args.add_channels:
        return _cmd_add_channels(args, connect)
    if bool(args.dataset) == bool(args.input):
        raise EsbridgeError("give exactly one of --dataset (a BEIR folder) or --input (a JSONL file)")
    if args.allow_partial and not args.recreate:
        raise EsbridgeError("--allow-partial goes with --recreate (it lets a replacement keep going when some "
                            "documents could not be indexed); without --recreate every document that can be indexed "
                            "is indexed anyway")
    fields = tuple(args.field) if args.field else ("title", "text")
    if not args.no_semantic:
        model_option(args)  # an unknown --model before the input is read or the engine reached
    if args.dataset:
        from esbridge.beirfolder import readable_folder

        given = Path(args.dataset)
        if not (given / "corpus.jsonl").is_file() and not (given / "corpus.jsonl.gz").is_file():
            raise EsbridgeError(f"{args.dataset!r} is not a BEIR folder: it holds neither corpus.jsonl nor "
                                "corpus.jsonl.gz")
        try:
            source = readable_folder(given) / "corpus.jsonl"  # a gzip-compressed corpus is unpacked once
        except OSError as err:
            raise ConfigurationError(f"the BEIR folder {args.dataset!r} cannot be unpacked: {err}") from err
        index = args.index or given.resolve().name
    else:
        source = Path(args.input)
        if not args.index:
            raise EsbridgeError("--index is required with --input")
        index = args.index
    # the input is checked (it exists, can be read, holds a document that can be indexed) before the engine is
    # touched: input that cannot be read never leaves an empty index or costs an existing one its content
    docs = read_jsonl(source, id_field=args.id_field, fields=fields, max_doc_bytes=args.max_doc_bytes)
    try:
        total = None if args.quiet else count_lines(source)  # the progress bar's
    except OSError:
        total = None
    engine = connect(args)
    layout = IndexLayout(fields=fields)
    if args.per_field_channels:
        layout = IndexLayout(fields=fields, field_channels=layout.channels)
    encoder = vector = kind = None
    if not args.no_semantic:
        from esbridge.semantic.encoder import available

        if available():
            from esbridge.semantic.engine_vectors import new_vector_field, vector_field_of
            from esbridge.semantic.models import load_encoder

            encoder = load_encoder(model_option(args))
            kind = engine.vector_search()
            fresh = args.recreate or not engine.index_exists(index)
            if fresh:
                vector = new_vector_field(engine, encoder, args.vectors)
            elif args.vectors == "engine" and vector_field_of(engine, index) is None:
                raise ConfigurationError(f"--vectors engine: index {index!r} exists without a vector field, "
                                         "which cannot be added to it; give --recreate as well")
    try:
        report = ingest(engine, index, docs, layout=layout, replace=args.recreate, shards=args.shards,
                        replicas=args.replicas, progress=not args.quiet, vector=vector,
                        term_vectors={"auto": None, "yes": True, "no": False}[args.term_vectors],
                        allow_partial=args.allow_partial, total=total)
    except IngestError as err:
        if err.report is not None:
            _print_failures(err.report, args.show_failures)
            print(f"partial: {err.report.summary()}", file=sys.stderr)
        raise
    if report.discarded:  # the index is unchanged: nothing to embed or store
        _print_failures(report, args.show_failures)
        print(report.summary())
        return 0 if report.ok else 4
    try:
        if not args.no_semantic and report.indexed:
            if encoder is not None:
                from esbridge.semantic.engine_vectors import EngineVectors, open_vectors

                vi = open_vectors(engine, index, encoder, fields=fields, progress=not args.quiet)
                if isinstance(vi, EngineVectors):
                    where = "kept and searched by the engine (kNN" + (
                        f" over passages of {vi.passages} word pieces)" if vi.passages else ")")
                else:
                    where = "kept by esbridge on disk (exact search; each client machine embeds every document " \
                        "itself" + ("; the engine has no vector search)" if kind is None else ")")
                print(f"semantic index: {len(vi)} document vectors ({vi.encoder.name}) for {index!r}, {where}")
            else:
                print("semantic index skipped: install esbridge's 'semantic' extra (pip install 'esbridge[semantic]') "
                      "for hybrid search", file=sys.stderr)
        if not args.no_store and report.indexed and not report.term_vectors and args.store is None:
            print(f"feature store not filled: index {index!r} stores no term vectors, and the engine's "
                  "esbridge-features plugin reads candidates' features (--store DIR fills a store anyway)")
        elif not args.no_store and report.indexed:
            from esbridge.features.build import build_store
            from esbridge.features.diskstore import DiskVectorStore

            built = build_store(engine, index, DiskVectorStore(args.store), progress=not args.quiet)
            print(built.summary())
    except EsbridgeError:
        # the documents are in: say so before the error, which names what failed
        print(f"indexed: {report.summary()}; then building the semantic index or the feature store failed "
              "(below): re-run the same command to finish (documents are written by id, so none is doubled)",
              file=sys.stderr)
        raise
    _print_failures(report, args.show_failures)
    print(report.summary())
    return 0 if report.ok else 4


def _cmd_indices(args: argparse.Namespace, connect: Callable[[argparse.Namespace], Any]) -> int:
    from esbridge.index.listing import list_indices, render_table

    engine = connect(args)
    entries = list_indices(engine, include_plain=args.all)
    if args.json:
        print(json.dumps([e.to_json() for e in entries], indent=2))
    elif entries:
        sys.stdout.write(render_table(entries))
    else:
        print(f"no index at {engine.options.display_url} was made by esbridge"
              + ("" if args.all else " (--all lists the others)"))
    return 0


def _print_failures(report: IngestReport, limit: int) -> None:
    for failure in report.failures[:limit]:
        print(f"not indexed: {failure}", file=sys.stderr)
    if len(report.failures) > limit:
        print(f"... and {len(report.failures) - limit} more", file=sys.stderr)



def add_commands(sub: Any, connection_args: Callable[[argparse.ArgumentParser], None],
                 connect: Callable[[argparse.Namespace], Any]) -> None:
    """Register ``engine``, ``index`` and ``indices`` on the ``esbridge`` parser."""
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

    p = sub.add_parser(
        "index", help="index a BEIR corpus or a JSONL file, or add esbridge's channels to an existing index",
        description="Index a BEIR corpus (--dataset) or a JSONL file (--input) into an esbridge index; or, with "
                    "--add-channels --index NAME, give an existing index of yours esbridge's channel sub-fields in "
                    "place: esbridge's analyzers are added (the index is closed for a moment), each text field gets "
                    "the sub-fields and is copied into the combined field esb_all, every document is re-indexed "
                    "from its _source with a progress bar, and the document count is checked unchanged. Scorers "
                    "that read only the base channel (bm25, bmx, ...) work on a plain index without it.")
    p.add_argument("--dataset", help="BEIR-layout folder (corpus.jsonl, or corpus.jsonl.gz, with _id, title, text)")
    p.add_argument("--input", help="JSONL file, one document a line")
    p.add_argument("--index", help="index name (default: the dataset folder's name)")
    p.add_argument("--add-channels", action="store_true",
                   help="add esbridge's channel sub-fields to the existing index --index (its text fields, or those "
                        "given with --field) and re-index it in place")
    p.add_argument("--id-field", default="_id", help="the field holding each document's id (default _id)")
    p.add_argument("--field", action="append", help="a text field to index (repeat; default title and text; with "
                                                    "--add-channels: every text field of the index)")
    p.add_argument("--shards", type=int, default=1, help="primary shards of a new index (default 1)")
    p.add_argument("--replicas", type=int, default=0,
                   help="replicas of each shard of a new index (default 0; on a cluster of several nodes, 1 "
                        "keeps every document on two nodes)")
    p.add_argument("--per-field-channels", action="store_true",
                   help="give every text field all four channel sub-fields (default: base only; the combined "
                        "field always has all four). Only a multi-channel scorer with --field-weight reads them; "
                        "each costs an analysis of the field at every write")
    p.add_argument("--recreate", action="store_true",
                   help="replace the index's content: the documents go into a new index, which takes the name "
                        "(as an alias) once they are indexed, and only then is the old index deleted; if "
                        "indexing stops, or any document could not be indexed, the old index is kept unchanged")
    p.add_argument("--allow-partial", action="store_true",
                   help="with --recreate: replace the index even when some documents could not be indexed (they "
                        "are reported; never when not one could be)")
    p.add_argument("--max-doc-bytes", type=int, default=8 * 1024 * 1024,
                   help="documents larger than this are reported, not indexed (default 8 MiB)")
    p.add_argument("--show-failures", type=int, default=20, help="failures to list (default 20)")
    p.add_argument("--no-semantic", action="store_true",
                   help="do not embed the documents for semantic search (the hybrid pipeline embeds them "
                        "on its first query instead)")
    model_args(p, when="unless --no-semantic: ")
    p.add_argument("--vectors", choices=VECTOR_PLACES, default="auto",
                   help="where a new index's passage vectors live: auto (the default) in the engine wherever it "
                        "can search vectors (OpenSearch with k-NN, Elasticsearch 8.12+: a nested vector field its "
                        "kNN query searches; clients keep nothing), else on disk with a warning; engine: there or "
                        "an error; disk: under $ESBRIDGE_HOME, searched exactly by esbridge (every client machine "
                        "embeds every document itself)")
    p.add_argument("--term-vectors", choices=("auto", "yes", "no"), default="auto",
                   help="whether a new index stores term vectors: auto (the default) stores none where every node "
                        "runs esbridge's esbridge-features plugin, which then reads lengths from the norms of its "
                        "similarity (cheaper indexing; the index opens only on nodes with the plugin)")
    p.add_argument("--store", metavar="DIR",
                   help="the on-disk feature store to fill with the documents' term vectors after indexing "
                        "(default: $ESBRIDGE_HOME/features or ~/.cache/esbridge/features)")
    p.add_argument("--no-store", action="store_true",
                   help="do not fill the feature store (the reranker fetches term vectors as queries need "
                        "them; `esbridge features build` fills it later)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    connection_args(p)
    p.set_defaults(func=lambda a: _cmd_index(a, connect))

    p = sub.add_parser(
        "indices", help="list the indices esbridge made on the engine, with their layouts",
        description="List the indices esbridge made on the engine (those whose mapping records esbridge's layout "
                    "in _meta.esbridge): their aliases, document count, text fields, channels (those of the combined "
                    "field, and of each text field where fewer) and where its document vectors are: the dense-vector "
                    "field the engine searches, or \"disk\" (with the model) where esbridge keeps them on this "
                    "machine, under $ESBRIDGE_HOME. An index `esbridge index --recreate` replaced answers to its name "
                    "through an alias.")
    p.add_argument("--all", action="store_true",
                   help="also list the indices esbridge did not make (marked as not esbridge's; the engine's own, "
                        "hidden or named with a leading dot, are left out)")
    p.add_argument("--json", action="store_true", help="print JSON: one object per index")
    connection_args(p)
    p.set_defaults(func=lambda a: _cmd_indices(a, connect))
