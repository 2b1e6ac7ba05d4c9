"""A BEIR folder whose corpus is gzip-compressed (as the shipped sample's `corpus.jsonl.gz` is) is
read wherever esbridge reads BEIR folders: `esbridge index --dataset`, `esbridge demo --dataset`,
`load_dataset` (so `esbridge eval --dataset` and `esbridge tune --dataset`) unpack it once under
$ESBRIDGE_HOME, with the routine the demo unpacks its sample with."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from esbridge import demo
from esbridge.beirfolder import readable_folder
from tests.data import write_beir

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "esbridge" / "resources" / "demo" / "scifact-sample"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ESBRIDGE_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def _gzipped(tmp_path: Path) -> Path:
    """A BEIR folder of two documents whose corpus and queries are gzip-compressed."""
    folder = write_beir(tmp_path / "tiny", [{"_id": "a", "text": "alpha"}, {"_id": "b", "text": "beta"}],
                        {"q": "alpha"}, {"test": {"q": {"a": 1}}})
    for name in ("corpus.jsonl", "queries.jsonl"):
        (folder / f"{name}.gz").write_bytes(gzip.compress((folder / name).read_bytes()))
        (folder / name).unlink()
    return folder


def test_a_gzipped_folder_is_unpacked_once_and_again_when_it_changes(tmp_path: Path, home: Path) -> None:
    folder = _gzipped(tmp_path)
    unpacked = readable_folder(folder)
    assert unpacked.parent == home / "unpacked" and unpacked.name.startswith("tiny-")
    assert [json.loads(line)["_id"] for line in (unpacked / "corpus.jsonl").read_text().splitlines()] == ["a", "b"]
    assert (unpacked / "queries.jsonl").is_file() and (unpacked / "qrels" / "test.tsv").is_file()
    made = (unpacked / "corpus.jsonl").stat().st_mtime_ns
    assert readable_folder(folder) == unpacked and (unpacked / "corpus.jsonl").stat().st_mtime_ns == made
    (folder / "corpus.jsonl.gz").write_bytes(gzip.compress(b'{"_id": "c", "text": "gamma"}\n'))
    assert (readable_folder(folder) / "corpus.jsonl").read_text() == '{"_id": "c", "text": "gamma"}\n'
    plain = write_beir(tmp_path / "plain", [{"_id": "a", "text": "alpha"}], {"q": "alpha"}, {"test": {"q": {"a": 1}}})
    assert readable_folder(plain) == plain  # nothing to unpack: the folder itself


def test_the_demo_reads_the_shipped_sample_folder_as_a_dataset(home: Path) -> None:
    dataset = demo.resolve_dataset(str(SAMPLE))
    assert dataset.name == "scifact-sample" and dataset.corpus_size() == 1000
    assert len(dataset.queries("test")) == 50


def test_index_dataset_reads_the_shipped_sample_folder(home: Path, capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import esbridge.cli.options
    import esbridge.ingest
    from esbridge.ingest import IngestReport
    from tests.cli import run

    seen: dict[str, Any] = {}

    def ingest(engine: object, index: str, documents: Any, **kwargs: Any) -> IngestReport:
        docs = list(documents)
        seen.update(index=index, docs=len(docs), good=sum(d.error is None for d in docs), total=kwargs.get("total"))
        return IngestReport(index=index, read=len(docs), indexed=len(docs), present=len(docs))

    monkeypatch.setattr(esbridge.cli.options, "connect_engine", lambda args: object())
    monkeypatch.setattr(esbridge.ingest, "ingest", ingest)
    code, out, err = run(capsys, "index", "--dataset", str(SAMPLE), "--no-semantic", "--no-store")
    assert code == 0, err
    assert seen == {"index": "scifact-sample", "docs": 1000, "good": 1000, "total": 1000}
    code, _, err = run(capsys, "index", "--dataset", str(home), "--no-semantic", "--no-store")
    assert code == 2 and "is not a BEIR folder: it holds neither corpus.jsonl nor corpus.jsonl.gz" in err


class _Reached(Exception):
    """Raised where a command has its dataset, before it would index or search."""


def test_load_dataset_reads_a_gzipped_folder_under_its_own_name(tmp_path: Path, home: Path) -> None:
    from esbridge.evaluation.datasets import load_dataset

    folder = _gzipped(tmp_path)
    dataset = load_dataset(folder)
    assert dataset.name == "tiny" and dataset.path.parent == home / "unpacked"
    assert dataset.corpus_size() == 2 and [q.id for q in dataset.queries("test")] == ["q"]
    plain = load_dataset(write_beir(tmp_path / "plain", [{"_id": "a", "text": "alpha"}, {"_id": "b", "text": "beta"}],
                                    {"q": "alpha"}, {"test": {"q": {"a": 1}}}))
    assert dataset.fingerprint() == plain.fingerprint()  # the corpus as it reads uncompressed
    assert load_dataset(str(folder), name="other").name == "other"
    assert load_dataset(plain.path).path == plain.path  # nothing to unpack: the folder itself


def test_eval_and_tune_read_a_gzipped_folder(tmp_path: Path, home: Path, capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import esbridge.cli.options
    import esbridge.evaluation.runner
    import esbridge.evaluation.tune
    from tests.cli import run

    folder = _gzipped(tmp_path)
    seen: list[Any] = []

    def reached(engine: object, dataset: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(dataset)
        raise _Reached

    monkeypatch.setattr(esbridge.cli.options, "connect_engine", lambda args: object())
    monkeypatch.setattr(esbridge.evaluation.runner, "run_evaluation", reached)
    monkeypatch.setattr(esbridge.evaluation.tune, "collect_features", reached)
    with pytest.raises(_Reached):
        run(capsys, "eval", "--dataset", str(folder), "--no-pipeline", "--quiet")
    with pytest.raises(_Reached):
        run(capsys, "tune", "--dataset", str(folder), "--split", "test", "--scorer", "bm25", "--quiet")
    assert [(d.name, d.corpus_size(), d.path.parent) for d in seen] == [("tiny", 2, home / "unpacked")] * 2
