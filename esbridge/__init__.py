"""esbridge: exact modern lexical scoring on top of Elasticsearch and OpenSearch.

The names a program needs are importable from here (``from esbridge import Engine, Reranker``);
each is imported from its module on first use, so ``import esbridge`` alone loads nothing else.
docs/python-api.md describes them.  Documents are indexed with ``esbridge.ingest.ingest``: the
name ``esbridge.ingest`` is that module's.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    # engines
    "Engine": "esbridge.engine.client",
    "ConnectionOptions": "esbridge.engine.client",
    "AsyncEngine": "esbridge.engine.async_client",
    "connect": "esbridge.engine.provision",
    "provision": "esbridge.engine.provision",
    # indices and documents
    "IndexLayout": "esbridge.index",
    "create_index": "esbridge.index",
    "add_channels": "esbridge.index",
    "list_indices": "esbridge.index",
    "open_layout": "esbridge.index",
    # reranking
    "Reranker": "esbridge.rerank",
    "AsyncReranker": "esbridge.aio",
    "FirstStage": "esbridge.rerank",
    "RerankStats": "esbridge.rerank",
    "FeedbackAugmenter": "esbridge.augment",
    "TermVectorCache": "esbridge.features.cache",
    "DiskVectorStore": "esbridge.features.diskstore",
    "build_store": "esbridge.features.build",
    "CollectionEntropy": "esbridge.features.entropy",
    # scorers
    "available_scorers": "esbridge.scoring",
    "get_scorer": "esbridge.scoring",
    # hybrid search
    "HybridSearcher": "esbridge.hybrid",
    "PipelineParams": "esbridge.hybrid",
    # evaluation
    "EvalConfig": "esbridge.evaluation",
    "load_dataset": "esbridge.evaluation",
    "run_evaluation": "esbridge.evaluation",
    # errors
    "EsbridgeError": "esbridge.errors",
    "ConfigurationError": "esbridge.errors",
    "EngineError": "esbridge.errors",
    "EngineUnavailableError": "esbridge.errors",
    "IndexNotFoundError": "esbridge.errors",
    "IngestError": "esbridge.errors",
    "ProvisioningError": "esbridge.errors",
    "UnsupportedEngineError": "esbridge.errors",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'esbridge' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # imported once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


if TYPE_CHECKING:
    from esbridge.aio import AsyncReranker
    from esbridge.augment import FeedbackAugmenter
    from esbridge.engine.async_client import AsyncEngine
    from esbridge.engine.client import ConnectionOptions, Engine
    from esbridge.engine.provision import connect, provision
    from esbridge.errors import (
        ConfigurationError,
        EngineError,
        EngineUnavailableError,
        EsbridgeError,
        IndexNotFoundError,
        IngestError,
        ProvisioningError,
        UnsupportedEngineError,
    )
    from esbridge.evaluation import EvalConfig, load_dataset, run_evaluation
    from esbridge.features.build import build_store
    from esbridge.features.cache import TermVectorCache
    from esbridge.features.diskstore import DiskVectorStore
    from esbridge.features.entropy import CollectionEntropy
    from esbridge.hybrid import HybridSearcher, PipelineParams
    from esbridge.index import IndexLayout, add_channels, create_index, list_indices, open_layout
    from esbridge.rerank import FirstStage, Reranker, RerankStats
    from esbridge.scoring import available_scorers, get_scorer
