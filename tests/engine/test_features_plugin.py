"""The esbridge-features engine plugin gives the features ``_mtermvectors`` gives.

On engines whose nodes run the plugin (esbridge's local OpenSearch and Elasticsearch 8 nodes),
every scorer ranks the judged queries of the shipped sample identically, with identical scores,
whether the candidates' features are read inside the engine or with ``_mtermvectors`` (the plugin
turned off with ``ESBRIDGE_FEATURES_PLUGIN=off``), on a 1-shard and a 3-shard index, and for a
document written after the first query.  The requests sent show which path ran.  On the other engines the
plugin is not found and the features are read as before.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from esbridge import Reranker
from esbridge.engine.client import Engine
from esbridge.engine.plan import run
from esbridge.errors import ConfigurationError, EngineError
from esbridge.features import analyze_query, fetch_raw
from esbridge.features.entropy import CollectionEntropy
from esbridge.features.plugin import analysing_ext, features_plugin_plan, fetch_with_plugin_plan
from esbridge.features.termvectors import EMPTY_VECTOR, FetchResult
from esbridge.index import create_index, read_layout
from esbridge.ingest import ingest
from esbridge.scoring import available_scorers
from tests.cli import run as run_cli
from tests.data import documents, judged_queries
from tests.engine.recording import Recorder


@pytest.fixture
def plugin_expected(engine: Engine) -> bool:
    has = run(features_plugin_plan(engine), engine)
    # esbridge's local OpenSearch nodes load it, its Elasticsearch 8 node installs it; 7.10 has none
    assert has == (engine.distribution == "opensearch" or engine.info.version[0] >= 8), (
        f"{engine.info.label}: the plugin is {'' if has else 'not '}found")
    return has


def _rank_both(engine: Engine, index: str, scorer: str,
               queries: list[str]) -> tuple[list[Any], list[Any], Recorder, Recorder]:
    out = []
    recorders = []
    for mode in ("auto", "termvectors"):
        rr = Reranker(engine, index, scorer=scorer, window=50, features=mode)
        rr.search(queries[0], size=1)  # what a reranker reads once (the entropy table of bmx scorers)
        with Recorder(engine) as rec:
            out.append([rr.search(q, size=50) for q in queries])
        recorders.append(rec)
    return out[0], out[1], recorders[0], recorders[1]


def _same(a: dict[str, Any], b: dict[str, Any], what: str) -> None:
    ids_a = [h["_id"] for h in a["hits"]["hits"]]
    ids_b = [h["_id"] for h in b["hits"]["hits"]]
    assert ids_a == ids_b, what
    assert np.array_equal([h["_score"] for h in a["hits"]["hits"]], [h["_score"] for h in b["hits"]["hits"]]), what


@pytest.mark.parametrize("shards", [1, 3])
def test_every_scorer_ranks_alike_with_and_without_the_plugin(
        engine: Engine, sample_indices: dict[int, str], shards: int, plugin_expected: bool) -> None:
    index = sample_indices[shards]
    queries = [q["text"] for q in judged_queries()[:12]]
    for scorer in available_scorers():
        with_plugin, without, rec_on, rec_off = _rank_both(engine, index, scorer, queries)
        for q, a, b in zip(queries, with_plugin, without, strict=True):
            _same(a, b, f"{scorer}, {shards} shard(s), {q!r}")
        assert rec_off.vectors, scorer
        # the candidates' features came from the plugin, not from term vectors (BM25F's several
        # fields too: no scorer counts distinct terms over them)
        assert rec_on.vectors != plugin_expected, scorer


@pytest.mark.parametrize("shards", [1, 3])
def test_fetch_through_the_plugin_equals_term_vectors(engine: Engine, sample_indices: dict[int, str],
                                                      shards: int, plugin_expected: bool) -> None:
    """The raw numbers, every channel: tf, lengths, distinct terms, df, N and total lengths; an
    engine without the plugin refuses its extension (which is why esbridge asks first)."""
    index = sample_indices[shards]
    layout = read_layout(engine, index)
    ids = [h["_id"] for h in engine.search(index, {"size": 200, "_source": False})["hits"]["hits"]] + ["absent"]
    if not plugin_expected:
        query = analyze_query(engine, index, layout, judged_queries()[0]["text"], layout.channels)
        with pytest.raises(EngineError, match="SearchExtBuilder|esbridge_features"):
            run(fetch_with_plugin_plan(index, layout, query, ids, fields=[layout.combined], stats_query={},
                                       stat_fields=[layout.combined], shards=shards), engine)
        return
    for q in judged_queries()[:5]:
        query = analyze_query(engine, index, layout, q["text"], layout.channels)
        for fields in ([layout.combined], [layout.fields[0]]):
            stat_fields = list(dict.fromkeys([*fields, layout.combined]))
            old = fetch_raw(engine, index, layout, query, ids, fields=fields)
            new = run(fetch_with_plugin_plan(index, layout, query, ids, fields=fields, stats_query=query,
                                             stat_fields=stat_fields, shards=shards), engine)
            assert new is not None
            assert new.candidates.found == old.candidates.found
            assert new.candidates.found[-1] is False
            for key, m in new.candidates.matrices.items():
                for k, row in enumerate(m.rows.tolist()):
                    vec = old.candidates.vectors[row].get(key, EMPTY_VECTOR)  # no term in the field
                    assert m.length[k] == vec.length and m.distinct[k] == len(vec), key
                    assert m.tf[k].tolist() == [vec.get(t, 0) for t in m.terms], key
            for key, st in new.stats.items():
                ref = old.stats[key]
                assert (st.doc_count, st.sum_ttf) == (ref.doc_count, ref.sum_ttf), key
                assert all(ref.df.get(t, 0) == n for t, n in st.df.items()), key


@pytest.fixture(params=[1, 3], ids=["1 shard", "3 shards"])
def fresh_index(engine: Engine, request: pytest.FixtureRequest) -> Iterator[str]:
    name = "esb-test-plugin-fresh"
    engine.delete_index(name)
    docs = [{"_id": f"d{i}", "title": f"paper {i}", "text": f"gene expression in tumour cells, study {i}"}
            for i in range(30)]
    ingest(engine, name, docs, shards=request.param, progress=False, strict=True)
    yield name
    engine.delete_index(name)


def test_documents_written_after_the_first_query(engine: Engine, fresh_index: str, plugin_expected: bool) -> None:
    """The same query before and after a write and a refresh: scored with the new statistics, as
    ``_mtermvectors`` scores it.  On one shard the first stage's hits bring them, from lookups the
    plugin shares between the searches of one open reader (a new reader after the refresh); on
    three, they are read by id; without the plugin, from the client's cache."""
    query = "tumour gene expression"
    # statistics refetched after any write (by default, at most once per refresh interval)
    rr_on = Reranker(engine, fresh_index, scorer="evolved", window=50, stats_refresh_interval=0)
    before = rr_on.search(query, size=10)
    ingest(engine, fresh_index, [{"_id": "late", "title": "tumour gene expression",
                                  "text": "tumour gene expression tumour gene expression"}],
           progress=False, strict=True)
    engine.refresh(fresh_index)
    on = rr_on.search(query, size=10)
    off = Reranker(engine, fresh_index, scorer="evolved", window=50, features="termvectors").search(query, size=10)
    _same(on, off, "after a write")
    assert on["hits"]["hits"][0]["_id"] == "late"
    assert [h["_score"] for h in on["hits"]["hits"][1:]] != [h["_score"] for h in before["hits"]["hits"][:9]]


def test_counts_beyond_16_bits_come_back_whole(engine: Engine, plugin_expected: bool) -> None:
    """The plugin packs a hit's numbers as 16-bit integers where they all fit, else as 32-bit
    ones: a document of 40,000 words (one of them 33,000 times) reads as with term vectors."""
    if not plugin_expected:
        return  # no plugin on this engine (test_fetch_through_the_plugin_equals_term_vectors checks it refuses)
    name = "esb-test-plugin-long"
    engine.delete_index(name)
    try:
        long_text = "tumour " * 33_000 + " ".join(f"w{i}" for i in range(7_000))
        ingest(engine, name, [{"_id": "long", "title": "tumour", "text": long_text},
                              {"_id": "short", "title": "tumour cells", "text": "tumour growth"}],
               progress=False, strict=True)
        engine.refresh(name)
        layout = read_layout(engine, name)
        query = analyze_query(engine, name, layout, "tumour cells", layout.channels)
        ids = ["long", "short"]
        old = fetch_raw(engine, name, layout, query, ids, fields=[layout.combined])
        new = run(fetch_with_plugin_plan(name, layout, query, ids, fields=[layout.combined], stats_query=query,
                                         stat_fields=[layout.combined], shards=1), engine)
        assert new is not None
        base = new.candidates.matrices[layout.combined]
        assert base.length.max() > 40_000 and base.tf.max() > 33_000
        for key, m in new.candidates.matrices.items():
            for k, row in enumerate(m.rows.tolist()):
                vec = old.candidates.vectors[row].get(key, EMPTY_VECTOR)
                assert m.length[k] == vec.length and m.distinct[k] == len(vec), key
                assert m.tf[k].tolist() == [vec.get(t, 0) for t in m.terms], key
    finally:
        engine.delete_index(name)


def _same_features(got: FetchResult, ref: FetchResult, what: str) -> None:
    """``got`` (vectors or the plugin's matrices) holds the numbers of ``ref`` (stored term vectors)."""
    assert got.candidates.found == ref.candidates.found, what
    for key, m in got.candidates.matrices.items():
        for k, row in enumerate(m.rows.tolist()):
            vec = ref.candidates.vectors[row].get(key, EMPTY_VECTOR)
            assert (m.length[k], m.distinct[k]) == (vec.length, len(vec)), (what, key, ref.candidates.ids[row])
            assert m.tf[k].tolist() == [vec.get(t, 0) for t in m.terms], (what, key)
    for row, (a, b) in enumerate(zip(got.candidates.vectors, ref.candidates.vectors, strict=True)):
        if got.candidates.matrices:
            break
        for key in {*a, *b}:
            va, vb = a.get(key, EMPTY_VECTOR), b.get(key, EMPTY_VECTOR)
            assert (dict(va), va.length) == (dict(vb), vb.length), (what, key, ref.candidates.ids[row])
    for key, st in got.stats.items():
        ref_st = ref.stats[key]
        assert (st.doc_count, st.sum_ttf) == (ref_st.doc_count, ref_st.sum_ttf), (what, key)
        assert all(ref_st.df.get(t, 0) == n for t, n in st.df.items()), (what, key)


def test_an_index_without_term_vectors_reads_as_one_with_them(engine: Engine, plugin_expected: bool) -> None:
    """Where the plugin runs, a new index stores no term vectors: the engine's BM25 scores are
    those of an index that stores them; the plugin reads the same lengths and distinct terms (from
    its similarity's norms), ``_mtermvectors`` the same term frequencies (the text analysed again),
    and BMX's collection entropy is the same.  Without the plugin, such an index is refused."""
    if not plugin_expected:
        with pytest.raises(ConfigurationError,
                           match="needs esbridge's esbridge-features plugin .1.3.0 or later. on every node"):
            create_index(engine, "esb-test-no-term-vectors", term_vectors=False)
        assert not engine.index_exists("esb-test-no-term-vectors")
        return
    docs = [*documents()[:300],
            # nothing left in the base channel of either field (stop words), something in the others
            {"_id": "stop", "title": "The And", "text": "of the"}]
    names = {True: "esb-test-stored-term-vectors", False: "esb-test-no-term-vectors"}
    try:
        for stored, name in names.items():
            engine.delete_index(name)
            ingest(engine, name, docs, shards=2, progress=False, strict=True,
                   term_vectors=None if not stored else True)  # the default where the plugin runs: none
            engine.refresh(name)
        layout, bare = read_layout(engine, names[True]), read_layout(engine, names[False])
        assert (layout.term_vectors, bare.term_vectors) == (True, False)
        assert '"term_vector":' not in json.dumps(engine.request("GET", f"/{names[False]}/_mapping"))
        for q in judged_queries()[:4]:
            for field in (layout.combined, layout.fields[0], f"{layout.combined}.bigram"):
                body = {"query": {"match": {field: q["text"]}}, "size": 30}
                a, b = (engine.search(names[s], body, params={"search_type": "dfs_query_then_fetch"})
                        for s in (True, False))
                assert [(h["_id"], h["_score"]) for h in a["hits"]["hits"]] == \
                    [(h["_id"], h["_score"]) for h in b["hits"]["hits"]], (field, q["text"])
        ids = [d["_id"] for d in docs] + ["absent"]
        for q in judged_queries()[:3]:
            query = analyze_query(engine, names[True], layout, q["text"], layout.channels)
            for fields in ([layout.combined], [layout.fields[0]]):
                stat_fields = list(dict.fromkeys([*fields, layout.combined]))
                ref = fetch_raw(engine, names[True], layout, query, ids, fields=fields)
                again = fetch_raw(engine, names[False], bare, query, ids, fields=fields)
                plugin = run(fetch_with_plugin_plan(names[False], bare, query, ids, fields=fields,
                                                    stats_query=query, stat_fields=stat_fields, shards=2), engine)
                assert plugin is not None
                _same_features(again, ref, f"_mtermvectors, {fields}")
                _same_features(plugin, ref, f"plugin, {fields}")
        stop = fetch_raw(engine, names[True], layout, query, ["stop"], fields=[layout.combined]).candidates.vectors[0]
        assert layout.combined not in stop and f"{layout.combined}.bigram" in stop  # the edge case is there
        for channel in layout.channels:
            tables = [CollectionEntropy(engine, names[s], lay, persist=False).table(channel)
                      for s, lay in ((True, layout), (False, bare))]
            assert tables[0] == tables[1] and tables[0], channel
    finally:
        for name in names.values():
            engine.delete_index(name)


def test_two_clients_with_their_own_homes_rank_alike(engine: Engine, sample_indices: dict[int, str],
                                                     plugin_expected: bool, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """What a client keeps under ``ESBRIDGE_HOME`` (caches) decides no ranking: two homes, one of
    them emptied between its searches, give the same answers."""
    index = sample_indices[3]
    answers = []
    for home in ("a", "b", "b"):
        if (tmp_path / home).exists():
            shutil.rmtree(tmp_path / home)
        monkeypatch.setenv("ESBRIDGE_HOME", str(tmp_path / home))
        for scorer in ("evolved", "bmx"):
            code, out, err = run_cli(capsys, "search", index, judged_queries()[0]["text"], "--scorer", scorer,
                                     "--json", "--url", engine.options.url)
            assert code == 0, err
            hits = json.loads(out)["hits"]["hits"]
            answers.append([(h["_id"], h["_score"]) for h in hits])
    assert answers[0:2] == answers[2:4] == answers[4:6]
    if plugin_expected:  # no candidate's vector was kept on disk (the feature store is empty)
        for db in (tmp_path / "b").glob("features/**/vectors.sqlite"):
            with sqlite3.connect(db) as con:
                assert con.execute("SELECT COUNT(*) FROM vectors").fetchone() == (0,), db


def test_the_plugin_asked_for_where_a_node_lacks_it_is_one_clear_error(engine: Engine, sample_indices: dict[int, str],
                                                                        plugin_expected: bool,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    query = judged_queries()[0]["text"]
    if plugin_expected:  # asked for, it is used; the environment's "off" gives way to the argument
        monkeypatch.setenv("ESBRIDGE_FEATURES_PLUGIN", "off")
        with Recorder(engine) as rec:
            Reranker(engine, sample_indices[1], features="plugin").search(query)
        assert not rec.vectors
    else:
        with pytest.raises(ConfigurationError, match="esbridge plugin build"):
            Reranker(engine, sample_indices[1], features="plugin").search(query)
    with pytest.raises(ConfigurationError, match="features must be one of"):
        Reranker(engine, sample_indices[1], features="inside")


def test_on_one_shard_the_first_stage_is_the_only_request(engine: Engine, sample_indices: dict[int, str],
                                                          plugin_expected: bool) -> None:
    """Where the plugin runs and the index has one shard, a query not seen before is one search:
    the engine's ``match`` query, its hits bringing the plugin's analysis of the text with the
    terms' statistics, and each hit's features; so is a query searched again.  The ranking, the
    scores and the terms equal those of the path that analyses first (``_termvectors``) and then
    searches by terms (taken here with ``dfs``, which on one shard has the same statistics)."""
    index = sample_indices[1]
    queries = [q["text"] for q in judged_queries()[:12]]
    one = Reranker(engine, index, scorer="evolved", window=100)
    one.search("warm up: the layout, the plugin, the shard count", size=1)
    two = Reranker(engine, index, scorer="evolved", window=100, dfs=True)
    two.search("warm up: the layout, the plugin, the shard count", size=1)
    for q in queries:  # the other path: analysed (and so cached) before its search
        run(two._analyze_plan(q), engine)
    with Recorder(engine) as rec_one:
        got = [one.search(q, size=10) for q in queries]
    with Recorder(engine) as rec_again:
        again = [one.search(q, size=10) for q in queries]
    with Recorder(engine) as rec_two:
        ref = [two.search(q, size=10) for q in queries]
    for q, a, b, c in zip(queries, got, ref, again, strict=True):
        _same(a, b, q)
        _same(c, b, q)
        assert a["_esbridge"]["terms"] == b["_esbridge"]["terms"] == c["_esbridge"]["terms"], q
    searches = [p for p in rec_one.paths if p.endswith("/_search")]
    # the index keeps its ids in doc values: the search reads no stored field, and the top hits'
    # sources come with one _mget
    sources = [p for p in rec_one.paths if p.endswith("/_mget")]
    mget = 1
    if plugin_expected:
        assert len(searches) == len(queries) and len(sources) == mget * len(queries) and \
            len(rec_one.paths) == (1 + mget) * len(queries) and \
            not any("_termvectors" in p or "_analyze" in p for p in rec_one.paths), rec_one.paths
        assert one.store.carried >= sum(len(a["hits"]["hits"]) for a in got)
        # searched again: still one search each, no check of the index's state (_stats) beside it
        assert rec_again.paths == rec_one.paths, rec_again.paths
    else:
        assert any("_termvectors" in p or "_analyze" in p for p in rec_one.paths)
    assert not any("_termvectors" in p or "_analyze" in p for p in rec_two.paths if "mtermvectors" not in p)


@pytest.mark.parametrize("shards", [1, 3])
def test_retrieve_ranks_as_search_does(engine: Engine, sample_indices: dict[int, str], shards: int,
                                       plugin_expected: bool) -> None:
    """``Reranker.retrieve`` is ``search`` without the response around it: the same hits in the
    same order with the same scores, the same analysed terms, and the same requests (one search a
    query on one shard where the plugin runs)."""
    index = sample_indices[shards]
    queries = [q["text"] for q in judged_queries()[:8]]
    rr = Reranker(engine, index, scorer="evolved", window=50)
    rr.search("warm up: the layout, the plugin, the shard count", size=1)
    with Recorder(engine) as rec:
        got = [rr.retrieve(q) for q in queries]
    want = [rr.search(q, size=50) for q in queries]
    for q, r, s in zip(queries, got, want, strict=True):
        assert r.ranking.ids == [h["_id"] for h in s["hits"]["hits"]], q
        assert np.array_equal(r.ranking.scores, [h["_score"] for h in s["hits"]["hits"]]), q
        assert {ch: list(qc.terms) for ch, qc in r.query.query.items()} == s["_esbridge"]["terms"], q
        # the hits of the one search that analysed the query carry no version (the caches are bypassed);
        # those of a first stage by known terms do (they key the caches)
        one_search = plugin_expected and shards == 1
        assert all((v is None) == one_search for v in r.versions()), (q, r.versions()[:3])
        assert not any("_esbridge_features" in (h.get("fields") or {}) for h in r.hits), q
    if plugin_expected and shards == 1:
        assert len(rec.paths) == len(queries) and all(p.endswith("/_search") for p in rec.paths), rec.paths
    with pytest.raises(ConfigurationError, match="window must be an integer >= 1"):
        rr.retrieve(queries[0], window=0)


@pytest.mark.parametrize("shards", [1, 3])
def test_your_own_search_rescored_is_one_request_where_the_plugin_can(engine: Engine, sample_indices: dict[int, str],
                                                                      shards: int, plugin_expected: bool) -> None:
    """``search_rescored`` is ``rescore`` of the engine's answer to the same body: the same hits,
    order and scores, the body's aggregations and totals the engine's, the hits beyond the window in
    the engine's order, nothing of the plugin left in the hits; and on one shard where the plugin
    runs, the search is the only request."""
    index = sample_indices[shards]
    queries = [q["text"] for q in judged_queries()[:6]]
    rr = Reranker(engine, index, scorer="evolved", window=20)
    rr.search("warm up: the layout, the plugin, the shard count", size=1)

    def body(q: str) -> dict[str, Any]:
        return {"query": {"match": {"text": {"query": q}}}, "size": 30, "_source": ["title"],
                "aggs": {"n": {"filter": {"match": {"title": "cell"}}}}}

    with Recorder(engine) as rec:
        got = [rr.search_rescored(body(q), q, window=20) for q in queries]
    for q, g in zip(queries, got, strict=True):
        want = rr.rescore(engine.search(index, body(q)), q, window=20)
        _same(g, want, q)
        assert g["hits"]["total"] == want["hits"]["total"] and g["aggregations"] == want["aggregations"], q
        assert all(set(h["_source"]) <= {"title"} and "fields" not in h for h in g["hits"]["hits"]), q
        assert g["_esbridge"]["terms"] == want["_esbridge"]["terms"], q
    if plugin_expected and shards == 1:
        assert rec.paths == [f"/{index}/_search"] * len(queries), rec.paths


def test_your_own_search_rescored_fetches_only_the_page_it_shows(engine: Engine, sample_indices: dict[int, str],
                                                                  plugin_expected: bool) -> None:
    """With ``page``, the candidates' search reads no stored field and a second search brings the
    page's hits: every hit's id and score as without ``page``, the page's hits whole (``_source``
    filtered, highlighted, named queries) as the one search answers them, the others bare; the
    totals and aggregations the engine's; a page beyond the window in the engine's order; a body
    that asks nothing of its hits needs no second search."""
    index = sample_indices[1]
    queries = [q["text"] for q in judged_queries()[:4]]
    rr = Reranker(engine, index, scorer="evolved", window=20)
    rr.search("warm up: the layout, the plugin, the shard count", size=1)

    def body(q: str) -> dict[str, Any]:
        return {"query": {"match": {"text": {"query": q, "_name": "claim"}}}, "size": 40, "_source": ["title"],
                "highlight": {"fields": {"text": {}}}, "aggs": {"n": {"filter": {"match": {"title": "cell"}}}}}

    for q in queries:
        want = rr.search_rescored(body(q), q, window=20)
        for start, size in ((0, 10), (15, 10), (30, 10), (38, 10)):
            with Recorder(engine) as rec:
                got = rr.search_rescored(body(q), q, window=20, page=(start, size))
            what = (q, start, size)
            _same(got, want, str(what))
            assert any("highlight" in h for h in got["hits"]["hits"][start:start + size]), what
            assert got["hits"]["total"] == want["hits"]["total"] and got["aggregations"] == want["aggregations"]
            for i, (g, w) in enumerate(zip(got["hits"]["hits"], want["hits"]["hits"], strict=True)):
                if start <= i < start + size or not plugin_expected:  # without the plugin: one search, as before
                    assert g == w and g["matched_queries"] == ["claim"], (what, i)
                else:
                    assert set(g) <= {"_index", "_id", "_score", "_esbridge", "matched_queries"}, (what, i, sorted(g))
            if plugin_expected:
                searches = [b for _, p, b in rec.calls if p.endswith("/_search")]
                assert len(searches) == len(rec.calls) == 2, rec.paths
                assert searches[0]["stored_fields"] == "_none_" and "highlight" not in searches[0], searches[0]
                assert searches[1]["size"] == min(size, 40 - start), searches[1]
    # what each hit carries asked in the URL: the same; a URI search (q) is one request as before
    plain = {"query": {"match": {"text": queries[0]}}, "size": 30}
    url = {"_source_includes": "title", "version": "true"}
    want = rr.search_rescored(plain, queries[0], window=20, params=url)
    with Recorder(engine) as rec:
        got = rr.search_rescored(plain, queries[0], window=20, params=url, page=(0, 10))
    _same(got, want, "URL parameters")
    assert got["hits"]["hits"][:10] == want["hits"]["hits"][:10]
    assert all(set(h["_source"]) == {"title"} and "_version" in h for h in got["hits"]["hits"][:10])
    if plugin_expected:
        assert len(rec.calls) == 2, rec.paths  # the first without the URL's _source (else the engine refuses it)
    with Recorder(engine) as rec:
        uri = rr.search_rescored({"size": 30}, queries[0], window=20, params={"q": f"text:({queries[0]})"},
                                 page=(0, 10))
    _same(uri, rr.search_rescored({"size": 30}, queries[0], window=20, params={"q": f"text:({queries[0]})"}),
          "q")
    if plugin_expected:
        assert len(rec.calls) == 1, rec.paths
    bare = {"query": {"match": {"text": queries[0]}}, "size": 30, "_source": False}
    with Recorder(engine) as rec:
        got = rr.search_rescored(bare, queries[0], window=20, page=(0, 10))
    _same(got, rr.search_rescored(bare, queries[0], window=20), "no _source")
    if plugin_expected:
        assert len(rec.calls) == 1, rec.paths
    with pytest.raises(ConfigurationError, match=r"page must be \(from, size\)"):
        rr.search_rescored(bare, queries[0], page=(0, -1))


def test_the_hybrid_lexical_and_keyword_strategies_take_the_one_search_path(
        engine: Engine, sample_indices: dict[int, str], plugin_expected: bool) -> None:
    """The hybrid pipeline's lexical strategy ranks through ``retrieve``: on one shard with the
    plugin one search brings its analysis and features, and its list, the keyword strategy's terms
    and list equal those of the path that analyses first (``dfs``, the same statistics on one
    shard); the keyword strategy checks the index's state once."""
    from esbridge.hybrid import HybridSearcher, PipelineParams

    index = sample_indices[1]
    queries = [q["text"] for q in judged_queries()[:6]]
    params = PipelineParams(window=50, w_semantic=0.0, keyword_source="lexical", weighting="fixed")
    one = HybridSearcher(engine, index, params)
    two = HybridSearcher(engine, index, params,
                         reranker=Reranker(engine, index, scorer=params.scorer, window=50, dfs=True))
    for hs in (one, two):
        hs.run("warm up: the layout, the plugin, the shard count")
    with Recorder(engine) as rec:
        got = [one.run(q) for q in queries]
    want = [two.run(q) for q in queries]
    for q, a, b in zip(queries, got, want, strict=True):
        for name in ("lexical", "keyword"):
            assert a.lists[name].ids == b.lists[name].ids, (name, q)
            assert np.array_equal(a.lists[name].scores, b.lists[name].scores), (name, q)
        assert a.expansion == b.expansion and a.ids == b.ids, q
    if plugin_expected:
        assert not any("_termvectors" in p and "mtermvectors" not in p for p in rec.paths), rec.paths
        # per query: the lexical search, one check of the index's state, the feedback documents'
        # term vectors, the expansion terms' statistics, the keyword search
        assert sum(p.endswith("/_stats/docs,indexing") for p in rec.paths) <= len(queries), rec.paths
        assert sum(p.endswith("/_search") for p in rec.paths) == 2 * len(queries), rec.paths
    for hs in (one, two):
        hs.close()


def test_the_analysing_extension_refuses_what_it_cannot_do(engine: Engine, sample_indices: dict[int, str],
                                                            plugin_expected: bool) -> None:
    if not plugin_expected:
        return  # no plugin on this engine
    index = sample_indices[1]
    layout = read_layout(engine, index)
    base = layout.subfield(layout.combined, "base")
    bad = [
        ({"analyze": {"text": "x", "fields": [base]}, "groups": [{"fields": [base], "terms": ["x"]}]}, "not both"),
        ({"analyze": {"text": "x", "fields": [base], "count": ["elsewhere"]}}, "not one of analyze.fields"),
        ({"analyze": {"text": "x", "fields": ["no_such_field"]}}, "not a field of the index"),
        ({"analyze": {"text": "x", "fields": []}}, "at least one field"),
        ({"analyze": {"text": 3, "fields": [base]}}, "analyze.text must be a string"),
        ({"analyze": ["x", [base]]}, "analyze must be an object"),
    ]
    for ext, message in bad:
        with pytest.raises(EngineError, match=message):
            engine.search(index, {"size": 1, "query": {"match_all": {}}, "ext": {"esbridge_features": ext}})


def test_a_plugin_that_predates_analyze_is_used_the_two_request_way(engine: Engine, sample_indices: dict[int, str],
                                                                      plugin_expected: bool,
                                                                      monkeypatch: pytest.MonkeyPatch,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    """A cluster whose plugin refuses ``analyze`` (a version before 1.2.0 answers "has no parameter
    [analyze]") gets one warning saying what to install, and every query is answered as before."""
    if not plugin_expected:
        return  # no plugin on this engine
    import esbridge.rerank.pipeline as pipeline

    def older(layout: Any, text: str, analysed: Any, counted: Any) -> dict[str, Any]:
        ext = analysing_ext(layout, text, analysed, counted)["esbridge_features"]
        return {"esbridge_features": {"analyze_v0": ext["analyze"], "tag": ext["tag"]}}  # a key it does not know

    index = sample_indices[1]
    queries = [q["text"] for q in judged_queries()[:4]]
    ref = [Reranker(engine, index, scorer="evolved", window=50).search(q, size=10) for q in queries]
    monkeypatch.setattr(pipeline, "analysing_ext", older)
    rr = Reranker(engine, index, scorer="evolved", window=50)
    with caplog.at_level("WARNING", logger="esbridge"), Recorder(engine) as rec:
        got = [rr.search(q, size=10) for q in queries]
    for q, a, b in zip(queries, got, ref, strict=True):
        _same(a, b, q)
    warnings = [r for r in caplog.records if "predates 1.2.0" in r.getMessage()]
    assert len(warnings) == 1 and "esbridge plugin build" in warnings[0].getMessage()
    searches = [p for p in rec.paths if p.endswith("/_search")]
    assert len(searches) == len(queries) + 1  # the one refused, then one a query


def _refused(engine: Engine, index: str, ext: Any) -> EngineError:
    """The engine's refusal of a search carrying ``ext`` as its ``esbridge_features``."""
    with pytest.raises(EngineError) as caught:
        engine.search(index, {"size": 1, "query": {"match_all": {}}, "ext": {"esbridge_features": ext}})
    assert caught.value.status == 400, caught.value
    return caught.value


def test_the_extension_must_be_an_object(engine: Engine, sample_indices: dict[int, str],
                                         plugin_expected: bool) -> None:
    """``null``, a list or any other value than an object is refused with a 400 naming the shape
    expected (before, null and a list were taken for a request of nothing)."""
    if not plugin_expected:
        return  # no plugin on this engine
    for ext, got in [(None, "got null"), ([], "got a list"), ([{"groups": []}], "got a list"),
                     ("groups", "got a string"), (1, "got a number"), (True, "got a boolean")]:
        err = _refused(engine, sample_indices[1], ext)
        assert "[esbridge_features] must be an object" in str(err) and '"groups"' in str(err), err
        assert got in str(err), (ext, err)


def test_the_extension_is_refused_beyond_its_limits(engine: Engine, sample_indices: dict[int, str],
                                                    plugin_expected: bool) -> None:
    """Terms, fields and characters to analyse beyond the plugin's limits (node settings
    ``esbridge.features.*``, defaults 100,000 terms, 1,000 fields, 100,000 characters) are each
    refused with a 400 naming the limit and the value given, before any shard works on them (a
    million terms took 5 to 43 s before); at the limits the request is answered."""
    if not plugin_expected:
        return  # no plugin on this engine
    index = sample_indices[1]
    layout = read_layout(engine, index)
    base = layout.subfield(layout.combined, "base")
    terms = [f"t{i}" for i in range(100_001)]
    over = [
        ({"groups": [{"fields": [base], "terms": terms}]},
         ["[esbridge.features.max_terms] of 100000", "asks for 100001 terms"]),
        ({"groups": [{"fields": [base], "terms": terms[:60_000]}], "stats": [{"field": base, "terms": terms[:40_001]}]},
         ["[esbridge.features.max_terms] of 100000", "asks for 100001 terms"]),
        ({"stats": [{"field": base, "terms": ["bone"]}] * 1_001},
         ["[esbridge.features.max_fields] of 1000", "names 1001 fields"]),
        ({"analyze": {"text": "bone " * 20_001, "fields": [base]}},
         ["[esbridge.features.max_analyze_chars] of 100000", "100005 characters"]),
        ({"analyze": {"text": "bone " * 8_000, "fields": [base] * 3}},  # the text's length times its fields
         ["[esbridge.features.max_analyze_chars]", "120000 characters", "a text of 40000 characters in 3 field(s)"]),
    ]
    for ext, parts in over:
        err = _refused(engine, index, ext)
        for part in parts:
            assert part in str(err), (part, err)
    at = [{"groups": [{"fields": [base], "terms": terms[:50_000]}],
           "stats": [{"field": base, "terms": terms[:50_000]}]},
          {"stats": [{"field": base, "terms": ["bone"]}] * 1_000},
          {"analyze": {"text": "bone " * 20_000, "fields": [base]}}]
    for ext in at:
        resp = engine.search(index, {"size": 1, "query": {"match": {base: "bone"}}, "ext": {"esbridge_features": ext}})
        assert "_esbridge_features" in resp["hits"]["hits"][0]["fields"]


def test_a_query_beyond_the_plugins_limits_is_a_clear_error(engine: Engine, sample_indices: dict[int, str],
                                                           plugin_expected: bool) -> None:
    """A query so long that its terms go beyond the plugin's ``esbridge.features.max_terms`` is an
    error naming the limit and what to do: a shorter query, the setting, or ``_mtermvectors``."""
    if not plugin_expected:
        return  # no plugin on this engine
    rng = np.random.default_rng(7)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    words = {"".join(rng.choice(letters, 9)) for _ in range(30_000)}
    rr = Reranker(engine, sample_indices[1], scorer="evolved", window=10)
    with pytest.raises(EngineError) as caught:
        rr.search(" ".join(sorted(words)), size=1)
    message = str(caught.value)
    assert caught.value.status == 400, message
    for part in ("esbridge.features.max_terms", "Shorten the query", "features='termvectors'"):
        assert part in message, message
