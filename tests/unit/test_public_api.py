"""``from esbridge import ...``: every public name imports, is what its module defines, and
``import esbridge`` alone loads nothing else."""

from __future__ import annotations

import importlib
import subprocess
import sys
import types
from pathlib import Path

import pytest

import esbridge

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "python-api.md"


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_the_readme_import_works_in_a_new_interpreter() -> None:
    done = _python("from esbridge import Reranker, Engine; print(Reranker.__name__, Engine.__name__)")
    assert done.returncode == 0 and done.stdout.split() == ["Reranker", "Engine"], done.stderr


def test_import_esbridge_loads_nothing_else() -> None:
    done = _python("import sys, esbridge; print(sorted(m for m in sys.modules if m.startswith('esbridge')))")
    assert done.returncode == 0 and done.stdout.strip() == "['esbridge']", done.stderr


def test_every_public_name_imports_in_a_new_interpreter() -> None:
    done = _python("from esbridge import *; import esbridge; print(len([globals()[n] for n in esbridge.__all__]))")
    assert done.returncode == 0 and done.stdout.strip() == str(len(esbridge.__all__)), done.stderr


@pytest.mark.parametrize("name", [n for n in esbridge.__all__ if n != "__version__"])
def test_each_name_is_its_modules_object(name: str) -> None:
    value = getattr(esbridge, name)
    module = importlib.import_module(esbridge._EXPORTS[name])
    assert value is getattr(module, name)
    # not shadowed by a sub-module of the same name, which importing that sub-module would bind
    assert not isinstance(value, types.ModuleType)
    assert name in dir(esbridge)


def test_unknown_names_are_attribute_errors() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Rerankr'"):
        esbridge.Rerankr  # noqa: B018
    with pytest.raises(ImportError):
        exec("from esbridge import Rerankr", {})


def test_every_public_name_is_documented() -> None:
    text = DOCS.read_text(encoding="utf-8")
    missing = [n for n in esbridge.__all__ if n != "__version__" and f"`{n}`" not in text]
    assert missing == []
