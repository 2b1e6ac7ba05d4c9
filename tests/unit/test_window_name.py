"""``window`` is the one name of the rescore window: ``rescore(window=)`` reranks the top
``window`` hits; ``window_size=``, its former name, gives the same answer with a
DeprecationWarning; both at once is an error.  On a scripted engine (its answers are an
OpenSearch 3.8 node's to a plain index of three documents)."""

from __future__ import annotations

import asyncio
import copy
import warnings
from typing import Any

import pytest

from esbridge.aio import AsyncReranker
from esbridge.engine.async_client import AsyncEngine
from esbridge.engine.client import ConnectionOptions, Engine
from esbridge.engine.connection import EngineInfo
from esbridge.errors import ConfigurationError
from esbridge.rerank import Reranker
from esbridge.rescore_script import EvolvedRescorer
from tests.unit.scripted import AsyncScriptedTransport, ScriptedTransport

INFO = EngineInfo("opensearch", (3, 8, 0), "3.8.0", "c", "10.5.0")
INDEX = "docs"
UUID = "krEVBRpTTD2E1LzM47PE3A"

#: the engine's first stage for "bone density": a, b, c (c below any window used here)
RESPONSE = {
    "took": 0, "timed_out": False, "_shards": {"total": 1, "successful": 1, "skipped": 0, "failed": 0},
    "hits": {"total": {"value": 3, "relation": "eq"}, "max_score": 3.0, "hits": [
        {"_index": INDEX, "_id": "a", "_score": 3.0},
        {"_index": INDEX, "_id": "b", "_score": 2.0},
        {"_index": INDEX, "_id": "c", "_score": 1.0},
    ]},
}

_INDEXING = {"index_total": 3, "index_time_in_millis": 1, "index_current": 0, "index_failed": 0,
             "delete_total": 0, "delete_time_in_millis": 0, "delete_current": 0, "noop_update_total": 0,
             "is_throttled": False, "throttle_time_in_millis": 0, "max_last_index_request_timestamp": 1}
_SIDE = {"docs": {"count": 3, "deleted": 0}, "indexing": _INDEXING}


def _vectors(doc: str, terms: dict[str, int]) -> dict[str, Any]:
    return {"_index": INDEX, "_id": doc, "_version": 1, "found": True, "took": 0,
            "term_vectors": {"text": {"terms": {t: {"term_freq": n} for t, n in terms.items()}}}}


#: what the reranker asks, in order: the index (its layout) when it is made, then for one
#: rescore the query's analysis, the index's state, its shards' settings, where the statistics
#: request is routed, and one _mtermvectors with the terms' statistics and the window's vectors
OPEN = [{INDEX: {"aliases": {}, "mappings": {"properties": {"text": {"type": "text", "term_vector": "yes"}}},
                 "settings": {"index": {"number_of_shards": "1", "number_of_replicas": "0", "uuid": UUID}}}}]
ANALYZE = {"tokens": [{"token": "bone", "start_offset": 0, "end_offset": 4, "type": "<ALPHANUM>", "position": 0},
                      {"token": "density", "start_offset": 5, "end_offset": 12, "type": "<ALPHANUM>",
                       "position": 1}]}
STATE = {"_shards": {"total": 1, "successful": 1, "failed": 0},
         "_all": {"primaries": _SIDE, "total": _SIDE},
         "indices": {INDEX: {"uuid": UUID, "primaries": _SIDE, "total": _SIDE}}}
SETTINGS = {INDEX: {"settings": {"index": {"number_of_shards": "1", "number_of_replicas": "0"}}}}
SHARDS = {"nodes": {"n1": {"name": "Node 1"}}, "indices": {INDEX: {}},
          "shards": [[{"state": "STARTED", "primary": True, "node": "n1", "shard": 0, "index": INDEX}]]}
STATISTICS = {"_index": INDEX, "_version": 0, "found": True, "took": 0, "term_vectors": {"text": {
    "field_statistics": {"sum_doc_freq": 8, "doc_count": 3, "sum_ttf": 12},
    "terms": {"bone": {"doc_freq": 3, "ttf": 3, "term_freq": 1}, "density": {"doc_freq": 1, "ttf": 1,
                                                                               "term_freq": 1}}}}}
A = {"bone": 1, "x": 6}      # a long document with one query term
B = {"bone": 1, "density": 1}  # a short one with both: BM25 puts it above a


def rescore_answers(window: int) -> list[Any]:
    vectors = [_vectors("a", A), _vectors("b", B)][:window]
    return [ANALYZE, STATE, SETTINGS, SHARDS, {"docs": [STATISTICS, *vectors]}]


def rescored(window: int | None = None, window_size: int | None = None) -> tuple[dict[str, Any], list[Any]]:
    """A new reranker's rescore of :data:`RESPONSE` and the requests it sent."""
    n = window if window is not None else window_size
    assert n is not None
    transport = ScriptedTransport(OPEN + rescore_answers(n))
    engine = Engine(ConnectionOptions("http://localhost:9200"), INFO, transport)
    with Reranker(engine, INDEX, scorer="bm25", features="termvectors") as rr:
        out = rr.rescore(copy.deepcopy(RESPONSE), "bone density", window=window, window_size=window_size)
    assert transport.outcomes == []
    return out, transport.calls


def ids(response: dict[str, Any]) -> list[str]:
    return [h["_id"] for h in response["hits"]["hits"]]


def test_window_reranks_that_many_hits_and_keeps_the_rest_below() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new name does not warn
        two, _ = rescored(window=2)
        one, _ = rescored(window=1)
    assert ids(two) == ["b", "a", "c"] and two["_esbridge"]["window"] == 2
    assert ids(one) == ["a", "b", "c"] and one["_esbridge"]["window"] == 1
    assert two["hits"]["hits"][2] == RESPONSE["hits"]["hits"][2]  # below the window: as it was


@pytest.mark.parametrize("window", [1, 2])
def test_window_size_warns_and_gives_the_same_answer(window: int) -> None:
    new, new_calls = rescored(window=window)
    with pytest.warns(DeprecationWarning, match=r"Reranker.rescore\(window_size=...\) is deprecated; use window="):
        old, old_calls = rescored(window_size=window)
    assert old == new and old_calls == new_calls


def test_the_warning_points_at_the_caller() -> None:
    with pytest.warns(DeprecationWarning) as caught:
        rescored(window_size=2)
    assert caught[0].filename == __file__


class NoEngine:
    """Any use of the engine fails the test: arguments are checked first."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the engine was used ({name}) before the arguments were checked")


def test_both_names_at_once_is_an_error() -> None:
    transport = ScriptedTransport(OPEN)
    engine = Engine(ConnectionOptions("http://localhost:9200"), INFO, transport)
    with Reranker(engine, INDEX, scorer="bm25", features="termvectors") as rr:
        with pytest.raises(ConfigurationError, match=r"Reranker.rescore: give window= only \(window_size= is its "
                                                     r"former name\), not both"):
            rr.rescore(copy.deepcopy(RESPONSE), "bone density", window=2, window_size=2)
        for bad in (0, True):
            with pytest.raises(ConfigurationError, match="window must be an integer >= 1"):
                rr.rescore(copy.deepcopy(RESPONSE), "bone density", window=bad)
            with pytest.warns(DeprecationWarning), \
                    pytest.raises(ConfigurationError, match="window must be an integer >= 1"):
                rr.rescore(copy.deepcopy(RESPONSE), "bone density", window_size=bad)
    with pytest.raises(ConfigurationError, match="EvolvedRescorer: give window= only"):
        EvolvedRescorer(NoEngine(), INDEX, window=5, window_size=5)  # type: ignore[arg-type]
    with pytest.warns(DeprecationWarning, match=r"EvolvedRescorer\(window_size=...\) is deprecated; use window="), \
            pytest.raises(AssertionError, match="the engine was used"):
        EvolvedRescorer(NoEngine(), INDEX, window_size=5)  # type: ignore[arg-type]


def test_the_asynchronous_reranker_takes_the_same_names() -> None:
    async def rescore(**kwargs: Any) -> dict[str, Any]:
        transport = AsyncScriptedTransport(OPEN + rescore_answers(2))
        engine = AsyncEngine(ConnectionOptions("http://localhost:9200"), INFO, transport)
        async with AsyncReranker(engine, INDEX, scorer="bm25", features="termvectors") as rr:
            return await rr.rescore(copy.deepcopy(RESPONSE), "bone density", **kwargs)

    new = asyncio.run(rescore(window=2))
    with pytest.warns(DeprecationWarning, match=r"AsyncReranker.rescore\(window_size=...\) is deprecated"):
        old = asyncio.run(rescore(window_size=2))
    assert old == new
    sync, _ = rescored(window=2)
    assert ids(new) == ids(sync) and [h["_score"] for h in new["hits"]["hits"]] == \
        [h["_score"] for h in sync["hits"]["hits"]]
    with pytest.raises(ConfigurationError, match="AsyncReranker.rescore: give window= only"):
        asyncio.run(rescore(window=2, window_size=2))
