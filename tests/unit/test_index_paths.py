"""Every request path that names an index escapes it with :func:`esbridge.engine.calls.path_segment`.

An index name is written into a URL path: unescaped, ``%74`` in a name reaches the engine as
``t`` (another index), ``/`` and ``?`` change the request.  This scans the package's source for
paths built from a leading ``"/..."`` (f-strings and ``+``) and requires every piece put into
one to come from ``path_segment`` (directly, or through a local variable assigned from it).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from esbridge.engine.calls import path_segment

PACKAGE = Path(__file__).resolve().parents[2] / "esbridge"

#: Pieces of request or file paths that are not index names: (module, expression).
NOT_INDEX_NAMES = {
    ("painless.py", "script_id"),          # a stored script's id, made by esbridge from its hash
    ("painless.py", "context"),            # a Painless context name (score, similarity, ...)
    ("index/plain.py", "task"),            # a task id the engine returned
    ("nodes/local.py", "pid"),             # /proc/<pid>/stat
    ("nodes/es_distribution.py", "name"),   # /var/lib/<system user>
    ("features/termvectors.py", "EXACT_SIMILARITY"),  # a constant: the name of a similarity setting
}


def _escaped(node: ast.expr, escaped_names: set[str]) -> bool:
    if isinstance(node, ast.Call):
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        return name == "path_segment"
    return isinstance(node, ast.Name) and node.id in escaped_names


def _path_pieces(node: ast.AST) -> list[ast.expr] | None:
    """The interpolated pieces of a path that starts with ``/`` (``None``: not such a path)."""
    if isinstance(node, ast.JoinedStr):
        first = node.values[0] if node.values else None
        if isinstance(first, ast.Constant) and isinstance(first.value, str) and first.value.startswith("/"):
            return [v.value for v in node.values if isinstance(v, ast.FormattedValue)]
        return None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        parts: list[ast.expr] = []

        def flatten(n: ast.expr) -> None:
            if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add):
                flatten(n.left)
                flatten(n.right)
            else:
                parts.append(n)

        flatten(node)
        head = parts[0]
        if isinstance(head, ast.Constant) and isinstance(head.value, str) and head.value.startswith("/"):
            return [p for p in parts[1:] if not (isinstance(p, ast.Constant) and isinstance(p.value, str))]
    return None


def _scopes(tree: ast.Module) -> Iterator[ast.AST]:
    yield tree
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def unescaped_path_pieces(source: str, module: str) -> list[str]:
    """``module:line: expression`` of every piece of a ``/``-path not escaped by ``path_segment``."""
    tree = ast.parse(source)
    found = []
    for scope in _scopes(tree):
        escaped_names = {t.id for node in ast.walk(scope) if isinstance(node, ast.Assign)
                         and _escaped(node.value, set()) for t in node.targets if isinstance(t, ast.Name)}
        for node in ast.walk(scope):
            for piece in _path_pieces(node) or []:
                text = ast.unparse(piece)
                if not _escaped(piece, escaped_names) and (module, text) not in NOT_INDEX_NAMES:
                    found.append(f"{module}:{piece.lineno}: {text}")
    return sorted(set(found))


def test_every_request_path_escapes_the_index_name() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        found += unescaped_path_pieces(path.read_text("utf-8"), path.relative_to(PACKAGE).as_posix())
    assert not found, "request paths with an unescaped piece (use path_segment):\n" + "\n".join(found)


@pytest.mark.parametrize("source", [
    'engine.request("GET", f"/{index}/_settings")',
    'Call("POST", f"/{self.index}/_mtermvectors")',
    'engine.request("GET", "/_cluster/health/" + index)',
    'where = index\nengine.request("GET", f"/{where}/_mapping")',
])
def test_the_scan_finds_an_unescaped_index(source: str) -> None:
    assert unescaped_path_pieces(source, "x.py")


@pytest.mark.parametrize("source", [
    'engine.request("GET", f"/{path_segment(index, patterns=True)}/_settings")',
    'engine.request("GET", "/_cluster/health/" + path_segment(index))',
    'def f(index):\n    where = path_segment(index)\n    engine.request("GET", f"/{where}/_mapping")',
])
def test_the_scan_accepts_escaped_names(source: str) -> None:
    assert not unescaped_path_pieces(source, "x.py")


@pytest.mark.parametrize("name,segment", [
    ("h2pc%74", "h2pc%2574"), ("a+b", "a%2Bb"), ("a&b=c;d", "a%26b%3Dc%3Bd"), ("[x]@y", "%5Bx%5D%40y"),
    ("it's(1)!$", "it%27s%281%29%21%24"), ("é", "%C3%A9"),
])
def test_path_segment_escapes_every_reserved_character(name: str, segment: str) -> None:
    assert path_segment(name) == segment
    assert path_segment(name, patterns=True) == segment
