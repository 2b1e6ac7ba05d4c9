"""Several nodes' URLs: how they are given (repeated ``--url``, ``ESBRIDGE_URL`` separated by
commas, a list in the API), how a bad one is reported, how they are shown, what the client
libraries are given, and the retry loop once the cluster is known not to answer (no engine)."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

import pytest

from esbridge.cli.main import build_parser
from esbridge.engine.client import ConnectionOptions
from esbridge.engine.connection import redact_url, split_urls
from esbridge.engine.transports import _Unreachable
from esbridge.errors import ConfigurationError, EngineUnavailableError
from esbridge.nodes.provision import provision
from tests.cli import run
from tests.unit.test_plan import async_engine, sync_engine

A, B, C = "http://node-a.example:9200", "http://node-b.example:9200", "http://node-c.example:9200"


@pytest.fixture
def no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("ESBRIDGE_URL", "ESBRIDGE_USERNAME", "ESBRIDGE_PASSWORD", "ESBRIDGE_API_KEY", "ESBRIDGE_CA_CERTS",
                "ESBRIDGE_VERIFY_CERTS", "ESBRIDGE_SNIFF"):
        monkeypatch.delenv(var, raising=False)


def test_a_list_in_the_api_and_one_url_as_before() -> None:
    one = ConnectionOptions(A)
    assert (one.url, one.urls, one.display_url) == (A, (A,), A)
    several = ConnectionOptions(urls=[A, B, C, A])  # a node given twice is one node
    assert (several.url, several.urls) == (A, (A, B, C))
    assert ConnectionOptions(url=f"{A}, {B},{C}").urls == (A, B, C)
    assert ConnectionOptions(urls=f"{A},{B}").urls == (A, B)
    assert ConnectionOptions(url=A, urls=[A, B]).urls == (A, B)
    with pytest.raises(ConfigurationError, match="is not the first of urls"):
        ConnectionOptions(url=C, urls=[A, B])
    with pytest.raises(ConfigurationError, match=r"give several as urls=\[\.\.\.\]"):
        ConnectionOptions(url=[A, B])  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="no engine URL"):
        ConnectionOptions(urls=[" ", ""])
    with pytest.raises(ConfigurationError, match="URLs of one scheme"):
        ConnectionOptions(urls=[A, "https://node-b.example:9200"], sniff=True)


def test_invalid_entries_are_named_and_their_passwords_hidden(no_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigurationError) as info:
        ConnectionOptions(urls=[A, "node-b.example:9200", C])
    assert str(info.value) == ("engine URL 2 of 3 'node-b.example:9200' is not an http(s) URL such as "
                               "http://localhost:9200")
    with pytest.raises(ConfigurationError) as info:
        ConnectionOptions(url=f"{A},ftp://admin:s3cret@node-b.example")
    assert "engine URL 2 of 2 'ftp://admin:***@node-b.example'" in str(info.value)
    assert "s3cret" not in str(info.value)
    for bad in ("http://node-a.example:92x0", "http://[::1", "http://a b:9200"):
        with pytest.raises(ConfigurationError, match="engine URL"):
            ConnectionOptions(urls=[A, bad])
    monkeypatch.setenv("ESBRIDGE_URL", f"{A},localhost:9201")
    with pytest.raises(ConfigurationError) as info:
        ConnectionOptions.from_env()
    assert str(info.value).startswith("ESBRIDGE_URL entry 2 of 2 'localhost:9201' is not an http(s) URL")


def test_esbridge_url_separated_by_commas(no_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ESBRIDGE_URL", f"{A}, {B},{C},")
    assert ConnectionOptions.from_env().urls == (A, B, C)
    assert provision("opensearch").options().urls == (A, B, C)
    assert ConnectionOptions.from_env(url=[B]).urls == (B,)  # --url wins over ESBRIDGE_URL
    assert not ConnectionOptions.from_env().sniff
    monkeypatch.setenv("ESBRIDGE_SNIFF", "true")
    assert ConnectionOptions.from_env().sniff


def test_a_comma_in_a_password_does_not_cut_the_url_and_every_password_is_hidden() -> None:
    text = "https://u:pa,ss@node-a.example:9200, https://v:w0rd@node-b.example:9200,http://node-c.example:9200"
    assert split_urls(text) == ("https://u:pa,ss@node-a.example:9200", "https://v:w0rd@node-b.example:9200", C)
    shown = redact_url(text)
    assert shown == "https://u:***@node-a.example:9200,https://v:***@node-b.example:9200,http://node-c.example:9200"
    opts = ConnectionOptions(urls=split_urls(text))
    assert opts.display_url == shown and "w0rd" not in repr(opts) and "pa,ss" not in repr(opts)


def _url_options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """Each command's ``--url`` option (subcommands' commands named ``a b``)."""
    found: dict[str, argparse.Action] = {}
    for action in parser._actions:
        if "--url" in action.option_strings:
            found[parser.prog] = action
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found.update(_url_options(sub))
    return found


def test_every_command_takes_url_repeated(no_env: None, capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    commands = _url_options(build_parser())
    assert len(commands) >= 9 and all(isinstance(a, argparse._AppendAction) for a in commands.values()), commands
    from esbridge.engine.client import Engine

    seen: list[ConnectionOptions] = []

    def connect(options: ConnectionOptions) -> Any:
        seen.append(options)
        raise EngineUnavailableError("stopped here")

    monkeypatch.setattr(Engine, "connect", connect)
    monkeypatch.setenv("ESBRIDGE_PASSWORD", "pw")
    code, _, err = run(capsys, "search", "idx", "q", "--url", A, "--url", f"{B},{C}", "--sniff", "--username", "u")
    assert code == 3 and "stopped here" in err
    assert seen[-1].urls == (A, B, C) and seen[-1].sniff and seen[-1].username == "u"
    monkeypatch.delenv("ESBRIDGE_PASSWORD")
    monkeypatch.setenv("ESBRIDGE_URL", f"{B},{C}")
    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"_id": "1", "title": "t", "text": "x"}\n')
    code, _, err = run(capsys, "index", "--input", str(docs), "--index", "i")
    assert code == 3, err
    assert list(seen[-1].urls) == [B, C] and not seen[-1].sniff
    code, _, err = run(capsys, "search", "idx", "q", "--url", A, "--url", "node-b.example:9200")
    assert code == 2 and "engine URL 2 of 2 'node-b.example:9200' is not an http(s) URL" in err


def test_the_clients_get_every_node_and_fail_over_without_retrying_statuses() -> None:
    from esbridge.engine.async_client import (
        _AsyncElasticsearch7Transport,
        _AsyncElasticsearchTransport,
        _AsyncOpenSearchTransport,
    )
    from esbridge.engine.transports import _Elasticsearch7Transport, _ElasticsearchTransport, _OpenSearchTransport

    opts = ConnectionOptions(urls=[A, B, C], username="u", password="p")
    for legacy in (_OpenSearchTransport(opts), _Elasticsearch7Transport(opts)):
        transport = legacy.client.transport
        pool = transport.connection_pool
        assert sorted(c.host for c in pool.connections) == [A, B, C]
        assert all(c.headers.get("authorization", "").startswith("Basic ") for c in pool.connections)
        assert (transport.max_retries, tuple(transport.retry_on_status), transport.retry_on_timeout) == (2, (), False)
        legacy.close()
    es = _ElasticsearchTransport(opts, 8).client  # the elasticsearch client passes its retries with each request
    assert sorted(n.base_url for n in es.transport.node_pool.all()) == [A, B, C]
    assert (es._max_retries, tuple(es._retry_on_status), es._retry_on_timeout) == (2, (), False)
    single = _OpenSearchTransport(ConnectionOptions(A)).client.transport
    assert single.max_retries == 0  # one node: nothing to fail over to; esbridge retries with back-off

    async def async_clients() -> list[Any]:
        clients = [_AsyncOpenSearchTransport(opts), _AsyncElasticsearch7Transport(opts),
                   _AsyncElasticsearchTransport(opts, 8)]
        try:
            return [(len(t.client.transport.hosts), t.client.transport.max_retries) for t in clients[:2]] + [
                (len(clients[2].client.transport.node_pool.all()), clients[2].client._max_retries)]
        finally:
            for t in clients:
                await t.close()

    assert asyncio.run(async_clients()) == [(3, 2)] * 3


def test_a_cluster_that_did_not_answer_is_not_waited_for_again() -> None:
    """Once a request spent its retries on connection errors, the next connection error is not
    retried (the client has already tried each node): it fails at once, until an answer comes."""
    refused = _Unreachable("[Errno 111] Connection refused")
    engine, transport, sleeps = sync_engine([refused] * 4 + [refused] + [{"ok": 1}] + [refused, {"ok": 2}],
                                            retries=3)
    with pytest.raises(EngineUnavailableError, match="Connection refused"):
        engine.request("GET", "/")
    assert (len(transport.calls), len(sleeps)) == (4, 3)
    with pytest.raises(EngineUnavailableError, match="Connection refused"):
        engine.request("GET", "/")
    assert (len(transport.calls), len(sleeps)) == (5, 3)  # one try, no back-off
    assert engine.request("GET", "/") == {"ok": 1}  # it answers again: retried as before
    assert engine.request("GET", "/") == {"ok": 2}
    assert (len(transport.calls), len(sleeps)) == (8, 4)

    async def twice() -> tuple[int, int]:
        aengine, atransport, asleeps = async_engine([refused] * 5, retries=3)
        for _ in range(2):
            with pytest.raises(EngineUnavailableError, match="Connection refused"):
                await aengine.request("GET", "/")
        return len(atransport.calls), len(asleeps)

    assert asyncio.run(twice()) == (5, 3)


@pytest.mark.parametrize("key", ["-Xy1abc:s3cr3t", "_ab-c:d", "-a"])
def test_an_api_key_or_user_beginning_with_a_dash_is_taken_as_the_value(key: str) -> None:
    """An API key's id is random base64url and may begin with ``-``: ``--api-key -Xy1...`` is its
    value, not an unknown option (argparse alone refuses it: "expected one argument")."""
    args = build_parser().parse_args(["search", "--api-key", key, "--username", "-me", "--size", "2", "idx", "q"])
    assert args.api_key == key and args.username == "-me" and args.size == 2
    assert args.command_argv[:3] == ["search", "--api-key", key]  # the line as given, for reports


def test_a_missing_api_key_value_is_still_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    """``--api-key`` followed by another option has no value: refused, naming the option."""
    with pytest.raises(SystemExit):
        build_parser().parse_args(["search", "--api-key", "--size", "2", "idx", "q"])
    assert "--api-key" in capsys.readouterr().err
