"""Headers forwarded with every request of a context (esbridge.engine.calls.forwarded_headers):
what ``esbridge serve`` sends each caller's credentials with."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from esbridge.engine.calls import forwarded_headers, request_target
from esbridge.engine.plan import Call, Plan, gather, run, run_async


class Recorder:
    """An engine that answers every request with the headers it would send."""

    def __init__(self) -> None:
        self.threads: set[str] = set()

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        self.threads.add(threading.current_thread().name)
        return request_target(path, kwargs.get("params"), bool(kwargs.get("ndjson")))[1]

    async def arequest(self, method: str, path: str, **kwargs: Any) -> Any:
        await asyncio.sleep(0)
        return request_target(path, kwargs.get("params"), bool(kwargs.get("ndjson")))[1]


def ask(path: str) -> Plan[Any]:
    return (yield Call("GET", path))


def both() -> Plan[Any]:
    return (yield gather(ask("/a"), ask("/b"), ask("/c")))


def test_the_headers_of_the_block_and_only_those() -> None:
    assert request_target("/x", None, True)[1] == {"content-type": "application/x-ndjson"}
    with forwarded_headers({"authorization": "Basic abc"}):
        assert request_target("/x", None, True)[1] == {"content-type": "application/x-ndjson",
                                                       "authorization": "Basic abc"}
        with forwarded_headers({"authorization": "Bearer other"}):
            assert request_target("/x", None, False)[1] == {"authorization": "Bearer other"}
        assert request_target("/x", None, False)[1] == {"authorization": "Basic abc"}
    assert request_target("/x", None, False)[1] == {}


def test_plans_run_on_a_pool_carry_them() -> None:
    engine = Recorder()
    with ThreadPoolExecutor(max_workers=3, thread_name_prefix="pool") as pool:
        with forwarded_headers({"authorization": "ApiKey k"}):
            answers = run(both(), engine, lambda: pool)
        assert answers == [{"authorization": "ApiKey k"}] * 3
        assert any(name.startswith("pool") for name in engine.threads)
        assert run(both(), engine, lambda: pool) == [{}] * 3


def test_concurrent_tasks_keep_their_own() -> None:
    class AsyncRecorder:
        async def request(self, method: str, path: str, **kwargs: Any) -> Any:
            return await Recorder().arequest(method, path, **kwargs)

    async def one(token: str) -> Any:
        with forwarded_headers({"authorization": token}):
            return await run_async(both(), AsyncRecorder())

    async def main() -> list[Any]:
        return await asyncio.gather(*(one(f"Bearer {i}") for i in range(5)))

    assert asyncio.run(main()) == [[{"authorization": f"Bearer {i}"}] * 3 for i in range(5)]
