"""``esbridge search``, ``esbridge rescore`` and ``esbridge scorers``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from esbridge.cli.options import (
    augmentation_args,
    augmentation_spec,
    fields_args,
    fields_option,
    model_args,
    model_option,
    pipeline_arg,
    pipeline_items,
    pipeline_params,
    scorer_params,
)
from esbridge.errors import ConfigurationError, EngineError, EsbridgeError, IndexNotFoundError
from esbridge.jsoninput import parse_json


def _reranker(args: argparse.Namespace, connect: Callable[[argparse.Namespace], Any]) -> Any:
    from esbridge.rerank import Reranker

    # the options are checked before the engine is reached
    params = scorer_params(args.scorer, args.param)
    weights = {}
    for pair in args.field_weight or []:
        name, _, value = pair.partition("=")
        try:
            weights[name] = float(value)
        except ValueError:
            raise ConfigurationError(f"--field-weight {pair!r} must be FIELD=NUMBER") from None
    engine = connect(args)
    if not engine.index_exists(args.index):
        raise IndexNotFoundError(
            f"index {args.index!r} does not exist at {engine.options.display_url}; create it with `esbridge index`",
            index=args.index,
        )
    return Reranker(engine, args.index, scorer=args.scorer, params=params,
                    window=args.window, first_stage=getattr(args, "first_stage", "bm25"),
                    field_weights=weights or None, fields=fields_option(args.fields),
                    feature_store=store_option(args), progress=not getattr(args, "quiet", False),
                    features=getattr(args, "features", "auto"))


def store_args(p: argparse.ArgumentParser) -> None:
    """``--store DIR`` and ``--no-store``: the on-disk feature store of a command."""
    p.add_argument("--store", metavar="DIR",
                   help="the on-disk feature store's folder (default: $ESBRIDGE_HOME/features or "
                        "~/.cache/esbridge/features); term vectors read from the engine are kept there")
    p.add_argument("--no-store", action="store_true",
                   help="keep term vectors in memory only (nothing written to disk)")
    p.add_argument("--features", choices=["auto", "plugin", "termvectors"], default="auto",
                   help="where the candidates' features come from: auto (the default: inside the engine by "
                        "esbridge's plugin where every node runs it, else _mtermvectors), plugin (an error "
                        "where a node lacks it) or termvectors")


def store_option(args: argparse.Namespace) -> Any:
    """The :class:`~esbridge.features.diskstore.DiskVectorStore` ``--store``/``--no-store`` ask for."""
    from esbridge.features.diskstore import DiskVectorStore

    return None if args.no_store else DiskVectorStore(args.store)


def _print_json(response: dict[str, Any]) -> None:
    json.dump(response, sys.stdout, ensure_ascii=False)
    sys.stdout.write("\n")


def _title(hit: dict[str, Any], width: int) -> str:
    src = hit.get("_source") or {}
    # an index of yours may name its fields otherwise: then its first text
    first = next((v for v in src.values() if isinstance(v, str) and v.strip()), "")
    return str(src.get("title") or src.get("text") or first)[:width].replace("\n", " ")


def _num(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return str(value) if isinstance(value, int) else f"{value:.4g}"


def _explain_lines(parts: Any, what: str) -> list[str]:
    """A hit's score parts, one line per channel (``base.B_cov`` goes to the ``base`` line)."""
    if not isinstance(parts, dict) or not parts:
        return []
    groups: dict[str, list[str]] = {}
    for key, value in parts.items():
        group, _, name = str(key).rpartition(".")
        groups.setdefault(group, []).append(f"{name} {_num(value)}")
    lines = []
    for group, items in groups.items():
        label = f"{what}, {group}" if group else what
        lines.append(f"{'':>6}{label}: " + "  ".join(items))
    return lines


def _print_hits(response: dict[str, Any], *, scorer: str, first_stage: str, explain: bool,
                notes: list[str]) -> None:
    """The reranked hits as a table: esbridge's score, the engine's first-stage score and rank."""
    hits = response["hits"]["hits"]
    terms = (response.get("_esbridge") or {}).get("terms")
    if explain and isinstance(terms, dict):
        shown = {ch: " ".join(f'"{t}"' if " " in str(t) else str(t) for t in ts) for ch, ts in terms.items()}
        print("query terms, by channel: " + "; ".join(f"{ch}: {ts}" for ch, ts in shown.items()))
    if not hits:
        print("no hits")
        return
    print(f"{'rank':>4}  {'esbridge':>9}  {'engine':>9}  {'was':>4}  {'id':<14} title")
    for rank, h in enumerate(hits, start=1):
        meta = h.get("_esbridge") or {}
        first = meta.get("first_stage_score")
        first_s = f"{first:9.3f}" if isinstance(first, (int, float)) else f"{'-':>9}"
        was = meta.get("first_stage_rank")
        print(f"{rank:>4}  {h['_score']:9.3f}  {first_s}  {was if was is not None else '-':>4}  "
              f"{str(h['_id']):<14} {_title(h, 70)}")
        if explain:
            for line in _explain_lines(meta.get("parts"), f"{scorer} parts"):
                print(line)
    print(f"esbridge: the {scorer} score esbridge ranks by; engine: the engine's score in the first stage "
          f"({first_stage}) that found the candidates; was: the hit's rank in that first stage.")
    variants = (response.get("_esbridge") or {}).get("augmentations")
    if variants is not None:
        w0 = (response.get("_esbridge") or {}).get("original_weight", 1.0)
        listed = "; ".join(f"{v.get('text', '')!r} × {_num(v['weight'])}" for v in variants) or "none"
        print(f"weighted query augmentation: esbridge = {_num(w0)} × the query's score + each variant's score × its "
              f"weight; variants: {listed}. The candidates are the union of the query's and the variants' first "
              "stages; engine and was are the query's own, '-' where only a variant found the hit.")
    for note in notes:
        print(note)


def _print_hybrid(response: dict[str, Any], explain: bool) -> None:
    hits = response["hits"]["hits"]
    if not hits:
        print("no hits")
        return
    short = {"semantic": "sem", "lexical": "lex", "keyword": "kw", "semantic_feedback": "sem+fb"}
    print(f"{'rank':>4}  {'fused':>8}  {'rank in each strategy':<32} {'id':<14} title")
    for rank, h in enumerate(hits, start=1):
        found = h["_esbridge"]["strategies"]
        where = " ".join(f"{short.get(k, k)} {v['rank']}" for k, v in found.items())
        print(f"{rank:>4}  {h['_score']:8.4f}  {where:<32} {str(h['_id']):<14} {_title(h, 60)}")
        if explain:
            for line in _explain_lines(h["_esbridge"].get("parts"), "contribution to the fused score"):
                print(line)
    print("fused: the hybrid pipeline's score, each strategy's list normalised and weighted; "
          f"rank in each strategy: {', '.join(f'{v} = {k}' for k, v in short.items())}.")
    if explain:
        print(fusion_summary(response.get("_esbridge", {}).get("pipeline") or {}))


def fusion_summary(pipeline: dict[str, Any]) -> str:
    """One line: the fusion's weights and, when they were measured on the index, from what."""
    weights = ", ".join(f"{k} {v:.3g}" for k, v in (pipeline.get("weights") or {}).items())
    line = f"weights: {weights} ({pipeline.get('fusion', '?')} fusion"
    cal = pipeline.get("calibration")
    if not cal:
        return line + ", fixed)"
    eff = ", ".join(f"{k} {v:.3f}" for k, v in cal["effectiveness"].items())
    return (line + f"), measured on the index: mean reciprocal rank of {cal['queries']} known-item pseudo-queries "
            f"({eff}; {cal['documents']} documents, {cal['measured_at']}), to the power {cal['sharpness']:g}.")


def _index_bm25(engine: Any, index: str) -> tuple[float, float]:
    """``(k1, b)`` of the index's default BM25 similarity (the engines' 1.2 and 0.75 unless set)."""
    from esbridge.engine.calls import path_segment

    k1, b = 1.2, 0.75
    try:
        resp = engine.request("GET", f"/{path_segment(index, patterns=True)}/_settings/index.similarity.default.*",
                              context=f"reading the similarity of {index!r}")
    except EsbridgeError:
        return k1, b
    for spec in (resp or {}).values():
        default = ((spec.get("settings") or {}).get("index") or {}).get("similarity", {}).get("default", {})
        if str(default.get("type", "BM25")).upper() == "BM25":
            try:
                k1, b = float(default.get("k1", k1)), float(default.get("b", b))
            except (TypeError, ValueError):
                pass
    return k1, b


def _bm25_note(rr: Any) -> str:
    """One line on why esbridge's bm25 and the engine's first-stage BM25 differ, and how to match them
    where a setting can."""
    from esbridge.rerank.candidates import fields_to_read
    from esbridge.scoring import get_scorer

    k1, b = _index_bm25(rr.engine, rr.index)
    params = rr.params
    plus = rr.engine.info.bm25_k1_plus_one
    # every parameter that must differ from the defaults or from what was given, so the line works as it stands
    same = f"--param k1={_num(k1)} --param b={_num(b)} --param lucene_norms=true" + (
        f" --param k1_plus_one={'true' if plus else 'false'}"
        if plus != type(params)().k1_plus_one or params.k1_plus_one != plus else "")
    layout = rr.layout
    # the first stage has one term clause per field it scores and query term: the sum of their BM25 scores
    scored = layout.indexed(layout.combined, "base")
    read = fields_to_read(get_scorer(rr.scorer), layout, rr.field_weights)
    if len(scored) > 1:
        return (f"esbridge's bm25 cannot reproduce the engine's score here, whatever its parameters: the engine adds "
                f"up the BM25 of each of {', '.join(scored)} (each field with its own statistics and length norms), "
                "while esbridge's bm25 scores them as one field (term frequencies and lengths added up, statistics "
                f"merged as in combined_fields); with one field in --fields, {same} reproduces the engine's score.")
    if read != (layout.combined,):
        return (f"esbridge's bm25 cannot reproduce the engine's score here, whatever its parameters: with field "
                f"weights it scores {', '.join(read)} BM25F-style (weighted term frequencies and lengths added up), "
                f"while the engine scores {scored[0]}; without --field-weight, {same} reproduces the engine's score.")
    differs = []
    if not params.lucene_norms:
        differs.append("exact document lengths where the engine rounds them to one-byte norms")
    if (params.k1, params.b) != (k1, b):
        differs.append(f"k1={_num(params.k1)} b={_num(params.b)} where the index has k1={_num(k1)} b={_num(b)}")
    if params.k1_plus_one != plus:
        differs.append("a (k1 + 1) factor " + ("the engine applies" if plus else "the engine does not apply"))
    if not differs:
        return ("esbridge's bm25 here uses the engine's one-byte length norms and the index's k1 and b, so it "
                "reproduces the engine's score.")
    return (f"esbridge's bm25 differs from the engine's on purpose: {'; '.join(differs)} "
            f"({same} reproduces the engine's score).")


def _variants(spec: Any, rr: Any, query: str) -> Any:
    """The query's variants from the augmentation options (looked up by the query text)."""
    if spec is None:
        return None
    got = spec.bind(rr)(None, query)
    if got is None:
        raise ConfigurationError(f"{spec.source} has no entry for the query text {query!r}; its entries are keyed by "
                                 "query text here (ids are for eval, run and tune)")
    return got


_FILTER_EXAMPLE = '{"term": {"lang": "en"}}'


def filter_option(text: str | None) -> Any:
    """The query clause (or list of clauses) of ``--filter``; ``None`` without the option."""
    if text is None:
        return None
    try:
        value = parse_json(text, "--filter")
    except json.JSONDecodeError as err:
        raise ConfigurationError(f"--filter is not valid JSON ({err}); give a query clause such as "
                                 f"'{_FILTER_EXAMPLE}'") from None
    clauses = value if isinstance(value, list) else [value]
    if not clauses or not all(isinstance(c, dict) and c for c in clauses):
        raise ConfigurationError(f"--filter must be a query clause, a JSON object such as '{_FILTER_EXAMPLE}' (or a "
                                 f"list of them), got {text[:80]!r}")
    return value


@contextmanager
def _filter_refusals(filt: Any) -> Iterator[None]:
    """An engine's refusal of the ``--filter`` clause becomes an error that names the option."""
    try:
        yield
    except EngineError as err:
        # the clause is the only ``filter`` of the bool query esbridge sends; the engines name that field
        if filt is not None and err.status == 400 and "[filter]" in str(err):
            raise ConfigurationError(f"--filter is not a query clause the engine accepts: {err}") from err
        raise


def _cmd_search(args: argparse.Namespace, connect: Callable[[argparse.Namespace], Any]) -> int:
    filt = filter_option(args.filter)
    spec = augmentation_spec(args)
    if args.hybrid and spec is not None:
        raise ConfigurationError("--augmentations and --augmenter apply to the reranker, not to --hybrid")
    if args.model and not args.hybrid:
        raise ConfigurationError("--model chooses the hybrid pipeline's embedding model: add --hybrid")
    if args.pipeline != "default" and not args.hybrid:
        raise ConfigurationError("--pipeline chooses the hybrid pipeline's parameters: add --hybrid")
    if args.hybrid:
        from esbridge.hybrid import HybridSearcher
        from esbridge.scoring import get_scorer

        get_scorer(args.scorer)  # an unknown --scorer is named as such, before the engine is reached
        params = pipeline_params([*pipeline_items(args), f"model={json.dumps(model_option(args))}",
                                  *(args.pipeline_param or [])], args.pipeline)
        engine = connect(args)
        if not engine.index_exists(args.index):
            raise IndexNotFoundError(
                f"index {args.index!r} does not exist at {engine.options.display_url}; create it with `esbridge index`",
                index=args.index)
        with HybridSearcher(engine, args.index, params, fields=fields_option(args.fields),
                            progress=not getattr(args, "quiet", False)) as hs, \
                _filter_refusals(filt):
            response = hs.search(args.query, size=args.size, filter=filt, explain=args.explain)
        if args.json:
            _print_json(response)
        else:
            _print_hybrid(response, args.explain)
        return 0
    with _reranker(args, connect) as rr:
        variants = _variants(spec, rr, args.query)
        with _filter_refusals(filt):
            response = rr.search(args.query, size=args.size, filter=filt, explain=args.explain,
                                 augmentations=variants,
                                 original_weight=spec.original_weight if spec is not None else 1.0)
        if args.json:
            _print_json(response)
            return 0
        notes = []
        if rr.layout.plain:
            many = len(rr.layout.fields) > 1
            notes.append(f"{args.index!r} is a plain index: the base channel is its text field{'s' if many else ''} "
                         f"{', '.join(rr.layout.fields)} as analysed by {rr.layout.search_analyzer!r}"
                         + (" (term frequencies added up, statistics merged as in combined_fields)" if many else "")
                         + f"; `esbridge index --add-channels --index {args.index}` adds the other channels.")
        if args.scorer == "bm25" and args.first_stage == "bm25":
            notes.append(_bm25_note(rr))
        _print_hits(response, scorer=args.scorer, first_stage=args.first_stage, explain=args.explain, notes=notes)
    return 0


_STDIN_HINT = ("esbridge rescore reads an engine search response (JSON) from a file or from standard input, "
               "e.g. `curl -s \"$ESBRIDGE_URL/INDEX/_search?size=100\" -H 'Content-Type: application/json' "
               "-d @query.json | esbridge rescore INDEX \"QUERY\" -`")


def _cmd_rescore(args: argparse.Namespace, connect: Callable[[argparse.Namespace], Any]) -> int:
    source = args.response if args.response is not None else args.response_option
    if source in (None, "-"):
        if sys.stdin is None or sys.stdin.isatty():
            if source is None:
                raise ConfigurationError(f"no response given and standard input is a terminal. {_STDIN_HINT}")
            print("esbridge: reading the response from standard input (end it with Ctrl-D)", file=sys.stderr)
        where = "the response on standard input"
        stream = getattr(sys.stdin, "buffer", None)
        data: bytes | str = (stream.read() if stream is not None else sys.stdin.read()) if sys.stdin is not None else ""
    else:
        where = f"the response file {source!r}"
        try:
            data = Path(source).read_bytes()
        except OSError as err:
            raise ConfigurationError(f"{where} cannot be read: {err.strerror or err}") from None
    try:
        raw = data.decode("utf-8-sig") if isinstance(data, bytes) else data
    except UnicodeDecodeError as err:
        raise ConfigurationError(f"{where} is not UTF-8 text (byte {err.start} is {data[err.start:err.start + 1]!r}): "
                                 "give an engine search response (JSON)") from None
    if not raw.strip():
        raise ConfigurationError(f"{where} is empty; give an engine search response (JSON). {_STDIN_HINT}")
    try:
        response = parse_json(raw, where)
    except json.JSONDecodeError as err:
        raise ConfigurationError(f"{where} is not valid JSON: {err}") from None
    spec = augmentation_spec(args)
    with _reranker(args, connect) as rr:
        variants = _variants(spec, rr, args.query)
        out = rr.rescore(response, args.query, window=args.window, explain=args.explain,
                         augmentations=variants, original_weight=spec.original_weight if spec is not None else 1.0)
    _print_json(out)
    return 0


def _cmd_scorers(args: argparse.Namespace) -> int:
    from esbridge.scoring import available_scorers, get_scorer

    for name in available_scorers():
        sc = get_scorer(name)
        print(f"{name:<18} channels={','.join(sc.channels):<26} {sc.description}")
    return 0


def add_commands(sub: Any, connection_args: Callable[[argparse.ArgumentParser], None],
                 connect: Callable[[argparse.Namespace], Any]) -> None:
    """Register the search commands on the ``esbridge`` parser."""

    def rerank_args(p: argparse.ArgumentParser, explain: str) -> None:
        p.add_argument("index", help="an index created by esbridge (esbridge index), or one of yours: scorers "
                                     "that read only the base channel work on any index with text fields")
        p.add_argument("query", help="the query text")
        p.add_argument("--scorer", default="evolved",
                       help="esbridge's scorer (default evolved; `esbridge scorers` lists them)")
        p.add_argument("--param", action="append", metavar="NAME=VALUE",
                       help="a scorer parameter (repeat), e.g. --param k1=1.2")
        p.add_argument("--window", type=int, default=100, help="hits to rescore (default 100)")
        p.add_argument("--field-weight", action="append", metavar="FIELD=W",
                       help="BM25F-style weight of a text field (repeat)")
        p.add_argument("--explain", action="store_true", help=explain)
        store_args(p)
        fields_args(p)
        augmentation_args(p, keyed_by="the query text")
        connection_args(p)

    p = sub.add_parser("search", help="search an index and rerank the hits",
                       description="Find candidates with the engine (the first stage), rerank the top --window "
                                   "with an esbridge scorer and print them: esbridge's score, the engine's "
                                   "first-stage score and rank, the title.")
    rerank_args(p, "show each hit's score parts (and the query's analysed terms); with --json, under "
                   "_esbridge.parts")
    p.add_argument("--first-stage", default="bm25",
                   help="how the engine finds the candidates: bm25 (default; the engine's BM25 over the "
                        "combined field), multi_match, bm25f (per field) or channels (every channel)")
    p.add_argument("--size", type=int, default=10, help="hits to print (default 10)")
    p.add_argument("--filter", help="a filter clause as JSON, e.g. '{\"term\": {\"lang\": \"en\"}}'")
    p.add_argument("--json", action="store_true", help="print the engine-shaped JSON response")
    p.add_argument("--hybrid", action="store_true",
                   help="run the hybrid pipeline (semantic + lexical + keyword, fused); --scorer and "
                        "--window set its lexical strategy")
    p.add_argument("--pipeline-param", action="append", metavar="NAME=VALUE",
                   help="with --hybrid: a pipeline parameter, e.g. w_semantic=2 or fusion=zscore (repeat)")
    pipeline_arg(p, when="with --hybrid: ")
    model_args(p, when="with --hybrid: ")
    p.set_defaults(func=lambda a: _cmd_search(a, connect))

    p = sub.add_parser("rescore", help="rerank an engine search response read from a file or standard input",
                       description="Rerank the top --window hits of an engine search response (the JSON "
                                   "body a _search request returned) for the query text, and print that "
                                   "response with esbridge's scores as JSON; hits below the window keep their "
                                   "order below it. The candidates are the response's own, so rescore has no "
                                   "first stage to choose (search has --first-stage).")
    rerank_args(p, "add each hit's score parts under _esbridge.parts")
    p.add_argument("response", nargs="?", metavar="RESPONSE",
                   help="the response: a JSON file, or - for standard input (default: standard input when "
                        "it is not a terminal)")
    p.add_argument("--response", dest="response_option", metavar="FILE",
                   help="the same as the RESPONSE argument")
    p.set_defaults(func=lambda a: _cmd_rescore(a, connect))

    p = sub.add_parser("scorers", help="list the scorers with the channels they read and what they are")
    p.set_defaults(func=_cmd_scorers)


__all__ = ["add_commands", "EsbridgeError"]
