"""The options several ``esbridge`` commands share, and the exit codes.

The engine connection (``--url``, credentials, TLS), scorer parameters (``--param``), text fields
(``--fields``), the embedding model (``--model``), weighted query augmentation
(``--augmentations``, ``--augmenter``), the hybrid pipeline's parameters (``--pipeline-param``),
each with the function that checks what was given; and the exit code of each kind of error.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from esbridge.errors import (
    ConfigurationError,
    EngineError,
    EngineUnavailableError,
    EsbridgeError,
    IndexNotFoundError,
    IngestError,
    ProvisioningError,
    UnsupportedEngineError,
)
from esbridge.jsoninput import parse_json

# ---- the engine connection ----------------------------------------------------------------

#: The local node distributions (``esbridge.nodes.artifacts.RUNNERS``).
DISTRIBUTIONS = ["opensearch", "opensearch-knn", "elasticsearch", "elasticsearch8"]
#: The one started where none is named (``esbridge.nodes.artifacts.DEFAULT_DISTRIBUTION``): it searches vectors.
DEFAULT_DISTRIBUTION = "opensearch-knn"


def connection_args(p: argparse.ArgumentParser) -> None:
    """The options that say which engine a command reaches and how (``--url``, credentials, TLS, timeouts)."""
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
                        "one if none runs (default: any running esbridge node, else a new opensearch-knn node: "
                        "OpenSearch with its k-NN plugin, which keeps and searches document vectors)")
    g.add_argument("--username", help="basic-auth user (password from $ESBRIDGE_PASSWORD)")
    g.add_argument("--api-key", help="API key, id:key or base64 (default: $ESBRIDGE_API_KEY)")
    g.add_argument("--ca-certs", help="CA bundle to verify the engine's TLS certificate")
    g.add_argument("--no-verify-certs", action="store_true", help="do not verify TLS certificates")
    g.add_argument("--timeout", type=float, default=60.0, help="seconds per request (default 60)")
    g.add_argument("--max-retries", type=int, default=5,
                   help="retries of a request the engine refused with 429/502/503/504 or that could not "
                        "reach it, with doubling back-off (default 5; 0 = fail at once)")


def connect_engine(args: argparse.Namespace) -> Any:
    """The :class:`~esbridge.engine.client.Engine` the connection options name: ``--url`` or ``$ESBRIDGE_URL``,
    else esbridge's running local node (started when none runs)."""
    from esbridge.engine.client import Engine

    return Engine.connect(connection_options(args))


def connection_options(args: argparse.Namespace) -> Any:
    """The :class:`~esbridge.engine.connection.ConnectionOptions` the connection options name (see
    :func:`connect_engine`), without connecting."""
    import os

    from esbridge.nodes.provision import provision

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


# ---- scoring and ranking ------------------------------------------------------------------

def scorer_params(name: str, pairs: list[str] | None) -> Any:
    """The parameters of the scorer ``name`` with the ``--param NAME=VALUE`` overrides."""
    from esbridge.scoring import get_scorer

    scorer = get_scorer(name)
    overrides: dict[str, Any] = {}
    for pair in pairs or []:
        if "=" not in pair:
            raise ConfigurationError(f"--param {pair!r} must be NAME=VALUE")
        key, raw = pair.split("=", 1)
        try:
            value: Any = parse_json(raw, f"--param {pair!r}")
        except json.JSONDecodeError:
            value = raw
        overrides[key.strip()] = value
    try:
        return scorer.make_params(**overrides)
    except (TypeError, ValueError) as err:
        raise ConfigurationError(f"--param: {err}") from err  # the message names the scorer


def fields_option(values: list[str] | None) -> tuple[str, ...] | None:
    """``--fields a,b --fields c`` -> ``("a", "b", "c")`` (``None`` without the option)."""
    if not values:
        return None
    names = tuple(n.strip() for v in values for n in v.split(",") if n.strip())
    if not names:
        raise ConfigurationError("--fields names no field; give e.g. --fields title,text")
    return names


def fields_args(p: argparse.ArgumentParser) -> None:
    """``--fields``: the text fields of a plain index (or some of an esbridge index's)."""
    p.add_argument("--fields", action="append", metavar="FIELD[,FIELD]",
                   help="the text fields to score (comma-separated or repeated; default: every text field of an "
                        "esbridge index; of an index of yours without esbridge's channels, the text fields its "
                        "mapping has, which must share one analyzer)")


def model_args(p: argparse.ArgumentParser, *, when: str = "") -> None:
    """``--model``: the sentence-embedding model of the semantic strategy."""
    from esbridge.semantic.models import DEFAULT_MODEL, MODELS

    p.add_argument("--model", metavar="NAME",
                   help=f"{when}the sentence-embedding model: {', '.join(MODELS)} (default {DEFAULT_MODEL}; "
                        "downloaded once from Maven Central into $ESBRIDGE_HOME/models)")


def model_option(args: argparse.Namespace) -> str:
    """``--model``, checked: an unknown name is an error listing the known ones."""
    from esbridge.semantic.models import DEFAULT_MODEL, spec_for

    return spec_for(args.model or DEFAULT_MODEL).name


def augmentation_args(p: argparse.ArgumentParser, *, keyed_by: str) -> None:
    """``--augmentations``, ``--augmenter``, ``--augmenter-param`` and ``--original-weight``."""
    g = p.add_argument_group("weighted query augmentation")
    g.add_argument("--augmentations", metavar="FILE",
                   help=f"weighted variants of the queries: a JSON object (or one object per line) mapping {keyed_by} "
                        "to a list of [variant, weight] pairs; each variant is scored with the scorer over the "
                        "union of the query's and the variants' candidates and added with its weight")
    g.add_argument("--augmenter", choices=["prf"],
                   help="make the variants with a shipped augmenter: prf, pseudo-relevance feedback from the "
                        "first stage's top documents (after the file's variants, if both are given)")
    g.add_argument("--augmenter-param", action="append", metavar="NAME=VALUE",
                   help="a parameter of the augmenter, e.g. fb_docs=10, fb_terms=10, weight=0.3 (repeat)")
    g.add_argument("--original-weight", type=float, default=1.0,
                   help="with --augmentations or --augmenter: the original query's weight (default 1)")


def augmentation_spec(args: argparse.Namespace) -> Any:
    """The :class:`~esbridge.augment.AugmentationSpec` of the options, or ``None`` without them
    (a malformed file fails here, before the engine is reached)."""
    from esbridge.augment import AugmentationSpec

    path, name, params = args.augmentations, args.augmenter, tuple(args.augmenter_param or ())
    if path is None and name is None:
        if params:
            raise ConfigurationError("--augmenter-param needs --augmenter")
        if args.original_weight != 1.0:
            raise ConfigurationError("--original-weight needs --augmentations or --augmenter")
        return None
    kwargs: dict[str, Any] = {"augmenter": name, "augmenter_params": params, "original_weight": args.original_weight}
    if path is None:
        return AugmentationSpec(**kwargs)
    return AugmentationSpec.from_file(path, **kwargs)


#: ``--pipeline``: the hybrid pipeline's named parameter sets (:data:`esbridge.hybrid.pipeline.PRESETS`).
PIPELINES = ("default", "seed004", "ensemble")


def pipeline_arg(p: argparse.ArgumentParser, *, when: str = "") -> None:
    """``--pipeline``: which named parameter set the hybrid pipeline starts from."""
    p.add_argument("--pipeline", choices=PIPELINES, default="default",
                   help=f"{when}the pipeline's parameters: default (the shipped ones) or seed004 (its source, CAIR "
                        "2021, as written: BM25 k1=1.5 b=0.75, the narrative's TopicRank keyphrases, raw scores "
                        "summed, 500 documents; its scorer and window are the preset's, --pipeline-param changes "
                        "them) or ensemble (the default with whole-document lists of its model and of "
                        "e5-small-v2-q and all-minilm-l6-v2-q, weighed by the index; three more embeddings of "
                        "every document)")


def pipeline_items(args: argparse.Namespace) -> list[str]:
    """The pipeline parameters a command's ``--scorer`` and ``--window`` set: those of the default
    pipeline only (a preset keeps its own)."""
    if getattr(args, "pipeline", "default") != "default":
        return []
    return [f"scorer={json.dumps(args.scorer)}", f"window={args.window}"]


def pipeline_params(items: Sequence[str], preset: str = "default") -> Any:
    """``["w_semantic=2", "fusion=zscore"]`` -> the :class:`PipelineParams` named ``preset`` (the
    shipped ones by default) with those overrides."""
    from esbridge.hybrid.pipeline import PipelineParams

    overrides: dict[str, Any] = {}
    for item in items:
        name, eq, raw = item.partition("=")
        if not eq or not name.strip():
            raise ConfigurationError(f"--pipeline-param {item!r} must look like NAME=VALUE, e.g. w_semantic=2")
        try:
            overrides[name.strip()] = parse_json(raw, f"--pipeline-param {item!r}")
        except json.JSONDecodeError:
            overrides[name.strip()] = raw
    try:
        return PipelineParams.preset(preset).with_overrides(**overrides)
    except (TypeError, ValueError) as err:
        raise ConfigurationError(f"--pipeline-param: {err}") from err


# ---- exit codes -----------------------------------------------------------------------------

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
