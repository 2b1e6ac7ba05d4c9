"""The runner of the engines' REST API YAML tests (``tests/restyaml.py``) against a fake node:
what it sends for a ``do``, and that a check that does not hold fails its test."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import yaml

from tests.restyaml import Api, Spec, _Loader, _same, _skipped_by_version, _version, run_suites

FILE = """
setup:
  - do:
      indices.create: {index: yt_docs}
---
"passes":
  - do:
      search: {index: yt_docs, body: {query: {match: {title: fox}}}, size: 2}
  - match: {hits.hits.0._id: "1"}
  - match: {hits.hits.0._source.when: 2020-01-01}
  - length: {hits.hits: "2"}
  - set: {hits.hits.1._id: second}
  - match: {hits.hits.1._id: $second}
  - is_false: hits.missing
  - gt: {hits.total.value: 1}
  - match: {hits.hits.0._source.title: "/^brown \\\\s+ fox$/"}
---
"fails":
  - do:
      search: {index: yt_docs, body: {query: {match_all: {}}}}
  - match: {hits.hits.0._id: "2"}
---
"catches":
  - do:
      catch: /no.such.index/
      search: {index: yt_missing}
---
"skipped":
  - skip: {features: no_such_feature}
  - do: {search: {index: yt_docs}}
---
"of every index":
  - do:
      search: {body: {query: {match_all: {}}}}
  - match: {hits.total.value: 2}
"""

HITS = {"hits": {"total": {"value": 2, "relation": "eq"}, "hits": [
    {"_id": "1", "_source": {"title": "brown fox", "when": "2020-01-01"}}, {"_id": "2", "_source": {}}]}}


@pytest.fixture
def node() -> Iterator[tuple[str, list[tuple[str, str, Any]]]]:
    """A fake node: its URL and the requests it got (method, path, body)."""
    seen: list[tuple[str, str, Any]] = []
    indices: set[str] = set()

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            seen.append((self.command, self.path, body))
            status, out = 200, HITS
            if self.path == "/":
                out = {"version": {"number": "3.8.0"}}
            elif self.path.startswith("/_cat/indices"):
                out = [{"index": i} for i in sorted(indices)]
            elif self.command == "PUT":
                indices.add(self.path.strip("/"))
                out = {"acknowledged": True}
            elif self.command == "DELETE":
                indices.discard(self.path.split("?")[0].strip("/"))
                out = {"acknowledged": True}
            elif "yt_missing" in self.path:
                status, out = 404, {"error": {"type": "index_not_found_exception", "reason": "no such index"}}
            data = json.dumps(out).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_DELETE = _answer

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", seen
    server.shutdown()
    server.server_close()


def test_a_file_runs_and_its_checks_hold_or_fail(node: tuple[str, list[tuple[str, str, Any]]]) -> None:
    url, seen = node
    apis = {"search": Api((("/_search", ("GET", "POST")), ("/{index}/_search", ("GET", "POST"))), False),
            "indices.create": Api((("/{index}", ("PUT",)),), False)}
    spec = Spec(apis, {"suite": {"t.yml": FILE}})
    got = run_suites(spec, {"node": url}, url, ("suite",))["node"]
    status = {o.test: o.status for o in got}
    assert status == {"passes": "passed", "fails": "failed", "catches": "passed", "skipped": "skipped",
                      "of every index": "passed"}, got
    assert "match hits.hits.0._id: expected 2" in next(o.detail for o in got if o.test == "fails")
    searches = [(path, body) for method, path, body in seen if "_search" in path]
    assert ("/yt_docs/_search?size=2", {"query": {"match": {"title": "fox"}}}) in searches
    assert searches[-1][0] == "/yt_docs/_search"  # every index: the ones the test created
    # every index the tests created was deleted, once per run of the setup
    assert sum(1 for method, path, _ in seen if method == "DELETE") == sum(
        1 for method, _, _ in seen if method == "PUT")


def test_yaml_is_read_as_the_engines_runners_read_it() -> None:
    doc = yaml.load("{a: 2020-01-01, b: yes, c: 1e3, d: 1.5, e: true, f: 12, g: on}", Loader=_Loader)
    assert doc == {"a": "2020-01-01", "b": "yes", "c": 1000.0, "d": 1.5, "e": True, "f": 12, "g": "on"}


def test_versions_and_values() -> None:
    node = _version("3.8.0")
    assert not _skipped_by_version(" - 7.99.99", node)  # Elasticsearch's: before OpenSearch 1.0
    assert _skipped_by_version("3.0.0 - ", node) and _skipped_by_version("all", node)
    assert not _skipped_by_version(" - 3.7.99", node) and _skipped_by_version("2.0.0 - 3.8.0", node)
    assert _same(1, 1.0) and not _same(1, True) and not _same(72057594037927936, 72057594037927937)
    assert _same({"a": [1, "/x+ y/"]}, {"a": [1, "xxy"]}) and not _same({"a": 1}, {"a": 1, "b": 2})
