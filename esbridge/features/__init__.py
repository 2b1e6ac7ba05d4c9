"""Features: term vectors, index-wide statistics and the per-channel arrays built from them."""

from esbridge.features.termvectors import (
    CandidateVectors,
    FetchResult,
    FieldStats,
    QueryChannel,
    ShardRouting,
    TermMatrix,
    analyze_query,
    build_input,
    fetch_raw,
)

__all__ = [
    "CandidateVectors",
    "FetchResult",
    "FieldStats",
    "QueryChannel",
    "ShardRouting",
    "TermMatrix",
    "analyze_query",
    "build_input",
    "fetch_raw",
]
