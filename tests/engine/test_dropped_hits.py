"""Hits a response cannot rank: a document given twice to ``rescore`` is kept once (the first), a
document deleted while its query runs is left out; the rest is ranked, and what was left out is
reported (``_esbridge.dropped``, a logged warning, one line on the command line's standard error)."""

from __future__ import annotations

import copy
import json
import logging
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from esbridge.engine.calls import path_segment
from esbridge.engine.client import Engine
from esbridge.rerank import Reranker
from tests.cli import run
from tests.netfaults import fault_proxy
from tests.smallindex import DOCS, create_small_index

QUERY = "glucose diabetes insulin heart"


@pytest.fixture
def small(engine: Engine) -> Iterator[str]:
    name = create_small_index(engine, f"esb-test-{uuid.uuid4().hex[:10]}")
    yield name
    engine.delete_index(name)


def _first_stage(engine: Engine, name: str) -> dict[str, Any]:
    resp = engine.search(name, {"size": 10, "query": {"match": {"text": QUERY}}})
    assert len(resp["hits"]["hits"]) >= 4
    return resp


def _ranked(resp: dict[str, Any]) -> list[tuple[str, float]]:
    return [(h["_id"], h["_score"]) for h in resp["hits"]["hits"]]


def _delete(engine: Engine, name: str, doc_id: str) -> None:
    engine.request("DELETE", f"/{path_segment(name)}/_doc/{doc_id}")
    engine.refresh(name)


def test_rescore_keeps_a_repeated_hit_once_and_reports_it(engine: Engine, small: str,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    resp = _first_stage(engine, small)
    hits = resp["hits"]["hits"]
    twice = copy.deepcopy(resp)
    repeat = {k: v for k, v in hits[0].items() if k != "_index"}  # the same document, its index implied
    twice["hits"]["hits"] = [hits[0], hits[1], dict(hits[1]), *hits[2:], repeat]
    with Reranker(engine, small, scorer="bm25") as rr, caplog.at_level(logging.WARNING, logger="esbridge"):
        got = rr.rescore(twice, QUERY)
        want = rr.rescore(resp, QUERY)
    assert _ranked(got) == _ranked(want)
    assert got["_esbridge"]["dropped"] == [{"_index": small, "_id": hits[1]["_id"], "reason": "duplicate"},
                                           {"_index": None, "_id": hits[0]["_id"], "reason": "duplicate"}]
    assert "dropped" not in want["_esbridge"]
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and f"left out 2 hit(s) of {small!r}" in warned[0] and repr(hits[1]["_id"]) in warned[0]


def test_rescore_leaves_out_a_hit_deleted_since_the_search(engine: Engine, small: str, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    resp = _first_stage(engine, small)
    gone = resp["hits"]["hits"][1]["_id"]
    _delete(engine, small, gone)
    without = copy.deepcopy(resp)
    without["hits"]["hits"] = [h for h in resp["hits"]["hits"] if h["_id"] != gone]
    with Reranker(engine, small, scorer="bmx") as rr:
        got = rr.rescore(resp, QUERY)
        want = rr.rescore(without, QUERY)
    assert _ranked(got) == _ranked(want) and gone not in {h["_id"] for h in got["hits"]["hits"]}
    assert got["_esbridge"]["dropped"] == [{"_index": small, "_id": gone, "reason": "deleted"}]
    # the command line: the response on standard output, one line on standard error
    resp["hits"]["hits"].append(dict(resp["hits"]["hits"][0]))
    (tmp_path / "response.json").write_text(json.dumps(resp))
    code, out, err = run(capsys, "rescore", "--url", engine.options.url, small, QUERY, str(tmp_path / "response.json"),
                         "--scorer", "bmx", "--no-store")
    assert code == 0, err
    printed = json.loads(out)
    assert _ranked(printed) == _ranked(want)
    said = [line for line in err.replace("\r", "\n").splitlines() if line.startswith("esbridge")]  # not progress
    assert len(said) == 1 and said[0].startswith(f"esbridge: warning: left out 2 hit(s) of {small!r}: "), err
    assert repr(gone) in said[0] and "deleted since the search" in said[0] and "repeats an earlier hit" in said[0]


@pytest.mark.parametrize("window,deleted_at", [(10, "_mtermvectors"), (300, "_mget")])
def test_search_ranks_the_rest_when_a_candidate_is_deleted_meanwhile(engine: Engine, small: str, window: int,
                                                                     deleted_at: str,
                                                                     capsys: pytest.CaptureFixture[str],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Deleted between the first stage and the term vectors (its features are gone), or between
    the ranking and the fetch of the top hits' sources (a window above the inline-source one).
    (With esbridge's engine plugin the features come with the first stage: nothing in between.)"""
    if deleted_at == "_mtermvectors":
        monkeypatch.setenv("ESBRIDGE_FEATURES_PLUGIN", "off")
    top = [h["_id"] for h in Reranker(engine, small, scorer="bm25").search(QUERY, size=10)["hits"]["hits"]]
    victim = top[0]

    def delete_meanwhile(method: str, path: str, n: int) -> None:
        if path.endswith(f"/{deleted_at}") and n == 0:
            _delete(engine, small, victim)

    with fault_proxy(engine.options.url, delete_meanwhile) as (url, _log):
        with Engine.connect(replace(engine.options, url=url, urls=(), ca_certs=None)) as proxied:
            with Reranker(proxied, small, scorer="bm25", window=window) as rr:
                got = rr.search(QUERY, size=10)
    ids = [h["_id"] for h in got["hits"]["hits"]]
    assert ids == [i for i in top if i != victim]
    assert got["_esbridge"]["dropped"] == [{"_index": small, "_id": victim, "reason": "deleted"}]
    scores = [h["_score"] for h in got["hits"]["hits"]]
    assert scores == sorted(scores, reverse=True) and all(h.get("_source") for h in got["hits"]["hits"])
    assert set(ids) < set(DOCS)
