"""What text of a document is embedded."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["document_text"]


def document_text(source: Mapping[str, Any], fields: Sequence[str]) -> str:
    """The text fields of ``source`` that are non-empty strings, in ``fields`` order, joined by one space
    (``title + " " + text`` for a BEIR document, the convention of sentence-embedding evaluations)."""
    parts = [v.strip() for f in fields if isinstance(v := source.get(f), str) and v.strip()]
    return " ".join(parts)
