"""The configuration of ``esbridge serve``: the indices whose searches are reranked, and how.

It is a JSON file (:func:`load_config`)::

    {"indices": {"scifact": {"scorer": "evolved", "window": 100}}}
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from esbridge.errors import ConfigurationError

if TYPE_CHECKING:
    from esbridge.hybrid.pipeline import PipelineParams

__all__ = ["IndexConfig", "ServeConfig", "load_config", "parse_config", "MODES", "INDEX_KEYS"]

#: How a reranked index's searches find their candidates: ``rescore`` (the default) sends the
#: request's own search to the engine and reranks its top ``window`` (:meth:`AsyncReranker.rescore`),
#: so the answer is the engine's with its top hits reordered; ``search`` runs esbridge's pipeline (its
#: own first stage from the query text, :meth:`AsyncReranker.search`) for the searches it can take
#: (a query text, ``size``, ``from``, ``_source``), the others as ``rescore`` does.
MODES = ("rescore", "search")
#: The keys of an index's configuration.
INDEX_KEYS = ("scorer", "window", "mode", "first_stage", "fields", "field_weights", "params", "pipeline",
              "pipeline_params")


@dataclass(frozen=True)
class IndexConfig:
    """How the searches of one index are reranked (the arguments of :class:`AsyncReranker`)."""

    scorer: str = "evolved"
    window: int = 100
    mode: str = "rescore"
    first_stage: str = "bm25"
    fields: tuple[str, ...] | None = None
    field_weights: tuple[tuple[str, float], ...] | None = None
    params: tuple[tuple[str, Any], ...] | None = None
    #: the hybrid pipeline's parameters where the index's searches run it (esbridge.hybrid)
    pipeline: PipelineParams | None = None


@dataclass(frozen=True)
class ServeConfig:
    """The indices whose searches are reranked, by name."""

    indices: Mapping[str, IndexConfig] = field(default_factory=dict)


def _check_index(where: str, name: str, raw: Any) -> IndexConfig:
    from esbridge.rerank.first_stage import parse_first_stage
    from esbridge.scoring import get_scorer

    at = f"{where}: indices.{name}"
    if not isinstance(raw, Mapping):
        raise ConfigurationError(f"{at} must be an object of settings ({', '.join(INDEX_KEYS)}), "
                                 f"got {type(raw).__name__}")
    unknown = [k for k in raw if k not in INDEX_KEYS]
    if unknown:
        raise ConfigurationError(f"{at}.{unknown[0]} is not a setting; the settings are {', '.join(INDEX_KEYS)}")
    cfg = IndexConfig()
    if "scorer" in raw:
        if not isinstance(raw["scorer"], str):
            raise ConfigurationError(f"{at}.scorer must be a scorer's name, got {raw['scorer']!r}")
        try:
            get_scorer(raw["scorer"])
        except ConfigurationError as err:
            raise ConfigurationError(f"{at}.scorer: {err}") from None
        cfg = replace(cfg, scorer=raw["scorer"])
    if "window" in raw:
        w = raw["window"]
        if isinstance(w, bool) or not isinstance(w, int) or w < 1:
            raise ConfigurationError(f"{at}.window must be a whole number >= 1, got {w!r}")
        cfg = replace(cfg, window=w)
    if "mode" in raw:
        if raw["mode"] not in MODES:
            raise ConfigurationError(f"{at}.mode must be one of {', '.join(MODES)}, got {raw['mode']!r}")
        cfg = replace(cfg, mode=raw["mode"])
    if "first_stage" in raw:
        fs = raw["first_stage"]
        if not isinstance(fs, str):
            raise ConfigurationError(f"{at}.first_stage must be a string, got {fs!r}")
        try:
            parse_first_stage(fs)
        except ConfigurationError as err:
            raise ConfigurationError(f"{at}.first_stage: {err}") from None
        cfg = replace(cfg, first_stage=fs)
    if "fields" in raw and raw["fields"] is not None:
        fl = raw["fields"]
        if isinstance(fl, str):
            fl = [fl]
        if not isinstance(fl, list) or not fl or not all(isinstance(f, str) and f for f in fl):
            raise ConfigurationError(f"{at}.fields must be a list of field names, got {raw['fields']!r}")
        cfg = replace(cfg, fields=tuple(fl))
    if "field_weights" in raw and raw["field_weights"] is not None:
        fw = raw["field_weights"]
        if not isinstance(fw, Mapping) or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
                for v in fw.values()):
            raise ConfigurationError(f"{at}.field_weights must map field names to numbers >= 0, got {fw!r}")
        cfg = replace(cfg, field_weights=tuple((str(k), float(v)) for k, v in fw.items()))
    if "params" in raw and raw["params"] is not None:
        ps = raw["params"]
        if not isinstance(ps, Mapping):
            raise ConfigurationError(f"{at}.params must be an object of the scorer's parameters, got {ps!r}")
        try:
            get_scorer(cfg.scorer).params_type(**ps)
        except TypeError as err:
            raise ConfigurationError(f"{at}.params: not parameters of scorer {cfg.scorer!r} ({err})") from None
        except ValueError as err:
            raise ConfigurationError(f"{at}.params: {err}") from None
        cfg = replace(cfg, params=tuple(ps.items()))
    if raw.get("pipeline", False) not in (True, False):
        raise ConfigurationError(f"{at}.pipeline must be true or false, got {raw['pipeline']!r}")
    pp = raw.get("pipeline_params")
    if pp is not None and not raw.get("pipeline"):
        raise ConfigurationError(f"{at}.pipeline_params is given but pipeline is not true")
    if raw.get("pipeline"):
        if raw.get("mode", "search") != "search":
            raise ConfigurationError(f"{at}: the hybrid pipeline (pipeline true) finds its own candidates; "
                                     "it cannot be in mode rescore")
        if pp is not None and not isinstance(pp, Mapping):
            raise ConfigurationError(f"{at}.pipeline_params must be an object of the pipeline's parameters, "
                                     f"got {pp!r}")
        try:
            pipeline = _pipeline_params(cfg.scorer, raw.get("window"), pp or {})
        except (ConfigurationError, TypeError, ValueError) as err:
            raise ConfigurationError(f"{at}.pipeline_params: {err}") from None
        cfg = replace(cfg, pipeline=pipeline, mode="search")
    return cfg


def _pipeline_params(scorer: str, window: int | None, overrides: Mapping[str, Any]) -> PipelineParams:
    """The shipped pipeline parameters with the index's scorer (and window, if given) and ``overrides``."""
    from esbridge.hybrid.pipeline import PipelineParams

    own: dict[str, Any] = {"scorer": scorer, **({"window": window} if window is not None else {})}
    return PipelineParams().with_overrides(**{**own, **overrides})


def parse_config(raw: Any, where: str = "the configuration") -> ServeConfig:
    """A :class:`ServeConfig` from the parsed JSON ``raw``; ``where`` (the file) starts every error.

    Raises:
        ConfigurationError: naming the file and the key that is wrong.
    """
    if not isinstance(raw, Mapping):
        raise ConfigurationError(f"{where} must be a JSON object with the key \"indices\", got {type(raw).__name__}")
    unknown = [k for k in raw if k != "indices"]
    if unknown:
        raise ConfigurationError(f"{where}: {unknown[0]!r} is not a setting; the only top-level key is \"indices\"")
    indices = raw.get("indices", {})
    if not isinstance(indices, Mapping):
        raise ConfigurationError(f"{where}: indices must be an object (index name → settings), "
                                 f"got {type(indices).__name__}")
    for name in indices:
        if not name or any(c in name for c in ",*/ ") or name.startswith("_"):
            raise ConfigurationError(f"{where}: indices.{name!r} is not one index name (no commas, wildcards, "
                                     "slashes or spaces, no leading '_')")
    return ServeConfig({str(name): _check_index(where, str(name), cfg) for name, cfg in indices.items()})


def load_config(path: str | Path) -> ServeConfig:
    """The configuration in the JSON file ``path`` (:func:`parse_config`).

    Raises:
        ConfigurationError: the file cannot be read, is not JSON, or a key is wrong (named).
    """
    where = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigurationError(f"cannot read the configuration {where}: {err.strerror or err}") from None
    except UnicodeDecodeError:
        raise ConfigurationError(f"the configuration {where} is not UTF-8 text") from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as err:
        raise ConfigurationError(f"the configuration {where} is not valid JSON: {err}") from None
    return parse_config(raw, where)
