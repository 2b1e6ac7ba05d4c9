"""The user's own client objects and response objects, against the real engines."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from esbridge.engine.client import ConnectionOptions, Engine, redact_url
from esbridge.errors import ConfigurationError, EngineError, EngineUnavailableError
from esbridge.rerank import Reranker
from tests.smallindex import create_small_index

DOCS = {
    "a": {"title": "Insulin therapy", "text": "Insulin lowers glucose in diabetes."},
    "b": {"title": "Cardiac output", "text": "Exercise raises cardiac output."},
    "c": {"title": "Diabetes and the heart", "text": "Diabetes raises cardiac risk; insulin helps."},
}


def _own_client(engine: Engine):  # type: ignore[no-untyped-def]
    """A client built the way the engine's users build theirs: for Elasticsearch 8, the
    ``elasticsearch`` client with the engine's user and CA; otherwise opensearch-py's (for
    Elasticsearch 7.10, whose open-source build the elasticsearch7 client refuses, it talks to it)."""
    opts = engine.options
    if engine.distribution == "elasticsearch" and engine.info.version[0] >= 8:
        from elasticsearch import Elasticsearch

        return Elasticsearch(opts.url, basic_auth=(str(opts.username), str(opts.password)), ca_certs=opts.ca_certs)
    from opensearchpy import OpenSearch

    auth = {"http_auth": (opts.username, opts.password)} if opts.username else {}
    return OpenSearch(hosts=[opts.url], ca_certs=opts.ca_certs, **auth)


@pytest.fixture
def small_index(engine: Engine, index_name: str) -> str:
    return create_small_index(engine, index_name, DOCS)


def test_engine_from_the_users_client(engine: Engine, small_index: str) -> None:
    client = _own_client(engine)
    own = Engine.connect(client)
    assert own.info == engine.info
    assert urlsplit(own.options.url).port == urlsplit(engine.options.url).port
    with_ours = Reranker(engine, small_index, window=10).search("insulin diabetes", size=3)
    with_theirs = Reranker(own, small_index, window=10).search("insulin diabetes", size=3)
    assert [(h["_id"], h["_score"]) for h in with_theirs["hits"]["hits"]] == \
           [(h["_id"], h["_score"]) for h in with_ours["hits"]["hits"]]
    own.close()
    # esbridge left the user's client open
    if hasattr(client, "perform_request"):  # elasticsearch 8/9: the REST compatibility headers of the server
        compat = {f: f"application/vnd.elasticsearch+json; compatible-with={engine.info.version[0]}"
                  for f in ("accept", "content-type")}
        count = client.perform_request("POST", f"/{small_index}/_count", headers=compat, body={}).body["count"]
    else:
        count = client.count(index=small_index)["count"]
    assert count == len(DOCS)
    client.close()


def test_rescore_takes_the_clients_response_objects(engine: Engine, small_index: str) -> None:
    from elastic_transport import ApiResponseMeta, HttpHeaders, NodeConfig, ObjectApiResponse

    body = engine.search(small_index, {"query": {"match": {"text": "insulin"}}, "seq_no_primary_term": True})
    meta = ApiResponseMeta(status=200, http_version="1.1", headers=HttpHeaders(), duration=0.0,
                           node=NodeConfig("http", "localhost", 9200))
    as_object = ObjectApiResponse(body=body, meta=meta)  # what elasticsearch 8/9's search() returns
    rr = Reranker(engine, small_index, window=10)
    assert rr.rescore(as_object, "insulin")["hits"]["hits"] == rr.rescore(body, "insulin")["hits"]["hits"]
    with pytest.raises(ConfigurationError, match="is a list, not a search response"):
        rr.rescore([], "insulin")  # type: ignore[arg-type]


def test_unusable_clients_are_refused_clearly() -> None:  # no engine needed: nothing is sent
    with pytest.raises(ConfigurationError, match="cannot use a builtins.dict as an engine client"):
        Engine.connect({"hosts": ["http://localhost:9200"]})
    from elasticsearch import Elasticsearch

    with pytest.raises(ConfigurationError, match="Elasticsearch"):
        Engine.connect(Elasticsearch)  # the class, not a client


def test_a_password_in_the_url_never_shows(engine: Engine) -> None:
    port = urlsplit(engine.options.url).port
    dead = f"http://admin:s3cret-pw@127.0.0.1:{port + 7919 if port and port < 50000 else 1}"
    opts = ConnectionOptions(url=dead, max_retries=0)
    assert "s3cret-pw" not in repr(opts) and redact_url(dead) in repr(opts)
    with pytest.raises(EngineUnavailableError) as info:
        Engine.connect(opts)
    assert "s3cret-pw" not in str(info.value) and "admin:***@" in str(info.value)


def test_a_client_that_refuses_the_server_says_what_to_do(engine: Engine) -> None:
    from elasticsearch7 import Elasticsearch

    opts = engine.options
    auth = {"http_auth": (opts.username, opts.password)} if opts.username else {}
    client = Elasticsearch([opts.url], ca_certs=opts.ca_certs, **auth)
    try:
        serves_root = bool(engine.request("GET", "/"))
    except EngineError:
        serves_root = False  # Elasticsearch's minimal distribution (the elasticsearch8 node)
    if engine.distribution == "opensearch" or engine.info.version < (7, 14, 0) or not serves_root:
        with pytest.raises(ConfigurationError, match="pass the URL instead"):
            Engine.connect(client)
    else:
        assert Engine.connect(client).info == engine.info
    client.close()
