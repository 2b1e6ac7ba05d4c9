"""How deep the hybrid pipeline's searches need to go: its quality at smaller depths, on tuning judgments.

Each setting runs ``esbridge eval`` on the tuning part of each collection (SciFact's training
judgments, the others' fixed half ``test:tune``; never the test judgments) with the vectors in the
engine (``--vectors engine``: the depths matter for speed only where the engine searches the
vectors, whose cost grows with the depth), and the table gives the hybrid pipeline's nDCG@10 against
the shipped depths (1,000 everywhere):

* ``semantic_feedback_depth=100``: the second semantic pass (from the query vector moved towards
  the first fusion's top documents) returns 100 documents instead of 1,000;
* ``keyword_depth=100``: the keyword strategy's engine query returns 100;
* both;
* ``semantic_depth=100`` and ``300``: both semantic passes return that many;
* ``semantic_feedback_from=lexical_semantic``: not a depth but an order: the second semantic pass
  takes its feedback documents from the lexical and semantic lists fused, without the keyword
  strategy's, so that it runs while the keyword strategy does (written to
  ``benchmarks/results/pipeline-feedback-order.md`` with ``--settings base,fbls``);
* ``semantic_feedback_scope=candidates``: the second semantic pass searches only the documents of
  the first fusion (the engine's kNN filtered to their ids) instead of the whole index
  (``benchmarks/results/pipeline-feedback-scope.md`` with ``--settings base,fbcand``).

Usage (one command; an engine that searches vectors, e.g. ``esbridge engine start``'s default node;
``DATA`` holds the BEIR-layout collections):

    python benchmarks/pipeline_depths.py --data DATA --url URL --work DIR [--settings base,fb100,...]

Each run's ``results.json`` is kept under ``--work`` and reused when there: a run stopped part way
goes on where it stopped.  The table goes to ``benchmarks/results/pipeline-depths.md``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import machine  # noqa: E402

COLLECTIONS = (("scifact", "train"), ("nfcorpus", "test:tune"), ("cranfield", "test:tune"), ("cisi", "test:tune"),
               ("med", "test:tune"))
#: Setting name -> (its folder under ``--work``, the pipeline parameters it changes).
SETTINGS: dict[str, tuple[str, tuple[str, ...]]] = {
    "shipped (1,000 everywhere)": ("base", ()),
    "semantic_feedback_depth=100": ("fb100", ("semantic_feedback_depth=100",)),
    "keyword_depth=100": ("kw100", ("keyword_depth=100",)),
    "semantic_feedback_depth=100, keyword_depth=100": ("fb100kw100", ("semantic_feedback_depth=100",
                                                                      "keyword_depth=100")),
    "semantic_depth=100": ("sem100", ("semantic_depth=100",)),
    "semantic_depth=300": ("sem300", ("semantic_depth=300",)),
    "semantic_feedback_from=lexical_semantic": ("fbls", ("semantic_feedback_from=lexical_semantic",)),
    "semantic_feedback_scope=candidates": ("fbcand", ("semantic_feedback_scope=candidates",)),
}
#: The settings asked for alone (with ``base``) that have a table of their own: folder -> (file, title).
ALONE = {"fbls": ("pipeline-feedback-order", "feedback order"),
         "fbcand": ("pipeline-feedback-scope", "feedback scope")}
#: The settings a run makes by default (the depths; the feedback order is asked for by name).
DEPTHS = ("base", "fb100", "kw100", "fb100kw100", "sem100", "sem300")


def run(data: Path, url: str, work: Path, setting: str, collection: str, split: str) -> dict[str, float]:
    """The hybrid row of one ``esbridge eval`` run (made unless its results are under ``work``)."""
    folder, params = SETTINGS[setting]
    out = work / (folder if split != "test" else f"{folder}-test") / collection
    results = out / "results.json"
    if not results.is_file():
        cmd = [sys.executable, "-m", "esbridge.cli", "eval", "--dataset", str(data / collection), "--scorers",
               "evolved", "--no-baselines", "--split", split, "--window", "1000", "--url", url, "--vectors",
               "engine", "--out", str(out), "--runs", "none", "--no-plots", "--quiet"]
        for param in params:
            cmd += ["--pipeline-param", param]
        subprocess.run(cmd, check=True)
    row: dict[str, float] = json.loads(results.read_text())["results"]["hybrid"]
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True, help="the folder holding the BEIR-layout collections")
    ap.add_argument("--url", required=True, help="an engine that searches vectors")
    ap.add_argument("--work", type=Path, required=True, help="where each run's results are kept")
    ap.add_argument("--settings", default=",".join(DEPTHS),
                    help=f"the settings to run, by folder name (default {','.join(DEPTHS)}; base always runs): "
                         f"{', '.join(folder for folder, _ in SETTINGS.values())}")
    ap.add_argument("--test", action="store_true",
                    help="measure on the test judgments instead (every collection's split `test`; to report a "
                         "setting chosen on the tuning parts, never to choose one); the table's name gets `-test`")
    ap.add_argument("--out", type=Path, default=None,
                    help="the table (default benchmarks/results/pipeline-depths.md, or pipeline-feedback-order.md "
                         "for --settings base,fbls, pipeline-feedback-scope.md for base,fbcand)")
    args = ap.parse_args()
    folders = {folder: name for name, (folder, _) in SETTINGS.items()}
    asked = ["base", *(f for f in args.settings.split(",") if f and f != "base")]
    unknown = [f for f in asked if f not in folders]
    if unknown:
        ap.error(f"unknown setting {', '.join(unknown)}; choose from {', '.join(folders)}")
    stem, title = ALONE[asked[1]] if len(asked) == 2 and asked[1] in ALONE else ("pipeline-depths", "depths")
    out = args.out or HERE / "results" / (stem + ("-test" if args.test else "") + ".md")
    splits = [(c, "test" if args.test else split) for c, split in COLLECTIONS]
    table = {folders[f]: {c: run(args.data, args.url, args.work, folders[f], c, split) for c, split in splits}
             for f in asked}
    base = table["shipped (1,000 everywhere)"]
    names = [c for c, _ in COLLECTIONS]
    lines = [f"# The hybrid pipeline's {title}, on {'test' if args.test else 'tuning'} judgments", "",
             f"Machine: {machine()}. The vectors in the engine (OpenSearch 3.5 with k-NN). "
             + ("Test judgments (the split `test` of each collection), to report settings chosen on the tuning "
                "parts. " if args.test else "Tuning judgments only: SciFact's training queries, the others' fixed "
                                            "half `test:tune`. ")
             + "One run each, every setting on the same index.", "",
             "Command: `python benchmarks/pipeline_depths.py --data DATA --url URL --work DIR"
             + ("" if asked == ["base", *DEPTHS[1:]] else f" --settings {','.join(asked)}")
             + (" --test" if args.test else "") + "`", "",
             "Hybrid nDCG@10 (points against the shipped settings):", "",
             "| setting | " + " | ".join(names) + " | mean | worst |", "|---|" + "---:|" * (len(names) + 2)]
    for setting, rows in table.items():
        if setting == "shipped (1,000 everywhere)":
            cells = [f"{rows[c]['ndcg@10']:.4f}" for c in names]
            lines.append(f"| {setting} | " + " | ".join(cells) + " | | |")
            continue
        diffs = [100 * (rows[c]["ndcg@10"] - base[c]["ndcg@10"]) for c in names]
        cells = [f"{rows[c]['ndcg@10']:.4f} ({d:+.2f})" for c, d in zip(names, diffs, strict=True)]
        lines.append(f"| {setting} | " + " | ".join(cells) + f" | {sum(diffs) / len(diffs):+.2f} | {min(diffs):+.2f} |")
    text = "\n".join(lines) + "\n"
    out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
