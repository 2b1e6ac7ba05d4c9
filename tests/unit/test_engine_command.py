"""``esbridge engine stop`` of a name esbridge does not know, and two starts of one node at once,
are errors that say what happened (no engine: nodes are looked up in a fresh ``$ESBRIDGE_HOME``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from esbridge.nodes import local
from tests.cli import run

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ESBRIDGE_HOME", str(tmp_path))


def test_stopping_an_unknown_node_fails_and_lists_the_known_ones(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "engine", "stop", "--name", "nosuch")
    assert code == 2 and out == ""
    assert err.strip() == ("esbridge: error: no local node or cluster named 'nosuch' to stop; esbridge has none "
                           "(`esbridge engine status` lists the running ones)")
    for name in ("alpha", "beta"):
        local.node_dir(name).mkdir(parents=True)
    code, out, err = run(capsys, "engine", "stop", "--name", "nosuch")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "no local node or cluster named 'nosuch'" in err and "esbridge's nodes and clusters: alpha, beta" in err
    # a known node that is not running: said so, not an error
    code, out, err = run(capsys, "engine", "stop", "--name", "alpha")
    assert (code, out.strip(), err) == (0, "node 'alpha' was not running", "")


def test_a_second_start_of_a_node_names_the_start_under_way(capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process is starting the node ``racer`` (it holds the node's start lock, as
    ``esbridge engine start`` does until the node is healthy): this start fails at once, before
    installing or launching anything, and says why."""
    def no_install(*args: object, **kwargs: object) -> Path:
        raise AssertionError("nothing may be installed or started while another start is under way")

    monkeypatch.setattr(local, "install", no_install)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys\n"
                               "from esbridge.nodes import local\n"
                               "with local._starting('racer'):\n"
                               "    print('held', flush=True)\n"
                               "    sys.stdin.read()\n"],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        code, out, err = run(capsys, "engine", "start", "--name", "racer")
        assert code == 3 and out == "" and len(err.strip().splitlines()) == 1
        assert (f"another start of node 'racer' is under way (process {holder.pid} holds "
                f"{local.node_dir('racer') / 'start.lock'})") in err
    finally:
        holder.communicate("", timeout=30)
    assert holder.returncode == 0
    # the lock is let go with its start: the next start goes ahead
    with pytest.raises(AssertionError, match="nothing may be installed"):
        local.start("opensearch", name="racer", progress=False)
