"""What esbridge knows of a sentence-embedding model: where its jar is, how to read its vectors.

:data:`esbridge.semantic.models.MODELS` lists the models; :class:`~esbridge.semantic.encoder.SentenceEncoder`
reads a model's pooling, maximum input and prefixes from its spec.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_PASSAGE_TOKENS", "VECTOR_PLACES", "ModelSpec"]

#: Where a new index's document vectors may live: ``auto`` (in the engine wherever it can search
#: them, else on disk), ``engine`` or ``disk`` (:func:`esbridge.semantic.engine_vectors.new_vector_field`).
VECTOR_PLACES = ("auto", "engine", "disk")

#: Word pieces of one window ("passage") of a long text, ``[CLS]`` and ``[SEP]`` included.  Short
#: passages let a document score by the few sentences that answer a query: with all-MiniLM-L6-v2,
#: windows of 64 instead of 256 word pieces raise the semantic search's nDCG@10 on SciFact from
#: 0.6734 to 0.6932 (training queries) and on NFCorpus from 0.2810 to 0.3088 (tuning half).
DEFAULT_PASSAGE_TOKENS = 64

_GROUP = "dev.langchain4j"
_VERSION = "0.36.2"


@dataclass(frozen=True)
class ModelSpec:
    """An ONNX sentence-embedding model published as a jar on Maven Central.

    Attributes:
        name: esbridge's name of the model (``--model``).
        artifact: the jar's artifactId (group ``dev.langchain4j``, version 0.36.2).
        member: the file name stem inside the jar (``<member>.onnx``, ``<member>-tokenizer.json``).
        jar_sha256: SHA-256 of the jar.
        precision: ``"fp32"`` or ``"int8"`` (dynamically quantized weights).
        pooling: ``"mean"`` (over the non-padding word pieces) or ``"cls"`` (the first one).
        max_tokens: word pieces the model reads, ``[CLS]`` and ``[SEP]`` included.
        query_prefix / passage_prefix: text put before a query / a document or passage.
        size_mb: the jar's size, for the download message.
        passages: the passage lengths (word pieces, ``[CLS]`` and ``[SEP]`` included) a document
            is embedded at by default; with several, a document scores the mean over them of its
            best passage's cosine.  Chosen per model by measurement (docs/hybrid.md).
    """

    name: str
    artifact: str
    member: str
    jar_sha256: str
    precision: str
    pooling: str
    max_tokens: int
    query_prefix: str = ""
    passage_prefix: str = ""
    size_mb: int = 0
    passages: tuple[int, ...] = (DEFAULT_PASSAGE_TOKENS,)
    license: str = "Apache-2.0"

    @property
    def jar_name(self) -> str:
        """The jar's file name."""
        return f"{self.artifact}-{_VERSION}.jar"

    def url(self, repo: str) -> str:
        """The jar's URL in the Maven repository ``repo``."""
        return f"{repo.rstrip('/')}/{_GROUP.replace('.', '/')}/{self.artifact}/{_VERSION}/{self.jar_name}"
