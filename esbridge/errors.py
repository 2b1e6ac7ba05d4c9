"""Exceptions raised by esbridge.

Every error says what to fix.  Errors that come from the engine carry the
engine's own error type, reason and root cause, plus the index, document id or
Painless ``script_stack`` where there is one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


class EsbridgeError(Exception):
    """Base class of every esbridge error."""


class ConfigurationError(EsbridgeError, ValueError):
    """A parameter, option or input that esbridge cannot use; the message names it."""


class ProvisioningError(EsbridgeError):
    """A local engine could not be installed, started or stopped."""


class EngineError(EsbridgeError):
    """An error answered by the engine (or the failure to reach it).

    Attributes:
        status: HTTP status (``None`` when no answer came back).
        error_type: the engine's error type, e.g. ``index_not_found_exception``.
        reason: the engine's reason text.
        root_cause: the engine's ``root_cause`` list (may be empty).
        index: the index concerned, when the engine names one.
        script_stack: Painless's ``script_stack`` for script errors.
        body: the raw error body.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        error_type: str | None = None,
        reason: str | None = None,
        root_cause: Sequence[Mapping[str, Any]] = (),
        index: str | None = None,
        script_stack: Sequence[str] = (),
        body: Any = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.error_type = error_type
        self.reason = reason
        self.root_cause = list(root_cause)
        self.index = index
        self.script_stack = list(script_stack)
        self.body = body


class EngineUnavailableError(EngineError):
    """The engine could not be reached (connection refused, timeout, DNS, TLS)."""


class IndexNotFoundError(EngineError):
    """The named index does not exist."""


class UnsupportedEngineError(EsbridgeError):
    """The server is not a distribution or version esbridge can drive."""


class DatasetError(EsbridgeError):
    """A collection that cannot be read, downloaded or verified; the message says what to fix."""


class IngestError(EsbridgeError):
    """Documents that could not be read or indexed.

    Attributes:
        failures: one :class:`esbridge.ingest.DocumentFailure` per document.
        report: the :class:`esbridge.ingest.IngestReport` so far when indexing stopped
            part-way (``None`` otherwise).
    """

    def __init__(self, message: str, failures: Sequence[Any] = (), *, report: Any = None) -> None:
        super().__init__(message)
        self.failures = list(failures)
        self.report = report
