"""The input of `esbridge index` is checked when it is opened, before any engine is touched; and the
table `esbridge indices` prints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from esbridge.errors import ConfigurationError
from esbridge.index.definitions import IndexLayout
from esbridge.index.listing import IndexEntry, render_table
from esbridge.ingest import read_jsonl


def test_a_file_that_cannot_be_indexed_fails_when_opened(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_bytes(b"\xff\xfe\x00\n\n{\"_id\": \"x\", \"text\": 3}\n")
    with pytest.raises(ConfigurationError) as info:
        read_jsonl(garbage)  # not iterated: the check is made at once
    assert str(info.value).startswith(f"input file {str(garbage)!r} holds no document that can be indexed (none of "
                                      "its 2 lines); the first: line 1: malformed JSON: ")
    with pytest.raises(ConfigurationError, match="does not exist"):
        read_jsonl(tmp_path / "missing.jsonl")
    with pytest.raises(ConfigurationError, match="is not a regular file"):
        read_jsonl(tmp_path)
    (tmp_path / "blank.jsonl").write_text("\n  \n")
    with pytest.raises(ConfigurationError, match="holds no documents"):
        read_jsonl(tmp_path / "blank.jsonl")
    with pytest.raises(ConfigurationError, match=r"none of its one line\); the first: line 1: missing id field 'id'"):
        (tmp_path / "one.jsonl").write_text(json.dumps({"_id": "1", "text": "x"}) + "\n")
        read_jsonl(tmp_path / "one.jsonl", id_field="id")


def test_lines_before_the_first_good_document_are_still_reported(tmp_path: Path) -> None:
    src = tmp_path / "d.jsonl"
    good = [json.dumps({"_id": f"g{i}", "text": f"good {i}"}) for i in range(3)]
    src.write_text("\n".join(["not json", "", good[0], '{"_id": "b", "text": []}', good[1], good[2]]) + "\n")
    docs = list(read_jsonl(src))
    assert [(d.line, d.doc_id, d.error is None) for d in docs] == [
        (1, None, False), (3, "g0", True), (4, "b", False), (5, "g1", True), (6, "g2", True)]


def test_the_indices_table_shows_each_layout() -> None:
    esb = IndexEntry(name="docs-20250101000000", aliases=("docs",), status="open", documents=12,
                     meta={"vector": {"field": "esbridge_vector", "dim": 384, "model": "all-MiniLM-L6-v2"},
                           "replaces": "docs"},
                     layout=IndexLayout(fields=("title", "text")))
    left = IndexEntry(name="docs-20240101000000", aliases=(), status="close", documents=None,
                      meta={"replaces": "docs", "channels_added": True}, layout=IndexLayout(fields=("body",)))
    plain = IndexEntry(name="logs", aliases=(), status="open", documents=3, meta={}, layout=None)
    lines = render_table([esb, left, plain]).splitlines()
    assert lines[0].split() == ["index", "aliases", "docs", "fields", "channels", "vector", "notes"]
    assert lines[1].split() == ["docs-20250101000000", "docs", "12", "title,text", "base,prefix,bigram,micro",
                                "(each", "field:", "base)", "esbridge_vector", "(384d,", "all-MiniLM-L6-v2)"]
    assert lines[2].split()[:4] == ["docs-20240101000000", "-", "closed", "body"]
    assert lines[2].endswith("unfinished: was to replace 'docs', which does not name it (delete it); "
                             "channels added in place")
    assert lines[3].split()[:6] == ["logs", "-", "3", "-", "-", "-"] and "not esbridge's" in lines[3]
    assert esb.to_json()["vector"] == {"field": "esbridge_vector", "dim": 384, "model": "all-MiniLM-L6-v2"}
    assert plain.to_json()["fields"] is None and not plain.to_json()["esbridge"]
    bare = IndexEntry(name="bare", aliases=(), status="open", documents=1, meta={"fields": ["text"]},
                      layout=IndexLayout(fields=("text",), term_vectors=False))
    assert "no term vectors (lengths in the engine plugin's norms" in render_table([bare])
    assert bare.to_json()["term_vectors"] is False and esb.to_json()["term_vectors"] is True


def test_losing_the_engine_after_the_documents_are_in_says_they_are(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The documents were all indexed when building the feature store fails: the error is the engine's
    (exit 3), and a line before it says that the documents are in and how to finish."""
    import esbridge.cli.options
    import esbridge.features.build
    import esbridge.ingest
    from esbridge.errors import EngineUnavailableError
    from esbridge.ingest import IngestReport
    from tests.cli import run

    docs = tmp_path / "docs.jsonl"
    docs.write_text(json.dumps({"_id": "1", "title": "t", "text": "x"}) + "\n")

    def ingest(engine: object, index: str, documents: object, **kwargs: object) -> IngestReport:
        return IngestReport(index=index, read=1, indexed=1, present=1)

    def build_store(*args: object, **kwargs: object) -> None:
        raise EngineUnavailableError("cannot reach the engine at http://127.0.0.1:9 (connection refused)")

    monkeypatch.setattr(esbridge.cli.options, "connect_engine", lambda args: object())
    monkeypatch.setattr(esbridge.ingest, "ingest", ingest)
    monkeypatch.setattr(esbridge.features.build, "build_store", build_store)
    code, out, err = run(capsys, "index", "--input", str(docs), "--index", "docs", "--no-semantic", "--quiet")
    assert code == 3, err
    lines = err.strip().splitlines()
    assert lines[0].startswith("indexed: 1 of 1 documents indexed into 'docs'")
    assert "re-run the same command" in lines[0]
    assert "cannot reach the engine" in lines[-1]


def test_a_missing_id_names_the_option_and_the_field_that_looks_like_one(tmp_path: Path) -> None:
    src = tmp_path / "id.jsonl"
    src.write_text("".join(json.dumps({"id": f"d{i}", "title": "t", "text": "x"}) + "\n" for i in range(3)))
    with pytest.raises(ConfigurationError) as info:
        read_jsonl(src)
    assert str(info.value).endswith("the first: line 1: missing id field '_id'; the document has 'id', which looks "
                                    "like its id: give --id-field id (Python: id_field='id')")
    assert [d.doc_id for d in read_jsonl(src, id_field="id")] == ["d0", "d1", "d2"]
    for name in ("doc_id", "DocID", "document-id", "_ID"):
        src.write_text(json.dumps({"title": "t", name: 7}) + "\n")
        with pytest.raises(ConfigurationError, match=rf"the document has '{name}', which looks like its id: give "
                                                     rf"--id-field {name} \(Python: id_field='{name}'\)"):
            read_jsonl(src)
    # a field named like an id whose value cannot be one is not suggested; the option is named all the same
    src.write_text(json.dumps({"id": None, "pmid": "1", "text": "x"}) + "\n")
    with pytest.raises(ConfigurationError, match=r"missing id field '_id'; give --id-field NAME \(Python: id_field=\) "
                                                 "to take each document's id from the field NAME$"):
        read_jsonl(src)


def test_the_indices_table_shows_vectors_kept_on_disk(tmp_path: Path) -> None:
    """An index whose vectors esbridge keeps on this machine's disk shows them (by model) where an
    index with the engine's vector field shows the field; others show "-"."""
    from esbridge.engine.client import ConnectionOptions, Engine
    from esbridge.engine.connection import EngineInfo
    from esbridge.index.listing import list_indices
    from tests.unit.scripted import ScriptedTransport

    for uuid, model in (("u-disk", "bge-small-en-v1.5"), ("u-engine", "bge-small-en-v1.5"), ("u-torn", "m")):
        folder = tmp_path / "vectors" / uuid / f"onnx-{model}"
        folder.mkdir(parents=True)
        (folder / "meta.json").write_text(json.dumps({"index": "x", "uuid": uuid, "model": model}))
    (tmp_path / "vectors" / "u-torn" / "onnx-m" / "meta.json").write_text("{")
    layout = IndexLayout(fields=("title", "text")).to_meta()
    vector = {"field": "esbridge_vector", "dim": 384, "model": "bge-small-en-v1.5", "passages": 64}
    names = ("disk", "engine", "none", "torn")
    transport = ScriptedTransport([
        [{"index": n, "status": "open", "docs.count": "3", "uuid": f"u-{n}"} for n in names],
        {"disk": {"mappings": {"_meta": {"esbridge": layout}}},
         "engine": {"mappings": {"_meta": {"esbridge": {**layout, "vector": vector}}}},
         "none": {"mappings": {"_meta": {"esbridge": layout}}}, "torn": {"mappings": {"_meta": {"esbridge": layout}}}},
        [],
    ])
    engine = Engine(ConnectionOptions("http://localhost:9200", max_retries=0),
                    EngineInfo("opensearch", (3, 8, 0), "3.8.0", "c", "10.0.0"), transport)
    entries = {e.name: e for e in list_indices(engine, home=tmp_path)}
    assert entries["disk"].disk_vectors == ("bge-small-en-v1.5",)
    assert entries["engine"].disk_vectors == () and entries["none"].disk_vectors == ()
    assert entries["torn"].disk_vectors == ()
    table = render_table(list(entries.values())).splitlines()
    at = table[0].index("vector")  # the column's first character
    cells = {line.split()[0]: line[at:].split("  ")[0] for line in table}  # cells are 2 spaces apart or more
    assert cells["disk"] == "disk (bge-small-en-v1.5)"
    assert cells["engine"] == "esbridge_vector (384d, bge-small-en-v1.5, passages of 64)"
    assert cells["none"] == "-" and cells["torn"] == "-"
    assert entries["disk"].to_json()["disk_vectors"] == ["bge-small-en-v1.5"]


def test_count_lines_counts_a_last_line_without_its_newline(tmp_path: Path) -> None:
    from esbridge.ingest import count_lines

    for text, lines in ((b"", 0), (b"a", 1), (b"a\n", 1), (b"a\n\nb", 3), (b"\n" * 3_000_000 + b"x", 3_000_001)):
        (tmp_path / "f").write_bytes(text)
        assert count_lines(tmp_path / "f") == lines, text[:10]
