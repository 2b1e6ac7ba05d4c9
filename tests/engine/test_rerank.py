"""Reranking and rescoring through a real engine."""

from __future__ import annotations

import json

import numpy as np
import pytest

from esbridge.engine.client import Engine
from esbridge.errors import ConfigurationError
from esbridge.features import analyze_query, build_input, fetch_raw
from esbridge.index import IndexLayout, create_index, read_layout
from esbridge.index.definitions import build_index_body
from esbridge.rerank import Reranker
from esbridge.scoring import get_scorer
from tests.data import judged_queries
from tests.smallindex import DOCS, create_small_index


@pytest.fixture
def small_index(engine: Engine, index_name: str) -> str:
    return create_small_index(engine, index_name, DOCS, shards=2)


def test_search_returns_engine_shape_with_exact_scores(engine: Engine, sample_indices: dict[int, str]) -> None:
    index = sample_indices[3]
    rr = Reranker(engine, index, scorer="evolved", window=50)
    q = judged_queries(limit=1)[0]["text"]
    resp = rr.search(q, size=10, explain=True)
    hits = resp["hits"]["hits"]
    assert len(hits) == 10 and resp["hits"]["total"]["value"] >= 50
    scores = [h["_score"] for h in hits]
    assert scores == sorted(scores, reverse=True) and resp["hits"]["max_score"] == scores[0]
    for h in hits:
        assert h["_source"]["title"] is not None
        meta = h["_esbridge"]
        assert meta["first_stage_score"] > 0 and 1 <= meta["first_stage_rank"] <= 50
        assert {"base.evidence", "base.B_cov", "prefix.R"} <= set(meta["parts"])
    # the reranked scores are exactly the scorer's on freshly fetched features
    layout = read_layout(engine, index)
    terms = analyze_query(engine, index, layout, q, ["base", "prefix", "bigram", "micro"])
    ids = [h["_id"] for h in hits]
    fresh = fetch_raw(engine, index, layout, terms, ids, fields=[layout.combined])
    expected = get_scorer("evolved").score(build_input(fresh, layout, terms, fields=[layout.combined])).scores
    np.testing.assert_allclose(scores, expected, rtol=1e-12)


def test_rescore_keeps_hits_beyond_the_window(engine: Engine, sample_indices: dict[int, str]) -> None:
    index = sample_indices[1]
    q = judged_queries(limit=2)[1]["text"]
    layout = read_layout(engine, index)
    response = engine.search(index, {"size": 30, "query": {"match": {"esb_all": q}}})
    rr = Reranker(engine, index, scorer="bmx")
    out = rr.rescore(response, q, window=10)
    before = response["hits"]["hits"]
    after = out["hits"]["hits"]
    assert len(after) == 30
    assert {h["_id"] for h in after[:10]} == {h["_id"] for h in before[:10]}
    assert [h["_id"] for h in after[10:]] == [h["_id"] for h in before[10:]]
    assert [h["_score"] for h in after[10:]] == [h["_score"] for h in before[10:]]
    assert response["hits"]["hits"] is before and "_esbridge" not in before[0]  # input untouched
    head = [h["_score"] for h in after[:10]]
    assert head == sorted(head, reverse=True)
    assert layout.combined == "esb_all"
    with pytest.warns(DeprecationWarning, match="use window="):  # the former name: the same answer
        assert rr.rescore(response, q, window_size=10)["hits"]["hits"] == after


def test_filter_passes_through_and_source_fields(engine: Engine, small_index: str) -> None:
    rr = Reranker(engine, small_index, scorer="bm25", window=10)
    resp = rr.search("glucose diabetes", size=10, filter={"ids": {"values": ["a", "e"]}}, fields=["title"])
    assert {h["_id"] for h in resp["hits"]["hits"]} == {"a", "e"}
    assert set(resp["hits"]["hits"][0]["_source"]) == {"title"}


@pytest.mark.usefixtures("term_vectors_only")  # (the engine plugin keeps no vectors to go stale)
def test_updated_document_is_never_scored_from_stale_vectors(engine: Engine, small_index: str) -> None:
    # statistics refetched after every write (the default keeps them for the index's refresh interval)
    rr = Reranker(engine, small_index, scorer="bm25", window=10, stats_refresh_interval=0)
    first = {h["_id"]: h["_score"] for h in rr.search("cardiac heart", size=10)["hits"]["hits"]}
    again = {h["_id"]: h["_score"] for h in rr.search("cardiac heart", size=10)["hits"]["hits"]}
    assert first == again and rr.store.vectors.counts().hits >= len(first)
    engine.request("PUT", f"/{small_index}/_doc/c", body={"title": "Cardiac", "text": "cardiac cardiac cardiac heart"},
                   params={"refresh": "true"})
    updated = {h["_id"]: h["_score"] for h in rr.search("cardiac heart", size=10)["hits"]["hits"]}
    assert updated["c"] != first["c"]
    # and the new score is the one computed from the new text
    fresh = Reranker(engine, small_index, scorer="bm25", window=10)
    hits = fresh.search("cardiac heart", size=10)["hits"]["hits"]
    assert {h["_id"]: h["_score"] for h in hits} == pytest.approx(updated)
    assert rr.store.stats.refreshes >= 1


@pytest.mark.parametrize("text", [
    "",
    "the of and",                                            # stopwords only
    "\"quoted\" \\backslash\\ {\"json\": [1, 2]} doc['x'].value; params._source }",
    "Ünïcödé ✓ 日本語のテキスト 🙂 \u0000 \u202e",
    "glucose " * 1250,                                       # 10,000 characters
])
def test_hostile_and_odd_queries(engine: Engine, small_index: str, text: str) -> None:
    for scorer in ("evolved", "bmx", "bm25"):
        rr = Reranker(engine, small_index, scorer=scorer, window=10)
        resp = rr.search(text, size=5)
        for h in resp["hits"]["hits"]:
            assert np.isfinite(h["_score"])
        json.dumps(resp)


def test_stopword_query_finds_nothing_and_long_query_works(engine: Engine, small_index: str) -> None:
    rr = Reranker(engine, small_index, window=10)
    assert rr.search("the of and", size=5)["hits"]["hits"] == []
    words = " ".join(f"w{i}" for i in range(1500)) + " glucose"
    resp = rr.search(words, size=5)
    # 1,501 distinct base-channel terms, 1,000 sent: 501 dropped (the other channels are not sent)
    assert resp["_esbridge"]["first_stage_terms_dropped"] == 501
    assert resp["hits"]["hits"]


def test_windows_and_versions_are_checked(engine: Engine, small_index: str) -> None:
    rr = Reranker(engine, small_index, window=10)
    for bad in (0, -1, True, 2.5):
        with pytest.raises(ConfigurationError, match="window must be an integer >= 1"):
            rr.search("glucose", window=bad)  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match="window must be an integer >= 1"):
            rr.rescore(engine.search(small_index, {"query": {"match_all": {}}}), "glucose", window=bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="window must be an integer >= 1"):
        Reranker(engine, small_index, window=0)
    raw = engine.search(small_index, {"query": {"match_all": {}}, "seq_no_primary_term": True})
    raw["hits"]["hits"][0]["_seq_no"] = "seven"
    with pytest.raises(ConfigurationError, match="not an integer"):
        rr.rescore(raw, "glucose")


def test_bad_options_are_clear(engine: Engine, small_index: str) -> None:
    with pytest.raises(ConfigurationError, match="not a text field"):
        Reranker(engine, small_index, field_weights={"abstract": 2.0})
    with pytest.raises(ConfigurationError, match="valid scorers"):
        Reranker(engine, small_index, scorer="bm99")
    rr = Reranker(engine, small_index)
    with pytest.raises(ConfigurationError, match="max_result_window"):
        rr.search("glucose", window=10_001)
    with pytest.raises(ConfigurationError, match="unknown first stage"):
        Reranker(engine, small_index, first_stage="magic")


def test_first_stages(engine: Engine, small_index: str) -> None:
    for fs in ("bm25", "multi_match", "channels"):
        ids = [h["_id"] for h in Reranker(engine, small_index, window=10, first_stage=fs)
               .search("glucose diabetes", size=10)["hits"]["hits"]]
        assert {"a", "b", "d"} <= set(ids)
    # the channels stage finds prefix-only matches ("diabetic" shares "diabe" with "diabetes")
    ids = [h["_id"] for h in Reranker(engine, small_index, window=10, first_stage="channels")
           .search("diabetic", size=10)["hits"]["hits"]]
    assert {"b", "d"} <= set(ids)
    custom = Reranker(engine, small_index, window=10, first_stage={"ids": {"values": ["c"]}})
    assert [h["_id"] for h in custom.search("heart", size=10)["hits"]["hits"]] == ["c"]


def test_field_weights_use_per_field_vectors(engine: Engine, small_index: str) -> None:
    plain = Reranker(engine, small_index, scorer="bm25", window=10).search("heart", size=10)
    boosted = Reranker(engine, small_index, scorer="bm25", window=10,
                       field_weights={"title": 3.0}).search("heart", size=10)
    p = {h["_id"]: h["_score"] for h in plain["hits"]["hits"]}
    b = {h["_id"]: h["_score"] for h in boosted["hits"]["hits"]}
    assert b["d"] / b["c"] != pytest.approx(p["d"] / p["c"])  # "heart" is in d's title only
    resp = Reranker(engine, small_index, scorer="bm25f_pubmed", window=10).search("heart", size=10)
    assert resp["hits"]["hits"]


def test_per_field_channels_only_where_asked_for(engine: Engine, index_name: str) -> None:
    """A multi-channel scorer with field weights reads each text field's channels: on an index
    with them only in the combined field that is a one-line error naming the option; with every
    channel in every field it scores, and equal weights score as the combined field does."""
    small = create_small_index(engine, index_name)
    with pytest.raises(ConfigurationError) as err:
        Reranker(engine, small, scorer="evolved", field_weights={"title": 2.0})
    assert "--per-field-channels" in str(err.value) and "prefix, bigram, micro" in str(err.value)
    assert "\n" not in str(err.value)
    full = f"{index_name}-full"
    create_index(engine, full, IndexLayout(field_channels=("base", "prefix", "bigram", "micro")))
    try:
        for doc_id, src in DOCS.items():
            engine.request("PUT", f"/{full}/_doc/{doc_id}", body=dict(src))
        engine.refresh(full)
        weighted = Reranker(engine, full, scorer="evolved", window=10, field_weights={"title": 2.0})
        hits = weighted.search("diabetes heart", size=5)["hits"]["hits"]
        assert hits and all(h["_score"] > 0 for h in hits)
        same = {h["_id"]: h["_score"] for h in Reranker(engine, full, scorer="evolved", window=10)
                .search("diabetes heart", size=5)["hits"]["hits"]}
        default = {h["_id"]: h["_score"] for h in Reranker(engine, small, scorer="evolved", window=10)
                   .search("diabetes heart", size=5)["hits"]["hits"]}
        assert same == pytest.approx(default, rel=1e-9)  # the combined field is the same in both
    finally:
        engine.delete_index(full)


def test_an_index_of_the_earlier_layout_scores_the_same(engine: Engine, index_name: str) -> None:
    """An index built when the base channel was the ``.base`` sub-field and every text field had
    every channel (its ``_meta`` has neither entry) is read as such and scores as a new one."""
    new = create_small_index(engine, index_name)
    old = f"{index_name}-old"
    earlier = IndexLayout(field_channels=("base", "prefix", "bigram", "micro"), base_subfield=True)
    body = build_index_body(earlier)
    for key in ("field_channels", "base_subfield", "id_values"):
        del body["mappings"]["_meta"]["esbridge"][key]
    engine.request("PUT", f"/{old}", body=body)
    try:
        for doc_id, src in DOCS.items():
            engine.request("PUT", f"/{old}/_doc/{doc_id}", body=dict(src))
        engine.refresh(old)
        assert read_layout(engine, old) == earlier
        for scorer, weights in (("evolved", None), ("bm25", None), ("bm25f_robertson", {"title": 2.0})):
            got = [{h["_id"]: h["_score"] for h in Reranker(engine, name, scorer=scorer, window=10,
                                                               field_weights=weights)
                    .search("diabetes heart glucose", size=5)["hits"]["hits"]} for name in (new, old)]
            assert got[0] and got[0] == pytest.approx(got[1], rel=1e-9), scorer
    finally:
        engine.delete_index(old)


@pytest.mark.parametrize("scorer", ["bm25f_robertson", "bm25f_pubmed"])
def test_field_weights_reach_the_bm25f_scorers(engine: Engine, small_index: str, scorer: str) -> None:
    def ratio(title_weight: float) -> float:
        rr = Reranker(engine, small_index, scorer=scorer, window=10, field_weights={"title": title_weight})
        s = {h["_id"]: h["_score"] for h in rr.search("heart diabetes", size=10)["hits"]["hits"]}
        return s["d"] / s["c"]  # "heart" and "diabetes" are in d's title, "heart" in c's text only

    r1, r5, r50 = ratio(1.0), ratio(5.0), ratio(50.0)
    assert r1 < r5 < r50
    with pytest.raises(ConfigurationError, match="every field weight is 0"):
        Reranker(engine, small_index, scorer=scorer, window=10, field_weights={"title": 0, "text": 0})


def test_field_weights_as_a_scorer_parameter_from_the_cli(engine: Engine, small_index: str,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from esbridge.cli.main import main

    def top(weights: str) -> dict[str, float]:
        assert main(["search", "--url", engine.options.url, "--scorer", "bm25f_robertson",
                     "--param", f"field_weights={weights}", "--json", "--size", "5", small_index,
                     "heart diabetes"]) == 0
        hits = json.loads(capsys.readouterr().out)["hits"]["hits"]
        return {h["_id"]: h["_score"] for h in hits}

    low, high = top('{"title": 1}'), top('[["title", 20]]')
    assert high["d"] / high["c"] > low["d"] / low["c"]
    assert main(["search", "--url", engine.options.url, "--scorer", "bm25f_robertson",
                 "--param", 'field_weights={"title": 0, "text": 0}', "--param", "default_weight=0",
                 small_index, "heart"]) != 0
    assert "every field weight (and default_weight) is 0" in capsys.readouterr().err


@pytest.mark.painless
def test_scripted_similarity_first_stage(engine: Engine, index_name: str) -> None:
    create_index(engine, index_name, IndexLayout(), similarity=["evolved"])
    for doc_id, src in DOCS.items():
        engine.request("PUT", f"/{index_name}/_doc/{doc_id}", body=src)
    engine.refresh(index_name)
    rr = Reranker(engine, index_name, scorer="evolved", window=10, first_stage="similarity:evolved")
    resp = rr.search("glucose diabetes", size=10)
    assert {"a", "b", "d"} <= {h["_id"] for h in resp["hits"]["hits"]}
    first = {h["_id"]: h["_esbridge"]["first_stage_score"] for h in resp["hits"]["hits"]}
    plain = {h["_id"]: h["_score"] for h in engine.search(
        index_name, {"query": {"match": {"esb_all": "glucose diabetes"}}})["hits"]["hits"]}
    assert first != pytest.approx(plain)  # ranked by the scripted similarity, not BM25
    with pytest.raises(ConfigurationError, match="similarity='bmx'"):
        Reranker(engine, index_name, first_stage="similarity:bmx")


def test_mismatched_ids_and_versions_are_refused(engine: Engine, small_index: str) -> None:
    rr = Reranker(engine, small_index, window=10)
    prepared = rr.analyze("glucose")
    with pytest.raises(ConfigurationError, match="2 ids but 1 versions"):
        rr.store.fetch(prepared.query, ["a", "b"], [None], fields=[rr.layout.combined])  # type: ignore[union-attr]
