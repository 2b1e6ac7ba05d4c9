"""The demo's shipped collection and its report, without an engine."""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
import random
import re
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

from esbridge import demo
from esbridge.evaluation.datasets import BeirDataset
from tests.data import write_beir
from tests.scripts import benchmark_script

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "esbridge" / "resources" / "demo" / "scifact-sample"
FILES = ("corpus.jsonl.gz", "queries.jsonl", "qrels/test.tsv", "README.md")


def test_sample_loads_through_the_dataset_loader(tmp_path: Path) -> None:
    ds = demo.materialise_sample(tmp_path)
    assert isinstance(ds, BeirDataset) and ds.name == demo.SAMPLE_NAME
    assert ds.corpus_size() == 1000
    queries = ds.queries("test")
    qrels = ds.qrels("test")
    assert len(queries) == 50 == len(qrels)
    with open(ds.corpus_path, encoding="utf-8") as f:
        docs = {d["_id"]: d for d in map(json.loads, f)}
    assert all(d.get("title") and d.get("text") for d in docs.values())
    assert {doc for judged in qrels.values() for doc in judged} <= set(docs)


def test_sample_is_unpacked_once_and_repaired(tmp_path: Path) -> None:
    ds = demo.materialise_sample(tmp_path)
    stamp = ds.corpus_path.stat().st_mtime_ns
    assert demo.materialise_sample(tmp_path).corpus_path.stat().st_mtime_ns == stamp
    (ds.path / ".source-sha256").write_text("stale\n")
    ds.corpus_path.write_text("")
    assert demo.materialise_sample(tmp_path).corpus_size() == 1000


def test_sample_is_packaged_small_and_licensed() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text()
    for rel in FILES:
        assert f'"resources/demo/scifact-sample/{rel}"' in pyproject
    assert sum((SAMPLE / rel).stat().st_size for rel in FILES) < 700_000
    notice = (SAMPLE / "README.md").read_text()
    for needle in ("CC BY-NC 2.0", "Wadden", "Fact or Fiction: Verifying Scientific", "EMNLP 2020"):
        assert needle in notice.replace("\n", " ")


def _builder() -> ModuleType:
    return benchmark_script("make_demo_sample")


def _source(folder: Path) -> Path:
    """A made-up BEIR collection: 40 documents with an extra field, 12 queries, 8 of them judged
    (ids not in numeric order in the files), judgments with a header and grades 0 to 2."""
    rng = random.Random(7)
    docs = [{"_id": str(i * 7 + 3), "title": f"title {i}", "text": f"text of document {i} " * rng.randint(1, 5),
             "metadata": {"year": 2000 + i}} for i in range(40)]
    queries = {str(q): f"claim {q}" for q in (90, 4, 17, 250, 31, 8, 66, 12, 5, 300, 41, 2)}
    judged = {"90": {"10": 1}, "4": {"3": 2, "31": 1}, "17": {"45": 1}, "250": {"73": 0, "10": 1},
              "31": {"24": 1}, "8": {"17": 1}, "66": {"52": 2}, "12": {"59": 1}}
    return write_beir(folder, docs, queries, {"test": judged, "train": {"5": {"38": 1}}})


def test_the_builder_keeps_the_first_judged_queries_their_documents_and_a_seeded_draw(tmp_path: Path) -> None:
    build = _builder().build
    src = _source(tmp_path / "source")
    counts = build(src, tmp_path / "a", n_queries=5, n_docs=15, seed=3)
    # the first five judged test queries by numeric id, in that order, with every judgment of theirs
    chosen = ["4", "8", "12", "17", "31"]
    assert counts == {"queries": 5, "judged documents": 6, "documents": 15}
    out = tmp_path / "a"
    assert [json.loads(line) for line in (out / "queries.jsonl").read_text().splitlines()] == \
        [{"_id": q, "text": f"claim {q}"} for q in chosen]
    assert (out / "qrels" / "test.tsv").read_text().splitlines() == [
        "query-id\tcorpus-id\tscore", "4\t3\t2", "4\t31\t1", "8\t17\t1", "12\t59\t1", "17\t45\t1", "31\t24\t1"]
    assert sorted(p.name for p in (out / "qrels").iterdir()) == ["test.tsv"]
    with gzip.open(tmp_path / "a" / "corpus.jsonl.gz", "rt", encoding="utf-8") as f:
        docs = [json.loads(line) for line in f]
    ids = [d["_id"] for d in docs]
    source_ids = [json.loads(line)["_id"] for line in (src / "corpus.jsonl").read_text().splitlines()]
    assert len(ids) == 15 and {"3", "31", "17", "59", "45", "24"} <= set(ids)
    assert ids == [i for i in source_ids if i in ids]  # in the corpus's own order
    assert all(set(d) == {"_id", "title", "text"} for d in docs)
    # the same input gives the same bytes; another seed draws other unjudged documents
    build(src, tmp_path / "b", n_queries=5, n_docs=15, seed=3)
    for rel in FILES[:3]:
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes(), rel
    build(src, tmp_path / "c", n_queries=5, n_docs=15, seed=4)
    with gzip.open(tmp_path / "c" / "corpus.jsonl.gz", "rt", encoding="utf-8") as f:
        assert [json.loads(line)["_id"] for line in f] != ids
    # a judged document missing from the corpus is an error, not a smaller sample
    (src / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n4\tnosuch\t1\n")
    with pytest.raises(SystemExit, match="nosuch"):
        build(src, tmp_path / "d", n_queries=5, n_docs=15, seed=3)


def test_the_shipped_sample_is_the_builders_output(sample_dir: Path, tmp_path: Path) -> None:
    """Built from itself with the shipped settings, the sample comes out byte for byte: it holds
    what the builder writes (first judged queries by id, their judgments, the compressed corpus in
    source order) and in its format."""
    counts = _builder().build(sample_dir, tmp_path, n_queries=50, n_docs=1000, seed=2020)
    assert counts == {"queries": 50, "judged documents": 51, "documents": 1000}
    for rel in FILES[:3]:
        assert hashlib.sha256((tmp_path / rel).read_bytes()).hexdigest() == \
            hashlib.sha256((SAMPLE / rel).read_bytes()).hexdigest(), rel


def _result() -> demo.DemoResult:
    long = "A title long enough that it cannot fit in one column of a hundred-column terminal at all"
    runs = {"engine": {"q1": ["d3", "d1", "d2"], "q2": ["d2", "d1"]},
            "esbridge": {"q1": ["d1", "d3", "d2"], "q2": ["d2", "d1"]}}
    qrels = {"q1": {"d1": 1}, "q2": {"d2": 1}}
    ndcg = {"engine": {"q1": 0.6309, "q2": 1.0}, "esbridge": {"q1": 1.0, "q2": 1.0}}
    return demo.DemoResult(
        dataset="tiny", index="esbridge-demo-tiny", engine_label="OpenSearch 3.8.0", url="http://127.0.0.1:9201",
        system="esbridge evolved", system_note="esbridge evolved: the evolved reranker", queries=["q1", "q2"],
        qrels=qrels, runs=runs, ndcg=ndcg, mean={"engine": 0.81545, "esbridge": 1.0}, measured_by="ir-measures",
        shown=[demo.QueryView("q1", "does it rank better " * 8, qrels["q1"], runs["engine"]["q1"],
                              runs["esbridge"]["q1"])],
        differing=1, moved=1, top=3, titles={"d1": long, "d2": "Short", "d3": "Other"})


def test_render_marks_judged_documents_and_fits_100_columns() -> None:
    hint = ["Still running: esbridge's local opensearch node 'opensearch' at http://127.0.0.1:9201 (process 1), "
            "holding the index 'esbridge-demo-tiny'.", "Stop it: esbridge engine stop --name opensearch"]
    out = demo.render(_result(), hint)
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 100
    rows = [line.split(" | ") for line in lines if line[:4].strip().isdigit()]
    assert [r[0].strip() for r in rows] == ["1", "2", "3"]
    assert rows[0][1].startswith("  Other") and rows[0][2].startswith(demo.CHECK + " A title long")
    assert rows[0][2].endswith("...")
    assert rows[1][1].startswith(demo.CHECK + " A title long") and rows[1][2].startswith("  Other")
    assert "rank 2 by the engine, 1 by esbridge" in out
    assert "nDCG@10 over 2 judged queries: engine BM25 0.815, esbridge evolved 1.000 (+18.5 points)" in out
    assert "better on 1 queries, worse on 0, equal on 1" in out
    assert lines[-1] == "Stop it: esbridge engine stop --name opensearch"
    # the lexical scorer alone: the demo says plainly that the gain is the hybrid pipeline's
    flat = " ".join(out.split())
    assert "The lexical scorer alone is not where esbridge's gain is" in flat and "without --lexical" in flat
    hybrid = demo.render(dataclasses.replace(_result(), system="esbridge hybrid"))
    assert "not where esbridge's gain is" not in " ".join(hybrid.split())


def test_working_line_ticks_only_for_slow_steps(capsys: pytest.CaptureFixture[str]) -> None:
    with demo.working("quick step", delay=5.0):
        pass
    assert capsys.readouterr().err == ""
    with demo.working("slow step", delay=0.05):
        time.sleep(1.2)
    err = capsys.readouterr().err
    assert "slow step ... 0s" in err and "slow step ... 1s" in err and err.endswith(" done\n")


def test_ndcg_without_ir_measures_equals_the_eval_measure(monkeypatch: pytest.MonkeyPatch) -> None:
    from esbridge.errors import ConfigurationError
    from esbridge.evaluation import metrics

    qrels = {"q1": {"a": 1, "b": 2}, "q2": {"c": 1}, "q3": {"z": 1}}
    run = {"q1": ["x", "b", "y", "a"], "q2": ["c"], "q3": []}
    with_irm, how = demo._ndcg10(qrels, run)
    assert how.startswith("ir-measures")

    def missing() -> None:
        raise ConfigurationError("no ir-measures")

    monkeypatch.setattr(metrics, "_ir_measures", missing)
    without, how = demo._ndcg10(qrels, run)
    assert how.startswith("esbridge's FastJudge")
    assert without == pytest.approx(with_irm, abs=1e-9) and without["q3"] == 0.0 and with_irm["q1"] < 1.0


def _screen(text: str) -> list[str]:
    """The lines a terminal shows for ``text``: a carriage return goes back to the line's start, and
    what is written then overwrites what was there."""
    lines = []
    for raw in text.split("\n"):
        shown: list[str] = []
        at = 0
        for ch in raw:
            if ch == "\r":
                at = 0
                continue
            shown[at:at + 1] = ch
            at += 1
        lines.append("".join(shown).rstrip())
    return lines


def test_a_message_written_during_a_working_step_has_a_line_of_its_own(capsys: pytest.CaptureFixture[str]) -> None:
    with demo.working("starting esbridge's local opensearch node", delay=0.05):
        time.sleep(0.3)
        print("esbridge: using the local opensearch node 'opensearch' (started) at http://127.0.0.1:9201",
              file=sys.stderr)
        time.sleep(1.2)
    shown = _screen(capsys.readouterr().err)
    assert shown[0] == "esbridge: using the local opensearch node 'opensearch' (started) at http://127.0.0.1:9201"
    assert re.fullmatch(r"starting esbridge's local opensearch node \.\.\. \ds done", shown[1]), shown
    assert shown[2:] == [""]
