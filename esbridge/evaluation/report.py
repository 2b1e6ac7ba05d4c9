"""Writing an evaluation: TREC run files, a markdown table, the JSON summary and plots.

Files under ``out/``::

    results.md            the table, the reference figures, the command and the machine
    results.json          {"dataset", "split", "queries", "results": {system: {measure: value}}}
    per_query.tsv         system, query, measure values
    runs/<system>.trec    TREC run files (qid Q0 docid rank score tag; or .trec.gz)
    plots/measures.png    a bar per system and measure
    plots/per_query_ndcg10.png   per-query nDCG@10 difference against the engine's BM25
    command.txt           the command that produced the files

Nothing written depends on timing, so two runs on the same machine give
identical files (the PNGs too, for one matplotlib version).
"""

from __future__ import annotations

import gzip
import json
import os
import platform
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from esbridge.errors import ConfigurationError
from esbridge.evaluation.metrics import MEASURES
from esbridge.evaluation.runner import BASELINE_PYSERINI, EvalResult

__all__ = [
    "REFERENCE",
    "Reference",
    "describe_machine",
    "markdown_table",
    "plot_measures",
    "plot_per_query",
    "write_report",
    "write_trec_run",
]

HEADERS = {"ndcg@10": "nDCG@10", "recall@100": "R@100", "recall@1000": "R@1000", "map": "MAP",
           "p@5": "P@5", "combined_score": "combined"}


@dataclass(frozen=True)
class Reference:
    """A published figure from another system (not measured by esbridge)."""

    system: str
    ndcg10: float | None
    recall100: float | None
    source: str


_ANSERINI = "Anserini/Pyserini BM25 (Lucene, k1=0.9, b=0.4, Porter, English stopwords), BEIR test"
_CLASSIC = ("plain BM25 (k1=0.9, b=0.4, lowercase alphanumeric tokens, Lucene stopwords, no stemming; "
            "nDCG with exponential gains)")
#: Reference figures by collection name: published BM25 and BMX numbers (the Anserini/Pyserini BEIR
#: regressions, the bm25s benchmarks, the BMX paper) and, for the classic collections, which have no
#: published reference, an approximate plain BM25.
REFERENCE: Mapping[str, tuple[Reference, ...]] = {
    "scifact": (
        Reference("Anserini BM25 flat", 0.6789, 0.9253, _ANSERINI),
        Reference("Anserini BM25 multifield", 0.6647, 0.9076, _ANSERINI),
        Reference("Elasticsearch BM25 k1=1.5 b=0.75", 0.690, None, "bm25s benchmarks"),
        Reference("BM25 (BMX paper)", 0.680, None, "Li et al. 2024"),
        Reference("BMX (BMX paper)", 0.694, None, "Li et al. 2024, dynamic alpha and beta"),
    ),
    "nfcorpus": (
        Reference("Anserini BM25 flat (original text)", 0.3218, 0.2457, _ANSERINI),
        Reference("Anserini BM25 multifield (original text)", 0.3254, 0.2500, _ANSERINI),
        Reference("Elasticsearch BM25 k1=1.5 b=0.75", 0.344, None, "bm25s benchmarks"),
    ),
    "cranfield": (Reference("plain BM25 (approximate)", 0.320, 0.687, _CLASSIC),),
    "cisi": (Reference("plain BM25 (approximate)", 0.311, 0.407, _CLASSIC),),
    "med": (Reference("plain BM25 (approximate)", 0.663, 0.768, _CLASSIC),),
}


def _matplotlib() -> Any:
    try:
        import matplotlib
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ConfigurationError(
            "plots need matplotlib; install it with: pip install 'esbridge[eval]' (or pass --no-plots)"
        ) from err
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def describe_machine(engine_label: str | None = None) -> dict[str, str]:
    """CPU model, cores, RAM, OS, Python and library versions (and the engine, if given)."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    ram = "unknown"
    try:
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
            ram = f"{kb / 1024 / 1024:.1f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    import numpy

    out = {
        "cpu": cpu,
        "cores": str(os.cpu_count()),
        "ram": ram,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "numpy": numpy.__version__,
    }
    try:
        import ir_measures

        out["ir-measures"] = ir_measures.__version__
    except (ImportError, AttributeError):
        pass
    if engine_label:
        out["engine"] = engine_label
    return out


def markdown_table(result: EvalResult) -> str:
    """The measured table: one row per system, one column per measure."""
    cols = (*MEASURES, "combined_score")
    lines = ["| system | " + " | ".join(HEADERS[c] for c in cols) + " |",
             "|---|" + "---:|" * len(cols)]
    for name in result.systems:
        means = result.means[name]
        lines.append(f"| {name} | " + " | ".join(f"{means[c]:.4f}" for c in cols) + " |")
    return "\n".join(lines)


def reference_table(dataset: str) -> str:
    """Published figures from other systems for ``dataset`` ('' when there are none)."""
    refs = REFERENCE.get(dataset.lower())
    if not refs:
        return ""
    lines = ["| reference system (not measured here) | nDCG@10 | R@100 | source |", "|---|---:|---:|---|"]
    for r in refs:
        n = f"{r.ndcg10:.4f}" if r.ndcg10 is not None else "–"
        rc = f"{r.recall100:.4f}" if r.recall100 is not None else "–"
        lines.append(f"| {r.system} | {n} | {rc} | {r.source} |")
    return "\n".join(lines)


def write_trec_run(path: Path, ranking: Mapping[str, Sequence[str]],
                   scores: Mapping[str, Sequence[float]], tag: str, queries: Sequence[str], *,
                   depth: int | None = None) -> None:
    """A TREC run file: ``qid Q0 docid rank score tag``, queries in ``queries`` order.

    The rank column is the ranking the measures saw (ties already broken by
    document id); trec_eval re-sorts by score and breaks ties its own way.  A path
    ending in ``.gz`` is written gzip-compressed (with a zero timestamp, so the bytes
    are reproducible); ``depth`` keeps the top ``depth`` hits of each query.
    """
    lines: list[str] = []
    for q in queries:
        pairs = list(zip(ranking.get(q, []), scores.get(q, [])))[:depth]
        lines.extend(f"{q} Q0 {doc} {rank} {score:.6f} {tag}\n" for rank, (doc, score) in enumerate(pairs, start=1))
    data = "".join(lines).encode("utf-8")
    if path.suffix == ".gz":
        with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as f:
            f.write(data)
    else:
        path.write_bytes(data)


def plot_measures(result: EvalResult, path: Path) -> None:
    """Grouped bars: one group per measure, one bar per system."""
    plt = _matplotlib()
    import numpy as np

    cols = (*MEASURES, "combined_score")
    names = list(result.systems)
    width = 0.8 / max(len(names), 1)
    fig, ax = plt.subplots(figsize=(max(8.0, 1.6 * len(cols)), 4.5))
    x = np.arange(len(cols))
    for i, name in enumerate(names):
        values = [result.means[name][c] for c in cols]
        ax.bar(x + (i - (len(names) - 1) / 2) * width, values, width, label=name)
    ax.set_xticks(x, [HEADERS[c] for c in cols])
    ax.set_ylim(0, 1)
    ax.set_ylabel("mean over judged queries")
    ax.set_title(f"{result.dataset} ({result.split}, {len(result.queries)} queries, window {result.window})")
    ax.legend(fontsize=8, ncol=2)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100, metadata={"Software": None})
    plt.close(fig)


def plot_per_query(result: EvalResult, path: Path, measure: str = "ndcg@10",
                   against: str | None = None) -> bool:
    """Per-query ``measure`` difference of each system against ``against`` (the engine's
    Pyserini BM25, else ``bm25``), sorted; False when there is nothing to compare with."""
    plt = _matplotlib()
    import numpy as np

    base = against or (BASELINE_PYSERINI if BASELINE_PYSERINI in result.systems else "bm25")
    if base not in result.systems:
        return False
    others = [n for n in result.systems if n != base]
    if not others:
        return False
    fig, axes = plt.subplots(len(others), 1, figsize=(9.0, 1.9 * len(others) + 0.8), sharex=True,
                             squeeze=False)
    for ax, name in zip(axes[:, 0], others):
        diff = np.array(sorted((result.per_query[name][q][measure] - result.per_query[base][q][measure]
                                for q in result.queries), reverse=True))
        colours = np.where(diff > 0, "tab:green", np.where(diff < 0, "tab:red", "tab:gray"))
        ax.bar(np.arange(diff.size), diff, width=1.0, color=colours)
        ax.axhline(0, color="black", linewidth=0.6)
        wins, losses = int((diff > 0).sum()), int((diff < 0).sum())
        ax.set_title(f"{name} − {base}: mean {diff.mean():+.4f}, {wins} better, {losses} worse",
                     fontsize=9)
        ax.set_ylabel(f"Δ {HEADERS.get(measure, measure)}", fontsize=8)
    axes[-1, 0].set_xlabel("queries, sorted by difference")
    fig.tight_layout()
    fig.savefig(path, dpi=100, metadata={"Software": None})
    plt.close(fig)
    return True


def write_report(result: EvalResult, out: Path, *, command: str | None = None,
                 json_path: Path | None = None, plots: bool = True,
                 machine: Mapping[str, str] | None = None, runs: str = "trec",
                 run_depth: int | None = None) -> dict[str, Path]:
    """Write every file of an evaluation under ``out`` (and the JSON at ``json_path`` if given).

    Args:
        runs: ``trec`` (plain run files), ``gz`` (gzip-compressed) or ``none``.
        run_depth: hits per query kept in the run files (default: all).

    Returns:
        ``{kind: path}`` of the files written.
    """
    if runs not in ("trec", "gz", "none"):
        raise ConfigurationError(f"runs must be 'trec', 'gz' or 'none', got {runs!r}")
    if run_depth is not None and run_depth < 1:
        raise ConfigurationError(f"run depth must be >= 1, got {run_depth}")
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    if runs != "none":
        folder = out / "runs"
        folder.mkdir(exist_ok=True)
        for name, run in result.systems.items():
            p = folder / (f"{name}.trec.gz" if runs == "gz" else f"{name}.trec")
            write_trec_run(p, run.ranking, run.scores, f"esbridge-{name}", result.queries, depth=run_depth)
            written[f"run:{name}"] = p
    with open(out / "per_query.tsv", "w", encoding="utf-8") as f:
        f.write("system\tquery\t" + "\t".join(MEASURES) + "\n")
        for name in result.systems:
            for q in result.queries:
                vals = result.per_query[name][q]
                f.write(f"{name}\t{q}\t" + "\t".join(f"{vals[m]:.6f}" for m in MEASURES) + "\n")
    written["per_query"] = out / "per_query.tsv"
    summary = json.dumps(result.to_json(), indent=2) + "\n"
    (out / "results.json").write_text(summary)
    written["json"] = out / "results.json"
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(summary)
        written["json_copy"] = json_path
    if plots:
        (out / "plots").mkdir(exist_ok=True)
        plot_measures(result, out / "plots" / "measures.png")
        written["plot:measures"] = out / "plots" / "measures.png"
        if plot_per_query(result, out / "plots" / "per_query_ndcg10.png"):
            written["plot:per_query"] = out / "plots" / "per_query_ndcg10.png"
    if command:
        (out / "command.txt").write_text(command + "\n")
        written["command"] = out / "command.txt"
    machine = dict(machine or describe_machine(result.engine))
    md = [f"# {result.dataset}: split `{result.split}`, {len(result.queries)} judged queries", ""]
    if command:
        md += ["Produced by:", "", "```", command, "```", ""]
    md += [
        f"First stage: {result.engine} BM25 (k1=0.9, b=0.4) on the combined field of index "
        f"`{result.index}`; the rerankers rescore its top {result.window} hits exactly. "
        "Rankings break score ties by document id. nDCG@10 is trec_eval's `ndcg_cut.10` (linear gains), "
        "via ir-measures; combined = 0.8·R@100 + 0.2·nDCG@10.",
        "",
        markdown_table(result),
        "",
        "Systems:",
        "",
    ]
    md += [f"- `{name}`: {run.description}" for name, run in result.systems.items()]
    ref = reference_table(result.dataset)
    if ref:
        md += ["", "## Reference figures from other systems", "",
               "Published numbers (each row names its source) and, for the classic collections, an approximate "
               "plain BM25; other software, analyzers and sometimes other text, so comparable only roughly.",
               "", ref]
    md += ["", "## Machine", ""] + [f"- {k}: {v}" for k, v in machine.items()] + [""]
    (out / "results.md").write_text("\n".join(md))
    written["markdown"] = out / "results.md"
    return written
