"""The input of `esbridge index` is checked when it is opened, before any engine is touched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from esbridge.errors import ConfigurationError
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
