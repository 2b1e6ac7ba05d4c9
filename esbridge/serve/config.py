"""The configuration of ``esbridge serve``: the indices whose searches are reranked, and how.

It is a JSON file (:func:`load_config`)::

    {"indices": {"scifact": {"scorer": "evolved", "window": 100}}}
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
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
    at = f"{where}: indices.{name}"
    if not isinstance(raw, Mapping):
        raise ConfigurationError(f"{at} must be an object of settings ({', '.join(INDEX_KEYS)}), "
                                 f"got {type(raw).__name__}")
    unknown = [k for k in raw if k not in INDEX_KEYS]
    if unknown:
        raise ConfigurationError(f"{at}.{unknown[0]} is not a setting; the settings are {', '.join(INDEX_KEYS)}")
    cfg = IndexConfig()
    for key, check in _SETTINGS.items():  # in order: params are checked against the scorer set before
        if key in raw and (raw[key] is not None or key in _NOT_NULL):
            cfg = check(f"{at}.{key}", raw[key], cfg)
    return _check_pipeline(at, raw, cfg)


def _check_scorer(at: str, value: Any, cfg: IndexConfig) -> IndexConfig:
    from esbridge.scoring import get_scorer

    if not isinstance(value, str):
        raise ConfigurationError(f"{at} must be a scorer's name, got {value!r}")
    try:
        get_scorer(value)
    except ConfigurationError as err:
        raise ConfigurationError(f"{at}: {err}") from None
    return replace(cfg, scorer=value)


def _check_window(at: str, value: Any, cfg: IndexConfig) -> IndexConfig:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"{at} must be a whole number >= 1, got {value!r}")
    return replace(cfg, window=value)


def _check_mode(at: str, value: Any, cfg: IndexConfig) -> IndexConfig:
    if value not in MODES:
        raise ConfigurationError(f"{at} must be one of {', '.join(MODES)}, got {value!r}")
    return replace(cfg, mode=value)


def _check_first_stage(at: str, value: Any, cfg: IndexConfig) -> IndexConfig:
    from esbridge.rerank.first_stage import parse_first_stage

    if not isinstance(value, str):
        raise ConfigurationError(f"{at} must be a string, got {value!r}")
    try:
        parse_first_stage(value)
    except ConfigurationError as err:
        raise ConfigurationError(f"{at}: {err}") from None
    return replace(cfg, first_stage=value)


def _check_fields(at: str, value: Any, cfg: IndexConfig) -> IndexConfig:
    fields = [value] if isinstance(value, str) else value
    if not isinstance(fields, list) or not fields or not all(isinstance(f, str) and f for f in fields):
        raise ConfigurationError(f"{at} must be a list of field names, got {value!r}")
    return replace(cfg, fields=tuple(fields))


def _check_field_weights(at: str, value: Any, cfg: IndexConfig) -> IndexConfig:
    if not isinstance(value, Mapping) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
            for v in value.values()):
        raise ConfigurationError(f"{at} must map field names to numbers >= 0, got {value!r}")
    return replace(cfg, field_weights=tuple((str(k), float(v)) for k, v in value.items()))


def _check_params(at: str, value: Any, cfg: IndexConfig) -> IndexConfig:
    from esbridge.scoring import get_scorer

    if not isinstance(value, Mapping):
        raise ConfigurationError(f"{at} must be an object of the scorer's parameters, got {value!r}")
    try:
        get_scorer(cfg.scorer).params_type(**value)
    except TypeError as err:
        raise ConfigurationError(f"{at}: not parameters of scorer {cfg.scorer!r} ({err})") from None
    except ValueError as err:
        raise ConfigurationError(f"{at}: {err}") from None
    return replace(cfg, params=tuple(value.items()))


#: The settings of an index checked one by one, in this order; each gives the configuration with it set.
_SETTINGS: dict[str, Callable[[str, Any, IndexConfig], IndexConfig]] = {
    "scorer": _check_scorer, "window": _check_window, "mode": _check_mode, "first_stage": _check_first_stage,
    "fields": _check_fields, "field_weights": _check_field_weights, "params": _check_params,
}
#: The settings for which ``null`` is a wrong value, not "the default".
_NOT_NULL = frozenset({"scorer", "window", "mode", "first_stage"})


def _check_pipeline(at: str, raw: Mapping[str, Any], cfg: IndexConfig) -> IndexConfig:
    """``cfg`` with the hybrid pipeline ``raw`` asks for (``pipeline``, ``pipeline_params``), if it does."""
    if raw.get("pipeline", False) not in (True, False):
        raise ConfigurationError(f"{at}.pipeline must be true or false, got {raw['pipeline']!r}")
    pp = raw.get("pipeline_params")
    if pp is not None and not raw.get("pipeline"):
        raise ConfigurationError(f"{at}.pipeline_params is given but pipeline is not true")
    if not raw.get("pipeline"):
        return cfg
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
    return replace(cfg, pipeline=pipeline, mode="search")


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
