"""``esbridge features export`` on a small index: the file read back line by line.

The index holds 90 abstracts of the shipped SciFact sample (the documents judged for its first
eight claims, and others); the topics are those eight claims and one claim nobody judged.
"""

from __future__ import annotations

import gzip
import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from esbridge.engine.client import Engine
from esbridge.evaluation.ltr import ENGINE_FEATURE, export_features
from esbridge.evaluation.trecfiles import Topic
from esbridge.ingest import ingest
from esbridge.rerank import Reranker
from esbridge.scoring import available_scorers
from tests.cli import run

pytestmark = pytest.mark.engine

SAMPLE = Path(__file__).resolve().parents[2] / "esbridge" / "resources" / "demo" / "scifact-sample"
WINDOW = 30
LINE = re.compile(r"^(-?\d+) qid:(\d+)((?: \d+:\S+)+) # (.+)$")


@dataclass
class Collection:
    index: str
    topics: list[dict[str, str]]  # BEIR queries, in file order
    qrels: dict[str, dict[str, int]]
    topics_file: Path
    qrels_file: Path


@pytest.fixture(scope="module")
def collection(engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collection]:
    folder = tmp_path_factory.mktemp("ltr")
    queries = [json.loads(line) for line in (SAMPLE / "queries.jsonl").read_text().splitlines() if line.strip()]
    qrels: dict[str, dict[str, int]] = {}
    for line in (SAMPLE / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        q, d, g = line.split("\t")
        qrels.setdefault(q, {})[d] = int(g)
    chosen = [q for q in queries if q["_id"] in qrels][:8]
    unjudged = {"_id": "999", "text": "vitamin D deficiency and bone fractures in older adults"}
    wanted = {d for q in chosen for d in qrels[q["_id"]]}
    with gzip.open(SAMPLE / "corpus.jsonl.gz", "rt", encoding="utf-8") as f:
        corpus = [json.loads(line) for line in f if line.strip()]
    docs = [d for d in corpus if d["_id"] in wanted]
    docs += [d for d in corpus if d["_id"] not in wanted][:90 - len(docs)]
    index = f"tl-test-ltr-{uuid.uuid4().hex[:8]}"
    ingest(engine, index, docs, progress=False, strict=True)
    topics = [*chosen, unjudged]
    topics_file = folder / "queries.jsonl"
    topics_file.write_text("".join(json.dumps(q) + "\n" for q in topics))
    qrels_file = folder / "qrels.txt"
    judged = {q["_id"]: qrels[q["_id"]] for q in chosen}
    qrels_file.write_text("".join(f"{q} 0 {d} {g}\n" for q, grades in judged.items() for d, g in grades.items()))
    yield Collection(index, topics, judged, topics_file, qrels_file)
    engine.delete_index(index)


def _read(path: Path) -> list[tuple[int, int, dict[int, float], str]]:
    """``(label, qid, {feature: value}, docid)`` of each line of an SVMrank file."""
    out = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        m = LINE.match(line)
        assert m, f"line {number} is not an SVMrank line: {line[:120]!r}"
        pairs = [p.split(":") for p in m.group(3).split()]
        indices = [int(k) for k, _ in pairs]
        assert indices == sorted(indices) and len(set(indices)) == len(indices), f"line {number}: indices out of order"
        out.append((int(m.group(1)), int(m.group(2)), {int(k): float(v) for k, v in pairs}, m.group(4)))
    return out


def test_export_svmrank_read_back_against_the_engine_and_the_reranker(
        engine: Engine, collection: Collection, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "feats.txt"
    code, stdout, err = run(capsys, "features", "export", "--index", collection.index, "--topics",
                            str(collection.topics_file), "--qrels", str(collection.qrels_file), "--output", str(out),
                            "--window", str(WINDOW), "--url", engine.options.url, "--quiet")
    assert code == 0, err
    meta = json.loads((tmp_path / "feats.txt.features.json").read_text())
    names = {f["index"]: f["name"] for f in meta["features"]}
    assert sorted(names) == list(range(1, len(names) + 1))
    by_name = {v: k for k, v in names.items()}
    # feature 1 is the engine's score, then every scorer's score, then the parts
    assert [names[i] for i in range(1, len(available_scorers()) + 2)] == [ENGINE_FEATURE, *available_scorers()]
    for part in ("evolved.base.evidence", "evolved.base.B_cov", "evolved.base.B_len", "evolved.prefix.R",
                 "evolved.micro.B_anc", "bmx.entropy_similarity", "arch_c.base.gate_AND"):
        assert part in by_name, part
    rows = _read(out)
    assert f"{len(rows)} candidates of {len(collection.topics)} topics, {len(names)} features" in stdout
    assert "1 topic(s) have no judgments" in err and "999" in err

    # grouped by qid, in topic order, every feature on every line
    order = [qid for i, (_, qid, _, _) in enumerate(rows) if i == 0 or rows[i - 1][1] != qid]
    assert order == [int(t["_id"]) for t in collection.topics]
    assert len(order) == len({r[1] for r in rows})
    assert all(set(feats) == set(names) for _, _, feats, _ in rows)
    assert [q["topic"] for q in meta["queries"]] == [t["_id"] for t in collection.topics]
    assert meta["unjudged"] == ["999"] and meta["window"] == WINDOW and meta["format"] == "svmrank"

    with Reranker(engine, collection.index, scorer="evolved", window=WINDOW) as lead, \
            Reranker(engine, collection.index, scorer="bm25f_robertson", window=WINDOW) as bm25f:
        for topic in collection.topics:
            lines = [r for r in rows if r[1] == int(topic["_id"])]
            docs = [r[3] for r in lines]
            # labels are the judgments, 0 where unjudged
            grades = collection.qrels.get(topic["_id"], {})
            assert [r[0] for r in lines] == [grades.get(d, 0) for d in docs]
            # the first stage's candidates, in its order, with its scores
            body = {"size": WINDOW, "query": lead.first_stage_query(lead.analyze(topic["text"]), topic["text"])}
            hits = engine.search(collection.index, body)["hits"]["hits"]
            assert docs == [h["_id"] for h in hits]
            assert [r[2][by_name[ENGINE_FEATURE]] for r in lines] == [h["_score"] for h in hits]
            # the evolved score and its parts are what the reranker returns (search --explain)
            resp = lead.search(topic["text"], size=WINDOW, explain=True)
            assert len(resp["hits"]["hits"]) == len(lines)
            feats = {r[3]: r[2] for r in lines}
            for h in resp["hits"]["hits"]:
                assert feats[h["_id"]][by_name["evolved"]] == h["_score"]
                for part, value in h["_esbridge"]["parts"].items():
                    assert feats[h["_id"]][by_name[f"evolved.{part}"]] == value, part
            for h in bm25f.search(topic["text"], size=WINDOW)["hits"]["hits"]:
                assert feats[h["_id"]][by_name["bm25f_robertson"]] == h["_score"]
    assert sum(1 for r in rows if r[0] > 0) == sum(q["relevant"] for q in meta["queries"]) > 0


def test_export_lightgbm_has_groups_and_ids_beside_plain_lines(engine: Engine, collection: Collection,
                                                               tmp_path: Path) -> None:
    svm, lgb = tmp_path / "svm.txt", tmp_path / "lgb.txt"
    kwargs = {"qrels": collection.qrels_file, "window": WINDOW, "scorers": ["bm25", "evolved"], "progress": False}
    export_features(engine, collection.index, collection.topics_file, svm, **kwargs)  # type: ignore[arg-type]
    report = export_features(engine, collection.index, collection.topics_file, lgb, fmt="lightgbm",
                             **kwargs)  # type: ignore[arg-type]
    assert [p.name for p in report.extra] == ["lgb.txt.query", "lgb.txt.docids"]
    rows = _read(svm)
    lines = lgb.read_text().splitlines()
    assert len(lines) == len(rows) == report.lines
    for line, (label, _, feats, _) in zip(lines, rows):
        assert "qid:" not in line and "#" not in line
        assert line == f"{label} " + " ".join(f"{k}:{v!r}" for k, v in sorted(feats.items()))
    groups = [int(n) for n in (tmp_path / "lgb.txt.query").read_text().split()]
    sizes = [sum(1 for r in rows if r[1] == qid) for qid in dict.fromkeys(r[1] for r in rows)]
    assert groups == sizes and sum(groups) == len(lines)
    ids = [line.split("\t") for line in (tmp_path / "lgb.txt.docids").read_text().splitlines()]
    assert [(int(q), d) for q, t, d in ids] == [(r[1], r[3]) for r in rows]
    assert all(q == t for q, t, _ in ids)  # numeric topic ids are the qids
    meta = json.loads((tmp_path / "lgb.txt.features.json").read_text())
    assert meta["files"] == {"groups": "lgb.txt.query", "docids": "lgb.txt.docids"}
    assert [f["name"] for f in meta["features"]][:3] == [ENGINE_FEATURE, "bm25", "evolved"]


def test_export_without_judgments_and_with_named_topics(engine: Engine, collection: Collection,
                                                        tmp_path: Path) -> None:
    topics = [Topic("PLAIN-2", collection.topics[1]["text"]), Topic("PLAIN-1", collection.topics[0]["text"]),
              Topic("nothing", "zzzqqq xxyyzz")]
    out = tmp_path / "f.txt"
    report = export_features(engine, collection.index, topics, out, window=5, scorers=["bmx"], progress=False)
    rows = _read(out)
    assert {r[0] for r in rows} == {0}
    assert [r[1] for r in rows] == [1] * 5 + [2] * 5  # ids that are not numbers: their position in the file
    meta = json.loads((tmp_path / "f.txt.features.json").read_text())
    assert [(q["qid"], q["topic"]) for q in meta["queries"]] == [(1, "PLAIN-2"), (2, "PLAIN-1")]
    assert meta["judgments"] is False and meta["without_candidates"] == ["nothing"]
    assert report.without_candidates == ["nothing"] and report.topics == 2
    assert [f["name"] for f in meta["features"]] == [ENGINE_FEATURE, "bmx", "bmx.bm25_part", "bmx.similarity",
                                                     "bmx.entropy_weight", "bmx.entropy_similarity"]


def test_export_errors_are_one_line(engine: Engine, collection: Collection, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    conn = ["--url", engine.options.url, "--quiet"]
    out = str(tmp_path / "x.txt")
    code, _, err = run(capsys, "features", "export", "--index", "tl-test-no-such-index", "--topics",
                       str(collection.topics_file), "--output", out, *conn)
    assert code == 5 and "index 'tl-test-no-such-index' does not exist" in err and err.count("\n") == 1
    code, _, err = run(capsys, "features", "export", "--index", collection.index, "--topics",
                       str(collection.topics_file), "--output", out, "--window", "20000", *conn)
    assert code == 2 and "max_result_window" in err and err.count("\n") == 1
    assert not list(tmp_path.iterdir())  # nothing half-written is left
