"""An index esbridge creates keeps its documents' ids in doc values (``esbridge_id``, left out of
``_source``): a first stage without ``_source`` reads no stored field, and ranks, scores and returns
exactly what the same search reading the ids from the stored fields does; a document written by
another client, without the value, is found all the same."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from esbridge.engine import calls
from esbridge.engine.client import Engine
from esbridge.hybrid import HybridSearcher, PipelineParams
from esbridge.index.definitions import ID_VALUES, read_layout
from esbridge.ingest import ingest
from esbridge.rerank import INLINE_SOURCE_WINDOW, Reranker
from tests.data import documents, judged_queries
from tests.engine.recording import Recorder


@pytest.fixture(params=[1, 2], ids=["1 shard", "2 shards"])
def esbridge_index(engine: Engine, index_name: str, request: pytest.FixtureRequest) -> str:
    """On one shard the first stage is the one search that also analyses the query (where the
    engine runs esbridge's plugin); on two, the query is analysed first."""
    report = ingest(engine, index_name, documents(200), shards=request.param, progress=False, strict=True)
    assert report.indexed == 200
    return index_name


def _lean(body: dict[str, Any]) -> bool:
    return body.get("stored_fields") == "_none_" and ID_VALUES in body.get("docvalue_fields", ())


@pytest.mark.parametrize("window", [20, 300])
def test_the_first_stage_reads_no_stored_field(engine: Engine, esbridge_index: str, window: int) -> None:
    layout = read_layout(engine, esbridge_index)
    assert layout.id_values == ID_VALUES
    # the same index read as one made before the ids had doc values: every hit's _id from the stored fields
    stored = Reranker(engine, esbridge_index, window=window, layout=replace(layout, id_values=None))
    lean = Reranker(engine, esbridge_index, window=window)
    for q in [q["text"] for q in judged_queries()[:6]]:
        with Recorder(engine) as rec:
            want = stored.search(q, size=10)
        # without the ids' doc values every hit's stored fields are read: a small window brings _source
        inline = window <= INLINE_SOURCE_WINDOW
        assert all((b.get("_source") is not False) == inline for b in rec.searches), rec.searches
        assert bool([p for p in rec.paths if p.endswith("/_mget")]) != inline, rec.paths
        with Recorder(engine) as rec:
            got = lean.search(q, size=10)
        # over TLS too: the first stage reads no stored field, the top hits' _source comes with an _mget
        assert rec.searches and all(_lean(b) for b in rec.searches), rec.searches
        assert [p for p in rec.paths if p.endswith("/_mget")], rec.paths
        assert [h["_id"] for h in got["hits"]["hits"]] == [h["_id"] for h in want["hits"]["hits"]], q
        assert np.array_equal([h["_score"] for h in got["hits"]["hits"]], [h["_score"] for h in want["hits"]["hits"]])
        for a, b in zip(got["hits"]["hits"], want["hits"]["hits"], strict=True):
            assert a["_source"] == b["_source"] and ID_VALUES not in a["_source"], q
            assert "fields" not in a, a
        retrieved = lean.retrieve(q)
        assert retrieved.ranking.ids == stored.retrieve(q).ranking.ids
        # the candidates of the query and of its variants: one _msearch, no stored field read either
        variants = [("heart disease risk", 0.5)]
        want = stored.search(q, size=10, augmentations=variants)
        with Recorder(engine) as rec:
            got = lean.search(q, size=10, augmentations=variants)
        assert len(rec.msearches) == 2 and all(_lean(b) for b in rec.msearches), rec.msearches
        assert all(_lean(b) for b in rec.searches), rec.searches  # the features of the union, by id
        assert [(h["_id"], h["_score"]) for h in got["hits"]["hits"]] == \
            [(h["_id"], h["_score"]) for h in want["hits"]["hits"]], q
    # nobody reading the index directly sees the field
    doc = engine.request("GET", f"/{esbridge_index}/_doc/{got['hits']['hits'][0]['_id']}")
    assert ID_VALUES not in doc["_source"]


def test_a_document_written_by_another_client_is_found(engine: Engine, esbridge_index: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Written with ``_bulk`` (no id value): the searches that find it are read again the usual way."""
    q = judged_queries()[0]["text"]
    body = json.dumps({"index": {"_id": "written-elsewhere"}}) + "\n" + json.dumps({"title": q, "text": q}) + "\n"
    assert not engine.request("POST", f"/{esbridge_index}/_bulk", body=body, ndjson=True,
                              params={"refresh": "true"})["errors"]
    rr = Reranker(engine, esbridge_index, window=300)  # a window whose _source comes afterwards, on any engine
    variants = [("heart disease risk", 0.5)]
    for augmentations in (variants, None):  # the _msearch of the query and its variants, and one _search
        calls._IDS_MISSED.clear()
        with Recorder(engine) as rec:
            hits = rr.search(q, size=5, augmentations=augmentations)["hits"]["hits"]
        assert hits[0]["_id"] == "written-elsewhere" and hits[0]["_source"]["title"] == q
        sent = rec.searches + rec.msearches
        assert any(_lean(b) for b in sent) and any(not _lean(b) for b in sent), augmentations
    assert rr.retrieve(q).ranking.ids[0] == "written-elsewhere"
    params = PipelineParams(window=50, w_semantic=0.0, keyword_source="lexical", weighting="fixed")
    with HybridSearcher(engine, esbridge_index, params) as hs:
        res = hs.run(q)
        assert res.lists["lexical"].ids[0] == "written-elsewhere"
        assert "written-elsewhere" in res.lists["keyword"].ids[:5]
    # for a while the searches of the index read the stored fields at once, not each twice
    with Recorder(engine) as rec:
        assert rr.search(q, size=5)["hits"]["hits"][0]["_id"] == "written-elsewhere"
    assert rec.searches and not any(_lean(b) for b in rec.searches), rec.searches
    # written again through esbridge, it has its value: once the while has passed, the searches read
    # no stored field again
    ingest(engine, esbridge_index, [{"_id": "written-elsewhere", "title": q, "text": q}], create=False,
           progress=False, strict=True)
    engine.request("POST", f"/{esbridge_index}/_refresh")
    monkeypatch.setattr(calls, "IDS_RETRY_SECONDS", 0.0)
    with Recorder(engine) as rec:
        assert rr.search(q, size=5)["hits"]["hits"][0]["_id"] == "written-elsewhere"
    assert all(_lean(b) for b in rec.searches), rec.searches
