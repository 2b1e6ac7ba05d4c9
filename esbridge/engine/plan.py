"""The engine-facing steps of esbridge's pipeline, written once, run with or without asyncio.

A *plan* is a generator that yields the steps it needs and receives their results:

* :class:`Call`: one engine request (the arguments of :meth:`esbridge.engine.client.Engine.request`);
  the plan receives the parsed response, or the request's error is raised inside the plan, where
  it can be caught like any exception;
* :class:`Gather`: several plans at once; the plan receives their results in order;
* :class:`Offload`: a blocking function (CPU-heavy scoring, disk reads and writes, a caller's
  augmenter); the plan receives its result;
* :class:`Exclusive`: a plan that must not overlap with another one holding the same
  :class:`PlanLock`.

A plan returns its value (``return`` in a generator).  Two drivers run plans:

* :func:`run` with a synchronous :class:`~esbridge.engine.client.Engine`: requests one after
  another in the calling thread, a :class:`Gather` on a thread pool (when one is given), an
  :class:`Offload` in place, an :class:`Exclusive` under a ``threading.Lock``;
* :func:`run_async` with an :class:`~esbridge.engine.async_client.AsyncEngine`: requests awaited
  on the event loop, a :class:`Gather` with ``asyncio.gather``, an :class:`Offload` on a worker
  thread (so the event loop is not blocked), an :class:`Exclusive` under an ``asyncio.Lock``.

So the query → analysis → first stage → candidates → features → scores path exists once
(:mod:`esbridge.rerank`, :mod:`esbridge.features`), and the synchronous and asynchronous APIs
send the same requests and compute the same results.  Plans hold no lock while they wait for a
step: the caches' own locks are only taken around dictionary updates.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import threading
import weakref
from collections.abc import Callable, Generator, Mapping, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from esbridge.errors import ConfigurationError

T = TypeVar("T")


@dataclass(frozen=True)
class Call:
    """One engine request: the arguments of :meth:`~esbridge.engine.client.Engine.request`."""

    method: str
    path: str
    params: Mapping[str, Any] | None = None
    body: Any = None
    ndjson: bool = False
    context: str = ""
    retry: bool = True


@dataclass(frozen=True)
class Gather:
    """Run ``plans`` concurrently; the result is the list of their results, in order.

    Every plan runs to its end; if some fail, the first failure in order is raised."""

    plans: tuple[Plan[Any], ...]


@dataclass(frozen=True)
class Offload:
    """Call ``fn()``, a blocking function; the result is its return value.  Under asyncio it
    runs on a worker thread (``small``: in the event loop's, the work taking less than handing it
    to a thread and back); a result that is awaitable (an ``async`` callable's) is awaited."""

    fn: Callable[[], Any]
    small: bool = False


class PlanLock:
    """A lock for :class:`Exclusive`: a ``threading.Lock`` for the synchronous driver and, per
    event loop, an ``asyncio.Lock`` for the asynchronous one (a thread lock is never held while
    a coroutine waits)."""

    def __init__(self) -> None:
        self.thread = threading.Lock()
        self._guard = threading.Lock()  # only around the lookup below, never while waiting
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = \
            weakref.WeakKeyDictionary()

    def for_loop(self) -> asyncio.Lock:
        """The ``asyncio.Lock`` of the running event loop."""
        loop = asyncio.get_running_loop()
        with self._guard:
            lock = self._loops.get(loop)
            if lock is None:
                lock = self._loops[loop] = asyncio.Lock()
        return lock


@dataclass(frozen=True)
class Exclusive:
    """Run ``plan`` while holding ``lock``; the result is the plan's."""

    lock: PlanLock
    plan: Plan[Any]


Step = Call | Gather | Offload | Exclusive
#: A plan returning ``T``: yields :data:`Step` values, receives their results.
Plan = Generator[Step, Any, T]


def gather(*plans: Plan[Any]) -> Gather:
    """A :class:`Gather` of ``plans``."""
    return Gather(tuple(plans))


class SyncRequester(Protocol):
    """What :func:`run` needs of an engine: :meth:`~esbridge.engine.client.Engine.request`."""

    def request(self, method: str, path: str, *, params: Mapping[str, Any] | None = None, body: Any = None,
                ndjson: bool = False, context: str = "", retry: bool = True) -> Any: ...


class AsyncRequester(Protocol):
    """What :func:`run_async` needs of an engine: an awaitable ``request``."""

    async def request(self, method: str, path: str, *, params: Mapping[str, Any] | None = None,
                      body: Any = None, ndjson: bool = False, context: str = "", retry: bool = True) -> Any: ...


def _unknown(step: object) -> ConfigurationError:
    return ConfigurationError(f"a plan yielded {type(step).__name__}, which is not a plan step "
                              "(Call, Gather, Offload or Exclusive)")


def run(plan: Plan[T], engine: SyncRequester, pool: Callable[[], Executor] | None = None) -> T:
    """Run ``plan`` against a synchronous engine and return its result.

    Args:
        pool: where the plans of a :class:`Gather` run side by side (called when one is met;
            the last plan of a gather runs in the calling thread); ``None``: one after another.
            Plans run on the pool gather sequentially (no nesting on the same pool).
    """
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = plan.send(value) if error is None else plan.throw(error)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        finally:
            error = None
        try:
            value = _perform(step, engine, pool)
        except BaseException as err:  # the plan sees the step's failure where it asked for it
            value, error = None, err


def _perform(step: Step, engine: SyncRequester, pool: Callable[[], Executor] | None) -> Any:
    if isinstance(step, Call):
        got = engine.request(step.method, step.path, params=step.params, body=step.body, ndjson=step.ndjson,
                             context=step.context, retry=step.retry)
        if inspect.isawaitable(got):
            _discard(got)
            raise ConfigurationError(
                f"{type(engine).__name__} is asynchronous; use esbridge.aio (AsyncReranker) with it, "
                "or connect a synchronous Engine")
        return got
    if isinstance(step, Gather):
        return _gather_sync(step.plans, engine, pool)
    if isinstance(step, Offload):
        got = step.fn()
        if inspect.isawaitable(got):
            _discard(got)
            raise ConfigurationError(
                f"{_name(step.fn)} is asynchronous (it returned an awaitable); use it with esbridge.aio's "
                "AsyncReranker, or pass a plain function")
        return got
    if isinstance(step, Exclusive):
        with step.lock.thread:
            return run(step.plan, engine, pool)
    raise _unknown(step)


def _gather_sync(plans: Sequence[Plan[Any]], engine: SyncRequester,
                 pool: Callable[[], Executor] | None) -> list[Any]:
    if pool is None or len(plans) < 2:
        return [run(p, engine) for p in plans]
    executor = pool()
    # each in a copy of this thread's context (its forwarded headers, esbridge.engine.client.forwarded_headers)
    futures: list[Future[Any]] = [executor.submit(contextvars.copy_context().run, run, p, engine)
                                  for p in plans[:-1]]
    outcomes: list[tuple[Any, BaseException | None]] = []
    try:
        outcomes_last: tuple[Any, BaseException | None] = (run(plans[-1], engine), None)
    except BaseException as err:
        outcomes_last = (None, err)
    for fut in futures:
        try:
            outcomes.append((fut.result(), None))
        except BaseException as err:
            outcomes.append((None, err))
    outcomes.append(outcomes_last)
    for _, failure in outcomes:  # every plan has ended; the first failure in order is raised
        if failure is not None:
            raise failure
    return [value for value, _ in outcomes]


async def run_async(plan: Plan[T], engine: AsyncRequester) -> T:
    """Run ``plan`` against an asynchronous engine and return its result."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = plan.send(value) if error is None else plan.throw(error)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        finally:
            error = None
        try:
            value = await _perform_async(step, engine)
        except BaseException as err:  # includes cancellation: the plan's finally blocks run
            value, error = None, err


async def _perform_async(step: Step, engine: AsyncRequester) -> Any:
    if isinstance(step, Call):
        return await engine.request(step.method, step.path, params=step.params, body=step.body,
                                    ndjson=step.ndjson, context=step.context, retry=step.retry)
    if isinstance(step, Gather):
        got = await asyncio.gather(*(run_async(p, engine) for p in step.plans), return_exceptions=True)
        for item in got:
            if isinstance(item, BaseException):
                raise item
        return list(got)
    if isinstance(step, Offload):
        out = step.fn() if step.small else await asyncio.to_thread(step.fn)
        if inspect.isawaitable(out):
            out = await out
        return out
    if isinstance(step, Exclusive):
        async with step.lock.for_loop():
            return await run_async(step.plan, engine)
    raise _unknown(step)


def _discard(awaitable: Any) -> None:
    close = getattr(awaitable, "close", None)
    if close is not None:
        close()  # no "never awaited" warning for a coroutine nobody will run


def _name(fn: Any) -> str:
    fn = getattr(fn, "func", fn)  # a functools.partial's function
    return str(getattr(fn, "__qualname__", None) or type(fn).__name__)
