"""Your own index: esbridge on an index whose text fields have no esbridge sub-fields.

One index per engine (two shards, so statistics must be summed over them) holds 80 abstracts of
the shipped SciFact sample in four plain text fields: ``title`` (standard analyzer), ``text``
(english), ``stored`` (english, term vectors stored) and ``syn`` (a custom analyzer with
synonyms, which stacks tokens at one position).  esbridge's ``bm25`` on each field equals the
engine's ``_score``; on-the-fly term vectors equal stored ones; ``bmx`` works; ``evolved`` says
which channels are missing and how to add them; ``esbridge index --add-channels`` then makes the
index score exactly as an index esbridge created from the same documents.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from esbridge.engine.calls import ndjson_lines
from esbridge.engine.client import Engine
from esbridge.errors import ConfigurationError
from esbridge.features import analyze_query, build_input, fetch_raw
from esbridge.features.entropy import CollectionEntropy
from esbridge.index import add_channels, open_layout
from esbridge.ingest import ingest
from esbridge.rerank import Reranker
from esbridge.scoring import get_scorer
from tests.cli import run
from tests.smallindex import sample_collection

pytestmark = pytest.mark.engine

TOPICS = 8
SYNONYMS = ["cell, cellular", "cancer, tumour, tumor"]
SETTINGS = {
    "number_of_shards": 2, "number_of_replicas": 0,
    "analysis": {"filter": {"own_syn": {"type": "synonym", "synonyms": SYNONYMS}},
                 "analyzer": {"own_syn": {"type": "custom", "tokenizer": "standard",
                                          "filter": ["lowercase", "own_syn"]}}},
}
MAPPING = {"properties": {
    "title": {"type": "text"},
    "text": {"type": "text", "analyzer": "english"},
    "stored": {"type": "text", "analyzer": "english", "term_vector": "yes"},
    "syn": {"type": "text", "analyzer": "own_syn"},
    "tag": {"type": "keyword"},
}}


@dataclass
class Own:
    index: str
    docs: list[dict[str, str]]
    queries: list[str]
    topics: Path
    qrels: Path


def _sample(tmp: Path) -> tuple[list[dict[str, str]], list[str], Path, Path]:
    """80 abstracts of the shipped sample (those judged for the first claims, then others), the
    claims as BEIR queries and their judgments as TREC qrels."""
    sample = sample_collection(TOPICS)
    topics = tmp / "queries.jsonl"
    topics.write_text("".join(json.dumps(q) + "\n" for q in sample.queries))
    qrels = tmp / "qrels.txt"
    qrels.write_text("".join(f"{q['_id']} 0 {d} {g}\n" for q in sample.queries
                             for d, g in sample.judged[q["_id"]].items()))
    return sample.docs, [q["text"] for q in sample.queries], topics, qrels


def _bulk(engine: Engine, index: str, docs: list[dict[str, Any]]) -> None:
    lines: list[dict[str, Any]] = []
    for d in docs:
        lines += [{"index": {"_index": index, "_id": d["_id"]}}, {k: v for k, v in d.items() if k != "_id"}]
    resp = engine.request("POST", "/_bulk", body=ndjson_lines(lines), ndjson=True)
    assert not resp.get("errors"), resp["items"][:1]
    engine.refresh(index)


@pytest.fixture(scope="module")
def own(engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Own]:
    docs, queries, topics, qrels = _sample(tmp_path_factory.mktemp("own"))
    name = f"esb-test-own-{engine.distribution}"
    engine.delete_index(name)
    engine.request("PUT", f"/{name}", body={"settings": SETTINGS, "mappings": MAPPING})
    _bulk(engine, name, [{"_id": d["_id"], "title": d["title"], "text": d["text"], "stored": d["text"],
                          "syn": d["text"], "tag": "sample"} for d in docs])
    yield Own(name, docs, queries, topics, qrels)
    engine.delete_index(name)


def _bm25(engine: Engine) -> Any:
    bm25 = get_scorer("bm25")
    return bm25.make_params(k1=1.2, b=0.75, lucene_norms=True, k1_plus_one=engine.info.bm25_k1_plus_one)


def _stacks(engine: Engine, index: str, text: str) -> bool:
    tokens = engine.request("POST", f"/{index}/_analyze", body={"analyzer": "own_syn", "text": text})["tokens"]
    return len({t["position"] for t in tokens}) < len(tokens)


@pytest.mark.parametrize("field", ["title", "text", "stored", "syn"])
def test_bm25_on_a_plain_field_equals_the_engine_score(engine: Engine, own: Own, field: str) -> None:
    rr = Reranker(engine, own.index, scorer="bm25", params=_bm25(engine), fields=[field], window=100)
    assert rr.layout is not None and rr.layout.plain and rr.layout.fields == (field,)
    assert rr.layout.positions == (("syn",) if field == "syn" else ())
    checked = 0
    # a query whose own terms are synonyms is a SynonymQuery to the engine, scored otherwise
    for q in [q for q in own.queries if not _stacks(engine, own.index, q)]:
        resp = engine.search(own.index, {"size": 100, "query": {"match": {field: q}}},
                             params={"search_type": "dfs_query_then_fetch"})
        expected = {h["_id"]: h["_score"] for h in resp["hits"]["hits"]}
        got = {h["_id"]: h["_score"] for h in rr.rescore(resp, q)["hits"]["hits"]}
        assert got.keys() == expected.keys()
        for doc_id, score in expected.items():
            assert got[doc_id] == pytest.approx(score, rel=1e-5), (field, q, doc_id)
        checked += len(expected)
    assert checked >= 100
    rr.close()


def test_stacked_tokens_count_once_in_the_length(engine: Engine, own: Own) -> None:
    """Lucene's length norm counts positions, not tokens: read with token counts instead, the
    synonym field's scores differ from the engine's, so the parity above rests on that."""
    layout = open_layout(engine, own.index, ["syn"])
    q = next(q for q in own.queries if not _stacks(engine, own.index, q))
    terms = analyze_query(engine, own.index, layout, q, ["base"])
    resp = engine.search(own.index, {"size": 100, "query": {"match": {"syn": q}}},
                         params={"search_type": "dfs_query_then_fetch"})
    ids = [h["_id"] for h in resp["hits"]["hits"]]
    expected = np.array([h["_score"] for h in resp["hits"]["hits"]])
    bm25 = get_scorer("bm25")
    scores = {}
    for label, lay in (("positions", layout), ("tokens", dataclasses.replace(layout, positions=()))):
        fetched = fetch_raw(engine, own.index, lay, terms, ids, fields=[lay.combined])
        scores[label] = bm25.score(build_input(fetched, lay, terms, fields=[lay.combined]), _bm25(engine)).scores
    assert np.allclose(scores["positions"], expected, rtol=1e-5)
    assert np.max(np.abs(scores["tokens"] - expected) / expected) > 1e-3


def test_on_the_fly_term_vectors_equal_stored_ones_and_fields_merge(engine: Engine, own: Own) -> None:
    """``text`` (computed from _source) and ``stored`` hold the same text with the same analyzer;
    read together they form one virtual combined field, merged as Lucene's combined_fields does."""
    one = open_layout(engine, own.index, ["text"])
    other = open_layout(engine, own.index, ["stored"])
    both = open_layout(engine, own.index, "text,stored")
    terms = analyze_query(engine, own.index, one, own.queries[0], ["base"])
    ids = [d["_id"] for d in own.docs[:30]]
    got = {name: fetch_raw(engine, own.index, lay, terms, ids, fields=[lay.combined])
           for name, lay in (("text", one), ("stored", other), ("both", both))}
    key = {name: lay.subfield(lay.combined, "base") for name, lay in (("text", one), ("stored", other), ("both", both))}
    assert [v[key["text"]] for v in got["text"].candidates.vectors] == \
        [v[key["stored"]] for v in got["stored"].candidates.vectors]
    st, sb = got["text"].stats[key["text"]], got["both"].stats[key["both"]]
    assert st.doc_count == len(own.docs) and sb.doc_count == st.doc_count
    assert sb.sum_ttf == 2 * st.sum_ttf and sb.df == st.df and any(st.df.values())
    for a, b in zip(got["text"].candidates.vectors, got["both"].candidates.vectors):
        assert b[key["both"]] == {t: 2 * n for t, n in a[key["text"]].items()}
        assert b[key["both"]].length == 2 * a[key["text"]].length
    # BMX's collection entropies, from every document's term vectors: the same either way
    tables = [CollectionEntropy(engine, own.index, lay, progress=False, persist=False).table("base")
              for lay in (one, other)]
    assert len(tables[0]) > 500 and tables[0] == tables[1]


def test_bmx_reranks_a_plain_index(engine: Engine, own: Own) -> None:
    with Reranker(engine, own.index, scorer="bmx", fields=["text", "stored"], window=50) as rr:
        hits = rr.search(own.queries[1], size=10)["hits"]["hits"]
    scores = [h["_score"] for h in hits]
    assert len(hits) == 10 and all(np.isfinite(scores)) and scores == sorted(scores, reverse=True) and scores[0] > 0
    with Reranker(engine, own.index, scorer="bmx", fields=["text"], window=50) as a, \
            Reranker(engine, own.index, scorer="bmx", fields=["stored"], window=50) as b:
        ids = [h["_id"] for h in hits]
        sa, _ = a.score_hits(a.analyze(own.queries[1]), ids, [None] * len(ids))
        sb, _ = b.score_hits(b.analyze(own.queries[1]), ids, [None] * len(ids))
    assert np.allclose(sa.scores, sb.scores, rtol=1e-12) and sa.scores.max() > 0


def test_scorers_needing_other_channels_say_which_and_how(engine: Engine, own: Own) -> None:
    with pytest.raises(ConfigurationError) as err:
        Reranker(engine, own.index, scorer="evolved", fields=["text"])
    msg = str(err.value)
    assert "\n" not in msg and "scorer 'evolved' needs the prefix, bigram and micro channels" in msg
    assert f"index {own.index!r}" in msg and f"`esbridge index --add-channels --index {own.index}`" in msg
    with pytest.raises(ConfigurationError, match="analysed differently .*--fields"):
        open_layout(engine, own.index)  # four fields, three analyzers
    with pytest.raises(ConfigurationError, match="'tag' is not a text field"):
        open_layout(engine, own.index, ["tag"])


def test_command_line_on_a_plain_index(engine: Engine, own: Own, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    conn = ["--url", engine.options.url]
    code, out, err = run(capsys, "search", own.index, own.queries[0], "--scorer", "bm25", "--fields", "text",
                         "--size", "3", *conn)
    assert code == 0, err
    assert out.splitlines()[0].split()[:3] == ["rank", "esbridge", "engine"] and len(out.splitlines()) >= 4
    assert "is a plain index: the base channel is its text field text as analysed by 'english'" in out
    code, out, err = run(capsys, "search", own.index, own.queries[0], "--fields", "text", *conn)  # evolved
    assert code == 2 and err.count("\n") == 1 and "--add-channels" in err
    out_dir = tmp_path / "eval"
    code, out, err = run(capsys, "eval", "--index", own.index, "--topics", str(own.topics), "--qrels", str(own.qrels),
                         "--scorers", "bm25,bmx", "--no-pipeline", "--fields", "stored", "--window", "50",
                         "--no-plots", "--runs", "none", "--out", str(out_dir), "--quiet", *conn)
    assert code == 0, err
    data = json.loads((out_dir / "results.json").read_text())
    assert list(data["results"]) == ["engine-bm25", "bm25", "bmx"] and data["queries"] == TOPICS
    assert data["first_stage"]["field"] == "stored" and data["results"]["bm25"]["ndcg@10"] > 0


def test_add_channels_in_place(engine: Engine, own: Own, index_name: str,
                               capsys: pytest.CaptureFixture[str]) -> None:
    docs = own.docs[:40]
    engine.request("PUT", f"/{index_name}", body={
        "settings": {"number_of_shards": 1, "number_of_replicas": 0},
        "mappings": {"properties": {"title": {"type": "text"}, "text": {"type": "text", "analyzer": "english"},
                                    "tag": {"type": "keyword"}}}})
    _bulk(engine, index_name, [{**d, "tag": "x"} for d in docs])
    with pytest.raises(ConfigurationError, match="'tag' .* is of type 'keyword', not text"):
        add_channels(engine, index_name, fields=["title", "tag"], progress=False)
    assert open_layout(engine, index_name, ["text"]).plain  # nothing changed
    code, out, err = run(capsys, "index", "--add-channels", "--index", index_name, "--quiet",
                         "--url", engine.options.url)
    assert code == 0, err
    assert "re-indexed in place" in out and "document count unchanged (40)" in out
    assert engine.count(index_name) == 40
    layout = open_layout(engine, index_name)
    assert not layout.plain and set(layout.fields) == {"title", "text"}
    # now scored exactly as an index esbridge created from the same documents
    ref = f"{index_name}-ref"
    try:
        ingest(engine, ref, docs, progress=False, strict=True)
        with Reranker(engine, index_name, scorer="evolved", window=40) as mine, \
                Reranker(engine, ref, scorer="evolved", window=40) as theirs:
            for q in own.queries[:4]:
                ids = [d["_id"] for d in docs]
                a, _ = mine.score_hits(mine.analyze(q), ids, [None] * len(ids))
                b, _ = theirs.score_hits(theirs.analyze(q), ids, [None] * len(ids))
                assert np.allclose(a.scores, b.scores, rtol=1e-9, atol=0) and b.scores.max() > 0
    finally:
        engine.delete_index(ref)
    with pytest.raises(ConfigurationError, match="already has esbridge's channels"):
        add_channels(engine, index_name, progress=False)


def test_add_channels_refuses_what_would_lose_data(engine: Engine, index_name: str) -> None:
    engine.request("PUT", f"/{index_name}", body={
        "settings": {"number_of_shards": 1, "number_of_replicas": 0},
        "mappings": {"_source": {"enabled": False}, "properties": {"text": {"type": "text"}}}})
    with pytest.raises(ConfigurationError, match="_source disabled"):
        add_channels(engine, index_name, progress=False)
    with pytest.raises(ConfigurationError, match="no text field esbridge can read"):
        open_layout(engine, index_name)


def test_features_export_on_a_plain_index_builds_only_the_scorers_asked_for(
        engine: Engine, own: Own, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conn = ["--url", engine.options.url, "--quiet"]
    out = tmp_path / "feats.txt"
    code, stdout, err = run(capsys, "features", "export", "--index", own.index, "--topics", str(own.topics),
                            "--qrels", str(own.qrels), "--output", str(out), "--scorers", "bm25,bmx",
                            "--fields", "text,stored", "--window", "20", *conn)
    assert code == 0, err
    meta = json.loads((tmp_path / "feats.txt.features.json").read_text())
    names = [f["name"] for f in meta["features"]]
    assert names[:3] == ["engine_bm25", "bm25", "bmx"] and not any(n.startswith("evolved") for n in names)
    assert meta["fields"] == ["text", "stored"] and "text, stored" in meta["first_stage"]
    column = {n: i for i, n in enumerate(names, start=1)}
    rows: dict[str, dict[str, dict[int, float]]] = {}
    for line in out.read_text().splitlines():
        head, _, doc = line.partition(" # ")
        label, qid, *pairs = head.split()
        rows.setdefault(qid.removeprefix("qid:"), {})[doc] = {int(k): float(v) for k, v in
                                                               (p.split(":") for p in pairs)}
    assert len(rows) == TOPICS and f"{sum(map(len, rows.values()))} candidates of {TOPICS} topics" in stdout
    # each feature is what the reranker computes on the same fields of the plain index
    with Reranker(engine, own.index, scorer="bm25", fields=["text", "stored"], window=20) as bm25, \
            Reranker(engine, own.index, scorer="bmx", fields=["text", "stored"], window=20) as bmx:
        texts = {t["_id"]: t["text"] for t in map(json.loads, own.topics.read_text().splitlines())}
        for q in meta["queries"]:
            text, feats = texts[q["topic"]], rows[str(q["qid"])]
            for rr in (bm25, bmx):
                hits = rr.search(text, size=20)["hits"]["hits"]
                assert {h["_id"] for h in hits} == set(feats)
                for h in hits:
                    assert feats[h["_id"]][column[rr.scorer]] == pytest.approx(h["_score"], rel=1e-12)
                    assert feats[h["_id"]][column["engine_bm25"]] == h["_esbridge"]["first_stage_score"]

    # a scorer that needs channels the index lacks: one line naming it and the channels, nothing written
    out2 = tmp_path / "evolved.txt"
    code, _, err = run(capsys, "features", "export", "--index", own.index, "--topics", str(own.topics),
                       "--output", str(out2), "--scorers", "bm25,evolved", "--fields", "text", *conn)
    assert code == 2 and err.count("\n") == 1, err
    assert "scorer 'evolved' needs the prefix, bigram and micro channels" in err and "--add-channels" in err
    assert not list(tmp_path.glob("evolved.txt*"))


def test_bm25_note_on_several_plain_fields_says_no_parameter_reproduces_the_engine(
        engine: Engine, own: Own, capsys: pytest.CaptureFixture[str]) -> None:
    """On a plain index the first stage scores each text field with its own statistics and adds
    them up; esbridge's bm25 reads the fields as one, so the note must not promise parity."""
    plus = "true" if engine.info.bm25_k1_plus_one else "false"
    parity = ["--param", "k1=1.2", "--param", "b=0.75", "--param", "lucene_norms=true",
              "--param", f"k1_plus_one={plus}"]
    conn = ["--url", engine.options.url]
    q = own.queries[0]
    code, out, err = run(capsys, "search", own.index, q, "--scorer", "bm25", "--fields", "text,stored",
                         *parity, *conn)
    assert code == 0, err
    note = [line for line in out.splitlines() if line.startswith("esbridge's bm25")]
    assert len(note) == 1 and "cannot reproduce the engine's score here, whatever its parameters" in note[0]
    assert "text, stored" in note[0] and "reproduces the engine's score." in note[0]
    with Reranker(engine, own.index, scorer="bm25", params=_bm25(engine), fields=["text", "stored"],
                  window=30) as both, \
            Reranker(engine, own.index, scorer="bm25", params=_bm25(engine), fields=["text"], window=30) as text, \
            Reranker(engine, own.index, scorer="bm25", params=_bm25(engine), fields=["stored"], window=30) as stored:
        hits = both.search(q, size=30)["hits"]["hits"]
        ids = [h["_id"] for h in hits]
        engine_scores = np.array([h["_esbridge"]["first_stage_score"] for h in hits])
        ours = np.array([h["_score"] for h in hits])
        # what the note says: the engine's score is each field's own BM25 added up, not the fields read as one
        per_field = [rr.score_hits(rr.analyze(q), ids, [None] * len(ids))[0].scores for rr in (text, stored)]
        assert np.allclose(per_field[0] + per_field[1], engine_scores, rtol=1e-5)
        assert np.max(np.abs(ours - engine_scores) / engine_scores) > 1e-2
    # with one field, the parameters the note names do reproduce it
    params = [a for p in re.findall(r"--param (\S+)", note[0].rpartition("with one field")[2]) for a in ("--param", p)]
    assert "lucene_norms=true" in params
    code, out, err = run(capsys, "search", own.index, q, "--scorer", "bm25", "--fields", "text", "--size", "10",
                         *params, *conn)
    assert code == 0 and "so it reproduces the engine's score" in out, out
    rows = [line.split() for line in out.splitlines() if re.match(r"^\s+\d+\s+-?\d", line)]
    assert len(rows) == 10 and all(r[1] == r[2] for r in rows)
