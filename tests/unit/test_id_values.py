"""Every index esbridge creates keeps its documents' ids in doc values, so that a search that needs only
its hits' ids (a first stage without ``_source``) reads no stored field; a hit without the value is read
again the usual way."""

from __future__ import annotations

from typing import Any

import pytest

from esbridge.engine.calls import ids_from_values, ids_search_plan
from esbridge.engine.plan import Call
from esbridge.errors import ConfigurationError
from esbridge.index import IndexLayout
from esbridge.index.definitions import ID_VALUES, build_index_body, layout_from_meta


def test_a_new_index_has_the_ids_in_doc_values_left_out_of_source() -> None:
    body = build_index_body(IndexLayout())
    assert body["mappings"]["properties"][ID_VALUES] == {"type": "keyword", "index": False, "doc_values": True}
    assert body["mappings"]["_source"] == {"excludes": [ID_VALUES]}
    meta = body["mappings"]["_meta"]["esbridge"]
    assert meta["id_values"] == ID_VALUES
    assert layout_from_meta(meta).id_values == ID_VALUES


def test_ids_from_a_source_field_are_their_own_doc_values() -> None:
    body = build_index_body(IndexLayout(id_field="doc_id"))
    props = body["mappings"]["properties"]
    assert props["doc_id"] == {"type": "keyword"} and ID_VALUES not in props
    assert "_source" not in body["mappings"]  # the id stays in the source, as given
    assert layout_from_meta(body["mappings"]["_meta"]["esbridge"]).id_values == "doc_id"


def test_an_index_made_before_has_none() -> None:
    meta = IndexLayout().to_meta()
    assert "id_values" not in meta and layout_from_meta(meta).id_values is None


def test_the_name_is_not_free_for_a_text_field() -> None:
    with pytest.raises(ConfigurationError, match="may not be called 'esbridge_id'"):
        build_index_body(IndexLayout(fields=("title", ID_VALUES)))
    with pytest.raises(ConfigurationError, match="must not also be a text field"):
        IndexLayout(fields=("title", "body"), id_values="body")


def _hits(*values: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for v in values:
        hit: dict[str, Any] = {"_index": "i", "_score": 1.0}
        if v is not None:
            hit["fields"] = {ID_VALUES: [v], **({"other": [1]} if v == "b" else {})}
        out.append(hit)
    return out


def test_hits_get_their_id_from_the_values() -> None:
    hits = _hits("a", "b")
    assert ids_from_values(hits, ID_VALUES)
    assert hits == [{"_index": "i", "_score": 1.0, "_id": "a"},
                    {"_index": "i", "_score": 1.0, "_id": "b", "fields": {"other": [1]}}]
    assert not ids_from_values(_hits("a", None), ID_VALUES)


def _drive(plan: Any, answers: list[dict[str, Any]]) -> tuple[list[Call], Any]:
    sent: list[Call] = []
    value: Any = None
    try:
        while True:
            step = plan.send(value)
            sent.append(step)
            value = answers[len(sent) - 1]
    except StopIteration as stop:
        return sent, stop.value


def _answer(hits: list[dict[str, Any]]) -> dict[str, Any]:
    return {"hits": {"hits": hits}}


def test_a_search_without_source_reads_no_stored_field() -> None:
    body = {"size": 2, "query": {"match_all": {}}, "_source": False}
    sent, resp = _drive(ids_search_plan("docs", body, ID_VALUES), [_answer(_hits("a", "b"))])
    assert len(sent) == 1
    assert sent[0].body == {**body, "stored_fields": "_none_", "docvalue_fields": [ID_VALUES]}
    assert [h["_id"] for h in resp["hits"]["hits"]] == ["a", "b"]


def test_a_hit_without_the_value_sends_the_search_again_as_given() -> None:
    body = {"size": 2, "query": {"match_all": {}}, "_source": False}
    again = _answer([{"_id": "a", "_score": 1.0}, {"_id": "x", "_score": 1.0}])
    sent, resp = _drive(ids_search_plan("docs", body, ID_VALUES), [_answer(_hits("a", None)), again])
    assert len(sent) == 2 and sent[1].body == body
    assert resp is again


@pytest.mark.parametrize("body", [{"query": {"match_all": {}}},  # _source wanted
                                  {"query": {"match_all": {}}, "_source": False, "stored_fields": ["x"]}])
def test_a_search_that_reads_stored_fields_anyway_is_sent_as_given(body: dict[str, Any]) -> None:
    sent, _ = _drive(ids_search_plan("docs", body, ID_VALUES), [_answer([])])
    assert len(sent) == 1 and sent[0].body == body
    sent, _ = _drive(ids_search_plan("docs", {**body, "_source": False}, None), [_answer([])])
    assert sent[0].body == {**body, "_source": False}


# ---- a search whose page is fetched apart (Reranker.search_rescored's page) ---------------------------

def test_the_page_search_is_the_body_query_on_the_page_ids_with_what_it_asks_of_each_hit() -> None:
    from esbridge.rerank.pipeline import page_body

    body = {"query": {"match": {"text": "cells"}}, "size": 100, "_source": ["title"], "aggs": {"n": {}},
            "highlight": {"fields": {"text": {}}}, "post_filter": {"term": {"a": 1}}, "track_total_hits": True,
            "version": True, "docvalue_fields": ["year"], "min_score": 0.5, "suggest": {}}
    got = page_body(body, ["b", "a"])
    only = {"ids": {"values": ["b", "a"]}}
    assert got == {"query": {"bool": {"must": [{"match": {"text": "cells"}}], "filter": [only]}}, "size": 2,
                   "track_total_hits": False, "_source": ["title"], "highlight": {"fields": {"text": {}}},
                   "version": True, "docvalue_fields": ["year"]}
    assert page_body({"size": 3}, ["x"])["query"] == {"bool": {"filter": [{"ids": {"values": ["x"]}}]}}


@pytest.mark.parametrize(("body", "apart", "fetch"), [
    ({}, True, True),  # the engine returns _source unless told not to
    ({"_source": False}, True, False),
    ({"_source": False, "highlight": {"fields": {"t": {}}}}, True, True),
    ({"_source": False, "fields": ["year"]}, True, True),
    ({"_source": False, "explain": True}, False, False),
    ({"stored_fields": "_none_"}, False, True),
])
def test_which_bodies_fetch_their_page_apart(body: dict[str, Any], apart: bool, fetch: bool) -> None:
    from esbridge.rerank.pipeline import fetched_apart, needs_page_fetch

    assert fetched_apart(body) is apart
    assert needs_page_fetch(body) is fetch


@pytest.mark.parametrize(("params", "apart", "fetch"), [
    ({"_source_includes": "title"}, True, True),
    ({"version": "true"}, True, True),
    ({"typed_keys": "true", "preference": "_local"}, True, False),
    ({"explain": "true"}, False, False),
    ({"explain": "false"}, True, False),
    ({"stored_fields": "_none_"}, False, True),
    ({"q": "text:cells"}, False, False),
])
def test_which_url_parameters_fetch_the_page_apart(params: dict[str, str], apart: bool, fetch: bool) -> None:
    from esbridge.rerank.pipeline import fetched_apart, needs_page_fetch

    body = {"_source": False}
    assert fetched_apart(body, params) is apart
    assert needs_page_fetch(body, params) is fetch


@pytest.mark.parametrize("page", [(0, -1), (-1, 10), (1.5, 2), (True, 3), (1, 2, 3), "0,10"])
def test_a_page_is_two_integers_from_and_size(page: Any) -> None:
    from esbridge.rerank.candidates import check_page

    with pytest.raises(ConfigurationError, match=r"page must be \(from, size\)"):
        check_page(page)
    assert check_page([20, 0]) == (20, 0) and check_page(None) is None
