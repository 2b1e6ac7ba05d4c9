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


def test_reference_covers_the_five_test_collections() -> None:
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
    from esbridge.cli import eval as cli_eval
    from esbridge.cli.options import connection_args

    parser = argparse.ArgumentParser(prog="esbridge")
    sub = parser.add_subparsers(dest="command", required=True)
    cli_eval.add_commands(sub, connection_args, lambda a: None)
    return parser


def test_cli_defaults() -> None:
    args: Any = _parser().parse_args(["eval", "--dataset", "scifact"])
    assert (args.scorers, args.split, args.window) == ("bm25,bmx,evolved", None, 1000)  # None: test, for --dataset
    args = _parser().parse_args(["tune", "--dataset", "a", "--dataset", "b", "--scorer", "evolved",
                                 "--split", "train", "--split", "test:tune"])
    assert args.dataset == ["a", "b"] and args.split == ["train", "test:tune"] and args.trials == 200


def test_cli_tune_errors_before_any_engine_work(capsys: pytest.CaptureFixture[str]) -> None:
    from esbridge.cli import eval as cli_eval

    def boom(args: argparse.Namespace) -> None:
        raise AssertionError("no engine should be needed to reject these arguments")

    parser = argparse.ArgumentParser(prog="esbridge")
    sub = parser.add_subparsers(dest="command", required=True)
    cli_eval.add_commands(sub, lambda p: None, boom)
    for argv, message in (
        (["tune", "--dataset", "a", "--dataset", "b", "--split", "x", "--split", "y", "--split", "z",
          "--scorer", "evolved"], "one --split for all datasets or one per --dataset"),
        (["tune", "--dataset", "a", "--scorer", "arch_z"], "no search space for scorer 'arch_z'"),
        (["tune", "--dataset", "a", "--scorer", "evolved", "--fix", "w_bi"], "NAME=VALUE"),
        (["tune", "--dataset", "a", "--scorer", "bm25f_pubmed", "--fix", "b.title=0.5"],
         "parameter 'b' of scorer 'bm25f_pubmed' is not set per field"),
        (["tune", "--dataset", "a", "--scorer", "bm25f_pubmed", "--fix", "field_weights=2"],
         "is set per field; give field_weights.FIELD=VALUE"),
        (["tune", "--dataset", "a", "--scorer", "arch_c", "--fix", "q_drop_min_len=2.5"],
         "q_drop_min_len must be an int"),
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
    from esbridge.cli.eval import _field_weights

    assert _field_weights(["title=2", "text=1"]) == {"title": 2.0, "text": 1.0}
    assert _field_weights([]) is None
    for bad in ("title", "title=x", "=2"):
        with pytest.raises(ConfigurationError, match="FIELD=WEIGHT"):
            _field_weights([bad])


def _clear_result(n: int = 8) -> EvalResult:
    """``evolved`` finds the relevant document first on every query, the engine third: significant."""
    qids = [f"q{i}" for i in range(n)]
    qrels = {q: {f"{q}-rel": 1} for q in qids}
    engine_run = {q: [f"{q}-x", f"{q}-y", f"{q}-rel"] for q in qids}
    evolved_run = {q: [f"{q}-rel", f"{q}-x", f"{q}-y"] for q in qids}
    same_run = dict(engine_run)
    scores = {q: [3.0, 2.0, 1.0] for q in qids}
    systems = {
        BASELINE_PYSERINI: SystemRun(BASELINE_PYSERINI, "the engine", "baseline", engine_run, scores,
                                     params={"similarity": {"type": "BM25", "k1": 0.9, "b": 0.4}}),
        "evolved": SystemRun("evolved", "reranked", "rerank", evolved_run, scores,
                             params={"scorer": "evolved", "scorer_params": {"w_bi": 0.2}}),
        "theirs": SystemRun("theirs", "run file `theirs.trec`", "external", same_run, scores,
                            params={"file": "theirs.trec", "sha256": "0" * 64}),
    }
    per_query = {name: per_query_metrics(qrels, s.ranking) for name, s in systems.items()}
    return EvalResult(dataset="mine", split="qrels.txt", queries=qids, window=100, engine="OpenSearch 3.8.0",
                      index="mine", systems=systems, per_query=per_query,
                      means={name: mean_metrics(p) for name, p in per_query.items()},
                      engine_info={"distribution": "opensearch", "version": "3.8.0", "lucene_version": "10.5.0"},
                      first_stage={"query": "bm25", "index": "mine",
                                   "similarity": {"type": "BM25", "k1": 1.2, "b": 0.75}},
                      fingerprint={"sha256": "f" * 64, "files": {"qrels:qrels.txt": "e" * 64}},
                      notes=["2 topics have no judgments"], source="index")


def test_json_records_what_produced_the_figures(tmp_path: Path) -> None:
    from esbridge import __version__

    write_report(_clear_result(), tmp_path, command="esbridge eval --index mine", run_depth=50, plots=False,
                 machine={"cpu": "test"})
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["esbridge_version"] == __version__
    assert data["engine"] == {"label": "OpenSearch 3.8.0", "distribution": "opensearch", "version": "3.8.0",
                              "lucene_version": "10.5.0"}
    assert (data["window"], data["run_depth"], data["index"]) == (100, 50, "mine")
    assert data["first_stage"]["similarity"] == {"type": "BM25", "k1": 1.2, "b": 0.75}
    assert data["systems"]["evolved"] == {"kind": "rerank", "description": "reranked",
                                          "params": {"scorer": "evolved", "scorer_params": {"w_bi": 0.2}}}
    assert data["systems"]["theirs"]["kind"] == "external"
    assert data["fingerprint"]["sha256"] == "f" * 64 and data["notes"] == ["2 topics have no judgments"]
    assert data["command"] == "esbridge eval --index mine" and data["baselines"] == [BASELINE_PYSERINI]
    sig = data["significance"]
    assert "randomisation" in sig["test"] and "Holm" in sig["correction"] and sig["trials"] == 256
    cell = sig["comparisons"][BASELINE_PYSERINI]["evolved"]["ndcg@10"]
    assert cell["significant"] and cell["p_randomization"] == pytest.approx(2 / 256)
    assert set(sig["comparisons"][BASELINE_PYSERINI]["evolved"]) == MEASURE_KEYS
    assert not sig["comparisons"][BASELINE_PYSERINI]["theirs"]["ndcg@10"]["significant"]


def test_json_keeps_every_key_of_the_committed_results() -> None:
    """Readers of benchmarks/results/*/results.json find every key they knew, with the same type."""
    root = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
    committed = sorted(root.glob("*/results.json"))
    assert committed
    new = _clear_result().to_json()
    for path in committed:
        old = json.loads(path.read_text())
        for key, value in old.items():
            # an optional value (None where it does not apply, e.g. run_depth without run files)
            # may be null on one side; otherwise the type is kept
            assert key in new, (path, key)
            if new[key] is not None and value is not None:
                assert type(new[key]) is type(value), (path, key)
        for measures in old["results"].values():
            assert set(measures) == set(next(iter(new["results"].values())))


def test_markdown_marks_significant_differences_and_states_the_test(tmp_path: Path) -> None:
    from esbridge.evaluation.report import markdown_table

    result = _clear_result()
    table = markdown_table(result)
    assert f"| {BASELINE_PYSERINI} (a) |" in table
    assert "| evolved | 1.0000 ▲a |" in table
    assert "| theirs | 0.5000 |" in table  # the same ranking as the engine's: no mark
    write_report(result, tmp_path, plots=False, machine={"cpu": "test"})
    md = (tmp_path / "results.md").read_text()
    assert md.startswith("# mine: judgments `qrels.txt`, 8 judged queries")
    assert "BM25 (k1=1.2, b=0.75)" in md
    assert "▲x / ▼x: significantly better / worse than baseline x (a = `engine-bm25-pyserini`)" in md
    assert "## Significance" in md and "Holm–Bonferroni" in md and "exact" in md
    assert "| evolved | +0.5000 [+0.5000, +0.5000] | 0.0078 | 0.0156 * |" in md  # 2/256 raw, times 2 systems
    assert "## Coverage" in md and "- 2 topics have no judgments" in md
    assert not (tmp_path / "runs" / "theirs.trec").exists()  # the user's file is not copied
    assert (tmp_path / "runs" / "evolved.trec").exists()


def test_external_runs_are_added_with_notes(tmp_path: Path) -> None:
    from esbridge.evaluation.runner import add_runs
    from esbridge.evaluation.trecfiles import read_run

    path = tmp_path / "sys.trec"
    path.write_text("1 Q0 a 1 2.0 sys\n2 Q0 b 1 2.0 sys\n9 Q0 c 1 1.0 sys\n5 Q0 a 1 1.0 sys\n")
    systems = {"bm25": SystemRun("bm25", "x", "rerank")}
    notes = add_runs(systems, [read_run(path)], {"1": {"a": 1}, "2": {"b": 1}, "3": {"c": 1}, "5": {"a": 1}},
                     ["1", "2", "3"])
    run = systems["sys"]
    assert run.kind == "external" and run.ranking == {"1": ["a"], "2": ["b"]}
    assert run.params["file"] == "sys.trec"
    assert any("1 of its 4 query ids is not in the judgments, not measured: 9" in n for n in notes)
    assert any("1 query id judged but not among the evaluated queries, not measured: 5" in n for n in notes)
    assert any("no results for 1 of the 3 evaluated queries, which count 0" in n and ": 3" in n for n in notes)
    add_runs(systems, [read_run(path)], {"1": {"a": 1}}, ["1"])
    assert "sys (sys.trec)" in systems  # a second run of the same name is kept apart


def _eval_parser(connect: Any) -> argparse.ArgumentParser:
    from esbridge.cli import eval as cli_eval

    parser = argparse.ArgumentParser(prog="esbridge")
    sub = parser.add_subparsers(dest="command", required=True)
    cli_eval.add_commands(sub, lambda p: None, connect)
    return parser


def test_eval_and_run_reject_bad_arguments_and_files_before_any_engine_work(tmp_path: Path) -> None:
    from esbridge.evaluation.trecfiles import InputFileError

    def boom(args: argparse.Namespace) -> None:
        raise AssertionError("no engine should be needed to reject these arguments")

    topics = tmp_path / "topics.jsonl"
    topics.write_text('{"_id": "1", "text": "a"}\n')
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("1 0 d 1\n")
    bad = tmp_path / "bad.txt"
    bad.write_text("1 0 d\n")
    parser = _eval_parser(boom)
    for argv, error, message in (
        (["eval"], ConfigurationError, "either --dataset"),
        (["eval", "--dataset", "x", "--index", "y"], ConfigurationError, "either --dataset"),
        (["eval", "--index", "y", "--topics", str(topics)], ConfigurationError, "--index needs --qrels"),
        (["eval", "--index", "y", "--topics", str(topics), "--qrels", str(qrels), "--split", "dev"],
         ConfigurationError, "--split belong to --dataset"),
        (["eval", "--dataset", "x", "--qrels", str(qrels)], ConfigurationError, "--qrels belong to --index"),
        (["eval", "--index", "y", "--topics", str(topics), "--qrels", str(bad)], InputFileError,
         r"bad\.txt, line 1: expected TREC judgments"),
        (["eval", "--index", "y", "--topics", str(topics), "--qrels", str(qrels), "--run", str(bad)],
         InputFileError, r"bad\.txt, line 1: expected 'query-id Q0 doc-id rank score tag'"),
        (["eval", "--index", "y", "--topics", str(bad), "--qrels", str(qrels)], InputFileError,
         r"bad\.txt, line 1: not a topics file"),
        (["run", "--index", "y", "--topics", str(bad), "--output", str(tmp_path / "r")], InputFileError,
         r"bad\.txt, line 1: not a topics file"),
        (["run", "--index", "y", "--topics", str(topics), "--output", str(tmp_path / "r"), "--depth", "0"],
         ConfigurationError, "--depth must be >= 1"),
        (["run", "--index", "y", "--topics", str(topics), "--output", str(tmp_path / "r"), "--system", "hybrid",
          "--param", "k1=1"], ConfigurationError, "--param and --field-weight set the reranker"),
        (["run", "--index", "y", "--topics", str(topics), "--output", str(qrels)], InputFileError,
         r"qrels\.txt, line 1: not a run written by esbridge run"),
    ):
        args = parser.parse_args(argv)
        with pytest.raises(error, match=message):
            args.func(args)


def test_reports_name_the_holm_family_and_give_raw_and_corrected_p(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """A run file added to the evaluation joins the family: the corrected p-values of the other
    systems change, their raw ones do not; every report names the family and gives both."""
    from esbridge.evaluation import runner

    alone = _clear_result()
    del alone.systems["theirs"], alone.per_query["theirs"], alone.means["theirs"]
    with_run = _clear_result()
    a = alone.significance()["comparisons"][BASELINE_PYSERINI]["evolved"]["ndcg@10"]
    b = with_run.significance()["comparisons"][BASELINE_PYSERINI]["evolved"]["ndcg@10"]
    assert a["p_randomization"] == b["p_randomization"] == pytest.approx(2 / 256)
    assert (a["p_randomization_holm"], b["p_randomization_holm"]) == pytest.approx((2 / 256, 4 / 256))
    assert alone.significance()["family"] == ["evolved"]
    assert with_run.significance()["family"] == ["evolved", "theirs"]

    write_report(with_run, tmp_path / "report", plots=False, machine={"cpu": "test"})
    data = json.loads((tmp_path / "report" / "results.json").read_text())
    assert data["significance"]["family"] == ["evolved", "theirs"]
    cell = data["significance"]["comparisons"][BASELINE_PYSERINI]["evolved"]["ndcg@10"]
    assert cell["p_randomization"] == pytest.approx(2 / 256) and cell["p_randomization_holm"] == pytest.approx(4 / 256)
    md = (tmp_path / "report" / "results.md").read_text()
    family = "the 2 systems compared with that baseline (`evolved`, `theirs`)"
    assert f"Holm–Bonferroni per baseline and measure over {family}, α = 0.05." in md  # the table's legend
    assert f"the p-values of {family} form one family" in md and "its raw p-value does not" in md
    assert "| system | Δ nDCG@10 [95% CI] | p rand. | p rand. Holm | p t | p t Holm |" in md
    assert "| evolved | +0.5000 [+0.5000, +0.5000] | 0.0078 | 0.0156 * |" in md

    # the console: the table, the legend naming the family, raw and corrected p-values
    topics, qrels = tmp_path / "topics.tsv", tmp_path / "qrels.txt"
    topics.write_text("".join(f"{q}\tquery {q}\n" for q in with_run.queries))
    qrels.write_text("".join(f"{q} 0 {q}-rel 1\n" for q in with_run.queries))
    monkeypatch.setattr(runner, "run_index_evaluation", lambda *args, **kwargs: with_run)
    args = _eval_parser(lambda a: object()).parse_args(
        ["eval", "--index", "mine", "--topics", str(topics), "--qrels", str(qrels), "--no-plots",
         "--out", str(tmp_path / "console")])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert f"Holm–Bonferroni per baseline and measure over {family}, α = 0.05." in out
    assert "(*: corrected p-value below α = 0.05.)" in out
    assert f"Against `{BASELINE_PYSERINI}` (p: raw / Holm-corrected within the family):" in out
    assert "| evolved | +0.5000 [+0.5000, +0.5000] | 0.0078 | 0.0156 * |" in out
