"""BM25F over several text fields of the ``base`` channel (docs/scoring.md §3).

Both scorers read the per-field arrays ``ChannelArrays.fields`` of the ``base``
channel (one :class:`~esbridge.scoring.arrays.FieldArrays` per field, each with a
``(D, T)`` ``tf`` for the channel's query terms) and the channel's ``df``, which
must be the document frequency in the combined all-fields field; ``N`` is the
channel's ``n_docs``.

- ``bm25f_pubmed``: PubMed's formula (Fiorini et al., "Best Match: New relevance
  search for PubMed", PLoS Biology 16(8), 2018, S1 Text, eqs. 1-5; docs/scoring.md
  §3.2), implemented as written, including the division of each field's frequency
  by the field's length.
- ``bm25f_robertson``: Robertson & Zaragoza, "The Probabilistic Relevance
  Framework: BM25 and Beyond", Found. Trends Inf. Retr. 3(4), 2009, section
  "Multiple streams and BM25F": per-field
  length normalisation before a single saturation (docs/scoring.md §3.3).

Field weights are given as ``((name, weight), ...)`` pairs so the parameters stay
frozen and hashable; a field not listed has weight ``default_weight`` (1.0).  Fields
are visited in sorted name order, so the sums do not depend on mapping order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from esbridge.scoring.arrays import ChannelArrays, FieldArrays, FloatArray, ScoreResult, ScoringInput
from esbridge.scoring.bm25 import (
    check_bool,
    check_nonnegative_finite,
    check_unit_interval,
    clipped_df,
    is_nonnegative_finite,
    length_ratio,
    safe_divide,
)
from esbridge.scoring.idf import lucene_idf, pubmed_idf
from esbridge.scoring.registry import Scorer, register

__all__ = [
    "BM25F_PUBMED",
    "BM25F_ROBERTSON",
    "BM25FPubMedParams",
    "BM25FRobertsonParams",
    "pubmed_average_length",
    "pubmed_doc_length",
    "pubmed_pseudo_tf",
    "pubmed_saturation",
    "robertson_pseudo_tf",
    "score_bm25f_pubmed",
    "score_bm25f_robertson",
]

FieldValues = tuple[tuple[str, float], ...]


def _check_field_values(owner: object, name: str, *, unit_interval: bool) -> None:
    pairs = getattr(owner, name)
    # Also accept what JSON and keyword arguments give: {"title": 2} or [["title", 2]].
    if isinstance(pairs, Mapping):
        pairs = tuple(pairs.items())
    elif isinstance(pairs, list):
        pairs = tuple(tuple(p) if isinstance(p, list) else p for p in pairs)
    if not isinstance(pairs, tuple):
        raise ValueError(f"{type(owner).__name__}.{name} must be (field, value) pairs or a {{field: value}} "
                         f"mapping, got {type(pairs).__name__}")
    object.__setattr__(owner, name, pairs)
    seen: set[str] = set()
    for pair in pairs:
        if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str)):
            raise ValueError(f"{type(owner).__name__}.{name} must hold (field, value) pairs, got {pair!r}")
        field, value = pair
        if field in seen:
            raise ValueError(f"{type(owner).__name__}.{name} lists field {field!r} twice")
        seen.add(field)
        ok = is_nonnegative_finite(value)
        if unit_interval:
            ok = ok and float(value) <= 1.0
        if not ok:
            bound = "in [0, 1]" if unit_interval else "finite and >= 0"
            raise ValueError(f"{type(owner).__name__}.{name}[{field!r}] must be {bound}, got {value!r}")


class _Weighted(Protocol):
    @property
    def field_weights(self) -> FieldValues: ...

    @property
    def default_weight(self) -> float: ...


def _check_some_weight(owner: _Weighted) -> None:
    weights = [float(v) for _f, v in owner.field_weights] + [float(owner.default_weight)]
    if not any(w > 0 for w in weights):
        raise ValueError(f"{type(owner).__name__}: every field weight (and default_weight) is 0, so every "
                         "document would score 0; give at least one field a positive weight")


def _lookup(pairs: FieldValues, field: str, default: float) -> float:
    for name, value in pairs:
        if name == field:
            return float(value)
    return default


def _fields_of(arrays: ChannelArrays, scorer: str) -> list[tuple[str, FieldArrays]]:
    """The channel's fields in sorted order, checked against the channel's shapes."""
    if not arrays.fields:
        raise ValueError(
            f"the {scorer} scorer needs per-field arrays (ChannelArrays.fields) in the 'base' "
            "channel; this input has none"
        )
    d, t = arrays.n_candidates, arrays.n_terms
    out: list[tuple[str, FieldArrays]] = []
    for name in sorted(arrays.fields):
        fa = arrays.fields[name]
        if np.shape(fa.tf) != (d, t):
            raise ValueError(f"field {name!r}: tf must have shape ({d}, {t}), got {np.shape(fa.tf)}")
        if np.shape(fa.doc_len) != (d,):
            raise ValueError(f"field {name!r}: doc_len must have shape ({d},), got {np.shape(fa.doc_len)}")
        out.append((name, fa))
    return out


# ---------------------------------------------------------------------------
# PubMed BM25F (Fiorini et al. 2018, S1 Text; docs/scoring.md §3.2)
# ---------------------------------------------------------------------------


def pubmed_pseudo_tf(fields: Mapping[str, FieldArrays], weights: Mapping[str, float]) -> FloatArray:
    """PubMed's term frequency ``tf(t) = sum_f occ(t, f) * w(f) / l(f)`` (S1 Text eq. 1).

    A field of length 0 contributes 0 (it cannot contain the term).

    Returns:
        ``(D, T)``.
    """
    total: FloatArray | None = None
    for name, fa in fields.items():
        part = weights[name] * safe_divide(fa.tf, np.asarray(fa.doc_len, dtype=np.float64)[:, None])
        total = part if total is None else total + part
    if total is None:
        raise ValueError("pubmed_pseudo_tf needs at least one field")
    return total


def pubmed_doc_length(fields: Mapping[str, FieldArrays], weights: Mapping[str, float]) -> FloatArray:
    """PubMed's document length ``dl = sum_f l(f) * w(f)`` (S1 Text eq. 3); ``(D,)``."""
    total = np.zeros(0, dtype=np.float64)
    for i, (name, fa) in enumerate(fields.items()):
        part = weights[name] * np.asarray(fa.doc_len, dtype=np.float64)
        total = part if i == 0 else total + part
    return total


def pubmed_average_length(fields: Mapping[str, FieldArrays], weights: Mapping[str, float]) -> float:
    """``avg(dl)`` (S1 Text eq. 4) as ``sum_f w(f) * avgdl_f``.

    The mean of ``sum_f l(f) w(f)`` over the index equals ``sum_f w(f) * mean_f l(f)``
    because the mean is linear.  This is exact when each ``FieldArrays.avgdl`` is the
    field's mean length over all ``N`` documents (a document without the field
    counting as length 0); Lucene's per-field ``sumTotalTermFreq / docCount`` divides
    by the documents that have the field, which is larger when some lack it.
    """
    return float(sum(weights[n] * float(fa.avgdl) for n, fa in fields.items()))


def pubmed_saturation(tf: FloatArray, dl: FloatArray, avg_dl: float, k1: float, b: float) -> FloatArray:
    """``tf / (k1 ((1 - b) + b dl/avg(dl)) + tf)`` (S1 Text eq. 5, without the IDF); ``(D, T)``."""
    k = k1 * (1.0 - b + b * length_ratio(dl, avg_dl))
    return safe_divide(tf, k[:, None] + tf)


@dataclass(frozen=True)
class BM25FPubMedParams:
    """PubMed BM25F (docs/scoring.md §3.2).

    Attributes:
        k1: saturation, PubMed's 1.2.
        b: length normalisation in ``[0, 1]``, PubMed's 0.75.
        field_weights: ``((field, w), ...)``; PubMed weighs title and MeSH/keyword
            fields 5, others 1.
        default_weight: weight of a field not in ``field_weights``.
        qtf_weighting: weight each term by its count in the query.  The published formula
            sums over ``t in q ∩ d`` (each distinct term once), hence ``False``.
    """

    k1: float = 1.2
    b: float = 0.75
    field_weights: FieldValues = (("title", 5.0), ("keywords", 5.0), ("mesh", 5.0))
    default_weight: float = 1.0
    qtf_weighting: bool = False

    def __post_init__(self) -> None:
        check_nonnegative_finite(self, "k1", "default_weight")
        check_unit_interval(self, "b")
        _check_field_values(self, "field_weights", unit_interval=False)
        _check_some_weight(self)
        check_bool(self, "qtf_weighting")

    def weight(self, field: str) -> float:
        """The weight of ``field``."""
        return _lookup(self.field_weights, field, float(self.default_weight))


def _bm25f_result(arrays: ChannelArrays, tf: FloatArray, sat: FloatArray, idf: FloatArray,
                  qtf_weighting: bool, extra: dict[str, FloatArray]) -> ScoreResult:
    """``score = sum_t w(t) * idf(t) * sat(t, d)`` with ``w = qtf`` or 1, and its parts."""
    term_weight = np.asarray(arrays.qtf, dtype=np.float64) if qtf_weighting else np.ones(arrays.n_terms)
    matched = (tf > 0.0).astype(np.float64)
    return ScoreResult(
        scores=sat @ (term_weight * idf),
        parts={"tf_part": sat @ term_weight, "idf": matched @ (term_weight * idf), **extra},
    )


def score_bm25f_pubmed(inputs: ScoringInput, params: BM25FPubMedParams) -> ScoreResult:
    """PubMed BM25F, S1 Text eq. 5 (docs/scoring.md §3.2).

    ``sum_{t in q ∩ d} tf(t) / (k1 ((1 - b) + b dl/avg(dl)) + tf(t)) * idf(t)`` with
    ``tf(t) = sum_f occ(t, f) w(f) / l(f)``, ``dl = sum_f l(f) w(f)``, ``avg(dl) =
    sum_f w(f) avgdl_f`` and ``idf(t) = 1 + ln(N / (n(t) + 1))`` from the combined
    field's ``df`` (:func:`~esbridge.scoring.idf.pubmed_idf`).

    Parts: ``tf_part`` (sum of the saturated frequencies), ``idf`` (sum of the IDF of
    the matched terms), ``pseudo_length`` (``dl``).
    """
    arrays = inputs.channel("base")
    fields = dict(_fields_of(arrays, "bm25f_pubmed"))
    weights = {name: params.weight(name) for name in fields}
    tf = pubmed_pseudo_tf(fields, weights)
    dl = pubmed_doc_length(fields, weights)
    sat = pubmed_saturation(tf, dl, pubmed_average_length(fields, weights), params.k1, params.b)
    idf = pubmed_idf(clipped_df(arrays), arrays.n_docs)
    return _bm25f_result(arrays, tf, sat, idf, params.qtf_weighting, {"pseudo_length": dl})


# ---------------------------------------------------------------------------
# Robertson & Zaragoza (2009) BM25F
# ---------------------------------------------------------------------------


def robertson_pseudo_tf(
    fields: Mapping[str, FieldArrays], weights: Mapping[str, float], bs: Mapping[str, float]
) -> FloatArray:
    """``tf~ = sum_f w_f tf_f / (1 - b_f + b_f l_f / avgl_f)``; ``(D, T)``.

    Source: Robertson & Zaragoza (2009), "Multiple streams and BM25F" (per-field length normalisation,
    then weighting, then one saturation).
    """
    total: FloatArray | None = None
    for name, fa in fields.items():
        norm = 1.0 - bs[name] + bs[name] * length_ratio(fa.doc_len, fa.avgdl)
        part = weights[name] * safe_divide(fa.tf, norm[:, None])
        total = part if total is None else total + part
    if total is None:
        raise ValueError("robertson_pseudo_tf needs at least one field")
    return total


@dataclass(frozen=True)
class BM25FRobertsonParams:
    """Robertson & Zaragoza (2009) BM25F.

    Attributes:
        k1: saturation, 1.2.
        field_weights: ``((field, w), ...)``.  Title defaults to 2.0: here the weight
            multiplies the frequency before saturation, so one title match with
            ``w = 2`` already reaches ``2/(1.2 + 2) = 62%`` of a term's ceiling; the
            PubMed weight 5 would give 81% and leave little room for body evidence
            (PubMed's 5 compensates for dividing by the field length).
        default_weight: weight of a field not in ``field_weights``.
        field_b: ``((field, b_f), ...)`` per-field length normalisation in ``[0, 1]``.
        default_b: ``b_f`` of a field not in ``field_b``, 0.75.
        qtf_weighting: weight each term by its count in the query, like the engine's
            ``combined_fields`` query, which has one clause per query token.
    """

    k1: float = 1.2
    field_weights: FieldValues = (("title", 2.0),)
    default_weight: float = 1.0
    field_b: FieldValues = ()
    default_b: float = 0.75
    qtf_weighting: bool = True

    def __post_init__(self) -> None:
        check_nonnegative_finite(self, "k1", "default_weight")
        check_unit_interval(self, "default_b")
        _check_field_values(self, "field_weights", unit_interval=False)
        _check_field_values(self, "field_b", unit_interval=True)
        _check_some_weight(self)
        check_bool(self, "qtf_weighting")

    def weight(self, field: str) -> float:
        """The weight of ``field``."""
        return _lookup(self.field_weights, field, float(self.default_weight))

    def b(self, field: str) -> float:
        """The length normalisation ``b_f`` of ``field``."""
        return _lookup(self.field_b, field, float(self.default_b))


def score_bm25f_robertson(inputs: ScoringInput, params: BM25FRobertsonParams) -> ScoreResult:
    """Robertson & Zaragoza BM25F: ``sum_t qtf * idf(t) * tf~ / (k1 + tf~)``.

    ``tf~`` from :func:`robertson_pseudo_tf`; ``idf`` is Lucene's on the combined
    field's ``df``.

    Parts: ``tf_part`` (sum of ``tf~/(k1 + tf~)``), ``idf`` (sum of the IDF of the
    matched terms), ``pseudo_tf`` (sum of ``tf~``).
    """
    arrays = inputs.channel("base")
    fields = dict(_fields_of(arrays, "bm25f_robertson"))
    weights = {name: params.weight(name) for name in fields}
    bs = {name: params.b(name) for name in fields}
    tf = robertson_pseudo_tf(fields, weights, bs)
    sat = safe_divide(tf, params.k1 + tf)
    idf = lucene_idf(clipped_df(arrays), arrays.n_docs)
    qtf = np.asarray(arrays.qtf, dtype=np.float64) if params.qtf_weighting else np.ones(arrays.n_terms)
    return _bm25f_result(arrays, tf, sat, idf, params.qtf_weighting, {"pseudo_tf": tf @ qtf})


BM25F_PUBMED: Scorer[BM25FPubMedParams] = register(
    Scorer(
        name="bm25f_pubmed",
        params_type=BM25FPubMedParams,
        fn=score_bm25f_pubmed,
        channels=("base",),
        needs_fields=True,
        description="PubMed BM25F as published (length-divided field tf, title/MeSH weight 5)",
    )
)
BM25F_ROBERTSON: Scorer[BM25FRobertsonParams] = register(
    Scorer(
        name="bm25f_robertson",
        params_type=BM25FRobertsonParams,
        fn=score_bm25f_robertson,
        channels=("base",),
        needs_fields=True,
        description="Robertson & Zaragoza (2009) BM25F: per-field length normalisation, one saturation",
    )
)
