"""esbridge: exact modern lexical scoring on top of Elasticsearch and OpenSearch.

The names a program needs are importable from here (``from esbridge import Engine, Reranker``);
each is imported from its module on first use, so ``import esbridge`` alone loads nothing else.
docs/python-api.md describes them.  Documents are indexed with ``esbridge.ingest.ingest``: the
name ``esbridge.ingest`` is that module's.  Names once exported here that are internals
(:data:`_MOVED`) are still importable from here, with a :class:`DeprecationWarning` naming
their module.
"""

from __future__ import annotations

import warnings
from importlib import import_module
from typing import TYPE_CHECKING, Any

from esbridge.version import __version__

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    # engines
    "Engine": "esbridge.engine.client",
    "ConnectionOptions": "esbridge.engine.connection",
    "AsyncEngine": "esbridge.engine.async_client",
    "connect": "esbridge.nodes.provision",
    "provision": "esbridge.nodes.provision",
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
    "Ranking": "esbridge.rerank",
    "Retrieved": "esbridge.rerank",
    "FeedbackAugmenter": "esbridge.augment",
    "DiskVectorStore": "esbridge.features.diskstore",
    "build_store": "esbridge.features.build",
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

#: internals once exported here -> the module they live in (importable from here, with a warning)
_MOVED: dict[str, str] = {
    "TermVectorCache": "esbridge.features.cache",
    "CollectionEntropy": "esbridge.features.entropy",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is not None:
        value = getattr(import_module(module), name)
        globals()[name] = value  # imported once
        return value
    module = _MOVED.get(name)
    if module is not None:  # not kept in globals(): every use warns
        warnings.warn(f"esbridge.{name} is deprecated: import it from its module ({module}), "
                      f"from {module} import {name}", DeprecationWarning, stacklevel=2)
        return getattr(import_module(module), name)
    raise AttributeError(f"module 'esbridge' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


if TYPE_CHECKING:  # the names as type checkers see them (`X as X`: re-exported)
    from esbridge.aio import AsyncReranker as AsyncReranker
    from esbridge.augment import FeedbackAugmenter as FeedbackAugmenter
    from esbridge.engine.async_client import AsyncEngine as AsyncEngine
    from esbridge.engine.client import Engine as Engine
    from esbridge.engine.connection import ConnectionOptions as ConnectionOptions
    from esbridge.errors import ConfigurationError as ConfigurationError
    from esbridge.errors import EngineError as EngineError
    from esbridge.errors import EngineUnavailableError as EngineUnavailableError
    from esbridge.errors import EsbridgeError as EsbridgeError
    from esbridge.errors import IndexNotFoundError as IndexNotFoundError
    from esbridge.errors import IngestError as IngestError
    from esbridge.errors import ProvisioningError as ProvisioningError
    from esbridge.errors import UnsupportedEngineError as UnsupportedEngineError
    from esbridge.evaluation import EvalConfig as EvalConfig
    from esbridge.evaluation import load_dataset as load_dataset
    from esbridge.evaluation import run_evaluation as run_evaluation
    from esbridge.features.build import build_store as build_store
    from esbridge.features.diskstore import DiskVectorStore as DiskVectorStore
    from esbridge.hybrid import HybridSearcher as HybridSearcher
    from esbridge.hybrid import PipelineParams as PipelineParams
    from esbridge.index import IndexLayout as IndexLayout
    from esbridge.index import add_channels as add_channels
    from esbridge.index import create_index as create_index
    from esbridge.index import list_indices as list_indices
    from esbridge.index import open_layout as open_layout
    from esbridge.nodes.provision import connect as connect
    from esbridge.nodes.provision import provision as provision
    from esbridge.rerank import FirstStage as FirstStage
    from esbridge.rerank import Ranking as Ranking
    from esbridge.rerank import Reranker as Reranker
    from esbridge.rerank import RerankStats as RerankStats
    from esbridge.rerank import Retrieved as Retrieved
    from esbridge.scoring import available_scorers as available_scorers
    from esbridge.scoring import get_scorer as get_scorer
