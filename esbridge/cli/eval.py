"""``esbridge eval``, ``esbridge run`` and ``esbridge tune``: measure scorers on BEIR-layout
collections or on an index with the user's topics and judgments, and write run files.

They need the ``eval`` extra (ir-measures, matplotlib, optuna); they are imported
only when a command runs, with an install hint if missing.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import shlex
import sys
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

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
from esbridge.engine.connection import split_urls
from esbridge.errors import ConfigurationError
from esbridge.semantic.spec import VECTOR_PLACES

DEFAULT_SCORERS = "bm25,bmx,evolved"


#: Words that mark an option (by its name or its parsed value's name) as holding a secret
#: (``--api-key``, a password, a token): reports show its value as ``***``.
SECRET_OPTION_WORDS = ("api_key", "password", "passwd", "secret", "token", "credential")
#: Environment variables whose value is a secret.
SECRET_ENV = ("ESBRIDGE_PASSWORD", "ESBRIDGE_API_KEY")

_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)([^/?#@:]*):([^/?#]*)@")


def secret_values(args: argparse.Namespace) -> list[str]:
    """The secrets the command was given: the values of its secret options, of
    :data:`SECRET_ENV` and the passwords of URLs (longest first); an API key in its other
    encodings too (``id:key``, base64, the key alone)."""
    found = [value for name, value in vars(args).items() if isinstance(value, str) and value and _secret_name(name)]
    found += [value for value in (os.environ.get(name) for name in SECRET_ENV) if value]
    for url in _given_urls(args):
        password = urlsplit(url).password
        if password:
            found += [password, unquote(password)]
    more = []
    for value in found:
        plain = value
        if ":" not in value:
            try:
                plain = base64.b64decode(value, validate=True).decode("utf-8")
            except (ValueError, UnicodeDecodeError):
                continue
        if ":" in plain:
            more += [plain, plain.split(":", 1)[1], base64.b64encode(plain.encode()).decode()]
    return sorted({v for v in found + more if v}, key=len, reverse=True)


def _given_urls(args: argparse.Namespace) -> tuple[str, ...]:
    """Every engine URL the command was given: ``--url`` (repeated, or separated by commas) and
    ``ESBRIDGE_URL``."""
    given = getattr(args, "url", None) or []
    return split_urls([given] if isinstance(given, str) else list(given)) + split_urls(
        os.environ.get("ESBRIDGE_URL") or "")


def _secret_name(name: str) -> bool:
    return any(word in name.lower().lstrip("-").replace("-", "_") for word in SECRET_OPTION_WORDS)


def redact_argv(argv: Sequence[str], secrets: Sequence[str] = ()) -> list[str]:
    """``argv`` with ``***`` for the value of every secret option (each time it is given), every
    password inside a URL and every occurrence of ``secrets``."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append("***")
            hide_next = False
            continue
        opt, eq, _value = arg.partition("=")
        if opt.startswith("--") and _secret_name(opt):
            out.append(f"{opt}=***" if eq else arg)
            hide_next = not eq
            continue
        arg = _URL_USERINFO.sub(r"\1\2:***@", arg)
        for secret in secrets:
            arg = arg.replace(secret, "***")
        out.append(arg)
    return out


def command_line(args: argparse.Namespace) -> str | None:
    """The command as given (``esbridge ...``), for reports, with its secrets replaced by ``***``:
    those of the parsed values (:func:`secret_values`), whichever way they were spelled;
    ``None`` when the arguments did not come from the command line."""
    argv = getattr(args, "command_argv", None)
    if argv is None:
        return None
    return " ".join(["esbridge", *(_portable(a) for a in redact_argv(argv, secret_values(args)))])


def _portable(arg: str) -> str:
    """``arg`` quoted for a shell, a path under ``$ESBRIDGE_DATA`` written as ``$ESBRIDGE_DATA/...``
    so that a report names no folder of the machine it was made on."""
    root = os.environ.get("ESBRIDGE_DATA", "").rstrip("/")
    option, value = "", arg
    if arg.startswith("--") and "=" in arg:
        option, value = arg.split("=", 1)
        option += "="
    if not root or not (value == root or value.startswith(root + "/")):
        return shlex.quote(arg)
    tail = value[len(root):]
    quoted = shlex.quote(tail) if tail else ""
    # the variable is quoted too where the rest needs quotes, so the shell joins them into one word
    return option + ("$ESBRIDGE_DATA" if quoted == tail else '"$ESBRIDGE_DATA"') + quoted


def names_credentials(args: argparse.Namespace) -> bool:
    """Whether the command was given credentials (a user, an API key or a password, in an option,
    the environment or a URL): its reports are then readable by their owner only."""
    return bool(secret_values(args) or getattr(args, "username", None) or os.environ.get("ESBRIDGE_USERNAME")
                or any(urlsplit(url).username for url in _given_urls(args)))


def _scorers(text: str) -> tuple[str, ...]:
    names = tuple(s.strip() for s in text.split(",") if s.strip())
    if not names:
        raise ConfigurationError("--scorers is empty; give e.g. bm25,bmx,evolved")
    return names


def _field_weights(items: Sequence[str]) -> dict[str, float] | None:
    out = {}
    for item in items:
        name, eq, raw = item.partition("=")
        try:
            out[name.strip()] = float(raw)
        except ValueError:
            raise ConfigurationError(f"--field-weight {item!r} must look like FIELD=WEIGHT, e.g. title=2") from None
        if not eq or not name.strip():
            raise ConfigurationError(f"--field-weight {item!r} must look like FIELD=WEIGHT, e.g. title=2")
    return out or None


def _eval_config(args: argparse.Namespace, split: Any) -> Any:
    from esbridge.evaluation.runner import EvalConfig, parse_param_overrides

    scorers = _scorers(args.scorers) if args.scorers.strip() else ()
    return EvalConfig(
        scorers=scorers,
        split=split,
        window=args.window,
        params=parse_param_overrides(args.param or [], scorers),
        baselines=not args.no_baselines,
        index_prefix=args.index_prefix or "esbridge-eval",
        reindex=args.reindex,
        progress=not args.quiet,
        field_weights=_field_weights(args.field_weight or []),
        pipeline=None if args.no_pipeline else pipeline_params([f"model={json.dumps(model_option(args))}",
                                                                 *(args.pipeline_param or [])], args.pipeline),
        augmentation=augmentation_spec(args),
        fields=fields_option(getattr(args, "fields", None)),
        engine_hybrid_depth=args.engine_hybrid_depth,
        vectors=args.vectors,
        vector_quantization=None if args.vector_quantization == "none" else args.vector_quantization,
        vector_oversample=args.vector_oversample,
    )


def _check_eval_mode(args: argparse.Namespace) -> None:
    """``--dataset`` or ``--index`` with ``--topics`` and ``--qrels``, and only the options of that mode."""
    if bool(args.dataset) == bool(args.index):
        raise ConfigurationError("give either --dataset (a BEIR-layout collection) or --index with --topics and "
                                 "--qrels (an existing index and your own topics and judgments)")
    if args.index:
        missing = [opt for opt, value in (("--topics", args.topics), ("--qrels", args.qrels)) if not value]
        if missing:
            raise ConfigurationError(f"--index needs {' and '.join(missing)}: the topics to run and the judgments "
                                     "to measure them with")
        wrong = [opt for opt, value in (("--split", args.split), ("--index-prefix", args.index_prefix),
                                        ("--reindex", args.reindex),
                                        ("--vectors", args.vectors != "auto")) if value]
        if wrong:
            raise ConfigurationError(f"{', '.join(wrong)} belong to --dataset; with --index the index is used as it is "
                                     "and --qrels holds the judgments")
    else:
        wrong = [opt for opt, value in (("--topics", args.topics), ("--qrels", args.qrels),
                                        ("--narrative", args.narrative), ("--fields", args.fields)) if value]
        if wrong:
            raise ConfigurationError(f"{', '.join(wrong)} belong to --index; a --dataset brings its own queries and "
                                     "judgments (qrels/<split>.tsv)")


def _cmd_eval(args: argparse.Namespace, connect: Callable[[argparse.Namespace], Any]) -> int:
    from esbridge.evaluation.datasets import SplitSpec, load_dataset
    from esbridge.evaluation.report import (
        markdown_table,
        marks_legend,
        reference_table,
        significance_tables,
        write_report,
    )
    from esbridge.evaluation.runner import run_evaluation, run_index_evaluation
    from esbridge.evaluation.trecfiles import read_qrels, read_run, read_topics

    _check_eval_mode(args)
    if args.no_pipeline and args.pipeline != "default":
        raise ConfigurationError("--pipeline chooses the hybrid pipeline's parameters; --no-pipeline leaves it out")
    # every input file is read before the engine is reached: a malformed line fails at once
    runs = [read_run(path) for path in args.run or []]
    if args.index:
        topics = read_topics(args.topics, args.topic_field)
        qrels = read_qrels(args.qrels)
        config = _eval_config(args, SplitSpec("test"))
        engine = connect(args)
        result = run_index_evaluation(engine, args.index, topics, qrels, config, topic_field=args.topic_field,
                                      narrative=args.narrative, runs=runs, topics_file=Path(args.topics),
                                      qrels_file=Path(args.qrels))
        default_out = Path("eval-results") / f"{args.index}-{Path(args.qrels).name.split('.')[0]}"
        where = f"judgments {Path(args.qrels).name}"
    else:
        config = _eval_config(args, SplitSpec.parse(args.split or "test", seed=args.half_seed))
        dataset = load_dataset(args.dataset, progress=not args.quiet)
        engine = connect(args)
        result = run_evaluation(engine, dataset, config, runs=runs)
        default_out = Path("eval-results") / f"{dataset.name}-{str(config.split).replace(':', '-')}"
        where = str(config.split)
    for note in result.notes:
        print(f"esbridge: note: {note}", file=sys.stderr)
    out = Path(args.out) if args.out else default_out
    write_report(result, out, command=command_line(args), json_path=Path(args.json) if args.json else None,
                 plots=not args.no_plots, runs=args.runs, run_depth=args.run_depth, private=names_credentials(args))
    print(f"{result.dataset} ({where}, {len(result.queries)} queries, window {config.window}, {result.engine}):")
    print(markdown_table(result))
    legend = marks_legend(result)
    if legend:
        print(legend)
    tables = significance_tables(result)
    if tables:
        print(f"\n{tables}")
    ref = reference_table(result.dataset) if not args.index else ""
    if ref:
        print("\nReference figures from other systems (not measured here):")
        print(ref)
    print(f"\nwritten to {out}/ in {result.seconds:.1f}s", file=sys.stderr)
    return 0


#: ``esbridge run --system``: what ranks the topics.
RUN_SYSTEMS = ("rerank", "hybrid", "engine-bm25")


def _cmd_run(args: argparse.Namespace, connect: Callable[[argparse.Namespace], Any]) -> int:
    from esbridge.errors import IndexNotFoundError
    from esbridge.evaluation.batch import resume_point, write_run
    from esbridge.evaluation.runner import BASELINE_INDEX, HYBRID, EvalConfig, SystemSet
    from esbridge.evaluation.trecfiles import read_topics

    if args.window < 1 or args.depth < 1:
        raise ConfigurationError("--window and --depth must be >= 1")
    if args.system != "rerank" and (args.param or args.field_weight):
        raise ConfigurationError("--param and --field-weight set the reranker (--system rerank); the hybrid pipeline "
                                 "takes --pipeline-param")
    if args.system != "hybrid" and (args.pipeline_param or args.narrative or args.model or args.pipeline != "default"):
        raise ConfigurationError("--pipeline, --pipeline-param, --model and --narrative belong to --system hybrid")
    spec = augmentation_spec(args)
    if spec is not None and args.system != "rerank":
        raise ConfigurationError("--augmentations and --augmenter apply to the reranker (--system rerank)")
    topics = read_topics(args.topics, args.topic_field)
    progress = not args.quiet
    fields = fields_option(args.fields)
    if args.system == "hybrid":
        from esbridge.scoring import get_scorer

        get_scorer(args.scorer)  # an unknown --scorer is named as such, not as a pipeline parameter
        name = HYBRID
        config = EvalConfig(scorers=(), window=args.window, baselines=False, progress=progress,
                            pipeline=pipeline_params([*pipeline_items(args), f"model={json.dumps(model_option(args))}",
                                                      *(args.pipeline_param or [])], args.pipeline),
                            pipeline_strategies=False, fields=fields)
    elif args.system == "engine-bm25":
        name = BASELINE_INDEX
        config = EvalConfig(scorers=(), window=args.window, baselines=True, progress=progress, fields=fields)
    else:
        name = args.scorer
        config = EvalConfig(scorers=(args.scorer,), window=args.window, baselines=False, progress=progress,
                            params={args.scorer: scorer_params(args.scorer, args.param)},
                            field_weights=_field_weights(args.field_weight or []), augmentation=spec, fields=fields)
        if spec is not None:
            unused = spec.unused_keys([(t.id, t.text(args.topic_field)) for t in topics])
            if unused:
                print(f"esbridge: note: {len(unused)} entries of {spec.source} match no topic id or text, not used: "
                      f"{', '.join(unused[:10])}", file=sys.stderr)
    tag = args.run_tag or f"esbridge-{name}"
    output = Path(args.output)
    resume_point(output, [t.id for t in topics], tag, args.depth)  # a file this run cannot continue fails now
    engine = connect(args)
    if not engine.index_exists(args.index):
        raise IndexNotFoundError(f"index {args.index!r} does not exist at {engine.options.display_url}; create it "
                                 "with `esbridge index`", index=args.index)
    with SystemSet(engine, args.index, config, baseline=name if name == BASELINE_INDEX else None,
                   baseline_description="the engine's own ranking") as systems:
        run = systems.systems[name]

        def rank(topic: Any) -> tuple[list[str], list[float]]:
            systems.run_query(topic.id, topic.text(args.topic_field),
                              narrative=(topic.narrative or None) if args.narrative else None)
            return run.ranking.pop(topic.id), run.scores.pop(topic.id)

        report = write_run(output, topics, rank, tag=tag, depth=args.depth, progress=progress)
    print(report.summary())
    return 0


def _cmd_tune(args: argparse.Namespace, connect: Callable[[argparse.Namespace], Any]) -> int:
    from esbridge.evaluation.datasets import SplitSpec, load_dataset
    from esbridge.evaluation.tune import (
        collect_features,
        heldout_split,
        params_with,
        search,
        space_for,
        tuning_markdown,
    )
    from esbridge.features.cache import TermVectorCache

    datasets = args.dataset
    splits = args.split or ["train"]
    if len(splits) == 1:
        splits = splits * len(datasets)
    if len(splits) != len(datasets):
        raise ConfigurationError(
            f"give one --split for all datasets or one per --dataset (got {len(splits)} for {len(datasets)})"
        )
    fixed: dict[str, float | None] = {}
    for item in args.fix or []:
        name, eq, raw = item.partition("=")
        if not eq:
            raise ConfigurationError(f"--fix {item!r} must look like NAME=VALUE")
        if raw.strip().lower() == "none":
            fixed[name.strip()] = None  # e.g. BMX's alpha=none: the paper's dynamic value
            continue
        try:
            fixed[name.strip()] = float(raw)
        except ValueError:
            raise ConfigurationError(f"--fix {item!r}: {raw!r} is not a number (or none)") from None
    space_for(args.scorer, args.space, fixed)  # validate before any engine work
    params_with(args.scorer, fixed)
    augmentation = augmentation_spec(args)
    engine = connect(args)
    from esbridge.evaluation.download import datasets_dir

    features_cache = None if args.no_features_cache else datasets_dir().parent / "features"
    train, held = [], []
    for spec, split_text in zip(datasets, splits):
        ds = load_dataset(spec, progress=not args.quiet)
        split = SplitSpec.parse(split_text, seed=args.half_seed)
        cache = TermVectorCache(max_entries=max(50_000, 2 * ds.corpus_size()))
        train.append(collect_features(engine, ds, split, args.scorer, window=args.window,
                                      index_prefix=args.index_prefix, progress=not args.quiet,
                                      vector_cache=cache, cache=features_cache, augmentation=augmentation))
        other = heldout_split(ds, split)
        if other is not None:
            held.append(collect_features(engine, ds, other, args.scorer, window=args.window,
                                         index_prefix=args.index_prefix, progress=not args.quiet,
                                         vector_cache=cache, cache=features_cache, augmentation=augmentation))
    warm = []
    for path in args.warm_start or []:
        try:
            warm.append(json.loads(Path(path).read_text())["best"])
        except (OSError, ValueError, KeyError) as err:
            raise ConfigurationError(f"--warm-start {path!r} is not a JSON written by esbridge tune ({err})") from None
    result = search(args.scorer, train, held, trials=args.trials, seed=args.seed, space=args.space,
                    fixed=fixed, progress=not args.quiet, warm_start=warm)
    from esbridge.evaluation.report import write_text

    command, private = command_line(args), names_credentials(args)
    report = tuning_markdown(result, command)
    if augmentation is not None:
        report += (f"\nEvery query was scored with {augmentation.label()} (w_0 · score(query) + Σ w_i · "
                   "score(variant_i) over the union of their candidates).\n")
    print(report)
    out = Path(args.out) if args.out else Path("eval-results") / f"tune-{args.scorer}"
    out.mkdir(parents=True, exist_ok=True)
    write_text(out / f"tune-{args.scorer}.md", report, private=private)
    from esbridge.evaluation.runner import jsonable

    summary = json.dumps({**result.to_json(),
                          **({"augmentation": jsonable(augmentation.describe())} if augmentation is not None else {})},
                         indent=2) + "\n"
    write_text(out / f"tune-{args.scorer}.json", summary, private=private)
    if args.json:
        write_text(Path(args.json), summary, private=private)
    with open(out / f"tune-{args.scorer}-trials.tsv", "w") as f:
        names = sorted({k for _, _, v in result.trials for k in v})
        f.write("trial\tobjective\t" + "\t".join(names) + "\n")
        for number, value, values in result.trials:
            f.write(f"{number}\t{value:.6f}\t" + "\t".join(f"{values.get(n, float('nan')):.6g}" for n in names) + "\n")
    if command:
        write_text(out / f"tune-{args.scorer}-command.txt", command + "\n", private=private)
    print(f"written to {out}/ in {result.seconds:.1f}s of search", file=sys.stderr)
    return 0


def add_commands(sub: Any, connection_args: Callable[[argparse.ArgumentParser], None],
                 connect: Callable[[argparse.Namespace], Any]) -> None:
    """Register the evaluation commands on the ``esbridge`` parser."""
    p = sub.add_parser(
        "eval", help="measure scorers and the engine's BM25 on a BEIR-layout collection or on your own index",
        description="Run judged queries through the engine's BM25, esbridge's rerankers and the hybrid pipeline "
                    "(and measure run files made elsewhere beside them), and report nDCG@10, R@100, R@1000, MAP, "
                    "P@5 and combined = 0.8·R@100 + 0.2·nDCG@10, with paired significance tests against the "
                    "engine's BM25. Either --dataset: a BEIR-layout collection, indexed if needed; or --index "
                    "with --topics and --qrels: an existing index (created by esbridge index, or your own) with "
                    "your own topics and judgments.",
    )
    p.add_argument("--dataset",
                   help="a BEIR-layout folder, or a BEIR dataset name (downloaded into the cache)")
    p.add_argument("--index", help="instead of --dataset: an existing index, created by `esbridge index` or one of "
                                   "yours (scorers that read only the base channel work on any index with text "
                                   "fields)")
    p.add_argument("--topics", help="with --index: the topics, as BEIR queries.jsonl (_id, text), a TREC topics "
                                    "file (<top> <num> <title> <desc> <narr>) or id<TAB>text lines")
    p.add_argument("--qrels", help="with --index: the judgments, TREC qrels (qid 0 docid relevance) or a BEIR "
                                   "qrels .tsv")
    p.add_argument("--topic-field", choices=["title", "desc", "title+desc"], default="title",
                   help="with --index: what of a TREC topic is the query text (default title)")
    p.add_argument("--narrative", action="store_true",
                   help="with --index: the hybrid pipeline's keyword strategy reads each topic's narrative "
                        "instead of pseudo-relevance feedback")
    p.add_argument("--run", action="append", metavar="RUN_FILE",
                   help="a TREC run file (qid Q0 docid rank score tag) made elsewhere, measured beside esbridge's "
                        "systems and tested against the baselines (repeat)")
    p.add_argument("--scorers", default=DEFAULT_SCORERS,
                   help=f"comma-separated esbridge scorers (default {DEFAULT_SCORERS}; '' for baselines only; "
                        "`esbridge scorers` lists them all)")
    p.add_argument("--split",
                   help="with --dataset: judgments qrels/<split>.tsv (default test); SPLIT:tune or SPLIT:heldout "
                        "for a fixed half")
    p.add_argument("--half-seed", type=int, default=2024, help="seed of the fixed halves (default 2024)")
    p.add_argument("--window", type=int, default=1000, help="first-stage hits reranked (default 1000)")
    p.add_argument("--param", action="append", metavar="SCORER.NAME=VALUE",
                   help="override a scorer parameter, e.g. evolved.w_bi=0.2 (repeat)")
    p.add_argument("--field-weight", action="append", metavar="FIELD=WEIGHT",
                   help="BM25F-style weight of a text field for the rerankers, e.g. title=2 (repeat)")
    p.add_argument("--no-pipeline", action="store_true",
                   help="leave out the hybrid pipeline's systems (hybrid, semantic, keyword)")
    p.add_argument("--pipeline-param", action="append", metavar="NAME=VALUE",
                   help="override a pipeline parameter, e.g. w_semantic=2, fusion=zscore, keyword_fb_docs=5 "
                        "(repeat; see esbridge.hybrid.PipelineParams)")
    p.add_argument("--engine-hybrid-depth", type=int, default=100, metavar="K",
                   help="with the pipeline: also measure the engines' own hybrid search (rows engine-hybrid-minmax "
                        "and engine-hybrid-rrf: the engine's BM25 and a kNN over one vector per document with the "
                        "pipeline's model, each list's top K, fused as OpenSearch and as Elasticsearch fuse them; "
                        "default 100; 0 leaves them out)")
    pipeline_arg(p)
    model_args(p, when="for the hybrid pipeline's semantic strategy: ")
    p.add_argument("--vectors", choices=VECTOR_PLACES, default="auto",
                   help="with --dataset and the pipeline: where the evaluation index keeps its passage vectors: auto "
                        "(the default) in the engine wherever it can search them (approximate kNN), else on disk "
                        "(exact search); engine; disk")
    p.add_argument("--vector-quantization", choices=("none", "int8", "bbq"), default="none",
                   help="with the vectors in the engine: int8 has the engine quantize the vectors it searches "
                        "(Elasticsearch's int8_hnsw, OpenSearch's Lucene scalar quantizer), bbq to one bit a "
                        "dimension (Elasticsearch's bbq_hnsw); default none")
    p.add_argument("--vector-oversample", type=float, default=None, metavar="X",
                   help="with --vector-quantization on Elasticsearch 8.19+: gather X times k nearest by the "
                        "quantized vectors and score them again by the floats (1 to 10; 0: never); default the "
                        "engine's")
    p.add_argument("--json", help="also write the JSON summary here")
    p.add_argument("--output", "--out", dest="out", metavar="DIR",
                   help="folder for runs, table, JSON and plots (default eval-results/<dataset>-<split>, "
                        "or eval-results/<index>-<qrels name>)")
    p.add_argument("--index-prefix", help="with --dataset: evaluation index names start with this "
                                          "(default esbridge-eval)")
    p.add_argument("--reindex", action="store_true", help="with --dataset: rebuild the evaluation indices")
    p.add_argument("--no-baselines", action="store_true", help="skip the engine's BM25 baselines")
    p.add_argument("--no-plots", action="store_true", help="do not draw PNG plots")
    p.add_argument("--runs", choices=["trec", "gz", "none"], default="trec",
                   help="TREC run files: plain, gzip-compressed, or none (default trec)")
    p.add_argument("--run-depth", type=int, help="hits per query kept in the run files (default: all)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    fields_args(p)
    augmentation_args(p, keyed_by="query ids (or query texts)")
    connection_args(p)
    p.set_defaults(func=lambda a: _cmd_eval(a, connect))

    p = sub.add_parser(
        "run", help="rank every topic of a file into a TREC run file (resumable)",
        description="Rank every topic of a topics file with one system over an existing index and write the "
                    "top --depth of each to a TREC run file (qid Q0 docid rank score tag). Each topic's lines "
                    "are written and flushed to disk at once; run the same command again after an "
                    "interruption and the topics already in the file are kept, the rest ranked, and the file "
                    "ends up as an uninterrupted run would have written it.",
    )
    p.add_argument("--index", required=True, help="an index created by `esbridge index`, or one of yours (scorers "
                                                  "that read only the base channel work on any index with text "
                                                  "fields)")
    p.add_argument("--topics", required=True,
                   help="BEIR queries.jsonl (_id, text), a TREC topics file (<top> <num> <title> <desc> <narr>) "
                        "or id<TAB>text lines")
    p.add_argument("--output", "--out", required=True, metavar="FILE",
                   help="the TREC run file to write (or to continue)")
    p.add_argument("--system", choices=RUN_SYSTEMS, default="rerank",
                   help="rerank: --scorer over the engine's BM25 top --window (default); hybrid: the hybrid "
                        "pipeline (--scorer and --window set its lexical strategy); engine-bm25: the engine's "
                        "own BM25 ranking")
    p.add_argument("--scorer", default="evolved",
                   help="esbridge's scorer (default evolved; `esbridge scorers` lists them)")
    p.add_argument("--param", action="append", metavar="NAME=VALUE",
                   help="a scorer parameter (repeat), e.g. --param k1=1.2")
    p.add_argument("--field-weight", action="append", metavar="FIELD=WEIGHT",
                   help="BM25F-style weight of a text field for the reranker (repeat)")
    p.add_argument("--pipeline-param", action="append", metavar="NAME=VALUE",
                   help="with --system hybrid: a pipeline parameter, e.g. w_semantic=2 (repeat)")
    pipeline_arg(p, when="with --system hybrid: ")
    model_args(p, when="with --system hybrid: ")
    p.add_argument("--narrative", action="store_true",
                   help="with --system hybrid: the keyword strategy reads each topic's narrative (TREC topics) "
                        "instead of pseudo-relevance feedback")
    p.add_argument("--topic-field", choices=["title", "desc", "title+desc"], default="title",
                   help="what of a TREC topic is the query text (default title)")
    p.add_argument("--window", type=int, default=1000, help="first-stage hits reranked (default 1000)")
    p.add_argument("--depth", type=int, default=1000, help="hits per topic written (default 1000)")
    p.add_argument("--run-tag", help="the run's tag, the last column (default esbridge-<scorer>, esbridge-hybrid "
                                     "or esbridge-engine-bm25)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    fields_args(p)
    augmentation_args(p, keyed_by="topic ids (or query texts)")
    connection_args(p)
    p.set_defaults(func=lambda a: _cmd_run(a, connect))

    from esbridge.spaces import describe_spaces

    p = sub.add_parser(
        "tune", help="search a scorer's parameters on training judgments (features fetched once)",
        description=textwrap.fill(
            "Fetch each training query's candidates and term vectors once, then search the scorer's "
            "parameters in numpy (optuna TPE, fixed seed) for the best mean combined score over the "
            "datasets; report training and held-out figures. Every scorer has a search space (listed "
            "below); a BM25F scorer's field weights (and per-field b) are searched per text field of "
            "the index.", 79),
        epilog=describe_spaces(79),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--dataset", required=True, action="append",
                   help="a BEIR-layout folder or BEIR name (repeat for several collections)")
    p.add_argument("--split", action="append",
                   help="training judgments, one for all datasets or one per --dataset (default train); "
                        "SPLIT:tune tunes on a fixed half and reports the other half")
    p.add_argument("--scorer", required=True,
                   help="the scorer to tune, any of `esbridge scorers` (its search space is listed below)")
    p.add_argument("--trials", type=int, default=200, help="parameter settings tried (default 200)")
    p.add_argument("--seed", type=int, default=0, help="sampler seed (default 0)")
    p.add_argument("--space", choices=["open", "all"], default="open",
                   help="open: the values the published formula leaves open (all of them for arch_a, whose "
                        "every value is published); all: also the published ones")
    p.add_argument("--fix", action="append", metavar="NAME=VALUE",
                   help="hold a parameter at a value, or none for a scorer's automatic value; "
                        "field_weights.title=2 holds one field's value (repeat)")
    p.add_argument("--warm-start", action="append", metavar="TUNE_JSON",
                   help="also try the best setting of an earlier `esbridge tune` JSON first (repeat)")
    p.add_argument("--half-seed", type=int, default=2024, help="seed of the fixed halves (default 2024)")
    p.add_argument("--window", type=int, default=1000, help="first-stage hits reranked (default 1000)")
    p.add_argument("--json", help="also write the JSON summary here")
    p.add_argument("--output", "--out", dest="out", metavar="DIR",
                   help="folder for the report (default eval-results/tune-<scorer>)")
    p.add_argument("--index-prefix", default="esbridge-eval", help="evaluation index names start with this")
    p.add_argument("--no-features-cache", action="store_true",
                   help="fetch the features again instead of reading them from esbridge's cache")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    augmentation_args(p, keyed_by="query ids (or query texts)")
    connection_args(p)
    p.set_defaults(func=lambda a: _cmd_tune(a, connect))
