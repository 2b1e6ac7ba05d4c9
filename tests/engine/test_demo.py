"""``esbridge demo`` against the real engine: what it prints is what the engine and esbridge ranked."""

from __future__ import annotations

import gzip
import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from esbridge import demo
from esbridge.cli.main import main
from esbridge.engine.client import Engine
from esbridge.evaluation.datasets import BeirDataset
from esbridge.evaluation.indexing import index_name
from esbridge.evaluation.metrics import mean_metrics, per_query_metrics
from esbridge.nodes import local
from tests.conftest import suite_index

pytestmark = pytest.mark.engine

SAMPLE = Path(demo.__file__).parent / "resources" / "demo" / "scifact-sample"


def _titles(corpus: Path) -> dict[str, str]:
    opener = gzip.open if corpus.suffix == ".gz" else open
    with opener(corpus, "rt", encoding="utf-8") as f:
        return {str(d["_id"]): " ".join(d["title"].split()) for d in map(json.loads, f) if d}


def _blocks(out: str) -> dict[str, list[tuple[str, str]]]:
    """Per shown query id, its rows as ``(engine cell, esbridge cell)``."""
    blocks: dict[str, list[tuple[str, str]]] = {}
    current = None
    for line in out.splitlines():
        m = re.match(r"query (\S+): ", line)
        if m:
            current = m.group(1)
            blocks[current] = []
        elif current is not None and re.match(r"\s+\d+ \| ", line):
            _, left, right = (line.split(" | ") + [""])[:3]
            blocks[current].append((left.rstrip(), right.rstrip()))
    return blocks


def _check_cells(cell: str, doc: str, qrels: dict[str, int], titles: dict[str, str]) -> None:
    relevant = qrels.get(doc, 0) > 0
    assert cell.startswith(demo.CHECK) == relevant, (cell, doc, qrels)
    shown = cell[2:]
    if shown.endswith("..."):
        assert titles[doc].startswith(shown[:-3]), (shown, titles[doc])
    else:
        assert shown == titles[doc]


def _expected_stop_hint(url: str) -> str:
    for node in local.running_nodes():
        if node.url.rstrip("/") == url.rstrip("/"):
            return f"esbridge engine stop --name {node.name}"
    return "which esbridge did not start"


def _figure(text: str, system: str) -> tuple[int, float, float]:
    m = re.search(r"nDCG@10 over (\d+) judged queries: engine BM25 ([0-9.]+), " + re.escape(system)
                  + r" ([0-9.]+) \(([+-][0-9.]+) points\)", text.replace("\n", " "))
    assert m, text
    assert float(m.group(4)) == pytest.approx(round((float(m.group(3)) - float(m.group(2))) * 100, 1), abs=0.051)
    return int(m.group(1)), float(m.group(2)), float(m.group(3))


def test_demo_shipped_sample_lexical(engine: Engine, capsys: pytest.CaptureFixture[str]) -> None:
    url = engine.options.url
    dataset = demo.materialise_sample()
    # the demo's own index name on the suite's nodes; elsewhere one of the session's, deleted after it
    index = suite_index(engine, index_name("esbridge-demo", dataset, None))
    result = demo.run_demo(engine, dataset, index=index, hybrid=False, show=2, progress=False)
    qrels = dataset.qrels("test")
    assert result.system == "esbridge evolved" and len(result.queries) == 50 == len(qrels)
    # nDCG@10 as the eval command computes it, on the same runs
    for system in ("engine", "esbridge"):
        means = mean_metrics(per_query_metrics(qrels, result.runs[system]), result.queries)
        assert result.mean[system] == pytest.approx(means["ndcg@10"], abs=1e-12)
    # the engine column is the engine's own order: its first stage, by its score
    q = result.queries[0]
    body = {"size": 10, "_source": False, "query": demo_first_stage(engine, result.index, dataset.all_queries()[q])}
    hits = engine.search(result.index, body)["hits"]["hits"]
    scores = [h["_score"] for h in hits]
    distinct = [i for i in range(len(hits)) if scores.count(scores[i]) == 1]
    assert [str(hits[i]["_id"]) for i in distinct] == [result.runs["engine"][q][i] for i in distinct]

    code = main(["demo", "--lexical", "--queries", "2", "--quiet", "--index", index, "--url", url])
    out, _ = capsys.readouterr()
    assert code == 0
    n, eng, esb = _figure(out, "esbridge evolved")
    assert n == 50
    assert eng == pytest.approx(result.mean["engine"], abs=5e-4)
    assert esb == pytest.approx(result.mean["esbridge"], abs=5e-4)
    titles = _titles(SAMPLE / "corpus.jsonl.gz")
    blocks = _blocks(out)
    assert list(blocks) == [v.id for v in result.shown] and len(blocks) == 2
    for qid, rows in blocks.items():
        assert len(rows) == 5
        for rank, (left, right) in enumerate(rows):
            _check_cells(left, result.runs["engine"][qid][rank], qrels[qid], titles)
            _check_cells(right, result.runs["esbridge"][qid][rank], qrels[qid], titles)
    assert _expected_stop_hint(url) in out.replace("\n    ", " ")
    assert max(len(line) for line in out.splitlines()) <= 100


def demo_first_stage(engine: Engine, index: str, text: str) -> dict[str, object]:
    from esbridge.rerank import Reranker

    with Reranker(engine, index, scorer="bm25") as rr:
        return rr.first_stage_query(rr.analyze(text), text)


@pytest.fixture
def small_collection(tmp_path: Path, engine: Engine) -> Iterator[tuple[Path, str]]:
    """Five judged queries of the shipped sample, their judged abstracts and 40 others."""
    folder = tmp_path / "tiny"
    (folder / "qrels").mkdir(parents=True)
    lines = (SAMPLE / "qrels" / "test.tsv").read_text().splitlines()
    rows = [ln.split("\t") for ln in lines[1:]]
    keep_q = list(dict.fromkeys(r[0] for r in rows))[:5]
    judged = {r[1] for r in rows if r[0] in keep_q}
    (folder / "qrels" / "test.tsv").write_text("\n".join([lines[0], *("\t".join(r) for r in rows if r[0] in keep_q)])
                                               + "\n")
    with open(SAMPLE / "queries.jsonl", encoding="utf-8") as f:
        (folder / "queries.jsonl").write_text("".join(ln for ln in f if json.loads(ln)["_id"] in keep_q))
    docs, others = [], 0
    with gzip.open(SAMPLE / "corpus.jsonl.gz", "rt", encoding="utf-8") as f:
        for ln in f:
            d = json.loads(ln)
            if d["_id"] in judged or others < 40:
                others += d["_id"] not in judged
                docs.append(ln)
    (folder / "corpus.jsonl").write_text("".join(docs))
    index = f"esb-test-demo-{uuid.uuid4().hex[:8]}"
    yield folder, index
    engine.delete_index(index)


def test_demo_folder_default_system(engine: Engine, small_collection: tuple[Path, str],
                                    capsys: pytest.CaptureFixture[str]) -> None:
    """A BEIR folder, and the default system: the hybrid pipeline (the semantic extra is installed here)."""
    folder, index = small_collection
    code = main(["demo", "--dataset", str(folder), "--index", index, "--queries", "1", "--top", "3",
                 "--url", engine.options.url])
    out, err = capsys.readouterr()
    assert code == 0
    docs = sum(1 for line in open(folder / "corpus.jsonl") if line.strip())
    assert f"indexing {index}" in err and f"{docs}/{docs}" in err and "ranking 5 judged queries" in err
    assert "esbridge hybrid: the hybrid pipeline with its shipped defaults" in out.replace("\n  ", " ")
    n, eng, esb = _figure(out, "esbridge hybrid")
    dataset = BeirDataset(folder)
    result = demo.run_demo(engine, dataset, index=index, show=1, top=3, progress=False)
    assert n == 5 and result.system == "esbridge hybrid"
    assert any("reused" in note for note in result.notes)
    qrels = dataset.qrels("test")
    for system, printed in (("engine", eng), ("esbridge", esb)):
        means = mean_metrics(per_query_metrics(qrels, result.runs[system]), result.queries)
        assert printed == pytest.approx(means["ndcg@10"], abs=5e-4)
    blocks = _blocks(out)
    titles = _titles(folder / "corpus.jsonl")
    for qid, rows in blocks.items():
        for rank, (left, right) in enumerate(rows):
            _check_cells(left, result.runs["engine"][qid][rank], qrels[qid], titles)
            _check_cells(right, result.runs["esbridge"][qid][rank], qrels[qid], titles)
    assert _expected_stop_hint(engine.options.url) in out.replace("\n    ", " ")


def test_demo_pipeline_preset(engine: Engine, small_collection: tuple[Path, str],
                              capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """``--pipeline ensemble``: every whole-document vector is embedded before the queries run, and the demo
    ranks exactly as the pipeline with those parameters does on that index."""
    from esbridge.hybrid import HybridSearcher, PipelineParams

    folder, index = small_collection
    run = HybridSearcher.run
    seen: list[list[tuple[str, int]]] = []

    def checked(self: HybridSearcher, *args: object, **kwargs: object) -> object:
        seen.append([(model, vi.pending) for model, vi in self._whole_document_indices()])
        return run(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(HybridSearcher, "run", checked)
    code = main(["demo", "--dataset", str(folder), "--index", index, "--queries", "1", "--pipeline", "ensemble",
                 "--url", engine.options.url])
    out, err = capsys.readouterr()
    assert code == 0
    assert "the hybrid pipeline with its 'ensemble' parameters" in out.replace("\n  ", " ")
    assert "document e5-small-v2-q kNN" in out.replace("\n  ", " ")
    ranking = err.index("ranking 5 judged queries")
    docs = sum(1 for line in open(folder / "corpus.jsonl") if line.strip())
    for model in ("all-minilm-l6-v2-q", "e5-small-v2-q"):  # their whole documents, embedded before ranking
        with HybridSearcher(engine, index, PipelineParams.preset("ensemble"), build=False) as hs:
            vi = hs.ensemble_vectors(model)
            assert len(vi) == docs and vi.pending == 0
    assert err.rfind("embedding", 0, ranking) > err.index(f"indexing {index}")
    # when the first query ran, the three whole-document indices were open and complete
    assert seen and seen[0] == [("bge-small-en-v1.5-q", 0), ("e5-small-v2-q", 0), ("all-minilm-l6-v2-q", 0)]
    monkeypatch.undo()
    dataset = BeirDataset(folder)
    result = demo.run_demo(engine, dataset, index=index, show=1, progress=False, pipeline="ensemble")
    assert any("reused" in note for note in result.notes)
    with HybridSearcher(engine, index, PipelineParams.preset("ensemble")) as hs:
        for q in dataset.queries("test"):
            assert result.runs["esbridge"][q.id] == hs.run(q.text).ids
    # where the engine searches vectors, the whole documents' fields are part of the index a preset asks
    # for, so the default's demo builds its own; elsewhere they are on disk and the index is reused
    again = demo.run_demo(engine, dataset, index=index, show=1, progress=False)
    assert any("reused" in note for note in again.notes) == (engine.vector_search() is None)
