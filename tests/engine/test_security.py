"""A secured engine (TLS on HTTP, authentication): every way to authenticate and to trust its
certificate works, every wrong one is a one-line error that says what to fix, and no
credential ever shows in an error, a ``repr`` or a log.

Runs on the secured engines only (``elasticsearch8``: Elasticsearch 8.19 with a superuser, an
API key and a CA made by esbridge); an engine without Painless says so in one line.
"""

from __future__ import annotations

import base64
import json
import logging
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from esbridge.engine.client import ConnectionOptions, Engine
from esbridge.errors import EngineError, EngineUnavailableError, UnsupportedEngineError
from esbridge.index import IndexLayout, create_index
from esbridge.nodes import local
from esbridge.rerank import Reranker
from esbridge.rescore_script import EvolvedRescorer
from tests.cli import run
from tests.smallindex import create_small_index, sample_collection

DOCS = {
    "a": {"title": "Insulin therapy", "text": "Insulin lowers glucose in diabetes."},
    "b": {"title": "Cardiac output", "text": "Exercise raises cardiac output."},
    "c": {"title": "Diabetes and the heart", "text": "Diabetes raises cardiac risk; insulin helps."},
}


@pytest.fixture(scope="module")
def api_key(engine: Engine) -> Iterator[tuple[str, str]]:
    """An API key created through the API for these tests: ``(id, key)``; invalidated after."""
    created = engine.request("POST", "/_security/api_key", body={"name": f"esb-test-{uuid.uuid4().hex[:8]}"},
                             context="creating an API key")
    yield created["id"], created["api_key"]
    engine.request("DELETE", "/_security/api_key", body={"ids": [created["id"]]}, context="invalidating it")


@pytest.fixture
def small_index(engine: Engine, index_name: str) -> str:
    return create_small_index(engine, index_name, DOCS)


def _secrets(engine: Engine, *more: str) -> list[str]:
    return [s for s in (engine.options.password, engine.options.api_key, *more) if s]


def _one_line_without(text: str, secrets: list[str]) -> None:
    assert "\n" not in text.strip(), f"not one line: {text!r}"
    for secret in secrets:
        assert secret not in text, "a credential shows in the message"


def _options(engine: Engine, **changes: object) -> ConnectionOptions:
    base: dict[str, object] = {"url": engine.options.url, "username": engine.options.username,
                               "password": engine.options.password, "ca_certs": engine.options.ca_certs,
                               "max_retries": 1}
    base.update(changes)
    return ConnectionOptions(**base)  # type: ignore[arg-type]


@pytest.mark.secured
def test_basic_auth_with_the_ca_file(engine: Engine, small_index: str) -> None:
    assert urlsplit(engine.options.url).scheme == "https"
    assert engine.options.username and engine.options.password and engine.options.ca_certs
    with Engine.connect(_options(engine)) as eng:
        assert eng.info == engine.info
        who = eng.request("GET", "/_security/_authenticate")
        assert who["username"] == engine.options.username and who["authentication_type"] == "realm"
        resp = Reranker(eng, small_index, window=10).search("insulin diabetes", size=3)
        assert {h["_id"] for h in resp["hits"]["hits"]} == {"a", "c"}


@pytest.mark.secured
@pytest.mark.parametrize("form", ["id:key", "base64"])
def test_api_key_in_either_form(engine: Engine, api_key: tuple[str, str], small_index: str, form: str) -> None:
    key_id, key = api_key
    given = f"{key_id}:{key}" if form == "id:key" else base64.b64encode(f"{key_id}:{key}".encode()).decode()
    with Engine.connect(_options(engine, username=None, password=None, api_key=given)) as eng:
        who = eng.request("GET", "/_security/_authenticate")
        assert who["authentication_type"] == "api_key" and who["api_key"]["id"] == key_id
        assert eng.count(small_index) == 3
        assert key not in repr(eng.options) and given not in repr(eng.options)


@pytest.mark.secured
def test_verification_off_needs_no_ca(engine: Engine, small_index: str) -> None:
    with Engine.connect(_options(engine, ca_certs=None, verify_certs=False)) as eng:
        assert eng.count(small_index) == 3


@pytest.mark.secured
def test_a_wrong_password_says_so_in_one_line(engine: Engine, capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    wrong = "not-the-password-" + uuid.uuid4().hex[:6]
    with pytest.raises(EngineError) as info:
        Engine.connect(_options(engine, password=wrong))
    message = str(info.value)
    assert info.value.status == 401 and "did not accept the credentials" in message
    assert "ESBRIDGE_PASSWORD" in message
    _one_line_without(message, _secrets(engine, wrong))
    # the command line: exit code of an engine refusal, one line, no password
    monkeypatch.setenv("ESBRIDGE_PASSWORD", wrong)
    code, out, err = run(capsys, "search", "--url", engine.options.url, "--username", str(engine.options.username),
                         "--max-retries", "0", "any-index", "insulin")
    assert code == 6 and out == ""
    assert err.startswith("esbridge: ") and "did not accept the credentials" in err
    _one_line_without(err, _secrets(engine, wrong))


@pytest.mark.secured
def test_a_wrong_api_key_says_so_in_one_line(engine: Engine, api_key: tuple[str, str]) -> None:
    key_id, _ = api_key
    wrong = f"{key_id}:{'x' * 22}"
    with pytest.raises(EngineError) as info:
        Engine.connect(_options(engine, username=None, password=None, api_key=wrong))
    assert info.value.status == 401 and "ESBRIDGE_API_KEY" in str(info.value)
    _one_line_without(str(info.value), _secrets(engine, wrong, "x" * 22))


@pytest.mark.secured
def test_an_unknown_ca_says_what_to_pass(engine: Engine, capsys: pytest.CaptureFixture[str]) -> None:
    import certifi  # a real CA bundle, none of whose CAs signed the node's certificate

    for opts in (_options(engine, ca_certs=certifi.where()), _options(engine, ca_certs=None)):
        with pytest.raises(EngineUnavailableError) as info:
            Engine.connect(opts)
        message = str(info.value)
        assert "certificate verify failed" in message
        assert "not signed by a CA esbridge trusts" in message and "--ca-certs" in message
        _one_line_without(message, _secrets(engine))
    code, _out, err = run(capsys, "search", "--url", engine.options.url, "--ca-certs", certifi.where(),
                          "any-index", "insulin")
    assert code == 3 and "ESBRIDGE_CA_CERTS" in err
    _one_line_without(err, _secrets(engine))


@pytest.mark.secured
def test_plain_http_against_tls_says_use_https(engine: Engine) -> None:
    plain = urlsplit(engine.options.url)._replace(scheme="http").geturl()
    with pytest.raises(EngineUnavailableError) as info:
        Engine.connect(_options(engine, url=plain, ca_certs=None))
    message = str(info.value)
    assert f"use {engine.options.url}" in message and "serves HTTPS" in message
    _one_line_without(message, _secrets(engine))


@pytest.mark.secured
def test_no_credential_in_reprs_errors_or_logs(engine: Engine, api_key: tuple[str, str], small_index: str,
                                               caplog: pytest.LogCaptureFixture,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    key_id, key = api_key
    secrets = _secrets(engine, key, f"{key_id}:{key}")
    in_url = urlsplit(engine.options.url)._replace(
        netloc=f"{engine.options.username}:{engine.options.password}@{urlsplit(engine.options.url).netloc}").geturl()
    caplog.set_level(logging.DEBUG)
    with Engine.connect(ConnectionOptions(url=in_url, ca_certs=engine.options.ca_certs)) as eng:
        assert eng.count(small_index) == 3  # the URL's user and password authenticate
        texts = [repr(eng.options), eng.options.display_url]
    with Engine.connect(_options(engine, username=None, password=None, api_key=f"{key_id}:{key}")) as eng:
        texts.append(repr(eng.options))
        with pytest.raises(EngineError) as info:
            eng.request("GET", "/no-such-index/_search", context="searching")
        texts.append(str(info.value))
    with pytest.raises(EngineError) as wrong:
        Engine.connect(ConnectionOptions(url=in_url.replace(str(engine.options.password), "wrong-pw-1"),
                                         ca_certs=engine.options.ca_certs, max_retries=0))
    texts.append(str(wrong.value))
    code, out, err = run(capsys, "search", "--url", in_url, "--size", "2", small_index, "insulin")
    assert code == 0 and "a" in out.split()
    texts += [out, err]
    texts += [r.getMessage() for r in caplog.records] + [caplog.text]
    node = local.node_for_url(engine.options.url)
    if node is not None:  # esbridge's own node: its record, not its log or repr, holds them
        texts.append(repr(node))
        texts.append((local.node_dir(node.name) / "console.log").read_text(errors="replace"))
    joined = "\n".join(texts)
    for secret in secrets:
        assert secret not in joined, "a credential shows in a repr, message or log"
    assert "***" in texts[1]


@pytest.mark.secured
def test_the_cli_authenticates_with_an_api_key_and_a_ca(engine: Engine, api_key: tuple[str, str], small_index: str,
                                                        capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    key_id, key = api_key
    for var in ("ESBRIDGE_USERNAME", "ESBRIDGE_PASSWORD"):
        monkeypatch.delenv(var, raising=False)
    code, out, err = run(capsys, "search", "--url", engine.options.url, "--ca-certs", str(engine.options.ca_certs),
                         "--api-key", f"{key_id}:{key}", "--size", "2", small_index, "insulin diabetes")
    assert code == 0, err
    assert {"a", "c"} <= set(out.split())
    monkeypatch.setenv("ESBRIDGE_API_KEY", base64.b64encode(f"{key_id}:{key}".encode()).decode())
    code, out, err = run(capsys, "search", "--url", engine.options.url, "--size", "2", small_index, "insulin")
    assert code == 0, err


@pytest.mark.secured
def test_the_local_nodes_ca_is_used_whatever_credentials_are_given(engine: Engine, api_key: tuple[str, str],
                                                                   small_index: str,
                                                                   capsys: pytest.CaptureFixture[str],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The URL of esbridge's secured local node, no CA given: the node's own CA file is trusted
    whether its recorded credentials or the user's are used."""
    node = local.node_for_url(engine.options.url)
    if node is None:
        pytest.fail("the secured engine under test is not esbridge's local node; this test checks that its "
                    "recorded CA is used")
    key_id, key = api_key
    for var in ("ESBRIDGE_USERNAME", "ESBRIDGE_PASSWORD", "ESBRIDGE_API_KEY", "ESBRIDGE_CA_CERTS", "ESBRIDGE_URL"):
        monkeypatch.delenv(var, raising=False)
    base64_key = base64.b64encode(f"{key_id}:{key}".encode()).decode()
    user_in_url = urlsplit(node.url)._replace(netloc=f"{node.username}:{node.password}@127.0.0.1:{node.port}").geturl()
    plain = ["--url", node.url]
    for extra, env in ((plain, {}),  # the record's user
                       ([*plain, "--api-key", f"{key_id}:{key}"], {}),
                       (plain, {"ESBRIDGE_API_KEY": base64_key}),
                       ([*plain, "--username", str(node.username)], {"ESBRIDGE_PASSWORD": str(node.password)}),
                       (["--url", user_in_url], {})):  # (--url given twice names two nodes)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        code, out, err = run(capsys, "search", small_index, "insulin", *extra, "--no-store",
                             "--size", "2", "--json")
        for name in env:
            monkeypatch.delenv(name)
        assert code == 0, (extra, list(env), err)
        assert {h["_id"] for h in json.loads(out)["hits"]["hits"]} == {"a", "c"}
    # the user's credentials are the ones used: a wrong key is refused, not replaced by the record's user
    code, _, err = run(capsys, "search", small_index, "insulin", "--url", node.url, "--api-key", f"{key_id}:wrong",
                       "--max-retries", "0", "--no-store")
    assert code == 6 and "did not accept the credentials" in err


def _tiny_beir(folder: Path) -> Path:
    """Part of the shipped SciFact sample as a BEIR folder (train and test judgments alike)."""
    sample = sample_collection(3, size=30)
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in sample.docs))
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in sample.queries))
    judged = "".join(f"{q['_id']}\t{d}\t{g}\n" for q in sample.queries for d, g in sample.judged[q["_id"]].items())
    for split in ("train", "test"):
        (folder / "qrels" / f"{split}.tsv").write_text("query-id\tcorpus-id\tscore\n" + judged)
    return folder


@pytest.mark.secured
def test_no_command_writes_a_secret_in_any_spelling(engine: Engine, api_key: tuple[str, str], index_name: str,
                                                    tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Every command that writes files or prints a report, with the credentials given every way
    (options spelled apart or with ``=``, a user and password in the URL, the environment): no
    secret in any file written, on standard output or on standard error; an abbreviated option is
    refused without showing its value; files that record the command are private."""
    from esbridge.ingest import ingest

    key_id, key = api_key
    url, user, password = engine.options.url, str(engine.options.username), str(engine.options.password)
    id_key = f"{key_id}:{key}"
    b64_key = base64.b64encode(id_key.encode()).decode()
    secrets = [password, key, id_key, b64_key]
    parts = urlsplit(url)
    in_url = parts._replace(netloc=f"{user}:{password}@{parts.netloc}").geturl()
    monkeypatch.setenv("ESBRIDGE_HOME", str(tmp_path / "home"))  # every file a command writes is in tmp_path
    monkeypatch.chdir(tmp_path)
    beir = _tiny_beir(tmp_path / "tiny")
    ingest(engine, index_name, [json.loads(line) for line in (beir / "corpus.jsonl").read_text().splitlines()],
           progress=False, strict=True)
    topics, qrels = str(beir / "queries.jsonl"), str(beir / "qrels" / "test.tsv")
    # (name, options, environment, whether the command line holds a secret)
    spellings: list[tuple[str, list[str], dict[str, str], bool]] = [
        ("api-key-apart", ["--url", url, "--api-key", id_key], {}, True),
        ("api-key-equals", ["--url", url, f"--api-key={b64_key}"], {}, True),
        ("url-apart", ["--url", in_url], {}, True),
        ("url-equals", [f"--url={in_url}"], {}, True),
        ("url-env", [], {"ESBRIDGE_URL": in_url}, False),
        ("password-env", ["--url", url, "--username", user], {"ESBRIDGE_PASSWORD": password}, False),
        ("api-key-env", ["--url", url], {"ESBRIDGE_API_KEY": b64_key}, False),
    ]

    def commands(out: Path) -> list[list[str]]:
        return [
            ["eval", "--index", index_name, "--topics", topics, "--qrels", qrels, "--scorers", "bm25", "--no-pipeline",
             "--no-plots", "--output", str(out / "eval"), "--json", str(out / "eval.json"), "--quiet"],
            ["tune", "--dataset", str(beir), "--split", "train", "--scorer", "bm25", "--trials", "2", "--window", "20",
             "--index-prefix", f"{index_name}-tune", "--no-features-cache", "--out", str(out / "tune"),
             "--json", str(out / "tune.json"), "--quiet"],
            ["run", "--index", index_name, "--topics", topics, "--scorer", "bm25", "--window", "20",
             "--output", str(out / "run.trec"), "--quiet"],
            ["features", "export", "--index", index_name, "--topics", topics, "--qrels", qrels, "--scorers", "bm25",
             "--window", "20", "--output", str(out / "features.txt"), "--quiet"],
            ["demo", "--dataset", str(beir), "--index", f"{index_name}-demo", "--lexical", "--queries", "1",
             "--window", "20", "--quiet"],
            ["search", index_name, "bone density", "--size", "2"],
        ]

    private = ["eval/results.md", "eval/results.json", "eval/command.txt", "eval.json", "tune/tune-bm25.md",
               "tune/tune-bm25.json", "tune/tune-bm25-command.txt", "tune.json"]
    try:
        for label, given, env, on_line in spellings:
            for var in ("ESBRIDGE_USERNAME", "ESBRIDGE_PASSWORD", "ESBRIDGE_API_KEY", "ESBRIDGE_URL"):
                monkeypatch.delenv(var, raising=False)
            for var, value in env.items():
                monkeypatch.setenv(var, value)
            out = tmp_path / label
            for argv in commands(out):
                code, stdout, stderr = run(capsys, *argv, *given)
                assert code == 0, (label, argv[0], stderr)
                for secret in secrets:
                    assert secret not in stdout + stderr, f"{argv[0]} ({label}) printed a credential"
            for name in private:
                mode = stat.S_IMODE((out / name).stat().st_mode)
                assert mode == 0o600, f"{label}: {name} has mode {oct(mode)}"
            recorded = (out / "eval" / "command.txt").read_text()
            assert recorded.startswith("esbridge eval --index ") and recorded.count("***") == on_line, recorded
        # abbreviated secret options are not taken, and their values are not shown
        for argv in (["--api", id_key], [f"--api={id_key}"], [f"--api-k={id_key}"]):
            with pytest.raises(SystemExit) as refused:
                run(capsys, "eval", "--index", index_name, "--topics", topics, "--qrels", qrels, "--url", url, *argv)
            stdout, stderr = capsys.readouterr()
            assert refused.value.code == 2 and stdout == "" and "did you mean --api-key?" in stderr
            for secret in secrets:
                assert secret not in stderr
        written = [path for path in tmp_path.rglob("*") if path.is_file()]
        assert len(written) > 40
        for path in written:
            data = path.read_bytes()
            for secret in secrets:
                assert secret.encode() not in data, f"a credential is written in {path.relative_to(tmp_path)}"
    finally:
        for prefix in (f"{index_name}-tune", f"{index_name}-demo"):
            for row in engine.request("GET", f"/_cat/indices/{prefix}*", params={"format": "json"}):
                engine.delete_index(row["index"])


@pytest.mark.secured
def test_the_local_nodes_record_is_private(engine: Engine) -> None:
    node = local.node_for_url(engine.options.url)
    if node is None:
        pytest.fail("the secured engine under test is not esbridge's local node; this test checks its record "
                    "(run with ESBRIDGE_TEST_ENGINES without elasticsearch8, "
                    "or without ESBRIDGE_TEST_URL_ELASTICSEARCH8)")
    record = local.node_dir(node.name)
    for name in ("node.json", "credentials.json", "ca.key"):
        mode = stat.S_IMODE((record / name).stat().st_mode)
        assert mode == 0o600, f"{name} has mode {oct(mode)}"
    assert node.api_key and ":" in node.api_key
    with Engine.connect(ConnectionOptions(url=node.url, api_key=node.api_key, ca_certs=node.ca_certs)) as eng:
        assert eng.request("GET", "/_security/_authenticate")["authentication_type"] == "api_key"
    assert Path(str(node.ca_certs)).read_text().startswith("-----BEGIN CERTIFICATE-----")
    assert node.password not in repr(node) and str(node.api_key) not in repr(node)


@pytest.mark.without_painless
def test_an_engine_without_painless_says_so_in_one_line(engine: Engine, index_name: str) -> None:
    assert not engine.has_painless()
    create_index(engine, index_name, IndexLayout())
    failures = []
    with pytest.raises(UnsupportedEngineError) as info:
        create_index(engine, f"{index_name}-sim", IndexLayout(), similarity=["evolved"])
    failures.append(str(info.value))
    assert not engine.index_exists(f"{index_name}-sim")
    with pytest.raises(UnsupportedEngineError) as info:
        EvolvedRescorer(engine, index_name)
    failures.append(str(info.value))
    for message in failures:
        assert "\n" not in message
        assert f"{engine.info.label} has no Painless" in message and "rerank with esbridge instead" in message
