"""What text of a document is embedded."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["document_text"]


def document_text(source: Mapping[str, Any], fields: Sequence[str]) -> str:
    """The text fields of ``source`` that are non-empty strings, in ``fields`` order, joined by one space
    (``title + " " + text`` for a BEIR document, the convention of sentence-embedding evaluations)."""
    parts = [v.strip() for f in fields if isinstance(v := _value(source, f), str) and v.strip()]
    return " ".join(parts)


def _value(source: Mapping[str, Any], path: str) -> Any:
    """``source[path]``, or for a dotted path of an index of yours (``meta.title``) the value inside
    its objects."""
    if path in source or "." not in path:
        return source.get(path)
    value: Any = source
    for part in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value
