"""A sentence-embedding model evaluated in numpy.

The model is a BERT encoder (all-MiniLM-L6-v2 by default: 6 layers, hidden size
384, 12 heads) followed by mean pooling over the non-padding tokens and L2
normalisation, which is what the sentence-transformers reference runtime
computes for it.  The weights are read from a ``model.safetensors`` file, the
word pieces from the model's own ``tokenizer.json`` (Hugging Face
``tokenizers``), so no deep-learning framework is needed.

One layer, for hidden states ``X`` (tokens × d) and the attention mask ``M``::

    A   = softmax(Q Kᵀ / √(d/h) + M) V          per head, Q, K, V = X W{q,k,v}ᵀ + b
    X'  = LayerNorm(X + A Woᵀ + bo)
    X'' = LayerNorm(X' + GELU(X' W1ᵀ + b1) W2ᵀ + b2)

with the exact GELU ``x · Φ(x) = x/2 · (1 + erf(x/√2))`` and LayerNorm's
ε = 1e-12 (BERT's).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from esbridge.errors import ConfigurationError

__all__ = ["DEFAULT_PASSAGE_TOKENS", "REQUIRED_MODULES", "EncoderConfig", "SentenceEncoder", "available"]

#: Word pieces of one window ("passage") of a long text, ``[CLS]`` and ``[SEP]`` included.  Short
#: passages let a document score by the few sentences that answer a query: with all-MiniLM-L6-v2,
#: windows of 64 instead of 256 word pieces raise the semantic search's nDCG@10 on SciFact from
#: 0.6734 to 0.6932 (training queries) and on NFCorpus from 0.2810 to 0.3088 (tuning half).
DEFAULT_PASSAGE_TOKENS = 64


#: The Python packages the encoder needs (esbridge's ``semantic`` extra).
REQUIRED_MODULES = ("tokenizers", "safetensors", "scipy", "threadpoolctl")


def available() -> bool:
    """Whether the ``semantic`` extra is installed (without importing it)."""
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in REQUIRED_MODULES)


def _require(module: str, extra: str = "semantic") -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ConfigurationError(
            f"semantic search needs the Python package {module!r}; install esbridge's "
            f"'{extra}' extra: pip install 'esbridge[{extra}]'"
        ) from None


@dataclass(frozen=True)
class EncoderConfig:
    """The architecture, read from the model's ``config.json`` and ``sentence_bert_config.json``."""

    hidden: int
    heads: int
    layers: int
    max_tokens: int
    layer_norm_eps: float = 1e-12

    @classmethod
    def from_dir(cls, path: Path) -> EncoderConfig:
        cfg = json.loads((path / "config.json").read_text())
        if cfg.get("model_type") != "bert" or cfg.get("hidden_act") != "gelu":
            raise ConfigurationError(
                f"{path}: only BERT encoders with GELU are supported, got model_type="
                f"{cfg.get('model_type')!r}, hidden_act={cfg.get('hidden_act')!r}"
            )
        st_cfg_path = path / "sentence_bert_config.json"
        max_tokens = int(cfg.get("max_position_embeddings", 512))
        if st_cfg_path.exists():
            max_tokens = min(max_tokens, int(json.loads(st_cfg_path.read_text()).get("max_seq_length", max_tokens)))
        pooling = path / "1_Pooling" / "config.json"
        if pooling.exists():
            pool = json.loads(pooling.read_text())
            if not pool.get("pooling_mode_mean_tokens") or pool.get("pooling_mode_cls_token"):
                raise ConfigurationError(f"{path}: only mean pooling is supported")
        return cls(hidden=int(cfg["hidden_size"]), heads=int(cfg["num_attention_heads"]),
                   layers=int(cfg["num_hidden_layers"]), max_tokens=max_tokens,
                   layer_norm_eps=float(cfg.get("layer_norm_eps", 1e-12)))


def _check_texts(texts: Sequence[str]) -> None:
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise ConfigurationError(f"text {i} to embed is {type(t).__name__}, not a string")


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    mu = x.mean(axis=-1, keepdims=True)
    xc = x - mu
    var = np.mean(xc * xc, axis=-1, keepdims=True)
    out: np.ndarray = xc / np.sqrt(var + eps) * w + b
    return out


class SentenceEncoder:
    """Texts → unit-length float32 vectors, the model's reference computation in numpy.

    Args:
        model_dir: a folder with ``config.json``, ``tokenizer.json`` and ``model.safetensors``
            (a sentence-transformers model folder).
        batch_size: texts per forward pass; texts are sorted by length first so a batch
            carries little padding.

    Long texts are embedded window by window (:meth:`windows`): ``passage_tokens`` word pieces a
    window, ``[CLS]`` and ``[SEP]`` included, from 3 to the model's maximum (256 for
    all-MiniLM-L6-v2; ``None``: :data:`DEFAULT_PASSAGE_TOKENS`, or the model's maximum if that
    is smaller), consecutive windows overlapping by half.
    :meth:`encode` itself always reads a text up to the model's maximum (queries, and the one
    vector per document of an engine's vector field).

    Batches run on ``workers`` threads (default: the machine's cores), each with a
    single-threaded BLAS for the duration of :meth:`encode`: numpy's element-wise
    steps (softmax, GELU, LayerNorm) use one core each, so several batches at once
    use the machine better than one batch on a multi-threaded BLAS.  The encoder is
    safe to share between threads.
    """

    def __init__(self, model_dir: str | Path, *, batch_size: int = 16, name: str | None = None,
                 workers: int | None = None, passage_tokens: int | None = None) -> None:
        path = Path(model_dir)
        for required in ("config.json", "tokenizer.json", "model.safetensors"):
            if not (path / required).is_file():
                raise ConfigurationError(f"{path} is not a sentence-embedding model folder: {required} is missing")
        if batch_size < 1:
            raise ConfigurationError(f"batch_size must be >= 1, got {batch_size}")
        self.path = path
        self.name = name or path.name
        self.config = EncoderConfig.from_dir(path)
        if passage_tokens is None:
            passage_tokens = min(DEFAULT_PASSAGE_TOKENS, self.config.max_tokens)
        if isinstance(passage_tokens, bool) or not isinstance(passage_tokens, int) \
                or not 3 <= passage_tokens <= self.config.max_tokens:
            raise ConfigurationError(f"passage_tokens must be an integer from 3 to the model's maximum "
                                     f"{self.config.max_tokens}, got {passage_tokens!r}")
        #: word pieces of one window of :meth:`windows`, ``[CLS]`` and ``[SEP]`` included
        self.passage_tokens = passage_tokens
        self.batch_size = batch_size
        self.workers = max(1, workers if workers is not None else (os.cpu_count() or 1))
        self._threadpoolctl = _require("threadpoolctl")
        tokenizers = _require("tokenizers")
        st_numpy = _require("safetensors.numpy")
        self._erf: Callable[[np.ndarray], np.ndarray] = _require("scipy.special").erf
        tok = tokenizers.Tokenizer.from_file(str(path / "tokenizer.json"))
        tok.no_padding()
        tok.enable_truncation(max_length=self.config.max_tokens)
        self._tokenizer = tok
        full = tokenizers.Tokenizer.from_file(str(path / "tokenizer.json"))
        full.no_padding()
        full.no_truncation()
        self._full_tokenizer = full
        w = st_numpy.load_file(str(path / "model.safetensors"))
        self._w = {k.removeprefix("bert."): np.ascontiguousarray(v) for k, v in w.items()}
        # pre-transpose and fuse Q, K, V so each layer is three matrix products
        self._layers = []
        for i in range(self.config.layers):
            p = f"encoder.layer.{i}."
            g = self._w.__getitem__
            qkv_w = np.concatenate([g(p + "attention.self.query.weight"), g(p + "attention.self.key.weight"),
                                    g(p + "attention.self.value.weight")]).T.copy()
            qkv_b = np.concatenate([g(p + "attention.self.query.bias"), g(p + "attention.self.key.bias"),
                                    g(p + "attention.self.value.bias")])
            self._layers.append((
                qkv_w, qkv_b,
                g(p + "attention.output.dense.weight").T.copy(), g(p + "attention.output.dense.bias"),
                g(p + "attention.output.LayerNorm.weight"), g(p + "attention.output.LayerNorm.bias"),
                g(p + "intermediate.dense.weight").T.copy(), g(p + "intermediate.dense.bias"),
                g(p + "output.dense.weight").T.copy(), g(p + "output.dense.bias"),
                g(p + "output.LayerNorm.weight"), g(p + "output.LayerNorm.bias"),
            ))
        self._lock = threading.Lock()  # one encode() at a time owns the BLAS thread setting

    @property
    def dim(self) -> int:
        """The vectors' dimension."""
        return self.config.hidden

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        """Word-piece ids per text, with ``[CLS]``/``[SEP]``, truncated to the model's maximum."""
        return [list(e.ids) for e in self._tokenizer.encode_batch(list(texts))]

    @property
    def window_stride(self) -> int:
        """Word pieces between the starts of two consecutive windows (half a window)."""
        return max(1, (self.passage_tokens - 2) // 2)

    @property
    def first_window_is_text(self) -> bool:
        """Whether a text's first window is exactly what :meth:`encode` reads (windows as long as
        the model's maximum), so the two share one vector."""
        return self.passage_tokens == self.config.max_tokens

    def windows(self, texts: Sequence[str]) -> list[list[list[int]]]:
        """Each text's word pieces cut into windows ("passages") of :attr:`passage_tokens`.

        A window is ``[CLS]``, up to ``passage_tokens - 2`` consecutive word pieces and ``[SEP]``;
        consecutive windows overlap by half (:attr:`window_stride`), the last one reaches the
        text's end; a text that fits has one window.  With windows of the model's maximum, the
        first window is exactly what :meth:`encode` embeds (which truncates).
        """
        _check_texts(texts)
        body_len = self.passage_tokens - 2
        stride = self.window_stride
        out = []
        for enc in self._full_tokenizer.encode_batch(list(texts)):
            ids = list(enc.ids)
            head, body, tail = ids[:1], ids[1:-1], ids[-1:]
            starts = [0]
            while starts[-1] + body_len < len(body):
                starts.append(starts[-1] + stride)
            out.append([head + body[s:s + body_len] + tail for s in starts])
        return out

    def encode(self, texts: Sequence[str], *, progress: Callable[[int], None] | None = None) -> np.ndarray:
        """Unit-length embeddings of ``texts`` (``len(texts)`` × :attr:`dim`, float32).

        Args:
            progress: called with the number of texts finished after each batch.
        """
        _check_texts(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self.encode_ids(self.tokenize(texts), progress=progress)

    def encode_ids(self, ids: Sequence[Sequence[int]], *,
                   progress: Callable[[int], None] | None = None) -> np.ndarray:
        """Unit-length embeddings of word-piece sequences (each with ``[CLS]``/``[SEP]``, at most
        the model's maximum, e.g. :meth:`windows`)."""
        out = np.zeros((len(ids), self.dim), dtype=np.float32)
        if not len(ids):
            return out
        for i, row in enumerate(ids):
            if not 2 <= len(row) <= self.config.max_tokens:
                raise ConfigurationError(f"word-piece sequence {i} has {len(row)} ids; the model reads 2 to "
                                         f"{self.config.max_tokens}")
        order = np.argsort([len(x) for x in ids], kind="stable")
        batches = [order[s:s + self.batch_size] for s in range(0, len(order), self.batch_size)]

        def run(batch: np.ndarray) -> None:
            out[batch] = self._forward([list(ids[i]) for i in batch])
            if progress is not None:
                progress(len(batch))

        with self._lock, self._threadpoolctl.threadpool_limits(limits=1, user_api="blas"):
            if self.workers == 1 or len(batches) == 1:
                for b in batches:
                    run(b)
            else:
                from concurrent.futures import ThreadPoolExecutor

                with ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="esbridge-embed") as pool:
                    for fut in [pool.submit(run, b) for b in batches]:
                        fut.result()
        return out

    def _forward(self, ids: list[list[int]]) -> np.ndarray:
        cfg = self.config
        n, length = len(ids), max(len(x) for x in ids)
        tok = np.zeros((n, length), dtype=np.int64)
        mask = np.zeros((n, length), dtype=np.float32)
        for i, row in enumerate(ids):
            tok[i, :len(row)] = row
            mask[i, :len(row)] = 1.0
        w = self._w
        x = (w["embeddings.word_embeddings.weight"][tok]
             + w["embeddings.position_embeddings.weight"][:length][None, :, :]
             + w["embeddings.token_type_embeddings.weight"][0][None, None, :])
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], cfg.layer_norm_eps)
        h, d = cfg.heads, cfg.hidden // cfg.heads
        bias = ((1.0 - mask) * np.float32(np.finfo(np.float32).min))[:, None, None, :]
        scale = np.float32(1.0 / np.sqrt(d))
        for (qkv_w, qkv_b, o_w, o_b, ln1_w, ln1_b, i_w, i_b, f_w, f_b, ln2_w, ln2_b) in self._layers:
            qkv = x @ qkv_w + qkv_b                                      # n, L, 3·hidden
            qkv = qkv.reshape(n, length, 3, h, d).transpose(2, 0, 3, 1, 4)  # 3, n, h, L, d
            q, k, v = qkv[0], qkv[1], qkv[2]
            att = (q @ k.transpose(0, 1, 3, 2)) * scale + bias           # n, h, L, L
            att -= att.max(axis=-1, keepdims=True)
            np.exp(att, out=att)
            att /= att.sum(axis=-1, keepdims=True)
            ctx = (att @ v).transpose(0, 2, 1, 3).reshape(n, length, cfg.hidden)
            x = _layer_norm(x + ctx @ o_w + o_b, ln1_w, ln1_b, cfg.layer_norm_eps)
            inter = x @ i_w + i_b
            inter = inter * np.float32(0.5) * (np.float32(1.0) + self._erf(inter * np.float32(1 / np.sqrt(2))))
            x = _layer_norm(x + inter @ f_w + f_b, ln2_w, ln2_b, cfg.layer_norm_eps)
        pooled = (x * mask[:, :, None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
        norm = np.linalg.norm(pooled, axis=1, keepdims=True)
        result: np.ndarray = (pooled / np.maximum(norm, 1e-12)).astype(np.float32)
        return result
