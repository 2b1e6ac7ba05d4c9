"""What the command line prints says what it is: labelled score columns, the reason esbridge's
bm25 differs from the engine's, a readable --explain, rescore's input, against the real engines."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from esbridge.engine.client import Engine
from esbridge.ingest import ingest
from tests.cli import run
from tests.data import documents
from tests.smallindex import create_small_index

QUERY = "blood glucose in diabetes"


@pytest.fixture
def sample_index(engine: Engine, index_name: str) -> str:
    ingest(engine, index_name, documents(), progress=False, strict=True)
    return index_name


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True




def rows(out: str) -> list[list[str]]:
    """The table's hit rows (rank, esbridge, engine, was, id, ...)."""
    return [line.split() for line in out.splitlines() if re.match(r"^\s+\d+\s+-?\d", line)]


def test_columns_are_labelled_and_bm25_says_why_it_differs(engine: Engine, sample_index: str,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    url = engine.options.url
    code, out, _ = run(capsys, "search", sample_index, QUERY, "--scorer", "bm25", "--size", "5", "--url", url)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:5] == ["rank", "esbridge", "engine", "was", "id"]
    assert any(line.startswith("esbridge: the bm25 score esbridge ranks by; engine: the engine's score")
               for line in lines)
    note = [line for line in lines if line.startswith("esbridge's bm25 differs from the engine's")]
    assert len(note) == 1 and "exact document lengths" in note[0] and "k1=0.9 b=0.4" in note[0]
    table = rows(out)
    assert len(table) == 5 and any(r[1] != r[2] for r in table)
    # the parameters the line names reproduce the engine's first-stage scores
    params = re.findall(r"--param (\S+)", note[0])
    assert params and "lucene_norms=true" in params
    code, out, _ = run(capsys, "search", sample_index, QUERY, "--scorer", "bm25", "--size", "5", "--url", url,
                       *[a for p in params for a in ("--param", p)])
    assert code == 0 and "so it reproduces the engine's score" in out
    table = rows(out)
    assert len(table) == 5 and all(r[1] == r[2] for r in table) and [r[3] for r in table] == ["1", "2", "3", "4", "5"]


def test_explain_without_json_prints_the_parts(engine: Engine, sample_index: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    url = engine.options.url
    code, out, _ = run(capsys, "search", sample_index, QUERY, "--scorer", "bmx", "--size", "3", "--explain",
                       "--json", "--url", url)
    assert code == 0
    expected = {h["_id"]: h["_esbridge"]["parts"] for h in json.loads(out)["hits"]["hits"]}
    code, out, _ = run(capsys, "search", sample_index, QUERY, "--scorer", "bmx", "--size", "3", "--explain",
                       "--url", url)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("query terms, by channel: base: ") and "glucos" in lines[0]
    seen = 0
    for i, line in enumerate(lines):
        fields = line.split()
        if fields and fields[0].isdigit() and len(fields) > 4 and fields[4] in expected:
            parts = lines[i + 1].strip()
            assert parts.startswith("bmx parts: ")
            shown = dict(zip(*[iter(parts.removeprefix("bmx parts: ").split())] * 2))
            assert set(shown) == set(expected[fields[4]])
            for name, value in expected[fields[4]].items():
                assert float(shown[name]) == pytest.approx(value, rel=1e-3, abs=1e-9)
            seen += 1
    assert seen == 3


def test_rescore_reads_a_file_or_dash_and_hints_in_a_terminal(engine: Engine, sample_index: str, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    url = engine.options.url
    raw = engine.search(sample_index, {"size": 20, "query": {"match": {"esb_all": "blood glucose"}}})
    path = tmp_path / "response.json"
    path.write_text(json.dumps(raw))
    code, from_file, _ = run(capsys, "rescore", sample_index, "blood glucose", str(path), "--window", "10",
                             "--url", url)
    assert code == 0
    code, from_stdin, _ = run(capsys, "rescore", sample_index, "blood glucose", "-", "--window", "10", "--url", url,
                              stdin=io.StringIO(json.dumps(raw)))
    assert code == 0
    ids = [[h["_id"] for h in json.loads(o)["hits"]["hits"]] for o in (from_file, from_stdin)]
    assert ids[0] == ids[1] and sorted(ids[0]) == sorted(h["_id"] for h in raw["hits"]["hits"])
    # nothing given and a terminal on standard input: a hint, not a silent wait
    code, out, err = run(capsys, "rescore", sample_index, "blood glucose", "--url", url,
                         stdin=Terminal(json.dumps(raw)))
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "standard input is a terminal" in err and "rescore INDEX" in err
    # "-" in a terminal: read it, saying so first
    code, out, err = run(capsys, "rescore", sample_index, "blood glucose", "-", "--url", url,
                         stdin=Terminal(json.dumps(raw)))
    assert code == 0 and "reading the response from standard input" in err
    assert sorted(h["_id"] for h in json.loads(out)["hits"]["hits"]) == sorted(ids[0])
    code, _, err = run(capsys, "rescore", sample_index, "blood glucose", str(tmp_path / "missing.json"), "--url", url)
    assert code == 2 and "response file" in err and "missing.json" in err


def test_bm25_note_with_field_weights_promises_no_parity(engine: Engine, index_name: str,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """With field weights esbridge's bm25 reads the text fields BM25F-style, the engine the combined
    field: no parameter makes them equal, and the note says so."""
    create_small_index(engine, index_name)
    conn = ["--url", engine.options.url]
    parity = ["--param", "k1=1.2", "--param", "b=0.75", "--param", "lucene_norms=true",
              "--param", f"k1_plus_one={'true' if engine.info.bm25_k1_plus_one else 'false'}"]
    code, out, err = run(capsys, "search", index_name, "glucose diabetes", "--scorer", "bm25", "--field-weight",
                         "title=3", *parity, *conn)
    assert code == 0, err
    note = [line for line in out.splitlines() if line.startswith("esbridge's bm25")]
    assert len(note) == 1 and "cannot reproduce the engine's score here" in note[0] and "esb_all" in note[0]
    assert any(r[1] != r[2] for r in rows(out))
    code, out, err = run(capsys, "search", index_name, "glucose diabetes", "--scorer", "bm25", *parity, *conn)
    assert code == 0 and "so it reproduces the engine's score" in out, err
    assert rows(out) and all(r[1] == r[2] for r in rows(out))
