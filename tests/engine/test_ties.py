"""Equal scores rank alike in every command: in the first stage's order.

Three documents with the same text score exactly alike under any scorer; indexed in an order
that is not their ids' order, the engine's first stage returns them in indexing order.  ``search``,
``rescore``, ``run``, ``eval``, the hybrid pipeline's lexical strategy, tuning's judge and
:meth:`Reranker.rank` must all keep that order.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import pytest

from esbridge.aio import AsyncEngine, AsyncReranker
from esbridge.engine.client import Engine
from esbridge.evaluation.datasets import BeirDataset, SplitSpec
from esbridge.evaluation.tune import _collect
from esbridge.hybrid import HybridSearcher, PipelineParams
from esbridge.rerank import Reranker
from esbridge.scoring import get_scorer
from tests.cli import run
from tests.smallindex import create_small_index

SAME = {"title": "Glucose readings", "text": "Glucose readings of patients taking insulin."}
#: indexing order; the tied documents' ids run against it (t2, t0, t1)
DOCS = {
    "top": {"title": "Insulin and glucose", "text": "Insulin lowers glucose: insulin, glucose and more insulin."},
    "t2": SAME,
    "t0": SAME,
    "t1": SAME,
    "low": {"title": "Readings", "text": "Glucose was read once in a long report about heart valves and lungs."},
}
QUERY = "insulin glucose readings"
TIED = ["t2", "t0", "t1"]


def _tied_order(ids: list[str]) -> list[str]:
    return [d for d in ids if d in TIED]


def _run_file(path: Path) -> list[str]:
    rows = [line.split() for line in path.read_text().splitlines()]
    return [r[2] for r in sorted(rows, key=lambda r: int(r[3]))]


@pytest.mark.parametrize("scorer", ["evolved", "bm25"])
def test_every_command_ranks_equal_scores_in_first_stage_order(
        engine: Engine, index_name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], scorer: str) -> None:
    index = create_small_index(engine, index_name, DOCS)
    conn = ["--url", engine.options.url]
    first = engine.search(index, {"size": 10, "query": {"match": {"esb_all": QUERY}}})
    assert _tied_order([str(h["_id"]) for h in first["hits"]["hits"]]) == TIED  # the engine's own order

    orders: dict[str, list[str]] = {}
    code, out, err = run(capsys, "search", index, QUERY, "--scorer", scorer, "--window", "10", "--size", "10",
                         "--json", *conn)
    assert code == 0, err
    hits = json.loads(out)["hits"]["hits"]
    scores = {h["_id"]: h["_score"] for h in hits}
    assert len({scores[d] for d in TIED}) == 1  # the tie is real
    orders["search"] = [h["_id"] for h in hits]

    code, out, err = run(capsys, "rescore", index, QUERY, "--scorer", scorer, "--window", "10", *conn,
                         stdin=json.dumps(first))
    assert code == 0, err
    orders["rescore"] = [h["_id"] for h in json.loads(out)["hits"]["hits"]]

    topics = tmp_path / "topics.tsv"
    topics.write_text(f"1\t{QUERY}\n")
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("1 0 t1 1\n")
    code, _, err = run(capsys, "run", "--index", index, "--topics", str(topics), "--output",
                       str(tmp_path / "run.trec"), "--scorer", scorer, "--window", "10", "--quiet", *conn)
    assert code == 0, err
    orders["run"] = _run_file(tmp_path / "run.trec")

    code, _, err = run(capsys, "eval", "--index", index, "--topics", str(topics), "--qrels", str(qrels),
                       "--scorers", scorer, "--window", "10", "--no-pipeline", "--no-plots", "--quiet",
                       "--out", str(tmp_path / "eval"), *conn)
    assert code == 0, err
    orders["eval"] = _run_file(next((tmp_path / "eval").rglob(f"{scorer}.trec")))
    orders["eval engine-bm25"] = _run_file(next((tmp_path / "eval").rglob("engine-bm25.trec")))

    with Reranker(engine, index, scorer=scorer, window=10) as rr:
        ranking = rr.rank(QUERY, first["hits"]["hits"])
        orders["Reranker.rank"] = ranking.ids
        orders["Reranker.rank of ids"] = rr.rank(QUERY, [str(h["_id"]) for h in first["hits"]["hits"]]).ids
        lexical, _ = HybridSearcher(engine, index, PipelineParams(scorer=scorer, window=10), reranker=rr).lexical(QUERY)
        orders["hybrid lexical"] = list(lexical.ids)

    async def async_rank() -> list[str]:
        async with await AsyncEngine.connect(engine.options) as async_engine:
            async with AsyncReranker(async_engine, index, scorer=scorer, window=10) as arr:
                return (await arr.rank(QUERY, first["hits"]["hits"])).ids

    orders["AsyncReranker.rank"] = asyncio.run(async_rank())

    corpus = tmp_path / "beir"
    (corpus / "qrels").mkdir(parents=True)
    (corpus / "corpus.jsonl").write_text("".join(json.dumps({"_id": d, **src}) + "\n" for d, src in DOCS.items()))
    (corpus / "queries.jsonl").write_text(json.dumps({"_id": "1", "text": QUERY}) + "\n")
    (corpus / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n1\tt1\t1\n")
    tuned = _collect(engine, BeirDataset(corpus), index, SplitSpec("test"), scorer, window=10, progress=False,
                     vector_cache=None).queries[0]
    assert tuned.inputs is not None
    tune_scores = get_scorer(scorer).fn(tuned.inputs, get_scorer(scorer).params_type()).scores
    orders["tune"] = [tuned.candidates[i] for i in tuned.judge.ranking(np.asarray(tune_scores))]

    for name, ids in orders.items():
        assert _tied_order(ids) == TIED, (name, orders)
    reranked = {k: v for k, v in orders.items() if k != "eval engine-bm25"}
    assert len({tuple(v) for v in reranked.values()}) == 1, orders
