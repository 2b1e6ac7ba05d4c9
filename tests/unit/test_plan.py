"""The plans of the pipeline and their two drivers, and the asynchronous engine's retry and error
paths, on scripted transports (no engine)."""

from __future__ import annotations

import asyncio
import sys
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import pytest

from esbridge.engine import transports
from esbridge.engine.async_client import AsyncEngine, _AsyncTransport, _unreachable
from esbridge.engine.calls import identify_plan
from esbridge.engine.client import ConnectionOptions, Engine
from esbridge.engine.connection import EngineInfo
from esbridge.engine.plan import Call, Exclusive, Offload, Plan, PlanLock, gather, run, run_async
from esbridge.engine.transports import _HttpError, _short_reason, _Unreachable
from esbridge.errors import ConfigurationError, EngineError, EngineUnavailableError, IndexNotFoundError
from tests.unit.scripted import ScriptedTransport as Scripted

INFO = EngineInfo("opensearch", (3, 8, 0), "3.8.0", "c", "10.5.0")
ROOT = {"version": {"distribution": "opensearch", "number": "3.8.0", "lucene_version": "10.5.0"},
        "cluster_name": "c"}


class AsyncScripted(_AsyncTransport):
    """The same, awaited; ``gate`` (if set) holds every answer until it is set."""

    def __init__(self, outcomes: list[Any], gate: asyncio.Event | None = None) -> None:
        self.owned = False
        self.outcomes = list(outcomes)
        self.calls: list[tuple[str, str]] = []
        self.gate = gate
        self.in_flight = 0
        self.most_in_flight = 0

    async def perform(self, method: str, path: str, params: Any, body: Any, headers: Any) -> Any:
        self.calls.append((method, path))
        outcome = self.outcomes.pop(0)
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            if self.gate is not None:
                await asyncio.wait_for(self.gate.wait(), 5)
            else:
                await asyncio.sleep(0)
        finally:
            self.in_flight -= 1
        if isinstance(outcome, Exception):
            raise outcome
        return outcome


def sync_engine(outcomes: list[Any], retries: int = 0) -> tuple[Engine, Scripted, list[float]]:
    sleeps: list[float] = []
    transport = Scripted(outcomes)
    return Engine(ConnectionOptions("http://localhost:9200", max_retries=retries), INFO, transport,
                  sleep=sleeps.append), transport, sleeps


def async_engine(outcomes: list[Any], retries: int = 0,
                 gate: asyncio.Event | None = None) -> tuple[AsyncEngine, AsyncScripted, list[float]]:
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    transport = AsyncScripted(outcomes, gate)
    return AsyncEngine(ConnectionOptions("http://localhost:9200", max_retries=retries), INFO, transport,
                       sleep=sleep), transport, sleeps


def both(plan_factory: Any, outcomes: list[Any]) -> tuple[Any, Any]:
    """The result (or the error) of the same plan under each driver, with the same answers."""
    out = []
    for is_async in (False, True):
        try:
            if is_async:
                engine, _, _ = async_engine(list(outcomes))
                out.append(asyncio.run(run_async(plan_factory(), engine)))
            else:
                sync, _, _ = sync_engine(list(outcomes))
                out.append(run(plan_factory(), sync))
        except Exception as err:  # compared below
            out.append((type(err), str(err)))
    return out[0], out[1]


def test_identification_falls_back_to_nodes_info_under_both_drivers() -> None:
    nodes = {"cluster_name": "c", "nodes": {"n": {"version": "8.19.0", "build_flavor": "default"}}}
    refused = _HttpError(405, {"error": "Incorrect HTTP method for uri [/]"})
    sync, async_ = both(lambda: identify_plan("identifying"), [refused, nodes])
    assert sync == async_ and sync.distribution == "elasticsearch" and sync.version == (8, 19, 0)
    sync, async_ = both(lambda: identify_plan("identifying", es7_client=True), [refused, refused])
    assert sync == async_ and sync[0] is ConfigurationError and "product check" in sync[1]


def test_an_error_is_raised_inside_the_plan_where_it_can_be_caught() -> None:
    def plan() -> Plan[str]:
        try:
            yield Call("GET", "/missing/_mapping", context="reading the mapping of 'missing'")
        except IndexNotFoundError as err:
            second = yield Call("GET", "/")
            return f"caught: {err}; then {second['cluster_name']}"
        return "not raised"

    missing = _HttpError(404, {"error": {"type": "index_not_found_exception", "reason": "no such index [missing]"}})
    sync, async_ = both(plan, [missing, ROOT])
    assert sync == async_ == ("caught: reading the mapping of 'missing': index_not_found_exception: "
                              "no such index [missing]; then c")


def test_uncaught_errors_are_the_same_under_both_drivers() -> None:
    def plan() -> Plan[Any]:
        return (yield Call("GET", "/x/_search", context="searching 'x'"))

    sync, async_ = both(plan, [_Unreachable("[Errno 111] Connection refused")])
    assert sync == async_ and sync[0] is EngineUnavailableError
    assert sync[1] == ("searching 'x': cannot reach the engine at http://localhost:9200 (Connection refused); "
                       "check the URL, that the engine is running, and TLS/auth options")


def test_gather_runs_concurrently_under_asyncio_and_returns_in_order() -> None:
    async def main() -> tuple[list[Any], int]:
        gate = asyncio.Event()
        engine, transport, _ = async_engine([{"n": 1}, {"n": 2}, {"n": 3}], gate=gate)

        def one(path: str) -> Plan[Any]:
            return (yield Call("GET", path))

        def plan() -> Plan[list[Any]]:
            return (yield gather(one("/a"), one("/b"), one("/c")))

        task = asyncio.create_task(run_async(plan(), engine))
        for _ in range(500):  # all three come to wait on the gate at once (bounded: 0.5 s at most)
            if transport.in_flight == 3:
                break
            await asyncio.sleep(0.001)
        gate.set()
        return await task, transport.most_in_flight

    results, most = asyncio.run(main())
    assert results == [{"n": 1}, {"n": 2}, {"n": 3}] and most == 3


@pytest.mark.parametrize("pool", [False, True])
def test_gather_raises_the_first_failure_in_order_after_every_plan_ended(pool: bool) -> None:
    ended: list[str] = []

    def one(name: str, fail: bool) -> Plan[str]:
        try:
            yield Offload(lambda: None)
            if fail:
                raise ValueError(f"{name} failed")
            return name
        finally:
            ended.append(name)

    def plan() -> Plan[Any]:
        return (yield gather(one("a", False), one("b", True), one("c", True)))

    engine, _, _ = sync_engine([])
    with ThreadPoolExecutor(2) as executor:
        with pytest.raises(ValueError, match="^b failed$"):
            run(plan(), engine, (lambda: executor) if pool else None)
    if pool:
        assert sorted(ended) == ["a", "b", "c"]
    ended.clear()
    async_, _, _ = async_engine([])
    with pytest.raises(ValueError, match="^b failed$"):
        asyncio.run(run_async(plan(), async_))
    assert sorted(ended) == ["a", "b", "c"]


def test_offload_runs_in_place_synchronously_and_on_a_worker_thread_under_asyncio() -> None:
    def plan() -> Plan[tuple[int, int]]:
        here = threading.get_ident()
        there = yield Offload(threading.get_ident)
        return here, there

    engine, _, _ = sync_engine([])
    here, there = run(plan(), engine)
    assert here == there
    async_, _, _ = async_engine([])
    here, there = asyncio.run(run_async(plan(), async_))
    assert here != there


def test_small_work_stays_in_the_event_loop() -> None:
    def plan() -> Plan[tuple[int, int]]:
        here = threading.get_ident()
        there = yield Offload(threading.get_ident, small=True)
        return here, there

    async_, _, _ = async_engine([])
    here, there = asyncio.run(run_async(plan(), async_))
    assert here == there


def test_an_async_callable_is_awaited_under_asyncio_and_refused_clearly_without() -> None:
    async def augmenter() -> list[tuple[str, float]]:
        await asyncio.sleep(0)
        return [("variant", 0.5)]

    def plan() -> Plan[Any]:
        return (yield Offload(partial(augmenter)))

    async_, _, _ = async_engine([])
    assert asyncio.run(run_async(plan(), async_)) == [("variant", 0.5)]
    engine, _, _ = sync_engine([])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the coroutine is closed, never left un-awaited
        with pytest.raises(ConfigurationError) as err:
            run(plan(), engine)
    message = str(err.value)
    assert message.startswith("test_an_async_callable_is_awaited_under_asyncio_and_refused_clearly_without.<locals>"
                              ".augmenter is asynchronous") and "AsyncReranker" in message and "\n" not in message


def test_exclusive_plans_never_overlap_under_asyncio() -> None:
    lock = PlanLock()
    inside = [0]
    most = [0]

    def critical() -> Plan[None]:
        inside[0] += 1
        most[0] = max(most[0], inside[0])
        yield Call("GET", "/")
        inside[0] -= 1

    def plan() -> Plan[Any]:
        return (yield gather(*(Exclusive_(lock, critical()) for _ in range(4))))

    def Exclusive_(lk: PlanLock, p: Plan[None]) -> Plan[Any]:  # noqa: N802 - reads as the step it yields
        return (yield Exclusive(lk, p))

    async def main() -> int:
        engine, transport, _ = async_engine([ROOT] * 4)
        await run_async(plan(), engine)
        return transport.most_in_flight

    assert asyncio.run(main()) == 1 and most[0] == 1
    # and a second event loop gets a lock of its own
    assert asyncio.run(main()) == 1


def test_the_sync_driver_refuses_an_async_engine_in_one_line() -> None:
    engine, _, _ = async_engine([ROOT])

    def plan() -> Plan[Any]:
        return (yield Call("GET", "/"))

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ConfigurationError) as err:
            run(plan(), engine)  # type: ignore[arg-type]
    assert "AsyncEngine is asynchronous" in str(err.value) and "\n" not in str(err.value)


def test_async_engine_retries_429_and_503_then_succeeds_without_blocking() -> None:
    engine, transport, sleeps = async_engine([_HttpError(429, {}), _HttpError(503, {}), {"ok": True}], retries=3)
    assert asyncio.run(engine.request("GET", "/")) == {"ok": True}
    assert len(transport.calls) == 3
    assert len(sleeps) == 2 and sleeps[1] > sleeps[0] * 0.7


def test_async_engine_errors_are_the_sync_engines() -> None:
    outcomes = [_HttpError(400, {"error": {"type": "mapper_parsing_exception", "reason": "failed to parse [x]"},
                                 "status": 400})]
    sync, _, _ = sync_engine(list(outcomes))
    async_, _, _ = async_engine(list(outcomes))
    with pytest.raises(EngineError) as s_err:
        sync.request("PUT", "/i/_doc/1", body={"x": 1}, context="indexing")
    with pytest.raises(EngineError) as a_err:
        asyncio.run(async_.request("PUT", "/i/_doc/1", body={"x": 1}, context="indexing"))
    assert type(s_err.value) is type(a_err.value) and str(s_err.value) == str(a_err.value)
    assert (a_err.value.status, a_err.value.error_type) == (400, "mapper_parsing_exception")


def test_aiohttp_connection_failures_read_like_the_sync_clients() -> None:
    refused = ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 1)")
    wrapped = RuntimeError("Cannot connect to host 127.0.0.1:1 ssl:default")
    wrapped.__cause__ = refused
    assert _short_reason(_unreachable(wrapped)) == "Connection refused"
    timeout = RuntimeError("TIMEOUT")
    timeout.__context__ = asyncio.TimeoutError()
    assert _short_reason(_unreachable(timeout)) == "timed out"


def test_missing_aiohttp_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "aiohttp" or m.startswith("aiohttp.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "aiohttp", None)
    real = transports.importlib.util.find_spec
    monkeypatch.setattr(transports.importlib.util, "find_spec",
                        lambda name, *a: None if name == "aiohttp" else real(name, *a))
    with pytest.raises(ConfigurationError) as err:
        asyncio.run(AsyncEngine.connect("http://127.0.0.1:9"))
    assert str(err.value) == ("esbridge's asynchronous API needs the 'aiohttp' client library, which is not "
                              'installed: pip install "esbridge[async]"')


def test_clients_of_the_wrong_kind_are_refused_clearly() -> None:
    from opensearchpy import AsyncOpenSearch, OpenSearch

    sync_client = OpenSearch(hosts=["http://127.0.0.1:9"])
    with pytest.raises(ConfigurationError, match="OpenSearch is synchronous; AsyncEngine needs"):
        asyncio.run(AsyncEngine.connect(sync_client))

    async def refuse_async() -> None:
        client = AsyncOpenSearch(hosts=["http://127.0.0.1:9"])
        try:
            with pytest.raises(ConfigurationError, match="use esbridge.aio.AsyncEngine"):
                Engine.connect(client)
        finally:
            await client.close()

    asyncio.run(refuse_async())
    with pytest.raises(ConfigurationError, match="cannot use a builtins.dict as an asynchronous engine client"):
        asyncio.run(AsyncEngine.connect({"hosts": ["http://127.0.0.1:9"]}))


def test_async_requests_carry_the_preference_and_refuse_answers_with_failed_shards() -> None:
    """The asynchronous engine sends the same shard-copy preference and retries, then refuses,
    an answer some of whose shards failed, word for word as the synchronous one."""
    partial = {"_shards": {"total": 3, "successful": 2, "failed": 1,
                           "failures": [{"shard": 1, "index": "i",
                                         "reason": {"type": "node_not_connected_exception", "reason": "gone"}}]},
               "hits": {"hits": []}}
    whole = {"_shards": {"total": 3, "successful": 3, "failed": 0}, "hits": {"hits": [{"_id": "a"}]}}
    engine, transport, sleeps = async_engine([partial, whole], retries=1)
    got = asyncio.run(engine.search("i", {}))
    assert got["hits"]["hits"] == [{"_id": "a"}] and len(sleeps) == 1
    assert [p for _, p in transport.calls] == ["/i/_search?preference=esbridge"] * 2
    engine, transport, _ = async_engine([partial, partial], retries=1)
    with pytest.raises(EngineError) as err:
        asyncio.run(engine.search("i", {}))
    sync, _, _ = sync_engine([partial, partial], retries=1)
    with pytest.raises(EngineError) as sync_err:
        sync.search("i", {})
    assert str(err.value) == str(sync_err.value) and "1 of 3 shards failed" in str(err.value)
    assert err.value.error_type == "shard_failure"
