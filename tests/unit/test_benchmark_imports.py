"""Every name a benchmark script imports from esbridge exists: the scripts run only by hand, so a
renamed or removed function would otherwise break them unnoticed."""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _esbridge_imports(path: Path) -> list[tuple[str, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [(node.module, alias.name) for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "esbridge"
            for alias in node.names]


@pytest.mark.parametrize("script", sorted(BENCHMARKS.glob("*.py")), ids=lambda p: p.name)
def test_a_benchmark_imports_only_names_that_exist(script: Path) -> None:
    missing = [f"{module}.{name}" for module, name in _esbridge_imports(script)
               if not hasattr(importlib.import_module(module), name)
               and importlib.util.find_spec(f"{module}.{name}") is None]
    assert not missing, f"{script.name} imports names esbridge no longer has: {', '.join(missing)}"
