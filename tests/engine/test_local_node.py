"""``esbridge engine start|status|stop`` manages a local node (one distribution suffices)."""

from __future__ import annotations

import pytest

from esbridge.cli import main
from esbridge.engine import local
from esbridge.engine.client import Engine
from esbridge.errors import ProvisioningError


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
    fake.write_text("#!/bin/sh\necho 'java.specification.version = 25' >&2\necho 'Available locales:' >&2\necho 'en, en_US' >&2\n")
    fake.chmod(0o755)
    assert local.java_probe(str(fake)) == (25, False)
