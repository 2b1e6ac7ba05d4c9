"""Hybrid search: semantic, lexical and keyword strategies fused (:class:`HybridSearcher`)."""

from esbridge.hybrid.fusion import Fusion, RankedList, fuse
from esbridge.hybrid.keyword import KeywordParams
from esbridge.hybrid.pipeline import STRATEGIES, HybridSearcher, PipelineParams, PipelineResult

__all__ = ["STRATEGIES", "Fusion", "HybridSearcher", "KeywordParams", "PipelineParams", "PipelineResult",
           "RankedList", "fuse"]
