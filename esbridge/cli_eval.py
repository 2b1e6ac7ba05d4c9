"""``esbridge eval`` and ``esbridge tune``: measure scorers on BEIR-layout collections.

Both need the ``eval`` extra (ir-measures, matplotlib, optuna); they are imported
only when a command runs, with an install hint if missing.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from esbridge.errors import ConfigurationError

DEFAULT_SCORERS = "bm25,bmx,evolved"


#: Options whose value is a secret: written to reports as ``***``.
SECRET_OPTIONS = ("--api-key", "--password")


def _command_line() -> str | None:
    """The command as typed, when this process is the ``esbridge`` command, with secrets
    (API keys, passwords, a password inside a URL) replaced by ``***``."""
    prog = Path(sys.argv[0]).name if sys.argv else ""
    if prog in ("esbridge", "cli.py", "__main__.py", "cli_eval.py"):
        return shlex.join(["esbridge", *redact_argv(sys.argv[1:])])
    return None


def redact_argv(argv: list[str]) -> list[str]:
    """``argv`` with the values of secret options and URL passwords replaced by ``***``."""
    from esbridge.engine.client import redact_url

    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append("***")
            hide_next = False
            continue
        opt, eq, _value = arg.partition("=")
        if opt in SECRET_OPTIONS:
            if eq:
                out.append(f"{opt}=***")
            else:
                out.append(arg)
                hide_next = True
            continue
        out.append(redact_url(arg) if "://" in arg else arg)
    return out


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


def pipeline_params(items: Sequence[str]) -> Any:
    """``["w_semantic=2", "fusion=zscore"]`` -> the shipped :class:`PipelineParams` with those overrides."""
    from esbridge.hybrid.pipeline import PipelineParams

    overrides: dict[str, Any] = {}
    for item in items:
        name, eq, raw = item.partition("=")
        if not eq or not name.strip():
            raise ConfigurationError(f"--pipeline-param {item!r} must look like NAME=VALUE, e.g. w_semantic=2")
        try:
            overrides[name.strip()] = json.loads(raw)
        except ValueError:
            overrides[name.strip()] = raw
    try:
        return PipelineParams().with_overrides(**overrides)
    except (TypeError, ValueError) as err:
        raise ConfigurationError(f"--pipeline-param: {err}") from err


def _cmd_eval(args: argparse.Namespace, connect: Callable[[argparse.Namespace], Any]) -> int:
    from esbridge.evaluation.datasets import SplitSpec, load_dataset
    from esbridge.evaluation.report import markdown_table, reference_table, write_report
    from esbridge.evaluation.runner import EvalConfig, parse_param_overrides, run_evaluation

    scorers = _scorers(args.scorers) if args.scorers.strip() else ()
    config = EvalConfig(
        scorers=scorers,
        split=SplitSpec.parse(args.split, seed=args.half_seed),
        window=args.window,
        params=parse_param_overrides(args.param or [], scorers),
        baselines=not args.no_baselines,
        index_prefix=args.index_prefix,
        reindex=args.reindex,
        progress=not args.quiet,
        field_weights=_field_weights(args.field_weight or []),
        pipeline=None if args.no_pipeline else pipeline_params(args.pipeline_param or []),
    )
    dataset = load_dataset(args.dataset, progress=not args.quiet)
    engine = connect(args)
    result = run_evaluation(engine, dataset, config)
    out = Path(args.out) if args.out else Path("eval-results") / f"{dataset.name}-{str(config.split).replace(':', '-')}"
    write_report(result, out, command=_command_line(), json_path=Path(args.json) if args.json else None,
                 plots=not args.no_plots, runs=args.runs, run_depth=args.run_depth)
    print(f"{dataset.name} ({config.split}, {len(result.queries)} queries, window {config.window}, "
          f"{result.engine}):")
    print(markdown_table(result))
    ref = reference_table(dataset.name)
    if ref:
        print("\nReference figures from other systems (not measured here):")
        print(ref)
    print(f"\nwritten to {out}/ in {result.seconds:.1f}s", file=sys.stderr)
    return 0


def _cmd_tune(args: argparse.Namespace, connect: Callable[[argparse.Namespace], Any]) -> int:
    from esbridge.evaluation.datasets import SplitSpec, load_dataset
    from esbridge.evaluation.tune import collect_features, heldout_split, search, space_for, tuning_markdown
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
    from esbridge.scoring import get_scorer

    get_scorer(args.scorer).make_params(**fixed)
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
                                      vector_cache=cache, cache=features_cache))
        other = heldout_split(ds, split)
        if other is not None:
            held.append(collect_features(engine, ds, other, args.scorer, window=args.window,
                                         index_prefix=args.index_prefix, progress=not args.quiet,
                                         vector_cache=cache, cache=features_cache))
    warm = []
    for path in args.warm_start or []:
        try:
            warm.append(json.loads(Path(path).read_text())["best"])
        except (OSError, ValueError, KeyError) as err:
            raise ConfigurationError(f"--warm-start {path!r} is not a JSON written by esbridge tune ({err})") from None
    result = search(args.scorer, train, held, trials=args.trials, seed=args.seed, space=args.space,
                    fixed=fixed, progress=not args.quiet, warm_start=warm)
    command = _command_line()
    report = tuning_markdown(result, command)
    print(report)
    out = Path(args.out) if args.out else Path("eval-results") / f"tune-{args.scorer}"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"tune-{args.scorer}.md").write_text(report)
    summary = json.dumps(result.to_json(), indent=2) + "\n"
    (out / f"tune-{args.scorer}.json").write_text(summary)
    if args.json:
        Path(args.json).write_text(summary)
    with open(out / f"tune-{args.scorer}-trials.tsv", "w") as f:
        names = sorted({k for _, _, v in result.trials for k in v})
        f.write("trial\tobjective\t" + "\t".join(names) + "\n")
        for number, value, values in result.trials:
            f.write(f"{number}\t{value:.6f}\t" + "\t".join(f"{values.get(n, float('nan')):.6g}" for n in names) + "\n")
    if command:
        (out / f"tune-{args.scorer}-command.txt").write_text(command + "\n")
    print(f"written to {out}/ in {result.seconds:.1f}s of search", file=sys.stderr)
    return 0


def add_commands(sub: Any, connection_args: Callable[[argparse.ArgumentParser], None],
                 connect: Callable[[argparse.Namespace], Any]) -> None:
    """Register the evaluation commands on the ``esbridge`` parser."""
    p = sub.add_parser(
        "eval", help="measure scorers and the engine's BM25 on a BEIR-layout collection",
        description="Index a BEIR-layout collection if needed, run its judged queries through the engine's "
                    "BM25 and esbridge's rerankers, and report nDCG@10, R@100, R@1000, MAP, P@5 and "
                    "combined = 0.8·R@100 + 0.2·nDCG@10.",
    )
    p.add_argument("--dataset", required=True,
                   help="a BEIR-layout folder, or a BEIR dataset name (downloaded into the cache)")
    p.add_argument("--scorers", default=DEFAULT_SCORERS,
                   help=f"comma-separated esbridge scorers (default {DEFAULT_SCORERS}; '' for baselines only; "
                        "`esbridge scorers` lists them all)")
    p.add_argument("--split", default="test",
                   help="judgments: qrels/<split>.tsv; SPLIT:tune or SPLIT:heldout for a fixed half")
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
    p.add_argument("--json", help="also write the JSON summary here")
    p.add_argument("--out", help="folder for runs, table, JSON and plots (default eval-results/<dataset>-<split>)")
    p.add_argument("--index-prefix", default="esbridge-eval", help="evaluation index names start with this")
    p.add_argument("--reindex", action="store_true", help="rebuild the evaluation indices")
    p.add_argument("--no-baselines", action="store_true", help="skip the engine's BM25 baselines")
    p.add_argument("--no-plots", action="store_true", help="do not draw PNG plots")
    p.add_argument("--runs", choices=["trec", "gz", "none"], default="trec",
                   help="TREC run files: plain, gzip-compressed, or none (default trec)")
    p.add_argument("--run-depth", type=int, help="hits per query kept in the run files (default: all)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    connection_args(p)
    p.set_defaults(func=lambda a: _cmd_eval(a, connect))

    p = sub.add_parser(
        "tune", help="search a scorer's parameters on training judgments (features fetched once)",
        description="Fetch each training query's candidates and term vectors once, then search the "
                    "scorer's parameters in numpy (optuna TPE, fixed seed) for the best mean combined "
                    "score over the datasets; report training and held-out figures.",
    )
    p.add_argument("--dataset", required=True, action="append",
                   help="a BEIR-layout folder or BEIR name (repeat for several collections)")
    p.add_argument("--split", action="append",
                   help="training judgments, one for all datasets or one per --dataset (default train); "
                        "SPLIT:tune tunes on a fixed half and reports the other half")
    p.add_argument("--scorer", required=True, help="the scorer to tune: evolved, bmx or bm25, the scorers with a search space "
                        "(`esbridge scorers` lists every scorer)")
    p.add_argument("--trials", type=int, default=200, help="parameter settings tried (default 200)")
    p.add_argument("--seed", type=int, default=0, help="sampler seed (default 0)")
    p.add_argument("--space", choices=["open", "all"], default="open",
                   help="open: the values the published formula leaves open; all: also the published ones")
    p.add_argument("--fix", action="append", metavar="NAME=VALUE",
                   help="hold a parameter at a value, or none for a scorer's automatic value (repeat)")
    p.add_argument("--warm-start", action="append", metavar="TUNE_JSON",
                   help="also try the best setting of an earlier `esbridge tune` JSON first (repeat)")
    p.add_argument("--half-seed", type=int, default=2024, help="seed of the fixed halves (default 2024)")
    p.add_argument("--window", type=int, default=1000, help="first-stage hits reranked (default 1000)")
    p.add_argument("--json", help="also write the JSON summary here")
    p.add_argument("--out", help="folder for the report (default eval-results/tune-<scorer>)")
    p.add_argument("--index-prefix", default="esbridge-eval", help="evaluation index names start with this")
    p.add_argument("--no-features-cache", action="store_true",
                   help="fetch the features again instead of reading them from esbridge's cache")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    connection_args(p)
    p.set_defaults(func=lambda a: _cmd_tune(a, connect))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m esbridge.cli_eval eval|tune ...``: the same commands without the rest of the CLI."""
    from esbridge.cli import _connect, _connection_args, run_parsed

    parser = argparse.ArgumentParser(prog="esbridge")
    sub = parser.add_subparsers(dest="command", required=True)
    add_commands(sub, _connection_args, _connect)
    return run_parsed(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
