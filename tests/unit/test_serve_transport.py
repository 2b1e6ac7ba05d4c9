"""``esbridge serve`` at the HTTP level, without an engine: the command's errors when it cannot
listen, how deep a body nests."""

from __future__ import annotations

import socket

import pytest

from esbridge.serve.search import MAX_BODY_DEPTH, _Refused, check_depth, nesting_depth
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


@pytest.mark.parametrize("raw,depth", [
    (b"", 0),
    (b"{}", 1),
    (b'{"query": {"match": {"text": "x"}}, "size": [1, [2]]}', 3),
    (b'{"text": "[[[ {{{ brackets in a string ]]]"}', 1),
    (b'{"text": "an escaped quote \\" then [[["}', 1),
    (b'{"a": "never closed [[[', 1),
    (b"[" * 1000 + b"]" * 1000, 1000),
    (b'{"a":' * 150 + b"1" + b"}" * 150, 150),
    (b"]]][", 0),
])
def test_the_nesting_depth_of_a_body(raw: bytes, depth: int) -> None:
    assert nesting_depth(raw) == depth


def test_a_body_nested_too_deep_is_refused_before_it_is_parsed() -> None:
    check_depth(b"[" * MAX_BODY_DEPTH + b"]" * MAX_BODY_DEPTH)
    with pytest.raises(_Refused) as err:
        check_depth(b'{"q":' * 5000 + b"1" + b"}" * 5000)
    assert (err.value.status, err.value.error_type) == (400, "parsing_exception")
    assert "5000 levels deep" in err.value.reason and f"at most {MAX_BODY_DEPTH}" in err.value.reason
