"""The feature caches under concurrency and across a recreated index (real engine)."""

from __future__ import annotations

import threading

from esbridge.engine.client import Engine
from esbridge.index import IndexLayout, create_index
from esbridge.rerank import Reranker

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
    other = {d: {"title": "cardiac output", "text": "insulin and the heart " + src["text"][::-1]} for d, src in DOCS.items()}
    _fill(engine, index_name, other)
    got = shared.search("insulin glucose", size=30)["hits"]["hits"]
    fresh = Reranker(engine, index_name, scorer="bm25", window=30).search("insulin glucose", size=30)["hits"]["hits"]
    assert [(h["_id"], h["_score"]) for h in got] == [(h["_id"], h["_score"]) for h in fresh]


def test_threads_share_a_reranker_while_the_index_changes(engine: Engine, index_name: str) -> None:
    _fill(engine, index_name, DOCS)
    rr = Reranker(engine, index_name, scorer="bmx", window=30)
    errors: list[BaseException] = []
    stop = threading.Event()

    def search() -> None:
        try:
            for i in range(25):
                rr.search(["insulin glucose", "glucose control", "number word"][i % 3], size=5)
        except BaseException as err:  # noqa: BLE001 - every failure is a finding
            errors.append(err)

    def write() -> None:
        i = 0
        while not stop.is_set():
            engine.request("PUT", f"/{index_name}/_doc/d{i % 30}", body={"title": "glucose", "text": f"insulin {i}"},
                           params={"refresh": "true"})
            i += 1

    writer = threading.Thread(target=write)
    readers = [threading.Thread(target=search) for _ in range(8)]
    writer.start()
    for t in readers:
        t.start()
    for t in readers:
        t.join()
    stop.set()
    writer.join()
    rr.close()
    assert not errors, [f"{type(e).__name__}: {e}" for e in errors[:3]]
