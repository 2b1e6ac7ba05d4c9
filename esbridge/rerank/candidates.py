"""Candidates: the analysed query, the first stage's hits, and their ranking by scores.

Pure data and functions (no engine calls): the types the pipeline passes along
(:class:`AnalyzedQuery`, :class:`CandidateUnion`, :class:`RerankStats`, :class:`Ranking`), how
a hit's version is read for the feature caches (:func:`hit_version`), how the candidates of a
query and of its variants are united (:func:`union_of`), which fields the scorer's input is
built from (:func:`fields_to_read`), the one order scores put candidates in (:func:`rank_order`:
equal scores keep the first stage's order) and how a ranking reorders hits (:func:`reorder_hits`).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from esbridge.errors import ConfigurationError
from esbridge.features.cache import DocVersion, HitVersion
from esbridge.features.termvectors import QueryChannel
from esbridge.index.definitions import IndexLayout
from esbridge.jsoninput import check_depth
from esbridge.scoring import ScoreResult
from esbridge.scoring.registry import Scorer

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RerankStats:
    """Timings and cache figures of the last call (seconds); ``augment`` is the time an
    augmenter took to make the query's variants."""

    analyze: float = 0.0
    first_stage: float = 0.0
    features: float = 0.0
    scoring: float = 0.0
    fetch_source: float = 0.0
    candidates: int = 0
    dropped_terms: int = 0
    augment: float = 0.0


def check_count(name: str, value: Any, *, allow_none: bool = False) -> None:
    """``value`` is an integer >= 1 (or ``None`` where allowed); the error names the parameter."""
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"{name} must be an integer >= 1, got {value!r}")


def check_page(page: Any) -> tuple[int, int] | None:
    """``page`` as ``(from, size)``, two integers >= 0 (or ``None``); the error names the parameter."""
    if page is None:
        return None
    if (not isinstance(page, (tuple, list)) or len(page) != 2
            or any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in page)):
        raise ConfigurationError(f"page must be (from, size), two integers >= 0, got {page!r}")
    return int(page[0]), int(page[1])


def hit_version(hit: Mapping[str, Any]) -> HitVersion | None:
    """``_seq_no``, ``_primary_term`` and (when the search returned it) ``_version`` of a hit,
    ``None`` when it has no ``_seq_no``/``_primary_term``."""
    if "_seq_no" not in hit or "_primary_term" not in hit:
        return None
    seq_no, term, version = hit["_seq_no"], hit["_primary_term"], hit.get("_version")
    try:
        return HitVersion(int(seq_no), int(term), None if version is None or int(version) < 0 else int(version))
    except (TypeError, ValueError):
        raise ConfigurationError(
            f"hit {hit.get('_id')!r} has a _seq_no/_primary_term/_version that is not an integer "
            f"({hit['_seq_no']!r}, {hit['_primary_term']!r}, {hit.get('_version')!r}); pass the engine's "
            "response unchanged"
        ) from None


@dataclass
class AnalyzedQuery:
    """A query text as the index's analysers see it.

    Attributes:
        query: per channel, the distinct terms and their counts.
        dropped: terms left out of the first stage (above
            :data:`esbridge.rerank.first_stage.MAX_FIRST_STAGE_TERMS`); the scorer still reads them.
    """

    query: dict[str, QueryChannel]
    dropped: int


@dataclass
class CandidateUnion:
    """The first-stage candidates of a query and of its variants, found with one ``_msearch``.

    Attributes:
        responses: each query's engine response (0: the original query, then the variants
            in order); queries with the same first-stage request share one response.
        hits: the union: the original query's hits in its order, then each variant's hits
            not seen before, in that variant's order.
        ranks: per query, ``{id: rank}`` (from 1) of its hits.
    """

    responses: list[dict[str, Any]]
    hits: list[dict[str, Any]]
    ranks: list[dict[str, int]]


def union_of(responses: list[dict[str, Any]]) -> CandidateUnion:
    """The union of several queries' first-stage responses (see :class:`CandidateUnion`)."""
    hits: list[dict[str, Any]] = []
    seen: set[str] = set()
    ranks = []
    for r in responses:
        ranks.append({str(h["_id"]): n for n, h in enumerate(r["hits"]["hits"], start=1)})
        for h in r["hits"]["hits"]:
            if str(h["_id"]) not in seen:
                seen.add(str(h["_id"]))
                hits.append(h)
    return CandidateUnion(responses=responses, hits=hits, ranks=ranks)


def dropped_hit(hit: Mapping[str, Any], reason: str) -> dict[str, Any]:
    """How a hit left out of a response is reported (``_esbridge.dropped``)."""
    return {"_index": hit.get("_index"), "_id": str(hit["_id"]), "reason": reason}


def response_hits(response: Any) -> tuple[Mapping[str, Any], list[dict[str, Any]]]:
    """A search response given to be rescored (a dict, or the Elasticsearch client's response
    object), checked, and a copy of its hits.

    Raises:
        ConfigurationError: not a search response, nested too deeply, or a hit without ``_id``.
    """
    body = getattr(response, "body", None)  # the elasticsearch 8/9 client's ObjectApiResponse
    if not isinstance(response, Mapping) and isinstance(body, Mapping):
        response = body
    if not isinstance(response, Mapping):
        raise ConfigurationError(
            f"the response is a {type(response).__name__}, not a search response: pass the body a _search "
            "request returned (a dict, or the client's response object)")
    check_depth(response, "the response")
    if not isinstance(response.get("hits"), Mapping) or not isinstance(response["hits"].get("hits"), list):
        raise ConfigurationError("the response has no hits.hits list; pass the body a _search request returned")
    hits = copy.deepcopy(response["hits"]["hits"])
    for i, h in enumerate(hits):
        if not isinstance(h, Mapping) or "_id" not in h:
            raise ConfigurationError(f"hit {i} of the response has no _id")
    return response, hits


def unique_hits(hits: Sequence[dict[str, Any]], index: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``hits`` with each document (``_index`` and ``_id``; a hit without ``_index`` is of
    ``index``) once, where it first appears; and the later copies, as :func:`dropped_hit` reports."""
    seen: set[tuple[str, str]] = set()
    kept, dropped = [], []
    for h in hits:
        key = (str(h.get("_index") or index), str(h["_id"]))
        if key in seen:
            dropped.append(dropped_hit(h, "duplicate"))
        else:
            seen.add(key)
            kept.append(h)
    return kept, dropped


def describe_dropped(dropped: Sequence[Mapping[str, Any]], index: str) -> str:
    """One line on the hits of ``index`` left out of a response (:func:`dropped_hit`'s reports)."""
    why = {"duplicate": "repeats an earlier hit of the same document",
           "deleted": "no longer in the index: deleted since the search"}
    parts = []
    for reason in dict.fromkeys(d["reason"] for d in dropped):
        ids = [repr(d["_id"]) for d in dropped if d["reason"] == reason]
        shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
        parts.append(f"{shown} ({why.get(reason, reason)})")
    return f"left out {len(dropped)} hit(s) of {index!r}: {'; '.join(parts)}"


def fields_to_read(scorer: Scorer[Any], layout: IndexLayout,
                   field_weights: Mapping[str, float] | None) -> tuple[str, ...]:
    """The fields whose channel sub-fields the scorer's input is built from: every text field
    for a scorer that weighs fields itself (BM25F) or where field weights are not all 1, else
    the combined field."""
    weights = field_weights or {}
    if scorer.needs_fields or any(w != 1.0 for w in weights.values()):
        return tuple(layout.fields)
    return (layout.combined,)


def rank_order(scores: Sequence[float] | np.ndarray) -> np.ndarray:
    """The positions of candidates best first: score descending, and **equal scores keep the
    candidates' order** — the first stage's (the engine's ranking; for a query with variants,
    the query's hits, then each variant's new ones).  Every ranking esbridge makes (search,
    rescore, eval and run, tune, the hybrid pipeline's strategies and fusion, the demo) orders
    by this one rule, so commands rank equal scores alike."""
    s = np.asarray(scores, dtype=np.float64)
    return np.lexsort((np.arange(len(s)), -s))


def candidate_keys(candidates: Sequence[Mapping[str, Any] | str]) -> tuple[list[str], list[HitVersion | None]]:
    """The ids and versions (:func:`hit_version`) of candidates given as hits or as ids (no version)."""
    ids: list[str] = []
    versions: list[HitVersion | None] = []
    for i, c in enumerate(candidates):
        if type(c) is dict and "_id" in c:  # a hit as the engine's JSON gives it: no ABC lookup
            ids.append(str(c["_id"]))
            versions.append(hit_version(c) if "_seq_no" in c else None)
        elif isinstance(c, str):
            ids.append(c)
            versions.append(None)
        elif isinstance(c, Mapping) and "_id" in c:
            ids.append(str(c["_id"]))
            versions.append(hit_version(c))
        else:
            raise ConfigurationError(f"candidate {i} is neither a hit with an _id nor a document id: {c!r:.80}")
    return ids, versions


@dataclass(frozen=True, eq=False)
class Ranking:
    """Candidates ranked by scores (:meth:`esbridge.rerank.Reranker.rank`), by :func:`rank_order`.

    Attributes:
        ids: the ranked candidates' ids, best first (without those the engine no longer holds).
        scores: their scores, aligned with ``ids``.
        order: their positions among the candidates given, aligned with ``ids``.
        found: per candidate given (in their order), whether the engine still held it.
        dropped: the ids of the candidates it no longer held (deleted since the first stage).
        result: every candidate's score and its parts, in the order the candidates were given.
    """

    ids: list[str]
    scores: np.ndarray
    order: np.ndarray
    found: list[bool]
    dropped: list[str]
    result: ScoreResult

    @classmethod
    def of(cls, ids: Sequence[str], result: ScoreResult | Sequence[float] | np.ndarray,
           found: Sequence[bool] | None = None) -> Ranking:
        """Candidates ``ids`` ranked by their scores (``result``, in the order of ``ids``); with
        ``found``, only those it marks."""
        if not isinstance(result, ScoreResult):
            result = ScoreResult(np.asarray(result, dtype=np.float64))
        kept = [True] * len(ids) if found is None else [bool(f) for f in found]
        order = rank_order(result.scores)
        order = order[np.asarray(kept, dtype=bool)[order]]
        scores = np.asarray(result.scores, dtype=np.float64)[order]
        return cls(ids=[str(ids[i]) for i in order], scores=scores, order=order, found=kept,
                   dropped=[str(d) for d, ok in zip(ids, kept) if not ok], result=result)


@dataclass(frozen=True, eq=False)
class Retrieved:
    """A query's first stage and its hits ranked (:meth:`esbridge.rerank.Reranker.retrieve`).

    Attributes:
        query: the query as the index's analyzers analysed it.
        hits: the first stage's hits, in its order (the features the engine plugin added taken
            out of them).
        ranking: those hits ranked by the reranker's scorer (:class:`Ranking`).
    """

    query: AnalyzedQuery
    hits: list[dict[str, Any]]
    ranking: Ranking

    def versions(self) -> list[DocVersion | None]:
        """The ranked hits' versions (:func:`hit_version`), aligned with ``ranking.ids``:
        ``None`` where the first stage did not ask for them (its hits brought their features)."""
        return [hit_version(self.hits[i]) for i in self.ranking.order]


def response_meta(scorer: str, index: str, prepared: AnalyzedQuery, n: int, *,
                  variants: Sequence[tuple[AnalyzedQuery, float]] | None = None, original_weight: float = 1.0,
                  texts: Sequence[str] | None = None, dropped: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """What ``_esbridge`` of a reranked response of ``index`` says (``n``: the candidates reranked);
    ``dropped``: the hits left out of it (each :func:`dropped_hit`), also logged as a warning."""
    meta: dict[str, Any] = {"scorer": scorer, "window": n,
                            "terms": {ch: list(qc.terms) for ch, qc in prepared.query.items()}}
    if dropped:
        meta["dropped"] = [dict(d) for d in dropped]
        log.warning("%s", describe_dropped(dropped, index))
    if prepared.dropped:
        meta["first_stage_terms_dropped"] = prepared.dropped
    if variants is not None:
        meta["original_weight"] = original_weight
        meta["augmentations"] = [
            {**({"text": texts[i]} if texts is not None else {}), "weight": w,
             "terms": {ch: list(qc.terms) for ch, qc in v.query.items()}}
            for i, (v, w) in enumerate(variants)]
    return meta


def reorder_hits(hits: Sequence[Mapping[str, Any]], ranking: Ranking, *, explain: bool = False,
                 ranks: Sequence[Mapping[str, int]] | None = None,
                 limit: int | None = None) -> list[dict[str, Any]]:
    """``hits`` in the order of their ``ranking`` (:class:`Ranking`: the hits the engine no
    longer holds left out), each with its new ``_score`` and, under ``_esbridge``, its
    first-stage score and rank (with ``ranks`` of a :class:`CandidateUnion`: the original
    query's, and each variant's rank) and with ``explain`` the score's parts; with ``limit``,
    only the first ``limit`` of them."""
    ids = [str(h["_id"]) for h in hits]
    result = ranking.result
    order = ranking.order
    if limit is not None:
        order = order[:max(limit, 0)]
    out = []
    for rank in order:
        h = dict(hits[rank])
        meta: dict[str, Any] = {"first_stage_score": h.get("_score"), "first_stage_rank": int(rank) + 1}
        if ranks is not None:
            # the original query's first-stage score and rank (None: found by a variant only)
            own = ranks[0].get(ids[rank])
            meta = {"first_stage_score": h.get("_score") if own is not None else None, "first_stage_rank": own,
                    "variant_ranks": {str(i): r[ids[rank]] for i, r in enumerate(ranks[1:], start=1)
                                      if ids[rank] in r}}
        if explain:
            meta["parts"] = {k: float(v[rank]) for k, v in result.parts.items()
                             if np.ndim(v) == 1 and len(v) == len(hits)}
        h["_score"] = float(result.scores[rank])
        h["_esbridge"] = meta
        out.append(h)
    return out
