"""BM25 recomputed from term vectors and index-wide statistics equals the engine's _score.

The proof that the plumbing is right: for the 50 judged claims of the shipped SciFact sample,
every returned hit's engine score (``dfs_query_then_fetch``, so the engine also uses index-wide
statistics) equals esbridge's Lucene BM25 computed from fetched term vectors, with Lucene's
lossy one-byte length norms reproduced, on a 1-shard and a 3-shard index of the sample.
"""

from __future__ import annotations

import numpy as np
import pytest

from esbridge.engine.client import Engine
from esbridge.features import analyze_query, build_input, fetch_raw
from esbridge.index import read_layout
from esbridge.scoring import get_scorer
from tests.data import judged_queries

REL_TOL = 1e-5


@pytest.mark.parametrize("shards", [1, 3])
def test_bm25_equals_engine_score(engine: Engine, sample_indices: dict[int, str], shards: int) -> None:
    index = sample_indices[shards]
    layout = read_layout(engine, index)
    field = layout.subfield(layout.combined, "base")
    bm25 = get_scorer("bm25")
    # The engine's default similarity (k1 = 1.2, b = 0.75); Lucene < 9 multiplies by k1 + 1.
    params = bm25.make_params(k1=1.2, b=0.75, lucene_norms=True,
                              k1_plus_one=engine.info.bm25_k1_plus_one)
    queries = judged_queries()
    assert len(queries) == 50
    checked = 0
    worst = 0.0
    for q in queries:
        terms = analyze_query(engine, index, layout, q["text"], ["base"])
        resp = engine.search(index, {"size": 100, "query": {"match": {field: q["text"]}}},
                             params={"search_type": "dfs_query_then_fetch"})
        hits = resp["hits"]["hits"]
        assert hits, f"query {q['_id']} returned nothing"
        ids = [h["_id"] for h in hits]
        expected = np.array([h["_score"] for h in hits])
        fetched = fetch_raw(engine, index, layout, terms, ids, fields=[layout.combined])
        got = bm25.score(build_input(fetched, layout, terms, fields=[layout.combined]), params).scores
        rel = np.abs(got - expected) / np.abs(expected)
        worst = max(worst, float(rel.max()))
        assert rel.max() <= REL_TOL, (
            f"query {q['_id']} ({engine.info.label}, {shards} shard(s)): hit {ids[int(rel.argmax())]} "
            f"engine {expected[rel.argmax()]} esbridge {got[rel.argmax()]}"
        )
        checked += len(hits)
    assert checked >= 50 * 50
    print(f"{engine.info.label} {shards} shard(s): {checked} hits, max relative error {worst:.2e}")


def test_exact_lengths_are_not_quantised(engine: Engine, sample_indices: dict[int, str]) -> None:
    """Without ``lucene_norms`` the scorer sees exact lengths: scores then differ from the
    engine's for long documents, which shows the parity above depends on the norm encoding."""
    index = sample_indices[1]
    layout = read_layout(engine, index)
    field = layout.subfield(layout.combined, "base")
    q = judged_queries(limit=1)[0]
    terms = analyze_query(engine, index, layout, q["text"], ["base"])
    hits = engine.search(index, {"size": 50, "query": {"match": {field: q["text"]}}})["hits"]["hits"]
    fetched = fetch_raw(engine, index, layout, terms, [h["_id"] for h in hits], fields=[layout.combined])
    inputs = build_input(fetched, layout, terms, fields=[layout.combined])
    bm25 = get_scorer("bm25")
    exact = bm25.score(inputs, bm25.make_params(k1=1.2, b=0.75, k1_plus_one=engine.info.bm25_k1_plus_one)).scores
    expected = np.array([h["_score"] for h in hits])
    assert np.max(np.abs(exact - expected) / expected) > 1e-4
