"""Index names with ``%`` and the reserved URL characters the engines allow in them, through the
API and every command that takes an index: each works on exactly the named index, or refuses in
one line naming it; none reaches another index (an engine decodes ``%74`` in a path to ``t``)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote

import pytest

from esbridge.engine.calls import check_index_name, path_segment
from esbridge.engine.client import Engine
from esbridge.errors import ConfigurationError
from esbridge.rerank import Reranker
from esbridge.scoring import available_scorers, get_scorer
from tests.cli import run
from tests.smallindex import DOCS, create_small_index

#: Documents of the decoy indices: other ids, other statistics of the queries' terms.
DECOY_DOCS = {f"z{i}": {"title": "glucose glucose diabetes", "text": f"glucose glucose heart {i} " * (i + 1)}
              for i in range(12)}
QUERIES = ["glucose diabetes heart", "insulin doses", "cardiac exercise"]


def _put(engine: Engine, name: str, docs: dict[str, dict[str, str]]) -> None:
    create_small_index(engine, name, {})
    for doc_id, src in docs.items():
        engine.request("PUT", f"/{path_segment(name)}/_doc/{doc_id}", body=src)
    engine.refresh(name)


def _contents(engine: Engine, prefix: str) -> dict[str, list[str]]:
    """Every index whose name starts with ``prefix``, with its documents' ids."""
    engine.refresh(f"{prefix}*")
    resp = engine.search(f"{prefix}*", {"size": 1000, "_source": False, "query": {"match_all": {}}})
    out: dict[str, list[str]] = {}
    for h in resp["hits"]["hits"]:
        out.setdefault(h["_index"], []).append(h["_id"])
    listed = engine.request("GET", f"/_cat/indices/{path_segment(prefix + '*', patterns=True)}",
                            params={"format": "json", "h": "index"})
    return {i["index"]: sorted(out.get(i["index"], [])) for i in listed}


@pytest.fixture
def prefix(engine: Engine) -> Iterator[str]:
    """A prefix of this test's index names; every index under it is deleted afterwards."""
    base = f"esb-test-{uuid.uuid4().hex[:8]}-"
    yield base
    for name in _contents(engine, base):
        engine.delete_index(name)


def test_every_scorer_ranks_an_index_named_with_percent_as_a_clean_copy(engine: Engine, prefix: str) -> None:
    target, decoy, clean = prefix + "h2pc%74", prefix + "h2pct", prefix + "clean"
    _put(engine, decoy, DECOY_DOCS)  # where "%74" would lead, decoded
    _put(engine, target, DOCS)
    _put(engine, clean, DOCS)
    scorers = [s for s in available_scorers() if not get_scorer(s).needs_fields]
    assert "bmx" in scorers
    for scorer in scorers:
        with Reranker(engine, target, scorer=scorer) as odd, Reranker(engine, clean, scorer=scorer) as plain:
            for q in QUERIES:
                got, want = odd.search(q, size=5), plain.search(q, size=5)
                assert [(h["_id"], h["_score"]) for h in got["hits"]["hits"]] == \
                       [(h["_id"], h["_score"]) for h in want["hits"]["hits"]], (scorer, q)
                assert {h["_index"] for h in got["hits"]["hits"]} <= {target}
                first = {"query": {"match": {"text": q}}}
                got, want = odd.rescore(engine.search(target, first), q), plain.rescore(engine.search(clean, first), q)
                assert [(h["_id"], h["_score"]) for h in got["hits"]["hits"]] == \
                       [(h["_id"], h["_score"]) for h in want["hits"]["hits"]], (scorer, q)


#: Names that hold ``%`` (escapes that decode to another name, to ``/``, ``?`` or ``#``), every
#: reserved URL character the engines allow in a name, and non-ASCII letters.
VALID = ["h2pc%74", "a%2fb%3fc%23", "x%25y", "[r]@!$&'()+;=~^{}`", "é%c3%a9"]
#: Names the engines refuse.
REFUSED = ["bad#name", "Up%74", "sp ace%20"]


def _decoys(prefix: str, suffix: str) -> list[str]:
    """The indices a name's path would reach if it were decoded or cut at a ``/``, ``?`` or ``#``."""
    decoded = unquote(prefix + suffix)
    out = {decoded}
    for sep in "/?#":
        out.add(decoded.split(sep, 1)[0])
    valid = []
    for name in sorted(out - {prefix + suffix}):
        try:
            valid.append(check_index_name(name))
        except ConfigurationError:
            pass
    return valid


def _commands(url: str, name: str, tmp: Path) -> list[list[str]]:
    docs, topics, qrels, response = (tmp / n for n in ("docs.jsonl", "topics.tsv", "qrels.txt", "response.json"))
    docs.write_text("".join(json.dumps({"_id": k, **v}) + "\n" for k, v in DOCS.items()))
    topics.write_text("".join(f"q{i}\t{q}\n" for i, q in enumerate(QUERIES)))
    qrels.write_text("q0 0 d 2\nq0 0 a 1\nq1 0 b 1\nq2 0 c 1\n")
    store = str(tmp / "store")
    return [
        ["index", "--url", url, "--input", str(docs), "--index", name, "--no-semantic", "--quiet", "--store", store],
        ["search", "--url", url, name, QUERIES[0], "--scorer", "bmx", "--json", "--store", store],
        ["rescore", "--url", url, name, QUERIES[0], str(response), "--scorer", "bmx", "--no-store"],
        ["run", "--url", url, "--index", name, "--topics", str(topics), "--output", str(tmp / "run.txt"),
         "--scorer", "bmx", "--quiet"],
        ["eval", "--url", url, "--index", name, "--topics", str(topics), "--qrels", str(qrels), "--scorers", "bmx",
         "--no-pipeline", "--no-plots", "--out", str(tmp / "eval"), "--quiet"],
        ["features", "build", "--url", url, name, "--store", store, "--quiet"],
        ["features", "export", "--url", url, "--index", name, "--topics", str(topics), "--qrels", str(qrels),
         "--output", str(tmp / "features.txt"), "--scorers", "bm25,bmx", "--quiet"],
    ]


@pytest.mark.parametrize("suffix", VALID)
def test_every_command_works_on_exactly_the_named_index(engine: Engine, prefix: str, suffix: str, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    name = prefix + suffix
    decoys = _decoys(prefix, suffix)
    for decoy in decoys:
        _put(engine, decoy, DECOY_DOCS)
    before = _contents(engine, prefix)
    for argv in _commands(engine.options.url, name, tmp_path):
        if argv[0] == "rescore":
            (tmp_path / "response.json").write_text(json.dumps(
                engine.search(name, {"size": 20, "query": {"match": {"text": QUERIES[0]}}})))
        code, out, err = run(capsys, *argv)
        assert code == 0 and "Traceback" not in err, (argv[:2], err)
        now = _contents(engine, prefix)
        assert now == {**before, name: sorted(DOCS)}, argv[:2]  # the named index has its documents; no other changed
        if argv[0] in ("search", "rescore"):
            hits = json.loads(out)["hits"]["hits"]
            assert hits and {h["_index"] for h in hits} == {name} and {h["_id"] for h in hits} <= set(DOCS)
    ranked = {line.split()[2] for line in (tmp_path / "run.txt").read_text().splitlines()}
    assert ranked and ranked <= set(DOCS)
    exported = {line.rsplit("#", 1)[1].strip() for line in (tmp_path / "features.txt").read_text().splitlines()}
    assert exported and exported <= set(DOCS)


@pytest.mark.parametrize("suffix", REFUSED)
def test_every_command_refuses_a_name_the_engine_refuses_in_one_line(engine: Engine, prefix: str, suffix: str,
                                                                    tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    name = prefix + suffix
    decoys = _decoys(prefix, suffix)
    for decoy in decoys:
        _put(engine, decoy, DECOY_DOCS)
    before = _contents(engine, prefix)
    (tmp_path / "response.json").write_text(json.dumps({"hits": {"hits": [{"_index": name, "_id": "a"}]}}))
    for argv in _commands(engine.options.url, name, tmp_path):
        code, out, err = run(capsys, *argv)
        assert code != 0 and err.startswith("esbridge: error: ") and err.count("\n") == 1, (argv[:2], err)
        assert name in err or repr(name) in err, (argv[:2], err)
        assert _contents(engine, prefix) == before, argv[:2]
