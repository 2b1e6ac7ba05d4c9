"""``esbridge run`` and ``esbridge eval --index --topics --qrels --run`` end to end on a small index.

The index holds 80 abstracts of the shipped SciFact sample (the documents judged for its first
twelve claims, and others); the topics are those twelve claims as a TREC topics file plus one
topic nobody judged, the judgments TREC qrels with one more judged query that is not a topic.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from esbridge.engine.client import Engine
from esbridge.hybrid.engine_style import ENGINE_HYBRID_MINMAX, ENGINE_HYBRID_RRF, engine_hybrid
from esbridge.hybrid.fusion import RankedList
from esbridge.ingest import ingest
from tests.cli import run
from tests.smallindex import sample_collection

pytestmark = pytest.mark.engine

TOPICS = 12
OLD_KEYS = {"dataset", "split", "queries", "results"}
MEASURES = {"ndcg@10", "recall@100", "recall@1000", "map", "p@5", "combined_score"}


def _collection(tmp_path: Path) -> tuple[list[dict[str, str]], Path, Path]:
    sample = sample_collection(TOPICS)
    topics = tmp_path / "topics.txt"
    with open(topics, "w") as f:
        for q in sample.queries:
            f.write(f"<top>\n\n<num> Number: {int(q['_id']):03d}\n\n<title> {q['text']}\n\n<desc> Description:\n"
                    f"Is it true that {q['text']}\n\n<narr> Narrative:\nRelevant abstracts support or refute the "
                    "claim.\n\n</top>\n\n")
        f.write("<top>\n<num> Number: 999999\n<title> vitamin D and bone density\n</top>\n")
    qrels = tmp_path / "qrels.txt"
    with open(qrels, "w") as f:
        for q in (*sample.queries, sample.extra):
            for d, g in sample.judged[q["_id"]].items():
                f.write(f"{q['_id']} 0 {d} {g}\n")
    return sample.docs, topics, qrels


def _lines_of(path: Path, topics: set[str]) -> bytes:
    return b"".join(line for line in path.read_bytes().splitlines(keepends=True) if line.split()[0].decode() in topics)


def test_run_then_eval_the_index_with_the_users_files(engine: Engine, index_name: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    docs, topics, qrels = _collection(tmp_path)
    ingest(engine, index_name, docs, progress=False, strict=True)
    conn = ["--url", engine.options.url, "--quiet"]

    # esbridge run: every topic, in file order, resumable
    run_file = tmp_path / "evolved.trec"
    argv = ["run", "--index", index_name, "--topics", str(topics), "--output", str(run_file), "--scorer", "evolved",
            "--window", "50", "--depth", "20", *conn]
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    assert f"{TOPICS + 1} topics in {run_file}, {TOPICS + 1} ranked now" in out
    full = run_file.read_bytes()
    lines = full.decode().splitlines()
    assert lines[0].split()[:2] == ["1", "Q0"] and lines[0].endswith(" esbridge-evolved")  # "001" is topic 1
    assert {line.split()[0] for line in lines} >= {"999999"}
    cut = full[: int(len(full) * 0.6)]
    assert not cut.endswith(b"\n")
    run_file.write_bytes(cut)
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    assert "already there" in out and run_file.read_bytes() == full

    engine_file = tmp_path / "engine.trec"
    code, _, err = run(capsys, "run", "--index", index_name, "--topics", str(topics), "--output", str(engine_file),
                       "--system", "engine-bm25", "--window", "50", "--depth", "20", *conn)
    assert code == 0, err
    hybrid_file = tmp_path / "hybrid.trec"
    code, _, err = run(capsys, "run", "--index", index_name, "--topics", str(topics), "--output", str(hybrid_file),
                       "--system", "hybrid", "--window", "50", "--depth", "20", *conn)
    assert code == 0, err

    # esbridge eval on the index, with the two run files beside esbridge's systems
    out_dir = tmp_path / "eval"
    code, out, err = run(capsys, "eval", "--index", index_name, "--topics", str(topics), "--qrels", str(qrels),
                         "--run", str(run_file), "--run", str(engine_file), "--scorers", "bm25,evolved",
                         "--pipeline-param", "window=50", "--window", "50", "--run-depth", "20",
                         "--out", str(out_dir), *conn)
    assert code == 0, err
    data = json.loads((out_dir / "results.json").read_text())
    assert OLD_KEYS <= set(data)
    assert (data["dataset"], data["split"], data["queries"]) == (index_name, "qrels.txt", TOPICS)
    assert list(data["results"]) == ["engine-bm25", ENGINE_HYBRID_MINMAX, ENGINE_HYBRID_RRF, "bm25", "evolved",
                                     "semantic", "keyword", "hybrid", "esbridge-evolved", "esbridge-engine-bm25"]
    for values in data["results"].values():
        assert set(values) == MEASURES
    # the same search path: eval's runs are the run command's, topic for topic
    judged = {line.split()[0] for line in qrels.read_text().splitlines()}
    assert (out_dir / "runs" / "evolved.trec").read_bytes() == _lines_of(run_file, judged)
    assert (out_dir / "runs" / "engine-bm25.trec").read_bytes() == _lines_of(engine_file, judged)
    assert (out_dir / "runs" / "hybrid.trec").read_bytes() == _lines_of(hybrid_file, judged)
    assert data["results"]["esbridge-evolved"]["ndcg@10"] == pytest.approx(data["results"]["evolved"]["ndcg@10"])
    assert data["results"]["esbridge-engine-bm25"] == pytest.approx(data["results"]["engine-bm25"])
    # what produced the figures, and what was not measured
    assert data["engine"]["distribution"] == engine.distribution and data["engine"]["version"] == engine.info.number
    assert data["first_stage"]["similarity"]["type"] == "BM25" and data["window"] == 50 and data["run_depth"] == 20
    assert data["systems"]["evolved"]["params"]["scorer_params"]["w_bi"] == pytest.approx(0.2)
    assert data["systems"]["hybrid"]["params"]["pipeline"]["window"] == 50
    assert data["systems"]["esbridge-evolved"]["params"]["file"] == "evolved.trec"
    assert data["fingerprint"]["documents"] == 80 and len(data["fingerprint"]["sha256"]) == 64
    assert data["baselines"] == ["engine-bm25", ENGINE_HYBRID_MINMAX, ENGINE_HYBRID_RRF]
    for baseline in data["baselines"]:
        assert set(data["significance"]["comparisons"][baseline]) == {
            "bm25", "evolved", "semantic", "keyword", "hybrid", "esbridge-evolved", "esbridge-engine-bm25"}
    assert data["systems"][ENGINE_HYBRID_RRF]["params"]["depth"] == 100
    _check_engine_hybrid(engine, index_name, docs, topics, out_dir)
    notes = "\n".join(data["notes"])
    assert "1 of the 13 topics of" in notes and "999999" in notes
    assert "1 judged query of" in notes
    assert "esbridge: note:" in err
    md = (out_dir / "results.md").read_text()
    assert "## Significance" in md and "## Coverage" in md and "(the index's similarity)" in md
    assert (out_dir / "plots" / "measures.png").read_bytes()[:4] == b"\x89PNG"
    assert "| engine-bm25 (a) |" in out


def _check_engine_hybrid(engine: Engine, index: str, docs: list[dict[str, str]], topics: Path, out_dir: Path) -> None:
    """The engines' own hybrid rows are the engine's BM25 hits and an exact cosine over one vector per whole
    document, fused with the engines' arithmetic (worked by hand in tests/unit/test_engine_style.py)."""
    from esbridge.evaluation.trecfiles import read_topics
    from esbridge.semantic.models import DEFAULT_MODEL, load_encoder
    from esbridge.semantic.vectors import VectorIndex

    encoder = load_encoder(DEFAULT_MODEL)
    # the vectors eval built, read back: one a document, of its whole text (up to the model's 512 word pieces)
    kept = VectorIndex.open(engine, index, encoder, fields=("title", "text"), windows=False)
    assert sorted(kept.ids) == sorted(d["_id"] for d in docs) and len(kept.vectors) == len(docs)
    reference = encoder.encode([f"{d['title'].strip()} {d['text'].strip()}" for d in docs])
    rows = [kept.ids.index(d["_id"]) for d in docs]
    # the int8 model quantises activations per batch: the same text in another batch differs in the third digit
    assert float(np.min(np.sum(np.asarray(kept.vectors)[rows] * reference, axis=1))) > 0.99
    runs = {name: _run_ids(out_dir / "runs" / f"{name}.trec") for name in (ENGINE_HYBRID_MINMAX, ENGINE_HYBRID_RRF)}
    judged = set(runs[ENGINE_HYBRID_RRF])
    checked = 0
    for topic in read_topics(topics):
        if topic.id not in judged:
            continue
        hits = engine.search(index, {"size": 100, "_source": False,
                                     "query": {"match": {"esb_all": topic.text("title")}}})["hits"]["hits"]
        lexical = RankedList([str(h["_id"]) for h in hits], np.array([float(h["_score"]) for h in hits]))
        cosines = np.asarray(kept.vectors) @ encoder.encode_queries([topic.text("title")])[0]
        want = engine_hybrid(lexical, RankedList(kept.ids, cosines.astype(np.float64)), depth=100)
        for name, got in runs.items():
            assert got[topic.id] == want[name][0][:20], (name, topic.id)
        checked += 1
    assert checked == TOPICS


def _run_ids(path: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        qid, _, doc, *_ = line.split()
        out.setdefault(qid, []).append(doc)
    return out


def test_run_and_eval_errors_name_the_file_and_line(engine: Engine, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    topics = tmp_path / "topics.jsonl"
    topics.write_text('{"_id": "1", "text": "vitamin D"}\n{"_id": "2" "text": "x"}\n')
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("1 0 a 1\n")
    conn = ["--url", engine.options.url, "--quiet"]
    code, _, err = run(capsys, "run", "--index", "esb-test-no-such-index", "--topics", str(topics),
                       "--output", str(tmp_path / "r.trec"), *conn)
    assert code == 2 and f"{topics}, line 2: not a JSON object" in err
    topics.write_text('{"_id": "1", "text": "vitamin D"}\n')
    code, _, err = run(capsys, "run", "--index", "esb-test-no-such-index", "--topics", str(topics),
                       "--output", str(tmp_path / "r.trec"), *conn)
    assert code == 5 and "index 'esb-test-no-such-index' does not exist" in err
    code, _, err = run(capsys, "eval", "--index", "esb-test-no-such-index", "--topics", str(topics),
                       "--qrels", str(qrels), *conn)
    assert code == 5 and err.count("\n") == 1
