"""Shared fixtures: real engines for the engine tests.

Engines come from :mod:`esbridge.nodes.provision`: ``ESBRIDGE_TEST_URL_OPENSEARCH`` /
``ESBRIDGE_TEST_URL_ELASTICSEARCH`` / ``ESBRIDGE_TEST_URL_ELASTICSEARCH8`` if set (a secured
one with ``ESBRIDGE_TEST_USERNAME_<ENGINE>``, ``ESBRIDGE_TEST_PASSWORD_<ENGINE>`` and
``ESBRIDGE_TEST_CA_CERTS_<ENGINE>``), else a Docker container where Docker answers, else the
suite's own local node of the distribution (``esbridge-test-<distribution>``, see
:func:`suite_node`), started from Maven Central artifacts when it is not running and stopped at
the end of the session unless ``ESBRIDGE_KEEP_NODES`` is set.  Another running node (a user's,
the demo's) is used only when its URL is given this way; ``ESBRIDGE_URL`` is not read.
``ESBRIDGE_TEST_ENGINES`` (default ``opensearch,elasticsearch,elasticsearch8``) chooses which
engines the suite runs on.  An engine that cannot be had is a test error, never a skip.

Every index a test builds is deleted by its fixture.  Indices built once for the whole session
(:func:`suite_index`, :func:`suite_prefix`) are kept between runs only on the suite's own nodes,
where the next run reuses them (when they still hold the collection); on any other engine they
are named for the session and deleted at its end.

Which tests run on which engine is decided here, by parametrisation (never by a skip):

* tests marked ``painless`` run only on engines with Painless (not ``elasticsearch8``, the
  secured Elasticsearch 8.19 node, whose distribution has no lang-painless module), tests
  marked ``without_painless`` only on engines without it, tests marked ``secured`` only on
  engines with security on (``elasticsearch8``), tests marked ``without_reindex`` only on engines
  without ``_update_by_query`` (``elasticsearch8``);
* on ``elasticsearch8`` only the modules of :data:`ELASTICSEARCH8_MODULES` run, and on
  ``elasticsearch`` (7.10) every module but those of :data:`ELASTICSEARCH7_LEFT_OUT` (the
  suite's time budget; the compatibility table of ``docs/engines.md`` lists them).
* the modules of :data:`OPENSEARCH_CLUSTER_MODULES` start their own three-node OpenSearch
  cluster and run only when ``opensearch`` is under test.

A test on a secured engine finds its credentials in ``ESBRIDGE_USERNAME``,
``ESBRIDGE_PASSWORD`` and ``ESBRIDGE_CA_CERTS``, the variables ``docs/engines.md`` documents, so
command-line calls given only ``--url`` authenticate as a user's would.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from esbridge.engine.client import ConnectionOptions, Engine
from esbridge.nodes import local
from esbridge.nodes.provision import ProvisionedEngine, provision
from tests.data import documents, sample_folder

_ENGINES_GIVEN = os.environ.get("ESBRIDGE_TEST_ENGINES", "opensearch,elasticsearch,elasticsearch8")
ENGINES = [e.strip() for e in _ENGINES_GIVEN.split(",") if e.strip()]

#: What each engine under test reports as its distribution, and its major version.
ENGINE_IDENTITY: dict[str, tuple[str, int | None]] = {
    "opensearch": ("opensearch", None),
    "elasticsearch": ("elasticsearch", 7),
    "elasticsearch8": ("elasticsearch", 8),
}
#: Engines without Painless: tests marked ``painless`` are not parametrised over them, tests
#: marked ``without_painless`` only over them.
WITHOUT_PAINLESS = frozenset({"elasticsearch8"})
#: Engines with security on (TLS, authentication): tests marked ``secured`` run only on them.
SECURED = frozenset({"elasticsearch8"})
#: Engines without ``_update_by_query`` (the minimal Elasticsearch distribution has no reindex
#: module): tests marked ``without_reindex`` run only on them.
WITHOUT_REINDEX = frozenset({"elasticsearch8"})
#: Engines whose vectors are Elasticsearch's ``dense_vector`` (8.12+): tests marked ``dense_vector``
#: run only on them.
DENSE_VECTOR = frozenset({"elasticsearch8"})
#: The test modules that run on ``elasticsearch8`` (every module runs on the others);
#: ``ESBRIDGE_TEST_ELASTICSEARCH8_MODULES`` (module names, or ``all``) replaces the list.
ELASTICSEARCH8_MODULES = frozenset({
    "test_parity", "test_rerank", "test_ingest", "test_user_client", "test_security", "test_async",
    "test_index_safety", "test_serve", "test_serve_hybrid", "test_features_plugin", "test_engine_vectors",
})
_ES8_MODULES_ENV = os.environ.get("ESBRIDGE_TEST_ELASTICSEARCH8_MODULES", "").strip()
if _ES8_MODULES_ENV:
    ELASTICSEARCH8_MODULES = frozenset(m.strip() for m in _ES8_MODULES_ENV.split(",") if m.strip())
#: The test modules that do not run on ``elasticsearch`` (7.10): the command-line workflows
#: (eval, run, tune, demo, export, output formatting), whose engine requests are those the
#: modules that do run there already make, and OpenSearch's own Java and Go clients through
#: ``esbridge serve`` (``test_serve_clients``); they run on OpenSearch.  Leaving them out keeps the
#: suite within its time budget.  ``ESBRIDGE_TEST_ELASTICSEARCH_MODULES=all`` runs every module.
ELASTICSEARCH7_LEFT_OUT = frozenset({
    "test_cli", "test_cli_output", "test_demo", "test_eval_engine", "test_features_export",
    "test_run_and_eval_index", "test_serve_clients", "test_tune_spaces",
})
if os.environ.get("ESBRIDGE_TEST_ELASTICSEARCH_MODULES", "").strip() == "all":
    ELASTICSEARCH7_LEFT_OUT = frozenset()

#: Modules that start their own OpenSearch cluster (no ``engine`` fixture): they run when
#: ``opensearch`` is among the engines under test.
OPENSEARCH_CLUSTER_MODULES = frozenset({"test_cluster"})

#: The suite's own local nodes are named ``esbridge-test-<distribution>``.
TEST_NODE_PREFIX = "esbridge-test-"
#: This session's id, in the names of what it builds on an engine that is not the suite's own.
SESSION = uuid.uuid4().hex[:8]

# The engines under test are given with ESBRIDGE_TEST_URL_*, never taken from a user's ESBRIDGE_URL
# (commands run by the tests would otherwise reach the user's node).
os.environ.pop("ESBRIDGE_URL", None)

_provisioned: dict[str, ProvisionedEngine] = {}
#: The suite's own local nodes that this session uses (stopped at its end).
_own_nodes: list[str] = []
#: URLs of the suite's own nodes among the engines under test.
_own_urls: set[str] = set()
#: Per engine URL: the indices, and the index prefixes, built for this session and deleted at its end.
_session_indices: dict[str, set[str]] = {}
_session_prefixes: dict[str, set[str]] = {}
_skipped: list[str] = []
_summary: list[str] = []


def suite_node(distribution: str) -> str:
    """The name of the suite's own local node of ``distribution``."""
    return f"{TEST_NODE_PREFIX}{distribution}"


def _is_test_node(name: str | None) -> bool:
    return name is not None and name.startswith(TEST_NODE_PREFIX)


def _provision(distribution: str) -> ProvisionedEngine:
    if distribution not in _provisioned:
        key = distribution.upper().replace("-", "_")
        url = os.environ.get(f"ESBRIDGE_TEST_URL_{key}")
        prov = provision(distribution, url=url, progress=False, name=None if url else suite_node(distribution))
        if prov.source == "local" and prov.node is not None:
            _own_nodes.append(prov.node)
        if prov.source == "local" or (prov.source == "url" and _is_test_node(
                getattr(local.node_for_url(prov.url), "name", None))):
            _own_urls.add(prov.url.rstrip("/"))
        given = {name: os.environ.get(f"ESBRIDGE_TEST_{name.upper()}_{key}")
                 for name in ("username", "password", "ca_certs")}
        if url and any(given.values()):
            prov.credentials = {k: v for k, v in given.items() if v}
        _provisioned[distribution] = prov
    return _provisioned[distribution]


def own_engine(engine: Engine) -> bool:
    """Whether ``engine`` is one of the suite's own nodes (``esbridge-test-*``)."""
    return engine.options.url.rstrip("/") in _own_urls


def suite_index(engine: Engine, base: str) -> str:
    """The name of an index built once for the session: ``base`` on the suite's own nodes (kept
    for the next run), elsewhere ``base-<session>``, deleted when the session ends."""
    if own_engine(engine):
        return base
    name = f"{base}-{SESSION}"
    _session_indices.setdefault(engine.options.url.rstrip("/"), set()).add(name)
    return name


def suite_prefix(engine: Engine, base: str) -> str:
    """An index prefix for what commands build under their own names (``--index-prefix``): ``base``
    on the suite's own nodes, elsewhere ``base-<session>``, whose indices are deleted when the
    session ends."""
    if own_engine(engine):
        return base
    prefix = f"{base}-{SESSION}"
    _session_prefixes.setdefault(engine.options.url.rstrip("/"), set()).add(prefix)
    return prefix


def _delete_session_indices(engine: Engine) -> None:
    url = engine.options.url.rstrip("/")
    names = set(_session_indices.pop(url, set()))
    for prefix in _session_prefixes.pop(url, set()):
        listed = engine.request("GET", f"/_cat/indices/{prefix}*", params={"format": "json", "h": "index"})
        names |= {row["index"] for row in listed if row["index"] == prefix or row["index"].startswith(prefix + "-")}
    for name in sorted(names):
        engine.delete_index(name)


def _engine_url(distribution: str) -> str:
    return _provision(distribution).url


def engine_options(distribution: str) -> ConnectionOptions:
    """How the suite connects to the engine ``distribution`` (URL and, if secured, credentials)."""
    prov = _provision(distribution)
    return ConnectionOptions(url=prov.url, **prov.credentials)


def engines_for(item_module: str, markers: set[str]) -> list[str]:
    """The engines a test of ``item_module`` with ``markers`` is parametrised over."""
    out = []
    for name in ENGINES:
        if "painless" in markers and name in WITHOUT_PAINLESS:
            continue
        if "without_painless" in markers and name not in WITHOUT_PAINLESS:
            continue
        if "secured" in markers and name not in SECURED:
            continue
        if "without_reindex" in markers and name not in WITHOUT_REINDEX:
            continue
        if "dense_vector" in markers and name not in DENSE_VECTOR:
            continue
        if "opensearch_only" in markers and name != "opensearch":
            continue
        if (name == "elasticsearch8" and item_module not in ELASTICSEARCH8_MODULES
                and "all" not in ELASTICSEARCH8_MODULES):
            continue
        if name == "elasticsearch" and item_module in ELASTICSEARCH7_LEFT_OUT:
            continue
        out.append(name)
    return out


#: The parameter of a test none of whose engines is under test; such tests are left out.
_NO_ENGINE = "no-engine-under-test"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "engine" not in metafunc.fixturenames:
        return
    markers = {m.name for m in metafunc.definition.iter_markers()}
    module = metafunc.module.__name__.rsplit(".", 1)[-1]
    metafunc.parametrize("engine", engines_for(module, markers) or [_NO_ENGINE], indirect=True, scope="session")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test with no engine to run on (``ESBRIDGE_TEST_ENGINES`` names none of its engines) is
    left out (deselected, as ``-k`` would), not skipped."""
    def engineless(item: pytest.Item) -> bool:
        callspec = getattr(item, "callspec", None)
        module = getattr(item, "module", None)
        if module is not None and module.__name__.rsplit(".", 1)[-1] in OPENSEARCH_CLUSTER_MODULES:
            return "opensearch" not in ENGINES
        return callspec is not None and callspec.params.get("engine") == _NO_ENGINE

    left_out = [item for item in items if engineless(item)]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = [item for item in items if not engineless(item)]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped:
        _skipped.append(report.nodeid)


def summary_note(text: str) -> None:
    """A line for the end of the run's summary (shown with ``-q`` too): what the tests left where."""
    if text not in _summary:
        _summary.append(text)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int,
                            config: pytest.Config) -> None:
    for line in _summary:
        terminalreporter.write_line(line)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    for prov in _provisioned.values():
        prov.release()
    if not os.environ.get("ESBRIDGE_KEEP_NODES"):
        for name in _own_nodes:
            local.stop(name)
    if _skipped and os.environ.get("CI"):
        # In CI a skipped test is a failure: every engine test must have run.
        print(f"\n{len(_skipped)} test(s) were skipped, which CI does not allow: {_skipped[:5]}")
        session.exitstatus = 1


@pytest.fixture(scope="session")
def engine(request: pytest.FixtureRequest) -> Iterator[Engine]:
    """A connected engine, once per distribution under test (parametrised by
    :func:`pytest_generate_tests`)."""
    eng = Engine.connect(engine_options(request.param))
    distribution, major = ENGINE_IDENTITY.get(request.param, (request.param, None))
    assert eng.distribution == distribution, f"expected {request.param}, got {eng.info.label}"
    assert major is None or eng.info.version[0] == major, f"expected {request.param}, got {eng.info.label}"
    yield eng
    _delete_session_indices(eng)
    eng.close()


@pytest.fixture(autouse=True)
def _engine_credentials(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """For a test on a secured engine: its credentials in the documented environment variables."""
    callspec = getattr(request.node, "callspec", None)
    name = callspec.params.get("engine") if callspec is not None else None
    if name is None:
        return
    creds = _provision(name).credentials
    for key in ("username", "password", "ca_certs"):
        if creds.get(key):
            monkeypatch.setenv(f"ESBRIDGE_{key.upper()}", str(creds[key]))


@pytest.fixture(scope="session")
def knn_engine() -> Iterator[Engine]:
    """OpenSearch with its k-NN plugin (``ESBRIDGE_TEST_URL_OPENSEARCH_KNN``, else the suite's own
    ``esbridge-test-opensearch-knn`` local node), for the engine-kept vectors.  Not one of
    ``ENGINES``: the rest of the suite does not run on it twice."""
    url = os.environ.get("ESBRIDGE_TEST_URL_OPENSEARCH_KNN")
    if not url:
        name = suite_node("opensearch-knn")
        url = local.start("opensearch-knn", name=name, progress=False).url
        _own_nodes.append(name)
    eng = Engine.connect(url)
    assert eng.vector_search() == "knn_vector", f"{eng.info.label} at {url} has no k-NN plugin"
    yield eng
    eng.close()


@pytest.fixture
def index_name(engine: Engine) -> Iterator[str]:
    """A fresh index name, deleted after the test."""
    name = f"esb-test-{uuid.uuid4().hex[:10]}"
    yield name
    engine.delete_index(name)


@pytest.fixture(scope="session")
def sample_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped SciFact sample as a BEIR-layout folder (unpacked once per session)."""
    return sample_folder(tmp_path_factory.mktemp("sample"))


@pytest.fixture(scope="session")
def eval_prefix(engine: Engine) -> str:
    """The ``--index-prefix`` of the evaluation indices that ``eval`` and ``tune`` build in the tests
    (see :func:`suite_prefix`)."""
    return suite_prefix(engine, "esb-test-eval")


@pytest.fixture(scope="session")
def sample_indices(engine: Engine) -> dict[int, str]:
    """The shipped SciFact sample indexed with 1 and with 3 shards (see :func:`suite_index`)."""
    from esbridge.index.definitions import index_meta
    from esbridge.ingest import ingest

    docs = documents()
    out = {}
    for shards in (1, 3):
        name = suite_index(engine, f"esb-test-sample-{shards}")
        # kept from an earlier session: indexed again if esbridge now creates it otherwise (ids in doc values)
        if not (engine.index_exists(name) and engine.count(name) == len(docs)
                and index_meta(engine, name).get("id_values")):
            engine.delete_index(name)
            ingest(engine, name, docs, shards=shards, progress=False, strict=True)
        out[shards] = name
    return out


@pytest.fixture
def term_vectors_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Candidates' features read with ``_mtermvectors`` even where the engine runs esbridge's
    plugin: for tests of that path and of the client-side stores it fills."""
    monkeypatch.setenv("ESBRIDGE_FEATURES_PLUGIN", "off")
