"""The ``esbridge`` command: a thin layer over the public API.

Every command reaches the engine the same way: ``--url`` or ``ESBRIDGE_URL`` for
an existing cluster, otherwise esbridge's running local node of ``--distribution``
(any running one if not given), and only when none runs, a new one started from
Maven Central artifacts.  Errors print one line that
says what to fix and exit non-zero.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from esbridge.errors import EsbridgeError, IngestError

if TYPE_CHECKING:
    from esbridge.ingest import IngestReport

Handler = Callable[[argparse.Namespace], int]


class Parser(argparse.ArgumentParser):
    """The parser of ``esbridge`` and of each of its commands (its sub-parsers are of this class
    too): options are taken only as spelled out (``--api`` is not ``--api-key``), and arguments it
    does not know are reported by name only, never with their values, which may be secrets.
    The parsed arguments keep the command line as given (``command_argv``), which reports
    record with the secrets among the parsed values hidden."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def parse_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                   namespace: argparse.Namespace | None = None) -> argparse.Namespace:
        given = list(sys.argv[1:] if args is None else args)
        parsed, extras = self.parse_known_args(given, namespace)
        if extras:
            command = _command_parser(self, parsed)
            command.error(_unrecognized(extras, command))
        parsed.command_argv = given
        return parsed


def _command_parser(parser: argparse.ArgumentParser, parsed: argparse.Namespace) -> argparse.ArgumentParser:
    """The parser of the (sub-)command ``parsed`` ran."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = action.choices.get(getattr(parsed, action.dest, None) or "")
            if chosen is not None:
                return _command_parser(chosen, parsed)
    return parser


def _unrecognized(extras: Sequence[str], parser: argparse.ArgumentParser) -> str:
    """What argparse's "unrecognized arguments" says, without the arguments' values."""
    options = [arg.split("=", 1)[0] for arg in extras if arg.startswith("-") and len(arg) > 1]
    others = len(extras) - len(options)
    known = [opt for action in parser._actions for opt in action.option_strings]
    parts = []
    for opt in options:
        meant = [k for k in known if k.startswith(opt)]
        parts.append(f"{opt} (did you mean {' or '.join(meant)}? options are taken only spelled out in full)"
                     if meant else opt)
    if others:
        parts.append(f"{others} other argument{'s' if others > 1 else ''} (not shown: "
                     f"{'they' if others > 1 else 'it'} may hold a secret)")
    return f"unrecognized arguments: {', '.join(parts)}"


#: The local node distributions (``esbridge.engine.local.RUNNERS``).
DISTRIBUTIONS = ["opensearch", "opensearch-knn", "elasticsearch", "elasticsearch8"]


def _connection_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("engine connection")
    g.add_argument("--url", action="append",
                   help="engine URL; repeat it (or separate URLs with commas) for several nodes of one cluster: "
                        "a request that cannot reach one goes to the next (default: $ESBRIDGE_URL, else "
                        "esbridge's running local node)")
    g.add_argument("--sniff", action="store_true", default=None,
                   help="discover the cluster's nodes from the URLs given, on connecting and when a node fails "
                        "(default: $ESBRIDGE_SNIFF)")
    g.add_argument("--distribution", choices=DISTRIBUTIONS, default=None,
                   help="without --url: use esbridge's running local node of this distribution, or start "
                        "one if none runs (default: any running esbridge node, else a new opensearch node)")
    g.add_argument("--username", help="basic-auth user (password from $ESBRIDGE_PASSWORD)")
    g.add_argument("--api-key", help="API key, id:key or base64 (default: $ESBRIDGE_API_KEY)")
    g.add_argument("--ca-certs", help="CA bundle to verify the engine's TLS certificate")
    g.add_argument("--no-verify-certs", action="store_true", help="do not verify TLS certificates")
    g.add_argument("--timeout", type=float, default=60.0, help="seconds per request (default 60)")
    g.add_argument("--max-retries", type=int, default=5,
                   help="retries of a request the engine refused with 429/502/503/504 or that could not "
                        "reach it, with doubling back-off (default 5; 0 = fail at once)")


def _connect(args: argparse.Namespace) -> Any:
    from esbridge.engine.client import Engine

    return Engine.connect(_connection_options(args))


def _connection_options(args: argparse.Namespace) -> Any:
    import os

    from esbridge.engine.provision import provision

    prov = provision(args.distribution, url=args.url, use_docker=False, progress=not getattr(args, "quiet", False))
    if prov.source == "local":
        how = "started" if prov.started else "running"
        print(f"esbridge: using the local {prov.distribution} node {prov.node!r} ({how}) at {prov.url}; "
              "pass --url or set ESBRIDGE_URL for another engine", file=sys.stderr)
    return prov.options(
        username=args.username,
        password=os.environ.get("ESBRIDGE_PASSWORD") if args.username else None,
        api_key=args.api_key,
        ca_certs=args.ca_certs,
        verify_certs=False if args.no_verify_certs else None,
        timeout=args.timeout,
        max_retries=args.max_retries,
        sniff=args.sniff,
    )


# ---- engine ------------------------------------------------------------------------------

def _cmd_engine(args: argparse.Namespace) -> int:
    from esbridge.engine import local
    from esbridge.engine.provision import find_local_node
    from esbridge.errors import ConfigurationError

    if args.nodes < 1:
        raise EsbridgeError(f"--nodes must be >= 1, got {args.nodes}")
    if args.action == "start" and args.nodes > 1:
        if args.port is not None:
            raise EsbridgeError("--port is for a single node; the nodes of a cluster take free ports in 9201-9299")
        cluster = local.start_cluster(args.distribution, name=args.name, nodes=args.nodes,
                                      heap=args.heap or local.CLUSTER_HEAP, timeout=args.wait, progress=True)
        for member in cluster.nodes:
            print(f"{member.name}\t{member.url}\tpid {member.pid}")
        print(f"{cluster.distribution} {cluster.version} cluster {cluster.name!r} of {len(cluster.nodes)} nodes "
              f"running (every node answers for the cluster; stop it with: esbridge engine stop --name "
              f"{cluster.name})")
        print(f"export ESBRIDGE_URL={','.join(cluster.urls)}")
        return 0
    # without --name (and, to start, without --port) the running node of the distribution is meant
    found = None
    if args.name is None and (args.action == "stop" or (args.action == "start" and args.port is None)):
        found = find_local_node(args.distribution)
    name = args.name or (found.name if found is not None else args.distribution)
    if args.action == "stop" and found is not None and found.cluster is not None:
        name = found.cluster  # a node of a cluster: the cluster is stopped
    if args.action == "install":
        path = local.install(args.distribution, progress=True)
        print(f"{args.distribution} {local.runner_spec(args.distribution).version} installed in {path}")
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


# ---- index -------------------------------------------------------------------------------

def _cmd_add_channels(args: argparse.Namespace) -> int:
    from esbridge.errors import IndexNotFoundError
    from esbridge.index.plain import add_channels

    wrong = [opt for opt, value in (("--dataset", args.dataset), ("--input", args.input),
                                    ("--recreate", args.recreate)) if value]
    if wrong:
        raise EsbridgeError(f"{', '.join(wrong)} cannot go with --add-channels, which works on the existing index "
                            "--index names")
    if not args.index:
        raise EsbridgeError("--add-channels needs --index: the existing index to give esbridge's channels")
    engine = _connect(args)
    if not engine.index_exists(args.index):
        raise IndexNotFoundError(f"index {args.index!r} does not exist at {engine.options.display_url}",
                                 index=args.index)
    report = add_channels(engine, args.index, fields=tuple(args.field) if args.field else None,
                          progress=not args.quiet)
    print(report.summary())
    return 0


def _cmd_index(args: argparse.Namespace) -> int:
    from esbridge.index.definitions import IndexLayout
    from esbridge.ingest import ingest, read_jsonl

    if args.add_channels:
        return _cmd_add_channels(args)
    if bool(args.dataset) == bool(args.input):
        raise EsbridgeError("give exactly one of --dataset (a BEIR folder) or --input (a JSONL file)")
    fields = tuple(args.field) if args.field else ("title", "text")
    if not args.no_semantic:
        from esbridge.cli_search import model_option

        model_option(args)  # an unknown --model before the input is read or the engine reached
    if args.dataset:
        source = Path(args.dataset) / "corpus.jsonl"
        if not source.is_file():
            raise EsbridgeError(f"{args.dataset!r} is not a BEIR folder: {source} does not exist")
        id_field = "_id"
        index = args.index or Path(args.dataset).resolve().name
    else:
        source = Path(args.input)
        id_field = args.id_field
        if not args.index:
            raise EsbridgeError("--index is required with --input")
        index = args.index
    # the input is checked (it exists, can be read, holds a document that can be indexed) before the engine is
    # touched: input that cannot be read never leaves an empty index or costs an existing one its content
    docs = read_jsonl(source, id_field=id_field, fields=fields, max_doc_bytes=args.max_doc_bytes)
    engine = _connect(args)
    layout = IndexLayout(fields=fields)
    if args.per_field_channels:
        layout = IndexLayout(fields=fields, field_channels=layout.channels)
    encoder = vector = None
    if not args.no_semantic:
        from esbridge.semantic.encoder import available

        if available():
            from esbridge.cli_search import model_option
            from esbridge.index.definitions import VectorField
            from esbridge.semantic.models import load_encoder

            encoder = load_encoder(model_option(args))
            if engine.vector_search() == "knn_vector" and (args.recreate or not engine.index_exists(index)):
                # the engine keeps and searches the vectors itself
                vector = VectorField(dim=encoder.dim, model=encoder.name)
    try:
        report = ingest(engine, index, docs, layout=layout, replace=args.recreate, shards=args.shards,
                        replicas=args.replicas, progress=not args.quiet, vector=vector)
    except IngestError as err:
        if err.report is not None:
            _print_failures(err.report, args.show_failures)
            print(f"partial: {err.report.summary()}", file=sys.stderr)
        raise
    try:
        if not args.no_semantic and report.indexed:
            if encoder is not None:
                from esbridge.semantic.engine_vectors import EngineVectors, open_vectors

                vi = open_vectors(engine, index, encoder, fields=fields, progress=not args.quiet)
                where = ("kept and searched by the engine (kNN)" if isinstance(vi, EngineVectors)
                         else "kept by esbridge on disk (exact search; the engine has no vector search)")
                print(f"semantic index: {len(vi)} document vectors ({vi.encoder.name}) for {index!r}, {where}")
            else:
                print("semantic index skipped: install esbridge's 'semantic' extra (pip install 'esbridge[semantic]') "
                      "for hybrid search", file=sys.stderr)
        if not args.no_store and report.indexed:
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


def _cmd_indices(args: argparse.Namespace) -> int:
    from esbridge.index.listing import list_indices, render_table

    engine = _connect(args)
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


def build_parser() -> argparse.ArgumentParser:
    from esbridge import __version__
    from esbridge.cli_search import model_args

    parser = Parser(
        prog="esbridge",
        description="Exact modern lexical scoring (BM25F, BMX, evolved) on Elasticsearch and OpenSearch.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"esbridge {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

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
    p.add_argument("--distribution", choices=DISTRIBUTIONS, default="opensearch",
                   help="engine of the node: opensearch (OpenSearch 3.8), opensearch-knn (OpenSearch 3.5 with "
                        "the k-NN plugin: the engine keeps and searches document vectors), elasticsearch "
                        "(Elasticsearch 7.10) or elasticsearch8 (Elasticsearch 8.19, secured: HTTPS, a "
                        "superuser and an API key, recorded under $ESBRIDGE_HOME/nodes/NAME/); default opensearch")
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
    p.add_argument("--dataset", help="BEIR-layout folder (corpus.jsonl with _id, title, text)")
    p.add_argument("--input", help="JSONL file, one document a line")
    p.add_argument("--index", help="index name (default: the dataset folder's name)")
    p.add_argument("--add-channels", action="store_true",
                   help="add esbridge's channel sub-fields to the existing index --index (its text fields, or those "
                        "given with --field) and re-index it in place")
    p.add_argument("--id-field", default="_id", help="id field of --input documents (default _id)")
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
                        "indexing stops, or not one document could be indexed, the old index is kept unchanged")
    p.add_argument("--max-doc-bytes", type=int, default=8 * 1024 * 1024,
                   help="documents larger than this are reported, not indexed (default 8 MiB)")
    p.add_argument("--show-failures", type=int, default=20, help="failures to list (default 20)")
    p.add_argument("--no-semantic", action="store_true",
                   help="do not embed the documents for semantic search (the hybrid pipeline embeds them "
                        "on its first query instead)")
    model_args(p, when="unless --no-semantic: ")
    p.add_argument("--store", metavar="DIR",
                   help="the on-disk feature store to fill with the documents' term vectors after indexing "
                        "(default: $ESBRIDGE_HOME/features or ~/.cache/esbridge/features)")
    p.add_argument("--no-store", action="store_true",
                   help="do not fill the feature store (the reranker fetches term vectors as queries need "
                        "them; `esbridge features build` fills it later)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    _connection_args(p)
    p.set_defaults(func=_cmd_index)

    p = sub.add_parser(
        "indices", help="list the indices esbridge made on the engine, with their layouts",
        description="List the indices esbridge made on the engine (those whose mapping records esbridge's layout "
                    "in _meta.esbridge): their aliases, document count, text fields, channels (those of the combined "
                    "field, and of each text field where fewer) and the dense-vector field the engine searches, if "
                    "any. An index `esbridge index --recreate` replaced answers to its name through an alias.")
    p.add_argument("--all", action="store_true",
                   help="also list the indices esbridge did not make (marked as not esbridge's; the engine's own, "
                        "hidden or named with a leading dot, are left out)")
    p.add_argument("--json", action="store_true", help="print JSON: one object per index")
    _connection_args(p)
    p.set_defaults(func=_cmd_indices)

    from esbridge import cli_eval, cli_features, cli_search

    cli_search.add_commands(sub, _connection_args, _connect)
    cli_eval.add_commands(sub, _connection_args, _connect)
    cli_features.add_commands(sub, _connection_args, _connect)
    _add_serve(sub)
    return parser


def _add_serve(sub: Any) -> None:
    """``esbridge serve`` (esbridge.serve)."""
    from esbridge.serve import add_command

    add_command(sub, _connection_args, _connection_options)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``esbridge`` console script."""
    return run_parsed(build_parser().parse_args(argv))


#: Exit codes, by what went wrong (``esbridge --help`` lists them).
EXIT_USAGE = 2         # a wrong option, parameter or input file (argparse uses 2 too)
EXIT_UNREACHABLE = 3   # the engine could not be reached, or a local node not started
EXIT_NOT_INDEXED = 4   # documents were not indexed (each is reported)
EXIT_NO_INDEX = 5      # the named index does not exist
EXIT_ENGINE = 6        # the engine refused a request
EXIT_CODES = """exit codes:
  0  done
  2  a wrong option, parameter or input
  3  the engine could not be reached, also part-way through indexing (or a local node could not
     be started)
  4  some documents were not indexed (each is reported)
  5  the named index does not exist
  6  the engine refused a request (its reason is printed)
  130 interrupted"""


def exit_code(err: EsbridgeError) -> int:
    """The exit code of an esbridge error; documents not indexed because indexing stopped on another
    error (the engine lost, a request refused) take that error's code."""
    from esbridge.errors import (
        EngineError,
        EngineUnavailableError,
        IndexNotFoundError,
        ProvisioningError,
        UnsupportedEngineError,
    )

    if isinstance(err, (EngineUnavailableError, ProvisioningError, UnsupportedEngineError)):
        return EXIT_UNREACHABLE
    if isinstance(err, IngestError):
        cause = err.__cause__
        return exit_code(cause) if isinstance(cause, EsbridgeError) else EXIT_NOT_INDEXED
    if isinstance(err, IndexNotFoundError):
        return EXIT_NO_INDEX
    if isinstance(err, EngineError):
        return EXIT_ENGINE
    return EXIT_USAGE


class _MessageFormatter(logging.Formatter):
    """esbridge's log records as the command prints its own lines: ``esbridge: ...`` for progress,
    ``esbridge: warning: ...`` (``error:``, ...) for what needs attention."""

    def format(self, record: logging.LogRecord) -> str:
        label = "" if record.levelno < logging.WARNING else f"{record.levelname.lower()}: "
        return f"esbridge: {label}{record.getMessage()}"


@contextmanager
def messages_on_stderr(quiet: bool = False) -> Iterator[None]:
    """While a command runs, what esbridge logs is shown on standard error: its progress messages
    (``INFO``) and warnings, only the warnings with ``--quiet``."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_MessageFormatter())
    logger = logging.getLogger("esbridge")
    level = logger.level
    logger.setLevel(logging.WARNING if quiet else logging.INFO)
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def run_parsed(args: argparse.Namespace) -> int:
    """Run a parsed command; an esbridge error becomes one line on stderr and its exit code
    (:data:`EXIT_CODES`).  What esbridge logs meanwhile is shown on stderr
    (:func:`messages_on_stderr`)."""
    try:
        with messages_on_stderr(quiet=bool(getattr(args, "quiet", False))):
            return int(args.func(args))
    except EsbridgeError as err:
        print(f"esbridge: error: {err}", file=sys.stderr)
        return exit_code(err)
    except BrokenPipeError:
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("esbridge: interrupted", file=sys.stderr)
        return 130
    except json.JSONDecodeError as err:
        print(f"esbridge: error: input is not valid JSON: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
