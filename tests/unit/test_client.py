"""The engine client's retry and error paths, on a scripted transport (no engine)."""

from __future__ import annotations

from typing import Any

import pytest

from esbridge.engine.client import (
    ConnectionOptions,
    Engine,
    EngineInfo,
    _HttpError,
    _Transport,
    _Unreachable,
    parse_info,
)
from esbridge.errors import (
    ConfigurationError,
    EngineError,
    EngineUnavailableError,
    IndexNotFoundError,
    UnsupportedEngineError,
)


class ScriptedTransport(_Transport):
    """Answers each call with the next scripted outcome (an exception or a body)."""

    def __init__(self, outcomes: list[Any]) -> None:
        self.outcomes = list(outcomes)
        self.calls: list[tuple[str, str]] = []

    def perform(self, method: str, path: str, params: Any, body: Any, headers: Any) -> Any:
        self.calls.append((method, path))
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def close(self) -> None:
        pass


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
    engine, _, _ = make([_HttpError(404, {"error": {"type": "index_not_found_exception", "reason": "no such index [x]"}})])
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


def test_reports_never_carry_secrets() -> None:
    from esbridge.cli_eval import redact_argv
    from esbridge.engine.client import redact_url

    argv = ["eval", "--api-key", "id:SECRETKEY", "--url", "https://u:pw123@h:9200/x", "--api-key=id:K2",
            "--dataset", "scifact"]
    shown = " ".join(redact_argv(argv))
    assert "SECRETKEY" not in shown and "pw123" not in shown and "K2" not in shown
    assert shown == "eval --api-key *** --url https://u:***@h:9200/x --api-key=*** --dataset scifact"
    assert redact_url("http://h:9200") == "http://h:9200"
