"""What esbridge reads about an index from the engine, each fact read one way.

* identity: the concrete indices a name (an index, an alias, a pattern) stands for and their
  UUIDs (:func:`uuids_plan`, one ``_settings/index.uuid`` request), and from them a key that
  changes when the index is recreated (:func:`index_key_plan`) or the one index a name must
  stand for (:func:`concrete_index`);
* state: document counts and write totals of the primaries, with the UUIDs, from one
  ``_stats`` request (:func:`identity_plan`): any write changes the state;
* settings: the refresh interval (:func:`refresh_interval_plan`), ``index.max_result_window``
  (:func:`max_result_window_plan`) and the default similarity (:func:`similarity_plan`).

The layout (channels and fields, from the mapping) is :func:`esbridge.index.open_layout`'s.
Each fact comes as a plan (:mod:`esbridge.engine.plan`), run by the synchronous and the
asynchronous engine alike, and the most used also as a function of an :class:`Engine`.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from esbridge.engine.calls import path_segment
from esbridge.engine.client import Engine
from esbridge.engine.plan import Call, Plan, run
from esbridge.errors import ConfigurationError, EngineError

__all__ = [
    "concrete_index",
    "identity_plan",
    "index_identity",
    "index_key",
    "index_key_plan",
    "index_similarity",
    "index_state",
    "index_uuids",
    "max_result_window_plan",
    "parse_time_value",
    "refresh_interval_plan",
    "similarity_plan",
    "uuids_plan",
]

_SAFE_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")


def uuids_plan(index: str) -> Plan[dict[str, str]]:
    """``{concrete index: UUID}`` of the indices ``index`` names."""
    resp = yield Call("GET", f"/{path_segment(index, patterns=True)}/_settings/index.uuid",
                      context=f"reading the UUID of {index!r}")
    return {str(name): str(spec["settings"]["index"]["uuid"]) for name, spec in (resp or {}).items()}


def index_uuids(engine: Engine, index: str) -> dict[str, str]:
    """:func:`uuids_plan` against ``engine``."""
    return run(uuids_plan(index), engine)


def index_key_plan(index: str) -> Plan[str]:
    """The UUID of the index ``index`` names (a hash of the sorted UUIDs if an alias or pattern
    names several): a key, safe as a file name, that changes when the index is recreated."""
    uuids = sorted((yield from uuids_plan(index)).values())
    if len(uuids) == 1 and _SAFE_NAME.match(uuids[0]) and not uuids[0].startswith("."):
        return uuids[0]
    return "multi-" + hashlib.sha256("\n".join(uuids).encode("utf-8")).hexdigest()[:32]


def index_key(engine: Engine, index: str) -> str:
    """:func:`index_key_plan` against ``engine``."""
    return run(index_key_plan(index), engine)


def concrete_index(engine: Engine, index: str, *, purpose: str) -> tuple[str, str]:
    """``(concrete index name, UUID)`` of ``index`` (an index or an alias of one index).

    Raises:
        ConfigurationError: ``index`` names several indices (the error says ``purpose`` needs one).
    """
    uuids = index_uuids(engine, index)
    if len(uuids) != 1:
        raise ConfigurationError(
            f"{index!r} names {len(uuids)} indices ({', '.join(sorted(uuids))}); {purpose} needs one index")
    return next(iter(uuids.items()))


def identity_plan(index: str) -> Plan[tuple[str, tuple[int, ...]]]:
    """``(identity, state)`` of an index (or of the indices an alias names), from one ``_stats``
    request: the identity (``name:uuid`` of each index) tells a deleted-and-recreated index, or
    an alias now pointing elsewhere, from the one seen before; the state (live and deleted
    document counts, indexing and deletion totals of the primaries) changes with any write."""
    resp = yield Call("GET", f"/{path_segment(index, patterns=True)}/_stats/docs,indexing",
                      context=f"reading the state of {index!r}")
    prim = resp["_all"]["primaries"]
    state = (int(prim["docs"]["count"]), int(prim["docs"]["deleted"]),
             int(prim["indexing"]["index_total"]), int(prim["indexing"]["delete_total"]))
    uuids = sorted(f"{name}:{(spec or {}).get('uuid', '')}" for name, spec in (resp.get("indices") or {}).items())
    return ",".join(uuids) or index, state


def index_identity(engine: Engine, index: str) -> tuple[str, tuple[int, ...]]:
    """:func:`identity_plan` against ``engine``."""
    return run(identity_plan(index), engine)


def index_state(engine: Engine, index: str) -> tuple[int, ...]:
    """A cheap fingerprint of an index's content (:func:`identity_plan`'s state)."""
    return index_identity(engine, index)[1]


def parse_time_value(value: object) -> float:
    """Seconds of an engine time value (``"1s"``, ``"500ms"``, ``"2m"``); ``-1`` (disabled) is 0.

    Raises:
        ConfigurationError: not a time value.
    """
    text = str(value).strip().lower()
    if text in ("-1", "-1s", "-1ms"):
        return 0.0
    units = (("nanos", 1e-9), ("micros", 1e-6), ("ms", 1e-3), ("s", 1.0), ("m", 60.0), ("h", 3600.0),
             ("d", 86400.0))
    for unit, scale in units:
        if text.endswith(unit):
            try:
                number = float(text[:-len(unit)])
            except ValueError:
                break
            if number >= 0:
                return number * scale
            break
    raise ConfigurationError(f"{value!r} is not a time value (e.g. 1s, 500ms, 2m)")


def _index_setting(resp: Any, name: str) -> list[Any]:
    """The values of ``index.<name>`` in a ``_settings?include_defaults`` answer, one per index."""
    values = []
    for spec in (resp or {}).values():
        for part in ("settings", "defaults"):
            got = (((spec or {}).get(part) or {}).get("index") or {}).get(name)
            if got is not None:
                values.append(got)
                break
    return values


def refresh_interval_plan(index: str) -> Plan[float]:
    """Seconds between the automatic refreshes of ``index`` (the shortest of an alias's
    indices; 0 when refreshes are disabled, so callers never hold statistics back)."""
    resp = yield Call("GET", f"/{path_segment(index, patterns=True)}/_settings/index.refresh_interval",
                      params={"include_defaults": "true"}, context=f"reading the refresh interval of {index!r}")
    values = [parse_time_value(v) for v in _index_setting(resp, "refresh_interval")]
    return min(values) if values else 1.0


def max_result_window_plan(index: str) -> Plan[int]:
    """``index.max_result_window`` of ``index`` (the lowest of an alias's indices; the engines' 10 000
    unless set)."""
    resp = yield Call("GET", f"/{path_segment(index, patterns=True)}/_settings/index.max_result_window",
                      params={"include_defaults": "true"}, context=f"reading settings of {index!r}")
    values = _index_setting(resp, "max_result_window")
    return min(int(v) for v in values) if values else 10_000


def similarity_plan(index: str) -> Plan[dict[str, Any]]:
    """The default similarity of ``index``'s text fields: ``{"type": "BM25", "k1", "b"}`` (the
    engines' 1.2 and 0.75 unless the index sets others; those when the settings cannot be read)."""
    out: dict[str, Any] = {"type": "BM25", "k1": 1.2, "b": 0.75}
    try:
        resp = yield Call("GET", f"/{path_segment(index, patterns=True)}/_settings/index.similarity.default.*",
                          context=f"reading the similarity of {index!r}")
    except EngineError:
        return out
    for spec in (resp or {}).values():
        default = ((spec.get("settings") or {}).get("index") or {}).get("similarity", {}).get("default", {})
        out["type"] = str(default.get("type", "BM25"))
        try:
            out["k1"], out["b"] = float(default.get("k1", out["k1"])), float(default.get("b", out["b"]))
        except (TypeError, ValueError):
            pass
    return out


def index_similarity(engine: Engine, index: str) -> dict[str, Any]:
    """:func:`similarity_plan` against ``engine``."""
    return run(similarity_plan(index), engine)
