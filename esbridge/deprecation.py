"""Former names of public parameters, still accepted with a :class:`DeprecationWarning`."""

from __future__ import annotations

import warnings
from typing import TypeVar

from esbridge.errors import ConfigurationError

T = TypeVar("T")


def renamed_keyword(where: str, new: str, value: T | None, old: str, old_value: T | None) -> T | None:
    """The value of keyword ``new`` of ``where`` (e.g. ``"Reranker.rescore"``), given either as
    ``new`` or under its former name ``old``, which warns (:class:`DeprecationWarning`, pointing
    at the caller of ``where``).  ``None`` is "not given".

    Raises:
        ConfigurationError: both names were given.
    """
    if old_value is None:
        return value
    if value is not None:
        raise ConfigurationError(f"{where}: give {new}= only ({old}= is its former name), not both")
    warnings.warn(f"{where}({old}=...) is deprecated; use {new}=...", DeprecationWarning, stacklevel=3)
    return old_value
