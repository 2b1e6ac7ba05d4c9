"""An index's facts as the engine's answers give them (each plan driven by hand, no engine)."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from esbridge.engine.plan import Call
from esbridge.errors import ConfigurationError, EngineError
from esbridge.index.facts import (
    identity_plan,
    index_key_plan,
    max_result_window_plan,
    refresh_interval_plan,
    similarity_plan,
    uuids_plan,
)


def answer(plan: Generator[Any, Any, Any], response: Any) -> tuple[Call, Any]:
    """The one request ``plan`` sends, and what it returns given ``response`` (an exception is raised
    into the plan, as the drivers do)."""
    call = next(plan)
    assert isinstance(call, Call)
    try:
        plan.throw(response) if isinstance(response, BaseException) else plan.send(response)
    except StopIteration as done:
        return call, done.value
    raise AssertionError("the plan sent a second request")


def _uuid(u: str) -> dict[str, Any]:
    return {"settings": {"index": {"uuid": u}}}


def test_identity_from_the_uuids() -> None:
    call, got = answer(uuids_plan("logs-*"), {"logs-1": _uuid("B"), "logs-0": _uuid("A")})
    assert call.path == "/logs-*/_settings/index.uuid" and got == {"logs-1": "B", "logs-0": "A"}
    assert answer(index_key_plan("docs"), {"docs-v2": _uuid("Zx_9-a")})[1] == "Zx_9-a"
    several = answer(index_key_plan("alias"), {"a": _uuid("A"), "b": _uuid("B")})[1]
    assert several.startswith("multi-") and several == answer(index_key_plan("x"), {"b": _uuid("B"),
                                                                                     "a": _uuid("A")})[1]
    assert answer(index_key_plan("x"), {"a": _uuid("../etc")})[1].startswith("multi-")  # never a path


def test_state_from_stats() -> None:
    stats = {"_all": {"primaries": {"docs": {"count": 5, "deleted": 1},
                                    "indexing": {"index_total": 7, "delete_total": 2}}},
             "indices": {"b": {"uuid": "U2"}, "a": {"uuid": "U1"}}}
    assert answer(identity_plan("alias"), stats)[1] == ("a:U1,b:U2", (5, 1, 7, 2))


def test_settings() -> None:
    two = {"a": {"settings": {"index": {"refresh_interval": "30s", "max_result_window": "500"}}},
           "b": {"defaults": {"index": {"refresh_interval": "1s", "max_result_window": "10000"}}}}
    assert answer(refresh_interval_plan("x"), two)[1] == 1.0
    assert answer(max_result_window_plan("x"), two)[1] == 500  # the lowest of an alias's indices
    assert answer(refresh_interval_plan("x"), {"a": {"settings": {"index": {"refresh_interval": "-1"}}}})[1] == 0.0
    assert answer(max_result_window_plan("x"), {})[1] == 10_000
    with pytest.raises(ConfigurationError, match="'soon' is not a time value"):
        answer(refresh_interval_plan("x"), {"a": {"settings": {"index": {"refresh_interval": "soon"}}}})


def test_similarity() -> None:
    custom = {"a": {"settings": {"index": {"similarity": {"default": {"type": "BM25", "k1": "0.9", "b": "0.4"}}}}}}
    assert answer(similarity_plan("x"), custom)[1] == {"type": "BM25", "k1": 0.9, "b": 0.4}
    assert answer(similarity_plan("x"), {"a": {"settings": {}}})[1] == {"type": "BM25", "k1": 1.2, "b": 0.75}
    refused = EngineError("forbidden", status=403)
    assert answer(similarity_plan("x"), refused)[1] == {"type": "BM25", "k1": 1.2, "b": 0.75}
