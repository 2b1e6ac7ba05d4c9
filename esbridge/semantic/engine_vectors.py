"""Document vectors kept and searched by the engine itself (OpenSearch's k-NN plugin,
Elasticsearch 8's ``dense_vector``).

An index created with a :class:`~esbridge.index.VectorField` holds each document's
embeddings in that field (``knn_vector`` or ``dense_vector``, HNSW, cosine).  With passages (the field's
``passages``, what ``esbridge index`` creates), the field is nested: one vector per passage
of the document's text, the passages the on-disk index embeds, and a document scores by its
best passage (the ``nested`` query's ``score_mode: max`` over the kNN query, which returns
the nearest documents, not passages); without, one vector of the whole text.
:class:`EngineVectors` fills the field for documents that lack it (new documents, and
documents re-indexed by any writer, since re-indexing replaces the whole source) and answers
semantic searches with the engine's approximate kNN query, so the vectors are never copied
out of the cluster and the search scales with the engine.

Filling is a partial update per document, conditional on the ``_seq_no`` and
``_primary_term`` read with its text: a document changed in between is left for the next
fill rather than given a vector of its old text.  A document whose text is changed by a
partial update that keeps the old vector keeps that vector until it is re-indexed: esbridge
cannot see that change without reading every document.

The engine's ``cosinesimil`` score is ``(1 + cos) / 2``; :meth:`EngineVectors.search`
returns the cosine itself, like the on-disk :class:`~esbridge.semantic.vectors.VectorIndex`.
"""

from __future__ import annotations

import base64
import logging
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from esbridge.engine.calls import ids_search_plan, ndjson_lines, path_segment, raise_mget_errors
from esbridge.engine.client import Engine
from esbridge.engine.plan import run
from esbridge.errors import ConfigurationError, EsbridgeError
from esbridge.index.definitions import (
    ID_VALUES,
    PASSAGE_VECTOR,
    VectorField,
    document_vector_field,
    index_meta,
    layout_from_meta,
)
from esbridge.index.facts import index_state
from esbridge.semantic.cache import EmbeddingCache, Encoder, WindowEncoder
from esbridge.semantic.spec import VECTOR_PLACES
from esbridge.semantic.text import document_text
from esbridge.semantic.vectors import SemanticHits, SemanticIndex, VectorIndex

__all__ = ["VECTOR_PLACES", "EngineVectors", "document_vector_models", "new_document_vector_fields",
           "new_vector_field", "open_document_vectors", "open_vectors", "vector_field_of"]

log = logging.getLogger(__name__)

#: Documents read, embedded and written per round while filling.
FILL_BATCH = 256

#: Vectors written per bulk request at most (a document's passages are never split): about 15 MB of
#: JSON for 384 dimensions, far below the engines' 100 MB request limit.
BULK_VECTORS = 4096

#: The most documents one kNN search returns (both engines' limit on ``k`` / ``num_candidates``).
MAX_KNN_DEPTH = 10_000

#: Documents whose vectors one search reads back from their doc values.
VALUES_BATCH = 500


def unpack_vectors(packed: str, dim: int) -> np.ndarray | None:
    """The rows of a vector doc-values field's value (base64 of float32, little-endian, one row per
    vector), or ``None`` where it holds no whole vectors of dimension ``dim``."""
    flat = np.frombuffer(base64.b64decode(packed), dtype="<f4")
    if flat.size == 0 or flat.size % dim:
        return None
    return flat.reshape(-1, dim).astype(np.float32)


def new_vector_field(engine: Engine, encoder: Encoder, where: str = "auto", *,
                     quantization: str | None = None, oversample: float | None = None) -> VectorField | None:
    """The engine vector field a new index gets for ``encoder``'s passages, or ``None`` where esbridge
    keeps the vectors on disk.

    ``where``: ``auto`` (the default) puts them in the engine wherever it can search vectors
    (:meth:`~esbridge.engine.client.Engine.vector_search`) and the model embeds passages of one
    length, else on disk with a warning naming the cost; ``engine`` raises where that cannot be;
    ``disk`` always keeps them on disk.  ``quantization``, ``oversample``: :attr:`VectorField.quantization`,
    :attr:`VectorField.oversample`.

    Raises:
        ConfigurationError: ``where`` is unknown, or ``engine`` where the engine or model cannot.
    """
    if where not in VECTOR_PLACES:
        raise ConfigurationError(f"vectors must be one of {', '.join(VECTOR_PLACES)}, got {where!r}")
    if where == "disk":
        return None
    kind = engine.vector_search()
    lengths = tuple(getattr(encoder, "passage_lengths", ()))
    if kind is None:
        why = (f"{engine.info.label} has no vector search esbridge can use (OpenSearch's k-NN plugin, "
               "Elasticsearch 8.12+)")
    elif len(lengths) > 1:
        why = (f"the model {encoder.name} embeds passages of several lengths ({', '.join(map(str, lengths))}), "
               "which one vector field cannot hold")
    else:
        return VectorField(dim=encoder.dim, model=encoder.name, passages=lengths[0] if lengths else None, type=kind,
                           quantization=quantization, oversample=oversample)
    if where == "engine":
        raise ConfigurationError(f"--vectors engine: {why}; keep the vectors on disk (--vectors disk)")
    log.warning("%s: esbridge keeps the document vectors on disk, and every client machine embeds every document "
                "of the index itself before its first hybrid query (about 200 passages a second on two cores: minutes "
                "for every ten thousand documents)", why)
    return None


def new_document_vector_fields(engine: Engine, vector: VectorField | None, encoders: Sequence[Encoder],
                               ) -> list[VectorField]:
    """The whole-document vector fields (one per encoder) a new index gets beside its passages'
    ``vector`` field (from :func:`new_vector_field`): none where that is ``None`` (the vectors are
    kept on disk), else one of the same type and quantization per model."""
    if vector is None:
        return []
    return [document_vector_field(e.name, e.dim, vector.type, quantization=vector.quantization,
                                  oversample=vector.oversample) for e in encoders]


def document_vector_models(engine: Engine, index: str) -> list[str]:
    """The models whose whole-document vectors ``index`` holds in the engine (``_meta.esbridge.document_vectors``)."""
    return [str(m.get("model")) for m in _document_metas(index_meta(engine, index))]


def _document_metas(esbridge_meta: Mapping[str, Any]) -> list[dict[str, Any]]:
    got = esbridge_meta.get("document_vectors")
    return [dict(m) for m in got if isinstance(m, dict) and m.get("field")] if isinstance(got, list) else []


def vector_field_of(engine: Engine, index: str) -> dict[str, Any] | None:
    """``_meta.esbridge.vector`` of ``index`` (field, dim, model), or ``None`` if it has none."""
    return _vector_meta(index_meta(engine, index))


def _vector_meta(esbridge_meta: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ``vector`` entry of an index's ``_meta.esbridge``, or ``None`` if it has none."""
    meta = esbridge_meta.get("vector")
    return dict(meta) if isinstance(meta, dict) and meta.get("field") else None


class EngineVectors(SemanticIndex):
    """The semantic index of an index whose vectors the engine keeps; same interface as
    :class:`~esbridge.semantic.vectors.VectorIndex`.  Use :meth:`open`.  Safe to share
    between threads."""

    def __init__(self, engine: Engine, index: str, encoder: Encoder, *, fields: Sequence[str],
                 cache: EmbeddingCache | None = None, check_interval: float = 1.0,
                 progress: bool = False, whole_documents: bool = False) -> None:
        esb = index_meta(engine, index)
        if whole_documents:
            meta = next((m for m in _document_metas(esb) if m.get("model") == encoder.name), None)
            if meta is None:
                raise ConfigurationError(f"index {index!r} has no engine field of whole-document {encoder.name} "
                                         "vectors; use VectorIndex(windows=False)")
        else:
            meta = _vector_meta(esb)
            if meta is None:
                raise ConfigurationError(f"index {index!r} has no engine vector field; use VectorIndex")
        #: the field whose doc values hold the documents' ids (searches read them from there)
        self.id_values = layout_from_meta(esb).id_values
        if meta.get("model") != encoder.name or int(meta.get("dim", -1)) != encoder.dim:
            raise ConfigurationError(
                f"index {index!r} holds {meta.get('model')} vectors of dimension {meta.get('dim')}; the encoder "
                f"is {encoder.name} ({encoder.dim}): use that model, or re-create the index"
            )
        #: word pieces per passage (one nested vector each), or ``None``: one vector per document
        self.passages: int | None = int(meta["passages"]) if meta.get("passages") else None
        if self.passages is not None:
            lengths = tuple(getattr(encoder, "passage_lengths", ()))
            if lengths != (self.passages,) or not hasattr(encoder, "at_length"):
                raise ConfigurationError(
                    f"index {index!r} holds one vector per passage of {self.passages} word pieces; the encoder "
                    f"embeds passages of {', '.join(map(str, lengths)) or 'no fixed length'}: use "
                    f"passages=({self.passages},), or re-create the index")
        self.engine = engine
        self.index = index
        self.encoder = encoder
        self.fields = tuple(fields)
        self.field = str(meta["field"])
        #: the index's other vector fields (``_meta`` entries) whose vectors a fill of this one writes
        #: again: an update rebuilds a document from its ``_source``, which leaves every vector out
        self.others = [m for m in [_vector_meta(esb), *_document_metas(esb)]
                       if m is not None and m.get("field") != self.field]
        #: the field the kNN query searches: the nested passages' vectors, or the field itself
        self.vector_path = f"{self.field}.{PASSAGE_VECTOR}" if self.passages else self.field
        self.type = str(meta.get("type") or "knn_vector")
        #: the binary doc-values field holding each document's vectors (float32, little-endian,
        #: one row per passage), or ``None`` for an index that keeps them in ``_source``
        self.values: str | None = str(meta["values"]) if meta.get("values") else None
        self.cache = cache or EmbeddingCache.for_encoder(encoder)
        self.check_interval = check_interval
        self.progress = progress
        self._state: tuple[int, ...] | None = None  # the index's state when last counted
        self._filled: tuple[int, ...] | None = None  # ... and when last filled
        self._textless = 0  # documents the last fill found without text
        self._checked = 0.0
        self._count = 0
        self._lock = threading.RLock()

    @classmethod
    def open(cls, engine: Engine, index: str, encoder: Encoder, *, fields: Sequence[str], build: bool = True,
             **kwargs: Any) -> EngineVectors:
        """The engine-kept vectors of ``index``, with missing ones filled in (``build``); without, as
        they are (:attr:`pending` counts the documents that lack one)."""
        ev = cls(engine, index, encoder, fields=fields, **kwargs)
        ev.refresh(force=True, build=build)
        return ev

    def __len__(self) -> int:
        return self._count

    # ---- keeping the field filled -------------------------------------------------------

    def _has_vector_query(self) -> dict[str, Any]:
        exists = {"exists": {"field": self.vector_path}}
        return {"nested": {"path": self.field, "query": exists}} if self.passages else exists

    def _missing_query(self) -> dict[str, Any]:
        return {"bool": {"must_not": [self._has_vector_query()]}}

    def refresh(self, *, force: bool = False, build: bool = True) -> bool:
        """Fill the vectors of documents that have none, if the index changed since the last fill
        (``build``), and count those that still lack one (:attr:`pending`); ``True`` if any were
        written.  A check without ``build`` never waits for a fill running in another thread."""
        now = time.monotonic()
        if not force and now - self._checked < self.check_interval:
            return False
        if not self._lock.acquire(blocking=build):
            return False  # a fill is under way: it counts when it is done
        try:
            self._checked = now
            state = index_state(self.engine, self.index)
            wrote = 0
            if build and state != self._filled:
                wrote = self._fill()
                if wrote:
                    self.engine.refresh(self.index)
                    state = index_state(self.engine, self.index)
                self._filled = state
            if state != self._state:
                self._count = self.engine.count(self.index, self._has_vector_query())
                # documents without text never get one (cosine has no neutral vector): not pending
                missing = self.engine.count(self.index, self._missing_query())
                if 0 < missing <= FILL_BATCH:  # few: read them, as a client that did not fill them must
                    self._textless = self._textless_among_missing(missing)
                self.pending = max(0, missing - self._textless)
                self._state = state
            return wrote > 0
        finally:
            self._lock.release()

    def _textless_among_missing(self, missing: int) -> int:
        """How many of the ``missing`` documents without a vector have no text to embed."""
        hits = self.engine.search(self.index, {"query": self._missing_query(), "size": missing,
                                               "_source": list(self.fields)})["hits"]["hits"]
        return sum(1 for h in hits if not document_text(h.get("_source") or {}, self.fields))

    def _fill(self) -> int:
        missing = self.engine.count(self.index, self._missing_query())
        self._textless = 0
        if missing == 0:
            return 0
        bar = None
        progress: Callable[[int], None] | None = None
        if self.progress:
            from tqdm import tqdm

            bar = tqdm(total=missing, desc=f"embedding {self.index}", unit="doc", file=sys.stderr)
            progress = bar.update
        written = 0
        try:
            batch: list[dict[str, Any]] = []
            body: dict[str, Any] = {"query": self._missing_query(), "_source": list(self.fields),
                                    "seq_no_primary_term": True}
            carried = [str(m["values"]) for m in self.others if m.get("values")]
            if carried:
                body["docvalue_fields"] = carried
            for hit in self.engine.scroll(self.index, body, page=FILL_BATCH):
                batch.append(hit)
                if len(batch) >= FILL_BATCH:
                    written += self._write(batch, progress)
                    batch = []
            if batch:
                written += self._write(batch, progress)
        finally:
            if bar is not None:
                bar.close()
        return written

    def _write(self, hits: list[dict[str, Any]], progress: Callable[[int], None] | None) -> int:
        # A document without text gets no vector (cosine has no neutral vector): it is never a
        # semantic hit, as in the on-disk index.
        texts = [document_text(h.get("_source") or {}, self.fields) for h in hits]
        keep = [i for i, t in enumerate(texts) if t]
        self._textless += len(hits) - len(keep)
        if progress is not None:
            progress(len(hits) - len(keep))
        if not keep:
            return 0
        kept = [texts[i] for i in keep]
        if self.passages is None:
            vecs = self.cache.embed(kept, self.encoder)
            starts = np.arange(len(keep) + 1)
        else:
            window_encoder: WindowEncoder = self.encoder.at_length(self.passages)  # type: ignore[attr-defined]
            vecs, starts = self.cache.embed_windows(kept, window_encoder)
        lines: list[dict[str, Any]] = []
        vectors = ok = 0
        for j, i in enumerate(keep):
            hit = hits[i]
            rows = vecs[int(starts[j]):int(starts[j + 1])]
            listed = rows.tolist()  # float32s as the floats they are
            value: Any = [{PASSAGE_VECTOR: row} for row in listed] if self.passages else listed[0]
            lines.append({"update": {"_id": hit["_id"], "if_seq_no": hit["_seq_no"],
                                     "if_primary_term": hit["_primary_term"]}})
            doc: dict[str, Any] = {**self._carried(hit), self.field: value}
            if self.id_values == ID_VALUES:  # left out of _source, from which an update rebuilds the document
                doc[ID_VALUES] = hit["_id"]
            if self.values is not None:
                doc[self.values] = base64.b64encode(np.ascontiguousarray(rows, dtype="<f4").tobytes()).decode("ascii")
            lines.append({"doc": doc})
            vectors += len(rows)
            if vectors >= BULK_VECTORS:  # long documents have many passages: keep each request small
                ok += self._send(lines)
                lines, vectors = [], 0
        if lines:
            ok += self._send(lines)
        if progress is not None:
            progress(len(keep))
        return ok

    def _carried(self, hit: Mapping[str, Any]) -> dict[str, Any]:
        """The other vector fields' values of a document as its hit read them from their doc values,
        to be written again beside this field's (a field the document lacks stays missing)."""
        out: dict[str, Any] = {}
        got = hit.get("fields") or {}
        for meta in self.others:
            packed = (got.get(str(meta.get("values"))) or [None])[0]
            rows = unpack_vectors(packed, int(meta["dim"])) if packed else None
            if rows is None:
                continue  # none, or not whole vectors: left for that field's own fill
            listed = rows.tolist()
            out[str(meta["field"])] = [{PASSAGE_VECTOR: r} for r in listed] if meta.get("passages") else listed[0]
            out[str(meta["values"])] = packed
        return out

    def _send(self, lines: list[dict[str, Any]]) -> int:
        """One bulk request of vector updates; how many were written."""
        resp = self.engine.request("POST", f"/{path_segment(self.index)}/_bulk", body=ndjson_lines(lines),
                                   ndjson=True, context=f"writing document vectors into {self.index!r}")
        ok = 0
        for item in resp.get("items", []):
            result = next(iter(item.values()))
            status = int(result.get("status", 500))
            if status < 300:
                ok += 1
            elif status not in (404, 409):  # deleted or changed since read: the next fill sees it
                err = result.get("error") or {}
                raise EsbridgeError(f"the engine refused the vector of document {result.get('_id')!r} in "
                                    f"{self.index!r}: {err.get('type')}: {err.get('reason')}")
        return ok

    # ---- searching ----------------------------------------------------------------------

    def knn_query(self, query_vector: np.ndarray, k: int, *, among: Sequence[str] | None = None) -> dict[str, Any]:
        """The engine's query for the ``k`` documents nearest ``query_vector`` (by their best
        passage where the field holds passages), scored ``(1 + cos) / 2``; with ``among``, of
        those documents only: the engine's kNN filter, which it answers by reading their vectors
        directly where they are few, otherwise by a graph search that skips every other document."""
        vec = np.asarray(query_vector, dtype=np.float32).tolist()
        if self.type == "dense_vector":
            knn: dict[str, Any] = {"knn": {"field": self.vector_path, "query_vector": vec, "k": k,
                                           "num_candidates": min(max(k, 100), MAX_KNN_DEPTH)}}
            inner = knn["knn"]
        else:
            knn = {"knn": {self.vector_path: {"vector": vec, "k": k}}}
            inner = knn["knn"][self.vector_path]
        if among is not None:
            inner["filter"] = {"ids": {"values": list(among)}}
        if self.passages is None:
            return knn
        return {"nested": {"path": self.field, "score_mode": "max", "query": knn}}

    def search(self, query_vector: np.ndarray, k: int, *, among: Sequence[str] | None = None) -> SemanticHits:
        """The engine's ``k`` nearest documents by cosine (of their best passage), best first,
        with their cosines; with ``among``, of those documents only (ids without a vector left out)."""
        self._check_depth(k)
        if k > MAX_KNN_DEPTH:
            raise ConfigurationError(f"semantic depth k must be at most {MAX_KNN_DEPTH} where the engine searches the "
                                     f"vectors (its kNN query's limit), got {k}")
        if among is not None:
            among = list(dict.fromkeys(among))
            if not among:
                return SemanticHits([], np.zeros(0))
            k = min(k, len(among))
        body = {"size": k, "_source": False, "query": self.knn_query(query_vector, k, among=among)}
        hits = run(ids_search_plan(self.index, body, self.id_values), self.engine)["hits"]["hits"]
        ids = [str(h["_id"]) for h in hits]
        scores = np.array([2.0 * float(h["_score"]) - 1.0 for h in hits], dtype=np.float64)
        return SemanticHits(ids, scores)

    def passages_of(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Per document of ``ids`` that has vectors, its vectors as the engine holds them, one row per
        passage (one row where the field holds one vector per document)."""
        return passages_of_many([self], ids)[0]

    def _source_rows(self, value: Any) -> np.ndarray | None:
        """A document's vectors from its ``_source`` value of :attr:`field`."""
        if value and self.passages:
            rows = [p[PASSAGE_VECTOR] for p in value if isinstance(p, dict) and p.get(PASSAGE_VECTOR)]
            return np.asarray(rows, dtype=np.float32) if rows else None
        return np.asarray([value], dtype=np.float32) if value else None

    def _value_rows(self, doc_id: str, packed: str) -> np.ndarray:
        """A document's vectors from its doc value of :attr:`values`."""
        rows = unpack_vectors(packed, self.encoder.dim)
        if rows is None:
            raise EsbridgeError(f"document {doc_id!r} of {self.index!r} holds no whole vectors of "
                                f"dimension {self.encoder.dim} in {self.values!r}; index the document "
                                "again: esbridge then fills its vectors anew")
        return rows

    def vectors_of(self, ids: Sequence[str], query_vector: np.ndarray | None = None) -> np.ndarray:
        """The vectors of those ``ids`` that have one (ids without a vector are left out): each
        document's first passage, or with ``query_vector`` its passage closest to that query."""
        return self._chosen_rows(self.passages_of(ids), ids, query_vector)

    def _chosen_rows(self, got: dict[str, np.ndarray], ids: Sequence[str],
                     query_vector: np.ndarray | None = None) -> np.ndarray:
        q = None if query_vector is None else np.asarray(query_vector, dtype=np.float32)
        rows = [got[d][0 if q is None else int(np.argmax(got[d] @ q))] for d in ids if d in got]
        return np.stack(rows) if rows else np.zeros((0, self.encoder.dim), dtype=np.float32)

    def similarity(self, query_vector: np.ndarray, ids: Sequence[str]) -> np.ndarray:
        """Cosine of ``query_vector`` with the documents ``ids``, by their best passage, as
        :meth:`search` scores them (``nan`` for an id without a vector)."""
        got = self.passages_of(ids)
        q = np.asarray(query_vector, dtype=np.float32)
        return np.array([float(np.max(got[d] @ q)) if d in got else np.nan for d in ids], dtype=np.float64)


def passages_of_many(vectors: Sequence[EngineVectors], ids: Sequence[str]) -> list[dict[str, np.ndarray]]:
    """:meth:`EngineVectors.passages_of` of several vector fields at once: per index, one ``_mget`` for
    the fields kept in ``_source`` and one search (per ``VALUES_BATCH`` ids) for those in doc values,
    however many fields there are."""
    out: list[dict[str, np.ndarray]] = [{} for _ in vectors]
    if not ids:
        return out
    groups: dict[tuple[int, str], list[int]] = {}
    for i, v in enumerate(vectors):
        groups.setdefault((id(v.engine), v.index), []).append(i)
    for members in groups.values():
        first = vectors[members[0]]
        in_source = [i for i in members if vectors[i].values is None]
        if in_source:
            resp = first.engine.request(
                "POST", f"/{path_segment(first.index, patterns=True)}/_mget", body={"ids": list(ids)},
                params={"_source_includes": ",".join(vectors[i].field for i in in_source)},
                context=f"reading document vectors of {first.index!r}")
            raise_mget_errors(resp, first.index, "reading document vectors")
            for d in resp.get("docs", []):
                src = (d.get("_source") or {}) if d.get("found") else {}
                for i in in_source:
                    rows = vectors[i]._source_rows(src.get(vectors[i].field))
                    if rows is not None:
                        out[i][str(d["_id"])] = rows
        in_values = [i for i in members if vectors[i].values is not None]
        unique = list(dict.fromkeys(str(d) for d in ids)) if in_values else []
        for start in range(0, len(unique), VALUES_BATCH):
            chunk = unique[start:start + VALUES_BATCH]
            body = {"size": len(chunk), "_source": False, "query": {"ids": {"values": chunk}},
                    "docvalue_fields": [vectors[i].values for i in in_values]}
            for hit in run(ids_search_plan(first.index, body, first.id_values), first.engine)["hits"]["hits"]:
                fields = hit.get("fields") or {}
                for i in in_values:
                    packed = fields.get(vectors[i].values)
                    if packed:
                        out[i][str(hit["_id"])] = vectors[i]._value_rows(str(hit["_id"]), packed[0])
    return out


def vectors_of_many(indices: Sequence[VectorIndex | EngineVectors], ids: Sequence[str]) -> list[np.ndarray]:
    """Each index's :meth:`vectors_of` ``ids`` (every document's first vector), the engine-kept ones
    read together (:func:`passages_of_many`): one request per index for any number of models."""
    kept = [v for v in indices if isinstance(v, EngineVectors)]
    got = dict(zip(map(id, kept), passages_of_many(kept, ids)))
    return [v._chosen_rows(got[id(v)], ids) if isinstance(v, EngineVectors) else v.vectors_of(ids) for v in indices]


def open_document_vectors(engine: Engine, index: str, encoder: Encoder, *, fields: Sequence[str],
                          progress: bool = False, build: bool = True) -> EngineVectors | VectorIndex:
    """One vector per whole document of ``index`` with ``encoder``'s model: the engine's field where
    the index has one for that model (:func:`document_vector_models`), else esbridge's on-disk
    exact index; built as :func:`open_vectors` builds."""
    if encoder.name in document_vector_models(engine, index):
        return EngineVectors.open(engine, index, encoder, fields=fields, progress=progress, build=build,
                                  whole_documents=True)
    return VectorIndex.open(engine, index, encoder, fields=fields, progress=progress, build=build, windows=False)


def open_vectors(engine: Engine, index: str, encoder: Encoder, *, fields: Sequence[str],
                 progress: bool = False, build: bool = True) -> EngineVectors | VectorIndex:
    """The semantic index of ``index``: the engine's own vector field where the index has one
    (:class:`EngineVectors`), else esbridge's on-disk exact index (:class:`VectorIndex`).
    With ``build`` (the default) it is brought up to date first (missing vectors embedded, with
    progress); without, it is opened as it is, at once."""
    if vector_field_of(engine, index) is not None:
        return EngineVectors.open(engine, index, encoder, fields=fields, progress=progress, build=build)
    return VectorIndex.open(engine, index, encoder, fields=fields, progress=progress, build=build)
