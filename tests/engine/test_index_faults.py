"""`esbridge index` when the engine is lost or refuses part-way (faults injected by a loopback proxy
between esbridge and a real engine): the exit code says which, the message what was indexed and how
to finish, and `--recreate` leaves the index it was to replace unchanged."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from esbridge.cli.options import EXIT_ENGINE, EXIT_NOT_INDEXED, EXIT_UNREACHABLE
from esbridge.engine.client import Engine
from esbridge.ingest import ingest
from tests.cli import run
from tests.netfaults import Fault, fault_proxy

OLD = [{"_id": f"old{i}", "title": f"old {i}", "text": f"an old document {i}"} for i in range(5)]


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


@pytest.mark.parametrize("fault,expected,left", [
    (Fault("reset_before"), EXIT_UNREACHABLE, "is left: delete it"),  # the engine lost: the new index stays
    (Fault("status", status=400), EXIT_ENGINE, "was deleted"),         # a request refused: it is deleted
])
def test_recreate_stopped_part_way_leaves_the_index_unchanged(
        engine: Engine, prefix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        fault: Fault, expected: int, left: str) -> None:
    ingest(engine, prefix, OLD, progress=False, strict=True)
    before = _indices(engine, prefix)
    with fault_proxy(engine.options.url, _bulk_after(1, fault)) as (url, _log):
        code, _, err = run(capsys, "index", "--url", url, "--input", str(_docs(tmp_path, 1200)), "--index", prefix,
                           "--recreate", "--no-semantic", "--no-store", "--quiet", "--max-retries", "0")
    assert code == expected, err
    message = err.strip().splitlines()[-1]
    assert f"the new index that was to replace {prefix!r}, stopped after 500 of the 1000 documents" in message
    assert f"{prefix!r} is unchanged; the " in message and left in message
    assert "run the same command again to replace it" in message
    after = _indices(engine, prefix)
    assert after[prefix] == before[prefix] and engine.count(prefix) == len(OLD)
    assert engine.request("GET", f"/{prefix}/_alias")[prefix]["aliases"] == {}
    assert len(after) == (2 if expected == EXIT_UNREACHABLE else 1)


@pytest.fixture
def refusing(engine: Engine, prefix: str) -> Iterator[str]:
    """A prefix of index names whose every document the engine refuses: an index template makes
    the indices it matches require a routing value, which esbridge never sends."""
    engine.request("PUT", f"/_index_template/{prefix}", body={
        "index_patterns": [f"{prefix}-r*"], "priority": 500,
        "template": {"mappings": {"_routing": {"required": True}}}})
    yield f"{prefix}-r"
    engine.request("DELETE", f"/_index_template/{prefix}")


def test_recreate_whose_every_document_is_refused_keeps_the_old_index(
        engine: Engine, refusing: str, prefix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    engine.request("PUT", f"/_index_template/{prefix}-old", body={  # the old index is written as usual
        "index_patterns": [refusing], "priority": 600, "template": {"settings": {"number_of_shards": 1}}})
    try:
        ingest(engine, refusing, OLD, progress=False, strict=True)
    finally:
        engine.request("DELETE", f"/_index_template/{prefix}-old")
    before = _indices(engine, prefix)
    code, out, err = run(capsys, "index", "--url", engine.options.url, "--input", str(_docs(tmp_path, 30)),
                         "--index", refusing, "--recreate", "--no-semantic", "--no-store", "--quiet")
    assert code == EXIT_NOT_INDEXED, err
    assert "not indexed: line 1 (id 'd0'): rejected by the engine:" in err and "routing_missing_exception" in err
    assert re.match(rf"0 of 30 documents indexed into '{refusing}-\d{{14}}' in ", out), out  # the new index
    assert (f"30 failed; {refusing!r} is unchanged: not one document could be indexed, so the new index that was "
            "to replace it was deleted") in out
    assert _indices(engine, prefix) == before and engine.count(refusing) == len(OLD)


def test_a_new_index_none_of_whose_documents_is_indexed_is_not_left(
        engine: Engine, refusing: str, prefix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "index", "--url", engine.options.url, "--input", str(_docs(tmp_path, 3)),
                         "--index", refusing, "--no-semantic", "--no-store", "--quiet")
    assert code == EXIT_NOT_INDEXED and err.count("not indexed: ") == 3, err
    assert (f"3 failed; not one document could be indexed, so the index {refusing!r} created for them was "
            "deleted") in out
    assert _indices(engine, prefix) == {}
