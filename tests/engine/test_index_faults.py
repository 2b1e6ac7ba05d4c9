"""`esbridge index` when the engine is lost part-way (faults injected by a loopback proxy between
esbridge and a real engine): the exit code says so, the message what was indexed and how to finish."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from esbridge.cli import EXIT_UNREACHABLE
from esbridge.engine.client import Engine
from tests.cli import run
from tests.netfaults import Fault, fault_proxy


@pytest.fixture
def prefix(engine: Engine) -> Iterator[str]:
    """A fresh name prefix; every index whose name starts with it is deleted after the test."""
    name = f"esb-test-{uuid.uuid4().hex[:10]}"
    yield name
    for row in engine.request("GET", f"/_cat/indices/{name}*", params={"format": "json", "h": "index"}):
        engine.delete_index(row["index"])


def _docs(tmp_path: Path, n: int) -> Path:
    src = tmp_path / "docs.jsonl"
    src.write_text("".join(json.dumps({"_id": f"d{i}", "title": f"title {i}", "text": f"body of document {i}"}) + "\n"
                           for i in range(n)))
    return src


def _indices(engine: Engine, prefix: str) -> dict[str, str]:
    """name -> UUID of every index of the test."""
    rows = engine.request("GET", f"/_cat/indices/{prefix}*", params={"format": "json", "h": "index,uuid"})
    return {row["index"]: row["uuid"] for row in rows}


def _bulk_after(first: int, fault: Fault):  # type: ignore[no-untyped-def]
    return lambda method, path, n: fault if path == "/_bulk" and n >= first else None


def test_engine_lost_mid_index_exits_unreachable_and_says_how_to_finish(
        engine: Engine, prefix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = _docs(tmp_path, 1200)
    with fault_proxy(engine.options.url, _bulk_after(1, Fault("reset_before"))) as (url, _log):
        # 500 documents a bulk request: the first is indexed, then the engine is gone
        code, out, err = run(capsys, "index", "--url", url, "--input", str(src), "--index", prefix, "--no-semantic",
                             "--no-store", "--quiet", "--max-retries", "0")
    assert code == EXIT_UNREACHABLE, err
    lines = err.strip().splitlines()
    assert lines[-2].startswith(f"partial: 500 of 1000 documents indexed into {prefix!r} in ")
    assert lines[-1].startswith(f"esbridge: error: indexing into {prefix!r} stopped after 500 of the 1000 documents "
                                "read so far were indexed: ")
    assert "cannot reach the engine" in lines[-1] and "re-run the same command to finish" in lines[-1]
    engine.refresh(prefix)
    assert engine.count(prefix) == 500
    code, _, err = run(capsys, "index", "--url", engine.options.url, "--input", str(src), "--index", prefix,
                       "--no-semantic", "--no-store", "--quiet")
    assert code == 0 and engine.count(prefix) == 1200, err
