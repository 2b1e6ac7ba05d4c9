"""Injected network faults between esbridge and a real engine: nothing lost, nothing doubled,
every failure one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from esbridge.cli import main
from esbridge.engine.client import ConnectionOptions, Engine
from esbridge.errors import EngineUnavailableError, IngestError
from esbridge.ingest import ingest, read_jsonl
from tests.netfaults import Fault, fault_proxy

N_DOCS = 40
CHUNK = 10  # four bulk requests


def _docs(tmp_path: Path, n: int = N_DOCS) -> Path:
    src = tmp_path / "docs.jsonl"
    src.write_text("".join(json.dumps({"_id": f"d{i}", "title": f"title {i}", "text": f"body of document {i}"}) + "\n"
                           for i in range(n)))
    return src


def _through(url: str, **kw: object) -> Engine:
    opts = {"max_retries": 3, "backoff": 0.01, "timeout": 10.0}
    opts.update(kw)
    return Engine.connect(ConnectionOptions(url=url, **opts))  # type: ignore[arg-type]


def _bulk(fault: Fault, which: set[int]):  # type: ignore[no-untyped-def]
    return lambda method, path, n: fault if path == "/_bulk" and n in which else None


@pytest.mark.parametrize("name,policy", [
    ("whole-request 429", _bulk(Fault("status", status=429), {0, 1, 2})),
    ("per-item 429", _bulk(Fault("item_429", items=7), {0, 2})),
    ("reset before forwarding", _bulk(Fault("reset_before"), {1, 3})),
    ("reset after forwarding", _bulk(Fault("reset_after"), {0, 2})),
    ("503 then slow", lambda m, p, n: (Fault("status", status=503) if p == "/_bulk" and n == 0 else
                                       Fault("delay", seconds=0.3) if p == "/_bulk" else None)),
])
def test_ingestion_survives_transient_faults_exactly_once(engine: Engine, index_name: str, tmp_path: Path,
                                                          name: str, policy) -> None:  # type: ignore[no-untyped-def]
    with fault_proxy(engine.options.url, policy) as (url, log):
        proxied = _through(url)
        report = ingest(proxied, index_name, read_jsonl(_docs(tmp_path)), progress=False, chunk_docs=CHUNK,
                        backoff=0.01)
        proxied.close()
    assert log.faults, f"{name}: no fault was injected"
    assert report.ok and report.indexed == N_DOCS and report.present == N_DOCS
    engine.refresh(index_name)
    assert engine.count(index_name) == N_DOCS


def test_engine_lost_mid_ingest_reports_what_was_done_and_a_rerun_finishes(engine: Engine, index_name: str,
                                                                        tmp_path: Path) -> None:
    src = _docs(tmp_path)
    dead_after_two = _bulk(Fault("reset_before"), set(range(2, 100)))
    with fault_proxy(engine.options.url, dead_after_two) as (url, _log):
        proxied = _through(url, max_retries=1)
        with pytest.raises(IngestError) as info:
            ingest(proxied, index_name, read_jsonl(src), progress=False, chunk_docs=CHUNK)
        proxied.close()
    err = info.value
    assert "stopped after 20 of the 30 documents read" in str(err) and "re-run" in str(err)
    assert "\n" not in str(err)
    assert err.report is not None and err.report.indexed == 20
    engine.refresh(index_name)
    assert engine.count(index_name) == 20
    again = ingest(engine, index_name, read_jsonl(src), progress=False, chunk_docs=CHUNK)
    assert again.present == N_DOCS and engine.count(index_name) == N_DOCS


def test_cli_index_against_a_dying_engine_prints_a_partial_report(engine: Engine, index_name: str, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    dead_after_one = _bulk(Fault("reset_before"), set(range(1, 100)))
    with fault_proxy(engine.options.url, dead_after_one) as (url, _log):
        # the command sends 500 documents a request: the first request succeeds, then the engine is gone
        code = main(["index", "--url", url, "--input", str(_docs(tmp_path, 1200)), "--index", index_name,
                     "--no-semantic", "--quiet", "--max-retries", "0"])
    err = capsys.readouterr().err
    assert code != 0
    assert "Traceback" not in err
    assert "partial: 500 of 1000 documents indexed" in err
    assert "stopped after 500 of the 1000 documents read" in err


def test_search_past_the_timeout_fails_in_one_line(engine: Engine, index_name: str, tmp_path: Path) -> None:
    ingest(engine, index_name, read_jsonl(_docs(tmp_path)), progress=False)
    slow = lambda m, p, n: Fault("delay", seconds=3.0) if p.endswith("/_search") else None  # noqa: E731
    with fault_proxy(engine.options.url, slow) as (url, _log):
        proxied = _through(url, timeout=1.0, max_retries=0)
        with pytest.raises(EngineUnavailableError) as info:
            proxied.search(index_name, {"query": {"match": {"text": "document"}}})
        proxied.close()
    assert "\n" not in str(info.value) and "cannot reach the engine" in str(info.value)
