"""``esbridge engine start|status|stop`` manages a local node (one distribution suffices)."""

from __future__ import annotations

import json
import os
from dataclasses import asdict

import pytest

from esbridge.cli.main import main
from esbridge.engine.client import Engine
from esbridge.errors import ProvisioningError
from esbridge.nodes import java, local


def test_start_status_stop(capsys: pytest.CaptureFixture[str]) -> None:
    name = "lifecycle-test"
    try:
        assert main(["engine", "start", "--distribution", "opensearch", "--name", name, "--heap", "512m"]) == 0
        out = capsys.readouterr().out
        assert "running at http://127.0.0.1:" in out
        node = local.status(name)
        assert node is not None
        assert Engine.connect(node.url).info.distribution == "opensearch"
        assert main(["engine", "status"]) == 0
        assert name in capsys.readouterr().out
        # starting again returns the running node
        assert local.start("opensearch", name=name).pid == node.pid
        with pytest.raises(ProvisioningError, match="running opensearch"):
            local.start("elasticsearch", name=name)
    finally:
        assert main(["engine", "stop", "--name", name]) == 0
    assert local.status(name) is None
    assert "stopped" in capsys.readouterr().out


def test_java_probe_rejects_runtimes_without_locale_data(tmp_path) -> None:  # type: ignore[no-untyped-def]
    fake = tmp_path / "java"
    fake.write_text("#!/bin/sh\necho 'java.specification.version = 25' >&2\n"
                    "echo 'Available locales:' >&2\necho 'en, en_US' >&2\n")
    fake.chmod(0o755)
    assert java.java_probe(str(fake)) == (25, False)


def test_a_node_answering_on_the_port_is_never_taken_for_ours(monkeypatch: pytest.MonkeyPatch) -> None:
    """The port was free when checked, then another process bound it before the JVM did."""
    from tests.netfaults import impostor_node

    name = "impostor-test"
    port = local.free_port(local.HTTP_PORTS)
    really_free = local.port_free
    # the race: the check on the impostor's port passed just before it bound the port
    monkeypatch.setattr(local, "port_free", lambda p: p == port or really_free(p))
    with impostor_node(port, pid=1):
        try:
            # a port the caller chose: an error, and our node is stopped
            with pytest.raises(ProvisioningError, match=f"another node \\(process 1\\) answers on port {port}"):
                local.start("opensearch", name=name, port=port, heap="256m", progress=False)
            assert local.status(name) is None
            # a port chosen by esbridge: it moves to another free port
            node = local.start("opensearch", name=name, heap="256m", progress=False)
            assert node.port != port and local.status(name) == node
            assert Engine.connect(node.url).info.distribution == "opensearch"
        finally:
            local.stop(name)
    # a node record whose process lives but whose port someone else answers is not running
    home = local.node_dir(name)
    home.mkdir(parents=True, exist_ok=True)
    info = local.NodeInfo(name=name, distribution="opensearch", version="3.8.0", pid=os.getpid(), port=port,
                          home=str(home))
    (home / "node.json").write_text(json.dumps(asdict(info)))
    try:
        with impostor_node(port, pid=1):
            assert local.status(name) is None
    finally:
        (home / "node.json").unlink()
