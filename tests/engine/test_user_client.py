"""The user's own client objects and response objects, against the real engines."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from esbridge.engine.client import ConnectionOptions, Engine
from esbridge.engine.connection import redact_url
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


def test_an_elasticsearch_client_newer_than_the_server_names_the_one_to_install(engine: Engine,
                                                                                small_index: str) -> None:
    """The installed ``elasticsearch`` client (8/9) handed to esbridge: against an older
    Elasticsearch, esbridge's requests work (compatibility headers) and a one-line warning names
    the client whose own calls the server takes; against a server it refuses, one line says what
    to pass instead."""
    import warnings

    import elasticsearch
    from elasticsearch import BadRequestError, Elasticsearch

    version = tuple(elasticsearch.__version__)  # the installed client's
    opts = engine.options
    auth = {"basic_auth": (str(opts.username), str(opts.password))} if opts.username else {}
    client = Elasticsearch(opts.url, ca_certs=opts.ca_certs, **auth)  # type: ignore[arg-type]
    try:
        major = engine.info.version[0]
        if engine.distribution == "opensearch" or major < 8:
            with pytest.raises(ConfigurationError) as err:
                Engine.connect(client)
            assert "\n" not in str(err.value) and "pass the URL instead" in str(err.value)
            assert str(err.value).startswith(f"the given elasticsearch client "
                                             f"{'.'.join(map(str, version))} "
                                             f"refuses {engine.info.label} (")
            return
        newer = version[0] > major
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            own = Engine.connect(client)
        said = [str(w.message) for w in caught if "elasticsearch client" in str(w.message)]
        # esbridge's own requests work through it either way
        assert own.count(small_index) == len(DOCS)
        if newer:
            assert len(said) == 1 and "\n" not in said[0] and f"newer than {engine.info.label}" in said[0]
            assert said[0].endswith(f"pip install 'elasticsearch>={major},<{major + 1}'")
            # what the warning says: the server refuses the client's own calls
            with pytest.raises(BadRequestError, match="Accept version must be"):
                client.count(index=small_index)
        else:
            assert said == [] and client.count(index=small_index)["count"] == len(DOCS)
    finally:
        client.close()
