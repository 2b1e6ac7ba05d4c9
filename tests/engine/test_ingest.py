"""Ingestion: every document indexed or reported; bad input never loses indexed documents."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from esbridge.engine.client import Engine
from esbridge.errors import ConfigurationError, EngineError, IngestError
from esbridge.index import IndexLayout, build_index_body, create_index
from esbridge.ingest import ingest, read_jsonl


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_bad_documents_are_reported_and_good_ones_kept(engine: Engine, index_name: str, tmp_path: Path) -> None:
    big = json.dumps({"_id": "huge", "title": "big", "text": "word " * 2_100_000})  # ~10.5 MB
    src = write(tmp_path / "docs.jsonl", [
        json.dumps({"_id": "ok1", "title": "Alpha", "text": "first good document"}),
        '{"_id": "broken", "title": ',                                   # malformed JSON
        json.dumps({"title": "no id", "text": "x"}),                       # missing id
        json.dumps({"_id": "numfield", "title": "t", "text": 42}),         # non-string field
        json.dumps({"_id": "ok2", "title": "Beta", "text": "second good document"}),
        big,
        json.dumps({"_id": 7, "text": "integer id is fine"}),
        "",
    ])
    report = ingest(engine, index_name, read_jsonl(src), progress=False)
    assert report.indexed == 3 and report.read == 7 and report.present == 3
    reasons = {(f.line, f.doc_id): f.reason for f in report.failures}
    assert "malformed JSON" in reasons[(2, None)]
    assert "missing id field '_id'" in reasons[(3, None)]
    assert "field 'text' must be a string, got int" in reasons[(4, "numfield")]
    assert "above the limit" in reasons[(6, "huge")]
    assert engine.count(index_name) == 3
    # strict mode raises, naming the first failure, and keeps what was indexed
    with pytest.raises(IngestError, match="line 2"):
        ingest(engine, index_name, read_jsonl(src), progress=False, strict=True)
    assert engine.count(index_name) == 3


def test_rerun_is_idempotent(engine: Engine, index_name: str, tmp_path: Path) -> None:
    src = write(tmp_path / "d.jsonl", [json.dumps({"_id": f"d{i}", "text": f"doc {i}"}) for i in range(25)])
    first = ingest(engine, index_name, read_jsonl(src), progress=False, chunk_docs=7)
    second = ingest(engine, index_name, read_jsonl(src), progress=False, chunk_docs=10)
    assert first.indexed == second.indexed == 25
    assert engine.count(index_name) == 25


def test_large_document_can_be_indexed_when_allowed(engine: Engine, index_name: str, tmp_path: Path) -> None:
    src = write(tmp_path / "big.jsonl", [json.dumps({"_id": "big", "text": "token " * 1_800_000})])
    report = ingest(engine, index_name, read_jsonl(src, max_doc_bytes=20_000_000), progress=False)
    assert report.indexed == 1 and not report.failures


def test_engine_rejections_are_per_document(engine: Engine, index_name: str, tmp_path: Path) -> None:
    """A document the engine refuses (here: a title that this test index maps as an
    integer) is reported with the engine's reason; the rest of its bulk request is indexed."""
    body = build_index_body(IndexLayout())
    body["mappings"]["properties"]["title"] = {"type": "integer"}
    create_index(engine, index_name, body=body)
    src = write(tmp_path / "d.jsonl", [
        json.dumps({"_id": "fine", "title": "12", "text": "ordinary words"}),
        json.dumps({"_id": "refused", "title": "not a number", "text": "more words"}),
        json.dumps({"_id": "fine2", "title": "13", "text": "more words"}),
    ])
    report = ingest(engine, index_name, read_jsonl(src), progress=False)
    assert report.indexed == 2
    assert [(f.line, f.doc_id) for f in report.failures] == [(2, "refused")]
    # Elasticsearch 8 calls it document_parsing_exception
    assert re.search(r"rejected by the engine: (mapper|document)_parsing_exception", report.failures[0].reason)
    assert engine.count(index_name) == 2


def test_empty_and_missing_files(tmp_path: Path) -> None:
    empty = write(tmp_path / "empty.jsonl", [""])
    with pytest.raises(ConfigurationError, match="holds no documents"):
        list(read_jsonl(empty))
    with pytest.raises(ConfigurationError, match="does not exist"):
        list(read_jsonl(tmp_path / "missing.jsonl"))


def test_custom_fields_and_id_field(engine: Engine, index_name: str, tmp_path: Path) -> None:
    src = write(tmp_path / "d.jsonl", [json.dumps({"pmid": "p1", "headline": "Heart attack", "body": "cardiac event"})])
    layout = IndexLayout(fields=("headline", "body"), id_field="pmid")
    report = ingest(engine, index_name, read_jsonl(src, id_field="pmid", fields=("headline", "body")),
                    layout=layout, progress=False)
    assert report.indexed == 1
    hit = engine.search(index_name, {"query": {"match": {"esb_all": "cardiac"}}})["hits"]["hits"][0]
    assert hit["_id"] == "p1" and hit["_source"]["pmid"] == "p1"
    with pytest.raises(ConfigurationError, match="exists with fields"):
        ingest(engine, index_name, read_jsonl(src, id_field="pmid", fields=("headline", "body")),
               layout=IndexLayout(), progress=False)


def test_mapping_is_accepted_and_channels_analyse_as_documented(engine: Engine, index_name: str) -> None:
    create_index(engine, index_name, IndexLayout(), shards=2)
    text = "The O(n log n) HbA1c Protein's running cells"
    base = engine.analyze(index_name, text, field="text")
    assert base == ["o", "n", "log", "n", "hba1c", "protein", "run", "cell"]
    assert engine.analyze(index_name, text, field="esb_all.prefix")[-3:] == ["prote", "runni", "cells"]
    assert "log n" in engine.analyze(index_name, text, field="esb_all.bigram")
    micro = engine.analyze(index_name, "HbA1c O(n log n)", field="esb_all.micro")
    assert micro == ["hb", "a", "1", "c", "o", "n", "log", "n"]
    # a text field has only its base channel (and length) unless every channel is asked for; where
    # the engine plugin keeps exact lengths in the norms (no term vectors), no length token counts
    mapping = next(iter(engine.request("GET", f"/{index_name}/_mapping").values()))["mappings"]
    props = mapping["properties"]
    length = {"length"} if mapping["_meta"]["esbridge"]["term_vectors"] else set()
    assert set(props["text"].get("fields", {})) == length  # the field itself is the base channel
    assert set(props["esb_all"]["fields"]) == {"prefix", "bigram", "micro", *length}
    full = f"{index_name}-full"
    create_index(engine, full, IndexLayout(field_channels=("base", "prefix", "bigram", "micro")))
    try:
        assert engine.analyze(full, text, field="text.prefix")[-3:] == ["prote", "runni", "cells"]
        assert engine.analyze(full, "HbA1c O(n log n)", field="title.micro") == micro
    finally:
        engine.delete_index(full)


def test_rejected_index_says_which_setting(engine: Engine, index_name: str) -> None:
    body = build_index_body(IndexLayout())
    body["settings"]["analysis"]["filter"]["esb_prefix5"]["length"] = -3
    with pytest.raises(EngineError, match="the engine rejected index") as info:
        create_index(engine, index_name, body=body)
    assert info.value.reason
    assert not engine.index_exists(index_name)


def test_deeply_nested_line_is_reported_and_the_rest_indexed(engine: Engine, index_name: str, tmp_path: Path) -> None:
    src = write(tmp_path / "nested.jsonl", [
        json.dumps({"_id": "before", "text": "first"}),
        '{"_id": "deep", "text": ' + "[" * 100_000 + "]" * 100_000 + "}",
        json.dumps({"_id": "after", "text": "last"}),
    ])
    report = ingest(engine, index_name, read_jsonl(src), progress=False)
    assert report.indexed == 2 and report.present == 2
    assert [(f.line, f.reason) for f in report.failures] == [(2, "malformed JSON: nested too deeply to parse")]


def test_index_names_never_reach_another_index(engine: Engine, index_name: str, tmp_path: Path) -> None:
    src = write(tmp_path / "d.jsonl", [json.dumps({"_id": "x", "text": "payload"})])
    victim = f"{index_name}-victim"
    ingest(engine, victim, read_jsonl(src), progress=False)
    try:
        for hostile in (f"{victim}/_doc/injected?filter_path=", f"{index_name}*", "_all", "../x", "a,b", "Upper"):
            with pytest.raises(ConfigurationError, match="is not a single index name"):
                ingest(engine, hostile, read_jsonl(src), progress=False)
            with pytest.raises(ConfigurationError, match="is not a single index name"):
                engine.delete_index(hostile)
        assert engine.count(victim) == 1
        assert not engine.index_exists("injected")
    finally:
        engine.delete_index(victim)


def test_plain_mappings_are_validated_like_lines(engine: Engine, index_name: str) -> None:
    docs = [{"_id": "a", "title": "t", "text": "first"}, {"text": "no id"}, "not a document",
            {"_id": "b", "text": 5}, {"_id": 3, "text": "integer id"}]
    report = ingest(engine, index_name, docs, progress=False)  # type: ignore[arg-type]
    assert report.indexed == 2 and report.present == 2 and report.read == 5
    reasons = {f.line: f.reason for f in report.failures}
    assert reasons[2].startswith("missing id field '_id'; give --id-field NAME (Python: id_field=)")
    assert reasons[3] == "expected a mapping (or a SourceDocument), got str"
    assert reasons[4] == "field 'text' must be a string, got int"


def test_repeated_ids_are_reported(engine: Engine, index_name: str, tmp_path: Path) -> None:
    src = write(tmp_path / "dup.jsonl", [json.dumps({"_id": "a", "text": "old"}), json.dumps({"_id": "b", "text": "b"}),
                                         json.dumps({"_id": "a", "text": "new"})])
    report = ingest(engine, index_name, read_jsonl(src), progress=False)
    assert report.ok and report.indexed == 3 and engine.count(index_name) == 2
    assert [(d.line, d.doc_id) for d in report.duplicates] == [(3, "a")]
    assert "1 repeated an earlier id and replaced it, so 2 distinct documents were written" in report.summary()


def test_the_progress_bar_of_an_input_file_has_its_lines_as_total(engine: Engine, index_name: str, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """`esbridge index --input FILE` counts the file's lines first: the bar knows how far it goes, and
    follows the lines read (blank and unreadable ones too) to the end."""
    import tqdm

    from tests.cli import run

    bars: list[Any] = []

    class Recorded(tqdm.tqdm):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            bars.append(self)

    monkeypatch.setattr(tqdm, "tqdm", Recorded)
    lines = [json.dumps({"_id": f"d{i}", "text": f"document {i}"}) for i in range(6)]
    src = write(tmp_path / "docs.jsonl", [lines[0], "", lines[1], "not json", *lines[2:], ""])
    code, out, err = run(capsys, "index", "--input", str(src), "--index", index_name, "--url", engine.options.url,
                         "--no-semantic", "--no-store")
    assert code == 4 and out.startswith("6 of 7 documents indexed"), err
    bar, = (b for b in bars if b.desc == f"indexing {index_name}")
    assert bar.total == 9 and bar.n == 9  # 9 lines: 6 documents, one that cannot be read, two blank


def test_fields_esbridge_does_not_score_filter_and_aggregate(engine: Engine, index_name: str) -> None:
    docs = [{"_id": f"d{i}", "title": f"Pump {i}", "text": "an insulin pump for diabetes", "category": cat,
             "price": price, "date": f"2024-0{i % 9 + 1}-01", "tags": ["a", "b"]}
            for i, (cat, price) in enumerate([("device", 120.5), ("device", 80), ("drug", 15), ("book", 30)])]
    report = ingest(engine, index_name, docs, progress=False)
    assert report.indexed == 4
    engine.refresh(index_name)
    got = engine.search(index_name, {
        "size": 10, "query": {"bool": {"must": {"match": {"text": "insulin"}},
                                       "filter": [{"range": {"price": {"gte": 20}}}]}},
        "aggs": {"cats": {"terms": {"field": "category.keyword"}},
                 "by_month": {"date_histogram": {"field": "date", "calendar_interval": "month"}}},
        "sort": [{"price": "desc"}]})
    assert [h["_id"] for h in got["hits"]["hits"]] == ["d0", "d1", "d3"]
    assert {b["key"]: b["doc_count"] for b in got["aggregations"]["cats"]["buckets"]} == {"device": 2, "book": 1}
    assert len(got["aggregations"]["by_month"]["buckets"]) >= 2
    assert got["hits"]["hits"][0]["_source"] == {k: v for k, v in docs[0].items() if k != "_id"}
    props = engine.request("GET", f"/{index_name}/_mapping")[index_name]["mappings"]["properties"]
    assert props["price"]["type"] == "float" and props["date"]["type"] == "date"
    # the text fields are esbridge's own, and an esbridge reranker reads the index as before
    from esbridge.rerank import Reranker

    reranked = Reranker(engine, index_name, window=10).search("insulin pump", size=4,
                                                              filter={"term": {"category.keyword": "device"}})
    assert {h["_id"] for h in reranked["hits"]["hits"]} == {"d0", "d1"}
