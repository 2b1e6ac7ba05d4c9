"""Index bodies built from the JSON files in ``mappings/``.

An esbridge index has, for every text field ``f`` (default ``title`` and
``text``), the base channel in ``f`` itself (analysed by the base analyzer, with stored term
vectors) and ``f.length`` (the exact base-channel token count); the fields are also copied
into a combined all-fields field, which has the base channel itself and the other channels
as sub-fields ``.prefix``, ``.bigram`` and ``.micro``.  Indices created before the base
channel moved into the field itself have it as a sub-field ``.base`` (their layout says so).
The other channels of each text field (``f.prefix``, ...), which only per-field scoring of
those channels reads, are added with ``field_channels`` (indices created before this choice
existed have them all).  The layout is recorded in the mapping's ``_meta`` so that any later
session can read it back with :func:`read_layout`.
"""

from __future__ import annotations

import copy
import json
import logging
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from importlib import resources
from typing import Any

from esbridge.engine.calls import check_index_name, path_segment
from esbridge.engine.client import Engine
from esbridge.engine.plan import Call, Plan, run
from esbridge.engine.plugins import PLUGIN_NAME, similarity_on_every_node_plan
from esbridge.errors import ConfigurationError, EngineError
from esbridge.painless import (
    ScriptedSimilarity,
    SimilarityKind,
    failing_scripts,
    require_painless,
    resolve_similarities,
)

log = logging.getLogger(__name__)

#: What ``similarity=`` accepts: a scripted similarity's name or object, or several.
SimilaritySpec = (
    str | SimilarityKind | ScriptedSimilarity | Sequence[str | SimilarityKind | ScriptedSimilarity] | None
)

#: Name of the combined all-fields field unless the index says otherwise.
DEFAULT_COMBINED = "esb_all"
_FIELD_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
#: A text field of an existing index given esbridge's channels: a field path (objects joined by dots).
_FIELD_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z_][A-Za-z0-9_-]*)*$")


def load_mapping_file(name: str) -> Any:
    """Parse ``mappings/<name>`` (shipped with the package)."""
    path = resources.files("esbridge.resources").joinpath("mappings", name)
    return json.loads(path.read_text("utf-8"))


def channel_analyzers() -> dict[str, str]:
    """Channel name -> analyzer name, from ``mappings/channels.json``."""
    return {ch: spec["analyzer"] for ch, spec in load_mapping_file("channels.json").items()}


@dataclass(frozen=True)
class IndexLayout:
    """Which text fields an index has and how esbridge reads each channel of them.

    An esbridge index (``plain=False``, the default) has, per text field ``f``, the
    channel sub-fields ``f.<channel>`` and a combined all-fields field with the same
    sub-fields.  A *plain* index (``plain=True``: any index whose text fields have no
    esbridge sub-fields, see :func:`esbridge.index.open_layout`) has only the ``base``
    channel, which is each text field itself, analysed by its own analyzer; its combined
    field is *virtual*: the statistics and term vectors of its text fields taken together
    (see :meth:`indexed`), never a field of the index.

    Attributes:
        fields: the text fields (each with channel sub-fields, or for a plain index the
            fields themselves).
        combined: the combined all-fields field (for a plain index a name only).
        channels: the channel names (sub-field suffixes).
        id_field: the source field holding the document id (also the ``_id``).
        plain: the index is a plain one (see above).
        search_analyzer: for a plain index, the analyzer its fields are searched with
            (every field has the same); query text is analysed by it, in the engine.
        doc_paths: for a plain index, ``(field, path)`` pairs of fields whose value is the
            ``_source`` at another path (a multi-field: its parent).
        positions: for a plain index, the fields whose analyzer may put several tokens at
            one position (a custom analyzer): their lengths are counted in positions, as
            Lucene's length norm counts them.
        field_channels: the channels each text field has a sub-field of (the combined field
            has every channel); ``base`` always.  Default ``("base",)``: the other channels
            of a text field are read only by per-field scoring of those channels (a
            multi-channel scorer with field weights), and each costs an analysis of the field
            at every write.
        base_subfield: the base channel is the sub-field ``<field>.base`` (indices created
            before it moved into the field itself, and existing indices given esbridge's
            channels, whose fields keep their own analyzer); default ``False``: the field itself.
        term_vectors: the channel sub-fields store term vectors (default).  ``False``: they
            store none, and their similarity is the ``esbridge-features`` engine plugin's
            ``esbridge_bm25`` (the engine's BM25, scoring as before), whose norms keep each
            document's exact length and distinct terms: the plugin reads those, and
            ``_mtermvectors`` reads analyse the documents' ``_source`` again; the ``length``
            token counts are left out too, unless scripted similarities are asked for (the
            in-engine rescorer reads them).  Cheaper to index; the index opens only on nodes
            with the plugin.
        id_values: a keyword field whose doc values hold each document's ``_id`` (``None``: the
            index has none).  Set in every index esbridge creates (:data:`ID_VALUES`, left out of
            ``_source``; or the source field ``id_field`` where the ids come from one): a search
            that needs only its hits' ids (a first stage without ``_source``) reads them from
            there instead of the stored fields, which the engine reads a compressed block of per
            hit.  A hit without the value (a document written by another client) is read again
            the usual way.
    """

    fields: tuple[str, ...] = ("title", "text")
    combined: str = DEFAULT_COMBINED
    channels: tuple[str, ...] = ("base", "prefix", "bigram", "micro")
    id_field: str = "_id"
    plain: bool = False
    search_analyzer: str | None = None
    doc_paths: tuple[tuple[str, str], ...] = ()
    positions: tuple[str, ...] = ()
    field_channels: tuple[str, ...] = ("base",)
    base_subfield: bool = False
    term_vectors: bool = True
    id_values: str | None = None

    def __post_init__(self) -> None:
        unknown = [ch for ch in self.field_channels if ch not in self.channels]
        if unknown or "base" not in self.field_channels:
            raise ConfigurationError(
                f"field_channels must include 'base' and name only the layout's channels {list(self.channels)}, "
                f"got {list(self.field_channels)}")
        if not self.fields:
            raise ConfigurationError("an esbridge index needs at least one text field")
        if self.plain:
            for name in self.fields:
                if not isinstance(name, str) or not name.strip() or name != name.strip() or any(
                        c in name for c in ",*"):
                    raise ConfigurationError(f"text field name {name!r} must be a field path without ',' or '*'")
            if tuple(self.channels) != ("base",):
                raise ConfigurationError(f"a plain index has only the base channel, not {list(self.channels)}")
            if not self.search_analyzer:
                raise ConfigurationError("a plain index layout needs the search analyzer of its fields")
            if not self.term_vectors:
                raise ConfigurationError("a plain index's fields are the user's own: term_vectors=False describes "
                                         "only an index esbridge created")
        else:
            for name in (*self.fields, self.combined):
                if not _FIELD_PATH.match(name):
                    raise ConfigurationError(
                        f"field name {name!r} must start with a letter and hold only letters, digits and _"
                    )
        if self.id_values is not None and self.id_values in (*self.fields, self.combined):
            raise ConfigurationError(f"the id values field {self.id_values!r} must not also be a text field")
        if self.combined in self.fields:
            raise ConfigurationError(
                f"the combined field {self.combined!r} must not also be a text field"
            )
        if len(set(self.fields)) != len(self.fields):
            raise ConfigurationError(f"text fields are repeated: {list(self.fields)}")

    def subfield(self, field: str, channel: str) -> str:
        """``<field>.<channel>``, the indexed sub-field of one channel.

        For a plain index: the field itself (its only channel is ``base``), and for the
        virtual combined field a name that is no field of the index (a key for caches and
        statistics; :meth:`indexed` says which fields it stands for).
        """
        if not self.plain:
            if channel == "base" and not self.base_subfield:
                return field
            return f"{field}.{channel}"
        if channel not in self.channels:
            raise ConfigurationError(f"a plain index has no {channel!r} channel, only base")
        if field == self.combined:
            return f"{self.combined}({','.join(self.fields)})"
        return field

    def lacks(self, fields: Sequence[str], channels: Sequence[str]) -> list[str]:
        """The channels of ``channels`` that some text field of ``fields`` has no sub-field of
        (the combined field has every channel)."""
        if self.plain or all(f == self.combined for f in fields):
            return []
        return [ch for ch in channels if ch not in self.field_channels]

    def members(self, field: str) -> tuple[str, ...]:
        """The text fields behind ``field``: the text fields for a plain index's virtual
        combined field, else ``field`` itself."""
        if self.plain and field == self.combined:
            return tuple(self.fields)
        return (field,)

    def indexed(self, field: str, channel: str) -> tuple[str, ...]:
        """The fields of the index that hold ``channel`` of ``field``: its sub-field, or for a
        plain index's virtual combined field every text field (their term frequencies are
        added up, their statistics merged as Lucene's ``combined_fields`` query merges them)."""
        return tuple(self.subfield(m, channel) for m in self.members(field))

    def doc_path(self, field: str) -> str:
        """Where the value of ``field`` is in a document's ``_source`` (a multi-field's is its
        parent's)."""
        return dict(self.doc_paths).get(field, field)

    def analysis(self, channel: str) -> dict[str, str]:
        """How the engine's ``_analyze`` turns query text into ``channel``'s terms: the
        ``field`` or ``analyzer`` parameter of that request."""
        if self.plain:
            if channel not in self.channels:
                raise ConfigurationError(f"a plain index has no {channel!r} channel, only base")
            return {"analyzer": str(self.search_analyzer)}
        return {"field": self.subfield(self.combined, channel)}

    def all_subfields(self) -> list[str]:
        """Every channel sub-field of every text field and of the combined field (for a
        plain index: the text fields)."""
        if self.plain:
            return list(self.fields)
        return [self.subfield(f, ch) for f in self.fields for ch in self.field_channels] + \
            [self.subfield(self.combined, ch) for ch in self.channels]

    def to_meta(self) -> dict[str, Any]:
        return {"fields": list(self.fields), "combined": self.combined,
                "channels": list(self.channels), "id_field": self.id_field,
                "field_channels": list(self.field_channels), "base_subfield": self.base_subfield,
                "term_vectors": self.term_vectors,
                **({"id_values": self.id_values} if self.id_values is not None else {})}


#: The similarity type of the ``esbridge-features`` plugin whose norms keep exact lengths
#: (:attr:`IndexLayout.term_vectors`), and the name an index's settings give it.
EXACT_SIMILARITY_TYPE = "esbridge_bm25"
EXACT_SIMILARITY = "esbridge_exact"

#: The keyword field (doc values only, left out of ``_source``) holding each document's ``_id`` in an
#: index esbridge creates (:attr:`IndexLayout.id_values`).
ID_VALUES = "esbridge_id"

#: The field holding a document's embedding where the engine searches vectors itself.
VECTOR_FIELD = "esbridge_vector"


#: The sub-field of a nested passage vector (:attr:`VectorField.passages`): ``esbridge_vector.vector``.
PASSAGE_VECTOR = "vector"

#: The engines' dense-vector field types esbridge can index and search.
VECTOR_TYPES = ("knn_vector", "dense_vector")
#: What :attr:`VectorField.quantization` takes: float vectors in the graph, or the engine's quantizers.
QUANTIZATIONS = (None, "int8", "bbq")


@dataclass(frozen=True)
class VectorField:
    """A dense-vector field the engine indexes for approximate kNN search.

    ``type`` is the engine's: ``"knn_vector"`` (OpenSearch's k-NN plugin, Lucene's HNSW, cosine
    similarity; the Lucene engine needs no native library) or ``"dense_vector"``
    (Elasticsearch 8, HNSW of float vectors, cosine similarity).  With ``passages``, each
    document holds one vector per passage of that many word pieces, as nested objects
    (``<name>.vector``), and a document scores by its best passage, as in esbridge's on-disk
    index; without, one vector of the whole text.  The field is recorded in
    ``_meta.esbridge.vector`` so readers know which model filled it and how.

    The vectors are left out of the stored ``_source``: every search that returns hits reads
    their ``_id`` from the same compressed blocks as ``_source``, and vectors written there as
    JSON made a search of 1,000 hits several times slower.  A copy of each document's vectors,
    float32 little-endian, one row per passage, is kept in the binary doc values of
    :attr:`values` (also left out of ``_source``), where esbridge reads them back.
    """

    dim: int
    model: str
    name: str = VECTOR_FIELD
    passages: int | None = None
    type: str = "knn_vector"
    #: ``None`` (float32 in the graph), ``"int8"`` or ``"bbq"``: the engine quantizes the vectors it
    #: searches, keeping the floats beside them, and its scores are then approximations of the cosine.
    #: ``int8``: Elasticsearch's ``int8_hnsw``, OpenSearch's Lucene scalar quantizer of 7 bits;
    #: ``bbq``: Elasticsearch's ``bbq_hnsw`` (one bit a dimension; Elasticsearch 8.18+ only)
    quantization: str | None = None
    #: With a quantized ``dense_vector``: Elasticsearch gathers ``oversample`` times the ``k``
    #: nearest by the quantized vectors and scores them again by the floats
    #: (``index_options.rescore_vector``, Elasticsearch 8.19+); ``None``: the engine's default
    oversample: float | None = None

    def __post_init__(self) -> None:
        if isinstance(self.dim, bool) or not isinstance(self.dim, int) or not 1 <= self.dim <= 16000:
            raise ConfigurationError(f"vector dimension must be an integer in [1, 16000], got {self.dim!r}")
        if not _FIELD_NAME.match(self.name):
            raise ConfigurationError(f"vector field name {self.name!r} must start with a letter and hold only "
                                     "letters, digits and _")
        if self.passages is not None and (isinstance(self.passages, bool) or not isinstance(self.passages, int)
                                          or self.passages < 8):
            raise ConfigurationError(f"vector passages must be an integer >= 8 (word pieces), got {self.passages!r}")
        if self.type not in VECTOR_TYPES:
            raise ConfigurationError(f"vector type must be one of {', '.join(VECTOR_TYPES)}, got {self.type!r}")
        if self.quantization not in QUANTIZATIONS:
            raise ConfigurationError(f"vector quantization must be None, 'int8' or 'bbq', got {self.quantization!r}")
        if self.quantization == "bbq" and self.type != "dense_vector":
            raise ConfigurationError("vector quantization 'bbq' is Elasticsearch's (bbq_hnsw, a dense_vector field); "
                                     "OpenSearch's k-NN field takes None or 'int8'")
        if self.oversample is not None:
            if self.type != "dense_vector" or self.quantization is None:
                raise ConfigurationError("vector oversample applies to a quantized Elasticsearch dense_vector field "
                                         "(quantization 'int8' or 'bbq'); leave it None here")
            if (isinstance(self.oversample, bool) or not isinstance(self.oversample, (int, float))
                    or not (self.oversample == 0 or 1.0 <= self.oversample <= 10.0)):
                raise ConfigurationError(f"vector oversample must be 0 (no rescoring) or a number in [1, 10], "
                                         f"got {self.oversample!r}")

    def _vector_mapping(self) -> dict[str, Any]:
        if self.type == "dense_vector":
            # plain HNSW of floats: Elasticsearch 8.14+ would otherwise quantize vectors of 384+
            # dimensions to int8, and its scores would no longer be the cosine
            kind = {None: "hnsw", "int8": "int8_hnsw", "bbq": "bbq_hnsw"}[self.quantization]
            options: dict[str, Any] = {"type": kind}
            if self.oversample is not None:
                options["rescore_vector"] = {"oversample": float(self.oversample)}
            return {"type": "dense_vector", "dims": self.dim, "index": True, "similarity": "cosine",
                    "index_options": options}
        method: dict[str, Any] = {"name": "hnsw", "engine": "lucene", "space_type": "cosinesimil"}
        if self.quantization == "int8":
            method["parameters"] = {"encoder": {"name": "sq", "parameters": {"bits": 7}}}
        return {"type": "knn_vector", "dimension": self.dim, "method": method}

    @property
    def values(self) -> str:
        """The binary doc-values field that holds each document's vectors for reading back."""
        return f"{self.name}_values"

    def mapping(self) -> dict[str, Any]:
        if self.passages is None:
            return self._vector_mapping()
        return {"type": "nested", "properties": {PASSAGE_VECTOR: self._vector_mapping()}}

    def to_meta(self) -> dict[str, Any]:
        meta: dict[str, Any] = {"field": self.name, "dim": self.dim, "model": self.model, "type": self.type,
                                "space": "cosinesimil" if self.type == "knn_vector" else "cosine",
                                "values": self.values}
        if self.passages is not None:
            meta["passages"] = self.passages
        if self.quantization is not None:
            meta["quantization"] = self.quantization
        if self.oversample is not None:
            meta["oversample"] = float(self.oversample)
        return meta


def build_index_body(
    layout: IndexLayout | None = None,
    *,
    shards: int = 1,
    replicas: int = 0,
    bm25: tuple[float, float] | None = None,
    meta: Mapping[str, Any] | None = None,
    similarity: SimilaritySpec = None,
    vector: VectorField | None = None,
    document_vectors: Sequence[VectorField] = (),
) -> dict[str, Any]:
    """The settings and mappings of an esbridge index.

    Args:
        layout: text fields and combined field (default ``title`` + ``text``).
        shards: number of primary shards.
        replicas: number of replicas.
        bm25: ``(k1, b)`` for the engine's BM25 on every field (default: the engine's
            own 1.2 / 0.75).
        meta: extra entries for ``_meta.esbridge`` (e.g. a content fingerprint).
        similarity: scripted similarities (``bm25_pyserini``, ``evolved``, ``bmx`` or
            :class:`~esbridge.painless.ScriptedSimilarity` objects): each adds the
            sub-field ``<field>.base_<name>`` (base analyzer, scored by it) to every text
            field and the combined field, recorded in ``_meta.esbridge.similarities``;
            the channel sub-fields are unchanged.
        vector: a dense-vector field for the engine's kNN search (OpenSearch with the k-NN
            plugin: sets ``index.knn``, which cannot be changed after creation; Elasticsearch 8).
        document_vectors: more dense-vector fields of one vector per whole document
            (:func:`document_vector_field`, one per model, no ``passages``), for the hybrid
            pipeline's whole-document lists; recorded in ``_meta.esbridge.document_vectors``.
    """
    layout = layout or IndexLayout()
    _check_document_vectors(vector, document_vectors)
    sims = resolve_similarities(similarity)
    _check_body_args(layout, shards, replicas, bm25)
    body: dict[str, Any] = load_mapping_file("index.json")
    index_settings = body["settings"]["index"]
    index_settings["number_of_shards"] = shards
    index_settings["number_of_replicas"] = replicas
    body["settings"]["analysis"] = load_mapping_file("analysis.json")
    similarities: dict[str, Any] = {}
    if bm25 is not None:
        similarities["default"] = {"type": "BM25", "k1": bm25[0], "b": bm25[1]}
    props = _text_properties(layout, sims, bm25, similarities)
    if similarities:
        body["settings"]["similarity"] = similarities
    excluded, id_values = _id_property(layout, props)
    for field in (vector, *document_vectors):
        if field is not None:
            excluded += _vector_properties(field, props, index_settings)
    if excluded:
        body["mappings"]["_source"] = {"excludes": excluded}
    body["mappings"]["properties"] = props
    body["mappings"]["_meta"] = {"esbridge": {**replace(layout, id_values=id_values).to_meta(), **dict(meta or {})}}
    if vector is not None:
        body["mappings"]["_meta"]["esbridge"]["vector"] = vector.to_meta()
    if document_vectors:
        body["mappings"]["_meta"]["esbridge"]["document_vectors"] = [f.to_meta() for f in document_vectors]
    if sims:
        body["mappings"]["_meta"]["esbridge"]["similarities"] = {s.name: s.meta() for s in sims}
    return body


def _check_body_args(layout: IndexLayout, shards: int, replicas: int, bm25: tuple[float, float] | None) -> None:
    """:func:`build_index_body`'s arguments checked: an error names what is wrong."""
    if shards < 1:
        raise ConfigurationError(f"shards must be >= 1, got {shards}")
    if replicas < 0:
        raise ConfigurationError(f"replicas must be >= 0, got {replicas}")
    if bm25 is not None:
        k1, b = bm25
        if not (math.isfinite(k1) and k1 >= 0):
            raise ConfigurationError(f"bm25 k1 must be a finite number >= 0, got {k1}")
        if not (0.0 <= b <= 1.0):
            raise ConfigurationError(f"bm25 b must be in [0, 1], got {b}")
    for name in (*layout.fields, layout.combined):
        if not _FIELD_NAME.match(name):
            raise ConfigurationError(
                f"field name {name!r} must start with a letter and hold only letters, digits and _"
            )
    if layout.plain:
        raise ConfigurationError("a plain index layout describes an existing index; build_index_body needs an "
                                 "esbridge layout")


def _text_properties(layout: IndexLayout, sims: Sequence[Any], bm25: tuple[float, float] | None,
                     similarities: dict[str, Any]) -> dict[str, Any]:
    """The mappings of the text fields and the combined field, with their channel sub-fields; the
    similarities they name are added to ``similarities``."""
    field_template = load_mapping_file("text_field.json")
    known = set(field_template["fields"])
    for sim in sims:
        similarities[sim.settings_name] = sim.settings()
        field_template["fields"][sim.subfield] = sim.field_mapping(channel_analyzers()["base"])
    missing = [ch for ch in layout.channels if ch not in known]
    if missing:
        raise ConfigurationError(f"channels {missing} have no sub-field in mappings/text_field.json")
    props: dict[str, Any] = {}
    for name in layout.fields:
        spec = copy.deepcopy(field_template)
        for ch in layout.channels:
            if ch not in layout.field_channels:
                del spec["fields"][ch]
        spec["copy_to"] = [layout.combined]
        props[name] = spec
    props[layout.combined] = copy.deepcopy(field_template)
    if not layout.base_subfield:  # the field itself is the base channel (same analyzer, term vectors)
        for spec in props.values():
            spec["fields"].pop("base", None)
    if not layout.term_vectors:
        exact: dict[str, Any] = {"type": EXACT_SIMILARITY_TYPE}
        if bm25 is not None:
            exact.update(k1=bm25[0], b=bm25[1])
        similarities[EXACT_SIMILARITY] = exact
        channel_subfields = set(layout.channels)
        for spec in props.values():
            for sub in (spec, *(v for k, v in spec["fields"].items() if k in channel_subfields)):
                sub.pop("term_vector", None)
                sub["similarity"] = EXACT_SIMILARITY
            if not sims:  # the norms hold the exact lengths; only the in-engine rescorer reads the token counts
                spec["fields"].pop("length", None)
    return props


def _id_property(layout: IndexLayout, props: dict[str, Any]) -> tuple[list[str], str]:
    """The field holding the documents' ids in doc values, added to ``props``: the fields to leave
    out of ``_source``, and its name."""
    if layout.id_field != "_id":
        props[layout.id_field] = {"type": "keyword"}  # in _source and in doc values: the id values too
        return [], layout.id_field
    if ID_VALUES in props:
        raise ConfigurationError(f"a text field may not be called {ID_VALUES!r}: esbridge keeps the documents' "
                                 "ids in a field of that name")
    props[ID_VALUES] = {"type": "keyword", "index": False, "doc_values": True}
    return [ID_VALUES], ID_VALUES


def document_vector_field(model: str, dim: int, type: str = "knn_vector", *,
                          quantization: str | None = None, oversample: float | None = None) -> VectorField:
    """The field of one vector per whole document of ``model`` (``esbridge_document_<model>``, the
    model's name with every character other than a letter or digit written ``_``)."""
    return VectorField(dim=dim, model=model, name=f"esbridge_document_{re.sub(r'[^A-Za-z0-9]', '_', model)}",
                       type=type, quantization=quantization, oversample=oversample)


def _check_document_vectors(vector: VectorField | None, document_vectors: Sequence[VectorField]) -> None:
    models = [f.model for f in document_vectors]
    for f in document_vectors:
        if f.passages is not None:
            raise ConfigurationError(f"document vector field {f.name!r} holds one vector per whole document: "
                                     "it takes no passages")
        if vector is not None and f.type != vector.type:
            raise ConfigurationError(f"document vector field {f.name!r} is a {f.type}, the vector field a "
                                     f"{vector.type}: one engine's vectors")
    if len(set(models)) != len(models):
        raise ConfigurationError(f"one document vector field per model, got {', '.join(models)}")


def _vector_properties(vector: VectorField, props: dict[str, Any], index_settings: dict[str, Any]) -> list[str]:
    """The vector field and its doc-values copy, added to ``props`` (and the index settings the
    engine's kNN needs); the fields to leave out of ``_source``."""
    for name in (vector.name, vector.values):
        if name in props:
            raise ConfigurationError(f"the vector field {name!r} would replace a text field of that name")
    props[vector.name] = vector.mapping()
    props[vector.values] = {"type": "binary", "doc_values": True}
    if vector.type == "knn_vector":
        index_settings["knn"] = True
        # Not the plugin's "derived source" (its default since 3.0; esbridge leaves the vectors out
        # of _source itself): with it the documents of a shard could not be read after a scroll
        # over it had ended (OpenSearch 3.5: "already_closed_exception" on every later get).
        index_settings["knn.derived_source.enabled"] = False
    return [vector.name, vector.values]


def create_index(
    engine: Engine,
    index: str,
    layout: IndexLayout | None = None,
    *,
    shards: int = 1,
    replicas: int = 0,
    bm25: tuple[float, float] | None = None,
    meta: Mapping[str, Any] | None = None,
    body: Mapping[str, Any] | None = None,
    similarity: SimilaritySpec = None,
    vector: VectorField | None = None,
    term_vectors: bool | None = None,
    document_vectors: Sequence[VectorField] = (),
) -> dict[str, Any]:
    """Create ``index`` with esbridge's mapping (or ``body``) and wait for it to be usable.

    ``vector`` adds a dense-vector field and ``document_vectors`` whole-document ones (see
    :func:`build_index_body`); an engine without vector search refuses them with a clear error.

    ``term_vectors`` (:attr:`IndexLayout.term_vectors`): ``None`` (default) stores none where
    every node of the cluster runs esbridge's ``esbridge-features`` plugin, unless ``layout``
    asks for them; ``False`` without the plugin on every node is refused.

    Raises:
        EngineError: when the engine rejects the index, saying which setting and why
            (for a scripted similarity: the ``painless/`` file and Painless's ``script_stack``).
    """
    sims = resolve_similarities(similarity)
    scripts = [s for sim in sims for s in sim.scripts()]
    if sims:
        require_painless(engine, f"create index {index!r} with the scripted similarities "
                                 f"{', '.join(sim.name for sim in sims)}")
    if body is None:
        wanted = vector or (document_vectors[0] if document_vectors else None)
        if wanted is not None and engine.vector_search() != wanted.type:
            can = engine.vector_search()
            raise ConfigurationError(
                f"{engine.info.label} has no {wanted.type} vector search"
                + (f" (its vectors are {can}: VectorField(type={can!r}))" if can else
                   " esbridge can use (OpenSearch's k-NN plugin, Elasticsearch 8.12+)")
                + "; or create the index without a vector field, and esbridge keeps the vectors on disk"
            )
        layout = replace(layout or IndexLayout(), term_vectors=_stores_term_vectors(engine, layout, term_vectors))
        body = build_index_body(layout, shards=shards, replicas=replicas, bm25=bm25, meta=meta,
                                similarity=sims, vector=vector, document_vectors=document_vectors)
    try:
        engine.request("PUT", f"/{path_segment(check_index_name(index))}", body=dict(body),
                       params={"wait_for_active_shards": "1"})
    except EngineError as err:
        culprits = failing_scripts(err, scripts)
        where = "".join(f" (in {s.location})" for s in culprits)
        stack = ("\nscript_stack:\n  " + "\n  ".join(err.script_stack)) if err.script_stack else ""
        raise EngineError(
            f"the engine rejected index {index!r}: {err.error_type}: {err.reason}"
            + _setting_hint(err) + where + stack,
            status=err.status, error_type=err.error_type, reason=err.reason,
            root_cause=err.root_cause, index=index, script_stack=err.script_stack, body=err.body,
        ) from err
    engine.request("GET", "/_cluster/health/" + path_segment(index),
                   params={"wait_for_status": "yellow", "timeout": "60s"},
                   context=f"waiting for index {index!r}")
    _wait_for_replicas(engine, index, body)
    return dict(body)


def _stores_term_vectors(engine: Engine, layout: IndexLayout | None, asked: bool | None) -> bool:
    """Whether a new index stores term vectors (see :func:`create_index`)."""
    if asked is None and layout is not None and not layout.term_vectors:
        asked = False
    if asked:
        return True
    everywhere = run(similarity_on_every_node_plan(engine), engine)
    if asked is None:
        return not everywhere
    if not everywhere:
        raise ConfigurationError(
            f"an index without term vectors needs esbridge's {PLUGIN_NAME} plugin (1.3.0 or later) on every node "
            f"of the cluster (GET _nodes/plugins), and {engine.info.label} lacks it somewhere; install it "
            "(esbridge plugin build) or store term vectors (term_vectors=True)")
    return False


def _wait_for_replicas(engine: Engine, index: str, body: Mapping[str, Any]) -> None:
    """Where the cluster has a node for every copy, wait (up to 60 s) until the new index's
    replicas are active: a document written before its shard's replica has started lives on
    one node only, and losing that node would leave the shard without an in-sync copy (no
    replica can take over), so writes fail until the node comes back."""
    settings: Mapping[str, Any] = body.get("settings") or {}
    nested: Mapping[str, Any] = settings.get("index") or {}
    value = nested.get("number_of_replicas", settings.get("index.number_of_replicas", 0))
    try:
        replicas = int(value)
    except (TypeError, ValueError):
        return
    if replicas < 1:
        return
    health = engine.request("GET", "/_cluster/health", context=f"waiting for the replicas of index {index!r}")
    if int(health.get("number_of_data_nodes", 1)) <= replicas:
        return  # not enough nodes for every copy: the index stays yellow
    try:
        engine.request("GET", "/_cluster/health/" + path_segment(index),
                       params={"wait_for_status": "green", "timeout": "60s"},
                       context=f"waiting for the replicas of index {index!r}")
    except EngineError as err:
        if err.status != 408:
            raise
        log.warning("the replicas of index %r did not all start within 60s; until they do, losing a node "
                    "can make part of it unavailable (GET _cluster/allocation/explain says why)", index)


def _setting_hint(err: EngineError) -> str:
    reason = err.reason or ""
    m = re.search(r"\[([a-z0-9_.]+)\]", reason)
    return f" (setting or field: {m.group(1)})" if m else ""


def read_layout(engine: Engine, index: str) -> IndexLayout:
    """The layout recorded in ``index``'s mapping.

    Raises:
        ConfigurationError: the index was not created by esbridge (no ``_meta.esbridge``).
    """
    return run(read_layout_plan(index), engine)


def read_layout_plan(index: str) -> Plan[IndexLayout]:
    """:func:`read_layout` as a plan (:mod:`esbridge.engine.plan`)."""
    meta = yield from index_meta_plan(index)
    if not meta:
        raise ConfigurationError(
            f"index {index!r} has no esbridge layout in its mapping; create it with "
            "`esbridge index` (or esbridge.index.create_index), or add esbridge's channel sub-fields to it "
            f"with `esbridge index --add-channels --index {index}` (esbridge.index.add_channels)"
        )
    return layout_from_meta(meta)


def layout_from_meta(meta: Mapping[str, Any]) -> IndexLayout:
    """The layout an index's ``_meta.esbridge`` entries record."""
    channels = tuple(meta["channels"])
    return IndexLayout(
        fields=tuple(meta["fields"]),
        combined=meta["combined"],
        channels=channels,
        id_field=meta.get("id_field", "_id"),
        # indices created before field_channels existed have every channel in every field
        field_channels=tuple(meta.get("field_channels") or channels),
        # ... and their base channel in a sub-field <field>.base
        base_subfield=bool(meta.get("base_subfield", True)),
        term_vectors=bool(meta.get("term_vectors", True)),
        # indices created before it have no id values
        id_values=meta.get("id_values") if isinstance(meta.get("id_values"), str) else None,
    )


def index_meta(engine: Engine, index: str) -> dict[str, Any]:
    """The ``_meta.esbridge`` entries of ``index`` (empty if none)."""
    return run(index_meta_plan(index), engine)


def index_meta_plan(index: str) -> Plan[dict[str, Any]]:
    """:func:`index_meta` as a plan (:mod:`esbridge.engine.plan`)."""
    resp = yield Call("GET", f"/{path_segment(index, patterns=True)}/_mapping",
                      context=f"reading the mapping of {index!r}")
    for _name, spec in resp.items():
        meta = (spec.get("mappings") or {}).get("_meta", {}).get("esbridge")
        if meta:
            return dict(meta)
    return {}


def sequence_of_fields(value: str | Sequence[str]) -> tuple[str, ...]:
    """``"title,text"`` or ``["title", "text"]`` -> ``("title", "text")``."""
    if isinstance(value, str):
        value = [v for v in value.split(",")]
    out = tuple(v.strip() for v in value if v.strip())
    if not out:
        raise ConfigurationError("no text fields given")
    return out
