"""Shared fixtures: real engines for the engine tests.

Engines come from :mod:`esbridge.engine.provision`: ``ESBRIDGE_TEST_URL_OPENSEARCH`` /
``ESBRIDGE_TEST_URL_ELASTICSEARCH`` if set, else a Docker container where Docker
answers, else a local node from Maven Central artifacts.  ``ESBRIDGE_TEST_ENGINES``
(default ``opensearch,elasticsearch``) chooses which engines the suite runs on.
An engine that cannot be had is a test error, never a skip.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from esbridge.engine import local
from esbridge.engine.client import Engine
from esbridge.engine.provision import ProvisionedEngine, provision
from tests.data import beir

ENGINES = [e.strip() for e in os.environ.get("ESBRIDGE_TEST_ENGINES", "opensearch,elasticsearch").split(",") if e.strip()]

_provisioned: dict[str, ProvisionedEngine] = {}
_started_here: list[str] = []
_skipped: list[str] = []


def _engine_url(distribution: str) -> str:
    if distribution not in _provisioned:
        url = os.environ.get(f"ESBRIDGE_TEST_URL_{distribution.upper()}")
        was_running = local.status(distribution) is not None
        prov = provision(distribution, url=url, progress=False)
        if prov.source == "local" and not was_running:
            _started_here.append(distribution)
        _provisioned[distribution] = prov
    return _provisioned[distribution].url


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped:
        _skipped.append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    for prov in _provisioned.values():
        prov.release()
    if not os.environ.get("ESBRIDGE_KEEP_NODES"):
        for name in _started_here:
            local.stop(name)
    if _skipped and os.environ.get("CI"):
        # In CI a skipped test is a failure: every engine test must have run.
        print(f"\n{len(_skipped)} test(s) were skipped, which CI does not allow: {_skipped[:5]}")
        session.exitstatus = 1


@pytest.fixture(scope="session", params=ENGINES)
def engine(request: pytest.FixtureRequest) -> Iterator[Engine]:
    """A connected engine, once per distribution under test."""
    eng = Engine.connect(_engine_url(request.param))
    assert eng.distribution == request.param, f"expected {request.param}, got {eng.info.label}"
    yield eng
    eng.close()


@pytest.fixture(scope="session")
def knn_engine() -> Iterator[Engine]:
    """OpenSearch with its k-NN plugin (``ESBRIDGE_TEST_URL_OPENSEARCH_KNN``, else esbridge's
    ``opensearch-knn`` local node), for the engine-kept vectors.  Not one of ``ENGINES``: the
    rest of the suite does not run on it twice."""
    url = os.environ.get("ESBRIDGE_TEST_URL_OPENSEARCH_KNN")
    if not url:
        was_running = local.status("opensearch-knn") is not None
        url = local.start("opensearch-knn", progress=False).url
        if not was_running:
            _started_here.append("opensearch-knn")
    eng = Engine.connect(url)
    assert eng.vector_search() == "knn_vector", f"{eng.info.label} at {url} has no k-NN plugin"
    yield eng
    eng.close()


@pytest.fixture
def index_name(engine: Engine) -> Iterator[str]:
    """A fresh index name, deleted after the test."""
    name = f"esb-test-{uuid.uuid4().hex[:10]}"
    yield name
    engine.delete_index(name)


@pytest.fixture(scope="session")
def scifact_indices(engine: Engine) -> dict[int, str]:
    """SciFact indexed with 1 and with 3 shards (reused across the session and runs when
    the content matches)."""
    from esbridge.ingest import ingest, read_jsonl

    out = {}
    corpus = beir("scifact") / "corpus.jsonl"
    expected = sum(1 for line in open(corpus) if line.strip())
    for shards in (1, 3):
        name = f"esb-test-scifact-{shards}"
        if not (engine.index_exists(name) and engine.count(name) == expected):
            engine.delete_index(name)
            ingest(engine, name, read_jsonl(corpus), shards=shards, progress=False, strict=True)
        out[shards] = name
    return out
