"""``esbridge serve`` answering an index's searches with the hybrid pipeline (semantic + lexical +
keyword, fused): opensearch-py pointed at the server gets :class:`HybridSearcher`'s ranking."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from esbridge.engine.client import Engine
from esbridge.hybrid.pipeline import HybridSearcher, PipelineParams
from tests.engine.test_serve import client_of, ranking, running
from tests.smallindex import create_small_index, sample_collection

PIPELINE = {"w_semantic": 2, "semantic_depth": 40}


@pytest.fixture(scope="module")
def collection(engine: Engine) -> Iterator[tuple[str, list[str]]]:
    sample = sample_collection(4, 100)
    name = create_small_index(engine, f"esb-test-{uuid.uuid4().hex[:10]}",
                              {d["_id"]: {"title": d["title"], "text": d["text"]} for d in sample.docs})
    yield name, [q["text"] for q in sample.queries]
    engine.delete_index(name)


def test_a_pipeline_index_is_answered_by_the_hybrid_pipeline(engine: Engine,
                                                            collection: tuple[str, list[str]]) -> None:
    index, queries = collection
    params = PipelineParams(scorer="evolved", window=40).with_overrides(**PIPELINE)
    with HybridSearcher(engine, index, params) as hybrid:
        want = [hybrid.search(q, size=10) for q in queries]
        lexical_only = [hybrid.reranker.search(q, size=10) for q in queries]
    with running(engine, {index: {"window": 40, "pipeline": True, "pipeline_params": PIPELINE}}) as url:
        client = client_of(engine, url)
        got = [client.search(index=index, body={"query": {"match": {"text": q}}, "size": 10}) for q in queries]
        explained = client.search(index=index, body={"query": {"match": {"text": queries[0]}}, "size": 3,
                                                     "ext": {"esbridge": {"explain": True}}})
        # the pipeline turned off for one search: the evolved reranker alone
        plain = client.search(index=index, body={"query": {"match": {"text": queries[0]}}, "size": 10,
                                                 "ext": {"esbridge": {"pipeline": False}}})
        status = None
        try:
            client.search(index=index, body={"query": {"match": {"text": queries[0]}},
                                             "ext": {"esbridge": {"window": 5}}})
        except Exception as err:  # the engine client's RequestError
            status = getattr(err, "status_code", None)
    assert [ranking(g) for g in got] == [ranking(w) for w in want]
    assert [ranking(w) for w in want] != [ranking(x) for x in lexical_only]  # the fusion changed something
    assert all("_esbridge" not in h for g in got for h in g["hits"]["hits"])
    assert all("strategies" in h["_esbridge"] for h in explained["hits"]["hits"])
    assert ranking(plain) == ranking(lexical_only[0])
    assert status == 400
