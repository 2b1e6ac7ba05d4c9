"""BMX's collection entropy is computed once per index state and persisted for later processes."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from esbridge.cli.main import main
from esbridge.engine.client import Engine
from esbridge.engine.plan import Plan
from esbridge.errors import ConfigurationError
from esbridge.features.entropy import CollectionEntropy
from esbridge.index.definitions import IndexLayout
from esbridge.ingest import ingest
from esbridge.rerank import Reranker

DOCS = [
    {"_id": "1", "title": "vitamin D", "text": "vitamin D and bone density in older women"},
    {"_id": "2", "title": "bone", "text": "bone bone bone density after fracture"},
    {"_id": "3", "title": "glucose", "text": "blood glucose in diabetes"},
]
#: the same number of documents, other words: a recreated index with the same counts
OTHER_DOCS = [{"_id": d["_id"], "title": "kidney", "text": f"renal failure dialysis case {d['_id']}"} for d in DOCS]


@pytest.fixture
def small_index(engine: Engine, index_name: str) -> str:
    ingest(engine, index_name, DOCS, progress=False, strict=True)
    return index_name


class Requests:
    """Records the paths of the requests an engine receives."""

    def __init__(self, engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
        self.paths: list[str] = []
        original = engine.request

        def recording(method: str, path: str, *args: Any, **kwargs: Any) -> Any:
            self.paths.append(path)
            return original(method, path, *args, **kwargs)

        monkeypatch.setattr(engine, "request", recording)

    def term_vector_reads(self) -> int:
        return sum(1 for p in self.paths if p.endswith("/_mtermvectors"))


def entropy(engine: Engine, index: str, home: Path, **kw: Any) -> CollectionEntropy:
    return CollectionEntropy(engine, index, IndexLayout(), home=home, **kw)


def persisted(home: Path) -> list[Path]:
    return sorted(p for p in (home / "entropy").rglob("*") if p.is_file())


def test_computed_once_then_read_by_a_new_object(engine: Engine, small_index: str, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    requests = Requests(engine, monkeypatch)
    first = entropy(engine, small_index, tmp_path, progress=True)
    table = first.table("base")
    assert first.computed == 1 and requests.term_vector_reads() == 1
    assert "collection entropy of" in capsys.readouterr().err  # a progress bar the first time
    assert {"bone", "vitamin", "glucos"} <= set(table)
    uuid = next(iter(engine.request("GET", f"/{small_index}/_settings/index.uuid").values()))[
        "settings"]["index"]["uuid"]
    files = persisted(tmp_path)
    assert len(files) == 1 and files[0].parent.name == uuid
    assert not list(files[0].parent.glob(".*"))  # no temporary file left behind

    second = entropy(engine, small_index, tmp_path, progress=True)  # as in a new process
    assert second.table("base") == table  # exactly the computed values
    assert (second.loaded, second.computed) == (1, 0)
    assert requests.term_vector_reads() == 1 and capsys.readouterr().err == ""


def test_a_write_makes_the_table_stale(engine: Engine, small_index: str, tmp_path: Path) -> None:
    before = entropy(engine, small_index, tmp_path, progress=False).table("base")
    ingest(engine, small_index, [{"_id": "4", "title": "zebrafish", "text": "zebrafish zebrafish heart"}],
           progress=False, strict=True)
    ce = entropy(engine, small_index, tmp_path, progress=False)
    after = ce.table("base")
    assert ce.computed == 1 and "zebrafish" in after and "zebrafish" not in before
    assert len(persisted(tmp_path)) == 1  # the table of the old state is dropped
    # the same object notices a write too
    ingest(engine, small_index, [{"_id": "5", "title": "axolotl", "text": "axolotl"}], progress=False, strict=True)
    assert "axolotl" in ce.table("base") and ce.computed == 2


def test_a_recreated_index_never_reuses_the_old_table(engine: Engine, index_name: str, tmp_path: Path) -> None:
    ingest(engine, index_name, DOCS, progress=False, strict=True)
    old = entropy(engine, index_name, tmp_path, progress=False).table("base")
    engine.delete_index(index_name)
    ingest(engine, index_name, OTHER_DOCS, progress=False, strict=True)  # same document counts
    ce = entropy(engine, index_name, tmp_path, progress=False)
    new = ce.table("base")
    assert ce.computed == 1 and ce.loaded == 0
    assert "renal" in new and "bone" in old and "bone" not in new


def test_a_table_read_while_the_index_changed_is_not_persisted(engine: Engine, small_index: str,
                                                               tmp_path: Path) -> None:
    ce = entropy(engine, small_index, tmp_path, progress=False)
    compute = ce._compute_plan

    def compute_then_write(channel: str) -> Plan[dict[str, float]]:
        out = yield from compute(channel)
        ingest(engine, small_index, [{"_id": "9", "title": "late", "text": "a late write"}],
               progress=False, strict=True)
        return out

    ce._compute_plan = compute_then_write  # type: ignore[method-assign]
    ce.table("base")
    assert persisted(tmp_path) == []


def test_concurrent_writers_and_a_damaged_file(engine: Engine, small_index: str, tmp_path: Path) -> None:
    results: list[dict[str, float]] = []
    barrier = threading.Barrier(3)

    def compute() -> None:
        barrier.wait()
        results.append(entropy(engine, small_index, tmp_path, progress=False).table("base"))

    threads = [threading.Thread(target=compute) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 3 and results[0] == results[1] == results[2]
    files = persisted(tmp_path)
    assert len(files) == 1 and json.loads(files[0].read_text())["entropy"] == results[0]
    files[0].write_text('{"format": 1, "entropy": {"bo')  # a damaged file is computed again
    ce = entropy(engine, small_index, tmp_path, progress=False)
    assert ce.table("base") == results[0] and ce.computed == 1
    assert json.loads(files[0].read_text())["entropy"] == results[0]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("ESBRIDGE_HOME", str(tmp_path))
    yield tmp_path


def test_cli_search_with_bmx_reads_term_vectors_of_the_collection_once(
        engine: Engine, small_index: str, home: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    requests = Requests(engine, monkeypatch)
    monkeypatch.setattr(Engine, "connect", classmethod(lambda cls, opts: engine))
    # without the feature store, so that each search fetches its candidates' vectors from the engine
    argv = ["search", small_index, "bone density", "--scorer", "bmx", "--no-store", "--url", engine.options.url]
    outputs, reads = [], []
    for _ in range(2):
        before = requests.term_vector_reads()
        assert main(argv) == 0
        out, err = capsys.readouterr()
        outputs.append((out, err))
        reads.append(requests.term_vector_reads() - before)
    # the first search reads the collection (with a progress bar), the second reads the file
    assert "collection entropy of" in outputs[0][1] and "collection entropy of" not in outputs[1][1]
    assert outputs[0][0] == outputs[1][0]
    assert len(persisted(home)) == 1
    # each search fetches its candidates' vectors; only the first also reads the collection's
    assert reads[0] == reads[1] + 1


def test_a_bmx_reranker_draws_a_bar_only_when_asked(engine: Engine, index_name: str, home: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    ingest(engine, index_name, DOCS, progress=False, strict=True)
    with Reranker(engine, index_name, scorer="bmx", feature_store=home / "features") as rr:
        quiet = rr.search("bone density")
    assert capsys.readouterr().err == "" and len(persisted(home)) == 1
    for path in persisted(home):
        path.unlink()  # computed again, this time with a bar
    with Reranker(engine, index_name, scorer="bmx", feature_store=home / "features", progress=True) as rr:
        shown = rr.search("bone density")
    assert "collection entropy of" in capsys.readouterr().err
    assert [h["_id"] for h in quiet["hits"]["hits"]] == [h["_id"] for h in shown["hits"]["hits"]]


def test_a_few_writes_reuse_the_table_within_the_staleness_bound(engine: Engine, index_name: str,
                                                                  tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Within ``stale_writes`` of the documents, a write costs no scan (in this object or a new
    one, from the persisted table); past it, the table is computed again and has the new terms."""
    docs = [{"_id": f"d{i}", "title": f"bone {i}", "text": f"bone density case {i} vitamin"} for i in range(40)]
    ingest(engine, index_name, docs, progress=False, strict=True)
    requests = Requests(engine, monkeypatch)
    ce = entropy(engine, index_name, tmp_path, progress=False, stale_writes=0.05)  # 2 writes of 40
    before = ce.table("base")
    ingest(engine, index_name, [{"_id": "new1", "title": "zebrafish", "text": "zebrafish heart"}],
           progress=False, strict=True)
    assert ce.table("base") is before and ce.computed == 1 and requests.term_vector_reads() == 1
    again = entropy(engine, index_name, tmp_path, progress=False, stale_writes=0.05)  # as in a new process
    assert again.table("base") == before and (again.loaded, again.computed) == (1, 0)
    ingest(engine, index_name, [{"_id": f"new{i}", "title": "axolotl", "text": "axolotl"} for i in (2, 3)],
           progress=False, strict=True)  # 3 writes since the table: past the bound
    after = ce.table("base")
    assert ce.computed == 2 and "axolotl" in after and "zebrafish" in after
    ingest(engine, index_name, [{"_id": "new4", "title": "okapi", "text": "okapi"}], progress=False, strict=True)
    strict = entropy(engine, index_name, tmp_path, progress=False, stale_writes=0.0)
    assert "okapi" in strict.table("base") and (strict.loaded, strict.computed) == (0, 1)
    with pytest.raises(ConfigurationError, match="stale_writes must be a share between 0 and 1"):
        entropy(engine, index_name, tmp_path, stale_writes=2)
