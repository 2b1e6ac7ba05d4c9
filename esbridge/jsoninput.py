"""JSON given to esbridge (files, standard input, options, Python values): parsed and checked
for nesting depth in one place; and text checked before it is sent to the engine as JSON.

Deeply nested JSON would otherwise exhaust Python's recursion limit in the parser, in
``copy.deepcopy`` or in the serializer that sends it to the engine, and end in a
``RecursionError`` far from where it came in.  Every input is refused at the door instead, with
an error naming the input and the limit.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from esbridge.errors import ConfigurationError

#: Deepest nesting of objects and arrays esbridge accepts in JSON input.  Far above what a
#: search response, a query clause or an augmentation file needs (the engines' own mapping depth
#: limit is 20), and far below what Python's recursion limit lets its parser and copier handle.
MAX_JSON_DEPTH = 100


def _too_deep(what: str, limit: int) -> ConfigurationError:
    return ConfigurationError(f"{what} is nested more than {limit} levels deep (objects and arrays), esbridge's "
                              "limit for JSON input; pass a flatter value")


def check_depth(value: Any, what: str, *, limit: int = MAX_JSON_DEPTH) -> None:
    """Raise when ``value`` (mappings, lists and tuples, as parsed JSON is) nests deeper than
    ``limit``; ``what`` names the input in the error.  Walks without recursion.

    Raises:
        ConfigurationError: naming ``what`` and the limit.
    """
    stack: list[tuple[Any, int]] = [(value, 0)]
    deepest: dict[int, int] = {}  # a value shared by several parents is walked again only from deeper
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping):
            children: Any = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        if depth >= limit:
            raise _too_deep(what, limit)  # also a value that contains itself
        if deepest.get(id(item), -1) >= depth:
            continue
        deepest[id(item)] = depth
        stack.extend((child, depth + 1) for child in children)


def parse_json(text: str | bytes, what: str, *, limit: int = MAX_JSON_DEPTH, **kwargs: Any) -> Any:
    """``json.loads(text, **kwargs)``, refused when it nests deeper than ``limit``; ``what``
    names the input in the error.  Malformed JSON raises :class:`json.JSONDecodeError` as
    ``json.loads`` does, for the caller to word.

    Raises:
        ConfigurationError: the JSON nests too deeply.
    """
    try:
        value = json.loads(text, **kwargs)
    except RecursionError:
        raise _too_deep(what, limit) from None
    check_depth(value, what, limit=limit)
    return value


def check_text(text: str, what: str) -> str:
    """``text`` when the engine can be sent it: UTF-8 cannot encode a lone surrogate (half of a
    UTF-16 pair, e.g. ``"\\udc80"``, which ``surrogateescape`` decoding leaves in a string), and
    the engine refuses such a request with a parser error.

    Raises:
        ConfigurationError: naming ``what``, the text and the character.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        shown = text if len(text) <= 60 else text[:57] + "..."
        raise ConfigurationError(
            f"{what} {shown!r} holds a lone surrogate (U+{ord(text[err.start]):04X} at character {err.start}), "
            "which is not Unicode text; give valid text (was it read with the wrong encoding?)") from None
    return text
