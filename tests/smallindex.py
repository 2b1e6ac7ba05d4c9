"""A few hand-written documents in an esbridge index, for engine tests that need a tiny corpus."""

from __future__ import annotations

from collections.abc import Mapping

from esbridge.engine.client import Engine
from esbridge.index import IndexLayout, create_index

#: Title and text of a handful of documents on diabetes, insulin and the heart.
DOCS: dict[str, dict[str, str]] = {
    "a": {"title": "Glycated haemoglobin HbA1c", "text": "HbA1c measures long-term glucose control in diabetes."},
    "b": {"title": "Insulin therapy", "text": "Insulin lowers glucose; diabetes patients adjust insulin doses."},
    "c": {"title": "Cardiac output", "text": "The heart pumps blood; exercise raises cardiac output."},
    "d": {"title": "Diabetes and the heart", "text": "Diabetes raises cardiac risk and glucose damages vessels."},
    "e": {"title": "Sorting", "text": "An O(n log n) algorithm sorts the list of glucose readings."},
}


def create_small_index(engine: Engine, name: str, docs: Mapping[str, Mapping[str, str]] = DOCS, *,
                       shards: int = 1) -> str:
    """Create ``name`` with esbridge's layout, index ``docs`` (id → source) and refresh."""
    create_index(engine, name, IndexLayout(), shards=shards)
    for doc_id, src in docs.items():
        engine.request("PUT", f"/{name}/_doc/{doc_id}", body=dict(src))
    engine.refresh(name)
    return name
