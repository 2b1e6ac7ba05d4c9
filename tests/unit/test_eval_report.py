"""Report files from a synthetic evaluation, the JSON shape, and the command-line wiring."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from esbridge.errors import ConfigurationError
from esbridge.evaluation.metrics import mean_metrics, per_query_metrics
from esbridge.evaluation.report import REFERENCE, write_report
from esbridge.evaluation.runner import (
    BASELINE_PYSERINI,
    EvalConfig,
    EvalResult,
    SystemRun,
    parse_param_overrides,
)
from esbridge.scoring.evolved import EvolvedParams

MEASURE_KEYS = {"ndcg@10", "recall@100", "recall@1000", "map", "p@5", "combined_score"}


def _result() -> EvalResult:
    qrels = {"q1": {"a": 1, "b": 2}, "q2": {"c": 1}}
    systems = {
        BASELINE_PYSERINI: SystemRun(BASELINE_PYSERINI, "the engine", "baseline",
                                     {"q1": ["a", "x", "b"], "q2": ["y", "c"]},
                                     {"q1": [3.0, 2.0, 1.0], "q2": [2.0, 1.0]}),
        "evolved": SystemRun("evolved", "reranked", "rerank",
                             {"q1": ["b", "a", "x"], "q2": ["c", "y"]},
                             {"q1": [3.5, 2.5, 0.5], "q2": [9.0, 1.0]}),
    }
    per_query = {n: per_query_metrics(qrels, s.ranking) for n, s in systems.items()}
    return EvalResult(dataset="scifact", split="test", queries=["q1", "q2"], window=1000,
                      engine="OpenSearch 3.8.0", index="esbridge-eval-scifact", systems=systems,
                      per_query=per_query, means={n: mean_metrics(p) for n, p in per_query.items()})


#: The keys of results.json that readers of the committed results rely on, and the keys added after them.
AGREED_KEYS = {"dataset", "split", "queries", "results"}
PROVENANCE_KEYS = {"esbridge_version", "engine", "index", "window", "run_depth", "first_stage", "systems",
                   "baselines", "significance", "fingerprint", "notes", "command"}


def test_json_keeps_the_agreed_shape(tmp_path: Path) -> None:
    result = _result()
    written = write_report(result, tmp_path / "out", command="esbridge eval --dataset scifact",
                           json_path=tmp_path / "copy.json", machine={"cpu": "test"})
    data = json.loads((tmp_path / "copy.json").read_text())
    assert set(data) == AGREED_KEYS | PROVENANCE_KEYS
    assert (data["dataset"], data["split"], data["queries"]) == ("scifact", "test", 2)
    assert list(data["results"]) == [BASELINE_PYSERINI, "evolved"]
    for values in data["results"].values():
        assert set(values) == MEASURE_KEYS
        assert all(isinstance(v, float) for v in values.values())
    assert data == json.loads(written["json"].read_text())
    assert data["results"]["evolved"]["ndcg@10"] == pytest.approx(1.0)


def test_runs_table_plots_and_command(tmp_path: Path) -> None:
    out = tmp_path / "out"
    write_report(_result(), out, command="esbridge eval --dataset scifact", machine={"cpu": "test"})
    run = (out / "runs" / "evolved.trec").read_text().splitlines()
    assert run[0] == "q1 Q0 b 1 3.500000 esbridge-evolved"
    assert len(run) == 5
    md = (out / "results.md").read_text()
    assert "| evolved | 1.0000 |" in md
    assert "Reference figures from other systems" in md and "0.6789" in md
    assert "esbridge eval --dataset scifact" in md and "- cpu: test" in md
    assert (out / "command.txt").read_text() == "esbridge eval --dataset scifact\n"
    assert (out / "plots" / "measures.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / "plots" / "per_query_ndcg10.png").stat().st_size > 1000
    assert (out / "per_query.tsv").read_text().count("\n") == 1 + 2 * 2


def test_reports_are_byte_identical(tmp_path: Path) -> None:
    for name in ("a", "b"):
        write_report(_result(), tmp_path / name, machine={"cpu": "test"})
    for rel in ("results.json", "results.md", "runs/evolved.trec", "plots/measures.png",
                "plots/per_query_ndcg10.png"):
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes(), rel


def test_reference_covers_the_shared_collections() -> None:
    assert set(REFERENCE) == {"scifact", "nfcorpus", "cranfield", "cisi", "med"}


def test_param_overrides_and_config_errors() -> None:
    got = parse_param_overrides(["evolved.w_bi=0.3", "evolved.mic_gate=true"], ["evolved"])
    assert got == {"evolved": EvolvedParams(w_bi=0.3, mic_gate=True)}
    with pytest.raises(ConfigurationError, match="SCORER.NAME=VALUE"):
        parse_param_overrides(["w_bi=0.3"], ["evolved"])
    with pytest.raises(ConfigurationError, match="not among the scorers"):
        parse_param_overrides(["bmx.alpha=1"], ["evolved"])
    with pytest.raises(ConfigurationError, match="no parameter.*nope.*valid"):
        parse_param_overrides(["evolved.nope=1"], ["evolved"])
    with pytest.raises(ValueError, match="unknown scorer 'bm99'"):
        EvalConfig(scorers=("bm99",))
    with pytest.raises(ConfigurationError, match="window must be >= 1"):
        EvalConfig(scorers=("bm25",), window=0)
    with pytest.raises(ConfigurationError, match="is a baseline"):
        EvalConfig(scorers=(BASELINE_PYSERINI,))


def _parser() -> argparse.ArgumentParser:
    from esbridge import cli_eval
    from esbridge.cli import _connection_args

    parser = argparse.ArgumentParser(prog="esbridge")
    sub = parser.add_subparsers(dest="command", required=True)
    cli_eval.add_commands(sub, _connection_args, lambda a: None)
    return parser


def test_cli_defaults() -> None:
    args: Any = _parser().parse_args(["eval", "--dataset", "scifact"])
    assert (args.scorers, args.split, args.window) == ("bm25,bmx,evolved", None, 1000)  # None: test, for --dataset
    args = _parser().parse_args(["tune", "--dataset", "a", "--dataset", "b", "--scorer", "evolved",
                                 "--split", "train", "--split", "test:tune"])
    assert args.dataset == ["a", "b"] and args.split == ["train", "test:tune"] and args.trials == 200


def test_cli_tune_errors_before_any_engine_work(capsys: pytest.CaptureFixture[str]) -> None:
    from esbridge import cli_eval

    def boom(args: argparse.Namespace) -> None:
        raise AssertionError("no engine should be needed to reject these arguments")

    parser = argparse.ArgumentParser(prog="esbridge")
    sub = parser.add_subparsers(dest="command", required=True)
    cli_eval.add_commands(sub, lambda p: None, boom)
    for argv, message in (
        (["tune", "--dataset", "a", "--dataset", "b", "--split", "x", "--split", "y", "--split", "z",
          "--scorer", "evolved"], "one --split for all datasets or one per --dataset"),
        (["tune", "--dataset", "a", "--scorer", "arch_b"], "no search space for scorer 'arch_b'"),
        (["tune", "--dataset", "a", "--scorer", "evolved", "--fix", "w_bi"], "NAME=VALUE"),
    ):
        args = parser.parse_args(argv)
        with pytest.raises(ConfigurationError, match=message):
            args.func(args)


def test_compressed_and_cut_runs_are_reproducible(tmp_path: Path) -> None:
    import gzip

    for name in ("a", "b"):
        write_report(_result(), tmp_path / name, runs="gz", run_depth=1, plots=False, machine={"cpu": "test"})
    a = (tmp_path / "a" / "runs" / "evolved.trec.gz").read_bytes()
    assert a == (tmp_path / "b" / "runs" / "evolved.trec.gz").read_bytes()
    assert gzip.decompress(a).decode() == "q1 Q0 b 1 3.500000 esbridge-evolved\nq2 Q0 c 1 9.000000 esbridge-evolved\n"
    write_report(_result(), tmp_path / "c", runs="none", plots=False, machine={"cpu": "test"})
    assert not (tmp_path / "c" / "runs").exists()
    with pytest.raises(ConfigurationError, match="runs must be"):
        write_report(_result(), tmp_path / "d", runs="zip")


def test_field_weight_option() -> None:
    from esbridge.cli_eval import _field_weights

    assert _field_weights(["title=2", "text=1"]) == {"title": 2.0, "text": 1.0}
    assert _field_weights([]) is None
    for bad in ("title", "title=x", "=2"):
        with pytest.raises(ConfigurationError, match="FIELD=WEIGHT"):
            _field_weights([bad])
