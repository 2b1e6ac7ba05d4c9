"""Hostile input, generated (hypothesis), through the API and the CLI against a real engine:
no traceback, no request outside the named index, no document lost."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from esbridge.aio import AsyncEngine, AsyncReranker
from esbridge.cli.main import main
from esbridge.engine.calls import check_index_name, path_segment
from esbridge.engine.client import Engine
from esbridge.errors import ConfigurationError, EsbridgeError
from esbridge.index import IndexLayout, create_index
from esbridge.ingest import ingest, parse_document
from esbridge.rerank import Reranker
from tests.cli import run

DOCS = {
    "a": {"title": "Glycated haemoglobin", "text": "HbA1c measures long-term glucose control in diabetes."},
    "b": {"title": "Insulin therapy", "text": "Insulin lowers glucose; patients adjust insulin doses."},
    "c": {"title": "Cardiac output", "text": "The heart pumps blood; exercise raises cardiac output."},
}
FUZZ = settings(max_examples=25, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

# query syntax of every kind the engine or esbridge might trip on
SYNTAX = st.sampled_from([
    "title:(a OR b)", "\"unclosed", "a AND", "(((", "*:*", "field:[1 TO", "/regex.*/", "a~2", "\\", "ctx._source",
    "params['x']", "doc['title'].value", "{\"query\": {\"match_all\": {}}}", "}{", "\x00", "\x1b[31m", "\u202e",
    "🙂", "ǅ", "İ", "a\u0301", "\ufffd", "\udc80", "\ud83d",  # lone surrogates: not Unicode text
    "<script>", "'; DROP", "%s%n", "../../etc", "_all", "?filter_path=",
])
QUERY = st.one_of(
    st.text(max_size=200),
    st.lists(st.one_of(SYNTAX, st.text(max_size=12)), max_size=12).map(" ".join),
)


@pytest.fixture(scope="module")
def hostile_index(engine: Engine) -> Iterator[tuple[Engine, str]]:
    name = f"esb-test-hostile-{uuid.uuid4().hex[:8]}"
    create_index(engine, name, IndexLayout(), shards=2)
    for doc_id, src in DOCS.items():
        engine.request("PUT", f"/{name}/_doc/{doc_id}", body=src)
    engine.refresh(name)
    yield engine, name
    engine.delete_index(name)


def _indices(engine: Engine) -> set[str]:
    return {i["index"] for i in engine.request("GET", "/_cat/indices", params={"format": "json"})}


@FUZZ
@given(text=QUERY)
def test_any_query_text_ranks_or_fails_in_one_line(hostile_index: tuple[Engine, str], text: str) -> None:
    engine, name = hostile_index
    rr = Reranker(engine, name, scorer="evolved", window=10)
    try:
        resp = rr.search(text, size=3)
    except EsbridgeError as err:
        assert "\n" not in str(err).strip(), str(err)
        return
    hits = resp["hits"]["hits"]
    assert {h["_id"] for h in hits} <= set(DOCS)
    assert all(h["_index"] == name for h in hits)
    assert [h["_score"] for h in hits] == sorted((h["_score"] for h in hits), reverse=True)


@FUZZ
@given(text=QUERY, scorer=st.sampled_from(["bm25", "bmx", "evolved"]))
def test_any_query_text_through_the_cli_never_gives_a_traceback(hostile_index: tuple[Engine, str], text: str,
                                                                 scorer: str,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    engine, name = hostile_index
    if text.startswith("-"):
        text = " " + text  # an argument, not an option
    code = main(["search", "--url", engine.options.url, "--scorer", scorer, "--size", "2", name, text])
    captured = capsys.readouterr()
    assert code in (0, 2, 6), (code, captured.err)  # done, a wrong input, or the engine refused
    assert "Traceback" not in captured.err
    if code != 0:
        assert captured.err.startswith("esbridge: ") and captured.err.count("\n") == 1, captured.err


@pytest.mark.parametrize("argv,says", [
    (["search", "_h2", "glucose"], "checking index '_h2': invalid_index_name_exception: Invalid index name [_h2]"),
    (["search", "{name}", "glucose \udc80"], "query text 'glucose \\udc80' holds a lone surrogate (U+DC80"),
    (["search", "{name}", "\ud83d", "--scorer", "bm25"], "query text '\\ud83d' holds a lone surrogate (U+D83D"),
    (["search", "{name}", "glucose", "--hybrid", "--pipeline-param", "w_semantic=0", "--pipeline-param",
      "w_keyword=0"], None),
])
def test_an_invalid_name_or_a_lone_surrogate_is_one_line_saying_why(hostile_index: tuple[Engine, str],
                                                                    argv: list[str], says: str | None,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    engine, name = hostile_index
    if says is None:  # the hybrid pipeline checks its query text too
        argv = [*argv[:2], "glucose \udc80", *argv[3:]]
        says = "query text 'glucose \\udc80' holds a lone surrogate"
    code, _out, err = run(capsys, argv[0], "--url", engine.options.url, *(a.format(name=name) for a in argv[1:]))
    assert code in (2, 6) and err.startswith("esbridge: error: ") and err.count("\n") == 1, err
    assert says in err and "None" not in err, err


@FUZZ
@given(name=st.one_of(st.text(max_size=40), st.sampled_from(
    ["../x", "_all", "*", "a/b?c", "a,b", "-x", "+x", ".", "..", "UPPER", "a#b", "a b", "a:b", "x" * 300])))
def test_index_names_never_reach_another_index(hostile_index: tuple[Engine, str], name: str) -> None:
    engine, victim = hostile_index
    before = _indices(engine)
    try:
        check_index_name(name)
    except ConfigurationError as err:
        assert "\n" not in str(err)
        with pytest.raises(ConfigurationError):
            ingest(engine, name, [{"_id": "x", "text": "payload"}], progress=False)
        with pytest.raises(ConfigurationError):
            engine.delete_index(name)
        assert _indices(engine) == before
        assert engine.count(victim) == len(DOCS)
        return
    # a valid single name: the path holds it as one segment, whatever it contains
    assert "/" not in path_segment(name) and "?" not in path_segment(name) and "#" not in path_segment(name)


@FUZZ
@given(line=st.one_of(
    st.binary(max_size=300),
    st.text(max_size=300).map(str.encode),
    st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=20)),
                 lambda inner: st.one_of(st.lists(inner, max_size=3),
                                         st.dictionaries(st.sampled_from(["_id", "title", "text", "x"]), inner,
                                                         max_size=4)),
                 max_leaves=12).map(lambda v: json.dumps(v).encode()),
    st.integers(min_value=1, max_value=5000).map(lambda n: b'{"_id": "deep", "text": ' + b"[" * n + b"]" * n + b"}"),
))
def test_any_jsonl_line_is_a_document_or_a_reason(line: bytes) -> None:
    doc = parse_document(line, 7)
    assert (doc.error is None) != (doc.source is None)
    if doc.error is None:
        assert isinstance(doc.doc_id, str) and doc.doc_id
        assert all(isinstance(v, str) for v in doc.source.values())  # type: ignore[union-attr]
    else:
        assert doc.error and "\n" not in doc.error


def test_a_fuzzed_file_loses_no_good_document(engine: Engine, index_name: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Good lines between hostile ones are all indexed; every hostile line is reported."""
    hostile = [b"\xff\xfe\x00", b"{" * 3000, b'{"_id": ' + b"[" * 2000 + b"]" * 2000 + b"}",
               b'{"_id": {"$gt": ""}, "text": "x"}', b'{"_id": "n", "text": ["a"]}', b"null", b'"string"',
               b'{"_id": "' + b"i" * 600 + b'", "text": "long id"}', b'{"_id": "ctl\\u0000", "text": "nul in id"}']
    good = [json.dumps({"_id": f"g{i}", "title": f"t{i}", "text": f"good document {i}"}).encode() for i in range(12)]
    lines = [x for pair in zip(good, hostile + [b""] * (len(good) - len(hostile))) for x in pair if x]
    src = tmp_path / "fuzzed.jsonl"
    src.write_bytes(b"\n".join(lines) + b"\n")
    from esbridge.ingest import read_jsonl

    report = ingest(engine, index_name, read_jsonl(src), progress=False)
    assert report.read == len(lines)
    assert report.indexed + len(report.failures) == report.read  # each line indexed or reported
    assert report.present == report.indexed
    assert engine.count(index_name, {"ids": {"values": [f"g{i}" for i in range(len(good))]}}) == len(good)
    assert all(f.line is not None and f.reason and "\n" not in f.reason for f in report.failures)


#: Nesting depths of the deep-JSON tests: just above esbridge's limit, and far past what Python's
#: recursive parser, copier and serialiser survive.
DEPTHS = [101, 3000, 100_000]


def _deep_value(depth: int) -> Any:
    """Objects and arrays in turn, ``depth`` levels deep."""
    value: Any = 1
    for level in range(depth):
        value = {"x": value} if level % 2 else [value]
    return value


@pytest.mark.parametrize("depth", DEPTHS)
def test_deep_json_through_every_command_input_fails_in_one_line_naming_it(
        hostile_index: tuple[Engine, str], depth: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    engine, name = hostile_index
    url = engine.options.url
    deep = "[" * depth + "]" * depth
    ok_response = tmp_path / "ok.json"
    ok_response.write_text(json.dumps(engine.search(name, {"query": {"match_all": {}}})))
    files = {"deep.json": deep,
             "source.json": '{"hits": {"hits": [{"_id": "a", "_source": {"x": ' + deep + "}}]}}",
             "aug.json": '{"glucose": ' + deep + "}",
             "aug.jsonl": '{"glucose": [["sugar", 0.5]]}\n{"insulin": ' + deep + "}\n",
             "topics.jsonl": '{"_id": "q1", "text": ' + deep + "}\n",
             "topics.tsv": "q1\tglucose\n"}
    for file_name, text in files.items():
        (tmp_path / file_name).write_text(text)
    at = {n: str(tmp_path / n) for n in files}
    cases: list[tuple[list[str], str | None, str]] = [
        (["rescore", name, "glucose", at["deep.json"]], None, f"the response file {at['deep.json']!r}"),
        (["rescore", name, "glucose", "-"], deep, "the response on standard input"),
        (["rescore", name, "glucose"], deep, "the response on standard input"),
        (["rescore", name, "glucose", at["source.json"]], None, f"the response file {at['source.json']!r}"),
        (["rescore", name, "glucose", str(ok_response), "--augmentations", at["aug.json"]], None, at["aug.json"]),
        (["search", name, "glucose", "--filter", deep], None, "--filter"),
        (["search", name, "glucose", "--augmentations", at["aug.json"]], None, at["aug.json"]),
        (["search", name, "glucose", "--augmentations", at["aug.jsonl"]], None, f"{at['aug.jsonl']}, line 2"),
        (["search", name, "glucose", "--scorer", "bm25", "--param", f"k1={deep}"], None, "--param"),
        (["run", "--index", name, "--topics", at["topics.jsonl"], "--output", str(tmp_path / "run.txt")], None,
         at["topics.jsonl"]),
        (["run", "--index", name, "--topics", at["topics.tsv"], "--output", str(tmp_path / "run.txt"),
          "--scorer", "bm25", "--param", f"k1={deep}"], None, "--param"),
    ]
    for argv, stdin, named in cases:
        code, _out, err = run(capsys, argv[0], "--url", url, *argv[1:], stdin=stdin)
        assert code == 2 and "Traceback" not in err, (argv[:2], err[-300:])
        assert err.startswith("esbridge: error: ") and err.count("\n") == 1, err
        assert named in err and "nested more than 100 levels" in err, (named, err)


@pytest.mark.parametrize("depth", DEPTHS)
def test_deep_values_through_the_python_api_raise_a_configuration_error(hostile_index: tuple[Engine, str],
                                                                       depth: int) -> None:
    engine, name = hostile_index
    deep = _deep_value(depth)
    response = {"hits": {"hits": [{"_id": "a", "_source": {"title": deep}}]}}
    with Reranker(engine, name, scorer="bm25", window=10) as rr:
        calls: list[tuple[Callable[[], Any], str]] = [
            (lambda: rr.rescore(response, "glucose"), "the response"),
            (lambda: rr.rescore({"hits": {"hits": [], "deep": deep}}, "glucose"), "the response"),
            (lambda: rr.search("glucose", filter=deep), "the filter"),
            (lambda: rr.search("glucose", filter=[{"match_all": {}}, deep]), "the filter"),
            (lambda: rr.search("glucose", augmentations=[("sugar", 0.5), deep]), "augmentations"),
            (lambda: rr.rescore({"hits": {"hits": []}}, "glucose", augmentations=[deep]), "augmentations"),
            (lambda: Reranker(engine, name, scorer="bm25", first_stage={"bool": {"must": deep}}), "first_stage"),
        ]
        for call, named in calls:
            with pytest.raises(ConfigurationError) as info:
                call()
            message = str(info.value)
            assert named in message and "nested more than 100 levels" in message and "\n" not in message

    async def rescore_async() -> None:
        async with await AsyncEngine.connect(engine.options) as aengine:
            async with AsyncReranker(aengine, name, scorer="bm25") as arr:
                await arr.rescore(response, "glucose")

    with pytest.raises(ConfigurationError, match="the response is nested more than 100 levels"):
        asyncio.run(rescore_async())


@pytest.mark.parametrize("data", [bytes(range(256)), b"\xff\xfe{\x00\"\x00", b'{"hits": {"hits": []}, "x": "\xe9"}'])
def test_a_rescore_response_that_is_not_utf8_is_one_line_naming_it(hostile_index: tuple[Engine, str], data: bytes,
                                                                   tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    engine, name = hostile_index
    path = tmp_path / "response.bin"
    path.write_bytes(data)
    code, _out, err = run(capsys, "rescore", "--url", engine.options.url, name, "glucose", str(path))
    assert code == 2 and "Traceback" not in err and err.count("\n") == 1, err
    assert err.startswith(f"esbridge: error: the response file {str(path)!r} is not UTF-8 text (byte "), err
