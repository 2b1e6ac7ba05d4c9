"""Reading BEIR-layout collections: judgments, queries, the fixed halves."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from esbridge.evaluation.datasets import (
    BeirDataset,
    DatasetError,
    Part,
    SplitSpec,
    half_split,
    load_dataset,
)
from tests.data import SAMPLE_NAME, documents, judged_queries, qrels, write_beir


def _write(folder: Path, queries: dict[str, str], qrels: str) -> Path:
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text('{"_id": "d1", "text": "x"}\n{"_id": "d2", "text": "y"}\n')
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": k, "text": v}) + "\n" for k, v in queries.items()))
    (folder / "qrels" / "test.tsv").write_text(qrels)
    return folder


def test_the_sample_reads_as_the_test_helpers_do(sample_dir: Path) -> None:
    ds = load_dataset(sample_dir)
    assert ds.name == SAMPLE_NAME
    assert ds.splits() == ["test"]
    assert [q.id for q in ds.queries("test")] == [q["_id"] for q in judged_queries()]
    assert [q.text for q in ds.queries("test")] == [q["text"] for q in judged_queries()]
    assert ds.qrels("test") == qrels()
    assert ds.corpus_size() == len(documents()) == 1000


def test_every_split_of_a_collection_is_read(tmp_path: Path) -> None:
    folder = write_beir(tmp_path / "two-splits", [{"_id": "d1", "text": "x"}, {"_id": "d2", "text": "y"}],
                        {"a": "first", "b": "second", "c": "third"},
                        {"test": {"a": {"d1": 1}}, "train": {"b": {"d2": 1}, "c": {"d1": 2, "d2": 0}}})
    ds = load_dataset(folder)
    assert ds.name == "two-splits" and ds.splits() == ["test", "train"]
    assert [q.id for q in ds.queries("train")] == ["b", "c"]
    assert ds.qrels("train") == {"b": {"d2": 1}, "c": {"d1": 2, "d2": 0}}
    assert ds.corpus_size() == 2


def test_header_graded_judgments_and_order(tmp_path: Path) -> None:
    ds = BeirDataset(_write(tmp_path / "c", {"b": "second", "a": "first", "z": "unjudged"},
                            "query-id\tcorpus-id\tscore\na\td1\t2\na\td2\t0\nb\td2\t1\n"))
    assert ds.qrels("test") == {"a": {"d1": 2, "d2": 0}, "b": {"d2": 1}}
    assert [(q.id, q.text) for q in ds.queries("test")] == [("b", "second"), ("a", "first")]


def test_halves_are_fixed_disjoint_and_cover_the_split(sample_dir: Path) -> None:
    ds = load_dataset(sample_dir)
    tune = {q.id for q in ds.queries("test:tune")}
    held = {q.id for q in ds.queries(SplitSpec("test", Part.HELDOUT))}
    everything = {q.id for q in ds.queries("test")}
    assert tune.isdisjoint(held) and tune | held == everything
    assert len(tune) == (len(everything) + 1) // 2
    assert half_split(sorted(everything), 2024) == half_split(sorted(everything, reverse=True), 2024)
    assert half_split(sorted(everything), 2024) != half_split(sorted(everything), 7)
    assert set(ds.qrels("test:tune")) == tune


def test_split_spec_parsing() -> None:
    assert SplitSpec.parse("test") == SplitSpec("test")
    assert str(SplitSpec.parse("test:heldout")) == "test:heldout"
    assert SplitSpec.parse("test:tune").complement() == SplitSpec("test", Part.HELDOUT)
    with pytest.raises(DatasetError, match="unknown part 'half'"):
        SplitSpec.parse("test:half")
    with pytest.raises(DatasetError, match="not a qrels name"):
        SplitSpec.parse("")
    with pytest.raises(DatasetError, match="whole"):
        SplitSpec("test").complement()


def test_errors_say_what_to_fix(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="queries.jsonl, qrels/ missing"):
        (tmp_path / "x").mkdir()
        (tmp_path / "x" / "corpus.jsonl").write_text("{}\n")
        BeirDataset(tmp_path / "x")
    ds = BeirDataset(_write(tmp_path / "c", {"a": "first"}, "query-id\tcorpus-id\tscore\na\td1\t1\nq9\td1\t1\n"))
    with pytest.raises(DatasetError, match="no judgments for split 'dev'.*its splits: test"):
        ds.qrels("dev")
    with pytest.raises(DatasetError, match="1 judged query of split 'test'.*not in queries.jsonl.*q9"):
        ds.queries("test")
    bad = BeirDataset(_write(tmp_path / "d", {"a": "x"}, "query-id\tcorpus-id\tscore\na\td1\tlots\n"))
    with pytest.raises(DatasetError, match="line 2: score 'lots' is not a number"):
        bad.qrels("test")
    with pytest.raises(DatasetError, match="does not exist"):
        load_dataset(str(tmp_path / "nowhere") + "/")
