"""A client transport that answers from a script, for unit tests of the engine layer."""

from __future__ import annotations

from typing import Any

from esbridge.engine.async_client import _AsyncTransport
from esbridge.engine.transports import _Transport


class ScriptedTransport(_Transport):
    """Answers each call with the next scripted outcome (an exception or a body)."""

    def __init__(self, outcomes: list[Any]) -> None:
        self.outcomes = list(outcomes)
        self.calls: list[tuple[str, str]] = []

    def perform(self, method: str, path: str, params: Any, body: Any, headers: Any) -> Any:
        self.calls.append((method, path))
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def close(self) -> None:
        pass


class AsyncScriptedTransport(_AsyncTransport):
    """:class:`ScriptedTransport` for the asynchronous engine."""

    def __init__(self, outcomes: list[Any]) -> None:
        self.owned = False
        self.outcomes = list(outcomes)
        self.calls: list[tuple[str, str]] = []

    async def perform(self, method: str, path: str, params: Any, body: Any, headers: Any) -> Any:
        self.calls.append((method, path))
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    async def close(self) -> None:
        pass
