"""``esbridge features``: ``build`` fills the on-disk feature store with an index's term vectors;
``export`` writes learning-to-rank features of every topic's candidates.

The work is :func:`esbridge.features.build.build_store` and
:func:`esbridge.evaluation.ltr.export_features`, imported only when the command runs.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

from esbridge.cli.options import fields_args, fields_option
from esbridge.errors import ConfigurationError


def _cmd_export(args: argparse.Namespace, connect: Callable[[argparse.Namespace], Any]) -> int:
    from esbridge.evaluation.ltr import export_features
    from esbridge.evaluation.runner import parse_param_overrides
    from esbridge.evaluation.trecfiles import read_qrels, read_topics
    from esbridge.scoring import available_scorers, get_scorer

    if args.window < 1:
        raise ConfigurationError(f"--window must be >= 1, got {args.window}")
    scorers = [s.strip() for s in args.scorers.split(",") if s.strip()] if args.scorers else available_scorers()
    if not scorers:
        raise ConfigurationError("--scorers is empty; give e.g. bm25,bmx,evolved, or leave it out for every scorer")
    for name in scorers:
        get_scorer(name)
    params = parse_param_overrides(args.param or [], scorers)
    fields = fields_option(args.fields)
    # every input file is read before the engine is reached: a malformed line fails at once
    topics = read_topics(args.topics, args.topic_field)
    qrels = read_qrels(args.qrels) if args.qrels else None
    output = Path(args.output)
    if output.is_dir():
        raise ConfigurationError(f"--output {output} is a folder; give the feature file's name")
    output.parent.mkdir(parents=True, exist_ok=True)
    engine = connect(args)
    report = export_features(engine, args.index, topics, output, qrels=qrels, window=args.window,
                             fmt=args.format, scorers=scorers, params=params, topic_field=args.topic_field,
                             fields=fields, progress=not args.quiet)
    if report.without_candidates:
        listed = ", ".join(report.without_candidates[:10]) + (" ..." if len(report.without_candidates) > 10 else "")
        print(f"esbridge: note: the first stage found nothing for {len(report.without_candidates)} topic(s), "
              f"left out: {listed}", file=sys.stderr)
    if report.unjudged:
        listed = ", ".join(report.unjudged[:10]) + (" ..." if len(report.unjudged) > 10 else "")
        print(f"esbridge: note: {len(report.unjudged)} topic(s) have no judgments in {args.qrels} (labels 0): "
              f"{listed}", file=sys.stderr)
    print(report.summary())
    return 0


def _cmd_build(args: argparse.Namespace, connect: Callable[[argparse.Namespace], Any]) -> int:
    from esbridge.errors import IndexNotFoundError
    from esbridge.features.build import build_store
    from esbridge.features.diskstore import DiskVectorStore

    engine = connect(args)
    if not engine.index_exists(args.index):
        raise IndexNotFoundError(f"index {args.index!r} does not exist at {engine.options.display_url}",
                                 index=args.index)
    fields = [f.strip() for v in (args.fields or []) for f in v.split(",") if f.strip()] or None
    report = build_store(engine, args.index, DiskVectorStore(args.store) if args.store else None,
                         fields=fields, page=args.page, progress=not args.quiet)
    print(report.summary())
    return 0


def add_commands(sub: Any, connection_args: Callable[[argparse.ArgumentParser], None],
                 connect: Callable[[argparse.Namespace], Any]) -> None:
    """Register ``features`` on the ``esbridge`` parser."""
    p = sub.add_parser("features", help="fill the feature store (build); export learning-to-rank features (export)",
                       description="esbridge's on-disk feature store, and features of the engine's candidates "
                                   "for learning to rank.")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION",
                               help="build: fill the feature store; export: write the features")
    b = actions.add_parser(
        "build", help="read the term vectors of every document of an index into the on-disk feature store",
        description=textwrap.fill(
            "Read every document's term vectors (per channel and field: term frequencies and length) into "
            "esbridge's feature store, so the reranker reads them from disk instead of asking the engine. "
            "One scroll page at a time (bounded memory); documents already stored at their current "
            "_seq_no/_primary_term are skipped, so an interrupted build resumes and a second one reads only "
            "what changed. The store is keyed by the index's UUID: a recreated index starts a new one.", 79))
    b.add_argument("index", help="the index (or alias) to read; any index, esbridge's or not")
    b.add_argument("--fields", action="append", metavar="FIELD[,FIELD]",
                   help="fields to store (default: the combined field in every channel and each text field)")
    b.add_argument("--page", type=int, default=500, help="documents per page and per _mtermvectors (default 500)")
    b.add_argument("--store", metavar="DIR",
                   help="the feature store's folder (default: $ESBRIDGE_HOME/features, ~/.cache/esbridge/features)")
    b.add_argument("--quiet", action="store_true", help="no progress bar")
    connection_args(b)
    b.set_defaults(func=lambda a: _cmd_build(a, connect))
    e = actions.add_parser(
        "export", help="write every topic's candidates with their features in SVMrank or LightGBM format",
        description=textwrap.fill(
            "For each topic, run the engine's first stage for the top --window candidates and write one "
            "line per candidate: its label (the judged grade, 0 where unjudged or without --qrels), and as "
            "features the engine's first-stage score, each scorer's score and each part of it (the evolved "
            "formula's per-channel evidence and multipliers, BMX's similarity and entropy terms, ...), "
            "computed exactly as the reranker computes them. <output>.features.json names every feature "
            "index and the topic of every qid.", 79),
        epilog="formats:\n"
               "  svmrank   label qid:QID 1:v1 2:v2 ... # docid  (SVMrank, RankLib, scikit-learn's\n"
               "            load_svmlight_file with query_id=True)\n"
               "  lightgbm  label 1:v1 2:v2 ...  as LightGBM's own reader takes it, the groups in\n"
               "            <output>.query (lines per query, LightGBM reads it by itself) and each\n"
               "            line's qid, topic and docid in <output>.docids",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    e.add_argument("--index", required=True,
                   help="an index created by `esbridge index`, or one of yours: scorers that read only the base "
                        "channel (e.g. --scorers bm25,bmx) work on any index with text fields")
    e.add_argument("--topics", required=True,
                   help="BEIR queries.jsonl (_id, text), a TREC topics file (<top> <num> <title> <desc> <narr>) "
                        "or id<TAB>text lines")
    e.add_argument("--qrels", help="judgments for the labels, TREC qrels (qid 0 docid relevance) or a BEIR qrels "
                                   ".tsv (default: every label 0)")
    e.add_argument("--output", "--out", required=True, metavar="FILE", help="the feature file to write")
    e.add_argument("--format", choices=["svmrank", "lightgbm"], default="svmrank",
                   help="svmrank (default) or lightgbm (see below)")
    e.add_argument("--window", type=int, default=1000, help="first-stage candidates per topic (default 1000)")
    e.add_argument("--scorers", help="comma-separated scorers whose scores and parts are features (default: "
                                     "every scorer of `esbridge scorers`)")
    e.add_argument("--param", action="append", metavar="SCORER.NAME=VALUE",
                   help="a scorer parameter, e.g. evolved.w_bi=0.2 (repeat)")
    e.add_argument("--topic-field", choices=["title", "desc", "title+desc"], default="title",
                   help="what of a TREC topic is the query text (default title)")
    fields_args(e)
    e.add_argument("--quiet", action="store_true", help="no progress bar")
    connection_args(e)
    e.set_defaults(func=lambda a: _cmd_export(a, connect))
