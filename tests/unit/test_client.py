"""The engine client's retry and error paths, on a scripted transport (no engine)."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from esbridge.engine.client import ConnectionOptions, Engine
from esbridge.engine.connection import EngineInfo, parse_info
from esbridge.engine.transports import _HttpError, _Unreachable
from esbridge.errors import (
    ConfigurationError,
    EngineError,
    EngineUnavailableError,
    IndexNotFoundError,
    UnsupportedEngineError,
)
from tests.unit.scripted import ScriptedTransport

INFO = EngineInfo("opensearch", (3, 8, 0), "3.8.0", "c", "10.5.0")


def make(outcomes: list[Any], retries: int = 3) -> tuple[Engine, ScriptedTransport, list[float]]:
    sleeps: list[float] = []
    transport = ScriptedTransport(outcomes)
    engine = Engine(ConnectionOptions("http://localhost:9200", max_retries=retries), INFO, transport,
                    sleep=sleeps.append)
    return engine, transport, sleeps


def test_retries_429_and_503_then_succeeds() -> None:
    engine, transport, sleeps = make([_HttpError(429, {}), _HttpError(503, {}), {"ok": True}])
    assert engine.request("GET", "/") == {"ok": True}
    assert len(transport.calls) == 3
    assert len(sleeps) == 2 and sleeps[1] > sleeps[0] * 0.7  # backoff grows (with jitter)


def test_connection_errors_retry_then_raise_typed_error() -> None:
    engine, transport, _ = make([_Unreachable("[Errno 111] Connection refused")] * 4)
    with pytest.raises(EngineUnavailableError, match="Connection refused"):
        engine.request("GET", "/", context="probing")
    assert len(transport.calls) == 4


def test_400_is_not_retried_and_carries_engine_type_and_reason() -> None:
    body = {"error": {"type": "mapper_parsing_exception", "reason": "failed to parse field [x]",
                      "root_cause": [{"type": "mapper_parsing_exception", "reason": "failed", "index": "i"}]},
            "status": 400}
    engine, transport, _ = make([_HttpError(400, body)])
    with pytest.raises(EngineError) as info:
        engine.request("PUT", "/i/_doc/1", body={"x": 1})
    assert len(transport.calls) == 1
    err = info.value
    assert (err.status, err.error_type, err.index) == (400, "mapper_parsing_exception", "i")
    assert "failed to parse field [x]" in str(err)


def test_index_not_found_and_script_stack() -> None:
    engine, _, _ = make([_HttpError(404, {"error": {"type": "index_not_found_exception",
                                                    "reason": "no such index [x]"}})])
    with pytest.raises(IndexNotFoundError):
        engine.request("GET", "/x/_search")
    script_err = {"error": {"type": "search_phase_execution_exception", "reason": "all shards failed",
                            "root_cause": [{"type": "script_exception", "reason": "compile error",
                                            "script_stack": ["doc['x'].value +", "               ^---- HERE"]}]}}
    engine, _, _ = make([_HttpError(400, script_err)])
    with pytest.raises(EngineError) as info:
        engine.request("POST", "/x/_search")
    assert info.value.script_stack[1].endswith("HERE")


def test_no_retry_when_disabled() -> None:
    engine, transport, _ = make([_HttpError(503, {})])
    with pytest.raises(EngineError):
        engine.request("GET", "/", retry=False)
    assert len(transport.calls) == 1


def test_parse_info_identifies_distributions() -> None:
    os_info = parse_info({"version": {"distribution": "opensearch", "number": "3.8.0", "lucene_version": "10.5.0"},
                          "cluster_name": "c"})
    assert os_info.distribution == "opensearch" and not os_info.bm25_k1_plus_one
    es = parse_info({"version": {"number": "7.10.2", "lucene_version": "8.7.0"}, "tagline": "You Know, for Search"})
    assert es.distribution == "elasticsearch" and es.version == (7, 10, 2) and es.bm25_k1_plus_one
    with pytest.raises(UnsupportedEngineError):
        parse_info({"version": {"number": "6.8.0"}, "tagline": "You Know, for Search"})
    with pytest.raises(UnsupportedEngineError):
        parse_info({"name": "something else"})


def test_connection_options_validate() -> None:
    with pytest.raises(ConfigurationError, match="http"):
        ConnectionOptions("localhost:9200")
    with pytest.raises(ConfigurationError, match="both username and password"):
        ConnectionOptions("http://h:9200", username="u")
    with pytest.raises(ConfigurationError, match="ca_certs"):
        ConnectionOptions("https://h:9200", ca_certs="/nonexistent/ca.pem")
    opts = ConnectionOptions("https://h:9200", api_key="id:secret")
    assert opts.auth_header()["authorization"].startswith("ApiKey ")
    assert "secret" not in repr(opts)


def test_reports_never_carry_secrets(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from esbridge.cli.eval import command_line, names_credentials
    from esbridge.cli.main import build_parser
    from esbridge.engine.connection import redact_url

    for name in ("ESBRIDGE_URL", "ESBRIDGE_USERNAME", "ESBRIDGE_PASSWORD", "ESBRIDGE_API_KEY"):
        monkeypatch.delenv(name, raising=False)

    def shown(*argv: str) -> str:
        args = build_parser().parse_args(["eval", "--dataset", "scifact", *argv])
        assert names_credentials(args)
        return str(command_line(args))

    assert shown("--api-key", "id:SECRETKEY", "--url", "https://u:pw123@h:9200/x", "--api-key=id:K2") == (
        "esbridge eval --dataset scifact --api-key '***' --url 'https://u:***@h:9200/x' '--api-key=***'")
    # the parsed values are hidden wherever they show, whatever the spelling
    assert shown("--url=https://u:pw123@h:9200") == "esbridge eval --dataset scifact '--url=https://u:***@h:9200'"
    key = base64.b64encode(b"id:SECRETKEY").decode()
    assert "SECRETKEY" not in shown("--api-key", key, "--index-prefix", "SECRETKEY")
    assert key not in shown("--api-key", "id:SECRETKEY", "--index-prefix", key)
    monkeypatch.setenv("ESBRIDGE_PASSWORD", "pw-from-env")
    assert shown("--username", "u", "--index-prefix", "pw-from-env") == (
        "esbridge eval --dataset scifact --username u --index-prefix '***'")
    # abbreviations are not options: an abbreviated secret option is refused, its value not shown
    with pytest.raises(SystemExit):
        build_parser().parse_args(["eval", "--dataset", "scifact", "--api", "id:SECRETKEY"])
    err = capsys.readouterr().err
    assert "SECRETKEY" not in err and "--api (did you mean --api-key?" in err
    # an API key whose random id begins with "-" reads as an option of its own: not shown either
    for argv in (["--api", "-Xy1:SECRETKEY"], ["--api", "-SECRETKEY"], ["--api-k", "--SECRETKEY"]):
        with pytest.raises(SystemExit):
            build_parser().parse_args(["eval", "--dataset", "scifact", *argv])
        err = capsys.readouterr().err
        assert "SECRETKEY" not in err and "(not shown" in err, err
    assert redact_url("http://h:9200") == "http://h:9200"


def test_a_server_without_get_root_is_identified_from_its_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    from esbridge.engine import client as client_module
    from esbridge.engine.connection import parse_nodes_info

    es = parse_nodes_info({"cluster_name": "c", "nodes": {"n1": {"version": "8.19.21", "build_flavor": "default"}}})
    assert (es.distribution, es.version, es.cluster_name) == ("elasticsearch", (8, 19, 21), "c")
    assert es.bm25_k1_plus_one
    assert parse_nodes_info({"nodes": {"n1": {"version": "3.8.0"}}}).distribution == "opensearch"
    with pytest.raises(UnsupportedEngineError, match="neither"):
        parse_nodes_info({"nodes": {}})
    # Engine.connect: GET / answers 405 (Elasticsearch's minimal distribution), GET /_nodes/_local identifies
    probe = ScriptedTransport([
        _HttpError(405, {"error": "Incorrect HTTP method for uri [/] and method [GET]", "status": 405}),
        {"cluster_name": "c", "nodes": {"n1": {"version": "8.19.21", "build_flavor": "default"}}},
    ])
    chosen: list[int] = []
    monkeypatch.setattr(client_module, "_OpenSearchTransport", lambda options: probe)
    monkeypatch.setattr(client_module, "_ElasticsearchTransport",
                        lambda options, major: chosen.append(major) or ScriptedTransport([]))
    engine = Engine.connect(ConnectionOptions("https://h:9200"))
    assert engine.info.label == "Elasticsearch 8.19.21" and chosen == [8]
    assert [c[1].split("?")[0] for c in probe.calls] == ["/", "/_nodes/_local"]


def test_refused_credentials_say_what_to_check() -> None:
    from esbridge.engine.calls import engine_error

    body = {"error": {"type": "security_exception", "reason": "unable to authenticate user [u] for REST request [/]"},
            "status": 401}
    err = engine_error(401, body, context="identifying the engine at https://h:9200")
    assert "did not accept the credentials" in str(err) and "ESBRIDGE_API_KEY" in str(err)
    assert "\n" not in str(err)
    assert "did not accept" not in str(engine_error(404, {"error": {"type": "x", "reason": "y"}}))


@pytest.mark.parametrize("url,raised,expected", [
    ("https://h:9200", "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: unable to get local issuer "
                       "certificate (_ssl.c:1006)", "not signed by a CA esbridge trusts"),
    ("https://h:9200", "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: IP address mismatch",
     "not issued for h"),
    ("https://h:9200", "[SSL: WRONG_VERSION_NUMBER] wrong version number (_ssl.c:1006)", "use http://h:9200"),
    ("http://h:9200", "ConnectionError(('Connection aborted.', RemoteDisconnected('Remote end closed connection')))",
     None),  # not probed before the retries are spent
    ("http://h:9200", "[Errno 111] Connection refused", None),
])
def test_tls_failures_say_what_to_fix(url: str, raised: str, expected: str | None) -> None:
    from esbridge.engine.transports import _tls_problem

    got = _tls_problem(ConnectionOptions(url), _Unreachable(raised), probe=False)
    assert (got is None) if expected is None else (got is not None and expected in got)


def test_the_tls_hint_hides_the_password() -> None:
    from esbridge.engine.transports import _tls_problem

    got = _tls_problem(ConnectionOptions("https://admin:s3cretPW@h:9205"),
                       _Unreachable("[SSL: WRONG_VERSION_NUMBER] wrong version number (_ssl.c:1006)"), probe=False)
    assert got is not None and "use http://admin:***@h:9205" in got and "s3cretPW" not in got


def test_an_untrusted_certificate_is_not_retried() -> None:
    engine, transport, slept = make([_Unreachable("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed")] * 3)
    with pytest.raises(EngineUnavailableError, match="--ca-certs"):
        engine.request("GET", "/")
    assert len(transport.calls) == 1 and slept == []


def _search_answer(failed: int = 0) -> dict[str, Any]:
    shards: dict[str, Any] = {"total": 3, "successful": 3 - failed, "skipped": 0, "failed": failed}
    if failed:
        shards["failures"] = [{"shard": 1, "index": "i", "node": "n2",
                               "reason": {"type": "node_not_connected_exception", "reason": "[n2]\nnot connected"}}]
    return {"_shards": shards, "hits": {"hits": []}}


def test_reads_that_depend_on_the_shard_copy_carry_the_preference() -> None:
    engine, transport, _ = make([_search_answer(), {"count": 1, "_shards": {"failed": 0}}, {"docs": []},
                                 {"docs": []}, _search_answer(), {"acknowledged": True}, {"tokens": []},
                                 _search_answer()])
    engine.search("i", {"query": {"match_all": {}}})
    engine.count("i")
    engine.request("POST", "/i/_mtermvectors", body={"docs": []})
    engine.request("POST", "/i/_mget", body={"ids": []})
    engine.request("POST", "/_search/scroll", body={"scroll_id": "x"})
    engine.request("PUT", "/i/_settings", body={})
    engine.request("POST", "/i/_analyze", body={"text": "x"})
    engine.request("POST", "/i/_search", params={"preference": "mine"}, body={})
    paths = [p for _, p in transport.calls]
    assert all("preference=esbridge" in p for p in paths[:4]), paths
    assert not any("preference" in p for p in paths[4:7]), paths  # a scroll's next page, writes, analysis
    assert paths[7].endswith("?preference=mine")
    other = Engine(ConnectionOptions("http://localhost:9200", preference=None), INFO,
                   ScriptedTransport([_search_answer()]))
    other.search("i", {})
    assert "preference" not in other._transport.calls[0][1]  # type: ignore[attr-defined]
    with pytest.raises(ConfigurationError, match="preference '_local'"):
        ConnectionOptions("http://localhost:9200", preference="_local")


def test_an_answer_with_failed_shards_is_retried_then_refused_in_one_line() -> None:
    engine, transport, sleeps = make([_search_answer(1), _search_answer()])
    assert engine.search("i", {})["_shards"]["failed"] == 0
    assert len(transport.calls) == 2 and len(sleeps) == 1
    engine, transport, _ = make([_search_answer(1)] * 4)
    with pytest.raises(EngineError) as info:
        engine.search("i", {})
    msg = str(info.value)
    assert len(transport.calls) == 4 and "\n" not in msg
    assert msg.startswith("searching 'i': 1 of 3 shards failed "
                          "(shard i/1: node_not_connected_exception: [n2] not connected)")
    assert info.value.error_type == "shard_failure" and info.value.status == 503
    # a multi-search with one partial response, a count, a scroll's next page (never re-sent: it would skip a page)
    engine, transport, _ = make([{"responses": [_search_answer(), _search_answer(1)]}] * 4)
    with pytest.raises(EngineError, match="1 of 3 shards failed"):
        engine.request("POST", "/i/_msearch", body="", ndjson=True)
    engine, transport, _ = make([{"count": 2, "_shards": {"total": 3, "failed": 1}}] * 4)
    with pytest.raises(EngineError, match="1 of 3 shards failed"):
        engine.count("i")
    engine, transport, _ = make([_search_answer(1)])
    with pytest.raises(EngineError, match="1 of 3 shards failed"):
        engine.request("POST", "/_search/scroll", body={})
    assert len(transport.calls) == 1


def test_statistics_are_read_shard_by_shard_with_the_preference_and_never_from_part_of_the_index() -> None:
    """``_mtermvectors`` drops the preference, so with one the statistics take one ``_termvectors``
    a shard; summing the statistics of the shards that answered would score against part of the
    index, so a missing shard is an error."""
    from esbridge.features.termvectors import QueryChannel, ShardRouting, fetch_raw
    from esbridge.index import IndexLayout

    layout = IndexLayout()
    sub = layout.subfield(layout.combined, "base")
    ok = {"found": True, "term_vectors": {sub: {"field_statistics": {"doc_count": 5, "sum_ttf": 50},
                                                "terms": {"glucose": {"doc_freq": 2}}}}}
    query = {"base": QueryChannel(("glucose",), (1,))}

    def fetch(engine: Engine, replicated: bool = True) -> Any:
        routing = ShardRouting(engine, "i")
        routing._routings = ["0", "1", "2"]
        routing.replicated = replicated
        return fetch_raw(engine, "i", layout, query, [], fields=[layout.combined], routing=routing)

    # an index without replicas has one copy of each shard: one _mtermvectors, preference or not
    engine, transport, _ = make([{"docs": [ok, ok, ok]}])
    assert fetch(engine, replicated=False).stats[sub].df == {"glucose": 6}
    assert [p for _, p in transport.calls] == ["/i/_mtermvectors?preference=esbridge"]
    engine, transport, _ = make([ok, ok, ok])
    stats = fetch(engine).stats[sub]
    assert (stats.doc_count, stats.sum_ttf, stats.df) == (15, 150, {"glucose": 6})
    assert sorted(p for _, p in transport.calls) == [f"/i/_termvectors?routing={r}&preference=esbridge"
                                                       for r in "012"]
    unavailable = _HttpError(503, {"error": {"type": "no_shard_available_action_exception", "reason": "No shard"}})
    engine, transport, _ = make([unavailable] * 6, retries=1)
    with pytest.raises(EngineError) as info:
        fetch(engine)
    assert "reading index-wide statistics of 'i': no_shard_available_action_exception" in str(info.value)
    # without a preference: one _mtermvectors, whose per-document error is refused too
    lost = {"_index": "i", "error": {"type": "no_shard_available_action_exception", "reason": "No shard\navailable"}}
    engine, transport, _ = make([{"docs": [ok, lost, ok]}])
    engine.options = ConnectionOptions("http://localhost:9200", preference=None)
    with pytest.raises(EngineError) as info:
        fetch(engine)
    assert [p for _, p in transport.calls] == ["/i/_mtermvectors"]
    assert ("could not be read from every shard (no_shard_available_action_exception: No shard available)"
            in str(info.value))
    assert "\n" not in str(info.value)


def test_every_client_keeps_the_connections_asked_for_open() -> None:
    """Concurrent requests (threads sharing an engine, a pipeline's requests sent together) reuse
    kept-open connections: opensearch-py's synchronous client keeps one unless told, and every
    request beyond it would open and close a TCP connection of its own."""
    import asyncio

    from esbridge.engine.async_client import (
        _AsyncElasticsearch7Transport,
        _AsyncElasticsearchTransport,
        _AsyncOpenSearchTransport,
    )
    from esbridge.engine.transports import _Elasticsearch7Transport, _ElasticsearchTransport, _OpenSearchTransport

    assert ConnectionOptions("http://127.0.0.1:9").connections == 10
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ConfigurationError, match="connections"):
            ConnectionOptions("http://127.0.0.1:9", connections=bad)  # type: ignore[arg-type]
    opts = ConnectionOptions("http://127.0.0.1:9", connections=7)
    for legacy in (_OpenSearchTransport(opts), _Elasticsearch7Transport(opts)):
        assert legacy.client.transport.connection_pool.connections[0].pool.pool.maxsize == 7
    node = _ElasticsearchTransport(opts, 8).client.transport.node_pool.all()[0]
    assert node.config.connections_per_node == 7 and node.pool.pool.maxsize == 7

    async def async_limits() -> list[Any]:
        clients = [_AsyncOpenSearchTransport(opts).client, _AsyncElasticsearch7Transport(opts).client,
                   _AsyncElasticsearchTransport(opts, 8).client]
        try:  # the aiohttp connections are made on first use: read what they will be given
            return [clients[0].transport.pool_maxsize, clients[1].transport.kwargs["maxsize"],
                    clients[2].transport.node_pool.all()[0].config.connections_per_node]
        finally:
            for c in clients:
                await c.close()

    assert asyncio.run(async_limits()) == [7, 7, 7]


def test_reports_name_the_data_folder_by_its_variable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from esbridge.cli.eval import command_line
    from esbridge.cli.main import build_parser

    variable = "ESBRIDGE" + "_DATA"  # spelled in pieces: the tests read no collection named by it
    data = tmp_path / "collections"
    monkeypatch.setenv(variable, str(data) + "/")

    def shown(*argv: str) -> str:
        args = build_parser().parse_args(["eval", *argv])
        return str(command_line(args))

    assert shown("--dataset", str(data / "nfcorpus"), "--split", "test") == (
        f"esbridge eval --dataset ${variable}/nfcorpus --split test")
    assert shown(f"--dataset={data}/sci fact") == f"esbridge eval --dataset=\"${variable}\"'/sci fact'"
    assert str(tmp_path) not in shown("--dataset", str(data))
    # a folder beside it, or no variable set: the path as given
    assert shown("--dataset", f"{data}x/a") == f"esbridge eval --dataset {data}x/a"
    monkeypatch.delenv(variable)
    assert shown("--dataset", str(data / "med")) == f"esbridge eval --dataset {data / 'med'}"
