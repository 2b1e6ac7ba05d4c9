"""Lexical scorers over per-channel arrays: pure numpy, no engine.

Importing this package registers every scorer; look one up with
:func:`get_scorer`.
"""

from esbridge.scoring import architectures, bm25, bm25f, bmx, evolved  # noqa: F401  (registration)
from esbridge.scoring.arrays import (
    CHANNELS,
    ChannelArrays,
    FieldArrays,
    ScoreResult,
    ScoringInput,
)
from esbridge.scoring.registry import (
    Scorer,
    UnknownScorerError,
    available_scorers,
    get_scorer,
    register,
)

__all__ = [
    "CHANNELS",
    "ChannelArrays",
    "FieldArrays",
    "ScoreResult",
    "ScoringInput",
    "Scorer",
    "UnknownScorerError",
    "available_scorers",
    "get_scorer",
    "register",
]
