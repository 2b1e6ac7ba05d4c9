"""The one check of JSON input's nesting depth, and of text sent to the engine (no engine)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from esbridge.errors import ConfigurationError
from esbridge.jsoninput import MAX_JSON_DEPTH, check_depth, check_text, parse_json


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for level in range(depth):
        value = {"k": value} if level % 2 else [value]
    return value


@pytest.mark.parametrize("depth", [0, 1, MAX_JSON_DEPTH])
def test_values_up_to_the_limit_pass(depth: int) -> None:
    value = nested(depth)
    check_depth(value, "x")
    assert parse_json(json.dumps(value), "x") == value


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 5_000, 1_000_000])
def test_deeper_values_are_refused_naming_the_input_and_the_limit(depth: int) -> None:
    value = nested(depth)
    with pytest.raises(ConfigurationError, match=r"^the thing is nested more than 100 levels deep"):
        check_depth(value, "the thing")
    text = "[" * depth + "]" * depth
    with pytest.raises(ConfigurationError, match=r"^the file 'f' is nested more than 100 levels deep") as info:
        parse_json(text, "the file 'f'")
    assert "\n" not in str(info.value)


def test_a_value_that_contains_itself_is_refused_and_a_shared_one_is_walked_once() -> None:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    with pytest.raises(ConfigurationError, match="nested more than"):
        check_depth(loop, "loop")
    shared: list[Any] = []
    for _ in range(60):  # 2**60 paths through the same lists
        shared = [shared, shared]
    check_depth(shared, "shared")


def test_malformed_json_is_left_to_the_caller_to_word() -> None:
    with pytest.raises(json.JSONDecodeError):
        parse_json('{"a": ', "x")
    assert parse_json('{"a": [1]}', "x", object_pairs_hook=lambda kv: kv) == [("a", [1])]


def test_the_limit_is_the_callers_to_choose() -> None:
    check_depth(nested(3), "x", limit=3)
    with pytest.raises(ConfigurationError, match="more than 2 levels"):
        check_depth(nested(3), "x", limit=2)


def test_text_with_a_lone_surrogate_is_refused_naming_it() -> None:
    assert check_text("glucose é 🙂", "query text") == "glucose é 🙂"
    with pytest.raises(ConfigurationError) as info:
        check_text("glucose \udc80 levels", "query text")
    message = str(info.value)
    assert message.startswith("query text 'glucose \\udc80 levels' holds a lone surrogate (U+DC80 at character 8)")
    assert "\n" not in message
