"""Index-wide statistics: summed over shards, and what they mean after deletions."""

from __future__ import annotations

import numpy as np

from esbridge.engine.client import Engine
from esbridge.engine.plan import run
from esbridge.features import QueryChannel, ShardRouting, analyze_query, build_input, fetch_raw
from esbridge.features.cache import FeatureStore
from esbridge.features.termvectors import analyze_with_stats_plan
from esbridge.index import IndexLayout, create_index


def _docs(engine: Engine, index: str, docs: dict[str, dict[str, str]]) -> None:
    for doc_id, src in docs.items():
        engine.request("PUT", f"/{index}/_doc/{doc_id}", body=src)
    engine.refresh(index)


DOCS = {f"d{i}": {"title": f"title {i}", "text": ("apple banana " * (i % 3 + 1)) + ("cherry" if i % 2 else "date")}
        for i in range(30)}


def test_statistics_are_index_wide_on_three_shards(engine: Engine, index_name: str) -> None:
    create_index(engine, index_name, IndexLayout(), shards=3)
    _docs(engine, index_name, DOCS)
    layout = IndexLayout()
    routing = ShardRouting(engine, index_name)
    assert len(routing.routings()) == 3
    query = {"base": QueryChannel(("appl", "cherri", "date", "absent"), (1, 1, 1, 1))}
    fetched = fetch_raw(engine, index_name, layout, query, ["d0", "d1"], fields=["text"], routing=routing)
    inputs = build_input(fetched, layout, query, fields=["text"])
    base = inputs.channel("base")
    assert base.n_docs == 30
    np.testing.assert_array_equal(base.df, [30, 15, 15, 0])
    # exact lengths: d0 = "apple banana date" -> 3 tokens; d1 = "apple banana apple banana cherry" -> 5
    np.testing.assert_array_equal(base.doc_len, [3, 5])
    np.testing.assert_array_equal(base.tf, [[1, 0, 1, 0], [2, 1, 0, 0]])
    total = sum(len(("apple banana " * (i % 3 + 1)).split()) + 1 for i in range(30))
    assert abs(base.avgdl - total / 30) < 1e-12
    # one shard alone would see only part of the collection
    answers = [engine.request("POST", f"/{index_name}/_termvectors", params={"routing": r},
                              body={"doc": {"text": ["x"]}, "fields": ["text"], "field_statistics": True})
               for r in routing.routings()]
    per_shard = [a["term_vectors"]["text"]["field_statistics"]["doc_count"] for a in answers]
    assert sum(per_shard) == 30 and max(per_shard) < 30


TEXTS = ["Apple banana apple, CHERRY! apples", "the of and", "date-date 42 bananas' cherries", "x", "  "]


def test_analysis_with_statistics_is_analyze_and_the_index_wide_statistics(engine: Engine, index_name: str) -> None:
    """One ``_termvectors`` per shard gives the tokens ``_analyze`` gives, in the same order,
    and the statistics the separate statistics read gives, summed over three shards."""
    create_index(engine, index_name, IndexLayout(), shards=3)
    _docs(engine, index_name, DOCS)
    layout = IndexLayout()
    routing = ShardRouting(engine, index_name)
    checked = 0
    for text in TEXTS:
        query, stats = run(analyze_with_stats_plan(index_name, layout, text, layout.channels, routing.routings()),
                           engine)
        assert query == analyze_query(engine, index_name, layout, text, layout.channels), text
        fetched = fetch_raw(engine, index_name, layout, query, [], fields=[layout.combined], routing=routing)
        for ch, qc in query.items():
            sf = layout.subfield(layout.combined, ch)
            if sf not in stats:  # left to fetch_raw: only where the channel kept none of the text
                assert not qc.terms, (text, ch)
                continue
            want = fetched.stats[sf]
            assert (stats[sf].doc_count, stats[sf].sum_ttf) == (want.doc_count, want.sum_ttf) == (30, want.sum_ttf)
            assert stats[sf].df == {t: want.df.get(t, 0) for t in qc.terms}, (text, ch)
            checked += 1
    assert checked >= 8
    # the store keeps them in the statistics cache once it has validated the index once
    store = FeatureStore(engine, index_name, layout)
    store.stats.validate()
    query = run(store.analyze_plan(TEXTS[0], ["base", "bigram"]), engine)
    assert store.stats.missing([layout.subfield(layout.combined, "base"), layout.subfield(layout.combined, "bigram")],
                               query, layout, [layout.combined]) == {}
    assert store.stats.get(layout.subfield(layout.combined, "base"), ["appl"]).df == {"appl": 30}


def _explained_counts(engine: Engine, index: str, doc_id: str, term: str) -> tuple[int, int]:
    """(n, N) from the engine's own BM25 explanation of ``term`` for ``doc_id``."""
    resp = engine.request("POST", f"/{index}/_explain/{doc_id}",
                          body={"query": {"term": {"text": term}}})
    found: dict[str, int] = {}

    def walk(node: dict) -> None:
        desc = node.get("description", "")
        if desc.startswith("n, number of documents containing term"):
            found["n"] = int(node["value"])
        elif desc.startswith("N, total number of documents with field"):
            found["N"] = int(node["value"])
        for child in node.get("details", []):
            walk(child)

    walk(resp["explanation"])
    return found["n"], found["N"]


def test_statistics_after_deletion_match_the_engine(engine: Engine, index_name: str) -> None:
    """After a delete, Lucene keeps counting the deleted document in df and N until its
    segment is merged away (soft-delete retention can postpone that for hours), so
    "correct" means: esbridge's statistics are exactly those the engine scores with."""
    create_index(engine, index_name, IndexLayout(), shards=1)
    _docs(engine, index_name, DOCS)
    engine.request("POST", f"/{index_name}/_forcemerge", params={"max_num_segments": 1})
    for doc_id in ("d1", "d3", "d5", "d7", "d9"):  # five of the fifteen "cherry" documents
        engine.request("DELETE", f"/{index_name}/_doc/{doc_id}")
    engine.refresh(index_name)
    layout = IndexLayout()
    query = {"base": QueryChannel(("cherri",), (1,))}

    def stats() -> tuple[int, int]:
        ch = build_input(fetch_raw(engine, index_name, layout, query, ["d11"], fields=["text"]),
                         layout, query, fields=["text"]).channel("base")
        return int(ch.df[0]), ch.n_docs

    assert engine.count(index_name) == 25  # live documents
    # index statistics still hold the deletions, in esbridge and in the engine alike
    assert stats() == (15, 30) == _explained_counts(engine, index_name, "d11", "cherri")
    # an update is a delete plus an add: the statistics follow the engine's again
    engine.request("PUT", f"/{index_name}/_doc/d11", body={"title": "t", "text": "cherry cherry"},
                   params={"refresh": "true"})
    assert stats() == _explained_counts(engine, index_name, "d11", "cherri")
