"""Without a URL, commands use esbridge's running local node before starting another.

The running engine under test is recorded as a local node of another name in a fresh
``$ESBRIDGE_HOME``; starting a node is replaced by a recorder, so a test that would start
one fails instead of starting a JVM.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from esbridge.cli.main import main
from esbridge.engine.client import Engine
from esbridge.errors import ProvisioningError
from esbridge.ingest import ingest
from esbridge.nodes import local
from esbridge.nodes.provision import find_local_node, provision


@pytest.fixture
def recorded_node(engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, list[str]]:
    """The engine under test recorded as the running local node ``my-node``; returns its URL
    and the list of distributions something tried to start."""
    url = engine.options.url.rstrip("/")
    port = urlsplit(url).port
    assert port is not None
    pid = next(iter(local.answering_pids(url)))
    monkeypatch.setenv("ESBRIDGE_HOME", str(tmp_path))
    monkeypatch.delenv("ESBRIDGE_URL", raising=False)
    home = tmp_path / "nodes" / "my-node"
    home.mkdir(parents=True)
    (home / "node.json").write_text(json.dumps({
        "name": "my-node", "distribution": engine.distribution, "version": engine.info.number,
        "pid": pid, "port": port, "home": str(home)}))
    started: list[str] = []

    def no_start(distribution: str = "opensearch", **kw: object) -> local.NodeInfo:
        started.append(distribution)
        raise ProvisioningError(f"a new {distribution} node would have been started")

    monkeypatch.setattr(local, "start", no_start)
    return f"http://127.0.0.1:{port}", started


def _other(distribution: str) -> str:
    return "elasticsearch" if distribution == "opensearch" else "opensearch"


def test_provision_uses_the_running_node_of_the_distribution(engine: Engine,
                                                             recorded_node: tuple[str, list[str]]) -> None:
    url, started = recorded_node
    found = find_local_node(engine.distribution)
    assert found is not None and found.name == "my-node" and found.url == url
    for distribution in (engine.distribution, None):
        prov = provision(distribution, use_docker=False)
        assert (prov.url, prov.source, prov.node, prov.started) == (url, "local", "my-node", False)
        assert prov.distribution == engine.distribution
    assert started == []
    # a node of another distribution is never taken for the one asked for
    assert find_local_node(_other(engine.distribution)) is None
    with pytest.raises(ProvisioningError, match="would have been started"):
        provision(_other(engine.distribution), use_docker=False)
    assert started == [_other(engine.distribution)]


def test_provision_of_a_named_node_never_takes_another(engine: Engine,
                                                       recorded_node: tuple[str, list[str]]) -> None:
    """What the test suite relies on to keep off a user's node: a name asks for that node only."""
    url, started = recorded_node
    prov = provision(engine.distribution, use_docker=False, name="my-node")
    assert (prov.url, prov.source, prov.node, prov.started) == (url, "local", "my-node", False)
    assert started == []
    with pytest.raises(ProvisioningError, match="would have been started"):
        provision(engine.distribution, use_docker=False, name="esbridge-test-other")
    assert started == [engine.distribution]


def test_cli_without_url_uses_the_running_node(engine: Engine, index_name: str,
                                               recorded_node: tuple[str, list[str]],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    url, started = recorded_node
    ingest(engine, index_name, [{"_id": "1", "title": "bone density", "text": "vitamin D and bone density"}],
           progress=False, strict=True)
    assert main(["search", index_name, "bone density", "--size", "1",
                 "--distribution", engine.distribution]) == 0
    out, err = capsys.readouterr()
    assert started == [] and "1" in out.split()
    assert f"node 'my-node' (running) at {url}" in err
    assert main(["search", index_name, "bone density", "--size", "1"]) == 0
    assert started == [] and f"at {url}" in capsys.readouterr().err


def test_engine_start_reports_the_running_node(engine: Engine, recorded_node: tuple[str, list[str]],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    url, started = recorded_node
    assert main(["engine", "start", "--distribution", engine.distribution]) == 0
    out = capsys.readouterr().out
    assert started == []
    assert f"already running at {url}" in out and "'my-node'" in out
    assert out.splitlines()[-1] == f"export ESBRIDGE_URL={url}"
