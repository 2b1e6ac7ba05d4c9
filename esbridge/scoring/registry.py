"""Scorers found by name.

Each scoring family registers its scorers here at import; :func:`get_scorer`
looks one up and, for an unknown name, raises an error that lists the valid ones.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from esbridge.errors import ConfigurationError
from esbridge.scoring.arrays import ScoreResult, ScoringInput

P = TypeVar("P")


class UnknownScorerError(ConfigurationError):
    """Raised for a scorer name that is not registered."""


@dataclass(frozen=True)
class Scorer(Generic[P]):
    """A named scoring function with its typed, frozen parameter object.

    Attributes:
        name: registry key (``"bm25"``, ``"bmx"``, ``"evolved"``, ...).
        params_type: the frozen dataclass of its parameters; ``params_type()`` gives
            the defaults.
        fn: ``fn(inputs, params) -> ScoreResult``.
        channels: the channels it reads (the reranker fetches only these).
        description: one line for ``--help`` and listings.
        needs_fields: reads per-field arrays (``ChannelArrays.fields``, BM25F), so the
            features layer must fetch every text field rather than the combined one.
        needs_entropy: reads collection entropies (``ChannelArrays.entropy``, BMX).
        needs_distinct: reads each candidate's number of distinct terms
            (``ChannelArrays.unique_terms``); over several fields that takes their whole term
            vectors, which the engine plugin does not return.
    """

    name: str
    params_type: type[P]
    fn: Callable[[ScoringInput, P], ScoreResult]
    channels: tuple[str, ...]
    description: str
    needs_fields: bool = False
    needs_entropy: bool = False
    needs_distinct: bool = False

    def score(self, inputs: ScoringInput, params: P | None = None) -> ScoreResult:
        """Score the candidates of ``inputs`` with ``params`` (defaults if ``None``)."""
        if params is None:
            params = self.params_type()
        elif not isinstance(params, self.params_type):
            raise TypeError(
                f"scorer {self.name!r} takes {self.params_type.__name__}, "
                f"got {type(params).__name__}"
            )
        return self.fn(inputs, params)

    def make_params(self, **overrides: Any) -> P:
        """Defaults with ``overrides`` applied.

        Raises:
            ValueError: an unknown name (the message lists the valid ones) or a bad value; the
                message names the scorer (callers need not).
        """
        valid = set(getattr(self.params_type, "__dataclass_fields__", {}))
        unknown = sorted(set(overrides) - valid)
        if unknown:
            raise ValueError(
                f"scorer {self.name!r} has no parameter(s) {', '.join(unknown)}; "
                f"valid: {', '.join(sorted(valid))}"
            )
        try:
            return self.params_type(**overrides)
        except (TypeError, ValueError) as err:
            raise ValueError(f"scorer {self.name!r}: {err}") from err


_REGISTRY: dict[str, Scorer[Any]] = {}


def register(scorer: Scorer[P]) -> Scorer[P]:
    """Add ``scorer`` to the registry (a second scorer of the same name is an error)."""
    if scorer.name in _REGISTRY:
        raise ValueError(f"a scorer named {scorer.name!r} is already registered")
    _REGISTRY[scorer.name] = scorer
    return scorer


def get_scorer(name: str) -> Scorer[Any]:
    """The scorer registered as ``name``.

    Raises:
        UnknownScorerError: naming the valid scorers.
    """
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownScorerError(
            f"unknown scorer {name!r}; valid scorers: {', '.join(available_scorers())}"
        ) from None


def available_scorers() -> list[str]:
    """Sorted names of every registered scorer."""
    return sorted(_REGISTRY)
