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


SOURCE = "| run | p50 ms |\n| server | 10.5 |\n| api | 6.62 |\n"


def _cited(tmp_path: Path, prose: str, source: str = SOURCE) -> list[str]:
    """What the check finds in a document of one line citing ``results/x.md`` (holding ``source``)."""
    dt = _doc_tables()
    (tmp_path / "benchmarks" / "results").mkdir(parents=True, exist_ok=True)
    (tmp_path / "benchmarks" / "results" / "x.md").write_text(source, encoding="utf-8")
    doc = tmp_path / "doc.md"
    doc.write_text(f"A line.\nIt took <!-- from results/x.md -->{prose}<!-- /from --> here.\n", encoding="utf-8")
    errors: list[str] = dt.uncited(tmp_path, [doc])
    return errors


def test_every_summary_figure_has_its_results_file() -> None:
    assert _doc_tables().unproduced(ROOT, RESULTS) == []


def test_every_cited_figure_is_in_its_source() -> None:
    dt = _doc_tables()
    assert dt.uncited(ROOT) == []
    assert list(dt.unmarked(ROOT)) == []


def test_a_cited_figure_is_its_source_rounded_or_a_ratio_of_two(tmp_path: Path) -> None:
    assert _cited(tmp_path, "10.5 ms against 6.6 ms (1.6x), 11 ms") == []
    assert _cited(tmp_path, "10.5 ms against 6.62 ms, 3.9 ms more") == []


def test_a_fraction_may_be_cited_in_points(tmp_path: Path) -> None:
    source = "| run | nDCG@10 |\n| a | 0.4094 |\n| b | 0.3731 |\n| gain | +0.0284 |\n"
    assert _cited(tmp_path, "+2.8 points", source) == []
    assert _cited(tmp_path, "0.4094 against 0.3731, +3.6 points", source) == []
    assert _cited(tmp_path, "+2.9 points", source) != []
    assert _cited(tmp_path, "+2.841 points", source) != [], "more decimals than the source writes"


def test_a_wrong_figure_is_found(tmp_path: Path) -> None:
    assert _cited(tmp_path, "10.4 ms against 6.6 ms") == [
        "doc.md:2: 10.4 of '10.4 ms against 6.6 ms' not in results/x.md"]
    assert _cited(tmp_path, "10.5 ms against 6.6 ms (1.7x)") != []
    assert _cited(tmp_path, "6.620 ms") != [], "more decimals than the source writes"
    assert _cited(tmp_path, "a while") != [], "a span with no number checks nothing"


def test_a_figure_whose_source_is_missing_is_found(tmp_path: Path) -> None:
    dt = _doc_tables()
    doc = tmp_path / "doc.md"
    doc.write_text("It took <!-- from results/gone.md -->10.5 ms<!-- /from -->.\n", encoding="utf-8")
    assert dt.uncited(tmp_path, [doc]) == ["doc.md:1: no source results/gone.md for '10.5 ms'"]
    (tmp_path / "benchmarks" / "results").mkdir(parents=True)
    (tmp_path / "benchmarks" / "results" / "x.md").write_text("10.5\n", encoding="utf-8")
    doc.write_text("It took <!-- from results/x.md@4b4c27c -->10.5 ms<!-- /from -->.\n", encoding="utf-8")
    assert dt.uncited(tmp_path, [doc]) == ["doc.md:1: no source results/x.md@4b4c27c for '10.5 ms'"], \
        "a source is a file of the tree, never one of the history"


def test_numbers_are_not_words_nor_versions() -> None:
    dt = _doc_tables()
    assert dt.numbers("BM25 nDCG@10 p50 int8 3.8.0 4bcd20c: 1,064 ms, 46.29x, −0.6 and 7.") == [
        "1,064", "46.29", "0.6", "7"]


def test_an_unmarked_measurement_is_found(tmp_path: Path) -> None:
    dt = _doc_tables()
    doc = tmp_path / "doc.md"
    doc.write_text("Took 10.5 ms (1.6x).\n\n```\n3 ms\n```\n`4 ms` <!-- not-a-result -->5 ms<!-- /not-a-result -->\n"
                   "<!-- from results/x.md -->6 ms<!-- /from --> in window 100.\n", encoding="utf-8")
    assert list(dt.unmarked(tmp_path, [doc])) == ["doc.md:1: '10.5 ms' has no source marked",
                                                  "doc.md:1: '1.6x' has no source marked"]


def test_a_summary_figure_is_its_results_file_summary(tmp_path: Path) -> None:
    """A figure of :data:`SUMMARY_FIGURES` is the ``Summary:`` line of its results file; until that file
    exists the figure stays as it is and the file and its script are named."""
    dt = _doc_tables()
    results = tmp_path / "benchmarks" / "results"
    results.mkdir(parents=True)
    doc = tmp_path / "doc.md"
    text = "The suite: <!-- results-figure test-suite -->(not measured yet)<!-- /results-figure -->.\n"
    doc.write_text(text, encoding="utf-8")
    made = dt.summaries(results)
    assert made["test-suite"] is None
    assert dt.render(text, {}, heldout={}, summary=made) == text
    assert dt.unproduced(tmp_path, results, [doc]) == [
        "doc.md:1: results-figure test-suite: benchmarks/results/test-suite.md is missing or has no Summary "
        "line; write it with python benchmarks/suite_time.py (its docstring says how), then --write"]
    (results / "test-suite.md").write_text("# The test suite\n\nSummary: 7 tests (7 passed) in 45 s on X\n\n| a |\n",
                                           encoding="utf-8")
    made = dt.summaries(results)
    assert dt.unproduced(tmp_path, results, [doc]) == []
    assert dt.render(text, {}, heldout={}, summary=made) == text.replace(
        "(not measured yet)", "7 tests (7 passed) in 45 s on X")
