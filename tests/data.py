"""The tests' data: the SciFact sample shipped in the package, and small collections the tests write.

The sample (``esbridge/resources/demo/scifact-sample/``, the collection of ``esbridge demo``) holds
1,000 abstracts (``corpus.jsonl.gz``), 50 judged test claims (``queries.jsonl``) and their judgments
(``qrels/test.tsv``).  Tests read nothing from outside the repository: where a test needs a
BEIR-layout folder, :func:`sample_folder` unpacks the sample into a temporary folder, and
:func:`write_beir` writes a collection a test makes up.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from esbridge import demo

#: The SciFact sample shipped in the package.
SAMPLE = Path(__file__).resolve().parents[1] / "esbridge" / "resources" / "demo" / demo.SAMPLE_NAME
#: Its name, as :class:`esbridge.evaluation.datasets.BeirDataset` reports it.
SAMPLE_NAME = demo.SAMPLE_NAME


def documents(limit: int | None = None) -> list[dict[str, str]]:
    """The sample's documents (``_id``, ``title``, ``text``) in file order, the first ``limit`` if given."""
    out = []
    with gzip.open(SAMPLE / "corpus.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            d = json.loads(line)
            out.append({"_id": str(d["_id"]), "title": d.get("title", ""), "text": d.get("text", "")})
            if limit is not None and len(out) == limit:
                break
    return out


def qrels() -> dict[str, dict[str, int]]:
    """The sample's judgments: query id → document id → grade."""
    out: dict[str, dict[str, int]] = {}
    lines = (SAMPLE / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()
    for line in lines[1:]:
        if line.strip():
            qid, did, grade = line.split("\t")[:3]
            out.setdefault(qid, {})[did] = int(grade)
    return out


def judged_queries(limit: int | None = None) -> list[dict[str, str]]:
    """The sample's judged test queries (``_id``, ``text``) in file order, the first ``limit`` if given."""
    judged = qrels()
    out = []
    for line in (SAMPLE / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            q = json.loads(line)
            if str(q["_id"]) in judged:
                out.append({"_id": str(q["_id"]), "text": q["text"]})
    return out[:limit] if limit is not None else out


def sample_folder(base: Path) -> Path:
    """The sample as a BEIR-layout folder under ``base`` (its corpus unpacked), as ``esbridge demo``
    unpacks it; the folder is named :data:`SAMPLE_NAME`."""
    return demo.materialise_sample(base).path


def write_beir(folder: Path, docs: Iterable[Mapping[str, Any]], queries: Mapping[str, str],
               judgments: Mapping[str, Mapping[str, Mapping[str, int]]]) -> Path:
    """Write a BEIR-layout collection: ``docs`` (each with ``_id``), ``queries`` (id → text) and
    ``judgments`` (split → query id → document id → grade); returns ``folder``."""
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps(dict(d)) + "\n" for d in docs), encoding="utf-8")
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": qid, "text": text}) + "\n" for qid, text in queries.items()), encoding="utf-8")
    for split, by_query in judgments.items():
        rows = [f"{qid}\t{did}\t{grade}" for qid, docs_of in by_query.items() for did, grade in docs_of.items()]
        (folder / "qrels" / f"{split}.tsv").write_text(
            "\n".join(["query-id\tcorpus-id\tscore", *rows]) + "\n", encoding="utf-8")
    return folder
