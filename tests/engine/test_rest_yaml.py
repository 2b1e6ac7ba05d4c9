"""OpenSearch's own REST API YAML tests of search, run against the node and through ``esbridge
serve`` reranking every index they create (``tests/restyaml.py`` runs them).

The suites of :data:`SUITES` come from the ``rest-api-spec`` jar of OpenSearch 3.1 (downloaded
from Maven Central once, its SHA-1 checked).  Each test runs twice: straight against the node,
and through a server whose configuration names every index the files use (reranked with ``bm25``
in ``rescore`` mode, the rule of docs/serve.md).  Every test that passes on the node must pass
through the server, but those of :data:`INTENDED`: differences by design (esbridge's order and
scores of the hits), each with the check that fails and why.  A test the node itself fails or
skips is reported, not asserted: the node is newer than the spec.  The counts of both runs are in
the failure message, at the end of the run's summary and in docs/serve.md.

The node is shared: the test refuses to start where an index the files create exists already,
and deletes only what the tests created (:class:`tests.restyaml.Runner`).  OpenSearch only: the
tests are OpenSearch's.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from esbridge.engine.client import Engine
from tests.conftest import summary_note
from tests.engine.test_serve import auth_of, running
from tests.restyaml import Counts, Spec, _Loader, run_suites, spec_jar

pytestmark = pytest.mark.opensearch_only

#: The suites run (704 tests; about 45 s for both runs on an otherwise quiet 2-core machine, 70 s
#: on a busy one).
SUITES = ("search", "search.aggregation", "search.highlight", "search.inner_hits", "msearch", "scroll", "suggest")

#: Fewer tests passing on the node (678 on OpenSearch 3.8) means the node or the runner is amiss:
#: the comparison would prove little.
NODE_PASSES_AT_LEAST = 630

#: Tests that pass on the node and fail through the server by design: the check that fails (the
#: start of the failure's message) and why.
INTENDED: dict[str, tuple[str, str]] = {
    "search/190_index_prefix_search.yml [search with index prefixes]": (
        "match hits.max_score:", "the scores of the reranked hits are esbridge's (bm25 of the words of the "
        "query_string `shor*`, none of which is a word of the documents: 0), not the engine's constant 1"),
    "search/190_index_prefix_search.yml [search with uppercase regex]": (
        "match hits.max_score:", "the scores of the reranked hits are esbridge's (bm25 of the word `UPPERCASE` of "
        "the regular expression), not the engine's constant 1"),
    "search/310_match_bool_prefix.yml [multi_match multiple fields partial term]": (
        "match hits.hits.0._id:", "esbridge's order: it scores the query's whole words, and `laz`, the prefix whose "
        "match with `lazy` puts document 4 first on the engine, is no word of any document"),
    "search/310_match_bool_prefix.yml [multi_match multiple fields with boost]": (
        "match hits.hits.0._id:", "esbridge's order: the field boost `my_field2^10` and the fuzziness are the "
        "engine's query, which finds the candidates; esbridge scores the words of both fields alike"),
}


def _index_params(value: Any) -> Iterator[str]:
    """The index names in the values of a test's ``do`` steps: ``index`` parameters, bulk
    actions' ``_index``."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ("index", "_index") and isinstance(item, (str, list)):
                for name in (item if isinstance(item, list) else item.split(",")):
                    yield str(name).strip()
            else:
                yield from _index_params(item)
    elif isinstance(value, list):
        for item in value:
            yield from _index_params(item)


def configured_indices(spec: Spec) -> dict[str, Any]:
    """The server's configuration: every plain index name the suites' files name, reranked by
    ``bm25`` (a plain index's only channel is its text as indexed)."""
    names: set[str] = set()
    for files in spec.tests.values():
        for text in files.values():
            for doc in yaml.load_all(text, Loader=_Loader):
                for steps in (doc or {}).values():
                    names.update(_index_params([s["do"] for s in steps or [] if "do" in s]))
    plain = sorted(n for n in names if n and re.fullmatch(r"[a-z0-9][a-z0-9_.\-]*", n) and n != "_all")
    return {name: {"scorer": "bm25"} for name in plain}


def test_search_suites_pass_through_the_server(engine: Engine) -> None:
    spec = Spec.load(spec_jar(), SUITES)
    node = engine.options.url.rstrip("/")
    indices = configured_indices(spec)
    there = engine.request("GET", "/_cat/indices", params={"h": "index", "format": "json",
                                                           "expand_wildcards": "all"})
    taken = sorted(set(indices) & {row["index"] for row in there})
    assert not taken, (f"indices the YAML tests create exist on the node already: {', '.join(taken)}; "
                       "delete them if an interrupted run left them, else run the tests on another node")
    started = time.perf_counter()
    with running(engine, indices) as url:
        got = run_suites(spec, {"node": node, "server": url}, node, SUITES, auth_of(engine))
    direct, served = got["node"], got["server"]
    counts = (f"node: {Counts.of(direct)}; server: {Counts.of(served)}; both runs took "
              f"{time.perf_counter() - started:.0f} s")
    summary_note(f"REST API YAML tests of search: {counts}")
    passed_direct = {o.key for o in direct if o.status == "passed"}
    assert len(passed_direct) >= NODE_PASSES_AT_LEAST, f"the node itself fails too many tests: {counts}"
    assert [o.key for o in direct] == [o.key for o in served]
    broken = [o for o in served if o.key in passed_direct and o.status != "passed"
              and not (o.key in INTENDED and o.detail.startswith(INTENDED[o.key][0]))]
    passing = {o.key for o in served if o.status == "passed"}
    stale = [key for key in INTENDED if key in passing or key not in passed_direct]
    assert not broken and not stale, (
        f"{counts}\nfailing through the server only:\n" + "\n".join(f"  {o.key}: {o.detail}" for o in broken)
        + "".join(f"\nan intended difference that is none (passing through the server, or not on the node): {k}"
                  for k in stale))
