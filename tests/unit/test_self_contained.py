"""The package stands alone: its text points only at files inside the repository.

Two checks over the tracked text files of the package, the tests, the benchmark scripts, the
index definitions, the Painless scripts, the README, the pages under ``docs/`` and the changelog:

- none names a document outside the repository (the patterns are assembled from pieces below,
  so that this file does not match them itself);
- every ``docs/scoring.md §N`` citation names a section heading that exists in ``docs/scoring.md``,
  and so does every ``§N`` cross-reference inside that document.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCORING_DOC = ROOT / "docs" / "scoring.md"

#: Documents and places outside the repository that no tracked file may name.
FORBIDDEN = {
    "the old scoring notes": "SCORING" + ".md",
    "a sibling folder of the project": ".." + "/shared",
    "a path on the development machine": "/" + "work/",
    "a folder of source documents": "seed" + "s/",
}

_SECTION = r"(\d+(?:\.\d+)*)"
_HEADING = re.compile(r"^#{2,6}\s+" + _SECTION + r"\.?\s", re.M)
_CITATION = re.compile(r"docs/scoring\.md`?")
_SECTION_REF = re.compile("§" + r"\s*" + _SECTION)
#: A citation's section numbers run to the end of its parenthesis, sentence or paragraph.
_CITATION_END = re.compile(r"\)|\.\s|\n\s*\n|\"\"\"")


def _tracked_files() -> list[str]:
    git = shutil.which("git")
    if git is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the tracked files are unknown")
    out = subprocess.run([git, "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return [p for p in out.decode("utf-8").split("\0") if p]


def _in_scope(path: str) -> bool:
    if path in ("README.md", "CHANGELOG.md"):
        return True
    if path.startswith(("esbridge/", "tests/", "mappings/", "painless/")):
        return True
    if path.startswith("docs/") and path.endswith(".md"):
        return True
    return path.startswith("benchmarks/") and path.count("/") == 1 and path.endswith(".py")


def _texts() -> dict[str, str]:
    texts = {}
    for rel in _tracked_files():
        path = ROOT / rel
        if not _in_scope(rel) or path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data:
            continue  # binary (compressed data, images)
        try:
            texts[rel] = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
    return texts


def _sections() -> set[str]:
    return set(_HEADING.findall(SCORING_DOC.read_text(encoding="utf-8")))


def _citations(text: str) -> list[str]:
    """The section numbers cited after each mention of ``docs/scoring.md`` in ``text``."""
    cited = []
    for m in _CITATION.finditer(text):
        tail = text[m.end():m.end() + 200]
        end = _CITATION_END.search(tail)
        cited += _SECTION_REF.findall(tail[:end.start()] if end else tail)
    return cited


def test_the_scope_is_not_empty() -> None:
    texts = _texts()
    assert "esbridge/scoring/evolved.py" in texts and "README.md" in texts
    assert any(p.startswith("benchmarks/") for p in texts)
    assert any(p.startswith("painless/") for p in texts)
    assert "docs/cli.md" in texts


def _others() -> dict[str, str]:
    """:func:`_texts` without this file (whose examples would count as citations)."""
    me = Path(__file__).resolve().relative_to(ROOT).as_posix()
    return {rel: text for rel, text in _texts().items() if rel != me}


def test_no_file_names_a_document_outside_the_repository() -> None:
    found = [f"{rel}:{text.count(chr(10), 0, i) + 1}: {what} ({pattern!r})"
             for rel, text in _others().items()
             for what, pattern in FORBIDDEN.items()
             for i in [text.find(pattern)] if i >= 0]
    assert found == [], "\n".join(found)


def test_the_tests_read_no_collection_from_outside_the_repository() -> None:
    """The tests run on the SciFact sample the package ships and on collections they write: none
    reads a folder of collections named by the environment (the benchmarks may)."""
    variables = ("ESBRIDGE" + "_DATA", "ESBRIDGE" + "_SCIFACT_DIR")
    found = [f"{rel}: {v}" for rel, text in _others().items() if rel.startswith("tests/")
             for v in variables if v in text]
    assert found == [], "\n".join(found)


def test_every_citation_of_docs_scoring_names_an_existing_section() -> None:
    sections = _sections()
    assert {"1", "2.2", "4.4", "5.7", "7.5", "8"} <= sections, sorted(sections)
    cited: dict[str, list[str]] = {}
    for rel, text in _others().items():
        for number in _citations(text):
            cited.setdefault(number, []).append(rel)
    assert len(cited) >= 10, f"only {len(cited)} distinct sections cited; the citation pattern may be broken"
    missing = {n: sorted(set(files)) for n, files in cited.items() if n not in sections}
    assert missing == {}, f"docs/scoring.md has no section {sorted(missing)}: {missing}"


def test_cross_references_inside_docs_scoring_resolve() -> None:
    sections = _sections()
    refs = set(_SECTION_REF.findall(SCORING_DOC.read_text(encoding="utf-8")))
    assert refs, "docs/scoring.md cites none of its own sections"
    assert refs - sections == set()


def test_the_citation_reader() -> None:
    text = ('"""Spec (docs/scoring.md §5.5, §5.6).  See §3.1 of the paper.\n\n'
            "Also docs/scoring.md\n    §3.2), and `docs/scoring.md` (§2.1 BM25, §4 BMX). Then §7.\n")
    assert _citations(text) == ["5.5", "5.6", "3.2", "2.1", "4"]
