"""``esbridge features export``: what is refused before the engine is reached, and the query ids."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from esbridge.cli import features as cli_features
from esbridge.cli.main import run_parsed
from esbridge.errors import ConfigurationError
from esbridge.evaluation.ltr import _comment, _qids, export_features, feature_files
from esbridge.evaluation.trecfiles import InputFileError, Topic


class _NoEngine:
    def __getattr__(self, name: str) -> Any:
        raise AssertionError("no engine should be needed to reject this")


def _boom(args: argparse.Namespace) -> Any:
    raise AssertionError("no engine should be needed to reject these arguments")


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    parser = argparse.ArgumentParser(prog="esbridge")
    sub = parser.add_subparsers(dest="command", required=True)
    cli_features.add_commands(sub, lambda p: None, _boom)
    code = run_parsed(parser.parse_args(["features", "export", *argv]))
    return code, capsys.readouterr().err


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    topics = tmp_path / "topics.jsonl"
    topics.write_text('{"_id": "1", "text": "vitamin D"}\n{"_id": "2", "text": "bone density"}\n')
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("1 0 d1 1\n2 0 d2 2\n")
    return topics, qrels


def test_bad_input_files_fail_with_one_line_naming_file_and_line(
        tmp_path: Path, files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    topics, qrels = files
    out = str(tmp_path / "f.txt")
    bad_topics = tmp_path / "bad.jsonl"
    bad_topics.write_text('{"_id": "1", "text": "vitamin D"}\n{"_id": "2" "text": "x"}\n')
    bad_qrels = tmp_path / "bad-qrels.txt"
    bad_qrels.write_text("1 0 d1 1\n1 0 d2 high\n")
    twice = tmp_path / "twice.txt"
    twice.write_text("1 0 d1 1\n1 0 d1 2\n")
    for argv, message in (
        (["--topics", str(bad_topics)], f"{bad_topics}, line 2: not a JSON object"),
        (["--topics", str(tmp_path / "missing.jsonl")], "missing.jsonl"),
        (["--topics", str(topics), "--qrels", str(bad_qrels)],
         f"{bad_qrels}, line 2: relevance 'high' is not an integer"),
        (["--topics", str(topics), "--qrels", str(twice)], f"{twice}, line 2: document 'd1' of query '1' judged 2"),
        (["--topics", str(topics), "--scorers", "bm25,nope"], "unknown scorer 'nope'"),
        (["--topics", str(topics), "--scorers", "bm25", "--param", "evolved.w_bi=0.2"], "not among the scorers bm25"),
        (["--topics", str(topics), "--param", "bm25.k3=1"], "has no parameter(s) k3"),
        (["--topics", str(topics), "--window", "0"], "--window must be >= 1"),
        (["--topics", str(topics), "--topic-field", "desc"], "have a text only, no description"),
    ):
        code, err = _run(capsys, "--index", "x", "--output", out, *argv)
        assert code == 2, (argv, err)
        assert message in err and err.count("\n") == 1 and err.startswith("esbridge: error: "), (argv, err)
    code, err = _run(capsys, "--index", "x", "--topics", str(topics), "--output", str(tmp_path))
    assert code == 2 and "is a folder" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad-qrels.txt", "bad.jsonl", "qrels.txt", "topics.jsonl",
                                                          "twice.txt"]


def test_the_python_function_checks_its_arguments_first(tmp_path: Path, files: tuple[Path, Path]) -> None:
    topics, qrels = files
    out = tmp_path / "f.txt"
    engine: Any = _NoEngine()
    for kwargs, message in (
        ({"fmt": "ranklib"}, "format must be one of svmrank, lightgbm"),
        ({"window": 0}, "window must be an integer >= 1"),
        ({"scorers": []}, "give at least one scorer"),
        ({"scorers": ["bm25", "bm25"]}, "named twice"),
        ({"scorers": ["bm25"], "params": {"bmx": None}}, "parameters given for 'bmx'"),
    ):
        with pytest.raises(ConfigurationError, match=message):
            export_features(engine, "x", topics, out, progress=False, **kwargs)
    with pytest.raises(InputFileError, match="none.txt"):
        export_features(engine, "x", topics, out, qrels=tmp_path / "none.txt", progress=False)
    assert not out.exists()


def test_query_ids_and_comments() -> None:
    assert _qids([Topic("51", "a"), Topic("7", "b")]) == {"51": 51, "7": 7}
    # any id that is not a plain number: positions in the file, for every topic alike
    assert _qids([Topic("51", "a"), Topic("PLAIN-7", "b")]) == {"51": 1, "PLAIN-7": 2}
    assert _qids([Topic("007", "a"), Topic("8", "b")]) == {"007": 1, "8": 2}
    assert _qids([Topic("-1", "a")]) == {"-1": 1}
    assert _comment("doc 1#2") == "doc 1#2"
    assert _comment("two\nlines") == '"two\\nlines"'
    assert feature_files("a/f.txt", "lightgbm") == (Path("a/f.txt.features.json"),
                                                   [Path("a/f.txt.query"), Path("a/f.txt.docids")])
    assert feature_files("f.txt", "svmrank") == (Path("f.txt.features.json"), [])
