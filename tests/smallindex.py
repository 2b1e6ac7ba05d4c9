"""Small corpora for engine tests: a few hand-written documents in an esbridge index, and part
of the SciFact sample shipped in the package with its judgments."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from esbridge.engine.client import Engine
from esbridge.index import IndexLayout, create_index
from esbridge.index.definitions import ID_VALUES
from tests.data import documents, judged_queries, qrels

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
    """Create ``name`` with esbridge's layout, index ``docs`` (id → source) as esbridge's ingest
    writes them (each with its id value) and refresh."""
    create_index(engine, name, IndexLayout(), shards=shards)
    for doc_id, src in docs.items():
        engine.request("PUT", f"/{name}/_doc/{doc_id}", body={**src, ID_VALUES: doc_id})
    engine.refresh(name)
    return name


@dataclass(frozen=True)
class SampleCollection:
    """Part of the SciFact sample shipped in the package: judged claims and a small corpus."""

    queries: list[dict[str, str]]          # the chosen judged claims, ``{"_id", "text"}``
    extra: dict[str, str]                  # one more judged claim, not among ``queries``
    judged: dict[str, dict[str, int]]      # query id → document id → grade
    docs: list[dict[str, str]]             # ``{"_id", "title", "text"}``


def sample_collection(topics: int, size: int = 80) -> SampleCollection:
    """The first ``topics`` judged claims of the shipped SciFact sample and ``size`` abstracts:
    those judged for them (and for one more judged claim), then others in file order."""
    judged = qrels()
    queries = judged_queries()
    chosen, extra = queries[:topics], queries[topics]
    wanted = {d for q in (*chosen, extra) for d in judged[q["_id"]]}
    corpus = documents()
    docs = [d for d in corpus if d["_id"] in wanted]
    docs += [d for d in corpus if d["_id"] not in wanted][:size - len(docs)]
    return SampleCollection(queries=chosen, extra=extra, judged=judged, docs=docs)
