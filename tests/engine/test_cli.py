"""The command line, in-process, against the real engines."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from esbridge.cli.main import main
from esbridge.engine.client import Engine
from esbridge.ingest import ingest
from tests.cli import run
from tests.data import documents
from tests.smallindex import create_small_index


@pytest.fixture
def sample_index(engine: Engine, index_name: str) -> str:
    ingest(engine, index_name, documents(), progress=False, strict=True)
    return index_name




def test_search_json_and_rescore(engine: Engine, sample_index: str, capsys: pytest.CaptureFixture[str]) -> None:
    url = engine.options.url
    code, out, _ = run(capsys, "search", sample_index, "blood glucose in diabetes", "--scorer", "bmx",
                       "--size", "5", "--json", "--url", url)
    assert code == 0
    resp = json.loads(out)
    assert len(resp["hits"]["hits"]) == 5 and resp["_esbridge"]["scorer"] == "bmx"
    raw = engine.search(sample_index, {"size": 20, "query": {"match": {"esb_all": "blood glucose"}}})
    code, out, _ = run(capsys, "rescore", sample_index, "blood glucose", "--window", "10", "--url", url,
                       stdin=json.dumps(raw))
    assert code == 0
    rescored = json.loads(out)
    assert [h["_id"] for h in rescored["hits"]["hits"][10:]] == [h["_id"] for h in raw["hits"]["hits"][10:]]
    code, out, _ = run(capsys, "search", sample_index, "blood glucose", "--size", "3", "--url", url)
    assert code == 0 and out.splitlines()[0].split()[:3] == ["rank", "esbridge", "engine"]


@pytest.mark.parametrize("argv,needle,expected", [
    (["search", "no-such-index", "x"], "does not exist", 5),
    (["search", "{index}", "x", "--scorer", "bm99"], "valid scorers", 2),
    (["search", "{index}", "x", "--window", "20000"], "max_result_window", 2),
    (["search", "{index}", "x", "--param", "k1=-1", "--scorer", "bm25"], "k1", 2),
    (["rescore", "{index}", "x"], "not valid JSON", 2),
])
def test_errors_are_one_clear_line(engine: Engine, sample_index: str, capsys: pytest.CaptureFixture[str],
                                   argv: list[str], needle: str, expected: int) -> None:
    argv = [a.replace("{index}", sample_index) for a in argv] + ["--url", engine.options.url]
    code, out, err = run(capsys, *argv, stdin="{not json")
    assert code == expected and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("esbridge: error:") and needle in lines[0]


def test_options_are_checked_first_and_errors_name_them(engine: Engine, index_name: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    small = create_small_index(engine, index_name)
    cases = [
        # an unknown scorer is reported before the index is looked for
        (["search", "no-such-index", "x", "--scorer", "bm99"], "unknown scorer 'bm99'; valid scorers: "),
        (["search", "no-such-index", "x", "--scorer", "bm99", "--hybrid"], "unknown scorer 'bm99'; valid scorers: "),
        (["rescore", "no-such-index", "x", "--scorer", "bm99"], "unknown scorer 'bm99'; valid scorers: "),
        (["search", "no-such-index", "x", "--scorer", "bm25", "--param", "k9=1"],
         "--param: scorer 'bm25' has no parameter(s) k9; valid: b, k1, k1_plus_one, lucene_norms"),
        # a bad filter: the option and what is wrong with it
        (["search", small, "glucose", "--filter", "{bad"], "--filter is not valid JSON ("),
        (["search", small, "glucose", "--filter", "[1]"], "--filter must be a query clause, a JSON object"),
        (["search", small, "glucose", "--filter", "{}"], "--filter must be a query clause, a JSON object"),
        (["search", small, "glucose", "--filter", '{"nosuch": {"a": 1}}'],
         "--filter is not a query clause the engine accepts: "),
        (["search", small, "glucose", "--filter", '{"term": 5}', "--scorer", "bm25"],
         "--filter is not a query clause the engine accepts: "),
    ]
    for argv, needle in cases:
        code, out, err = run(capsys, *argv, "--url", engine.options.url, "--no-store", stdin=json.dumps(
            {"hits": {"hits": []}}))
        lines = err.strip().splitlines()
        assert (code, out, len(lines)) == (2, "", 1), (argv, err)
        assert lines[0].startswith("esbridge: error: ") and needle in lines[0], (argv, err)
        assert lines[0].count("scorer '") <= 1, lines[0]
    code, out, err = run(capsys, "search", small, "glucose", "--filter", '{"term": {"title": "insulin"}}',
                         "--url", engine.options.url, "--no-store", "--json")
    assert code == 0, err
    assert [h["_id"] for h in json.loads(out)["hits"]["hits"]] == ["b"]


def test_a_tls_hint_never_shows_the_password(engine: Engine, capsys: pytest.CaptureFixture[str]) -> None:
    """https to the plain-HTTP engine with a user and password in the URL: the hint names the
    http URL to use, with the password hidden."""
    parts = urlsplit(engine.options.url)
    assert parts.scheme == "http"
    url = parts._replace(scheme="https", netloc=f"admin:s3cretPW@{parts.netloc}").geturl()
    code, out, err = run(capsys, "search", "any-index", "x", "--url", url, "--max-retries", "0")
    assert code == 3 and out == "" and len(err.strip().splitlines()) == 1
    assert f"use http://admin:***@{parts.netloc}" in err and "s3cretPW" not in err


def test_unreachable_engine(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "search", "x", "y", "--url", "http://127.0.0.1:1", "--timeout", "2")
    assert code == 3 and "cannot reach the engine" in err and len(err.strip().splitlines()) == 1


def test_version_and_exit_codes_are_documented(capsys: pytest.CaptureFixture[str]) -> None:
    from esbridge import __version__

    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0 and capsys.readouterr().out.strip() == f"esbridge {__version__}"
    with pytest.raises(SystemExit):
        main(["--help"])
    help_text = capsys.readouterr().out
    for code in ("2", "3", "4", "5", "6"):
        assert f"\n  {code}  " in help_text


def test_index_command_reports_bad_documents(engine: Engine, index_name: str, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "d.jsonl"
    src.write_text('{"id": "1", "body": "fine"}\n{"id": "2", "body": ["not", "a", "string"]}\n')
    code, out, err = run(capsys, "index", "--input", str(src), "--index", index_name, "--id-field", "id",
                         "--field", "body", "--quiet", "--url", engine.options.url)
    assert code == 4
    assert "1 of 2 documents indexed" in out
    assert "line 2 (id '2'): field 'body' must be a string" in err


def test_index_embeds_and_search_hybrid(engine: Engine, index_name: str, sample_dir: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """`esbridge index` builds the semantic index; `search --hybrid` uses it (embeddings cached)."""
    url = engine.options.url
    code, out, _ = run(capsys, "index", "--dataset", str(sample_dir), "--index", index_name, "--quiet",
                       "--url", url)
    docs = len(documents())
    assert code == 0 and f"semantic index: {docs} document vectors (bge-small-en-v1.5-q) for {index_name!r}" in out
    code, out, _ = run(capsys, "search", index_name, "blood glucose in diabetes", "--hybrid", "--size", "5",
                       "--json", "--url", url)
    assert code == 0
    resp = json.loads(out)
    hits = resp["hits"]["hits"]
    assert len(hits) == 5 and resp["_esbridge"]["pipeline"]["fusion"] == "zscore"
    assert all(h["_esbridge"]["strategies"] and h["_source"]["text"] for h in hits)
    code, out, _ = run(capsys, "search", index_name, "blood glucose", "--hybrid", "--size", "3", "--url", url)
    assert code == 0 and out.splitlines()[0].split()[:2] == ["rank", "fused"]
    code, _, err = run(capsys, "search", index_name, "x", "--hybrid", "--pipeline-param", "w_semantic=-1",
                       "--url", url)
    assert code == 2 and "w_semantic" in err
