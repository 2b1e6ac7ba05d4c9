"""`esbridge index` never costs an index its content: input is checked before the engine is touched,
`--recreate` swaps in a new index only once it holds the documents, `--add-channels` checks what it
needs before changing anything; and `esbridge indices` lists what esbridge made (real engines)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from esbridge.engine.client import Engine
from esbridge.ingest import ingest
from tests.cli import run

DOCS = [{"_id": f"d{i}", "title": f"title {i}", "text": f"the body of document {i}"} for i in range(6)]
NEW_DOCS = [{"_id": f"n{i}", "title": f"new title {i}", "text": f"new body {i}"} for i in range(4)]


@pytest.fixture
def prefix(engine: Engine) -> Iterator[str]:
    """A fresh name prefix; every index whose name starts with it is deleted after the test
    (an index replaced by `--recreate` answers to its name through an alias, which cannot be
    deleted by that name)."""
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


def _write(path: Path, docs: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    return path


def _bad_inputs(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(bytes(range(256)) * 8)
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_text('not json\n{"title": "no id"}\n[1, 2]\n{"_id": "x", "text": ["not", "a", "string"]}\n')
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    (tmp_path / "folder.jsonl").mkdir()
    return {
        "missing": (tmp_path / "missing.jsonl", "does not exist"),
        "all garbage": (garbage, "holds no document that can be indexed (none of its 4 lines); the first: line 1: "
                                 "malformed JSON"),
        "binary": (binary, "holds no document that can be indexed"),
        "empty": (empty, "holds no documents (it is empty)"),
        "a folder": (tmp_path / "folder.jsonl", "is not a regular file"),
    }


@pytest.mark.parametrize("case", ["missing", "all garbage", "binary", "empty", "a folder"])
def test_unreadable_input_never_touches_an_index(engine: Engine, prefix: str, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str], case: str) -> None:
    ingest(engine, prefix, DOCS, progress=False, strict=True)
    before = _state(engine, prefix)
    source, needle = _bad_inputs(tmp_path)[case]
    conn = ["--url", engine.options.url, "--no-semantic", "--no-store", "--quiet"]
    for argv in (["--index", prefix, "--recreate"], ["--index", prefix], ["--index", f"{prefix}-new"],
                 ["--index", f"{prefix}-new", "--recreate"]):
        code, out, err = run(capsys, "index", "--input", str(source), *argv, *conn)
        assert code == 2 and out == "", (argv, err)
        assert err.count("\n") == 1 and err.startswith("esbridge: error: input file") and needle in err, (argv, err)
        assert _state(engine, prefix) == before, argv  # nothing deleted, created or written


def test_recreate_swaps_in_the_new_content_only_once_indexed(engine: Engine, prefix: str, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    ingest(engine, prefix, DOCS, progress=False, strict=True)
    old_uuid = _state(engine, prefix)[prefix]["uuid"]
    engine.request("POST", "/_aliases", body={"actions": [{"add": {"index": prefix, "alias": f"{prefix}-mine",
                                                                   "filter": {"term": {"_id": "n1"}}}}]})
    conn = ["--url", engine.options.url, "--no-semantic", "--no-store", "--quiet"]
    code, out, err = run(capsys, "index", "--input", str(_write(tmp_path / "new.jsonl", NEW_DOCS)),
                         "--index", prefix, "--recreate", *conn)
    assert code == 0, err
    state = _state(engine, prefix)
    assert prefix not in state and len(state) == 1  # the old index is gone, the new one took its name
    (target, new), = state.items()
    assert new["uuid"] != old_uuid and set(new["aliases"]) == {prefix, f"{prefix}-mine"}
    assert new["aliases"][f"{prefix}-mine"]["filter"] == {"term": {"_id": "n1"}}  # the user's alias moved as it was
    assert [d for d, _ in new["docs"]] == sorted(d["_id"] for d in NEW_DOCS)
    assert f"{prefix!r} is now an alias of the new index {target!r}; the old index {prefix!r} was deleted" in out
    assert engine.count(prefix) == len(NEW_DOCS) and engine.count(f"{prefix}-mine") == 1
    # written through its name (an alias now), and replaced again
    code, out, err = run(capsys, "index", "--input", str(_write(tmp_path / "more.jsonl", DOCS[:2])),
                         "--index", prefix, *conn)
    assert code == 0 and engine.count(prefix) == len(NEW_DOCS) + 2, err
    code, out, err = run(capsys, "index", "--input", str(_write(tmp_path / "last.jsonl", DOCS)),
                         "--index", prefix, "--recreate", *conn)
    assert code == 0, err
    state = _state(engine, prefix)
    (last, final), = state.items()
    assert last != target and f"{prefix!r} now names the new index {last!r}; {target!r}, which it named before, " \
                              "was deleted" in out
    assert [d for d, _ in final["docs"]] == sorted(d["_id"] for d in DOCS)
    code, out, err = run(capsys, "indices", "--json", "--url", engine.options.url)
    rows = {r["index"]: r for r in json.loads(out)}
    assert rows[last]["aliases"] == sorted([prefix, f"{prefix}-mine"]) and rows[last]["documents"] == len(DOCS)


def test_recreate_that_indexes_part_of_its_input_keeps_the_old_index(engine: Engine, prefix: str, tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """One good document and 396 unreadable lines do not replace an index of 1,000 documents, unless
    --allow-partial says to."""
    old = [{"_id": f"o{i}", "title": f"old {i}", "text": f"old body {i}"} for i in range(1000)]
    ingest(engine, prefix, old, progress=False, strict=True)
    before = _state(engine, prefix)
    src = tmp_path / "mostly-garbage.jsonl"
    src.write_text(json.dumps(NEW_DOCS[0]) + "\n" + "".join(f"not json {i}\n" for i in range(396)))
    conn = ["--url", engine.options.url, "--no-semantic", "--no-store", "--quiet"]
    code, out, err = run(capsys, "index", "--input", str(src), "--index", prefix, "--recreate", *conn)
    assert code == 4, err
    assert err.count("not indexed: line ") == 20 and "... and 376 more" in err
    assert out.count("\n") == 1 and out.startswith("1 of 397 documents indexed into ")
    assert out.rstrip().endswith(
        f"396 failed; {prefix!r} is unchanged: 1 of the 397 documents read could be indexed (396 failed), so the new "
        "index that was to replace it was deleted; run the command again with --allow-partial (Python: "
        "allow_partial=True) to replace it with the documents that could be indexed"), out
    assert _state(engine, prefix) == before and engine.count(prefix) == 1000
    code, out, err = run(capsys, "index", "--input", str(src), "--index", prefix, "--recreate", "--allow-partial",
                         *conn)
    assert code == 4, err  # documents were not indexed, and they are reported
    assert f"{prefix!r} is now an alias of the new index " in out
    (_, new), = _state(engine, prefix).items()
    assert [d for d, _ in new["docs"]] == [NEW_DOCS[0]["_id"]] and engine.count(prefix) == 1
    code, _, err = run(capsys, "index", "--input", str(src), "--index", prefix, "--allow-partial", *conn)
    assert code == 2 and "--allow-partial goes with --recreate" in err


def test_recreate_of_an_alias_of_several_indices_is_refused(engine: Engine, prefix: str, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    for part in ("a", "b"):
        ingest(engine, f"{prefix}-{part}", DOCS[:2], progress=False, strict=True)
        engine.request("POST", "/_aliases", body={"actions": [{"add": {"index": f"{prefix}-{part}", "alias": prefix}}]})
    before = _state(engine, prefix)
    code, _, err = run(capsys, "index", "--input", str(_write(tmp_path / "d.jsonl", NEW_DOCS)), "--index", prefix,
                       "--recreate", "--no-semantic", "--no-store", "--quiet", "--url", engine.options.url)
    assert code == 2 and f"{prefix!r} is an alias of 2 indices" in err and err.count("\n") == 1
    assert _state(engine, prefix) == before


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


def test_indices_lists_what_esbridge_made_and_with_which_layout(engine: Engine, prefix: str,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    from esbridge.index import IndexLayout

    ingest(engine, f"{prefix}-a", DOCS, progress=False, strict=True)
    layout = IndexLayout(fields=("headline", "body"), field_channels=("base", "prefix", "bigram", "micro"))
    ingest(engine, f"{prefix}-b", [{"_id": "1", "headline": "h", "body": "b"}], layout=layout, progress=False,
           strict=True)
    engine.request("PUT", f"/{prefix}-plain", body={"mappings": {"properties": {"text": {"type": "text"}}}})
    engine.request("POST", "/_aliases", body={"actions": [{"add": {"index": f"{prefix}-a", "alias": f"{prefix}-x"}}]})
    url = ["--url", engine.options.url]
    code, out, err = run(capsys, "indices", "--json", *url)
    assert code == 0, err
    rows = {r["index"]: r for r in json.loads(out) if r["index"].startswith(prefix)}
    assert set(rows) == {f"{prefix}-a", f"{prefix}-b"}
    a, b = rows[f"{prefix}-a"], rows[f"{prefix}-b"]
    assert a["esbridge"] and a["documents"] == len(DOCS) and a["aliases"] == [f"{prefix}-x"]
    assert a["fields"] == ["title", "text"] and a["channels"] == ["base", "prefix", "bigram", "micro"]
    assert a["field_channels"] == ["base"] and a["vector"] is None and a["combined"] == "esb_all"
    assert b["fields"] == ["headline", "body"] and b["field_channels"] == b["channels"] and b["documents"] == 1
    code, out, _ = run(capsys, "indices", "--all", "--json", *url)
    rows = {r["index"]: r for r in json.loads(out) if r["index"].startswith(prefix)}
    plain = rows[f"{prefix}-plain"]
    assert not plain["esbridge"] and plain["fields"] is None and plain["documents"] == 0
    assert plain["notes"][0].startswith("not esbridge's")
    code, out, _ = run(capsys, "indices", *url)
    lines = {line.split()[0]: line for line in out.splitlines()}
    assert lines["index"].split() == ["index", "aliases", "docs", "fields", "channels", "vector", "notes"]
    assert lines[f"{prefix}-a"].split()[:5] == [f"{prefix}-a", f"{prefix}-x", "6", "title,text",
                                                "base,prefix,bigram,micro"]
    assert "(each field: base)" in lines[f"{prefix}-a"]
    assert lines[f"{prefix}-b"].split()[:5] == [f"{prefix}-b", "-", "1", "headline,body", "base,prefix,bigram,micro"]
    assert f"{prefix}-plain" not in lines
    code, out, _ = run(capsys, "indices", "--all", *url)
    assert "not esbridge's" in next(line for line in out.splitlines() if line.startswith(f"{prefix}-plain "))
