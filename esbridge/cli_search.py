"""``esbridge search``, ``esbridge rescore``, ``esbridge scorers`` and ``esbridge demo``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from esbridge.errors import ConfigurationError, EsbridgeError


def _scorer_params(name: str, pairs: list[str] | None) -> Any:
    from esbridge.scoring import get_scorer

    scorer = get_scorer(name)
    overrides: dict[str, Any] = {}
    for pair in pairs or []:
        if "=" not in pair:
            raise ConfigurationError(f"--param {pair!r} must be NAME=VALUE")
        key, raw = pair.split("=", 1)
        try:
            value: Any = json.loads(raw)
        except ValueError:
            value = raw
        overrides[key.strip()] = value
    try:
        return scorer.make_params(**overrides)
    except (TypeError, ValueError) as err:
        raise ConfigurationError(f"scorer {name!r}: {err}") from err


def _reranker(args: argparse.Namespace, connect: Callable[[argparse.Namespace], Any]) -> Any:
    from esbridge.rerank import Reranker

    engine = connect(args)
    if not engine.index_exists(args.index):
        raise ConfigurationError(
            f"index {args.index!r} does not exist at {engine.options.url}; create it with `esbridge index`"
        )
    weights = {}
    for pair in args.field_weight or []:
        name, _, value = pair.partition("=")
        try:
            weights[name] = float(value)
        except ValueError:
            raise ConfigurationError(f"--field-weight {pair!r} must be FIELD=NUMBER") from None
    return Reranker(engine, args.index, scorer=args.scorer, params=_scorer_params(args.scorer, args.param),
                    window=args.window, first_stage=args.first_stage, field_weights=weights or None)


def _print_hits(response: dict[str, Any], as_json: bool) -> None:
    if as_json:
        json.dump(response, sys.stdout, ensure_ascii=False)
        sys.stdout.write("\n")
        return
    hits = response["hits"]["hits"]
    if not hits:
        print("no hits")
        return
    print(f"{'rank':>4}  {'score':>9}  {'first':>9}  {'id':<14} title")
    for rank, h in enumerate(hits, start=1):
        src = h.get("_source") or {}
        title = str(src.get("title") or src.get("text") or "")[:70].replace("\n", " ")
        first = (h.get("_esbridge") or {}).get("first_stage_score")
        first_s = f"{first:9.3f}" if isinstance(first, (int, float)) else f"{'-':>9}"
        print(f"{rank:>4}  {h['_score']:9.3f}  {first_s}  {str(h['_id']):<14} {title}")


def _print_hybrid(response: dict[str, Any]) -> None:
    hits = response["hits"]["hits"]
    if not hits:
        print("no hits")
        return
    short = {"semantic": "sem", "lexical": "lex", "keyword": "kw", "semantic_feedback": "sem+fb"}
    print(f"{'rank':>4}  {'fused':>8}  {'rank in each strategy':<32} {'id':<14} title")
    for rank, h in enumerate(hits, start=1):
        src = h.get("_source") or {}
        title = str(src.get("title") or src.get("text") or "")[:60].replace("\n", " ")
        found = h["_esbridge"]["strategies"]
        where = " ".join(f"{short.get(k, k)} {v['rank']}" for k, v in found.items())
        print(f"{rank:>4}  {h['_score']:8.4f}  {where:<32} {str(h['_id']):<14} {title}")


def _cmd_search(args: argparse.Namespace, connect: Callable[[argparse.Namespace], Any]) -> int:
    filt = json.loads(args.filter) if args.filter else None
    if args.hybrid:
        from esbridge.cli_eval import pipeline_params
        from esbridge.hybrid import HybridSearcher

        engine = connect(args)
        if not engine.index_exists(args.index):
            raise ConfigurationError(
                f"index {args.index!r} does not exist at {engine.options.url}; create it with `esbridge index`")
        params = pipeline_params([f"scorer={json.dumps(args.scorer)}", f"window={args.window}",
                                  *(args.pipeline_param or [])])
        with HybridSearcher(engine, args.index, params) as hs:
            response = hs.search(args.query, size=args.size, filter=filt, explain=args.explain)
        if args.json:
            _print_hits(response, True)
        else:
            _print_hybrid(response)
        return 0
    with _reranker(args, connect) as rr:
        response = rr.search(args.query, size=args.size, filter=filt, explain=args.explain)
    _print_hits(response, args.json)
    return 0


def _cmd_rescore(args: argparse.Namespace, connect: Callable[[argparse.Namespace], Any]) -> int:
    raw = sys.stdin.read() if args.response in (None, "-") else Path(args.response).read_text("utf-8")
    if not raw.strip():
        raise ConfigurationError("no response on standard input; pipe an engine search response (JSON) in")
    try:
        response = json.loads(raw)
    except ValueError as err:
        raise ConfigurationError(f"the response is not valid JSON: {err}") from None
    rr = _reranker(args, connect)
    out = rr.rescore(response, args.query, window_size=args.window, explain=args.explain)
    json.dump(out, sys.stdout, ensure_ascii=False)
    sys.stdout.write("\n")
    return 0


def _cmd_scorers(args: argparse.Namespace) -> int:
    from esbridge.scoring import available_scorers, get_scorer

    for name in available_scorers():
        sc = get_scorer(name)
        print(f"{name:<18} channels={','.join(sc.channels):<26} {sc.description}")
    return 0


def _cmd_demo(args: argparse.Namespace, connect: Callable[[argparse.Namespace], Any]) -> int:
    from esbridge.ingest import ingest, read_jsonl
    from esbridge.rerank import Reranker

    folder = Path(args.dataset)
    corpus = folder / "corpus.jsonl"
    if not corpus.is_file():
        raise ConfigurationError(f"{str(folder)!r} is not a BEIR folder (no corpus.jsonl)")
    engine = connect(args)
    index = args.index or f"esbridge-demo-{folder.resolve().name}"
    expected = sum(1 for line in open(corpus, "rb") if line.strip())
    if not (engine.index_exists(index) and engine.count(index) == expected):
        engine.delete_index(index)
        report = ingest(engine, index, read_jsonl(corpus), progress=not args.quiet)
        print(report.summary())
    queries = []
    with open(folder / "queries.jsonl", encoding="utf-8") as f:
        for line in f:
            queries.append(json.loads(line))
            if len(queries) >= args.queries:
                break
    scorers = [s.strip() for s in args.scorers.split(",") if s.strip()]
    rerankers = {s: Reranker(engine, index, scorer=s, window=args.window) for s in scorers}
    print(f"\n{engine.info.label} at {engine.options.url}, index {index!r}: top hit per scorer\n")
    header = f"{'query':<46} " + " ".join(f"{s:<16}" for s in scorers)
    print(header)
    print("-" * len(header))
    for q in queries:
        row = f"{q['text'][:45]:<46} "
        for s in scorers:
            hits = rerankers[s].search(q["text"], size=1)["hits"]["hits"]
            row += f"{(hits[0]['_id'] + ' ' + format(hits[0]['_score'], '.2f')) if hits else '-':<16} "
        print(row)
    return 0


def add_commands(sub: Any, connection_args: Callable[[argparse.ArgumentParser], None],
                 connect: Callable[[argparse.Namespace], Any]) -> None:
    """Register the search commands on the ``esbridge`` parser."""

    def rerank_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("index", help="an index created by esbridge")
        p.add_argument("query", help="the query text")
        p.add_argument("--scorer", default="evolved", help="scorer name (esbridge scorers lists them)")
        p.add_argument("--param", action="append", metavar="NAME=VALUE",
                       help="a scorer parameter (repeat), e.g. --param k1=1.2")
        p.add_argument("--window", type=int, default=100, help="hits to rescore (default 100)")
        p.add_argument("--first-stage", default="bm25",
                       help="bm25 (default), multi_match, bm25f or channels")
        p.add_argument("--field-weight", action="append", metavar="FIELD=W",
                       help="BM25F-style weight of a text field (repeat)")
        p.add_argument("--explain", action="store_true", help="add score parts under _esbridge")
        connection_args(p)

    p = sub.add_parser("search", help="search an index and rerank the hits")
    rerank_args(p)
    p.add_argument("--size", type=int, default=10)
    p.add_argument("--filter", help="a filter clause as JSON, e.g. '{\"term\": {\"lang\": \"en\"}}'")
    p.add_argument("--json", action="store_true", help="print the engine-shaped JSON response")
    p.add_argument("--hybrid", action="store_true",
                   help="run the hybrid pipeline (semantic + lexical + keyword, fused); --scorer and "
                        "--window set its lexical strategy")
    p.add_argument("--pipeline-param", action="append", metavar="NAME=VALUE",
                   help="with --hybrid: a pipeline parameter, e.g. w_semantic=2 or fusion=zscore (repeat)")
    p.set_defaults(func=lambda a: _cmd_search(a, connect))

    p = sub.add_parser("rescore", help="rerank an engine search response read from standard input")
    rerank_args(p)
    p.add_argument("--response", help="read the response from this file instead of standard input")
    p.set_defaults(func=lambda a: _cmd_rescore(a, connect))

    p = sub.add_parser("scorers", help="list the scorers")
    p.set_defaults(func=_cmd_scorers)

    p = sub.add_parser("demo", help="index a BEIR collection and show a few reranked queries")
    p.add_argument("--dataset", required=True, help="BEIR-layout folder, e.g. ../shared/data/scifact")
    p.add_argument("--index", help="index name (default esbridge-demo-<folder>)")
    p.add_argument("--queries", type=int, default=5, help="how many queries to run (default 5)")
    p.add_argument("--scorers", default="bm25,bmx,evolved")
    p.add_argument("--window", type=int, default=100)
    p.add_argument("--quiet", action="store_true")
    connection_args(p)
    p.set_defaults(func=lambda a: _cmd_demo(a, connect))


__all__ = ["add_commands", "EsbridgeError"]
