"""The asyncio API (esbridge.aio) against the real engines: the same responses and errors as the
synchronous one, concurrent searches, and the user's own asynchronous client."""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import pytest

from esbridge.aio import AsyncEngine, AsyncReranker
from esbridge.engine.async_client import _AsyncOpenSearchTransport
from esbridge.engine.client import ConnectionOptions, Engine
from esbridge.engine.transports import _OpenSearchTransport
from esbridge.errors import ConfigurationError, EngineUnavailableError, EsbridgeError, IndexNotFoundError
from esbridge.index import read_layout
from esbridge.rerank import Reranker
from tests.smallindex import DOCS, create_small_index

T = TypeVar("T")

QUERIES = ["insulin glucose diabetes", "cardiac output of the heart", "HbA1c", "sorting algorithm readings",
           "diabetes heart risk", "nothing-matches-this"]


@pytest.fixture(scope="module")
def small_index(engine: Engine) -> Iterator[str]:
    """One tiny two-shard index for the module (no test here writes to it)."""
    name = create_small_index(engine, f"esb-test-{uuid.uuid4().hex[:10]}", DOCS, shards=2)
    yield name
    engine.delete_index(name)


def arun(engine: Engine, body: Callable[[AsyncEngine], Awaitable[T]]) -> T:
    """Run ``body`` with an AsyncEngine connected as ``engine`` is, closed afterwards."""
    async def main() -> T:
        async with await AsyncEngine.connect(engine.options) as async_engine:
            assert async_engine.info == engine.info
            return await body(async_engine)

    return asyncio.run(main())


def same_search(sync: dict[str, Any], async_: dict[str, Any]) -> None:
    """The same hits (ids, scores, sources, first-stage metadata, parts) and esbridge metadata;
    only the engine's ``took`` may differ."""
    assert async_["hits"] == sync["hits"]
    assert async_["_esbridge"] == sync["_esbridge"]


@pytest.mark.parametrize("scorer,kwargs", [("evolved", {}), ("bm25f_robertson", {"field_weights": {"title": 2.0}}),
                                           ("bmx", {})])
def test_search_and_rescore_equal_the_synchronous_ones(engine: Engine, small_index: str, scorer: str,
                                                       kwargs: dict[str, Any]) -> None:
    sync = Reranker(engine, small_index, scorer=scorer, window=10, **kwargs)
    variants = [("blood sugar", 0.5), ("heart", 0.25)]

    async def augmenter(text: str) -> list[tuple[str, float]]:  # an async augmenter is awaited
        await asyncio.sleep(0)
        return [(f"{text} glucose", 0.5)]

    first_stage = {q: engine.search(small_index, {"size": 5, "seq_no_primary_term": True,
                                                  "query": {"match": {"text": q}}}) for q in QUERIES[:2]}

    async def body(async_engine: AsyncEngine) -> list[tuple[str, Any]]:
        out = []
        async with AsyncReranker(async_engine, small_index, scorer=scorer, window=10, **kwargs) as rr:
            for q in QUERIES:
                out.append(("plain", await rr.search(q, size=4, explain=True)))
            for q in QUERIES[:2]:
                out.append(("augmented", await rr.search(q, size=4, augmentations=variants, original_weight=0.75)))
                out.append(("async augmenter", await rr.search(q, size=4, augmentations=augmenter)))
                out.append(("filtered", await rr.search(q, size=3, filter={"ids": {"values": ["a", "b", "d"]}},
                                                        fields=["title"])))
                out.append(("rescore", await rr.rescore(first_stage[q], q, window=3)))
                out.append(("rescore augmented", await rr.rescore(first_stage[q], q, augmentations=variants)))
        return out

    got = arun(engine, body)
    expected: list[tuple[str, Any]] = [("plain", sync.search(q, size=4, explain=True)) for q in QUERIES]
    for q in QUERIES[:2]:
        expected += [
            ("augmented", sync.search(q, size=4, augmentations=variants, original_weight=0.75)),
            ("async augmenter", sync.search(q, size=4, augmentations=[(f"{q} glucose", 0.5)])),
            ("filtered", sync.search(q, size=3, filter={"ids": {"values": ["a", "b", "d"]}}, fields=["title"])),
            ("rescore", sync.rescore(first_stage[q], q, window=3)),
            ("rescore augmented", sync.rescore(first_stage[q], q, augmentations=variants)),
        ]
    assert [kind for kind, _ in got] == [kind for kind, _ in expected]
    for (kind, a), (_, s) in zip(got, expected):
        if kind.startswith("rescore"):
            assert a == s, kind
        else:
            same_search(s, a)
    assert any(h["_score"] > 0 for _, r in got for h in r["hits"]["hits"])  # not an empty comparison
    sync.close()


def test_concurrent_searches_equal_serial_ones(engine: Engine, small_index: str) -> None:
    queries = [QUERIES[i % 5] for i in range(24)]
    in_flight = [0, 0]  # now, most

    async def body(async_engine: AsyncEngine) -> list[dict[str, Any]]:
        request = async_engine.request

        async def counting(*args: Any, **kwargs: Any) -> Any:
            in_flight[0] += 1
            in_flight[1] = max(in_flight)
            try:
                return await request(*args, **kwargs)
            finally:
                in_flight[0] -= 1

        async_engine.request = counting  # type: ignore[method-assign]
        rr = AsyncReranker(async_engine, small_index, window=10)  # opened by the first search
        return list(await asyncio.gather(*(rr.search(q, size=5) for q in queries)))

    concurrent = arun(engine, body)
    with Reranker(engine, small_index, window=10) as sync:
        serial = [sync.search(q, size=5) for q in queries]
    assert len(concurrent) == 24
    for s, a in zip(serial, concurrent):
        same_search(s, a)
    assert in_flight[1] > 1  # the searches did overlap


def _dead_url(engine: Engine) -> str:
    """A URL at which nothing listens (a port just freed), with the engine's scheme."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    scheme = engine.options.url.split(":", 1)[0]
    return f"{scheme}://127.0.0.1:{port}"


def _error(call: Callable[[], Any]) -> tuple[type, str]:
    with pytest.raises(EsbridgeError) as info:
        call()
    return type(info.value), str(info.value)


def test_errors_are_the_synchronous_ones(engine: Engine, small_index: str) -> None:
    missing = f"esb-test-missing-{uuid.uuid4().hex[:8]}"
    dead = ConnectionOptions(url=_dead_url(engine), max_retries=0)
    layout = read_layout(engine, small_index)
    dead_engine = Engine(dead, engine.info, _OpenSearchTransport(dead))
    expected = {
        "missing index": _error(lambda: Reranker(engine, missing)),
        "bad window": _error(lambda: Reranker(engine, small_index, window=0)),
        "bad size": _error(lambda: Reranker(engine, small_index).search("insulin", size=-1)),
        "bad augmentation": _error(lambda: Reranker(engine, small_index).search("insulin", augmentations=[("x", -1)])),
        "not a response": _error(lambda: Reranker(engine, small_index).rescore([], "insulin")),
        "unreachable at connect": _error(lambda: Engine.connect(dead)),
        "unreachable mid-search": _error(lambda: Reranker(dead_engine, small_index, layout=layout).search("insulin")),
    }
    assert expected["missing index"][0] is IndexNotFoundError
    assert expected["unreachable at connect"][0] is EngineUnavailableError
    assert expected["unreachable mid-search"][0] is EngineUnavailableError

    async def body(async_engine: AsyncEngine) -> dict[str, tuple[type, str]]:
        async def error(call: Callable[[], Awaitable[Any]]) -> tuple[type, str]:
            try:
                await call()
            except EsbridgeError as err:
                return type(err), str(err)
            raise AssertionError("no error")

        dead_async = AsyncEngine(dead, engine.info, _AsyncOpenSearchTransport(dead))
        rr = AsyncReranker(async_engine, small_index)
        try:
            return {
                "missing index": await error(lambda: AsyncReranker(async_engine, missing).search("insulin")),
                "bad window": await error(lambda: AsyncReranker.create(async_engine, small_index, window=0)),
                "bad size": await error(lambda: rr.search("insulin", size=-1)),
                "bad augmentation": await error(lambda: rr.search("insulin", augmentations=[("x", -1)])),
                "not a response": await error(lambda: rr.rescore([], "insulin")),
                "unreachable at connect": await error(lambda: AsyncEngine.connect(dead)),
                "unreachable mid-search": await error(
                    lambda: AsyncReranker(dead_async, small_index, layout=layout).search("insulin")),
            }
        finally:
            await dead_async.close()

    got = arun(engine, body)
    assert got == expected
    for kind, (_, message) in got.items():
        assert "\n" not in message, kind


def _own_async_client(engine: Engine) -> Any:
    """An asynchronous client built the way users build theirs (see test_user_client)."""
    opts = engine.options
    if engine.distribution == "elasticsearch" and engine.info.version[0] >= 8:
        from elasticsearch import AsyncElasticsearch

        return AsyncElasticsearch(opts.url, basic_auth=(str(opts.username), str(opts.password)),
                                  ca_certs=opts.ca_certs)
    from opensearchpy import AsyncOpenSearch

    auth = {"http_auth": (opts.username, opts.password)} if opts.username else {}
    return AsyncOpenSearch(hosts=[opts.url], ca_certs=opts.ca_certs, **auth)


def test_the_users_own_async_client(engine: Engine, small_index: str) -> None:
    with Reranker(engine, small_index, window=10) as sync:
        expected = sync.search("insulin diabetes", size=3)

    async def main() -> tuple[dict[str, Any], int]:
        client = _own_async_client(engine)
        try:
            own = await AsyncEngine.connect(client)
            assert own.info == engine.info
            got = await AsyncReranker(own, small_index, window=10).search("insulin diabetes", size=3)
            await own.close()
            # esbridge left the user's client open
            if hasattr(client, "perform_request"):  # elasticsearch 8/9
                compat = {f: f"application/vnd.elasticsearch+json; compatible-with={engine.info.version[0]}"
                          for f in ("accept", "content-type")}
                count = (await client.perform_request("POST", f"/{small_index}/_count", headers=compat,
                                                      body={})).body["count"]
            else:
                count = (await client.count(index=small_index))["count"]
            return got, int(count)
        finally:
            await client.close()

    got, count = asyncio.run(main())
    same_search(expected, got)
    assert count == len(DOCS)


def test_a_synchronous_call_on_an_async_reranker_store_is_refused(engine: Engine, small_index: str) -> None:
    async def body(async_engine: AsyncEngine) -> None:
        rr = await AsyncReranker.create(async_engine, small_index)
        with pytest.raises(ConfigurationError, match="AsyncEngine is asynchronous"):
            rr.store.stats.validate()

    arun(engine, body)


def test_a_plain_index_searches_and_refuses_as_the_synchronous_api(engine: Engine, index_name: str) -> None:
    """An index without esbridge's sub-fields: bm25 equal to the synchronous reranker's, and a
    scorer that needs missing channels refused with the same line."""
    engine.request("PUT", f"/{index_name}", body={"settings": {"number_of_shards": 2},
                                                  "mappings": {"properties": {"title": {"type": "text"},
                                                                              "body": {"type": "text"}}}})
    for doc_id, text in (("1", "heart attack insulin"), ("2", "insulin resistance in diabetes"),
                         ("3", "sorting algorithms"), ("4", "insulin insulin pump")):
        engine.request("PUT", f"/{index_name}/_doc/{doc_id}", body={"title": text.split()[0], "body": text})
    engine.refresh(index_name)
    sync = Reranker(engine, index_name, scorer="bm25").search("insulin pump")
    with pytest.raises(ConfigurationError) as sync_err:
        Reranker(engine, index_name, scorer="evolved")

    async def body(async_engine: AsyncEngine) -> tuple[dict[str, Any], str]:
        async with await AsyncReranker.create(async_engine, index_name, scorer="bm25") as rr:
            got = await rr.search("insulin pump")
        with pytest.raises(ConfigurationError) as err:
            await AsyncReranker.create(async_engine, index_name, scorer="evolved")
        return got, str(err.value)

    got, message = arun(engine, body)
    assert {h["_id"] for h in sync["hits"]["hits"]} == {"1", "2", "4"}  # "3" has neither term
    same_search(sync, got)
    assert message == str(sync_err.value) and "--add-channels" in message
