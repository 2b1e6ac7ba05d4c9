"""Paths and loaders for the test collections, BEIR-layout folders under ``$ESBRIDGE_DATA`` (used by tests,
never copied)."""

from __future__ import annotations

import json
import os
from pathlib import Path

DATA = Path(os.environ["ESBRIDGE_DATA"]) if os.environ.get("ESBRIDGE_DATA") else (
    Path(__file__).resolve().parents[2] / "shared" / "data"
)


def beir(name: str) -> Path:
    """The folder of a BEIR-layout test collection."""
    path = DATA / name
    if not (path / "corpus.jsonl").exists():
        raise FileNotFoundError(
            f"test collection {name!r} not found under {DATA}; set ESBRIDGE_DATA to the folder "
            "holding the BEIR-layout collections"
        )
    return path


def judged_queries(name: str, split: str = "test", limit: int | None = None) -> list[dict[str, str]]:
    """The judged queries of a collection's split, in file order."""
    path = beir(name)
    judged = set()
    with open(path / "qrels" / f"{split}.tsv") as f:
        next(f)
        for line in f:
            judged.add(line.split("\t")[0])
    out = []
    with open(path / "queries.jsonl") as f:
        for line in f:
            q = json.loads(line)
            if str(q["_id"]) in judged:
                out.append({"_id": str(q["_id"]), "text": q["text"]})
    return out[:limit] if limit else out
