"""``tune`` on every scorer: each search space searched for a few trials on a small index.

The collection is the first ten judged claims of the shipped SciFact sample with their judged
abstracts and 150 others; tuning runs on a fixed half of the claims and reports the other half.
The index (prefix ``tl-test``) is deleted at the end of the module.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from esbridge.engine.client import Engine
from esbridge.evaluation.datasets import BeirDataset, SplitSpec
from esbridge.evaluation.indexing import PYSERINI_BM25, index_name
from esbridge.evaluation.tune import collect_features, evaluate, search
from esbridge.rerank import Reranker
from esbridge.scoring import get_scorer
from esbridge.spaces import SEARCH_SPACES
from tests.cli import run

pytestmark = pytest.mark.engine

SAMPLE = Path(__file__).resolve().parents[2] / "esbridge" / "resources" / "demo" / "scifact-sample"
PREFIX = "tl-test"
#: The spaces added beside evolved, bmx and bm25.
NEW_SPACES = sorted(set(SEARCH_SPACES) - {"evolved", "bmx", "bm25"})


@pytest.fixture(scope="module")
def collection(engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BeirDataset]:
    folder = tmp_path_factory.mktemp("tune") / "scifact-tiny"
    (folder / "qrels").mkdir(parents=True)
    lines = (SAMPLE / "qrels" / "test.tsv").read_text().splitlines()
    rows = [ln.split("\t") for ln in lines[1:]]
    keep = list(dict.fromkeys(r[0] for r in rows))[:10]
    judged = {r[1] for r in rows if r[0] in keep}
    (folder / "qrels" / "test.tsv").write_text(
        "\n".join([lines[0], *("\t".join(r) for r in rows if r[0] in keep)]) + "\n")
    with open(SAMPLE / "queries.jsonl", encoding="utf-8") as f:
        (folder / "queries.jsonl").write_text("".join(ln for ln in f if json.loads(ln)["_id"] in keep))
    docs, others = [], 0
    with gzip.open(SAMPLE / "corpus.jsonl.gz", "rt", encoding="utf-8") as f:
        for ln in f:
            d = json.loads(ln)
            if d["_id"] in judged or others < 150:
                others += d["_id"] not in judged
                docs.append(ln)
    (folder / "corpus.jsonl").write_text("".join(docs))
    dataset = BeirDataset(folder)
    yield dataset
    engine.delete_index(index_name(PREFIX, dataset, PYSERINI_BM25))


@pytest.mark.parametrize("scorer", NEW_SPACES)
def test_each_new_space_is_searched_and_its_best_is_a_valid_setting(engine: Engine, collection: BeirDataset,
                                                                    scorer: str) -> None:
    tune_half, other_half = SplitSpec.parse("test:tune"), SplitSpec.parse("test:heldout")
    train = collect_features(engine, collection, tune_half, scorer, window=50, index_prefix=PREFIX, progress=False)
    held = collect_features(engine, collection, other_half, scorer, window=50, index_prefix=PREFIX, progress=False)
    assert len(train.queries) == 5 and len(held.queries) == 5
    result = search(scorer, [train], [held], trials=4, seed=0, space="all", progress=False)
    assert len(result.trials) == 4
    assert result.objective_best >= result.objective_defaults
    assert set(result.heldout) == {held.label}
    # the best setting, as the JSON report writes it, is a valid parameter object of the scorer
    best = get_scorer(scorer).make_params(**json.loads(json.dumps(result.to_json()))["best"])
    assert evaluate(train, scorer, best).combined == pytest.approx(result.objective_best, abs=1e-12)
    if get_scorer(scorer).needs_fields:
        # one weight per text field of the index, read through the reranker's per-field arrays
        assert {"field_weights.title", "field_weights.text"} <= set(result.searched)
        assert all(set(qf.inputs.channel("base").fields) == {"text", "title"}
                   for qf in train.queries if qf.inputs is not None)
    # the tuned setting scores the features as the reranker scores the engine's candidates
    index = index_name(PREFIX, collection, PYSERINI_BM25)
    texts = {q.id: q.text for q in collection.queries(tune_half)}
    with Reranker(engine, index, scorer=scorer, params=best, window=50) as rr:
        for qf in train.queries[:2]:
            assert qf.inputs is not None
            by_id = dict(zip(qf.candidates, get_scorer(scorer).fn(qf.inputs, best).scores))
            hits = rr.search(texts[qf.query_id], size=10)["hits"]["hits"]
            assert hits
            for h in hits:
                assert h["_score"] == pytest.approx(by_id[h["_id"]], rel=1e-12)


def test_tune_command_on_bm25f_with_a_field_weight_held(engine: Engine, collection: BeirDataset, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    code, stdout, err = run(capsys, "tune", "--dataset", str(collection.path), "--split", "test:tune",
                            "--scorer", "bm25f_robertson", "--trials", "3", "--fix", "field_weights.title=3",
                            "--window", "50", "--index-prefix", PREFIX, "--no-features-cache", "--out", str(out),
                            "--url", engine.options.url, "--quiet")
    assert code == 0, err
    data = json.loads((out / "tune-bm25f_robertson.json").read_text())
    assert data["searched"] == ["k1", "field_weights.text", "field_b.text", "field_b.title"]
    assert dict(data["best"]["field_weights"])["title"] == 3.0
    assert set(data["heldout"]) == {"scifact-tiny/test:heldout"}
    header = (out / "tune-bm25f_robertson-trials.tsv").read_text().splitlines()[0].split("\t")
    assert header == ["trial", "objective", "field_b.text", "field_b.title", "field_weights.text", "k1"]
    assert "`field_weights.text`" in stdout and "title=3" in stdout
    # a per-field value for a parameter that is not per field fails before the engine is reached
    code, _, err = run(capsys, "tune", "--dataset", str(collection.path), "--scorer", "bm25f_robertson",
                       "--fix", "k1.title=2", "--url", "http://127.0.0.1:9", "--quiet")
    assert code == 2 and "'k1' of scorer 'bm25f_robertson' is not set per field" in err and err.count("\n") == 1
