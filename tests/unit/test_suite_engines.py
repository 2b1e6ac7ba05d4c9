"""How the test suite chooses its engines and names what it builds on them (``tests/conftest.py``),
without an engine: its own local nodes, never a running node of a user's; indices kept only there."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import tests.conftest as suite
from esbridge.engine.client import ConnectionOptions
from esbridge.nodes import local
from esbridge.nodes.provision import ProvisionedEngine

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The suite's records emptied for the test; returns the calls made to ``provision``."""
    for name in ("_provisioned", "_session_indices", "_session_prefixes"):
        monkeypatch.setattr(suite, name, {})
    monkeypatch.setattr(suite, "_own_nodes", [])
    monkeypatch.setattr(suite, "_own_urls", set())
    calls: list[dict[str, Any]] = []

    def provision(distribution: str, *, url: str | None = None, progress: bool = True,
                  name: str | None = None) -> ProvisionedEngine:
        calls.append({"distribution": distribution, "url": url, "name": name})
        if url:
            return ProvisionedEngine(url=url, source="url", distribution=distribution)
        return ProvisionedEngine(url="http://127.0.0.1:9250", source="local", distribution=distribution,
                                 node=name, started=True)

    monkeypatch.setattr(suite, "provision", provision)
    monkeypatch.setattr(local, "node_for_url", lambda url: None)
    for key in ("OPENSEARCH", "ELASTICSEARCH"):
        monkeypatch.delenv(f"ESBRIDGE_TEST_URL_{key}", raising=False)
    return calls


class _Engine:
    def __init__(self, url: str) -> None:
        self.options = ConnectionOptions(url=url)


def test_without_a_url_the_suite_runs_its_own_node_and_keeps_its_indices(fresh: list[dict[str, Any]]) -> None:
    prov = suite._provision("opensearch")
    assert fresh == [{"distribution": "opensearch", "url": None, "name": "esbridge-test-opensearch"}]
    assert suite._own_nodes == ["esbridge-test-opensearch"]  # stopped at the end of the session
    engine: Any = _Engine(prov.url)
    assert suite.own_engine(engine)
    assert suite.suite_index(engine, "esb-test-sample-1") == "esb-test-sample-1"
    assert suite.suite_prefix(engine, "esb-test-eval") == "esb-test-eval"
    assert suite._session_indices == {} and suite._session_prefixes == {}


def test_on_a_given_engine_what_the_session_builds_is_its_own_and_deleted(fresh: list[dict[str, Any]],
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ESBRIDGE_TEST_URL_ELASTICSEARCH", "http://127.0.0.1:9299")
    prov = suite._provision("elasticsearch")
    assert fresh == [{"distribution": "elasticsearch", "url": "http://127.0.0.1:9299", "name": None}]
    assert suite._own_nodes == []  # not the suite's to stop
    engine: Any = _Engine(prov.url)
    assert not suite.own_engine(engine)
    name = suite.suite_index(engine, "esb-test-sample-1")
    prefix = suite.suite_prefix(engine, "esb-test-eval")
    assert name == f"esb-test-sample-1-{suite.SESSION}" and prefix == f"esb-test-eval-{suite.SESSION}"
    assert suite._session_indices == {"http://127.0.0.1:9299": {name}}
    assert suite._session_prefixes == {"http://127.0.0.1:9299": {prefix}}


def test_a_given_url_of_the_suites_own_node_keeps_its_indices(fresh: list[dict[str, Any]],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    class Node:
        name = "esbridge-test-opensearch"

    monkeypatch.setattr(local, "node_for_url", lambda url: Node())
    monkeypatch.setenv("ESBRIDGE_TEST_URL_OPENSEARCH", "http://127.0.0.1:9277")
    engine: Any = _Engine(suite._provision("opensearch").url)
    assert suite.own_engine(engine) and suite._own_nodes == []
    assert suite.suite_index(engine, "esb-test-sample-3") == "esb-test-sample-3"


def test_a_users_esbridge_url_is_not_the_suites_engine() -> None:
    code = "import os, tests.conftest; assert 'ESBRIDGE_URL' not in os.environ"
    env = {**os.environ, "ESBRIDGE_URL": "http://127.0.0.1:1"}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
