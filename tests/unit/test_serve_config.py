"""``esbridge serve``'s configuration file and how it reads a search request (no engine needed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from esbridge.engine.client import ConnectionOptions
from esbridge.errors import ConfigurationError
from esbridge.serve import IndexConfig, load_config, parse_config
from esbridge.serve.metrics import Metrics
from esbridge.serve.search import REASONS, SearchRequest, Unreranked, _Refused, query_text, read_search, scoring_text
from esbridge.serve.server import Server
from tests.cli import run


def write(tmp_path: Path, content: Any) -> Path:
    path = tmp_path / "serve.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


def test_a_configuration_is_read(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, {"indices": {
        "scifact": {"scorer": "bmx", "window": 200, "mode": "rescore", "fields": ["title", "text"],
                    "field_weights": {"title": 2}, "first_stage": "multi_match"},
        "plain": {}}}))
    assert config.indices["scifact"] == IndexConfig(scorer="bmx", window=200, mode="rescore",
                                                    fields=("title", "text"), field_weights=(("title", 2.0),),
                                                    first_stage="multi_match")
    assert config.indices["plain"] == IndexConfig()


def test_the_hybrid_pipeline_is_configured(tmp_path: Path) -> None:
    from esbridge.hybrid.pipeline import PipelineParams

    config = load_config(write(tmp_path, {"indices": {
        "docs": {"scorer": "bmx", "window": 300, "pipeline": True, "pipeline_params": {"w_semantic": 2}},
        "other": {"pipeline": True}}}))
    assert config.indices["docs"].pipeline == PipelineParams(scorer="bmx", window=300, w_semantic=2)
    assert config.indices["other"].pipeline == PipelineParams()  # the pipeline's own window (not 100)
    req = read_search("docs", config.indices["docs"], {"query": {"match": {"t": "x"}}}, {})
    assert req is not None and req.config.pipeline is not None
    req = read_search("docs", config.indices["docs"], {"query": {"match": {"t": "x"}},
                                                       "ext": {"esbridge": {"pipeline": False}}}, {})
    assert req is not None and req.config.pipeline is None
    with pytest.raises(_Refused, match="ext.esbridge.window cannot be given to the hybrid pipeline"):
        read_search("docs", config.indices["docs"], {"query": {"match": {"t": "x"}},
                                                     "ext": {"esbridge": {"window": 5}}}, {})


@pytest.mark.parametrize("content,message", [
    ("{not json", "is not valid JSON"),
    ([], "must be a JSON object"),
    ({"indexes": {}}, "'indexes' is not a setting"),
    ({"indices": []}, "indices must be an object"),
    ({"indices": {"a,b": {}}}, "indices.'a,b' is not one index name"),
    ({"indices": {"logs-*": {}}}, "is not one index name"),
    ({"indices": {"docs": []}}, "indices.docs must be an object of settings"),
    ({"indices": {"docs": {"scorrer": "bmx"}}}, "indices.docs.scorrer is not a setting"),
    ({"indices": {"docs": {"scorer": "bm99"}}}, "indices.docs.scorer: unknown scorer 'bm99'"),
    ({"indices": {"docs": {"window": 0}}}, "indices.docs.window must be a whole number >= 1"),
    ({"indices": {"docs": {"window": "100"}}}, "indices.docs.window must be a whole number >= 1"),
    ({"indices": {"docs": {"mode": "hybrid"}}}, "indices.docs.mode must be one of rescore, search"),
    ({"indices": {"docs": {"first_stage": "bm26"}}}, "indices.docs.first_stage"),
    ({"indices": {"docs": {"fields": [1]}}}, "indices.docs.fields must be a list of field names"),
    ({"indices": {"docs": {"field_weights": {"title": -1}}}}, "indices.docs.field_weights must map"),
    ({"indices": {"docs": {"scorer": "bm25", "params": {"k9": 1}}}}, "indices.docs.params: not parameters of "
                                                                      "scorer 'bm25'"),
    ({"indices": {"docs": {"pipeline": "yes"}}}, "indices.docs.pipeline must be true or false"),
    ({"indices": {"docs": {"pipeline_params": {"w_semantic": 2}}}}, "indices.docs.pipeline_params is given but "
                                                                    "pipeline is not true"),
    ({"indices": {"docs": {"pipeline": True, "pipeline_params": {"w_semantik": 2}}}},
     "indices.docs.pipeline_params: unknown pipeline parameter(s) w_semantik"),
    ({"indices": {"docs": {"pipeline": True, "pipeline_params": {"fusion": "product"}}}},
     "indices.docs.pipeline_params:"),
    ({"indices": {"docs": {"pipeline": True, "mode": "rescore"}}}, "it cannot be in mode rescore"),
])
def test_a_wrong_configuration_is_named(tmp_path: Path, content: Any, message: str) -> None:
    path = write(tmp_path, content)
    with pytest.raises(ConfigurationError) as err:
        load_config(path)
    assert str(path) in str(err.value) and message in str(err.value)
    assert "\n" not in str(err.value)


def test_a_missing_configuration_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"cannot read the configuration .*nope\.json"):
        load_config(tmp_path / "nope.json")


@pytest.mark.parametrize("query,text,filters", [
    ({"match": {"text": "heart risk"}}, "heart risk", []),
    ({"match": {"text": {"query": "heart risk", "operator": "and"}}}, "heart risk", []),
    ({"multi_match": {"query": "heart", "fields": ["title"]}}, "heart", []),
    ({"simple_query_string": {"query": "heart"}}, "heart", []),
    ({"bool": {"must": {"match": {"text": "heart"}}, "filter": [{"term": {"lang": "en"}}]}}, "heart",
     [{"term": {"lang": "en"}}]),
    ({"bool": {"should": [{"match": {"t": "heart"}}], "must_not": [{"term": {"x": 1}}]}}, "heart",
     [{"bool": {"must_not": [{"term": {"x": 1}}]}}]),
    ({"match_all": {}}, None, []),
    (None, None, []),
])
def test_the_query_text_and_filters(query: Any, text: str | None, filters: list[Any]) -> None:
    assert query_text(query) == (text, filters)


@pytest.mark.parametrize("query,message", [
    ({"term": {"text": "x"}}, "a [term] query has none: give the text as ext.esbridge.query"),
    ({"bool": {"must": [{"match": {"a": "x"}}, {"match": {"b": "y"}}]}}, "with one scoring clause"),
    ({"bool": {"must": {"match": {"a": "x"}}, "minimum_should_match": 1}}, "[minimum_should_match] is not"),
    ({"match": {"text": 5}}, "the text of [match] must be a string"),
])
def test_a_query_without_one_text_is_refused(query: Any, message: str) -> None:
    with pytest.raises(_Refused) as err:
        query_text(query)
    assert err.value.status == 400 and message in err.value.reason


def test_a_search_request_is_read() -> None:
    config = IndexConfig(window=30, mode="search")
    req = read_search("docs", config, {"query": {"match": {"t": "heart"}}, "size": 5, "from": 10,
                                       "ext": {"esbridge": {"explain": True, "window": 80, "scorer": "bmx"},
                                               "other": 1}}, {})
    assert req is not None
    assert (req.text, req.size, req.from_, req.explain, req.window, req.config.scorer) == \
        ("heart", 5, 10, True, 80, "bmx")
    assert req.body == {"query": {"match": {"t": "heart"}}, "size": 5, "from": 10, "ext": {"other": 1}}
    assert read_search("docs", config, {"query": {"match": {"t": "x"}}, "ext": {"esbridge": {"rerank": False}}},
                       {}) is None
    # the text given apart: the query only filters
    req = read_search("docs", config, {"query": {"term": {"lang": "en"}}, "ext": {"esbridge": {"query": "heart"}}},
                      {"size": "3"})
    assert req is not None and (req.text, req.filter, req.size) == ("heart", [{"term": {"lang": "en"}}], 3)
    # a URI search: the text is q's
    req = read_search("docs", config, None, {"q": "heart risk", "size": "4"})
    assert req is not None and (req.text, req.filter, req.size) == ("heart risk", [], 4)


@pytest.mark.parametrize("body,params,message", [
    ({"query": {"match": {"t": "x"}}, "ext": {"esbridge": {"windw": 3}}}, {}, "ext.esbridge.windw is not an option"),
    ({"query": {"match": {"t": "x"}}, "ext": {"esbridge": {"explain": "yes"}}}, {},
     "ext.esbridge.explain must be true or false"),
    ({"query": {"match": {"t": "x"}}, "ext": {"esbridge": {"scorer": "nope"}}}, {}, "ext.esbridge.scorer: unknown"),
    ([], {}, "the search body must be a JSON object"),
])
@pytest.mark.parametrize("mode", ["rescore", "search"])
def test_what_esbridge_is_asked_wrongly_is_refused(body: Any, params: dict[str, str], message: str, mode: str) -> None:
    with pytest.raises(_Refused) as err:
        read_search("docs", IndexConfig(mode=mode), body, params)
    assert err.value.status == 400 and message in err.value.reason


@pytest.mark.parametrize("query,text", [
    ({"match": {"title": "heart risk"}}, "heart risk"),
    ({"match": {"text": {"query": "heart risk", "operator": "and"}}}, "heart risk"),
    ({"bool": {"must": [{"match": {"a": "heart"}}, {"match": {"b": "heart"}}], "should": [{"term": {"c": 1}}],
               "minimum_should_match": 1, "filter": [{"match": {"d": "filtered"}}]}}, "heart"),
    ({"bool": {"should": [{"multi_match": {"query": "heart", "fields": ["a"]}}, {"match_phrase": {"b": "attack"}}]}},
     "heart attack"),
    ({"dis_max": {"queries": [{"query_string": {"query": "title:(heart AND risk) OR \"blood\""}}]}},
     "heart risk blood"),
    ({"function_score": {"query": {"simple_query_string": {"query": "heart + -risk*"}}}}, "heart risk"),
    ({"match": {"year": 1999}}, "1999"),
    ({"term": {"text": "x"}}, None),
    ({"match_all": {}}, None),
    ({"bool": {"filter": [{"match": {"t": "x"}}], "must_not": [{"match": {"t": "y"}}]}}, None),
])
def test_the_text_esbridge_scores_by(query: Any, text: str | None) -> None:
    assert scoring_text(query) == text


@pytest.mark.parametrize("body,params,reason", [
    ({"query": {"match": {"t": "x"}}, "sort": ["_id"]}, {}, "sort"),
    ({"query": {"match": {"t": "x"}}, "sort": [{"price": "asc"}, "_score"]}, {}, "sort"),
    ({"query": {"match": {"t": "x"}}, "sort": [{"_score": "asc"}]}, {}, "sort"),
    ({"query": {"match": {"t": "x"}}}, {"sort": "price:asc"}, "sort"),
    ({"query": {"match": {"t": "x"}}, "sort": ["price"], "search_after": [1]}, {}, "search_after"),
    ({"query": {"match": {"t": "x"}}}, {"scroll": "1m"}, "scroll"),
    ({"query": {"match": {"t": "x"}}, "collapse": {"field": "k"}}, {}, "collapse"),
    ({"query": {"match": {"t": "x"}}, "rescore": {"query": {}}}, {}, "rescore"),
    ({"query": {"match": {"t": "x"}}, "pit": {"id": "abc"}}, {}, "pit"),
    ({"query": {"term": {"t": "x"}}}, {}, "no_query_text"),
    ({"aggs": {"a": {"terms": {"field": "k"}}}, "size": 0}, {}, "no_query_text"),
    # the engine's own error says what is wrong with them (its message, which clients and tests match)
    ({"query": {"match": {"t": "x"}}, "size": -1}, {}, "bad_size_or_from"),
    ({"query": {"match": {"t": "x"}}}, {"from": "-5"}, "bad_size_or_from"),
    ({"query": {"match": {"t": "x"}}, "from": "two"}, {}, "bad_size_or_from"),
])
@pytest.mark.parametrize("mode", ["rescore", "search"])
def test_a_search_esbridge_does_not_rerank_is_the_engines(body: Any, params: dict[str, str], reason: str,
                                                          mode: str) -> None:
    got = read_search("docs", IndexConfig(mode=mode), body, params)
    assert isinstance(got, Unreranked) and got.reason == reason and reason in REASONS
    assert got.headers == {"X-Esbridge-Reranked": "false", "X-Esbridge-Reason": reason}


def test_the_engines_body_is_reranked_by_the_rule() -> None:
    body = {"query": {"match": {"t": "x"}}, "aggs": {"a": {}}, "highlight": {}, "sort": ["_score"], "explain": True,
            "_source": {"includes": ["t"]}}
    for config in (IndexConfig(), IndexConfig(mode="search")):  # search mode: what its first stage cannot take
        req = read_search("docs", config, body, {"routing": "r"})
        assert isinstance(req, SearchRequest) and req.text == "x" and req.body == body
        assert req.config.mode == "rescore" and req.engine_explain and req.score_sort and req.params == {"routing": "r"}
    # search mode takes a plain text search itself
    req = read_search("docs", IndexConfig(mode="search"), {"query": {"match": {"t": "x"}}, "_source": ["t"]}, {})
    assert isinstance(req, SearchRequest) and req.config.mode == "search"


def test_metrics_in_prometheus_text_format() -> None:
    metrics = Metrics()
    metrics.observe("reranked", 200, 0.02)
    metrics.observe("reranked", 200, 3.0)
    metrics.observe("passed_through", 404, 0.001)
    text = metrics.render()
    assert 'esbridge_serve_requests_total{handling="reranked",status="200"} 2' in text
    assert 'esbridge_serve_requests_total{handling="passed_through",status="404"} 1' in text
    assert 'esbridge_serve_request_duration_seconds_bucket{handling="reranked",le="0.025"} 1' in text
    assert 'esbridge_serve_request_duration_seconds_bucket{handling="reranked",le="5.0"} 2' in text
    assert 'esbridge_serve_request_duration_seconds_count{handling="reranked"} 2' in text
    assert "# TYPE esbridge_serve_request_duration_seconds histogram" in text and text.endswith("\n")


def test_the_server_holds_no_credentials() -> None:
    options = ConnectionOptions(url="https://localhost:9200", username="elastic", password="s3cret")
    server = Server(options, parse_config({}))
    assert server.options.username is None and server.options.password is None
    with pytest.raises(ConfigurationError, match="without user:password"):
        Server(ConnectionOptions(url="https://elastic:s3cret@localhost:9200"), parse_config({}))
    with pytest.raises(ConfigurationError, match="--max-concurrency must be a whole number >= 1"):
        Server(ConnectionOptions(url="http://localhost:9200"), parse_config({}), max_concurrency=0)


def test_the_command_refuses_credentials_and_names_a_bad_file(capsys: pytest.CaptureFixture[str],
                                                              tmp_path: Path) -> None:
    code, _, err = run(capsys, "serve", "--url", "http://localhost:1", "--api-key", "id:key")
    assert code == 2 and "holds none: leave out --username and --api-key" in err and "id:key" not in err
    path = write(tmp_path, {"indices": {"docs": {"window": -5}}})
    code, _, err = run(capsys, "serve", "--url", "http://localhost:1", "--config", str(path))
    assert code == 2 and f"{path}: indices.docs.window must be a whole number >= 1, got -5" in err


def test_a_cluster_that_cannot_be_reached_stops_the_command(capsys: pytest.CaptureFixture[str],
                                                           tmp_path: Path) -> None:
    path = write(tmp_path, {"indices": {"docs": {}}})
    code, _, err = run(capsys, "serve", "--url", "http://127.0.0.1:1", "--config", str(path), "--max-retries", "0")
    assert code == 3 and "cannot reach the engine at http://127.0.0.1:1" in err
    assert len(err.strip().splitlines()) == 1
