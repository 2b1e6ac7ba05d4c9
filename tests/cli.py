"""Running the ``esbridge`` command in-process for the tests."""

from __future__ import annotations

import io
import sys

import pytest

from esbridge.cli.main import main


def run(capsys: pytest.CaptureFixture[str], *argv: str,
        stdin: str | io.StringIO | None = None) -> tuple[int, str, str]:
    """``esbridge *argv`` with ``stdin`` (text, or a stream such as a fake terminal) as standard
    input; returns the exit code, standard output and standard error."""
    old = sys.stdin
    if stdin is not None:
        sys.stdin = io.StringIO(stdin) if isinstance(stdin, str) else stdin
    try:
        code = main(list(argv))
    finally:
        sys.stdin = old
    out, err = capsys.readouterr()
    return code, out, err
