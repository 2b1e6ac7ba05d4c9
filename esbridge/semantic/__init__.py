"""Semantic search: sentence embeddings (onnxruntime), a content-addressed embedding cache, and the
on-disk vectors of an index with exact cosine search."""

from esbridge.semantic.models import DEFAULT_MODEL, MODELS, load_encoder, model_dir
from esbridge.semantic.text import document_text

__all__ = ["DEFAULT_MODEL", "MODELS", "document_text", "load_encoder", "model_dir"]
