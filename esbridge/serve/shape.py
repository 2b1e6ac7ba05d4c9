"""The form of an answer its request's URL asks for, as the engine gives it: ``filter_path``
(:func:`filter_path`) and ``pretty`` (:func:`render`).

``filter_path`` is a comma-separated list of dotted paths.  A segment may hold ``*`` (any part
of one key) or be ``**`` (any number of levels); arrays are looked through, each element filtered
alike.  Paths given keep only what they reach, and objects and arrays left empty go; paths starting
with ``-`` take out what they reach (before the others keep theirs), and objects and arrays they
empty go too.  Nothing kept: ``{}``.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["filter_path", "render"]

#: What a filter left nothing of.
_GONE = object()

Path = Sequence[str]


def _paths(spec: str) -> tuple[list[Path], list[Path]]:
    """The paths kept and the paths taken out (``-``) of a ``filter_path`` value."""
    keep: list[Path] = []
    drop: list[Path] = []
    for item in spec.split(","):
        item = item.strip()
        target = drop if item.startswith("-") else keep
        item = item.removeprefix("-").strip()
        if item:
            target.append(tuple(item.split(".")))
    return keep, drop


@functools.lru_cache(maxsize=256)
def _pattern(segment: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in segment.split("*")), re.DOTALL)


def _matches(segment: str, key: str) -> bool:
    return segment == key if "*" not in segment else _pattern(segment).fullmatch(key) is not None


def _reached(path: Path) -> bool:
    """Whether ``path`` has no segment left to match (or only ``**``, which take any number of levels)."""
    return all(segment == "**" for segment in path)


def _after(paths: Sequence[Path], key: str) -> list[Path]:
    """What is left of each of ``paths`` below ``key``."""
    out: list[Path] = []
    for path in paths:
        if not path:
            continue
        head = path[0]
        if head == "**":
            out.append(path)  # ** takes this level, and may take more
            if len(path) > 1 and _matches(path[1], key):
                out.append(path[2:])  # ** takes none: the next segment is this key's
        elif _matches(head, key):
            out.append(path[1:])
    return out


def _keep(value: Any, paths: Sequence[Path]) -> Any:
    if any(_reached(p) for p in paths):
        return value
    if isinstance(value, Mapping):
        kept = {}
        for key, item in value.items():
            below = _after(paths, key)
            if below:
                got = _keep(item, below)
                if got is not _GONE:
                    kept[key] = got
        return kept if kept else _GONE
    if isinstance(value, list):
        items = [got for got in (_keep(item, paths) for item in value) if got is not _GONE]
        return items if items else _GONE
    return _GONE


def _drop(value: Any, paths: Sequence[Path]) -> Any:
    if any(_reached(p) for p in paths):
        return _GONE
    if isinstance(value, Mapping):
        kept = {}
        for key, item in value.items():
            below = _after(paths, key)
            got = _drop(item, below) if below else item
            if got is not _GONE:
                kept[key] = got
        return kept if kept else _GONE
    if isinstance(value, list):
        items = [got for got in (_drop(item, paths) for item in value) if got is not _GONE]
        return items if items else _GONE
    return value


def filter_path(value: Mapping[str, Any], spec: str) -> dict[str, Any]:
    """``value`` (a JSON object) filtered as the engine filters its answer by ``?filter_path=spec``."""
    keep, drop = _paths(spec)
    out: Any = value
    if drop:
        out = _drop(out, drop)
    if keep and out is not _GONE:
        out = _keep(out, keep)
    return dict(out) if out is not _GONE else {}


def render(value: Any, query: Mapping[str, str]) -> str:
    """The JSON text of an answer: indented where the query string asks for it (``pretty``, as the
    engine reads it: given, and not ``false``)."""
    if "pretty" in query and query["pretty"].strip().lower() != "false":
        return json.dumps(value, ensure_ascii=False, indent=2, separators=(",", " : ")) + "\n"
    return json.dumps(value, ensure_ascii=False)
