"""Hybrid search: a semantic, a lexical and a keyword strategy, aggregated.

After the semantic search pipeline of CAIR 2021 (Dalal, Dev Gupta and Binaei,
FIRE 2021; docs/scoring.md §7: a semantic index and a lexical index, three query
strategies, and an aggregator that deduplicates and sums the scores of a document
found by several strategies):

* **semantic** — the query's sentence embedding against every document's, top
  ``semantic_depth``: the engine's kNN search where the index has a vector field
  (:class:`~esbridge.semantic.engine_vectors.EngineVectors`), else esbridge's exact search
  over vectors on disk (:class:`~esbridge.semantic.vectors.VectorIndex`);
* **lexical** — the engine's first stage, its top ``window`` reranked by one of
  esbridge's scorers (:class:`~esbridge.rerank.Reranker`);
* **keyword** — a second lexical query: the narrative's key terms where a topic
  has one, else terms from pseudo-relevance feedback over the lexical
  strategy's top documents (:mod:`esbridge.hybrid.keyword`);
* **aggregator** — :func:`esbridge.hybrid.fusion.fuse` with the strategies'
  weights (a strategy of weight 0 is not run).

Every strategy reads one analysed query and one set of term vectors: the
query → candidates → features → scores path is the reranker's.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from esbridge.engine.client import Engine
from esbridge.errors import ConfigurationError
from esbridge.features.cache import DocVersion
from esbridge.features.termvectors import FieldVector, QueryChannel, analyze_text
from esbridge.hybrid.fusion import Fusion, RankedList, fuse
from esbridge.hybrid.keyword import (
    KeywordParams,
    expansion_candidates,
    expansion_terms,
    filter_narrative,
    rank_terms_by_idf,
    weighted_terms,
)
from esbridge.jsoninput import check_depth, check_text
from esbridge.rerank import AnalyzedQuery, Reranker, hit_version
from esbridge.scoring import get_scorer
from esbridge.semantic.models import DEFAULT_MODEL, spec_for

if TYPE_CHECKING:
    from esbridge.semantic.engine_vectors import EngineVectors
    from esbridge.semantic.vectors import VectorIndex

__all__ = ["STRATEGIES", "FEEDBACK_WEIGHTINGS", "FEEDBACK_WINDOWS", "KEYWORD_SOURCES", "PipelineParams",
           "PipelineResult", "HybridSearcher"]

#: The strategies, in the order their lists are fused.
STRATEGIES = ("semantic", "lexical", "keyword")
#: How the semantic feedback averages its documents' vectors.
FEEDBACK_WEIGHTINGS = ("mean", "score")
#: Which window of a long document the semantic feedback averages.
FEEDBACK_WINDOWS = ("first", "best")
#: Where the keyword strategy takes its feedback documents from.
KEYWORD_SOURCES = ("lexical", "fusion")


@dataclass(frozen=True)
class PipelineParams:
    """What the pipeline runs and how it fuses.

    Attributes:
        scorer: the lexical strategy's esbridge scorer (``bm25`` for the engine's own
            ranking recomputed exactly).
        window: first-stage hits the lexical scorer reranks.
        semantic_depth: documents the semantic strategy returns.
        keyword: the keyword strategy's parameters.
        semantic_feedback: documents of the first fused ranking whose mean vector is added to
            the query vector before the semantic strategy runs again (Rocchio's relevance
            feedback in the embedding space; 0: one semantic pass).
        semantic_beta: the weight of that mean vector (the query vector weighs 1).
        semantic_feedback_weighting: how the feedback documents' vectors are averaged:
            ``mean`` (equal weights) or ``score`` (each weighted by how far its fused score lies
            above the best document not taken, so a clear leader counts most).
        semantic_feedback_window: which vector of a long feedback document is averaged: ``first``
            (its first passage) or ``best`` (the passage closest to the query, the one that made it
            score; on the exact on-disk path, where documents have every passage's vector).
        keyword_source: where the keyword strategy's feedback documents come from (topics
            without a narrative): ``lexical`` (the top of the lexical strategy) or ``fusion``
            (the top of a first fusion of the semantic and lexical strategies, weighted by rank
            from 1 down to 0.5; fused scores are sums of normalised scores, not likelihoods).
        fusion: ``rrf``, ``zscore`` or ``minmax`` (:class:`~esbridge.hybrid.fusion.Fusion`).
        w_semantic, w_lexical, w_keyword: the strategies' weights in the fusion
            (0 leaves a strategy out).
        rrf_k: the rank offset of reciprocal rank fusion.
        model: the semantic strategy's sentence-embedding model
            (:data:`esbridge.semantic.models.MODELS`).
    """

    scorer: str = "evolved"
    window: int = 1000
    semantic_depth: int = 1000
    keyword: KeywordParams = field(default_factory=KeywordParams)
    semantic_feedback: int = 3
    semantic_beta: float = 1.0
    semantic_feedback_weighting: str = "score"
    semantic_feedback_window: str = "first"
    keyword_source: str = "fusion"
    fusion: Fusion = Fusion.ZSCORE
    w_semantic: float = 3.0
    w_lexical: float = 1.0
    w_keyword: float = 1.0
    rrf_k: float = 60.0
    model: str = DEFAULT_MODEL

    def __post_init__(self) -> None:
        get_scorer(self.scorer)  # raises, listing the valid names
        spec_for(self.model)  # likewise
        object.__setattr__(self, "fusion", Fusion.parse(self.fusion))
        for name in ("window", "semantic_depth"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"pipeline parameter {name} must be an integer >= 1, got {value!r}")
        if isinstance(self.semantic_feedback, bool) or not isinstance(self.semantic_feedback, int) \
                or self.semantic_feedback < 0:
            raise ConfigurationError(f"pipeline parameter semantic_feedback must be an integer >= 0, "
                                     f"got {self.semantic_feedback!r}")
        for name in ("w_semantic", "w_lexical", "w_keyword", "rrf_k", "semantic_beta"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value) or value < 0:
                raise ConfigurationError(f"pipeline parameter {name} must be a finite number >= 0, got {value!r}")
        if self.semantic_feedback_weighting not in FEEDBACK_WEIGHTINGS:
            raise ConfigurationError(f"pipeline parameter semantic_feedback_weighting must be one of "
                                     f"{', '.join(FEEDBACK_WEIGHTINGS)}, got {self.semantic_feedback_weighting!r}")
        if self.semantic_feedback_window not in FEEDBACK_WINDOWS:
            raise ConfigurationError(f"pipeline parameter semantic_feedback_window must be one of "
                                     f"{', '.join(FEEDBACK_WINDOWS)}, got {self.semantic_feedback_window!r}")
        if self.keyword_source not in KEYWORD_SOURCES:
            raise ConfigurationError(f"pipeline parameter keyword_source must be one of "
                                     f"{', '.join(KEYWORD_SOURCES)}, got {self.keyword_source!r}")
        if self.w_semantic + self.w_lexical + self.w_keyword <= 0:
            raise ConfigurationError("at least one of w_semantic, w_lexical, w_keyword must be > 0")

    @property
    def weights(self) -> dict[str, float]:
        """Strategy → weight, for the strategies that run."""
        all_w = {"semantic": self.w_semantic, "lexical": self.w_lexical, "keyword": self.w_keyword}
        return {k: float(v) for k, v in all_w.items() if v > 0}

    def with_overrides(self, **overrides: Any) -> PipelineParams:
        """A copy with ``overrides`` (``keyword.fb_docs=5`` style names allowed as ``keyword_fb_docs``)."""
        kw = {k.removeprefix("keyword_"): v for k, v in overrides.items() if k.startswith("keyword_")}
        top = {k: v for k, v in overrides.items() if not k.startswith("keyword_")}
        valid = {f.name for f in fields(self)}
        unknown = sorted(set(top) - valid)
        if unknown:
            raise ConfigurationError(f"unknown pipeline parameter(s) {', '.join(unknown)}; valid: "
                                     f"{', '.join(sorted(valid - {'keyword'}))}, keyword_<name>")
        if kw:
            top["keyword"] = replace(self.keyword, **kw)
        return replace(self, **top)


@dataclass
class PipelineResult:
    """Every strategy's list and the fused ranking of one query.

    Attributes:
        lists: strategy → its result (ids with the strategy's own scores, best first);
            ``semantic_feedback`` is the second semantic pass, which is what the fusion used
            in place of ``semantic`` when it ran.
        ids, scores: the fused ranking, best first.
        parts: strategy → each fused id's weighted contribution.
        expansion: the keyword strategy's terms and weights (empty when it did not run).
        seconds: time per step.
    """

    lists: dict[str, RankedList]
    ids: list[str]
    scores: np.ndarray
    parts: dict[str, np.ndarray]
    expansion: dict[str, float] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)


def feedback_centroid(vectors: np.ndarray, fused_scores: np.ndarray, weighting: str) -> np.ndarray:
    """The weighted mean of the feedback documents' ``vectors`` (the top ``len(vectors)`` of a
    fused ranking whose scores, best first, are ``fused_scores``).

    ``mean``: equal weights.  ``score``: document *i* weighs ``s_i − s_k``, its fused score above
    that of the first document not taken (``k = len(vectors)``; the last taken one's score when
    the ranking has no more); equal weights when all those margins are zero.
    """
    k = len(vectors)
    if weighting == "mean" or k == 1:
        return np.asarray(vectors.mean(axis=0))
    s = np.asarray(fused_scores, dtype=np.float64)
    floor = float(s[k]) if len(s) > k else float(s[k - 1])
    w = np.maximum(s[:k] - floor, 0.0)
    if float(w.sum()) <= 0:
        return np.asarray(vectors.mean(axis=0))
    return np.asarray((vectors * (w / w.sum())[:, None]).sum(axis=0))


class HybridSearcher:
    """The semantic + lexical + keyword pipeline over one index.

    Args:
        engine: the connected engine.
        index: an index created by esbridge.
        params: what runs and how it is fused (default: the shipped defaults).
        vectors: the index's semantic index, :class:`~esbridge.semantic.engine_vectors.EngineVectors`
            or :class:`~esbridge.semantic.vectors.VectorIndex` (default: the one the index has,
            with the model ``params.model``, built on first use).
        reranker: the lexical strategy's reranker (default: one for ``params.scorer``).
        progress: progress bars on stderr while document vectors (and, without ``reranker``, its
            index-wide tables) are built; off by default.
        fields: without ``reranker``, the text fields its reranker reads (see
            :class:`~esbridge.rerank.Reranker`).

    Use as a context manager, or call :meth:`close`.
    """

    def __init__(self, engine: Engine, index: str, params: PipelineParams | None = None, *,
                 vectors: VectorIndex | EngineVectors | None = None, reranker: Reranker | None = None,
                 progress: bool = False, fields: str | Sequence[str] | None = None) -> None:
        self.engine = engine
        self.index = index
        self.params = params or PipelineParams()
        self.reranker = reranker or Reranker(engine, index, scorer=self.params.scorer, window=self.params.window,
                                             fields=fields, progress=progress)
        if self.reranker.scorer != self.params.scorer:
            raise ConfigurationError(f"the reranker scores with {self.reranker.scorer!r} but the pipeline "
                                     f"names {self.params.scorer!r}")
        layout = self.reranker.layout
        assert layout is not None
        self.layout = layout
        self._vectors = vectors
        self._progress = progress

    @property
    def vectors(self) -> VectorIndex | EngineVectors:
        """The semantic index (opened, and built if needed, on first use)."""
        if self._vectors is None:
            from esbridge.semantic.engine_vectors import open_vectors
            from esbridge.semantic.models import load_encoder

            self._vectors = open_vectors(self.engine, self.index, load_encoder(self.params.model),
                                         fields=self.layout.fields, progress=self._progress)
        return self._vectors

    def close(self) -> None:
        """Release the reranker's threads."""
        close = getattr(self.reranker, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> HybridSearcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- the strategies --------------------------------------------------------------

    def semantic(self, query: str | np.ndarray, *, filter: Any = None, depth: int | None = None) -> RankedList:
        """The semantic strategy's list for a query text or vector (with a filter, only the top
        documents that match it)."""
        vi = self.vectors
        vi.refresh()
        vec = vi.embed_query(query) if isinstance(query, str) else query
        hits = vi.search(vec, depth or self.params.semantic_depth)
        if filter is None or not hits.ids:
            return RankedList(hits.ids, hits.scores)
        keep = self._matching(hits.ids, filter)
        mask = np.array([d in keep for d in hits.ids], dtype=bool)
        return RankedList([d for d, ok in zip(hits.ids, mask) if ok], hits.scores[mask])

    def _matching(self, ids: Sequence[str], filter: Any) -> set[str]:
        clauses = filter if isinstance(filter, list) else [filter]
        body = {"size": len(ids), "_source": False,
                "query": {"bool": {"filter": [*clauses, {"ids": {"values": list(ids)}}]}}}
        resp = self.engine.search(self.index, body)
        return {str(h["_id"]) for h in resp["hits"]["hits"]}

    def lexical(self, text: str, *, filter: Any = None,
                prepared: AnalyzedQuery | None = None) -> tuple[RankedList, list[DocVersion | None]]:
        """The lexical strategy's list and the hits' ``(_seq_no, _primary_term)``."""
        rr = self.reranker
        prepared = prepared or rr.analyze(text)
        hits = rr.fetch_candidates(prepared, text, window=self.params.window, filter=filter)["hits"]["hits"]
        # a hit deleted between the search and the term-vector fetch is left out, not scored as empty
        ranking = rr.rank(prepared, hits, stats_validated=True)
        return RankedList(ranking.ids, ranking.scores), [hit_version(hits[i]) for i in ranking.order]

    def keyword_terms(self, prepared: AnalyzedQuery, lexical: RankedList,
                      versions: Sequence[DocVersion | None], *, narrative: str | None = None,
                      params: KeywordParams | None = None) -> dict[str, float]:
        """The keyword query's terms and weights (see :mod:`esbridge.hybrid.keyword`); ``params``
        replaces the pipeline's keyword parameters for this call."""
        kp = params or self.params.keyword
        base = prepared.query.get("base") or QueryChannel((), ())
        store, combined = self.reranker.store, self.layout.combined
        sub = self.layout.subfield(combined, "base")
        if narrative and narrative.strip():
            kept = filter_narrative(narrative)
            tokens = analyze_text(self.engine, self.index, self.layout, kept, "base") if kept else []
            qc = QueryChannel.from_tokens(tokens)
            st = store.fetch({"base": qc}, [], [], fields=[combined]).stats[sub]
            extra = rank_terms_by_idf(qc, st.df, st.doc_count, kp.fb_terms)
            return weighted_terms(base, extra, kp.lam)
        n = min(kp.fb_docs, len(lexical.ids))
        if n == 0 or kp.lam == 0:
            return weighted_terms(base, {}, 0.0)
        fb_ids = list(lexical.ids[:n])
        got = store.fetch({"base": base}, fb_ids, list(versions[:n]), fields=[combined])
        vecs = [FieldVector(v.get(sub) or {}) for v in got.candidates.vectors]
        cands = tuple(expansion_candidates(vecs, kp.min_docs))
        if not cands:
            return weighted_terms(base, {}, 0.0)
        st = store.fetch({"base": QueryChannel(cands, (1,) * len(cands))}, [], [], fields=[combined]).stats[sub]
        extra = expansion_terms(vecs, lexical.scores[:n], st.df, st.doc_count, kp, exclude=base.terms)
        return weighted_terms(base, extra, kp.lam)

    def keyword_feedback_documents(self, lists: Mapping[str, RankedList],
                                   versions: Sequence[DocVersion | None],
                                   params: PipelineParams | None = None,
                                   ) -> tuple[RankedList, list[DocVersion | None]]:
        """The keyword strategy's feedback documents with their weights and known versions:
        the lexical list itself, or (``keyword_source="fusion"``) the top ``fb_docs`` of the
        semantic and lexical lists fused, weighted by rank from 1 down to 0.5."""
        p = params or self.params
        lexical = lists["lexical"]
        if p.keyword_source == "lexical" or "semantic" not in lists:
            return lexical, list(versions)
        weights = {"semantic": float(p.w_semantic), "lexical": float(p.w_lexical)}
        if sum(weights.values()) <= 0:
            return lexical, list(versions)
        ids, _, _ = fuse({"semantic": lists["semantic"], "lexical": lexical}, weights, p.fusion, rrf_k=p.rrf_k)
        top = ids[:p.keyword.fb_docs]
        known = dict(zip(lexical.ids, versions, strict=True))
        return (RankedList(top, np.linspace(1.0, 0.5, len(top)) if len(top) > 1 else np.ones(len(top))),
                [known.get(d) for d in top])

    def keyword(self, terms: Mapping[str, float], *, filter: Any = None, depth: int | None = None) -> RankedList:
        """The engine's BM25 ranking for weighted ``terms`` on the combined field, ``depth`` hits
        (default: the keyword parameters' ``depth``)."""
        if not terms:
            return RankedList([], np.zeros(0))
        subs = self.layout.indexed(self.layout.combined, "base")  # a plain index: each text field
        top = sorted(terms.items(), key=lambda kv: (-kv[1], kv[0]))[:1000 // len(subs)]  # the engines' clause limit
        query: dict[str, Any] = {"bool": {"should": [
            {"term": {sub: {"value": t, "boost": float(w)}}} for t, w in top for sub in subs]}}
        if filter is not None:
            query["bool"]["filter"] = filter if isinstance(filter, list) else [filter]
            query["bool"]["minimum_should_match"] = 1
        body = {"size": depth or self.params.keyword.depth, "query": query, "_source": False}
        hits = self.engine.search(self.index, body)["hits"]["hits"]
        return RankedList([str(h["_id"]) for h in hits], np.array([float(h["_score"]) for h in hits]))

    # ---- the pipeline ----------------------------------------------------------------

    def run(self, text: str, *, narrative: str | None = None, filter: Any = None,
            strategies: Collection[str] | None = None) -> PipelineResult:
        """The strategies of weight > 0 for ``text``, and their fusion.

        Args:
            narrative: the topic's description, for the keyword strategy.
            filter: a query clause (or list) every returned document must match.
            strategies: compute these strategies' lists too (e.g. all of :data:`STRATEGIES`,
                to measure each alone); only those of weight > 0 are fused.
        """
        if not isinstance(text, str):
            raise ConfigurationError(f"query text must be a string, got {type(text).__name__}")
        check_text(text, "query text")
        if filter is not None:
            check_depth(filter, "the filter")
        p = self.params
        weights = p.weights
        wanted = set(weights) | set(strategies or ())
        unknown = sorted(wanted - set(STRATEGIES))
        if unknown:
            raise ConfigurationError(f"unknown strategy {', '.join(unknown)}; choose from {', '.join(STRATEGIES)}")
        lists: dict[str, RankedList] = {}
        seconds: dict[str, float] = {}
        expansion: dict[str, float] = {}
        t0 = time.perf_counter()
        prepared: AnalyzedQuery | None = None
        versions: list[DocVersion | None] = []
        if "lexical" in wanted or "keyword" in wanted:
            prepared = self.reranker.analyze(text)
            lists["lexical"], versions = self.lexical(text, filter=filter, prepared=prepared)
            seconds["lexical"] = time.perf_counter() - t0
        qvec = None
        if "semantic" in wanted or ("keyword" in wanted and p.keyword_source == "fusion"):
            t2 = time.perf_counter()
            qvec = self.vectors.embed_query(text)
            lists["semantic"] = self.semantic(qvec, filter=filter)
            seconds["semantic"] = time.perf_counter() - t2
        if "keyword" in wanted:
            assert prepared is not None
            t1 = time.perf_counter()
            fb_list, fb_versions = self.keyword_feedback_documents(lists, versions)
            expansion = self.keyword_terms(prepared, fb_list, fb_versions, narrative=narrative)
            lists["keyword"] = self.keyword(expansion, filter=filter)
            seconds["keyword"] = time.perf_counter() - t1
        t3 = time.perf_counter()
        ordered = {k: lists[k] for k in STRATEGIES if k in lists and k in wanted}
        result = self.aggregate(ordered, qvec, filter=filter)
        seconds["fusion"] = time.perf_counter() - t3
        result.expansion = expansion
        result.seconds = {**seconds, **result.seconds}
        return result

    def aggregate(self, lists: Mapping[str, RankedList], query_vector: np.ndarray | None, *,
                  params: PipelineParams | None = None, filter: Any = None) -> PipelineResult:
        """The aggregator: fuse the strategies' ``lists`` (those of weight > 0), then, with
        semantic feedback on, run the semantic strategy again from the query vector moved
        towards the first fusion's top documents and fuse once more.

        ``params`` overrides the pipeline's fusion settings (its strategy settings are what
        produced ``lists``); used to measure settings without running the strategies again.
        """
        p = params or self.params
        weights = p.weights
        out = dict(lists)
        fused = {k: v for k, v in lists.items() if k in weights}
        ids, scores, parts = fuse(fused, weights, p.fusion, rrf_k=p.rrf_k)
        seconds: dict[str, float] = {}
        if query_vector is not None and p.semantic_feedback > 0 and ids and "semantic" in fused:
            t0 = time.perf_counter()
            fb = self.vectors.vectors_of(ids[:p.semantic_feedback],
                                         query_vector if p.semantic_feedback_window == "best" else None)
            if len(fb):
                moved = query_vector + p.semantic_beta * feedback_centroid(fb, scores, p.semantic_feedback_weighting)
                moved /= max(float(np.linalg.norm(moved)), 1e-12)
                out["semantic_feedback"] = self.semantic(moved.astype(np.float32), filter=filter)
                fused["semantic"] = out["semantic_feedback"]
                ids, scores, parts = fuse(fused, weights, p.fusion, rrf_k=p.rrf_k)
            seconds["semantic_feedback"] = time.perf_counter() - t0
        return PipelineResult(lists=out, ids=ids, scores=scores, parts=parts, seconds=seconds)

    def search(self, text: str, size: int = 10, *, narrative: str | None = None, filter: Any = None,
               fields: Sequence[str] | None = None, explain: bool = False) -> dict[str, Any]:
        """The top ``size`` documents of the fused ranking, as an engine-shaped search response.

        Each hit's ``_score`` is the fused score; ``_esbridge.strategies`` gives the rank and
        score of the hit in every strategy that found it, and with ``explain`` each
        strategy's contribution to the fused score.
        """
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ConfigurationError(f"size must be an integer >= 0, got {size!r}")
        t0 = time.perf_counter()
        res = self.run(text, narrative=narrative, filter=filter)
        pos = {name: {d: i for i, d in enumerate(lst.ids)} for name, lst in res.lists.items()}
        hits = []
        for i, doc_id in enumerate(res.ids[:size]):
            found = {name: {"rank": p[doc_id] + 1, "score": float(res.lists[name].scores[p[doc_id]])}
                     for name, p in pos.items() if doc_id in p}
            meta: dict[str, Any] = {"strategies": found}
            if explain:
                meta["parts"] = {name: float(v[i]) for name, v in res.parts.items()}
            hits.append({"_index": self.index, "_id": doc_id, "_score": float(res.scores[i]), "_esbridge": meta})
        self.reranker._attach_sources(hits, fields)
        took = int((time.perf_counter() - t0) * 1000)
        return {
            "took": took,
            "timed_out": False,
            "hits": {"total": {"value": len(res.ids), "relation": "eq"},
                     "max_score": hits[0]["_score"] if hits else None, "hits": hits},
            "_esbridge": {"pipeline": {"fusion": self.params.fusion.value, "weights": self.params.weights,
                                       "scorer": self.params.scorer},
                          "expansion": res.expansion, "seconds": res.seconds},
        }
