"""A hybrid search of an index whose vectors are not built yet: answered at once from the other
strategies, with a note, never by embedding the documents in the search; the vectors built apart
(:meth:`HybridSearcher.prepare`, or ``esbridge serve``'s background thread) while other indices go
on answering."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from esbridge.engine.client import Engine
from esbridge.hybrid.calibration import stored_calibration
from esbridge.hybrid.pipeline import HybridSearcher, PipelineParams
from esbridge.index import IndexLayout, create_index
from esbridge.index.definitions import ID_VALUES
from esbridge.semantic.engine_vectors import EngineVectors, new_vector_field
from esbridge.semantic.models import load_encoder
from tests.engine.test_serve import http, http_headers, running
from tests.smallindex import sample_collection

PIPELINE = {"w_semantic": 2, "semantic_depth": 40, "window": 40, "calibration_queries": 20}


def _cold_index(engine: Engine, docs: int = 60) -> tuple[str, list[str]]:
    """A new index as another writer fills it: esbridge's layout (with a vector field where the
    engine searches vectors) and documents, none of them embedded.  Each text is new to the
    embedding cache, so that building the vectors takes a while."""
    sample = sample_collection(3, docs)
    salt = uuid.uuid4().hex[:8]
    name = f"esb-test-cold-{salt}"
    create_index(engine, name, IndexLayout(), vector=new_vector_field(engine, load_encoder()))
    for d in sample.docs:
        engine.request("PUT", f"/{name}/_doc/{d['_id']}",
                       body={"title": d["title"], "text": f"{d['text']} (copy {salt})", ID_VALUES: d["_id"]})
    engine.refresh(name)
    return name, [q["text"] for q in sample.queries]


@pytest.fixture
def cold(engine: Engine) -> Iterator[tuple[str, list[str]]]:
    name, queries = _cold_index(engine)
    yield name, queries
    engine.delete_index(name)


def _params() -> PipelineParams:
    return PipelineParams().with_overrides(**PIPELINE)


def test_whole_document_lists_without_vectors_are_noted_too(engine: Engine, cold: tuple[str, list[str]]) -> None:
    """An ensemble model's whole-document list of documents not embedded yet is empty, and the
    answer says so for that model, beside the passages' note."""
    index, queries = cold
    model = "all-minilm-l6-v2-q"
    params = _params().with_overrides(ensemble=[model])
    with HybridSearcher(engine, index, params, build=False) as hs:
        res = hs.run(queries[0])
        assert res.lists[f"document {model}"].ids == [] and res.ids
        assert [n.split(" yet")[0] for n in res.notes] == [
            f"vectors_pending: 60 documents of [{index}] have no vector",
            f"vectors_pending: 60 documents of [{index}] have no whole-document vector of {model}"]
        assert hs.vectors_pending() == 60


def test_a_searcher_that_does_not_build_answers_without_embedding(engine: Engine,
                                                                  cold: tuple[str, list[str]]) -> None:
    index, queries = cold
    params = _params()
    with HybridSearcher(engine, index, params, build=False) as hs:
        res = hs.run(queries[0])
        assert "semantic" not in res.lists and res.lists["lexical"].ids and res.ids
        assert len(res.notes) == 1 and res.notes[0].startswith("vectors_pending: 60 documents")
        assert len(hs.vectors) == 0 and hs.vectors_pending() == 60  # the search embedded nothing
        # the weights are not measured from a semantic strategy that cannot find anything
        assert hs.calibration() is None and not hs.prepared()
        assert stored_calibration(engine, index, params.model, params.scorer, params.calibration) is None
        answer = hs.search(queries[0], size=3)
        assert answer["_esbridge"]["notes"] == res.notes and len(answer["hits"]["hits"]) == 3

        assert hs.prepare() == 0
        assert hs.prepared() and len(hs.vectors) == 60
        after = hs.run(queries[0])
        assert after.lists["semantic"].ids and not after.notes
        assert stored_calibration(engine, index, params.model, params.scorer, params.calibration) is not None
    # a searcher that builds finds everything ready and ranks the same
    with HybridSearcher(engine, index, params) as built:
        assert built.run(queries[0]).ids == after.ids
        assert isinstance(built.vectors, EngineVectors) == (engine.vector_search() is not None)


def _hybrid_search(engine: Engine, url: str, index: str, query: str) -> tuple[int, dict[str, str], Any]:
    return http_headers(engine, "POST", f"{url}/{index}/_search", {"query": {"match": {"text": query}}, "size": 5})


def test_serve_answers_a_cold_index_at_once_and_builds_it_in_the_background(
        engine: Engine, cold: tuple[str, list[str]]) -> None:
    index, queries = cold
    warm, warm_queries = _cold_index(engine, 40)
    try:
        with HybridSearcher(engine, warm, _params()) as hs:
            hs.prepare()  # built and measured beforehand, as `esbridge index` and a first search leave it
        config = {"pipeline": True, "window": 40, "pipeline_params": PIPELINE}
        with running(engine, {index: config, warm: config}, request_timeout=30) as url:
            status, headers, body = _hybrid_search(engine, url, index, queries[0])
            assert status == 200, body
            assert headers.get("x-esbridge-notes") == "vectors_pending"
            assert body["_esbridge"]["notes"][0].startswith("vectors_pending: 60 documents")
            assert len(body["hits"]["hits"]) == 5  # the lexical and keyword strategies answered
            # while the cold index is prepared, the other index is answered, ready
            _, health = http(engine, "GET", f"{url}/_esbridge/health")
            assert health["preparing"] == [index]
            for q in warm_queries:
                status, headers, body = _hybrid_search(engine, url, warm, q)
                assert status == 200 and "x-esbridge-notes" not in headers and "_esbridge" not in body
            _, health = http(engine, "GET", f"{url}/_esbridge/health")
            assert health["preparing"] == [index], "the cold index was prepared before the other was searched"
            deadline = time.monotonic() + 300
            while health["preparing"] and time.monotonic() < deadline:
                time.sleep(0.5)
                _, health = http(engine, "GET", f"{url}/_esbridge/health")
            assert not health["preparing"]
            status, headers, body = _hybrid_search(engine, url, index, queries[0])
            assert status == 200 and "x-esbridge-notes" not in headers and "_esbridge" not in body
        with HybridSearcher(engine, index, _params(), build=False) as hs:
            assert hs.prepared()  # vectors built and weights recorded by the server
            assert [h["_id"] for h in body["hits"]["hits"]] == hs.run(queries[0]).ids[:5]
    finally:
        engine.delete_index(warm)
