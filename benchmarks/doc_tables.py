"""The results tables of the README, the docs and ``benchmarks/results/README.md``, made from the
committed ``results.json`` files.

A table is marked in a Markdown file by two comments around it::

    <!-- results-table systems=engine-bm25-default,evolved,hybrid bold=hybrid -->
    | system | SciFact | ... |
    <!-- /results-table -->

``systems`` names the rows (``results.json`` system names, in order) and ``bold`` the row shown in
bold. Each cell is ``nDCG@10 / R@100`` of ``benchmarks/results/<collection>/results.json``, the last
column the mean nDCG@10 over the collections. A system written ``name@DIR`` is read from
``benchmarks/results/DIR/<collection>/results.json`` instead (``@.``: the usual results), and its row
says which (:data:`RUNS`).

A figure in the prose is marked the same way, inline::

    gains <!-- results-figure bm25-gains -->+6.2, +4.5, ...<!-- /results-figure --> points

where the name is one of :data:`FIGURES`: the hybrid pipeline's gains in nDCG@10 points over the
stronger of the engine's BM25 rows (``bm25-*``) or of the engines' own hybrid rows
(``engine-hybrid-*``), per collection, their mean or their range; ``heldout-*`` on the held-out
halves (``<collection>/heldout/results.json``, the four collections that have one); the latency of a
rerank through the engine plugin against the engine's BM25 (:data:`LATENCY_FIGURES`, from
``engine-opensearch.md``); the R@100 gap to the engines' own hybrid (:data:`RECALL_FIGURES`); the
``Summary:`` line of a results file a script writes (:data:`SUMMARY_FIGURES`: the test suite's size and
time, ``benchmarks/suite_time.py``; the README's first command's, ``benchmarks/bench_demo.py``). Until
such a file exists its figure is left as it is and the check names the file and the script that
writes it (:func:`unproduced`).

A figure written by hand is marked with the file it comes from (paths relative to ``benchmarks/``)::

    <!-- from results/serve-opensearch.md -->10.5 ms against 6.6 ms (1.6x)<!-- /from -->

and checked, not rewritten (:func:`uncited`): every number written inside the span must be a number
of one of the named files. Several files may be named, space-separated; each is a file of the
current tree (a figure of an earlier run, no longer in any committed file, is no figure to cite).
What counts as a number (:data:`NUMBER`): digits, with a decimal point and ``,`` thousands
separators, not part of a word (``BM25``, ``p50``, ``nDCG@10``, ``int8`` are not numbers) nor of a
version (``3.8.0``); its sign is not compared, so ``−0.6`` cites the source's ``-0.6``. A number
matches a number of the source equal to it once the source's is rounded to as many decimals as the
prose writes (half up or half to even): ``46.3x`` cites ``46.29x``, ``1,064 ms`` cites ``1063.6``,
``0.7450`` cites ``0.745036``; the prose may not write more decimals than the source (``0.60`` does
not cite ``0.6``). A fraction of the source may be written in points (times 100, :func:`in_points`):
``+2.8 points`` cites ``+0.0284``. A number the source does not write may be the ratio or the
difference of two numbers of the same span that it does write (or of the two in points), rounded the
same way: ``10.5 ms against 6.6 ms (1.6x)``, ``0.4094 against 0.3731, +3.6 points``. A span with no
number in it, or naming a file that does not exist, is an error. Keep a span to the figures and the
words that say what they are, so that no other number of it can stand for a ratio or a difference by
chance.

:func:`unmarked` finds what looks like a measurement in the prose of the documents of :data:`SCANNED`
(a number followed by ``ms``, ``s``, ``x``, ``points``, ...; :data:`MEASURE`) outside both kinds of
marker and outside code. A figure that only looks like one (a setting, the size of a download) is
marked as such: ``<!-- not-a-result -->5 ms to 30 s<!-- /not-a-result -->``.

Usage (from the project root)::

    python benchmarks/doc_tables.py          # check: exit 1 naming every table that differs, every
                                             # cited figure its source lacks, every unmarked one
    python benchmarks/doc_tables.py --write  # rewrite the tables from the results
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COLLECTIONS = (("scifact", "SciFact"), ("nfcorpus", "NFCorpus"), ("cranfield", "Cranfield"), ("cisi", "CISI"),
               ("med", "MED"))
#: How a system is named in a table.
LABELS = {
    "engine-bm25-pyserini": "engine BM25, k1 0.9 b 0.4",
    "engine-bm25-default": "engine BM25, k1 1.2 b 0.75",
    "engine-hybrid-minmax": "engine hybrid, min-max mean (OpenSearch)",
    "engine-hybrid-rrf": "engine hybrid, RRF (Elasticsearch)",
    "evolved": "evolved (lexical strategy)",
    "semantic": "semantic strategy",
    "keyword": "keyword strategy",
}
#: What the rows of a ``name@DIR`` system add to its label.
RUNS = {
    ".": "vectors on disk, exact search (OpenSearch 3.8)",
    "opensearch-knn": "vectors in the engine, HNSW (OpenSearch 3.5 with k-NN)",
    "opensearch-knn-int8": "vectors in the engine, HNSW of int8 (OpenSearch 3.5 with k-NN)",
    "elasticsearch8-knn": "vectors in the engine, HNSW (Elasticsearch 8.19)",
    "elasticsearch8-knn-int8": "vectors in the engine, `int8_hnsw` (Elasticsearch 8.19)",
    "elasticsearch8-knn-bbq": "vectors in the engine, `bbq_hnsw` rescored, oversample 3 (Elasticsearch 8.19)",
    "ensemble": "`--pipeline ensemble`, vectors on disk (OpenSearch 3.8)",
}
FIGURE = re.compile(r"(<!-- results-figure (?P<name>[a-z0-9-]+) -->)(?P<body>.*?)(<!-- /results-figure -->)")
BLOCK = re.compile(r"(<!-- results-table (?P<opts>[^>]*?) -->\n)(?P<body>.*?)(<!-- /results-table -->)", re.S)


def load(results: Path) -> dict[str, Mapping[str, Mapping[str, float]]]:
    """Collection -> system -> measure -> value, from ``<results>/<collection>/results.json``."""
    return {c: json.loads((results / c / "results.json").read_text())["results"] for c, _ in COLLECTIONS}


Results = Mapping[str, Mapping[str, Mapping[str, float]]]


def load_heldout(results: Path) -> Results:
    """Collection -> system -> measure -> value on the held-out halves, for the collections that have one."""
    return {c: json.loads((results / c / "heldout" / "results.json").read_text())["results"]
            for c, _ in COLLECTIONS if (results / c / "heldout" / "results.json").is_file()}


def table(data: Mapping[str, Mapping[str, Mapping[str, float]]], systems: list[str], bold: set[str],
          runs: Callable[[str], Results] | None = None) -> str:
    """The Markdown table of ``systems`` (``name@DIR`` ones from ``runs(DIR)``)."""
    lines = ["| system | " + " | ".join(name for _, name in COLLECTIONS) + " | mean nDCG@10 |",
             "|---|" + "---|" * (len(COLLECTIONS) + 1)]
    for entry in systems:
        system, _, run = entry.partition("@")
        if run and (runs is None or run not in RUNS):
            raise SystemExit(f"results-table row {entry!r}: no results directory {run!r} ({', '.join(RUNS)})")
        data = runs(run) if run and runs is not None else data
        missing = [c for c, _ in COLLECTIONS if system not in data[c]]
        if missing:
            raise SystemExit(f"system {system!r} is not in the results of {', '.join(missing)}")
        cells = [f"{data[c][system]['ndcg@10']:.4f} / {data[c][system]['recall@100']:.4f}" for c, _ in COLLECTIONS]
        mean = f"{sum(data[c][system]['ndcg@10'] for c, _ in COLLECTIONS) / len(COLLECTIONS):.4f}"
        label = LABELS.get(system, system) + (f", {RUNS[run]}" if run else "")
        if entry in bold:
            label, cells, mean = f"**{label}**", [f"**{x}**" for x in cells], f"**{mean}**"
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {mean} |")
    return "\n".join(lines) + "\n"


def _points(x: float) -> str:
    """A gain in points as the prose writes it: one decimal, a sign, a real minus."""
    return f"{x:+.1f}".replace("-", "\u2212")


def _gains(data: Mapping[str, Mapping[str, Mapping[str, float]]], rows: tuple[str, ...]) -> list[float]:
    """Per collection of ``data``, the hybrid pipeline's nDCG@10 points over the strongest of ``rows``."""
    return [100 * (data[c]["hybrid"]["ndcg@10"] - max(data[c][r]["ndcg@10"] for r in rows)) for c in data]


def _listed(values: list[float]) -> str:
    words = [_points(v) for v in values]
    return ", ".join(words[:-1]) + " and " + words[-1]


BM25_ROWS = ("engine-bm25-pyserini", "engine-bm25-default")
ENGINE_HYBRID_ROWS = ("engine-hybrid-minmax", "engine-hybrid-rrf")
#: The figures the prose may cite: name -> (which results, rows, how the gains are written).
FIGURES: dict[str, tuple[str, tuple[str, ...], Callable[[list[float]], str]]] = {
    "bm25-gains": ("test", BM25_ROWS, _listed),
    "bm25-mean": ("test", BM25_ROWS, lambda g: _points(sum(g) / len(g))),
    "bm25-range": ("test", BM25_ROWS, lambda g: f"{min(g):.1f} to {max(g):.1f}"),
    "engine-hybrid-gains": ("test", ENGINE_HYBRID_ROWS, _listed),
    "engine-hybrid-mean": ("test", ENGINE_HYBRID_ROWS, lambda g: _points(sum(g) / len(g))),
    "heldout-bm25-gains": ("heldout", BM25_ROWS, _listed),
    # ``results/ensemble/`` (``esbridge eval --pipeline ensemble``, its own BM25 and engine-hybrid rows)
    "ensemble-engine-hybrid-gains": ("ensemble", ENGINE_HYBRID_ROWS, _listed),
    "ensemble-engine-hybrid-mean": ("ensemble", ENGINE_HYBRID_ROWS,
                                    lambda g: f"{sum(g) / len(g):+.2f}".replace("-", "\u2212")),
    "ensemble-bm25-mean": ("ensemble", BM25_ROWS, lambda g: _points(sum(g) / len(g))),
    "ensemble-bm25-worst": ("ensemble", BM25_ROWS, lambda g: _points(min(g))),
}


#: The latency benchmark whose rows the prose cites (``plugin-*``, ``cold-*``), and its rows.
LATENCY = "engine-opensearch.md"
ENGINE_ROW = "engine BM25 (match, same window), timed beside the plugin runs"
PLUGIN_ROW = "esbridge evolved, features from esbridge's engine plugin (no client-side store)"
FRESH_ROW = "esbridge evolved, the plugin on a fresh copy of the index (no document read before)"
COLD_ROW = "esbridge evolved, never-seen candidates (cold)"


def latency_rows(results: Path) -> dict[tuple[str, int], tuple[float, str]]:
    """``(run, window) -> (p50 ms, ratio as written)`` of :data:`LATENCY`'s per-query table."""
    rows: dict[tuple[str, int], tuple[float, str]] = {}
    for line in (results / LATENCY).read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[1].isdigit():
            rows[(cells[0], int(cells[1]))] = (float(cells[2]), cells[4])
    return rows


def latency_figure(name: str, rows: Mapping[tuple[str, int], tuple[float, str]]) -> str:
    """The text of a latency figure: ``plugin-100`` / ``plugin-1000`` (the rerank through the plugin
    against the engine's BM25 beside it, p50 and ratio), ``fresh-ratios``, ``cold-ratios``."""
    def ratio(row: str, window: int) -> str:
        return rows[(row, window)][1]

    if name in ("plugin-100", "plugin-1000"):
        window = int(name.split("-")[1])
        ours, engine = rows[(PLUGIN_ROW, window)][0], rows[(ENGINE_ROW, window)][0]
        return f"{ours:g} ms against {engine:g} ms at window {window:,} ({ratio(PLUGIN_ROW, window)})"
    if name == "fresh-ratios":
        return f"{ratio(FRESH_ROW, 100)} and {ratio(FRESH_ROW, 1000)}"
    if name == "cold-ratios":
        return " and ".join(f"{float(ratio(COLD_ROW, w).rstrip('x')):.0f}x" for w in (100, 1000))
    raise SystemExit(f"no results-figure {name!r}; the figures are {', '.join([*FIGURES, *LATENCY_FIGURES])}")


LATENCY_FIGURES = ("plugin-100", "plugin-1000", "fresh-ratios", "cold-ratios")


#: The R@100 the hybrid pipeline gives up to the stronger of the engines' own hybrid rows, in points
#: (name -> collection).
RECALL_FIGURES = {"cisi-recall-gap": "cisi"}


def recall_gap(data: Results, collection: str) -> str:
    """How many points of R@100 the stronger engine hybrid row has over the hybrid pipeline on ``collection``."""
    best = max(data[collection][r]["recall@100"] for r in ENGINE_HYBRID_ROWS)
    return f"{100 * (best - data[collection]['hybrid']['recall@100']):.1f}"


#: Figures copied from the ``Summary:`` line of a results file: name -> (file, the script that writes it).
SUMMARY_FIGURES = {"test-suite": ("test-suite.md", "benchmarks/suite_time.py"),
                   "demo": ("demo.md", "benchmarks/bench_demo.py")}


def summaries(results: Path) -> dict[str, str | None]:
    """The text of every :data:`SUMMARY_FIGURES` figure, None where its file (or its summary) is missing."""
    out: dict[str, str | None] = {}
    for name, (file, _) in SUMMARY_FIGURES.items():
        path = results / file
        found = re.search(r"^Summary: (.+)$", path.read_text(encoding="utf-8"), re.M) if path.is_file() else None
        out[name] = found.group(1).strip() if found else None
    return out


def figure(name: str, data: Mapping[str, Mapping[str, Mapping[str, float]]],
           heldout: Mapping[str, Mapping[str, Mapping[str, float]]],
           latency: Mapping[tuple[str, int], tuple[float, str]] | None = None,
           runs: Callable[[str], Results] | None = None) -> str:
    """The text of the figure ``name`` (:data:`FIGURES`, :data:`LATENCY_FIGURES`, :data:`RECALL_FIGURES`)."""
    if name in LATENCY_FIGURES and latency is not None:
        return latency_figure(name, latency)
    if name in RECALL_FIGURES:
        return recall_gap(data, RECALL_FIGURES[name])
    if name not in FIGURES:
        raise SystemExit(f"no results-figure {name!r}; the figures are "
                         f"{', '.join([*FIGURES, *LATENCY_FIGURES, *RECALL_FIGURES, *SUMMARY_FIGURES])}")
    which, rows, written = FIGURES[name]
    if which == "ensemble":
        if runs is None:
            raise SystemExit(f"results-figure {name!r} reads results/ensemble/, which was not given")
        return written(_gains(runs("ensemble"), rows))
    return written(_gains(data if which == "test" else heldout, rows))


def render(text: str, data: Mapping[str, Mapping[str, Mapping[str, float]]],
           runs: Callable[[str], Results] | None = None, heldout: Results | None = None,
           latency: Mapping[tuple[str, int], tuple[float, str]] | None = None,
           summary: Mapping[str, str | None] | None = None) -> str:
    """``text`` with every marked table made again from ``data`` (and ``runs(DIR)`` for ``name@DIR``),
    and with ``heldout``, every marked figure (a :data:`SUMMARY_FIGURES` one from ``summary``, left as it
    is where that has none)."""
    def one(m: re.Match[str]) -> str:
        opts = dict(kv.split("=", 1) for kv in m.group("opts").split())
        systems = [s for s in opts.get("systems", "").split(",") if s]
        if not systems:
            raise SystemExit(f"a results-table names no systems: {m.group(1).strip()}")
        bold = {s for s in opts.get("bold", "").split(",") if s}
        return m.group(1) + table(data, systems, bold, runs) + m.group(4)

    text = BLOCK.sub(one, text)
    if heldout is None:
        return text

    def fig(m: re.Match[str]) -> str:
        name = m.group("name")
        if name in SUMMARY_FIGURES:
            made = (summary or {}).get(name)
            return m.group(0) if made is None else m.group(1) + made + m.group(4)
        return m.group(1) + figure(name, data, heldout, latency, runs) + m.group(4)

    return FIGURE.sub(fig, text)


def documents(root: Path) -> list[Path]:
    """The Markdown files that may hold tables: the README, the docs and the results' READMEs."""
    results = root / "benchmarks" / "results"
    return [root / "README.md", *sorted((root / "docs").glob("*.md")), results / "README.md",
            *sorted(results.glob("*/README.md"))]


def check(root: Path, results: Path, *, write: bool = False) -> list[Path]:
    """The files whose tables differ from the results (rewritten with ``write``)."""
    data = load(results)
    loaded: dict[str, Results] = {}

    def runs(run: str) -> Results:
        if run not in loaded:
            loaded[run] = data if run == "." else load(results / run)
        return loaded[run]

    stale = []
    for path in documents(root):
        text = path.read_text(encoding="utf-8")
        made = render(text, data, runs, load_heldout(results), latency_rows(results), summaries(results))
        if made != text:
            stale.append(path)
            if write:
                path.write_text(made, encoding="utf-8")
    return stale


def unproduced(root: Path, results: Path, paths: list[Path] | None = None) -> list[str]:
    """Every :data:`SUMMARY_FIGURES` figure of ``paths`` (the :func:`documents`) whose results file is
    not there yet, as ``FILE:LINE: ...`` naming the file and the script that writes it."""
    made = summaries(results)
    errors = []
    for path in paths if paths is not None else documents(root):
        text = path.read_text(encoding="utf-8")
        for m in FIGURE.finditer(text):
            name = m.group("name")
            if name in SUMMARY_FIGURES and made[name] is None:
                file, script = SUMMARY_FIGURES[name]
                errors.append(f"{path.relative_to(root)}:{_line(text, m.start())}: results-figure {name}: "
                              f"benchmarks/results/{file} is missing or has no Summary line; "
                              f"write it with python {script} (its docstring says how), then --write")
    return errors


#: A hand-written figure and the files it is checked against (paths relative to ``benchmarks/``).
CITED = re.compile(r"<!-- from (?P<sources>[^>]*?) -->(?P<body>.*?)<!-- /from -->", re.S)
#: A number as prose and results write it: ``1,064``, ``46.29``, ``7``; not inside a word or a version.
NUMBER = re.compile(r"(?<![\w@.])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![.]?\d)(?![A-Za-wyz_])")


def numbers(text: str) -> list[str]:
    """The numbers written in ``text`` (:data:`NUMBER`), as written."""
    return [m.group(0) for m in NUMBER.finditer(text)]


def _value(number: str) -> Decimal:
    return Decimal(number.replace(",", ""))


def cites(written: str, source: str) -> bool:
    """Whether the prose's ``written`` is the source's ``source`` rounded to the decimals it writes."""
    ours, theirs = _value(written), _value(source)
    places = -ours.as_tuple().exponent  # type: ignore[operator]
    if places > -theirs.as_tuple().exponent:  # type: ignore[operator]
        return False
    step = Decimal(1).scaleb(-places)
    return any(theirs.quantize(step, rounding=r) == ours for r in (ROUND_HALF_UP, ROUND_HALF_EVEN))


def in_points(number: str) -> str | None:
    """A fraction the source writes (below 1, with decimals) in points, as the prose writes a gain in
    nDCG@10 or recall: ``0.0284`` -> ``2.84``; None for another number."""
    value = _value(number)
    if abs(value) >= 1 or value.as_tuple().exponent >= 0:  # type: ignore[operator]
        return None
    return f"{value.scaleb(2):f}"


def derived(written: str, cited: list[str]) -> bool:
    """Whether ``written`` is the ratio or the difference of two of the source's numbers ``cited`` (those
    the span's other numbers cite), or of two of them in points (:func:`in_points`), rounded as it is
    written."""
    plain = [_value(c) for c in cited]
    points = [_value(p) for p in map(in_points, cited) if p is not None]
    for values in (plain, points):
        pairs = [(a, b) for i, a in enumerate(values) for j, b in enumerate(values) if i != j and b]
        if any(cites(written, f"{x:f}") for a, b in pairs for x in (a / b, abs(a - b))):
            return True
    return False


def source_text(benchmarks: Path, name: str) -> str | None:
    """The text of the file ``name`` (relative to ``benchmarks``), None if there is none."""
    file = benchmarks / name
    return file.read_text(encoding="utf-8") if file.is_file() else None


def _line(text: str, at: int) -> int:
    return text.count("\n", 0, at) + 1


def uncited(root: Path, paths: list[Path] | None = None) -> list[str]:
    """Every marked figure (``<!-- from ... -->``) of ``paths`` (the :func:`documents`) that its sources
    lack, as ``FILE:LINE: ...``."""
    benchmarks = root / "benchmarks"
    sources: dict[str, str | None] = {}
    errors = []
    for path in paths if paths is not None else documents(root):
        text = path.read_text(encoding="utf-8")
        for m in CITED.finditer(text):
            where = f"{path.relative_to(root)}:{_line(text, m.start())}"
            names = m.group("sources").split()
            for name in names:
                if name not in sources:
                    sources[name] = source_text(benchmarks, name)
            missing = [n for n in names if sources[n] is None]
            if missing or not names:
                errors.append(f"{where}: no source {' '.join(missing) or '(none named)'} for {m.group('body')!r}")
                continue
            theirs = [n for name in names for n in numbers(str(sources[name]))]
            theirs += [p for p in map(in_points, theirs) if p is not None]
            written = numbers(m.group("body"))
            if not written:
                errors.append(f"{where}: no number in {m.group('body')!r}")
            cited = {n: [t for t in theirs if cites(n, t)] for n in written}
            found = sorted({t for ts in cited.values() for t in ts})
            lacking = [n for n in written if not cited[n] and not derived(n, found)]
            if lacking:
                errors.append(f"{where}: {', '.join(lacking)} of {m.group('body')!r} not in {' '.join(names)}")
    return errors


#: What looks like a measurement in prose: a number and a unit of time, size, speed or ratio, points,
#: or an nDCG value (not percentages: most in the docs are confidence levels and settings).
MEASURE = re.compile(r"(?<![\w@.])\d[\d,]*(?:\.\d+)?(?: ?(?:ms|s|min|MB|GB|x)| points| documents per second)(?!\w)"
                     r"|nDCG@10 0\.\d+")
MARKED = re.compile(r"<!-- (results-figure [a-z0-9-]+|from [^>]*|not-a-result) -->.*?"
                    r"<!-- /(results-figure|from|not-a-result) -->", re.S)
CODE = re.compile(r"^```.*?^```|`[^`\n]*`", re.S | re.M)
TABLE = re.compile(r"<!-- results-table .*?<!-- /results-table -->", re.S)


def prose(text: str) -> str:
    """``text`` with its marked figures and tables, code blocks and inline code blanked (lines kept)."""
    for pattern in (TABLE, MARKED, CODE):
        text = pattern.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    return text


#: The documents whose every figure is marked (relative to the project's root).
SCANNED = ("README.md", "docs/benchmarks.md", "docs/cli.md", "docs/engine-plugin.md", "docs/engines.md",
           "docs/evaluation.md", "docs/feature-store.md", "docs/guarantees.md", "docs/how-it-works.md",
           "docs/hybrid.md", "docs/index.md", "docs/install.md", "docs/own-index.md", "docs/python-api.md",
           "docs/reranking.md", "docs/scoring.md", "docs/serve.md")


def unmarked(root: Path, paths: list[Path] | None = None) -> Iterator[str]:
    """What looks like a measurement (:data:`MEASURE`) in the prose of ``paths`` (:data:`SCANNED`), unmarked."""
    for path in paths if paths is not None else [root / name for name in SCANNED]:
        text = prose(path.read_text(encoding="utf-8"))
        for m in MEASURE.finditer(text):
            yield f"{path.relative_to(root)}:{_line(text, m.start())}: {m.group(0)!r} has no source marked"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write", action="store_true", help="rewrite the tables from the results")
    ap.add_argument("--results", type=Path, default=ROOT / "benchmarks" / "results")
    args = ap.parse_args()
    stale = check(ROOT, args.results, write=args.write)
    for path in stale:
        verb = "rewrote" if args.write else "differs from benchmarks/results"
        print(f"{path.relative_to(ROOT)}: a results table {verb}", file=sys.stderr)
    errors = [*unproduced(ROOT, args.results), *uncited(ROOT), *unmarked(ROOT)]
    for error in errors:
        print(error, file=sys.stderr)
    return 1 if (stale and not args.write) or errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
