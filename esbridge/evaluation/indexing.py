"""Evaluation indices: created once per collection and reused while their content matches.

Each index records a content fingerprint in ``_meta.esbridge.eval``: the SHA-256
of ``corpus.jsonl``, the SHA-256 of esbridge's index body (analyzers, channel
sub-fields, similarity; without ``_meta``) and the document count.  An existing
index is reused only when all three match and the engine holds that many
documents; otherwise it is rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from esbridge.engine.client import Engine
from esbridge.errors import IngestError
from esbridge.evaluation.datasets import BeirDataset
from esbridge.index.definitions import IndexLayout, VectorField, build_index_body, create_index, index_meta
from esbridge.ingest import ingest, read_jsonl

log = logging.getLogger(__name__)

__all__ = ["PYSERINI_BM25", "ENGINE_DEFAULT_BM25", "IndexSpec", "ensure_index", "index_name"]

#: Anserini/Pyserini BM25 (k1, b): the evaluation index's similarity and first stage.
PYSERINI_BM25 = (0.9, 0.4)
#: The engines' default BM25 similarity (k1, b).
ENGINE_DEFAULT_BM25 = (1.2, 0.75)

_SAFE = re.compile(r"[^a-z0-9_-]+")


@dataclass(frozen=True)
class IndexSpec:
    """What an evaluation index must hold."""

    corpus_sha256: str
    mapping_sha256: str
    docs: int
    bm25: tuple[float, float] | None

    def meta(self) -> dict[str, Any]:
        return {"eval": {"corpus_sha256": self.corpus_sha256, "mapping_sha256": self.mapping_sha256,
                         "docs": self.docs, "bm25": list(self.bm25) if self.bm25 else None}}


def index_name(prefix: str, dataset: BeirDataset, bm25: tuple[float, float] | None) -> str:
    """``<prefix>-<dataset>`` for the Pyserini-BM25 index, ``...-k1-1.2-b-0.75`` for another similarity."""
    base = _SAFE.sub("-", f"{prefix}-{dataset.name}".lower()).strip("-_")
    if bm25 is None or tuple(bm25) == PYSERINI_BM25:
        return base
    return f"{base}-k1-{bm25[0]:g}-b-{bm25[1]:g}".replace(".", "_")


def mapping_fingerprint(layout: IndexLayout, bm25: tuple[float, float] | None,
                        vector: VectorField | None = None, document_vectors: Sequence[VectorField] = ()) -> str:
    """SHA-256 of esbridge's index body for ``layout``, ``bm25``, ``vector`` and ``document_vectors``
    (``_meta`` left out)."""
    body = build_index_body(layout, bm25=bm25, vector=vector, document_vectors=document_vectors)
    body["mappings"].pop("_meta", None)
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def ensure_index(engine: Engine, dataset: BeirDataset, name: str, *,
                 bm25: tuple[float, float], layout: IndexLayout | None = None,
                 reindex: bool = False, progress: bool = False,
                 corpus_sha256: str | None = None, vector: VectorField | None = None,
                 document_vectors: Sequence[VectorField] = ()) -> str:
    """``name`` holding ``dataset``'s corpus under BM25 ``(k1, b)``; built only when needed.

    ``vector``: the index also has this engine vector field (its vectors are filled by whoever
    opens the index's semantic search, :func:`~esbridge.semantic.engine_vectors.open_vectors`);
    ``document_vectors``: and these whole-document ones (filled likewise).

    Returns:
        ``name``.

    Raises:
        IngestError: a document could not be indexed (the message names it).
    """
    layout = layout or IndexLayout()
    spec = IndexSpec(
        corpus_sha256=corpus_sha256 or dataset.fingerprint(),
        mapping_sha256=mapping_fingerprint(layout, bm25, vector, document_vectors),
        docs=dataset.corpus_size(),
        bm25=bm25,
    )
    if engine.index_exists(name) and not reindex:
        current = index_meta(engine, name).get("eval")
        if current == spec.meta()["eval"] and engine.count(name) == spec.docs:
            return name
        log.info("index %r does not hold this collection's current content; rebuilding it", name)
    engine.delete_index(name)
    create_index(engine, name, layout, shards=1, bm25=bm25, meta=spec.meta(), vector=vector,
                 document_vectors=document_vectors)
    try:
        ingest(engine, name, read_jsonl(dataset.corpus_path), layout=layout, create=False,
               progress=progress, strict=True)
    except IngestError:
        engine.delete_index(name)  # never leave a partial index that a later run could trust
        raise
    return name
