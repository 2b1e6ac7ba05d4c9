"""Injected network faults between esbridge and a real engine: nothing lost, nothing doubled,
every failure one line, and only esbridge's errors."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from esbridge.aio import AsyncEngine, AsyncReranker
from esbridge.cli.main import main
from esbridge.engine.client import ConnectionOptions, Engine
from esbridge.errors import EngineError, EngineUnavailableError, EsbridgeError, IngestError
from esbridge.ingest import ingest, read_jsonl
from esbridge.rerank import Reranker
from tests.cli import run
from tests.netfaults import Fault, fault_proxy
from tests.smallindex import create_small_index

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


#: Answers a proxy or load balancer may cut or replace: each must end in one esbridge error naming
#: the request, from the API and the command line, whatever the client library.
UNREADABLE = {
    "truncated": Fault("truncate", items=9),  # '{"took":1' or '{"hits":[' with its own length
    "binary": Fault("body", body=bytes(range(256)) * 4),
    "html": Fault("body", body=b"<html><body>\n<h1>502 Bad Gateway</h1>\n</body></html>"),
    "deep": Fault("body", body=b"[" * 100_000 + b"]" * 100_000),
}


@pytest.mark.parametrize("endpoint", ["_search", "_termvectors", "_mtermvectors"])
@pytest.mark.parametrize("kind", list(UNREADABLE))
def test_an_unreadable_answer_is_one_esbridge_error_naming_the_request(engine: Engine, tmp_path: Path, kind: str,
                                                                      endpoint: str, monkeypatch: pytest.MonkeyPatch,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("ESBRIDGE_CA_CERTS", raising=False)  # the proxy speaks plain HTTP (to a TLS engine: TLS)
    if endpoint != "_search":  # where the engine runs esbridge's plugin, the analysis and features come with
        monkeypatch.setenv("ESBRIDGE_FEATURES_PLUGIN", "off")  # the search (one shard)
    name = create_small_index(engine, f"esb-test-{uuid.uuid4().hex[:10]}")
    fault = UNREADABLE[kind]
    policy = lambda m, p, n: fault if p.endswith(f"/{endpoint}") else None  # noqa: E731
    response = tmp_path / "response.json"
    response.write_text(json.dumps(engine.search(name, {"query": {"match": {"text": "glucose"}}})))
    failures: list[str] = []
    try:
        with fault_proxy(engine.options.url, policy) as (url, log):
            options = replace(engine.options, url=url, urls=(), ca_certs=None, max_retries=1, backoff=0.01,
                              timeout=10.0)
            with Engine.connect(options) as proxied, Reranker(proxied, name, scorer="bm25") as rr:
                calls: list[Callable[[], Any]] = [lambda: rr.search("glucose insulin")]
                if endpoint != "_search":
                    calls.append(lambda: rr.rescore(json.loads(response.read_text()), "glucose insulin"))
                for call in calls:
                    with pytest.raises(EsbridgeError) as info:
                        call()
                    failures.append(str(info.value))
                    assert isinstance(info.value, EngineError), repr(info.value)

            async def search_async() -> None:
                async with await AsyncEngine.connect(options) as aengine:
                    async with AsyncReranker(aengine, name, scorer="bm25") as arr:
                        await arr.search("glucose insulin")

            with pytest.raises(EngineError) as ainfo:
                asyncio.run(search_async())
            failures.append(str(ainfo.value))
            commands = [["search", name, "glucose insulin"]]
            if endpoint != "_search":
                commands.append(["rescore", name, "glucose insulin", str(response)])
            for argv in commands:
                code, _out, err = run(capsys, argv[0], "--url", url, *argv[1:], "--scorer", "bm25", "--no-store")
                assert code == 6 and "Traceback" not in err and err.startswith("esbridge: error: "), err[-500:]
                assert err.count("\n") == 1, err
                failures.append(err)
        assert log.faults
    finally:
        engine.delete_index(name)
    for message in failures:
        assert "\n" not in message.rstrip("\n"), message
        assert f"{endpoint} could not be read" in message and "engine's answer" in message, message
