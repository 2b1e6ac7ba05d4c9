"""The feature caches under concurrency and across a recreated index (real engine)."""

from __future__ import annotations

from esbridge.engine.client import Engine
from esbridge.index import IndexLayout, create_index
from esbridge.rerank import Reranker
from tests.engine.concurrency import race

DOCS = {f"d{i}": {"title": f"glucose {i}", "text": f"insulin glucose control number {i} " + "word " * (i % 7)}
        for i in range(30)}


def _fill(engine: Engine, index: str, docs: dict[str, dict[str, str]]) -> None:
    create_index(engine, index, IndexLayout(), shards=2)
    for doc_id, src in docs.items():
        engine.request("PUT", f"/{index}/_doc/{doc_id}", body=src)
    engine.refresh(index)


def test_a_recreated_index_is_never_scored_from_the_old_ones_vectors(engine: Engine, index_name: str) -> None:
    _fill(engine, index_name, DOCS)
    shared = Reranker(engine, index_name, scorer="bm25", window=30)
    shared.search("insulin glucose", size=30)  # caches vectors and statistics of the first index
    engine.delete_index(index_name)
    # same ids, same counts, same sequence numbers: other text
    other = {d: {"title": "cardiac output", "text": "insulin and the heart " + src["text"][::-1]}
             for d, src in DOCS.items()}
    _fill(engine, index_name, other)
    got = shared.search("insulin glucose", size=30)["hits"]["hits"]
    fresh = Reranker(engine, index_name, scorer="bm25", window=30).search("insulin glucose", size=30)["hits"]["hits"]
    assert [(h["_id"], h["_score"]) for h in got] == [(h["_id"], h["_score"]) for h in fresh]


def test_threads_share_a_reranker_while_the_index_changes(engine: Engine, index_name: str) -> None:
    _fill(engine, index_name, DOCS)
    rr = Reranker(engine, index_name, scorer="bmx", window=30)

    def search(i: int) -> None:
        rr.search(["insulin glucose", "glucose control", "number word"][i % 3], size=5)

    def write(i: int) -> None:
        engine.request("PUT", f"/{index_name}/_doc/d{i % 30}", body={"title": "glucose", "text": f"insulin {i}"},
                       params={"refresh": "true"})

    errors = race(search, write, readers=8, reads=25)
    rr.close()
    assert not errors, errors[:3]
