"""``esbridge serve`` with OpenSearch's Java and Go clients: a shop's search page (a ``match`` on one
field with ``operator: and``, a filter, a terms facet on a keyword field, highlighting, paging)
sent by opensearch-java (its typed API over the Apache HttpClient 5 transport) and by opensearch-go
v4, each with its own defaults and request compression on, gets the engine's answer (total, facet,
highlights) with its top hits in esbridge's order.

The clients' programs are under ``tests/clients/``; each is built once, into a folder of
``$ESBRIDGE_HOME/clients/`` named for the hash of its sources (Maven's local repository and Go's
module and build caches live there too), so a later run neither downloads nor builds anything.
Java 11+ with Maven and Go 1.26+ must be on the PATH: a test whose toolchain is missing fails,
naming what to install."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from esbridge.engine.client import Engine
from esbridge.home import cache_dir
from esbridge.rerank import Reranker
from tests.engine.test_serve import auth_of, client_of, running
from tests.smallindex import sample_collection

CLIENTS = Path(__file__).resolve().parents[1] / "clients"
WINDOW = 20
#: The search, as the clients' programs take it (each builds its own requests from it): one page
#: of ``size`` hits from each of ``froms``, the first two within the window, the last beyond it.
SEARCH = {"field": "text", "text": "cell study", "filter_field": "price", "filter_max": 50, "facet": "category",
          "facet_field": "category.keyword", "froms": [0, 5, WINDOW], "size": 5}


def _body(search: dict[str, Any], start: int) -> dict[str, Any]:
    """The request the clients send for the page of ``search`` from hit ``start``, as JSON."""
    field = search["field"]
    return {"query": {"bool": {"must": {"match": {field: {"query": search["text"], "operator": "and"}}},
                               "filter": [{"range": {search["filter_field"]: {"lte": search["filter_max"]}}}]}},
            "aggs": {search["facet"]: {"terms": {"field": search["facet_field"]}}},
            "highlight": {"fields": {field: {}}}, "from": start, "size": search["size"]}


def _sources_key(folder: Path, *extra: str) -> str:
    """A hash of the files of ``folder`` (not a build's ``target``) and of ``extra``."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and "target" not in p.relative_to(folder).parts):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    for item in extra:
        digest.update(item.encode() + b"\0")
    return digest.hexdigest()[:16]


def _failed(what: str, done: subprocess.CompletedProcess[str]) -> str:
    return f"{what} failed (exit {done.returncode}):\n{(done.stdout + done.stderr)[-4000:]}"


def _publish(tmp: Path, final: Path) -> None:
    """Move the finished build ``tmp`` to ``final`` (another run's finished build there is kept)."""
    try:
        tmp.rename(final)
    except OSError:
        if not final.exists():
            raise
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def java_search_page() -> list[str]:
    """The command running the Java client's program (built with Maven on the first run)."""
    java, mvn = shutil.which("java"), shutil.which("mvn")
    assert java and mvn and shutil.which("javac"), (
        "the Java client test needs a JDK 11+ (java, javac) and Maven (mvn) on the PATH: install them "
        "(Debian: apt-get install openjdk-17-jdk-headless maven)")
    version = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60).stderr.strip()
    home = cache_dir() / "clients"
    build = home / f"java-{_sources_key(CLIENTS / 'java', version)}"
    classpath = build / "target" / "classpath.txt"
    if not (classpath.is_file() and all(Path(p).is_file() for p in classpath.read_text().strip().split(os.pathsep))):
        home.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".java-", dir=home))
        shutil.copytree(CLIENTS / "java", tmp, dirs_exist_ok=True, ignore=shutil.ignore_patterns("target"))
        done = subprocess.run([mvn, "-q", "-B", "-Dstyle.color=never", f"-Dmaven.repo.local={home / 'm2'}",
                               "compile"], cwd=tmp, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
        assert done.returncode == 0, _failed("building the Java client's program (mvn compile)", done)
        shutil.rmtree(build, ignore_errors=True)  # one whose Maven repository lost a jar
        _publish(tmp, build)
    return [java, "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp",
            os.pathsep.join([str(build / "target" / "classes"), classpath.read_text().strip()]),
            "esbridge.clients.SearchPage"]


@pytest.fixture(scope="module")
def go_search_page() -> list[str]:
    """The command running the Go client's program (built with go build on the first run)."""
    go = shutil.which("go")
    assert go, "the Go client test needs Go 1.26 or later (go) on the PATH: install it (https://go.dev/doc/install)"
    home = cache_dir() / "clients"
    env = {**os.environ, "GOPATH": str(home / "go" / "path"), "GOMODCACHE": str(home / "go" / "modcache"),
           "GOCACHE": str(home / "go" / "cache"), "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=readonly -buildvcs=false",
           "CGO_ENABLED": "0"}
    version = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, env=env, timeout=60)
    assert version.returncode == 0, _failed("go env GOVERSION", version)
    binary = home / f"go-{_sources_key(CLIENTS / 'go', version.stdout.strip())}" / "searchpage"
    if not binary.is_file():
        home.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".go-", dir=home))
        done = subprocess.run([go, "build", "-o", str(tmp / "searchpage"), "."], cwd=CLIENTS / "go",
                              capture_output=True, text=True, env=env, timeout=900)
        if done.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
        assert done.returncode == 0, _failed(
            "building the Go client's program (go build; it needs Go 1.26 or later)", done)
        _publish(tmp, binary.parent)
    return [str(binary)]


@pytest.fixture(scope="module")
def shop(engine: Engine) -> Iterator[dict[str, Any]]:
    """A shop's index (300 SciFact abstracts with a category and a price), served by ``esbridge
    serve`` (rescore mode); its search; and, for each page: what the engine answers to it directly,
    esbridge's answer (the engine's top hits reranked by esbridge's Python API) and what
    opensearch-py gets through the server."""
    from esbridge.ingest import ingest

    sample = sample_collection(2, 300)
    docs = [{"_id": d["_id"], "title": d["title"], "text": d["text"], "category": ("a", "b", "c")[i % 3],
             "price": 10 + i % 50} for i, d in enumerate(sample.docs)]
    index = f"esb-test-clients-{os.urandom(5).hex()}"
    try:
        assert ingest(engine, index, docs, progress=False).indexed == len(docs)
        engine.refresh(index)
        search = {**SEARCH, "index": index}
        reranker = Reranker(engine, index, window=WINDOW)
        pages = []
        with running(engine, {index: {"window": WINDOW}}) as url:
            python = client_of(engine, url, http_compress=True)
            for start in search["froms"]:
                body = _body(search, start)
                own = engine.search(index, body)
                # what the server asks the engine for: the window, or down to the page's end if further
                first = engine.search(index, {**body, "from": 0, "size": max(WINDOW, start + search["size"])})
                assert own["hits"]["total"]["value"] > WINDOW  # more matches than the window: reranking has a choice
                want = reranker.rescore(first, search["text"], window=WINDOW)
                pages.append({"own": own, "first": first, "want": want,
                              "python": python.search(index=index, body=body)})
            yield {"url": url, "search": search, "pages": pages}
    finally:
        engine.delete_index(index)


def _run(command: list[str], shop: dict[str, Any], engine: Engine) -> dict[str, Any]:
    done = subprocess.run([*command, shop["url"], json.dumps(shop["search"])], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "ESBRIDGE_TEST_HEADERS": json.dumps(auth_of(engine))})
    assert done.returncode == 0, _failed(f"the client's search ({Path(command[-1]).name})", done)
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def _check_pages(got: dict[str, Any], shop: dict[str, Any]) -> None:
    """``got`` (a client's pages, as its program prints them) are the engine's answers in esbridge's order."""
    search = shop["search"]
    n = len(search["froms"])
    # each request compressed, each answer compressed and reranked
    assert got["request_encodings"] == ["gzip"] * n, got["request_encodings"]
    assert got["response_encodings"] == ["gzip"] * n, got["response_encodings"]
    assert got["reranked"] == ["true"] * n, got["reranked"]
    assert len(got["pages"]) == n
    differs = False
    for start, page, expected in zip(search["froms"], got["pages"], shop["pages"]):
        own, want = expected["own"], expected["want"]["hits"]["hits"][start:start + search["size"]]
        # the engine's total and facet
        assert page["total"] == own["hits"]["total"], start
        assert page["buckets"] == [[b["key"], b["doc_count"]]
                                   for b in own["aggregations"][search["facet"]]["buckets"]], start
        # the hits: esbridge's order of the engine's top hits, as opensearch-py gets them through the server
        ids = [h["id"] for h in page["hits"]]
        assert ids == [h["_id"] for h in want] == [h["_id"] for h in expected["python"]["hits"]["hits"]], start
        assert [h["score"] for h in page["hits"]] == pytest.approx([h["_score"] for h in want], rel=1e-6), start
        if start >= WINDOW:  # beyond the window: the engine's own page
            assert ids == [h["_id"] for h in own["hits"]["hits"]], start
        else:
            differs = differs or ids != [h["_id"] for h in own["hits"]["hits"]]
        # the engine's hits for the page (its top hits), each with the engine's highlight for it
        highlights = {h["_id"]: h["highlight"] for h in expected["first"]["hits"]["hits"]}
        assert set(ids) <= set(highlights), start
        for hit in page["hits"]:
            assert hit["highlight"] == highlights[hit["id"]], (start, hit["id"])
            assert all("<em>" in f for f in hit["highlight"][search["field"]])
    assert differs  # esbridge's order, not the engine's


def test_java_client_gets_the_search_pages_in_esbridges_order(engine: Engine, shop: dict[str, Any],
                                                             java_search_page: list[str]) -> None:
    _check_pages(_run(java_search_page, shop, engine), shop)


def test_go_client_gets_the_search_pages_in_esbridges_order(engine: Engine, shop: dict[str, Any],
                                                           go_search_page: list[str]) -> None:
    _check_pages(_run(go_search_page, shop, engine), shop)
