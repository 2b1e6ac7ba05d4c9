"""BEIR-layout test collections: corpus, queries, judgments and query subsets.

A collection is a folder holding::

    corpus.jsonl        {"_id": ..., "title": ..., "text": ...}   one document a line
    queries.jsonl       {"_id": ..., "text": ...}                 one query a line
    qrels/<split>.tsv   query-id <TAB> corpus-id <TAB> score      with a header line

A folder whose files are gzip-compressed (``corpus.jsonl.gz``, ...) is read through a copy
unpacked once (:func:`esbridge.beirfolder.readable_folder`).

Only the queries judged in a split are evaluated.  A split can be divided into
two fixed halves (``test:tune`` and ``test:heldout``) so that parameters tuned on
one half are reported on queries they have not seen; the halves depend on the
query ids and a seed only, never on the order of the files.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from esbridge.beirfolder import file_sha256, readable_folder
from esbridge.errors import DatasetError
from esbridge.jsoninput import parse_json

__all__ = [
    "BeirDataset",
    "DatasetError",
    "Part",
    "Query",
    "SplitSpec",
    "file_sha256",
    "half_split",
    "load_dataset",
]

#: Seed of the fixed halves (``test:tune`` / ``test:heldout``) unless one is given.
DEFAULT_HALF_SEED = 2024


class Part(str, Enum):
    """Which queries of a split: all, the tuning half, or the held-out half."""

    ALL = "all"
    TUNE = "tune"
    HELDOUT = "heldout"


@dataclass(frozen=True)
class SplitSpec:
    """A split and the part of its queries: ``test``, ``test:tune``, ``test:heldout``.

    Attributes:
        name: the qrels file's stem (``qrels/<name>.tsv``).
        part: all queries, or one of the two seeded halves.
        seed: the seed of the halves.
    """

    name: str
    part: Part = Part.ALL
    seed: int = DEFAULT_HALF_SEED

    @classmethod
    def parse(cls, text: str, seed: int = DEFAULT_HALF_SEED) -> SplitSpec:
        """``NAME`` or ``NAME:tune`` / ``NAME:heldout``.

        Raises:
            DatasetError: for an empty name or an unknown part.
        """
        name, _, part = text.partition(":")
        name = name.strip()
        if not name or "/" in name or "\\" in name:
            raise DatasetError(f"split {text!r} is not a qrels name such as 'test' or 'test:tune'")
        try:
            p = Part(part.strip()) if part.strip() else Part.ALL
        except ValueError:
            raise DatasetError(
                f"split {text!r}: unknown part {part!r}; use NAME, NAME:tune or NAME:heldout"
            ) from None
        return cls(name=name, part=p, seed=seed)

    def complement(self) -> SplitSpec:
        """The other half (``test:tune`` <-> ``test:heldout``); an error for a whole split."""
        if self.part is Part.ALL:
            raise DatasetError(f"split {self.name!r} is whole; only a half has a complement")
        other = Part.HELDOUT if self.part is Part.TUNE else Part.TUNE
        return SplitSpec(self.name, other, self.seed)

    def __str__(self) -> str:
        return self.name if self.part is Part.ALL else f"{self.name}:{self.part.value}"


@dataclass(frozen=True)
class Query:
    """A judged query."""

    id: str
    text: str


def half_split(query_ids: list[str] | tuple[str, ...], seed: int) -> tuple[frozenset[str], frozenset[str]]:
    """Two fixed halves of ``query_ids``: ``(tune, heldout)``.

    The ids are ordered by ``sha256(f"{seed}:{id}")`` and the first ``ceil(n/2)``
    form the tuning half; the result depends on the set of ids and the seed only.
    """
    ordered = sorted(set(query_ids), key=lambda q: hashlib.sha256(f"{seed}:{q}".encode()).hexdigest())
    cut = (len(ordered) + 1) // 2
    return frozenset(ordered[:cut]), frozenset(ordered[cut:])


@dataclass
class BeirDataset:
    """A BEIR-layout collection on disk.

    Attributes:
        path: the collection's folder.
        name: a short name (default: the folder's name).
    """

    path: Path
    name: str = ""
    _queries: dict[str, str] | None = field(default=None, repr=False)
    _qrels: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.path = Path(self.path)
        if not self.name:
            self.name = self.path.resolve().name
        missing = [p for p in ("corpus.jsonl", "queries.jsonl") if not (self.path / p).is_file()]
        if not (self.path / "qrels").is_dir():
            missing.append("qrels/")
        if missing:
            raise DatasetError(
                f"{str(self.path)!r} is not a BEIR-layout collection: {', '.join(missing)} missing "
                "(expected corpus.jsonl, queries.jsonl and qrels/<split>.tsv)"
            )

    @property
    def corpus_path(self) -> Path:
        return self.path / "corpus.jsonl"

    def splits(self) -> list[str]:
        """Names of the judgment files under ``qrels/``."""
        return sorted(p.stem for p in (self.path / "qrels").glob("*.tsv"))

    def corpus_size(self) -> int:
        """Number of non-blank lines of ``corpus.jsonl``."""
        with open(self.corpus_path, "rb") as f:
            return sum(1 for line in f if line.strip())

    def fingerprint(self) -> str:
        """SHA-256 of ``corpus.jsonl``."""
        return file_sha256(self.corpus_path)

    # ---- judgments and queries ---------------------------------------------------------

    def _split_qrels(self, name: str) -> dict[str, dict[str, int]]:
        if name in self._qrels:
            return self._qrels[name]
        path = self.path / "qrels" / f"{name}.tsv"
        if not path.is_file():
            raise DatasetError(
                f"collection {self.name!r} has no judgments for split {name!r} ({path} is missing); "
                f"its splits: {', '.join(self.splits()) or 'none'}"
            )
        out: dict[str, dict[str, int]] = {}
        with open(path, encoding="utf-8") as f:
            for line_no, line in enumerate(f, start=1):
                cols = line.rstrip("\n").split("\t")
                if not line.strip():
                    continue
                if len(cols) < 3:
                    raise DatasetError(f"{path}, line {line_no}: expected query-id, corpus-id, score "
                                       f"separated by tabs, got {line.strip()!r}")
                try:
                    score = int(float(cols[2]))
                except ValueError:
                    if line_no == 1:  # the header line
                        continue
                    raise DatasetError(f"{path}, line {line_no}: score {cols[2]!r} is not a number") from None
                out.setdefault(cols[0], {})[cols[1]] = score
        if not out:
            raise DatasetError(f"{path} holds no judgments")
        self._qrels[name] = out
        return out

    def all_queries(self) -> dict[str, str]:
        """Every query of ``queries.jsonl``: ``{id: text}``."""
        if self._queries is None:
            queries: dict[str, str] = {}
            path = self.path / "queries.jsonl"
            with open(path, encoding="utf-8") as f:
                for line_no, line in enumerate(f, start=1):
                    if not line.strip():
                        continue
                    try:
                        obj = parse_json(line, f"{path}, line {line_no}")
                        queries[str(obj["_id"])] = str(obj.get("text") or "")
                    except (ValueError, KeyError, TypeError) as err:
                        raise DatasetError(f"{path}, line {line_no}: not a query object with _id and "
                                           f"text ({err})") from None
            self._queries = queries
        return self._queries

    def _selected(self, split: SplitSpec) -> list[str]:
        judged = list(self._split_qrels(split.name))
        if split.part is Part.ALL:
            return judged
        tune, heldout = half_split(judged, split.seed)
        keep = tune if split.part is Part.TUNE else heldout
        return [q for q in judged if q in keep]

    def qrels(self, split: SplitSpec | str) -> dict[str, dict[str, int]]:
        """Judgments of the split's selected queries: ``{query_id: {doc_id: grade}}``."""
        split = SplitSpec.parse(split) if isinstance(split, str) else split
        all_qrels = self._split_qrels(split.name)
        return {q: dict(all_qrels[q]) for q in self._selected(split)}

    def queries(self, split: SplitSpec | str) -> list[Query]:
        """The split's judged (and selected) queries, in ``queries.jsonl`` order.

        Raises:
            DatasetError: a judged query has no text in ``queries.jsonl``.
        """
        split = SplitSpec.parse(split) if isinstance(split, str) else split
        texts = self.all_queries()
        selected = set(self._selected(split))
        missing = sorted(q for q in selected if q not in texts)
        if missing:
            raise DatasetError(
                f"{len(missing)} judged quer{'y' if len(missing) == 1 else 'ies'} of split {str(split)!r} "
                f"of {self.name!r} are not in queries.jsonl (first: {', '.join(missing[:5])}); "
                "fix the collection's files"
            )
        return [Query(q, texts[q]) for q in texts if q in selected]


def load_dataset(spec: str | os.PathLike[str], *, name: str | None = None,
                 base_url: str | None = None, progress: bool = False,
                 cache: Path | None = None,
                 checksums: Mapping[str, str] | None = None) -> BeirDataset:
    """A collection from a folder path, or a BEIR dataset name downloaded into the cache.

    ``spec`` is read as a path when it names an existing folder (or contains a path
    separator); otherwise as a BEIR dataset name (``scifact``, ``nfcorpus``, ...),
    fetched by :func:`esbridge.evaluation.download.fetch_beir` on first use.  A folder
    whose corpus (or queries, or judgments) is there only gzip-compressed
    (``corpus.jsonl.gz``) is read through its copy unpacked once under ``$ESBRIDGE_HOME``
    (:func:`esbridge.beirfolder.readable_folder`); the collection keeps the folder's name.
    """
    text = os.fspath(spec)
    path = Path(text).expanduser()
    if path.is_dir() or os.sep in text or text.startswith("."):
        if not path.is_dir():
            raise DatasetError(f"dataset folder {text!r} does not exist")
        try:
            readable = readable_folder(path)
        except OSError as err:
            raise DatasetError(f"the BEIR folder {text!r} cannot be unpacked: {err}") from err
        return BeirDataset(readable, name or path.resolve().name)
    from esbridge.evaluation.download import fetch_beir

    folder = fetch_beir(text, base_url=base_url, progress=progress, cache=cache, checksums=checksums)
    return BeirDataset(folder, name or text)
