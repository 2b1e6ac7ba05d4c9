"""Writing an evaluation: TREC run files, a markdown table, the JSON summary and plots.

Files under ``out/``::

    results.md            the table (significant differences from the baselines marked), the
                          significance tests, notes on coverage, the reference figures, the
                          command and the machine
    results.json          {"dataset", "split", "queries", "results": {system: {measure: value}}},
                          then what produced them (EvalResult.to_json)
    per_query.tsv         system, query, measure values
    runs/<system>.trec    TREC run files (qid Q0 docid rank score tag; or .trec.gz) of esbridge's
                          systems and the baselines (run files given by the user are not copied)
    plots/measures.png    each system's gain over the first baseline, per measure, with 95% CIs
    plots/per_query_ndcg10.png   per-query nDCG@10 difference against the first baseline
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
from esbridge.evaluation.batch import trec_lines
from esbridge.evaluation.metrics import MEASURES
from esbridge.evaluation.runner import BASELINE_PYSERINI, EvalResult

__all__ = [
    "REFERENCE",
    "Reference",
    "describe_machine",
    "markdown_table",
    "marks_legend",
    "plot_measures",
    "plot_per_query",
    "significance_markdown",
    "significance_tables",
    "write_report",
    "write_text",
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


_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _marks(result: EvalResult, name: str, measure: str) -> str:
    """``▲a`` / ``▼a`` for each baseline ``a`` the system is significantly better / worse than."""
    comparisons = result.significance().get("comparisons", {})
    out = ""
    for letter, base in zip(_LETTERS, result.reference_systems()):
        cell = comparisons.get(base, {}).get(name, {}).get(measure)
        if cell and cell["significant"]:
            out += ("▲" if cell["difference"] > 0 else "▼") + letter
    return out


def markdown_table(result: EvalResult, *, marks: bool = True) -> str:
    """The measured table: one row per system, one column per measure; with ``marks``, each
    value significantly better (▲) or worse (▼) than a baseline carries that baseline's letter
    (:func:`marks_legend` says which letter is which)."""
    cols = (*MEASURES, "combined_score")
    lines = ["| system | " + " | ".join(HEADERS[c] for c in cols) + " |",
             "|---|" + "---:|" * len(cols)]
    letters = dict(zip(result.reference_systems(), _LETTERS)) if marks else {}
    for name in result.systems:
        means = result.means[name]
        label = f"{name} ({letters[name]})" if name in letters else name
        cells = [f"{means[c]:.4f}" + (f" {m}" if marks and (m := _marks(result, name, c)) else "") for c in cols]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def marks_legend(result: EvalResult) -> str:
    """One sentence on the table's marks ('' without baselines)."""
    bases = result.reference_systems()
    if not bases or len(result.systems) <= len(bases):
        return ""
    sig = result.significance()
    named = "; ".join(f"{letter} = `{b}`" for letter, b in zip(_LETTERS, bases))
    return (f"▲x / ▼x: significantly better / worse than baseline x ({named}): two-sided paired randomisation "
            f"test over the {sig['queries']} queries, p-values corrected with Holm–Bonferroni per baseline and "
            f"measure over {_family(sig)}, α = {sig['alpha']:g}.")


def _family(sig: Mapping[str, Any]) -> str:
    """The Holm family of a significance summary, named: 'the 3 systems compared with that baseline
    (`a`, `b`, `c`)'."""
    family = list(sig.get("family") or [])
    listed = ", ".join(f"`{name}`" for name in family)
    return f"the {len(family)} system{'s' if len(family) != 1 else ''} compared with that baseline ({listed})"


def _p(value: float) -> str:
    return "< 0.0001" if value < 1e-4 else f"{value:.4f}"


def significance_markdown(result: EvalResult) -> str:
    """The significance section of ``results.md``: the tests, the family of the correction, and
    :func:`significance_tables`."""
    sig = result.significance()
    tables = significance_tables(result)
    if not tables:
        return ""
    n = sig["queries"]
    how = (f"all {sig['trials']} sign assignments (exact)" if sig.get("seed") is None else
           f"{sig['trials']} random sign assignments, seed {sig['seed']}, p = (1 + hits) / (1 + trials)")
    lines = [
        "## Significance", "",
        f"Each system is compared with each baseline on the same {n} queries, measure by measure, with a "
        f"two-sided paired randomisation test (the sign of each per-query difference flipped at random; "
        f"{how}) and a two-sided paired t-test. For one baseline and one measure, the p-values of "
        f"{_family(sig)} form one family, corrected together with Holm–Bonferroni (family-wise error rate "
        f"α = {sig['alpha']:g}); a value in the table above is marked when the corrected randomisation-test "
        "p-value is below α. A system's corrected p-value depends on the family (another system, such as a "
        "--run file, added to it can raise it); its raw p-value does not. Intervals are t-based 95% "
        "confidence intervals of the mean per-query difference. `results.json` holds every measure's figures.",
        "", tables,
    ]
    return "\n".join(lines)


def significance_tables(result: EvalResult) -> str:
    """For each baseline, the gains of nDCG@10 and R@100 with their 95% confidence intervals, raw
    p-values and p-values corrected within the family ('' without comparisons)."""
    sig = result.significance()
    comparisons = sig.get("comparisons") or {}
    if not comparisons:
        return ""
    lines: list[str] = []
    for base, systems in comparisons.items():
        lines += [*([""] if lines else []), f"Against `{base}` (p: raw / Holm-corrected within the family):", "",
                  "| system | Δ nDCG@10 [95% CI] | p rand. | p rand. Holm | p t | p t Holm | queries better / worse "
                  "| Δ R@100 [95% CI] | p rand. | p rand. Holm |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for name, measures in systems.items():
            nd, rc = measures["ndcg@10"], measures["recall@100"]
            lines.append(
                f"| {name} | {nd['difference']:+.4f} [{nd['ci95'][0]:+.4f}, {nd['ci95'][1]:+.4f}] | "
                f"{_p(nd['p_randomization'])} | {_p(nd['p_randomization_holm'])}{' *' if nd['significant'] else ''} | "
                f"{_p(nd['p_t'])} | {_p(nd['p_t_holm'])} | {nd['wins']} / {nd['losses']} | "
                f"{rc['difference']:+.4f} [{rc['ci95'][0]:+.4f}, {rc['ci95'][1]:+.4f}] | {_p(rc['p_randomization'])} | "
                f"{_p(rc['p_randomization_holm'])}{' *' if rc['significant'] else ''} |")
    lines += ["", f"(*: corrected p-value below α = {sig['alpha']:g}.)"]
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
    data = "".join(trec_lines(q, ranking.get(q, []), scores.get(q, []), tag, depth) for q in queries).encode("utf-8")
    if path.suffix == ".gz":
        with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as f:
            f.write(data)
    else:
        path.write_bytes(data)


def plot_measures(result: EvalResult, path: Path) -> None:
    """Each system's gain over the first baseline, one panel per measure: the mean per-query
    difference with its 95% confidence interval, coloured when the corrected randomisation test
    finds it significant; each panel's scale fits its differences.  Without a baseline, the
    means themselves on a scale that fits them."""
    plt = _matplotlib()
    import numpy as np
    from matplotlib.patches import Patch

    cols = (*MEASURES, "combined_score")
    bases = result.reference_systems()
    comparisons = result.significance().get("comparisons") or {}
    base = bases[0] if bases and comparisons.get(bases[0]) else None
    names = [n for n in result.systems if n != base and (base is None or n in comparisons[base])]
    if not names:
        names = list(result.systems)
    ncol = 3
    nrow = (len(cols) + ncol - 1) // ncol
    height = max(2.2, 0.32 * len(names) + 1.2)
    fig, axes = plt.subplots(nrow, ncol, figsize=(13.0, height * nrow + 1.0), sharey=True, squeeze=False)
    y = np.arange(len(names))[::-1]
    colours = {1: "tab:green", -1: "tab:red", 0: "tab:gray"}
    for k, measure in enumerate(cols):
        ax = axes[k // ncol, k % ncol]
        if base is not None:
            cells = [comparisons[base][n][measure] for n in names]
            diff = np.array([c["difference"] for c in cells])
            lo = np.array([c["ci95"][0] for c in cells])
            hi = np.array([c["ci95"][1] for c in cells])
            sign = [(1 if c["difference"] > 0 else -1) if c["significant"] else 0 for c in cells]
            ax.barh(y, diff, height=0.6, color=[colours[s] for s in sign])
            ax.errorbar(diff, y, xerr=[diff - lo, hi - diff], fmt="none", ecolor="black", elinewidth=0.9, capsize=2.5)
            ax.axvline(0, color="black", linewidth=0.7)
            left, right = min(float(lo.min()), 0.0), max(float(hi.max()), 0.0)
            span = max(right - left, 1e-3)
            ax.set_xlim(left - 0.28 * span, right + 0.28 * span)
            for yi, d, l_, h_ in zip(y, diff, lo, hi):
                ax.annotate(f"{d:+.4f}", (h_ if d >= 0 else l_, yi), xytext=(3 if d >= 0 else -3, 0),
                            textcoords="offset points", ha="left" if d >= 0 else "right", va="center", fontsize=7)
            ax.set_title(f"{HEADERS[measure]}: gain over {result.means[base][measure]:.4f}", fontsize=9)
        else:
            values = np.array([result.means[n][measure] for n in names])
            ax.barh(y, values, height=0.6, color="tab:blue")
            low, high = float(values.min()), float(values.max())
            pad = max(high - low, 0.01) * 0.5
            ax.set_xlim(max(0.0, low - pad), min(1.0, high + pad) if high + pad > low else high + 0.01)
            for yi, v in zip(y, values):
                ax.annotate(f"{v:.4f}", (v, yi), xytext=(3, 0), textcoords="offset points", va="center", fontsize=7)
            ax.set_title(HEADERS[measure], fontsize=9)
        ax.set_yticks(y, names, fontsize=8)
        ax.tick_params(axis="x", labelsize=7)
        ax.grid(axis="x", alpha=0.3)
    for k in range(len(cols), nrow * ncol):
        axes[k // ncol, k % ncol].set_visible(False)
    title = f"{result.dataset} ({result.split}, {len(result.queries)} queries, window {result.window})"
    if base is not None:
        sig = result.significance()
        fig.suptitle(f"{title}: mean per-query gain over {base}, with 95% confidence intervals", fontsize=10)
        handles = [Patch(color=colours[1],
                         label=f"significantly better (randomisation test, Holm, α = {sig['alpha']:g})"),
                   Patch(color=colours[-1], label="significantly worse"),
                   Patch(color=colours[0], label="not significant")]
        fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=8, frameon=False)
    else:
        fig.suptitle(f"{title}: means", fontsize=10)
    fig.tight_layout(rect=(0, 0.05 if base is not None else 0, 1, 0.95))
    fig.savefig(path, dpi=100, metadata={"Software": None})
    plt.close(fig)


def plot_per_query(result: EvalResult, path: Path, measure: str = "ndcg@10",
                   against: str | None = None, label: int = 3) -> bool:
    """Per-query ``measure`` difference of each system against ``against`` (default: the first
    baseline), sorted, one panel per system on a shared scale; the ``label`` largest wins and
    losses of each panel carry their query ids.  False when there is nothing to compare with."""
    plt = _matplotlib()
    import numpy as np

    bases = result.reference_systems()
    base = against or (bases[0] if bases else (BASELINE_PYSERINI if BASELINE_PYSERINI in result.systems else "bm25"))
    if base not in result.systems:
        return False
    others = [n for n in result.systems if n != base]
    if not others:
        return False
    diffs = {}
    for name in others:
        pairs = sorted(((result.per_query[name][q][measure] - result.per_query[base][q][measure], q)
                        for q in result.queries), key=lambda dq: (-dq[0], dq[1]))
        diffs[name] = pairs
    top = max((abs(d) for pairs in diffs.values() for d, _ in pairs), default=0.0)
    limit = max(top, 0.05) * 1.3
    fig, axes = plt.subplots(len(others), 1, figsize=(10.0, 2.0 * len(others) + 0.8), sharex=True, sharey=True,
                             squeeze=False)
    for ax, name in zip(axes[:, 0], others):
        diff = np.array([d for d, _ in diffs[name]])
        qids = [q for _, q in diffs[name]]
        colours = np.where(diff > 0, "tab:green", np.where(diff < 0, "tab:red", "tab:gray"))
        ax.bar(np.arange(diff.size), diff, width=1.0, color=colours)
        ax.axhline(0, color="black", linewidth=0.6)
        ax.set_ylim(-limit, limit)
        wins, losses = int((diff > 0).sum()), int((diff < 0).sum())
        marked = [i for i in range(min(label, wins))] + [diff.size - 1 - i for i in range(min(label, losses))]
        for i in marked:
            up = diff[i] > 0
            ax.annotate(qids[i], (i, diff[i]), xytext=(0, 2 if up else -2), textcoords="offset points",
                        rotation=90, ha="center", va="bottom" if up else "top", fontsize=7)
        lo, hi = _ci(diff)
        ax.set_title(f"{name} − {base}: mean {diff.mean():+.4f} (95% CI {lo:+.4f} to {hi:+.4f}), "
                     f"{wins} better, {losses} worse", fontsize=9)
        ax.set_ylabel(f"Δ {HEADERS.get(measure, measure)}", fontsize=8)
    axes[-1, 0].set_xlabel(f"queries, sorted by difference; the {label} largest gains and losses are labelled "
                           "with their query ids")
    fig.tight_layout()
    fig.savefig(path, dpi=100, metadata={"Software": None})
    plt.close(fig)
    return True


def _ci(values: Any) -> tuple[float, float]:
    from esbridge.evaluation.significance import mean_ci

    return mean_ci(values)


def write_text(path: Path, text: str, *, private: bool = False) -> None:
    """Write ``text`` to ``path``; ``private``: readable by its owner only (mode 0600 from the
    start, also when the file existed)."""
    if private:
        from esbridge.nodes.es_distribution import write_private

        write_private(path, text)
    else:
        path.write_text(text)


def write_report(result: EvalResult, out: Path, *, command: str | None = None,
                 json_path: Path | None = None, plots: bool = True,
                 machine: Mapping[str, str] | None = None, runs: str = "trec",
                 run_depth: int | None = None, private: bool = False) -> dict[str, Path]:
    """Write every file of an evaluation under ``out`` (and the JSON at ``json_path`` if given).

    Args:
        runs: ``trec`` (plain run files), ``gz`` (gzip-compressed) or ``none``.
        run_depth: hits per query kept in the run files (default: all).
        private: the files that record ``command`` (``results.md``, ``results.json`` and its
            copy, ``command.txt``) are readable by their owner only (mode 0600), for a command
            that was given credentials (their values are never in ``command``).

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
            if run.kind == "external":
                continue  # the user's own file
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
    summary = json.dumps(result.to_json(run_depth=run_depth, command=command), indent=2) + "\n"
    write_text(out / "results.json", summary, private=private)
    written["json"] = out / "results.json"
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        write_text(json_path, summary, private=private)
        written["json_copy"] = json_path
    if plots:
        (out / "plots").mkdir(exist_ok=True)
        plot_measures(result, out / "plots" / "measures.png")
        written["plot:measures"] = out / "plots" / "measures.png"
        if plot_per_query(result, out / "plots" / "per_query_ndcg10.png"):
            written["plot:per_query"] = out / "plots" / "per_query_ndcg10.png"
    if command:
        write_text(out / "command.txt", command + "\n", private=private)
        written["command"] = out / "command.txt"
    machine = dict(machine or describe_machine(result.engine))
    what = "judgments" if result.source == "index" else "split"
    md = [f"# {result.dataset}: {what} `{result.split}`, {len(result.queries)} judged queries", ""]
    if command:
        md += ["Produced by:", "", "```", command, "```", ""]
    sim = result.first_stage.get("similarity") or {"type": "BM25", "k1": 0.9, "b": 0.4}
    sim_text = (f"BM25 (k1={sim['k1']:g}, b={sim['b']:g})" if str(sim.get("type", "BM25")).upper() == "BM25"
                else f"similarity {sim['type']}")
    md += [
        f"First stage: {result.engine} {sim_text} on the combined field of index "
        f"`{result.index}`; the rerankers rescore its top {result.window} hits exactly. "
        "Rankings break score ties by document id. nDCG@10 is trec_eval's `ndcg_cut.10` (linear gains), "
        "via ir-measures; combined = 0.8·R@100 + 0.2·nDCG@10.",
        "",
        markdown_table(result),
        "",
    ]
    legend = marks_legend(result)
    if legend:
        md += [legend, ""]
    md += ["Systems:", ""]
    md += [f"- `{name}`: {run.description}" for name, run in result.systems.items()]
    if result.notes:
        md += ["", "## Coverage", ""] + [f"- {note}" for note in result.notes]
    section = significance_markdown(result)
    if section:
        md += ["", section]
    ref = reference_table(result.dataset)
    if ref:
        md += ["", "## Reference figures from other systems", "",
               "Published numbers (each row names its source) and, for the classic collections, an approximate "
               "plain BM25; other software, analyzers and sometimes other text, so comparable only roughly.",
               "", ref]
    md += ["", "## Machine", ""] + [f"- {k}: {v}" for k, v in machine.items()] + [""]
    write_text(out / "results.md", "\n".join(md), private=private)
    written["markdown"] = out / "results.md"
    return written
