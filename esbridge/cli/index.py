"""``esbridge index`` and ``esbridge indices``: the indices on an engine."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from esbridge.cli.options import PIPELINES, model_args, model_option
from esbridge.errors import ConfigurationError, EsbridgeError, IngestError
from esbridge.semantic.spec import VECTOR_PLACES

if TYPE_CHECKING:
    from esbridge.ingest import IngestReport


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
    whole: list[Any] = []  # the encoders of the whole-document fields the --pipeline reads
    document_fields: list[Any] = []  # ... and their engine fields, for a new index
    if not args.no_semantic:
        from esbridge.semantic.encoder import available

        if available():
            from esbridge.semantic.engine_vectors import new_document_vector_fields, new_vector_field, vector_field_of
            from esbridge.semantic.models import load_encoder

            encoder = load_encoder(model_option(args))
            kind = engine.vector_search()
            fresh = args.recreate or not engine.index_exists(index)
            from esbridge.hybrid import PipelineParams

            pp = PipelineParams.preset(args.pipeline)
            whole = ([encoder] if pp.w_document > 0 else []) + [load_encoder(m) for m in pp.ensemble]
            if fresh:
                vector = new_vector_field(engine, encoder, args.vectors)
                document_fields = new_document_vector_fields(engine, vector, whole)
            elif args.vectors == "engine" and vector_field_of(engine, index) is None:
                raise ConfigurationError(f"--vectors engine: index {index!r} exists without a vector field, "
                                         "which cannot be added to it; give --recreate as well")
    try:
        report = ingest(engine, index, docs, layout=layout, replace=args.recreate, shards=args.shards,
                        replicas=args.replicas, progress=not args.quiet, vector=vector,
                        document_vectors=document_fields,
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
                _fill_whole_documents(engine, index, whole, fields, quiet=args.quiet)
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


def _fill_whole_documents(engine: Any, index: str, encoders: list[Any], fields: tuple[str, ...], *,
                          quiet: bool) -> None:
    """Embed the index's whole documents with each of ``encoders`` (the fields ``--pipeline`` asked for)."""
    from esbridge.semantic.engine_vectors import EngineVectors, open_document_vectors

    for enc in encoders:
        dv = open_document_vectors(engine, index, enc, fields=fields, progress=not quiet)
        where = "in the engine" if isinstance(dv, EngineVectors) else "on disk"
        print(f"whole documents: {len(dv)} vectors ({enc.name}) for {index!r}, {where}")


def _print_failures(report: IngestReport, limit: int) -> None:
    for failure in report.failures[:limit]:
        print(f"not indexed: {failure}", file=sys.stderr)
    if len(report.failures) > limit:
        print(f"... and {len(report.failures) - limit} more", file=sys.stderr)



def add_commands(sub: Any, connection_args: Callable[[argparse.ArgumentParser], None],
                 connect: Callable[[argparse.Namespace], Any]) -> None:
    """Register ``index`` and ``indices`` on the ``esbridge`` parser."""
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
    p.add_argument("--pipeline", choices=PIPELINES, default="default",
                   help="the hybrid pipeline the index is made for: default (its passages' vectors) or ensemble "
                        "(also one vector per whole document of the model and of e5-small-v2-q and "
                        "all-minilm-l6-v2-q, in the engine where it keeps the passages': --pipeline ensemble on "
                        "search then reads them there); seed004 needs no more"),
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
