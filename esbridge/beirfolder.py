"""BEIR-layout folders whose files are gzip-compressed (``corpus.jsonl.gz``, as the shipped SciFact
sample's corpus is): unpacked once under ``$ESBRIDGE_HOME`` into a folder every reader of BEIR
folders can read (``corpus.jsonl``, ``queries.jsonl``, ``qrels/*.tsv``).

One routine, :func:`unpack`, does it for the demo's packaged sample and for any folder given to
``esbridge index --dataset`` or ``esbridge demo --dataset``: a file ending in ``.gz`` is decompressed
(streamed, never whole in memory), the others copied; the unpacked folder records the SHA-256 of
what it was made from and is made again, whole, only when that changed.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from esbridge.home import cache_dir

__all__ = ["file_sha256", "member", "needs_unpacking", "readable_folder", "unpack"]

#: The files of a BEIR folder that are read (``qrels/*.tsv`` besides), each also taken as ``NAME.gz``.
BEIR_FILES = ("corpus.jsonl", "queries.jsonl")
MARKER = ".source-sha256"


def file_sha256(path: str | os.PathLike[str], chunk: int = 1 << 20) -> str:
    """SHA-256 of a file's bytes, read in chunks (a collection's files, a user's topics, judgments or
    augmentations, for the fingerprints of what was measured)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def member(source: Any, rel: str) -> Any:
    """``source / rel`` for a path or an :mod:`importlib.resources` traversable (``/``-separated)."""
    part = source
    for segment in rel.split("/"):
        part = part.joinpath(segment)
    return part


def _digest(source: Any, rel: str) -> bytes:
    h = hashlib.sha256(rel.encode("utf-8") + b"\0")
    with member(source, rel).open("rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h.digest()


def unpack(source: Any, files: Sequence[str], target: Path) -> Path:
    """``files`` of the folder ``source`` (a path or a package's traversable; names relative to it,
    ``/``-separated) in the folder ``target``: those ending in ``.gz`` decompressed without the
    suffix, the others copied.  Done only when ``target`` was not made from the same bytes (the
    SHA-256 of the names and contents, kept in ``target/.source-sha256``), into a fresh folder
    that then replaces ``target`` whole.  Returns ``target``.

    Raises:
        OSError: a file cannot be read, or ``target`` cannot be written.
    """
    stamp = hashlib.sha256(b"".join(_digest(source, rel) for rel in files)).hexdigest()
    marker = target / MARKER
    if marker.is_file() and marker.read_text().strip() == stamp:
        return target
    tmp = target.with_name(f".{target.name}-{stamp[:12]}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for rel in files:
        out = tmp / rel.removesuffix(".gz")
        out.parent.mkdir(parents=True, exist_ok=True)
        with member(source, rel).open("rb") as raw, open(out, "wb") as dest:
            shutil.copyfileobj(gzip.GzipFile(fileobj=raw) if rel.endswith(".gz") else raw, dest, 1 << 20)
    (tmp / MARKER).write_text(stamp + "\n")
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)
    return target


def needs_unpacking(folder: Path) -> bool:
    """Whether a BEIR file of ``folder`` is there only gzip-compressed (``corpus.jsonl.gz`` without
    ``corpus.jsonl``, or the same of ``queries.jsonl``)."""
    return any(not (folder / name).is_file() and (folder / f"{name}.gz").is_file() for name in BEIR_FILES)


def readable_folder(folder: Path, home: Path | None = None) -> Path:
    """``folder`` itself, or where a BEIR file of it is there only gzip-compressed, its unpacked copy
    under ``$ESBRIDGE_HOME/unpacked/`` (``home``), made or brought up to date by :func:`unpack`.

    Raises:
        OSError: a file cannot be read, or the copy cannot be written.
    """
    if not needs_unpacking(folder):
        return folder
    resolved = folder.resolve()
    files = [name if (folder / name).is_file() else f"{name}.gz" for name in BEIR_FILES
             if (folder / name).is_file() or (folder / f"{name}.gz").is_file()]
    qrels = folder / "qrels"
    if qrels.is_dir():
        files += sorted(f"qrels/{p.name}" for p in qrels.iterdir()
                        if p.is_file() and p.name.endswith((".tsv", ".tsv.gz")))
    where = hashlib.sha256(str(resolved).encode("utf-8")).hexdigest()[:12]
    return unpack(resolved, files, (home or cache_dir()) / "unpacked" / f"{resolved.name}-{where}")
