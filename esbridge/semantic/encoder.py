"""A sentence-embedding model run by onnxruntime.

The model (:mod:`esbridge.semantic.models`) is a BERT encoder exported to ONNX; its word pieces
come from the model's own ``tokenizer.json`` (Hugging Face ``tokenizers``).  The graph gives one
hidden state per word piece (``last_hidden_state``); the encoder pools them the model's way —
the mean over the non-padding word pieces, or the first one (``[CLS]``) — and L2-normalises the
result, which is what the sentence-transformers reference runtime computes for these models.
Queries and documents get the model's prefixes (bge's retrieval instruction, e5's ``query: ``
and ``passage: ``).

onnxruntime runs on the CPU, or with the CUDA execution provider when the installed onnxruntime
offers it (``onnxruntime-gpu`` and a GPU).
"""

from __future__ import annotations

import copy
import importlib
import importlib.util
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from esbridge.errors import ConfigurationError
from esbridge.semantic.spec import DEFAULT_PASSAGE_TOKENS

if TYPE_CHECKING:
    from esbridge.semantic.spec import ModelSpec

__all__ = ["DEFAULT_PASSAGE_TOKENS", "REQUIRED_MODULES", "SentenceEncoder", "available", "providers"]


#: The Python packages the encoder needs (esbridge's ``semantic`` extra).
REQUIRED_MODULES = ("onnxruntime", "tokenizers")


def available() -> bool:
    """Whether the ``semantic`` extra is installed (without importing it)."""
    return all(importlib.util.find_spec(m) is not None for m in REQUIRED_MODULES)


def _require(module: str, extra: str = "semantic") -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ConfigurationError(
            f"semantic search needs the Python package {module!r}; install esbridge's "
            f"'{extra}' extra: pip install 'esbridge[{extra}]'"
        ) from None


def providers() -> list[str]:
    """The onnxruntime execution providers esbridge uses: CUDA first when onnxruntime offers it, then the CPU."""
    ort = _require("onnxruntime")
    available_providers = set(ort.get_available_providers())
    return [p for p in ("CUDAExecutionProvider", "CPUExecutionProvider") if p in available_providers] \
        or ["CPUExecutionProvider"]


#: texts per forward pass at most (:class:`SentenceEncoder`'s ``batch_size``)
BATCH_SIZE = 32
#: word pieces per forward pass at most, padding included (``batch_tokens``)
BATCH_TOKENS = 1024


def _check_texts(texts: Sequence[str]) -> None:
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise ConfigurationError(f"text {i} to embed is {type(t).__name__}, not a string")


class SentenceEncoder:
    """Texts → unit-length float32 vectors, computed by onnxruntime.

    Args:
        model_dir: a folder with ``model.onnx`` and ``tokenizer.json``
            (:func:`esbridge.semantic.models.model_dir`).
        spec: the model's facts (pooling, maximum input, prefixes).
        batch_size: at most this many texts per forward pass; texts are sorted by length first
            so a batch carries little padding.
        batch_tokens: at most this many word pieces per forward pass, padding included (a text
            longer than that alone): long texts go a few at a time, keeping a pass's attention
            matrices small, short ones ``batch_size`` at a time (measured faster for whole
            documents, the same for passages: ``benchmarks/results/encoder.md``).
        threads: onnxruntime's intra-op threads (default: onnxruntime's, the machine's cores).

    :meth:`encode` embeds documents (with the model's passage prefix), :meth:`encode_queries`
    queries (with its query prefix).  Long texts are embedded window by window (:meth:`windows`):
    ``passage_tokens`` word pieces a window, ``[CLS]``, the passage prefix and ``[SEP]``
    included, up to the model's maximum, consecutive windows overlapping by half.
    ``passage_tokens`` may name several lengths: documents are then embedded at each
    (:attr:`passage_lengths`, :meth:`at_length`) and score the mean of their best passage's
    cosine at each length.  ``None``: the lengths chosen for the model by measurement
    (:attr:`ModelSpec.passages <esbridge.semantic.spec.ModelSpec.passages>`), each at most the
    model's maximum.
    :meth:`encode` itself always reads a text up to the model's maximum (queries, and the one
    vector per document of an engine's vector field).  The encoder is safe to share between
    threads.
    """

    def __init__(self, model_dir: str | Path, spec: ModelSpec, *, batch_size: int = BATCH_SIZE,
                 batch_tokens: int = BATCH_TOKENS, threads: int | None = None,
                 passage_tokens: int | Sequence[int] | None = None) -> None:
        path = Path(model_dir)
        for required in ("model.onnx", "tokenizer.json"):
            if not (path / required).is_file():
                raise ConfigurationError(
                    f"{path} is not an ONNX sentence-embedding model folder: {required} is missing")
        for name, value in (("batch_size", batch_size), ("batch_tokens", batch_tokens)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"{name} must be an integer >= 1, got {value!r}")
        if spec.pooling not in ("mean", "cls"):
            raise ConfigurationError(f"model {spec.name}: pooling must be 'mean' or 'cls', got {spec.pooling!r}")
        self.path = path
        self.spec = spec
        self.name = spec.name
        #: word pieces the model reads, ``[CLS]`` and ``[SEP]`` included
        self.max_tokens = spec.max_tokens
        ort = _require("onnxruntime")
        tokenizers = _require("tokenizers")
        options = ort.SessionOptions()
        if threads is not None:
            options.intra_op_num_threads = max(1, threads)
        self._session = ort.InferenceSession(str(path / "model.onnx"), options, providers=providers())
        inputs = {i.name for i in self._session.get_inputs()}
        if not {"input_ids", "attention_mask"} <= inputs:
            raise ConfigurationError(f"{path / 'model.onnx'}: the graph's inputs are {sorted(inputs)}, "
                                     "expected input_ids and attention_mask")
        self._token_types = "token_type_ids" in inputs
        outputs = self._session.get_outputs()
        hidden = [o for o in outputs if o.name == "last_hidden_state"] or [o for o in outputs if len(o.shape) == 3]
        if not hidden:
            raise ConfigurationError(f"{path / 'model.onnx'}: no output holds the word pieces' hidden states")
        self._output = hidden[0].name
        self._dim = int(hidden[0].shape[-1])
        tok = tokenizers.Tokenizer.from_file(str(path / "tokenizer.json"))
        tok.no_padding()
        tok.enable_truncation(max_length=self.max_tokens)
        self._tokenizer = tok
        full = tokenizers.Tokenizer.from_file(str(path / "tokenizer.json"))
        full.no_padding()
        full.no_truncation()
        self._full_tokenizer = full
        self._passage_prefix_ids: list[int] = list(full.encode(spec.passage_prefix, add_special_tokens=False).ids) \
            if spec.passage_prefix else []
        if passage_tokens is None:
            lengths = tuple(min(n, self.max_tokens) for n in spec.passages)
        elif isinstance(passage_tokens, Sequence) and not isinstance(passage_tokens, str):
            lengths = tuple(passage_tokens)
        else:
            lengths = (passage_tokens,)
        if not lengths:
            raise ConfigurationError("passage_tokens must name at least one passage length")
        for n in lengths:
            self._check_passage_tokens(n)
        #: every passage length a document is embedded at (:meth:`at_length`); a document scores
        #: the mean over these lengths of its best passage's cosine (:mod:`esbridge.semantic.vectors`)
        self.passage_lengths: tuple[int, ...] = tuple(dict.fromkeys(lengths))
        #: word pieces of one window of :meth:`windows`, ``[CLS]``, prefix and ``[SEP]`` included
        #: (the first of :attr:`passage_lengths`)
        self.passage_tokens: int = self.passage_lengths[0]
        self.batch_size = batch_size
        self.batch_tokens = batch_tokens

    def _check_passage_tokens(self, n: object) -> None:
        low = 3 + len(self._passage_prefix_ids)
        if isinstance(n, bool) or not isinstance(n, int) or not low <= n <= self.max_tokens:
            raise ConfigurationError(f"passage_tokens must be an integer from {low} to the model's maximum "
                                     f"{self.max_tokens}, got {n!r}")

    def at_length(self, passage_tokens: int) -> SentenceEncoder:
        """The same model (the same session, shared) cutting texts into windows of
        ``passage_tokens`` word pieces only."""
        self._check_passage_tokens(passage_tokens)
        other = copy.copy(self)
        other.passage_tokens = passage_tokens
        other.passage_lengths = (passage_tokens,)
        return other

    @property
    def dim(self) -> int:
        """The vectors' dimension."""
        return self._dim

    @property
    def cache_id(self) -> str:
        """What cached vectors are filed under: the runtime and the model (whose name carries its precision)."""
        return f"onnxruntime-{self.name}"

    @property
    def providers(self) -> list[str]:
        """The execution providers the session runs on."""
        return list(self._session.get_providers())

    def tokenize(self, texts: Sequence[str], *, query: bool = False) -> list[list[int]]:
        """Word-piece ids per text, prefixed (the query or the passage prefix), with ``[CLS]``/``[SEP]``,
        truncated to the model's maximum."""
        prefix = self.spec.query_prefix if query else self.spec.passage_prefix
        return [list(e.ids) for e in self._tokenizer.encode_batch([prefix + t for t in texts])]

    @property
    def window_stride(self) -> int:
        """Word pieces between the starts of two consecutive windows (half a window's text)."""
        return max(1, (self.passage_tokens - 2 - len(self._passage_prefix_ids)) // 2)

    @property
    def first_window_is_text(self) -> bool:
        """Whether a text's first window is exactly what :meth:`encode` reads (windows as long as
        the model's maximum), so the two share one vector."""
        return self.passage_tokens == self.max_tokens

    def windows(self, texts: Sequence[str]) -> list[list[list[int]]]:
        """Each text's word pieces cut into windows ("passages") of :attr:`passage_tokens`.

        A window is ``[CLS]``, the passage prefix, consecutive word pieces of the text and
        ``[SEP]``; consecutive windows overlap by half (:attr:`window_stride`), the last one
        reaches the text's end; a text that fits has one window.  With windows of the model's
        maximum, the first window is exactly what :meth:`encode` embeds (which truncates).
        """
        _check_texts(texts)
        prefix = self._passage_prefix_ids
        body_len = self.passage_tokens - 2 - len(prefix)
        stride = self.window_stride
        out = []
        for enc in self._full_tokenizer.encode_batch(list(texts)):
            ids = list(enc.ids)
            head, body, tail = ids[:1] + prefix, ids[1:-1], ids[-1:]
            starts = [0]
            while starts[-1] + body_len < len(body):
                starts.append(starts[-1] + stride)
            out.append([head + body[s:s + body_len] + tail for s in starts])
        return out

    def encode(self, texts: Sequence[str], *, progress: Callable[[int], None] | None = None) -> np.ndarray:
        """Unit-length embeddings of documents or passages (``len(texts)`` × :attr:`dim`, float32),
        each with the model's passage prefix.

        Args:
            progress: called with the number of texts finished after each batch.
        """
        _check_texts(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self.encode_ids(self.tokenize(texts), progress=progress)

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length embeddings of queries, each with the model's query prefix."""
        _check_texts(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self.encode_ids(self.tokenize(texts, query=True))

    def encode_ids(self, ids: Sequence[Sequence[int]], *,
                   progress: Callable[[int], None] | None = None) -> np.ndarray:
        """Unit-length embeddings of word-piece sequences (each with ``[CLS]``/``[SEP]``, at most
        the model's maximum, e.g. :meth:`windows`)."""
        out = np.zeros((len(ids), self.dim), dtype=np.float32)
        if not len(ids):
            return out
        for i, row in enumerate(ids):
            if not 2 <= len(row) <= self.max_tokens:
                raise ConfigurationError(f"word-piece sequence {i} has {len(row)} ids; the model reads 2 to "
                                         f"{self.max_tokens}")
        for batch in self.batches([len(x) for x in ids]):
            out[batch] = self._forward([ids[i] for i in batch])
            if progress is not None:
                progress(len(batch))
        return out

    def batches(self, lengths: Sequence[int]) -> list[np.ndarray]:
        """The forward passes :meth:`encode_ids` makes of sequences of ``lengths`` word pieces: their
        positions, shortest first, each pass at most :attr:`batch_size` of them and, padded to its
        longest, at most :attr:`batch_tokens` word pieces (a longer one alone)."""
        order = np.argsort(np.asarray(lengths, dtype=np.int64), kind="stable")
        out = []
        start = 0
        while start < len(order):
            end = start + 1
            while (end < len(order) and end - start < self.batch_size
                   and (end - start + 1) * lengths[order[end]] <= self.batch_tokens):
                end += 1
            out.append(order[start:end])
            start = end
        return out

    def _forward(self, ids: Sequence[Sequence[int]]) -> np.ndarray:
        n, length = len(ids), max(len(x) for x in ids)
        tok = np.zeros((n, length), dtype=np.int64)
        mask = np.zeros((n, length), dtype=np.int64)
        for i, row in enumerate(ids):
            tok[i, :len(row)] = row
            mask[i, :len(row)] = 1
        feed = {"input_ids": tok, "attention_mask": mask}
        if self._token_types:
            feed["token_type_ids"] = np.zeros_like(tok)
        (hidden,) = self._session.run([self._output], feed)
        hidden = np.asarray(hidden, dtype=np.float32)
        if self.spec.pooling == "cls":
            pooled = hidden[:, 0]
        else:
            m = mask.astype(np.float32)[:, :, None]
            pooled = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
        norm = np.linalg.norm(pooled, axis=1, keepdims=True)
        result: np.ndarray = (pooled / np.maximum(norm, 1e-12)).astype(np.float32)
        return result
