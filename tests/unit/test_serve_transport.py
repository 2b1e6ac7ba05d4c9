"""``esbridge serve`` at the HTTP level, without an engine: the command's errors when it cannot
listen."""

from __future__ import annotations

import socket

import pytest

from tests.cli import run


def test_a_port_in_use_is_one_line_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, out, err = run(capsys, "serve", "--url", "http://127.0.0.1:1", "--port", str(port))
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [
        f"esbridge: error: port {port} on 127.0.0.1 is already in use (another esbridge serve, the engine, or another "
        "program listens there): stop that program, or give another --port (--port 0 takes a free one)"]
    assert "Traceback" not in err
