"""`esbridge index` never costs an index its content: `--add-channels` checks what it needs before
changing anything (real engines)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from esbridge.engine.client import Engine
from tests.cli import run

DOCS = [{"_id": f"d{i}", "title": f"title {i}", "text": f"the body of document {i}"} for i in range(6)]


@pytest.fixture
def prefix(engine: Engine) -> Iterator[str]:
    """A fresh name prefix; every index whose name starts with it is deleted after the test."""
    name = f"esb-test-{uuid.uuid4().hex[:10]}"
    yield name
    for row in engine.request("GET", f"/_cat/indices/{name}*", params={"format": "json", "h": "index"}):
        engine.delete_index(row["index"])


def _state(engine: Engine, prefix: str) -> dict[str, Any]:
    """Every index of the test with its UUID, aliases, mapping, settings and documents."""
    out: dict[str, Any] = {}
    for row in engine.request("GET", f"/_cat/indices/{prefix}*", params={"format": "json", "h": "index,uuid"}):
        name = row["index"]
        engine.refresh(name)
        spec = engine.request("GET", f"/{name}")[name]
        settings = dict(spec["settings"]["index"])
        out[name] = {"uuid": row["uuid"], "aliases": spec.get("aliases"), "mappings": spec["mappings"],
                     "analysis": settings.get("analysis"), "docs": sorted(
                         (h["_id"], json.dumps(h["_source"], sort_keys=True))
                         for h in engine.search(name, {"size": 100, "query": {"match_all": {}}})["hits"]["hits"])}
    return out


@pytest.mark.without_reindex
def test_add_channels_without_update_by_query_changes_nothing(engine: Engine, prefix: str,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    engine.request("PUT", f"/{prefix}", body={
        "settings": {"number_of_shards": 1, "number_of_replicas": 0},
        "mappings": {"properties": {"title": {"type": "text"}, "text": {"type": "text"}}}})
    engine.request("POST", "/_bulk", params={"refresh": "true"}, ndjson=True,
                   body="".join(json.dumps({"index": {"_index": prefix, "_id": d["_id"]}}) + "\n" + json.dumps(
                       {"title": d["title"], "text": d["text"]}) + "\n" for d in DOCS))
    before = _state(engine, prefix)
    settings = engine.request("GET", f"/{prefix}/_settings", params={"flat_settings": "true"})
    code, out, err = run(capsys, "index", "--add-channels", "--index", prefix, "--quiet", "--url", engine.options.url)
    assert code == 3 and out == "", err
    assert err.count("\n") == 1 and "has no _update_by_query (its reindex module is not installed)" in err
    assert "nothing was changed" in err
    assert _state(engine, prefix) == before
    assert engine.request("GET", f"/{prefix}/_settings", params={"flat_settings": "true"}) == settings
