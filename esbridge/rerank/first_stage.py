"""The first stage: how candidates are found, as engine queries built from analysed tokens.

No engine calls here: :func:`build_query` turns an analysed query into the first-stage query
the pipeline sends, from the terms :func:`terms_sent` chose.  Query text is never
interpolated into a query string or a script: the first stage is a ``bool`` of ``term``
clauses on the analysed tokens (or, for ``bm25f``, the engine's own ``combined_fields`` query
over the text, which the engine analyses; or, where esbridge's engine plugin analyses the text
in the same search, the engine's ``match`` query of :func:`match_query`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any

import numpy as np

from esbridge.errors import ConfigurationError
from esbridge.features.termvectors import FieldStats, QueryChannel
from esbridge.index.definitions import IndexLayout
from esbridge.jsoninput import check_depth
from esbridge.rerank.candidates import AnalyzedQuery

#: Distinct query terms sent to the first stage at most (the engines' clause limit is 1024).
MAX_FIRST_STAGE_TERMS = 1000

#: Boost of each channel's clauses in the ``channels`` first stage.
CHANNEL_BOOSTS = {"base": 1.0, "prefix": 0.3, "bigram": 0.5, "micro": 0.2}


class FirstStage(str, Enum):
    """How candidates are found.

    ``BM25``: the engine's BM25 over the combined all-fields field (``base``
    channel), the flat BM25 of Anserini/Pyserini; on a plain index, over its text
    fields (one clause per field and term: the sum of the fields' BM25 scores).
    ``MULTI_MATCH``: BM25 ``best_fields`` over the text fields' ``base`` sub-fields.
    ``BM25F``: the engine's ``combined_fields`` over the text fields (Elasticsearch
    7.13+; an error elsewhere).
    ``CHANNELS``: a ``bool`` over the four channels of the combined field, for recall.

    A string ``"similarity:<name>"`` ranks candidates inside the engine with one of
    esbridge's scripted similarities (``bm25_pyserini``, ``evolved``, ``bmx``; the index
    must have been created with it, see :func:`esbridge.index.create_index`).
    """

    BM25 = "bm25"
    MULTI_MATCH = "multi_match"
    BM25F = "bm25f"
    CHANNELS = "channels"


FirstStageSpec = FirstStage | str | Mapping[str, Any]


def parse_first_stage(value: FirstStageSpec) -> FirstStageSpec:
    """A :class:`FirstStage`, a ``"similarity:<name>"`` string or a query dict, checked."""
    if isinstance(value, str) and not isinstance(value, FirstStage) and not value.startswith("similarity:"):
        try:
            return FirstStage(value)
        except ValueError:
            raise ConfigurationError(
                f"unknown first stage {value!r}; choose one of "
                f"{', '.join(fs.value for fs in FirstStage)} or pass a query dict"
            ) from None
    if isinstance(value, Mapping):
        check_depth(value, "the first_stage query")
    return value


def similarity_name(value: FirstStageSpec) -> str | None:
    """The scripted similarity a ``"similarity:<name>"`` first stage names, else ``None``."""
    if isinstance(value, str) and not isinstance(value, FirstStage) and value.startswith("similarity:"):
        return value.split(":", 1)[1]
    return None


def analysed_channels(first_stage: FirstStageSpec, layout: IndexLayout, scored: Sequence[str]) -> list[str]:
    """The channels a query is analysed in: ``base`` (the first stage's), the scorer's, and
    for the ``channels`` first stage every channel of the index."""
    channels = list(dict.fromkeys(["base", *scored]))
    if first_stage == FirstStage.CHANNELS:
        channels = list(dict.fromkeys([*channels, *layout.channels]))
    return channels


def term_channels(first_stage: FirstStageSpec, layout: IndexLayout) -> tuple[str, ...]:
    """The channels whose terms the first stage sends as ``term`` clauses (a query dict and
    ``bm25f``'s ``combined_fields`` send none)."""
    if isinstance(first_stage, Mapping) or first_stage == FirstStage.BM25F:
        return ()
    if first_stage == FirstStage.CHANNELS:
        return tuple(layout.channels)
    return ("base",)


def dropped_terms(first_stage: FirstStageSpec, layout: IndexLayout, query: Mapping[str, QueryChannel]) -> int:
    """How many of the query's terms the first stage leaves out (above :data:`MAX_FIRST_STAGE_TERMS`)."""
    return sum(max(0, len(query[ch].terms) - MAX_FIRST_STAGE_TERMS) for ch in term_channels(first_stage, layout))


def terms_sent(qc: QueryChannel, stats: FieldStats | None) -> list[int]:
    """Indices of the terms the first stage sends: all of them, or for a query with more than
    :data:`MAX_FIRST_STAGE_TERMS` distinct terms (``stats`` then needed: index-wide), the
    indexed ones of highest ``qtf * IDF``; the scorer still reads every term."""
    if len(qc.terms) <= MAX_FIRST_STAGE_TERMS:
        return list(range(len(qc.terms)))
    if stats is None:
        raise ValueError("a query above MAX_FIRST_STAGE_TERMS needs the channel's statistics")
    df = np.array([stats.df.get(t, 0) for t in qc.terms], dtype=np.float64)
    idf = np.log1p((stats.doc_count - df + 0.5) / (df + 0.5))
    weight = np.where(df > 0, np.asarray(qc.qtf, dtype=np.float64) * idf, -np.inf)  # absent terms match nothing
    return [int(j) for j in np.lexsort((np.arange(len(qc.terms)), -weight))[:MAX_FIRST_STAGE_TERMS]]


def build_query(first_stage: FirstStageSpec, layout: IndexLayout, prepared: AnalyzedQuery, text: str,
                sent: Mapping[str, Sequence[int]], *, similarity_subfield: str | None = None) -> dict[str, Any]:
    """The first-stage query of an analysed query.

    Args:
        sent: per channel of :func:`term_channels`, the indices of the terms sent (:func:`terms_sent`).
        similarity_subfield: the combined field's sub-field of a ``"similarity:<name>"`` first stage.
    """
    if isinstance(first_stage, Mapping):
        return dict(first_stage)

    def clauses(ch: str, fields: Sequence[str], boost: float = 1.0) -> list[dict[str, Any]]:
        qc = prepared.query.get(ch) or QueryChannel((), ())
        out = []
        for j in sent.get(ch, ()):
            for f in fields:
                for sf in layout.indexed(f, ch):  # a plain index's combined field: each text field
                    out.append({"term": {sf: {"value": qc.terms[j], "boost": qc.qtf[j] * boost}}})
        return out

    if similarity_subfield is not None:
        base = layout.subfield(layout.combined, "base")
        should = [{"term": {f"{layout.combined}.{similarity_subfield}": c["term"][base]}}
                  for c in clauses("base", [layout.combined])]
    elif first_stage == FirstStage.BM25:
        should = clauses("base", [layout.combined])
    elif first_stage == FirstStage.MULTI_MATCH:
        # best_fields = the best field's score per document: a dis_max per field
        should = [{"dis_max": {"queries": [{"bool": {"should": clauses("base", [f])}} for f in layout.fields]}}] \
            if prepared.query["base"].terms else []
    elif first_stage == FirstStage.BM25F:
        should = [{"combined_fields": {"query": text, "fields": [layout.subfield(f, "base") for f in layout.fields]}}]
    else:
        should = []
        for ch in layout.channels:
            should += clauses(ch, [layout.combined], CHANNEL_BOOSTS.get(ch, 0.2))
    if not should:
        return {"match_none": {}}
    return {"bool": {"should": should}}


#: Longest query text the ``bm25`` first stage sends as a ``match`` query for the engine to
#: analyse (:func:`match_query`): at most about half as many terms, far from the engines' clause
#: limit (1024), so that :data:`MAX_FIRST_STAGE_TERMS` need not be applied in Python.
MATCH_TEXT_LIMIT = 1000


def match_query(layout: IndexLayout, text: str) -> dict[str, Any]:
    """The ``bm25`` first stage as the engine's ``match`` query on the combined field's ``base``
    channel, for the engine to analyse ``text`` itself (where esbridge's engine plugin analyses it
    too, and no ``_termvectors`` round trip comes first).  It finds the same documents with the
    same scores as :func:`build_query`'s ``bool`` of ``term`` clauses: Lucene rewrites a term
    the analyzer gives twice into one clause with the boost 2, as that query's ``qtf`` boost."""
    (base,) = layout.indexed(layout.combined, "base")
    return {"match": {base: {"query": text}}}


def with_filter(query: dict[str, Any], filter: Any) -> dict[str, Any]:
    """``query`` restricted by a filter clause (or list of clauses), which does not score.

    Raises:
        ConfigurationError: the filter nests too deeply to be sent
            (:data:`~esbridge.jsoninput.MAX_JSON_DEPTH`).
    """
    if filter is None:
        return query
    check_depth(filter, "the filter")
    return {"bool": {"must": [query], "filter": filter if isinstance(filter, list) else [filter]}}
