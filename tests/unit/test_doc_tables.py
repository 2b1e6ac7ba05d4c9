"""The README's and the docs' results tables are the committed results (benchmarks/doc_tables.py)."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import ModuleType

from tests.scripts import benchmark_script

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"


def _doc_tables() -> ModuleType:
    return benchmark_script("doc_tables")


def test_every_results_table_is_the_committed_results() -> None:
    dt = _doc_tables()
    marked = [p for p in dt.documents(ROOT) if "<!-- results-table " in p.read_text(encoding="utf-8")]
    assert ROOT / "README.md" in marked
    assert dt.check(ROOT, RESULTS) == [], "run: python benchmarks/doc_tables.py --write"


def test_a_figure_that_differs_is_found(tmp_path: Path) -> None:
    dt = _doc_tables()
    (tmp_path / "docs").mkdir()
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    for doc in (ROOT / "docs").glob("*.md"):
        shutil.copy(doc, tmp_path / "docs" / doc.name)
    (tmp_path / "benchmarks" / "results").mkdir(parents=True)
    shutil.copy(RESULTS / "README.md", tmp_path / "benchmarks" / "results" / "README.md")
    readme = tmp_path / "README.md"
    text = readme.read_text(encoding="utf-8")
    data = dt.load(RESULTS)
    figure = f"{data['scifact']['hybrid']['ndcg@10']:.4f}"
    assert figure in text
    readme.write_text(text.replace(figure, "0.9999", 1), encoding="utf-8")
    assert dt.check(tmp_path, RESULTS) == [readme]
    assert dt.check(tmp_path, RESULTS, write=True) == [readme]
    assert readme.read_text(encoding="utf-8") == text
    assert dt.check(tmp_path, RESULTS) == []


def test_a_prose_figure_that_differs_is_found(tmp_path: Path) -> None:
    """The gains the README's prose cites are computed from the results; a changed one is found and
    written back."""
    dt = _doc_tables()
    readme = tmp_path / "README.md"
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    (tmp_path / "docs").mkdir()
    (tmp_path / "benchmarks" / "results").mkdir(parents=True)
    (tmp_path / "benchmarks" / "results" / "README.md").write_text("")
    data = dt.load(RESULTS)
    best = max(data["med"][r]["ndcg@10"] for r in dt.BM25_ROWS)
    med = dt._points(100 * (data["med"]["hybrid"]["ndcg@10"] - best))
    cited = "<!-- results-figure bm25-gains -->"
    assert cited in text and med in text.split(cited, 1)[1].split("<!--", 1)[0]
    readme.write_text(text.replace(cited + "+", cited + "+9", 1), encoding="utf-8")
    assert dt.check(tmp_path, RESULTS) == [readme]
    dt.check(tmp_path, RESULTS, write=True)
    assert readme.read_text(encoding="utf-8") == text
