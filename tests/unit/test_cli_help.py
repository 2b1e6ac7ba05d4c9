"""Every command, action and option of the ``esbridge`` command says what it is, and the
scorer table of ``docs/cli.md`` names every scorer."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from esbridge.cli.main import build_parser
from esbridge.scoring import available_scorers

CLI_DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def _walk(parser: argparse.ArgumentParser,
          path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], argparse.Action, str]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                yield (*path, name), action, helps.get(name) or ""
                yield from _walk(sub, (*path, name))
        elif not isinstance(action, argparse._HelpAction):
            yield path, action, action.help or ""


def test_every_command_and_option_has_help() -> None:
    missing = [(" ".join(path), "/".join(action.option_strings) or action.dest)
               for path, action, text in _walk(build_parser()) if not text.strip()]
    assert missing == []


def test_engine_help_describes_every_action(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["engine", "--help"])
    out = capsys.readouterr().out
    for action in ("install", "start", "stop", "status"):
        assert re.search(rf"^\s+{action}\s+\S", out, re.M), action
    assert "ESBRIDGE_URL" in out


def test_rescore_has_no_first_stage_and_takes_a_file_or_dash() -> None:
    parser = build_parser()
    with pytest.raises(SystemExit):
        parser.parse_args(["rescore", "idx", "q", "--first-stage", "bm25"])
    assert parser.parse_args(["rescore", "idx", "q", "-"]).response == "-"
    assert parser.parse_args(["rescore", "idx", "q", "r.json"]).response == "r.json"
    assert parser.parse_args(["search", "idx", "q", "--first-stage", "channels"]).first_stage == "channels"


def test_cli_doc_lists_every_scorer_with_a_line() -> None:
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `([a-z0-9_]+)` \| (.+) \|$",
                                                         CLI_DOC.read_text("utf-8"), re.M)}
    for name in available_scorers():
        assert len(rows.get(name, "")) > 20, f"docs/cli.md's scorer table has no line for {name!r}"


def test_tune_help_lists_every_scorers_search_space(capsys: pytest.CaptureFixture[str]) -> None:
    from esbridge.spaces import SEARCH_SPACES

    with pytest.raises(SystemExit):
        build_parser().parse_args(["tune", "--help"])
    out = capsys.readouterr().out
    listed = dict(re.findall(r"^  ([a-z0-9_]+): (.+(?:\n {5,}.+)*)", out, re.M))
    assert set(listed) == set(available_scorers()) == set(SEARCH_SPACES)
    for scorer, dims in SEARCH_SPACES.items():
        text = " ".join(listed[scorer].split())
        for d in dims:
            assert (f"{d.name}.FIELD" if d.per_field else d.name) in text, (scorer, d.name)
    assert "field_weights.FIELD" in listed["bm25f_robertson"] and "field_b.FIELD" in listed["bm25f_robertson"]
    assert max(len(line) for line in out.splitlines()) <= 100


def test_no_parser_takes_abbreviations() -> None:
    parsers = [build_parser()]
    for _path, action, _ in _walk(parsers[0]):
        if isinstance(action, argparse._SubParsersAction):
            parsers += [p for p in action.choices.values() if p not in parsers]
    assert len(parsers) > 10 and all(not p.allow_abbrev for p in parsers)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--index", "i", "--topics", "t", "--outp", "f"])


def test_every_command_writing_files_takes_output_and_out() -> None:
    for argv in (["eval", "--dataset", "d"], ["tune", "--dataset", "d", "--scorer", "bm25"],
                 ["run", "--index", "i", "--topics", "t"], ["features", "export", "--index", "i", "--topics", "t"]):
        for spelling in ("--output", "--out"):
            args = build_parser().parse_args([*argv, spelling, "somewhere"])
            assert (getattr(args, "out", None) or getattr(args, "output", None)) == "somewhere"


def test_an_unknown_scorer_of_a_hybrid_run_is_named_as_a_scorer(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    from tests.cli import run

    topics = tmp_path / "topics.tsv"
    topics.write_text("1\tvitamin d\n")
    code, _, err = run(capsys, "run", "--system", "hybrid", "--scorer", "bm99", "--topics", str(topics),
                       "--index", "x", "--output", str(tmp_path / "x.run"), "--url", "http://127.0.0.1:9")
    assert code == 2 and err.strip().startswith("esbridge: error: unknown scorer 'bm99'; valid scorers: "), err
    assert "pipeline-param" not in err


def test_pipeline_presets_belong_to_the_hybrid_pipeline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.cli import run

    topics = tmp_path / "topics.tsv"
    topics.write_text("1\tvitamin d\n")
    url = ("--url", "http://127.0.0.1:9")
    code, _, err = run(capsys, "search", "i", "vitamin d", "--pipeline", "seed004", *url)
    assert code == 2 and "--pipeline chooses the hybrid pipeline's parameters: add --hybrid" in err, err
    code, _, err = run(capsys, "run", "--pipeline", "seed004", "--topics", str(topics), "--index", "x",
                       "--output", str(tmp_path / "x.run"), *url)
    assert code == 2 and "--pipeline, --pipeline-param, --model and --narrative belong to --system hybrid" in err
    code, _, err = run(capsys, "eval", "--dataset", str(tmp_path), "--no-pipeline", "--pipeline", "seed004", *url)
    assert code == 2 and "--no-pipeline leaves it out" in err, err
    for argv in (["search", "i", "q", "--hybrid"], ["run", "--index", "i", "--topics", "t", "--output", "o"],
                 ["eval", "--dataset", "d"]):
        assert build_parser().parse_args([*argv, "--pipeline", "seed004"]).pipeline == "seed004"
