"""The first-stage query and the candidates' bookkeeping, built without an engine."""

from __future__ import annotations

import numpy as np
import pytest

from esbridge.errors import ConfigurationError
from esbridge.features.termvectors import FieldStats, QueryChannel
from esbridge.index.definitions import IndexLayout
from esbridge.rerank.candidates import AnalyzedQuery, Ranking, reorder_hits, union_of
from esbridge.rerank.first_stage import (
    MAX_FIRST_STAGE_TERMS,
    FirstStage,
    build_query,
    dropped_terms,
    parse_first_stage,
    term_channels,
    terms_sent,
    with_filter,
)
from esbridge.scoring import ScoreResult

LAYOUT = IndexLayout()
BASE = LAYOUT.subfield(LAYOUT.combined, "base")


def prepared(*terms: str) -> AnalyzedQuery:
    qc = QueryChannel(tuple(terms), tuple(1 for _ in terms))
    return AnalyzedQuery(query={ch: qc for ch in LAYOUT.channels}, dropped=0)


def test_bm25_is_a_bool_of_term_clauses_on_the_analysed_tokens() -> None:
    q = prepared("bone", "densiti")
    query = build_query(FirstStage.BM25, LAYOUT, q, "Bone density?", {"base": [0, 1]})
    assert query == {"bool": {"should": [{"term": {BASE: {"value": "bone", "boost": 1}}},
                                         {"term": {BASE: {"value": "densiti", "boost": 1}}}]}}
    # the text itself is never sent; an empty analysis matches nothing
    assert "Bone density?" not in str(query)
    assert build_query(FirstStage.BM25, LAYOUT, prepared(), "", {"base": []}) == {"match_none": {}}


def test_channels_and_multi_match_and_custom_queries() -> None:
    q = prepared("bone")
    channels = build_query(FirstStage.CHANNELS, LAYOUT, q, "bone", {ch: [0] for ch in LAYOUT.channels})
    boosts = {next(iter(c["term"])): next(iter(c["term"].values()))["boost"] for c in channels["bool"]["should"]}
    assert boosts == {LAYOUT.subfield(LAYOUT.combined, "base"): 1.0, LAYOUT.subfield(LAYOUT.combined, "prefix"): 0.3,
                      LAYOUT.subfield(LAYOUT.combined, "bigram"): 0.5, LAYOUT.subfield(LAYOUT.combined, "micro"): 0.2}
    layout = IndexLayout(fields=("title", "text"))
    mm = build_query(FirstStage.MULTI_MATCH, layout, q, "bone", {"base": [0]})
    assert len(mm["bool"]["should"][0]["dis_max"]["queries"]) == 2
    custom = {"match_all": {}}
    assert build_query(custom, LAYOUT, q, "bone", {}) == custom and term_channels(custom, LAYOUT) == ()
    assert term_channels(FirstStage.CHANNELS, LAYOUT) == tuple(LAYOUT.channels)
    assert with_filter(custom, {"term": {"a": 1}}) == {"bool": {"must": [custom], "filter": [{"term": {"a": 1}}]}}
    assert with_filter(custom, None) is custom


def test_first_stage_names_are_checked() -> None:
    assert parse_first_stage("multi_match") is FirstStage.MULTI_MATCH
    assert parse_first_stage("similarity:bmx") == "similarity:bmx"
    with pytest.raises(ConfigurationError, match="unknown first stage 'bm26'; choose one of bm25, multi_match"):
        parse_first_stage("bm26")


def test_long_queries_send_the_indexed_terms_of_highest_weight() -> None:
    n = MAX_FIRST_STAGE_TERMS + 5
    terms = tuple(f"t{i}" for i in range(n))
    qc = QueryChannel(terms, tuple(1 for _ in terms))
    # t0..t4 absent from the index; the rest with rising df (falling IDF)
    stats = FieldStats(doc_count=10_000, sum_ttf=100_000, df={t: i for i, t in enumerate(terms) if i >= 5})
    sent = terms_sent(qc, stats)
    assert len(sent) == MAX_FIRST_STAGE_TERMS and not {0, 1, 2, 3, 4} & set(sent)
    assert sent[:3] == [5, 6, 7]  # rarest first
    assert terms_sent(QueryChannel(terms[:3], (1, 1, 1)), None) == [0, 1, 2]
    assert dropped_terms(FirstStage.BM25, LAYOUT, {"base": qc}) == 5


def test_union_and_reordering() -> None:
    a = {"hits": {"hits": [{"_id": "x", "_score": 3.0}, {"_id": "y", "_score": 2.0}]}}
    b = {"hits": {"hits": [{"_id": "z", "_score": 9.0}, {"_id": "x", "_score": 1.0}]}}
    union = union_of([a, b])
    assert [h["_id"] for h in union.hits] == ["x", "y", "z"]
    assert union.ranks == [{"x": 1, "y": 2}, {"z": 1, "x": 2}]
    result = ScoreResult(scores=np.array([1.0, 5.0, 1.0]), parts={"p": np.array([0.1, 0.2, 0.3])})
    ranking = Ranking.of([h["_id"] for h in union.hits], result)
    out = reorder_hits(union.hits, ranking, explain=True, ranks=union.ranks)
    assert [h["_id"] for h in out] == ["y", "x", "z"]  # ties keep the first-stage order
    assert out[0]["_esbridge"] == {"first_stage_score": 2.0, "first_stage_rank": 2, "variant_ranks": {},
                                   "parts": {"p": 0.2}}
    assert out[2]["_esbridge"]["first_stage_score"] is None  # found by the variant only
    assert out[2]["_esbridge"]["variant_ranks"] == {"1": 1}
    # a search keeps only its top hits: the same hits, annotated alike, none beyond them
    for limit in (0, 1, 2, 3, 5):
        assert reorder_hits(union.hits, ranking, explain=True, ranks=union.ranks, limit=limit) == out[:limit]
