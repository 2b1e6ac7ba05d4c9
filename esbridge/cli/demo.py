"""``esbridge demo``: the engine's BM25 and esbridge side by side on a judged collection."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from esbridge.cli.options import model_args, model_option, pipeline_arg
from esbridge.errors import ConfigurationError


def _cmd_demo(args: argparse.Namespace, connect: Callable[[argparse.Namespace], Any]) -> int:
    from esbridge import demo

    if args.queries < 0 or args.top < 1 or args.window < 1:
        raise ConfigurationError("--queries must be >= 0, --top and --window >= 1")
    progress = not args.quiet
    model_option(args)  # an unknown --model before anything is downloaded or started
    dataset = demo.resolve_dataset(args.dataset, progress=progress)
    engine = demo.connect_with_progress(args, connect, progress=progress)
    result = demo.run_demo(engine, dataset, index=args.index, hybrid=False if args.lexical else None,
                           window=args.window, show=args.queries, top=args.top, progress=progress,
                           model=model_option(args), pipeline=args.pipeline)
    sys.stdout.write(demo.render(result, demo.stop_hint(engine.options.url, result.index)))
    return 0


def add_commands(sub: Any, connection_args: Callable[[argparse.ArgumentParser], None],
                 connect: Callable[[argparse.Namespace], Any]) -> None:
    """Register ``demo`` on the ``esbridge`` parser."""
    p = sub.add_parser(
        "demo", help="the engine's BM25 and esbridge side by side on a judged collection, with nDCG@10",
        description="Index a judged collection (by default a 1,000-abstract SciFact sample shipped with "
                    "esbridge; CC BY-NC 2.0, Wadden et al. 2020), rank every judged query with the engine's "
                    "own BM25 and with esbridge (the hybrid pipeline with its shipped defaults where the "
                    "'semantic' extra is installed, else the evolved reranker), show a few queries side by "
                    "side with the judged documents marked, and print nDCG@10 of both over every judged "
                    "query. The engine and the index keep running afterwards; the last lines say how to "
                    "stop them.")
    p.add_argument("--dataset", default=None,
                   help="a BEIR-layout folder or a BEIR name such as scifact (downloaded once into "
                        "$ESBRIDGE_HOME); default: the shipped SciFact sample")
    p.add_argument("--index", help="index name (default esbridge-demo-<collection>)")
    p.add_argument("--queries", type=int, default=3,
                   help="how many queries to show side by side (default 3); every judged query is measured")
    p.add_argument("--top", type=int, default=5, help="ranks shown per query (default 5)")
    p.add_argument("--lexical", action="store_true",
                   help="compare esbridge's evolved reranker instead of the hybrid pipeline (no sentence "
                        "embeddings, so no model to load and no documents to embed)")
    p.add_argument("--window", type=int, default=1000,
                   help="first-stage hits the engine returns and esbridge reranks (default 1000)")
    p.add_argument("--quiet", action="store_true", help="no progress on standard error")
    model_args(p, when="for the hybrid pipeline: ")
    pipeline_arg(p, when="for the hybrid pipeline: ")
    connection_args(p)
    p.set_defaults(func=lambda a: _cmd_demo(a, connect))
