"""``from esbridge import ...``: every public name imports, is what its module defines, is
documented in docs/python-api.md and typed for type checkers, and ``import esbridge`` alone
loads nothing else; the internals once exported still import, with a warning naming their module."""

from __future__ import annotations

import ast
import importlib
import re
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
    # the version's own small module, nothing that imports a dependency
    assert done.returncode == 0 and done.stdout.strip() == "['esbridge', 'esbridge.version']", done.stderr


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


def test_the_documented_names_are_the_public_names() -> None:
    """docs/python-api.md's tables list each public name, in a row of its own, and no other."""
    rows = set(re.findall(r"^\| `(\w+)` \|", DOCS.read_text(encoding="utf-8"), flags=re.MULTILINE))
    assert rows == set(esbridge.__all__) - {"__version__"}


def test_type_checkers_see_every_public_name_from_its_module() -> None:
    """Each public name is imported under ``TYPE_CHECKING`` from the module it is loaded from, so
    a type checker sees its own type (not ``Any``, what the module's ``__getattr__`` returns)."""
    tree = ast.parse(Path(esbridge.__file__).read_text(encoding="utf-8"))
    block = next(node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING")
    seen = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom)
        for alias in node.names:
            assert alias.asname == alias.name  # `X as X`: re-exported
            seen[alias.name] = node.module
    assert seen == esbridge._EXPORTS


@pytest.mark.parametrize("name", sorted(esbridge._MOVED))
def test_an_internal_once_exported_still_imports_and_warns(name: str) -> None:
    module = esbridge._MOVED[name]
    assert name not in esbridge.__all__ and name not in dir(esbridge)
    assert f"from {module} import {name}" in DOCS.read_text(encoding="utf-8")  # the docs say where it went
    with pytest.warns(DeprecationWarning, match=rf"esbridge\.{name} is deprecated: import it from its module "
                                                rf"\({re.escape(module)}\), from {re.escape(module)} "
                                                rf"import {name}") as caught:
        value = getattr(esbridge, name)
    assert caught[0].filename == __file__  # the warning points at the line that used the name
    assert value is getattr(importlib.import_module(module), name)
    with pytest.warns(DeprecationWarning):  # each use warns, not only the first
        exec(f"from esbridge import {name}", {})


def test_an_internal_once_exported_fails_where_warnings_are_errors() -> None:
    done = _python("import warnings; warnings.simplefilter('error')\n"
                   "try:\n    from esbridge import TermVectorCache\n"
                   "except DeprecationWarning as w:\n    print('warned:', w)")
    assert done.returncode == 0 and done.stdout.startswith("warned: esbridge.TermVectorCache is deprecated"), \
        done.stderr
