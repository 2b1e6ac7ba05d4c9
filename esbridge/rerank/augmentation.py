"""Weighted query augmentation (WQA): the variants' checks, their terms and their weighted scores.

The BMX paper's equation 9 scores a document against the original query ``Q`` and its
augmented variants ``Q_1 … Q_t`` (rewrites, expansions) separately and adds the scores::

    score(D) = w_0 · score(D, Q) + Σ_i w_i · score(D, Q_i)

This module holds what the rerank pipeline needs for it (docs/scoring.md §4.6):

* :data:`Augmentation`, one variant, and :class:`Augmenter`, the protocol of a variant source;
* :func:`check_augmentations` and :func:`resolve_augmentations`: the variants, checked;
* :func:`merge_queries` and :func:`select_terms`: the union of the variants' analysed terms,
  whose features are fetched once, and each variant's columns taken back out of them;
* :func:`score_augmented`: the weighted sum (equation 9) over those columns.

The shipped augmenters and the variants read from a file are in :mod:`esbridge.augment`.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any, Protocol, TypeVar, runtime_checkable

import numpy as np

from esbridge.engine.plan import Offload, Plan
from esbridge.errors import ConfigurationError
from esbridge.features.termvectors import QueryChannel
from esbridge.jsoninput import check_depth
from esbridge.scoring.arrays import ChannelArrays, FieldArrays, ScoreResult, ScoringInput
from esbridge.scoring.bmx import weighted_query_augmentation
from esbridge.scoring.registry import Scorer

__all__ = [
    "Augmentation",
    "Augmenter",
    "callable_name",
    "check_augmentations",
    "check_weight",
    "merge_queries",
    "resolve_augmentations",
    "resolve_augmentations_plan",
    "score_augmented",
    "select_terms",
]

#: One variant of a query: its text and its weight ``w_i >= 0``.
Augmentation = tuple[str, float]

P = TypeVar("P")


@runtime_checkable
class Augmenter(Protocol):
    """Anything that turns a query text into weighted variants.

    ``augmenter("vitamin d bone density")`` returns ``[(variant_text, weight), ...]``: texts
    (analysed by the index's analyzers like the query itself) and finite weights ``>= 0``.
    An empty list leaves the query as it is.  A plain function with that signature is an
    augmenter; so is :class:`FeedbackAugmenter`.
    """

    def __call__(self, query_text: str) -> Sequence[tuple[str, float]]: ...


def check_weight(value: Any, name: str) -> float:
    """``value`` as a float if it is a finite real number >= 0 (``bool`` is not a number here);
    else a :class:`ConfigurationError` that names ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(float(value)) \
            or float(value) < 0.0:
        raise ConfigurationError(f"{name} must be a finite number >= 0, got {value!r}")
    return float(value)


def check_augmentations(value: Any, *, name: str = "augmentations") -> tuple[Augmentation, ...]:
    """``value`` as a tuple of ``(text, weight)`` pairs, checked.

    Raises:
        ConfigurationError: ``value`` is not a sequence of pairs, a text is not a string or a
            weight is not a finite number >= 0; the message names ``name`` and the pair.
    """
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise ConfigurationError(f"{name} must be a list of (variant text, weight) pairs, "
                                 f"got {type(value).__name__}")
    check_depth(value, name)
    out = []
    for i, pair in enumerate(value):
        where = f"{name}[{i}]"
        if isinstance(pair, (str, bytes, Mapping)) or not isinstance(pair, Sequence) or len(pair) != 2:
            raise ConfigurationError(f"{where} must be a (variant text, weight) pair, got {pair!r}")
        text, weight = pair
        if not isinstance(text, str):
            raise ConfigurationError(f"{where}: the variant text must be a string, got {type(text).__name__}")
        out.append((text, check_weight(weight, f"{where}: the weight")))
    return tuple(out)


def resolve_augmentations(value: Any, query_text: str, *, name: str = "augmentations") -> tuple[Augmentation, ...]:
    """The checked variants of ``query_text``: ``value`` itself, or what ``value`` returns when
    it is an :class:`Augmenter` (called with ``query_text``)."""
    if callable(value):
        got = value(query_text)
        return check_augmentations(got, name=f"{name} returned by {callable_name(value)}")
    return check_augmentations(value, name=name)


def resolve_augmentations_plan(value: Any, query_text: str, *,
                               name: str = "augmentations") -> Plan[tuple[Augmentation, ...]]:
    """:func:`resolve_augmentations` as a plan (:mod:`esbridge.engine.plan`): an augmenter is
    called as an :class:`~esbridge.engine.plan.Offload` step, so under asyncio it runs on a worker
    thread (and an ``async`` augmenter is awaited)."""
    if callable(value):
        got = yield Offload(partial(value, query_text))
        return check_augmentations(got, name=f"{name} returned by {callable_name(value)}")
    return check_augmentations(value, name=name)


def callable_name(fn: Any) -> str:
    """A callable's name, for messages and reports."""
    return str(getattr(fn, "__qualname__", None) or type(fn).__name__)


# ---- the union of the variants' terms, and each variant's columns -----------------------------


def merge_queries(queries: Sequence[Mapping[str, QueryChannel]]) -> dict[str, QueryChannel]:
    """Per channel, the distinct terms of all ``queries`` (first-seen order) with their summed
    counts: the one query whose features serve every variant."""
    merged: dict[str, dict[str, int]] = {}
    for query in queries:
        for ch, qc in query.items():
            counts = merged.setdefault(ch, {})
            for t, c in zip(qc.terms, qc.qtf):
                counts[t] = counts.get(t, 0) + int(c)
    return {ch: QueryChannel(tuple(counts), tuple(counts.values())) for ch, counts in merged.items()}


def select_terms(inputs: ScoringInput, query: Mapping[str, QueryChannel]) -> ScoringInput:
    """``inputs`` restricted to ``query``'s terms (in ``query``'s order, with its counts).

    ``inputs`` holds the arrays of a query whose terms include ``query``'s in every channel
    (:func:`merge_queries`); the candidates' lengths and the index statistics are shared, the
    term columns (``tf``, ``df``, entropy, per-field ``tf``) are taken out.  Scoring the result
    equals scoring ``query``'s own features over the same candidates.

    Raises:
        ValueError: a channel of ``query`` is not in ``inputs``, or a term is missing from it.
    """
    channels: dict[str, ChannelArrays] = {}
    for ch, arrays in inputs.channels.items():
        qc = query.get(ch)
        if qc is None:
            raise ValueError(f"the query has no channel {ch!r}; analyse it for every channel the input holds")
        column = {t: j for j, t in enumerate(arrays.terms)}
        missing = [t for t in qc.terms if t not in column]
        if missing:
            raise ValueError(f"channel {ch!r}: terms {missing[:5]} are not in the input; fetch the features "
                             "of the merged query (merge_queries)")
        idx = np.array([column[t] for t in qc.terms], dtype=np.intp)
        channels[ch] = replace(
            arrays,
            terms=tuple(qc.terms),
            qtf=np.asarray(qc.qtf, dtype=np.float64),
            df=arrays.df[idx],
            tf=arrays.tf[:, idx],
            fields={f: FieldArrays(tf=fa.tf[:, idx], doc_len=fa.doc_len, avgdl=fa.avgdl)
                    for f, fa in arrays.fields.items()},
            entropy=None if arrays.entropy is None else np.asarray(arrays.entropy)[idx],
        )
    return ScoringInput(channels=channels)


def score_augmented(scorer: Scorer[P], params: P | None, inputs: ScoringInput,
                    original: Mapping[str, QueryChannel],
                    variants: Sequence[tuple[Mapping[str, QueryChannel], float]], *,
                    original_weight: float = 1.0) -> ScoreResult:
    """``w_0 · score(D, Q) + Σ_i w_i · score(D, Q_i)`` (BMX paper eq. 9) from one set of features.

    Args:
        inputs: the arrays of the merged query (:func:`merge_queries` of the original and
            every variant) over the candidates.
        original, variants: the analysed original query, and each variant with its weight.
        original_weight: ``w_0``.

    Returns:
        :func:`esbridge.scoring.bmx.weighted_query_augmentation`'s result: ``scores`` and the
        parts ``original``, ``augmented_<i>`` and ``augmentation``.
    """
    w0 = check_weight(original_weight, "original_weight")
    base = select_terms(inputs, original)
    others = [(check_weight(w, f"weight of variant {i}"), select_terms(inputs, q))
              for i, (q, w) in enumerate(variants, start=1)]
    return weighted_query_augmentation(scorer, base, others, params, original_weight=w0)
