"""The README's two commands, run as written: the README cannot drift from what works.

The first command (a project-local virtual environment, then the demo) runs verbatim in a copy of
the project, against the suite's node of the default local distribution, OpenSearch with its k-NN
plugin (through ``ESBRIDGE_URL``, which the README documents), and with the suite's
``ESBRIDGE_HOME`` (so the engine jars and the model are not fetched twice).  The
second command (the tests) cannot run inside the tests; it must be the one CI runs.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from esbridge import demo
from esbridge.engine.client import Engine

ROOT = Path(__file__).resolve().parents[2]
SKIP_DIRS = {".venv", ".git", "__pycache__", ".pytest_cache", ".mypy_cache", "build", "dist"}


def _two_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Two commands", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 2, f"the README's 'Two commands' section should hold two bash blocks, found {len(blocks)}"
    return [b.strip() for b in blocks]


def test_the_test_command_is_the_one_ci_runs() -> None:
    _, tests = _two_commands()
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert tests in ci.splitlines(), f"{tests!r} is not a line of .ci/run"


def _copy_project(dest: Path) -> Path:
    def ignore(folder: str, names: list[str]) -> set[str]:
        return {n for n in names if n in SKIP_DIRS or n.endswith(".egg-info")}

    shutil.copytree(ROOT, dest, ignore=ignore)
    return dest


@pytest.fixture
def demo_engine(knn_engine: Engine) -> Iterator[Engine]:
    """The engine the demo runs on (the default local distribution's, which keeps the vectors); the
    index the demo builds there is deleted afterwards, unless it was there before."""
    index = f"esbridge-demo-{demo.SAMPLE_NAME}"
    keep = knn_engine.index_exists(index)
    yield knn_engine
    if not keep:
        knn_engine.delete_index(index)


def test_the_first_command_runs_the_demo_in_a_fresh_environment(tmp_path: Path, demo_engine: Engine) -> None:
    main_job, _ = _two_commands()
    assert ".venv/bin/esbridge demo" in main_job
    assert demo_engine.vector_search() is not None
    url = demo_engine.options.url
    project = _copy_project(tmp_path / "esbridge")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"))}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if not p.startswith(str(Path(sys.prefix))))
    env["ESBRIDGE_URL"] = url
    proc = subprocess.run(["bash", "-c", main_job], cwd=project, env=env, capture_output=True, text=True,
                          timeout=1500)
    assert proc.returncode == 0, f"exit {proc.returncode}\n--- stdout ---\n{proc.stdout[-3000:]}\n" \
                                 f"--- stderr ---\n{proc.stderr[-3000:]}"
    out = proc.stdout
    # it installed into the copy's own environment and ran from there
    assert (project / ".venv" / "bin" / "esbridge").is_file()
    assert re.search(r"nDCG@10 over 50 judged queries: engine BM25 0\.\d{3}, esbridge \S+ 0\.\d{3}", out), out
    assert "Traceback" not in proc.stderr
    assert re.search(r"Stop it: esbridge engine stop --name \S+", out), out
