"""Arguments of a local cluster are checked before anything starts (no engine)."""

from __future__ import annotations

from pathlib import Path

import pytest

from esbridge.cli.main import main
from esbridge.errors import ConfigurationError
from esbridge.nodes import cluster, local


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ESBRIDGE_HOME", str(tmp_path))


@pytest.mark.parametrize("kwargs,message", [
    ({"nodes": 1}, "nodes must be an integer >= 2"),
    ({"nodes": True}, "nodes must be an integer >= 2"),
    ({"distribution": "elasticsearch8"}, "not elasticsearch8"),
])
def test_bad_cluster_arguments_are_one_line_errors(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        cluster.start_cluster(**kwargs)  # type: ignore[arg-type]


def test_names_taken_by_single_nodes_or_of_another_size_are_refused() -> None:
    (local.node_dir("solo") / "node_1").mkdir(parents=True)
    with pytest.raises(ConfigurationError, match="'solo' is a single node's name"):
        cluster.start_cluster(name="solo")
    local.node_dir("c-2").mkdir(parents=True)
    with pytest.raises(ConfigurationError, match="a node directory named 'c-2' exists"):
        cluster.start_cluster(name="c")
    local.node_dir("k").mkdir(parents=True)
    (local.node_dir("k") / "cluster.json").write_text(
        '{"distribution": "opensearch", "version": "3.8.0", "members": ["k-1", "k-2", "k-3"]}')
    assert local.cluster_members("k") == ["k-1", "k-2", "k-3"] and cluster.cluster_status("k") is None
    with pytest.raises(ConfigurationError, match="cluster 'k' has 3 nodes"):
        cluster.start_cluster(name="k", nodes=5)
    with pytest.raises(ConfigurationError, match="'k' is a cluster of 3 nodes"):
        local.start(name="k")
    local.node_dir("k-1").mkdir(parents=True)
    (local.node_dir("k-1") / "cluster").write_text("k")
    with pytest.raises(ConfigurationError, match="node 'k-1' belongs to cluster 'k'"):
        local.start(name="k-1")
    assert local.stop("k") is False  # none of its nodes runs


def test_the_command_checks_its_cluster_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["engine", "start", "--nodes", "0"]) == 2
    assert "--nodes must be >= 1" in capsys.readouterr().err
    assert main(["engine", "start", "--nodes", "3", "--port", "9250"]) == 2
    assert "--port is for a single node" in capsys.readouterr().err


def test_a_port_is_free_once_nothing_listens_even_with_connections_in_time_wait() -> None:
    """A node stopped a moment ago leaves its closed connections in TIME_WAIT on its port; the
    engines listen with SO_REUSEADDR, so starting a node there again must not be refused."""
    import socket

    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    conn, _ = server.accept()
    assert not local.port_free(port)  # listening
    conn.close()  # the server side closes first: its end of the connection waits in TIME_WAIT
    client.close()
    server.close()
    assert local.port_free(port)
