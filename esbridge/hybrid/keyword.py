"""The keyword strategy: a second lexical query built from more than the query text (docs/scoring.md §7.4).

For a topic with a narrative (a description of what is and is not relevant), as
in the pipeline's source (a semantic, a lexical and a keyword strategy, CAIR
2021): sentences that describe non-relevant documents are dropped
(:func:`filter_narrative`), and the rest is reduced to its key terms: the
engine's own analyser gives the narrative's terms, which are ranked by
``count × idf`` with index-wide document frequencies.  (The source uses
TopicRank for this step; ranking the engine's analysed terms keeps the rule that
query terms come from the engine's analysers and needs no second NLP stack.)
With ``extractor = "topicrank"`` the narrative gives instead its ``keyphrases``
best TopicRank keyphrases (:mod:`esbridge.hybrid.topicrank`, stemmed by the
engine), and those phrases, as one query text, are ranked by the lexical
strategy itself, as the source does; a topic without a narrative then has no
keyword query.

For a topic without one — the common case — the keyword strategy uses
pseudo-relevance feedback instead: the top ``fb_docs`` documents of a first fusion of
the semantic and lexical strategies (or of the lexical strategy alone, the pipeline's
``keyword_source``) are taken as relevant, and terms that occur in at least ``min_docs`` of
them are weighted as in relevance model 3 (Lavrenko and Croft 2001; Abdul-Jaleel
et al., TREC 2004), times their idf so that terms frequent everywhere do not
dominate::

    w(t) = idf(t) · Σ_d p(d) · tf(t, d) / |d|,      p(d) = s(d) / Σ_d' s(d')

with ``s`` the feedback documents' weights (the lexical scores shifted to be positive, or
rank weights from 1 down to 0.5 for the fusion's documents).  The
``fb_terms`` best terms join the original ones: each original term weighs
``(1 − λ) · qtf / Σ qtf``, each expansion term ``λ · w(t) / Σ w``.  The feedback
documents' term vectors are the ones the lexical strategy already fetched, so
the only extra engine work is one statistics lookup and one search.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from esbridge.errors import ConfigurationError
from esbridge.features.termvectors import FieldVector, QueryChannel

__all__ = ["EXTRACTORS", "KeywordParams", "filter_narrative", "expansion_terms", "weighted_terms", "rank_terms_by_idf"]

# Statements about documents that are not wanted: a "not" that says so ("not relevant", "will not be
# considered", "should not be retrieved", "do not count"), never a bare "is not" or "should not", which
# as often describe what is wanted ("panels whose temperature is not uniform are of interest").
_NEGATIVE = re.compile(
    r"\b(?:not\s+(?:be\s+)?(?:deemed\s+|considered\s+)?(?:relevant|of\s+(?:any\s+)?interest|useful|pertinent)"
    r"|not\s+(?:be\s+)?(?:considered|counted|included|retrieved|wanted)|irrelevant|non-?relevant|exclude[ds]?"
    r"|do(?:es)?\s+not\s+(?:count|qualify))",
    re.IGNORECASE,
)
#: How the keyword strategy reduces a narrative to a query.
EXTRACTORS = ("idf", "topicrank")

_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")


@dataclass(frozen=True)
class KeywordParams:
    """Parameters of the keyword strategy.

    Attributes:
        fb_docs: feedback documents (top of the first fusion or of the lexical strategy).
        fb_terms: expansion terms kept.
        min_docs: an expansion term occurs in at least this many feedback documents.
        lam: weight of the expansion terms against the original ones (0: no expansion).
        depth: documents the keyword query returns.
        extractor: what a narrative gives: ``idf`` (its analysed terms of highest
            ``count × idf``, ``fb_terms`` of them, a term query) or ``topicrank`` (its
            ``keyphrases`` best TopicRank keyphrases, ranked by the lexical strategy; no
            pseudo-relevance feedback without a narrative).
        keyphrases: TopicRank keyphrases kept (``extractor = "topicrank"``).
    """

    fb_docs: int = 10
    fb_terms: int = 30
    min_docs: int = 2
    lam: float = 0.3
    depth: int = 1000
    extractor: str = "idf"
    keyphrases: int = 10

    def __post_init__(self) -> None:
        if self.extractor not in EXTRACTORS:
            raise ConfigurationError(f"keyword parameter extractor must be one of {', '.join(EXTRACTORS)}, "
                                     f"got {self.extractor!r}")
        for name in ("fb_docs", "fb_terms", "min_docs", "depth", "keyphrases"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"keyword parameter {name} must be an integer >= 1, got {value!r}")
        if isinstance(self.lam, bool) or not (0.0 <= float(self.lam) <= 1.0):
            raise ConfigurationError(f"keyword parameter lam must be in [0, 1], got {self.lam!r}")


def filter_narrative(text: str) -> str:
    """``text`` without the sentences that describe non-relevant documents."""
    kept = [s.strip() for s in _SENTENCE.split(text) if s.strip() and not _NEGATIVE.search(s)]
    return " ".join(kept)


def _idf(df: float, n_docs: int) -> float:
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5)) if n_docs else 0.0


def expansion_candidates(vectors: Sequence[FieldVector], min_docs: int) -> list[str]:
    """Terms of the feedback documents that occur in at least ``min_docs`` of them (first-seen order)."""
    seen: dict[str, int] = {}
    for vec in vectors:
        for t in vec:
            seen[t] = seen.get(t, 0) + 1
    return [t for t, c in seen.items() if c >= min_docs]


def expansion_terms(vectors: Sequence[FieldVector], doc_scores: np.ndarray, df: Mapping[str, int],
                    n_docs: int, params: KeywordParams, exclude: Sequence[str] = ()) -> dict[str, float]:
    """The RM3-with-idf weights of the ``params.fb_terms`` best expansion terms (see the module text)."""
    if not vectors:
        return {}
    s = np.asarray(doc_scores, dtype=np.float64)
    s = s - float(s.min()) + 1e-9 if s.size and float(s.min()) <= 0 else s
    p = s / float(s.sum()) if float(s.sum()) > 0 else np.full(len(s), 1.0 / len(s))
    skip = set(exclude)
    weights: dict[str, float] = {}
    for t in expansion_candidates(vectors, params.min_docs):
        if t in skip:
            continue
        rel = sum(float(p[i]) * vec.get(t, 0) / vec.length for i, vec in enumerate(vectors) if vec.length)
        w = rel * _idf(float(df.get(t, 0)), n_docs)
        if w > 0:
            weights[t] = w
    best = sorted(weights.items(), key=lambda kv: (-kv[1], kv[0]))[:params.fb_terms]
    return dict(best)


def rank_terms_by_idf(qc: QueryChannel, df: Mapping[str, int], n_docs: int, keep: int) -> dict[str, float]:
    """The ``keep`` terms of an analysed narrative of highest ``count × idf`` (absent terms dropped)."""
    scored = {t: c * _idf(float(df.get(t, 0)), n_docs) for t, c in zip(qc.terms, qc.qtf) if df.get(t, 0) > 0}
    return dict(sorted(scored.items(), key=lambda kv: (-kv[1], kv[0]))[:keep])


def weighted_terms(original: QueryChannel, expansion: Mapping[str, float], lam: float) -> dict[str, float]:
    """Original and expansion terms with their interpolated weights (see the module text)."""
    out: dict[str, float] = {}
    q_total = float(sum(original.qtf))
    if q_total > 0:
        for t, c in zip(original.terms, original.qtf):
            out[t] = out.get(t, 0.0) + (1.0 - lam) * c / q_total
    e_total = float(sum(expansion.values()))
    if e_total > 0:
        for t, w in expansion.items():
            out[t] = out.get(t, 0.0) + (lam if q_total > 0 else 1.0) * w / e_total
    return out
