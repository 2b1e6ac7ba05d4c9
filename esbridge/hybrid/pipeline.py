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

import logging
import sys
import threading
import time
from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from esbridge.engine.calls import ids_search_plan
from esbridge.engine.client import Engine
from esbridge.engine.plan import run
from esbridge.errors import ConfigurationError
from esbridge.features.cache import DocVersion
from esbridge.features.termvectors import FieldVector, QueryChannel, analyze_text
from esbridge.hybrid.calibration import (
    STRATEGIES,
    Calibration,
    CalibrationParams,
    measure,
    store_calibration,
    stored_calibration,
    weights_from,
)
from esbridge.hybrid.fusion import Fusion, RankedList, fuse
from esbridge.hybrid.keyword import (
    KeywordParams,
    expansion_candidates,
    expansion_terms,
    filter_narrative,
    rank_terms_by_idf,
    weighted_terms,
)
from esbridge.hybrid.topicrank import engine_stems, topicrank
from esbridge.jsoninput import check_depth, check_text
from esbridge.rerank import AnalyzedQuery, Reranker, hit_version
from esbridge.scoring import get_scorer
from esbridge.semantic.models import DEFAULT_MODEL, spec_for

if TYPE_CHECKING:
    from esbridge.semantic.engine_vectors import EngineVectors
    from esbridge.semantic.vectors import SemanticHits, VectorIndex

log = logging.getLogger(__name__)

__all__ = ["STRATEGIES", "WEIGHTINGS", "FEEDBACK_WEIGHTINGS", "FEEDBACK_WINDOWS", "FEEDBACK_SOURCES",
           "FEEDBACK_CANDIDATES_FROM", "FEEDBACK_SCOPES", "KEYWORD_SOURCES", "PRESETS", "PipelineParams",
           "PipelineResult", "HybridSearcher"]

#: How the semantic feedback averages its documents' vectors.
FEEDBACK_WEIGHTINGS = ("mean", "score")
#: Which window of a long document the semantic feedback averages.
FEEDBACK_WINDOWS = ("first", "best")
#: Where the keyword strategy takes its feedback documents from.
KEYWORD_SOURCES = ("lexical", "fusion")
#: Which first fusion the semantic feedback's documents come from (:attr:`PipelineParams.semantic_feedback_from`).
FEEDBACK_SOURCES = ("all", "lexical_semantic")
#: Which documents the second semantic pass searches (:attr:`PipelineParams.semantic_feedback_scope`).
FEEDBACK_SCOPES = ("auto", "index", "candidates")
#: Documents with a vector from which the ``auto`` feedback scope searches the candidates only: below,
#: the second search of the whole index costs a few milliseconds more than the filtered one (2 to 19 ms
#: at 5,000 and 50,000 documents on OpenSearch 3.5 and Elasticsearch 8.19); from 200,000 it is the
#: pipeline's step that grows most (``benchmarks/results/hybrid-scale-*-candidates.md``). A bound by
#: cost: on the judged collections (all below it) either scope ranks within 0.2 points nDCG@10.
FEEDBACK_CANDIDATES_FROM = 100_000
#: The named parameter sets (:meth:`PipelineParams.preset`): the shipped defaults, and the source as written.
PRESETS = ("default", "seed004", "ensemble")
#: The other small models of the ``ensemble`` preset (:meth:`PipelineParams.ensemble_preset`).
ENSEMBLE_MODELS = ("e5-small-v2-q", "all-minilm-l6-v2-q")
#: Where the strategies' weights come from: measured on the index, or the parameters alone.
WEIGHTINGS = ("calibrated", "fixed")


@dataclass(frozen=True)
class PipelineParams:
    """What the pipeline runs and how it fuses.

    Attributes:
        scorer: the lexical strategy's esbridge scorer (``bm25`` for the engine's own
            ranking recomputed exactly).
        scorer_params: the scorer's parameters that differ from its defaults
            (``{"k1": 1.5, "b": 0.75}``).
        window: first-stage hits the lexical scorer reranks.
        semantic_depth: documents the semantic strategy returns.
        keyword: the keyword strategy's parameters.
        semantic_feedback: documents of the first fused ranking whose mean vector is added to
            the query vector before the semantic strategy runs again (Rocchio's relevance
            feedback in the embedding space; 0: one semantic pass).
        semantic_beta: the weight of that mean vector (the query vector weighs 1).
        semantic_feedback_depth: documents the second semantic pass returns (``None``: the
            ``semantic_depth`` of the first).
        semantic_feedback_weighting: how the feedback documents' vectors are averaged:
            ``mean`` (equal weights) or ``score`` (each weighted by how far its fused score lies
            above the best document not taken, so a clear leader counts most).
        semantic_feedback_window: which vector of a long feedback document is averaged: ``first``
            (its first passage) or ``best`` (the passage closest to the query, the one that made it
            score; on the exact on-disk path, where documents have every passage's vector).
        semantic_feedback_from: which first fusion gives the feedback documents: ``all`` (every
            strategy's list, the keyword strategy's too) or ``lexical_semantic`` (the lexical and
            semantic lists alone, so the second semantic pass runs while the keyword strategy does).
        semantic_feedback_scope: which documents the second semantic pass searches: ``auto`` (the
            default: ``index`` on an index of fewer than :data:`FEEDBACK_CANDIDATES_FROM` documents
            with a vector, ``candidates`` from there, where the whole index's second search
            becomes the pipeline's most costly step; :meth:`HybridSearcher.feedback_scope`), ``index``
            (the whole index: a kNN search as deep as the first) or ``candidates`` (only the
            documents of the first fusion that gave its feedback documents, scored by the moved
            vector: exactly on disk; with the vectors in the engine, its kNN search filtered to
            their ids, which reads their passages' vectors directly where there are few and
            otherwise searches its graphs with every other document left out; documents no
            strategy found are not looked for again).
        keyword_source: where the keyword strategy's feedback documents come from (topics
            without a narrative): ``lexical`` (the top of the lexical strategy) or ``fusion``
            (the top of a first fusion of the semantic and lexical strategies, weighted by rank
            from 1 down to 0.5; fused scores are sums of normalised scores, not likelihoods).
        fusion: ``rrf``, ``zscore`` or ``minmax`` (:class:`~esbridge.hybrid.fusion.Fusion`).
        weighting: ``calibrated`` (default): each strategy's weight is its ``w_*`` times the factor
            measured on the index (:mod:`esbridge.hybrid.calibration`); ``fixed``: the ``w_*`` alone.
        calibration: how the calibration is measured.
        w_semantic, w_lexical, w_keyword: the strategies' weights in the fusion
            (0 leaves a strategy out).
        w_document: a fourth list, an exact kNN over one vector per whole document (its first
            512 word pieces; :class:`~esbridge.semantic.vectors.VectorIndex` without windows) from
            the same query vector, joins the last fusion with this multiple of the semantic
            strategy's weight (0, the default: not run).  Passages and whole documents make
            different mistakes: at 2 it gained on every shared collection over the engines' own
            hybrid search, leave-one-collection-out (``benchmarks/results/engine-hybrid-levers.md``);
            it embeds every document once more.
        ensemble: other sentence-embedding models (:data:`esbridge.semantic.models.MODELS`), each
            adding a whole-document kNN list of its own to the last fusion (``document <model>``):
            small models make different mistakes.  Each weighs ``w_ensemble`` times the semantic
            strategy's weight, and, calibrated, times ``(m / m_document) ** ensemble_sharpness``,
            its mean reciprocal rank on the index's known-item pseudo-queries over the pipeline's
            own model's whole-document list's (measured with the other strategies).  Each model
            embeds every document once more.
        w_ensemble: see ``ensemble``.
        ensemble_sharpness: see ``ensemble``.
        document_feedback: documents of the fused ranking (the whole-document lists included)
            whose vectors, each list's own model's, move each whole-document list's query vector
            (Rocchio's feedback again, one pass per model) before that list runs once more and the
            lists are fused again (0, the default: one pass).  The second pass of list ``L`` is the
            list ``L feedback``.
        document_beta: the weight of the feedback documents' mean vector (the query's weighs 1).
        document_feedback_share: the share of each whole-document list's weight its second pass
            takes (1: the second pass replaces the first).
        rrf_k: the rank offset of reciprocal rank fusion.
        model: the semantic strategy's sentence-embedding model
            (:data:`esbridge.semantic.models.MODELS`).
        result_depth: documents the fused ranking keeps (``None``: every document of the lists).
    """

    scorer: str = "evolved"
    window: int = 1000
    semantic_depth: int = 1000
    keyword: KeywordParams = field(default_factory=KeywordParams)
    semantic_feedback: int = 3
    semantic_beta: float = 1.0
    semantic_feedback_depth: int | None = None
    semantic_feedback_weighting: str = "score"
    semantic_feedback_window: str = "first"
    semantic_feedback_from: str = "all"
    semantic_feedback_scope: str = "auto"
    keyword_source: str = "fusion"
    fusion: Fusion = Fusion.ZSCORE
    weighting: str = "calibrated"
    calibration: CalibrationParams = field(default_factory=CalibrationParams)
    w_semantic: float = 3.0
    w_lexical: float = 1.0
    w_keyword: float = 0.5
    w_document: float = 0.0
    ensemble: tuple[str, ...] = ()
    w_ensemble: float = 1.0
    ensemble_sharpness: float = 4.0
    document_feedback: int = 0
    document_beta: float = 0.25
    document_feedback_share: float = 1.0
    rrf_k: float = 60.0
    model: str = DEFAULT_MODEL
    scorer_params: Mapping[str, Any] = field(default_factory=dict, hash=False)  # compared, not hashed
    result_depth: int | None = None

    def __post_init__(self) -> None:
        for name, kind in (("keyword", KeywordParams), ("calibration", CalibrationParams)):
            value = getattr(self, name)
            if isinstance(value, Mapping):  # the nested parameters given as an object (e.g. from JSON)
                valid = {f.name for f in fields(kind)}
                unknown = sorted(set(value) - valid)
                if unknown:
                    named = ", ".join(f"{name}.{k}" for k in unknown)
                    raise ConfigurationError(f"unknown pipeline parameter(s) {named}; valid: "
                                             f"{', '.join(sorted(valid))}")
                object.__setattr__(self, name, kind(**value))
            elif not isinstance(value, kind):
                raise ConfigurationError(f"pipeline parameter {name} must be {kind.__name__} or an object of its "
                                         f"parameters, got {value!r}")
        get_scorer(self.scorer)  # raises, listing the valid names
        if not isinstance(self.scorer_params, Mapping):
            raise ConfigurationError(f"pipeline parameter scorer_params must be an object of scorer parameters, "
                                     f"got {self.scorer_params!r}")
        object.__setattr__(self, "scorer_params", dict(self.scorer_params))
        self.make_scorer_params()
        if self.result_depth is not None and (isinstance(self.result_depth, bool)
                                              or not isinstance(self.result_depth, int) or self.result_depth < 1):
            raise ConfigurationError(f"pipeline parameter result_depth must be an integer >= 1 or null, "
                                     f"got {self.result_depth!r}")
        spec_for(self.model)  # likewise
        self._check_ensemble()
        object.__setattr__(self, "fusion", Fusion.parse(self.fusion))
        for name in ("window", "semantic_depth"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"pipeline parameter {name} must be an integer >= 1, got {value!r}")
        for name in ("semantic_feedback", "document_feedback"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigurationError(f"pipeline parameter {name} must be an integer >= 0, got {value!r}")
        share = self.document_feedback_share
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 <= share <= 1:
            raise ConfigurationError(f"pipeline parameter document_feedback_share must be a number from 0 to 1, "
                                     f"got {share!r}")
        for name in ("w_semantic", "w_lexical", "w_keyword", "w_document", "w_ensemble", "ensemble_sharpness",
                     "rrf_k", "semantic_beta", "document_beta"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value) or value < 0:
                raise ConfigurationError(f"pipeline parameter {name} must be a finite number >= 0, got {value!r}")
        if self.semantic_feedback_depth is not None and (
                isinstance(self.semantic_feedback_depth, bool) or not isinstance(self.semantic_feedback_depth, int)
                or self.semantic_feedback_depth < 1):
            raise ConfigurationError(f"pipeline parameter semantic_feedback_depth must be an integer >= 1 or null, "
                                     f"got {self.semantic_feedback_depth!r}")
        if self.semantic_feedback_weighting not in FEEDBACK_WEIGHTINGS:
            raise ConfigurationError(f"pipeline parameter semantic_feedback_weighting must be one of "
                                     f"{', '.join(FEEDBACK_WEIGHTINGS)}, got {self.semantic_feedback_weighting!r}")
        if self.semantic_feedback_window not in FEEDBACK_WINDOWS:
            raise ConfigurationError(f"pipeline parameter semantic_feedback_window must be one of "
                                     f"{', '.join(FEEDBACK_WINDOWS)}, got {self.semantic_feedback_window!r}")
        if self.semantic_feedback_from not in FEEDBACK_SOURCES:
            raise ConfigurationError(f"pipeline parameter semantic_feedback_from must be one of "
                                     f"{', '.join(FEEDBACK_SOURCES)}, got {self.semantic_feedback_from!r}")
        if self.semantic_feedback_scope not in FEEDBACK_SCOPES:
            raise ConfigurationError(f"pipeline parameter semantic_feedback_scope must be one of "
                                     f"{', '.join(FEEDBACK_SCOPES)}, got {self.semantic_feedback_scope!r}")
        if self.weighting not in WEIGHTINGS:
            raise ConfigurationError(f"pipeline parameter weighting must be one of {', '.join(WEIGHTINGS)}, "
                                     f"got {self.weighting!r}")
        if self.keyword_source not in KEYWORD_SOURCES:
            raise ConfigurationError(f"pipeline parameter keyword_source must be one of "
                                     f"{', '.join(KEYWORD_SOURCES)}, got {self.keyword_source!r}")
        if self.w_semantic + self.w_lexical + self.w_keyword <= 0:
            raise ConfigurationError("at least one of w_semantic, w_lexical, w_keyword must be > 0")

    def _check_ensemble(self) -> None:
        models = self.ensemble
        if isinstance(models, str) or not isinstance(models, (list, tuple)) \
                or not all(isinstance(m, str) for m in models):
            raise ConfigurationError(f"pipeline parameter ensemble must be a list of model names, got {models!r}")
        for m in models:
            spec_for(m)  # raises, listing the models
        if self.model in models or len(set(models)) != len(models):
            raise ConfigurationError(f"pipeline parameter ensemble names each model once, other than the model "
                                     f"{self.model!r}; got {', '.join(models)}")
        object.__setattr__(self, "ensemble", tuple(models))

    @property
    def document_lists(self) -> tuple[str, ...]:
        """The whole-document lists that run: ``document`` (with ``w_document``), then ``document <model>``
        per :attr:`ensemble` model."""
        own = ("document",) if self.w_document > 0 else ()
        return own + tuple(f"document {m}" for m in self.ensemble)

    @classmethod
    def seed004(cls) -> PipelineParams:
        """The pipeline of the CAIR 2021 source as written (docs/scoring.md §7.7): Okapi BM25
        (k1 1.5, b 0.75, the rank_bm25 defaults the source names) over the documents' text for
        the query, the query's embedding, and the narrative's TopicRank keyphrases through the
        same BM25, 500 documents each; their raw scores summed, the top 500 kept.  The shipped
        embedding model stands in for the source's msmarco-distilbert-base-v4."""
        return cls(scorer="bm25_robertson", scorer_params={"k1": 1.5, "b": 0.75}, window=500, semantic_depth=500,
                   keyword=KeywordParams(depth=500, extractor="topicrank", keyphrases=10), semantic_feedback=0,
                   keyword_source="lexical", fusion=Fusion.SUM, weighting="fixed", w_semantic=1.0, w_lexical=1.0,
                   w_keyword=1.0, result_depth=500)

    @classmethod
    def ensemble_preset(cls) -> PipelineParams:
        """The shipped pipeline with the whole-document lists of its own model (``w_document=1``) and of
        :data:`ENSEMBLE_MODELS`, weighed by the index, each run a second time from the fused ranking's
        top 3 documents (``document_feedback=3``, ``document_beta=0.25``; the second pass replaces the
        first): the lever chosen on every shared collection's tuning judgments, worst collection first
        (``benchmarks/results/engine-hybrid-levers.md``).  Every document is embedded three more times."""
        return cls(w_document=1.0, ensemble=ENSEMBLE_MODELS, document_feedback=3)

    @classmethod
    def preset(cls, name: str) -> PipelineParams:
        """The parameters named ``name`` (:data:`PRESETS`): ``default``, ``seed004`` or ``ensemble``."""
        if name == "default":
            return cls()
        if name == "seed004":
            return cls.seed004()
        if name == "ensemble":
            return cls.ensemble_preset()
        raise ConfigurationError(f"unknown pipeline {name!r}; choose one of {', '.join(PRESETS)}")

    def make_scorer_params(self) -> Any:
        """The lexical scorer's parameter object: its defaults with :attr:`scorer_params`."""
        try:
            return get_scorer(self.scorer).make_params(**self.scorer_params)
        except ValueError as err:
            raise ConfigurationError(f"pipeline parameter scorer_params: {err}") from None

    @property
    def weights(self) -> dict[str, float]:
        """Strategy → weight, for the strategies that run."""
        all_w = {"semantic": self.w_semantic, "lexical": self.w_lexical, "keyword": self.w_keyword}
        return {k: float(v) for k, v in all_w.items() if v > 0}

    def with_overrides(self, **overrides: Any) -> PipelineParams:
        """A copy with ``overrides`` (``keyword.fb_docs=5`` style names allowed as ``keyword_fb_docs``,
        ``calibration.queries=100`` as ``calibration_queries``)."""
        valid = {f.name for f in fields(self)}
        kw_valid = {f.name for f in fields(self.keyword)}
        cal_valid = {f.name for f in fields(CalibrationParams)}
        # a pipeline parameter (keyword_source) is never read as a keyword parameter
        kw = {k.removeprefix("keyword_"): v for k, v in overrides.items()
              if k.startswith("keyword_") and k not in valid}
        cal = {k.removeprefix("calibration_"): v for k, v in overrides.items()
               if k.startswith("calibration_") and k not in valid}
        top = {k: v for k, v in overrides.items() if k in valid or not k.startswith(("keyword_", "calibration_"))}
        unknown = (sorted(set(top) - valid) + sorted(f"keyword_{k}" for k in set(kw) - kw_valid)
                   + sorted(f"calibration_{k}" for k in set(cal) - cal_valid))
        if unknown:
            raise ConfigurationError(f"unknown pipeline parameter(s) {', '.join(unknown)}; valid: "
                                     f"{', '.join(sorted(valid - {'keyword', 'calibration'}))}, keyword_<name>, "
                                     f"calibration_<name> ({', '.join(sorted(cal_valid))})")
        if kw:
            top["keyword"] = replace(self.keyword, **kw)
        if cal:
            top["calibration"] = replace(self.calibration, **cal)
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
        notes: what the reader must know about this answer, as ``code: text`` lines (e.g.
            ``vectors_pending``: documents without a vector were not searched semantically).
    """

    lists: dict[str, RankedList]
    ids: list[str]
    scores: np.ndarray
    parts: dict[str, np.ndarray]
    expansion: dict[str, float] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def ensemble_factor(effectiveness: Mapping[str, float], name: str, sharpness: float) -> float:
    """An ensemble list's factor: ``(m_name / m_document) ** sharpness``, its effectiveness on the
    index's known-item pseudo-queries over the pipeline's own whole-document list's (1 where either
    was not measured)."""
    reference = effectiveness.get("document", 0.0)
    if reference <= 0 or name not in effectiveness:
        return 1.0
    return float((max(effectiveness[name], 0.0) / reference) ** sharpness)


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


def feedback_vector(query_vector: np.ndarray, vectors: np.ndarray, fused_scores: np.ndarray, beta: float,
                    weighting: str) -> np.ndarray:
    """Rocchio's feedback in the embedding space: ``query_vector`` plus ``beta`` times the feedback
    documents' :func:`feedback_centroid`, normalised again (float32, for a search)."""
    moved = query_vector + beta * feedback_centroid(vectors, fused_scores, weighting)
    return (moved / max(float(np.linalg.norm(moved)), 1e-12)).astype(np.float32)


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
        build: embed the documents that have no vector when the semantic index is opened and
            whenever the index changed (the default: a script or an evaluation waits for it).
            ``False`` (what a server wants): a search never embeds a document; documents without a
            vector are left out of the semantic strategy, the result says how many
            (:attr:`PipelineResult.notes`), a semantic index with no vector at all answers with the
            other strategies, and the strategies' weights are not measured until the vectors are
            complete.  :meth:`build_vectors` fills them, as ``esbridge index`` does.

    Use as a context manager, or call :meth:`close`.
    """

    def __init__(self, engine: Engine, index: str, params: PipelineParams | None = None, *,
                 vectors: VectorIndex | EngineVectors | None = None, reranker: Reranker | None = None,
                 document_vectors: VectorIndex | EngineVectors | None = None,
                 progress: bool = False, fields: str | Sequence[str] | None = None, build: bool = True) -> None:
        self.engine = engine
        self.index = index
        self.params = params or PipelineParams()
        self.reranker = reranker or Reranker(engine, index, scorer=self.params.scorer, window=self.params.window,
                                             params=self.params.make_scorer_params(), fields=fields,
                                             progress=progress)
        if self.reranker.scorer != self.params.scorer:
            raise ConfigurationError(f"the reranker scores with {self.reranker.scorer!r} but the pipeline "
                                     f"names {self.params.scorer!r}")
        layout = self.reranker.layout
        assert layout is not None
        self.layout = layout
        self._vectors = vectors
        self._document_vectors = document_vectors
        self._ensemble_vectors: dict[str, VectorIndex | EngineVectors] = {}
        self._progress = progress
        #: whether searches embed the documents that lack a vector (see the class's ``build``)
        self.build = build
        self._calibration: Calibration | None = None
        self._calibration_checked = -float("inf")
        #: seconds between two checks of the index's document count for a stale calibration
        self.calibration_check_interval = 60.0
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    @property
    def vectors(self) -> VectorIndex | EngineVectors:
        """The semantic index (opened on first use; built then too, with :attr:`build`)."""
        if self._vectors is None:
            from esbridge.semantic.engine_vectors import open_vectors
            from esbridge.semantic.models import load_encoder

            self._vectors = open_vectors(self.engine, self.index, load_encoder(self.params.model),
                                         fields=self.layout.fields, progress=self._progress, build=self.build)
        return self._vectors

    @property
    def document_vectors(self) -> VectorIndex | EngineVectors:
        """One vector per whole document, for ``w_document`` (opened, and built if needed, on first
        use): the engine's field of the model's whole-document vectors where the index has one,
        else esbridge's exact index on disk."""
        if self._document_vectors is None:
            self._document_vectors = self._whole_documents(self.vectors.encoder)
        return self._document_vectors

    def _whole_documents(self, encoder: Any) -> VectorIndex | EngineVectors:
        from esbridge.semantic.engine_vectors import open_document_vectors

        return open_document_vectors(self.engine, self.index, encoder, fields=self.layout.fields,
                                     progress=self._progress, build=self.build)

    def ensemble_vectors(self, model: str) -> VectorIndex | EngineVectors:
        """One vector per whole document with the :attr:`PipelineParams.ensemble` model ``model``
        (opened, and built if needed, on first use; in the engine where the index has its field)."""
        with self._pool_lock:
            got = self._ensemble_vectors.get(model)
        if got is None:
            from esbridge.semantic.models import load_encoder

            got = self._whole_documents(load_encoder(model))
            with self._pool_lock:
                got = self._ensemble_vectors.setdefault(model, got)
        return got

    def _document_indexes(self) -> list[VectorIndex | EngineVectors]:
        """The whole-document vectors the pipeline's lists read (:attr:`PipelineParams.document_lists`)."""
        out = [self.document_vectors] if self.params.w_document > 0 else []
        return out + [self.ensemble_vectors(m) for m in self.params.ensemble]

    def build_vectors(self) -> int:
        """Embed every document that has no vector yet (the semantic index's, and the whole-document
        one's with ``w_document``), with progress bars where the searcher shows them; the documents
        still without one (0 unless the index changed meanwhile).  Safe beside searches, which go on
        from the vectors there are."""
        self.vectors.refresh(force=True, build=True)
        pending = self.vectors.pending
        for vi in self._document_indexes():
            vi.refresh(force=True, build=True)
            pending = max(pending, vi.pending)
        return pending

    def prepare(self) -> int:
        """What a search needs, made ahead of it: :meth:`build_vectors`, then the strategies' weights
        measured (:meth:`calibration`) when they are calibrated and not measured yet.  Returns the
        documents still without a vector.  A server runs it in the background for a searcher that
        does not :attr:`build`."""
        pending = self.build_vectors()
        if self.params.weighting == "calibrated":
            self.calibration(may_measure=True)
        return pending

    def prepared(self) -> bool:
        """Whether a search finds everything ready: every document's vector, and the weights measured
        (where they are calibrated), as of the last check."""
        return self.vectors_pending() == 0 and len(self.vectors) > 0 and (
            self.params.weighting != "calibrated" or self.calibration(may_measure=False) is not None)

    def vectors_pending(self) -> int:
        """Documents without a vector as of the last check (0: the semantic search covers the index)."""
        pending = self.vectors.pending
        for _, vi in self._whole_document_indices():
            pending = max(pending, vi.pending)
        return pending

    def _whole_document_indices(self) -> list[tuple[str, VectorIndex | EngineVectors]]:
        """The whole-document vector indices the pipeline's lists read, those opened so far, by model."""
        with self._pool_lock:
            opened = [(m, self._ensemble_vectors.get(m)) for m in self.params.ensemble]
        if self.params.w_document > 0:
            opened.insert(0, (self.params.model, self._document_vectors))
        return [(m, vi) for m, vi in opened if vi is not None]

    def close(self) -> None:
        """Release the reranker's threads and the semantic strategy's."""
        close = getattr(self.reranker, "close", None)
        if close is not None:
            close()
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None

    def _semantic_pool(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="esbridge-semantic")
            return self._pool

    def _semantic_run(self, vectors: VectorIndex | EngineVectors, text: str,
                      filter: Any) -> tuple[np.ndarray, RankedList, float]:
        t0 = time.perf_counter()
        qvec = vectors.embed_query(text)
        return qvec, self.semantic(qvec, filter=filter), time.perf_counter() - t0

    def __enter__(self) -> HybridSearcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- the strategies --------------------------------------------------------------

    def semantic(self, query: str | np.ndarray, *, filter: Any = None, depth: int | None = None,
                 among: Sequence[str] | None = None) -> RankedList:
        """The semantic strategy's list for a query text or vector (with a filter, only the top
        documents that match it; with ``among``, only those documents are searched)."""
        vi = self.vectors
        vi.refresh(build=self.build)
        vec = vi.embed_query(query) if isinstance(query, str) else query
        return self._filtered(vi.search(vec, depth or self.params.semantic_depth, among=among), filter)

    def document(self, query_vector: np.ndarray, *, filter: Any = None, depth: int | None = None) -> RankedList:
        """The whole-document kNN list for a query vector (with a filter, only the top documents that
        match it)."""
        dv = self.document_vectors
        dv.refresh(build=self.build)
        return self._filtered(dv.search(query_vector, depth or self.params.semantic_depth), filter)

    def ensemble_document(self, model: str, text: str, *, filter: Any = None,
                          depth: int | None = None) -> RankedList:
        """The whole-document kNN list of the ensemble model ``model`` for a query text (its own
        embedding of the query; with a filter, only the top documents that match it)."""
        return self._ensemble_run(model, text, filter=filter, depth=depth)[1]

    def _ensemble_run(self, model: str, text: str, *, filter: Any = None,
                      depth: int | None = None) -> tuple[np.ndarray | None, RankedList]:
        """:meth:`ensemble_document` with the model's query vector (``None`` where the index has no
        vector of it yet)."""
        ev = self.ensemble_vectors(model)
        ev.refresh(build=self.build)
        if not len(ev):
            return None, RankedList([], np.zeros(0))
        qvec = ev.embed_query(text)
        return qvec, self._filtered(ev.search(qvec, depth or self.params.semantic_depth), filter)

    def _whole_list_index(self, name: str) -> VectorIndex | EngineVectors:
        """The vectors the whole-document list ``name`` (``document`` or ``document <model>``) reads."""
        return self.document_vectors if name == "document" else self.ensemble_vectors(name[len("document "):])

    def _document_lists(self, text: str, query_vector: np.ndarray | None, *, filter: Any = None,
                        depth: int | None = None,
                        running: Mapping[str, Future[tuple[np.ndarray | None, RankedList]]] | None = None,
                        ) -> tuple[dict[str, RankedList], dict[str, np.ndarray]]:
        """The whole-document lists that run (:attr:`PipelineParams.document_lists`) for a query
        (``running``: ensemble models' lists already under way, by model), and each list's query vector."""
        p = self.params
        out: dict[str, RankedList] = {}
        vectors: dict[str, np.ndarray] = {}
        if p.w_document > 0 and query_vector is not None:
            out["document"] = self.document(query_vector, filter=filter, depth=depth)
            vectors["document"] = query_vector
        for m in p.ensemble:
            job = (running or {}).get(m)
            qvec, out[f"document {m}"] = job.result() if job is not None else self._ensemble_run(
                m, text, filter=filter, depth=depth)
            if qvec is not None:
                vectors[f"document {m}"] = qvec
        return out, vectors

    def _filtered(self, hits: SemanticHits, filter: Any) -> RankedList:
        """A vector search's hits as a list; with a filter, only those that match it."""
        if filter is None or not hits.ids:
            return RankedList(hits.ids, hits.scores)
        keep = self._matching(hits.ids, filter)
        mask = np.array([d in keep for d in hits.ids], dtype=bool)
        return RankedList([d for d, ok in zip(hits.ids, mask) if ok], hits.scores[mask])

    def _matching(self, ids: Sequence[str], filter: Any) -> set[str]:
        clauses = filter if isinstance(filter, list) else [filter]
        body = {"size": len(ids), "_source": False,
                "query": {"bool": {"filter": [*clauses, {"ids": {"values": list(ids)}}]}}}
        resp = run(ids_search_plan(self.index, body, self.layout.id_values), self.engine)
        return {str(h["_id"]) for h in resp["hits"]["hits"]}

    def lexical(self, text: str, *, filter: Any = None, prepared: AnalyzedQuery | None = None,
                window: int | None = None) -> tuple[RankedList, list[DocVersion | None]]:
        """The lexical strategy's list (the top ``window``, default the pipeline's) and the hits'
        ``(_seq_no, _primary_term)``."""
        _, ranked, versions = self._lexical(text, filter=filter, prepared=prepared, window=window)
        return ranked, versions

    def _lexical(self, text: str, *, filter: Any = None, prepared: AnalyzedQuery | None = None,
                 window: int | None = None) -> tuple[AnalyzedQuery, RankedList, list[DocVersion | None]]:
        """:meth:`lexical` with the analysed query: without ``prepared``, the reranker's
        :meth:`~esbridge.rerank.Reranker.retrieve` (one search where the index allows it)."""
        rr = self.reranker
        window = window or self.params.window
        # a hit deleted between the search and the term-vector fetch is left out, not scored as empty
        if prepared is None:
            got = rr.retrieve(text, window=window, filter=filter)
            return got.query, RankedList(got.ranking.ids, got.ranking.scores), got.versions()
        hits = rr.fetch_candidates(prepared, text, window=window, filter=filter)["hits"]["hits"]
        ranking = rr.rank(prepared, hits, stats_validated=True)
        return prepared, RankedList(ranking.ids, ranking.scores), [hit_version(hits[i]) for i in ranking.order]

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
        # the index's state was checked by the fetch above, a moment ago
        st = store.fetch({"base": QueryChannel(cands, (1,) * len(cands))}, [], [], fields=[combined],
                         validate=False).stats[sub]
        extra = expansion_terms(vecs, lexical.scores[:n], st.df, st.doc_count, kp, exclude=base.terms)
        return weighted_terms(base, extra, kp.lam)

    def keyphrases(self, narrative: str | None, params: KeywordParams | None = None) -> list[str]:
        """The narrative's best TopicRank keyphrases after the narrative filter, stemmed by the
        index's ``base`` analyzer (:mod:`esbridge.hybrid.topicrank`); none without a narrative."""
        kp = params or self.params.keyword
        kept = filter_narrative(narrative) if narrative and narrative.strip() else ""
        if not kept:
            return []
        stem = engine_stems(self.engine, self.index, self.layout)
        return [k.text for k in topicrank(kept, stem, kp.keyphrases)]

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
        every = self.fusion_weights(p)
        weights = {"semantic": every.get("semantic", 0.0), "lexical": every.get("lexical", 0.0)}
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
        hits = run(ids_search_plan(self.index, body, self.layout.id_values), self.engine)["hits"]["hits"]
        return RankedList([str(h["_id"]) for h in hits], np.array([float(h["_score"]) for h in hits]))

    # ---- the weights ------------------------------------------------------------------

    def calibration(self, *, force: bool = False, may_measure: bool | None = None) -> Calibration | None:
        """The strategies measured on this index (:mod:`esbridge.hybrid.calibration`): read from the
        index's mapping, or measured (and recorded there) when there is none for this model, scorer
        and setting or the index has changed too much since. ``force``: measure again now.

        ``may_measure`` (default :attr:`build`): whether this call may measure.  A searcher that does
        not build measures only in :meth:`prepare`, never in a search, and never while documents
        lack their vectors (the semantic strategy would look worse than it is, and that would be
        recorded): until then the last measurement is used, or ``None`` (the ``w_*`` alone)."""
        p = self.params
        now = time.monotonic()
        if not force and self._calibration is not None and now - self._calibration_checked < \
                self.calibration_check_interval:
            return self._calibration
        documents = self.engine.count(self.index)
        self._calibration_checked = now
        stored = None
        if not force:
            if self._calibration is not None and self._covers(self._calibration, documents):
                return self._calibration
            stored = stored_calibration(self.engine, self.index, p.model, p.scorer, p.calibration)
            if stored is not None and self._covers(stored, documents):
                self._calibration = stored
                return stored
        if not (self.build if may_measure is None else may_measure) or (not self.build and self._semantic_incomplete()):
            self._calibration = self._calibration or stored
            return self._calibration
        log.info("measuring the hybrid pipeline's strategies on %r (%d pseudo-queries)", self.index,
                 p.calibration.queries)
        bar = None
        progress = None
        if self._progress:
            from tqdm import tqdm

            bar = tqdm(total=p.calibration.queries, desc=f"calibrating {self.index}", unit="query", file=sys.stderr)
            progress = bar.update
        try:
            cal = measure(self.engine, self.index, self.layout.fields, self._known_item_rankings, p.calibration,
                          model=p.model, scorer=p.scorer, documents=documents, progress=progress)
        finally:
            if bar is not None:
                bar.close()
        store_calibration(self.engine, self.index, cal)
        self._calibration = cal
        return cal

    def _covers(self, cal: Calibration, documents: int) -> bool:
        """Whether ``cal`` is fresh for ``documents`` and measured the ensemble's lists (when there is one)."""
        needed = {"document", *(f"document {m}" for m in self.params.ensemble)} if self.params.ensemble else set()
        return not cal.stale(documents) and needed <= set(cal.effectiveness)

    def _semantic_incomplete(self) -> bool:
        """Whether a vector strategy runs and documents lack their vectors."""
        p = self.params
        if p.w_semantic <= 0 and p.w_document <= 0 and not p.ensemble:
            return False
        self.vectors.refresh(build=False)
        if self.vectors.pending > 0 or len(self.vectors) == 0:
            return True
        for vi in self._document_indexes():
            vi.refresh(build=False)
            if vi.pending > 0 or len(vi) == 0:
                return True
        return False

    def _known_item_rankings(self, text: str) -> dict[str, list[str]]:
        """Each strategy of weight > 0 alone for a calibration pseudo-query, its top ``depth``
        (the keyword strategy fed by the lexical one: the fusion it would read is what is measured)."""
        p = self.params
        depth = p.calibration.depth
        out: dict[str, list[str]] = {}
        prepared = self.reranker.analyze(text)
        lexical, versions = self.lexical(text, prepared=prepared, window=max(depth, 1))
        if p.w_lexical > 0:
            out["lexical"] = list(lexical.ids[:depth])
        qvec = self.vectors.embed_query(text) if p.w_semantic > 0 or p.ensemble else None
        if qvec is not None and p.w_semantic > 0:
            out["semantic"] = list(self.semantic(qvec, depth=depth).ids)
        if p.w_keyword > 0:
            terms = self.keyword_terms(prepared, lexical, versions)
            out["keyword"] = list(self.keyword(terms, depth=depth).ids)
        if qvec is not None and p.ensemble:  # weighed against the model's own whole-document list
            out["document"] = list(self.document(qvec, depth=depth).ids)
            for m in p.ensemble:
                out[f"document {m}"] = list(self.ensemble_document(m, text, depth=depth).ids)
        return out

    def fusion_weights(self, params: PipelineParams | None = None) -> dict[str, float]:
        """Strategy → its weight in the fusion, for the strategies that run: ``params.weights``,
        times the factors measured on the index with ``weighting="calibrated"``."""
        p = params or self.params
        weights = p.weights
        cal = self.calibration() if p.weighting == "calibrated" else None
        if cal is not None:
            measured = {s: m for s, m in cal.effectiveness.items() if s in STRATEGIES}
            factors = weights_from(measured, p.calibration.sharpness)
            weights = {s: w * factors.get(s, 1.0) for s, w in weights.items()}
        if p.w_document > 0 and "semantic" in weights:
            weights["document"] = p.w_document * weights["semantic"]
        if p.ensemble and p.w_ensemble > 0 and "semantic" in weights:
            eff = cal.effectiveness if cal is not None else {}
            for m in p.ensemble:
                name = f"document {m}"
                weights[name] = p.w_ensemble * weights["semantic"] * ensemble_factor(eff, name, p.ensemble_sharpness)
        return weights

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
        notes: list[str] = []
        semantic: Future[tuple[np.ndarray, RankedList, float]] | None = None
        if "semantic" in wanted or ("keyword" in wanted and p.keyword_source == "fusion"):
            # the query's embedding and the vector search (mostly outside the interpreter lock:
            # onnxruntime, numpy, the engine) run in a thread while the lexical strategy waits on the engine
            vectors = self.vectors
            vectors.refresh(build=self.build)
            if self.build or len(vectors):
                semantic = self._semantic_pool().submit(self._semantic_run, vectors, text, filter)
            if vectors.pending:
                notes.append(f"vectors_pending: {vectors.pending} documents of [{self.index}] have no vector yet"
                             + (" and were not searched semantically" if len(vectors) else
                                "; the answer fuses the other strategies only")
                             + " (`esbridge index` or HybridSearcher.build_vectors() embeds them)")
        # each ensemble model's list needs only the query's text: embedded and searched meanwhile too
        ensemble = {m: self._semantic_pool().submit(self._ensemble_run, m, text, filter=filter)
                    for m in p.ensemble}
        if "lexical" in wanted or "keyword" in wanted:
            prepared, lists["lexical"], versions = self._lexical(text, filter=filter)
            seconds["lexical"] = time.perf_counter() - t0
        qvec = None
        if semantic is not None:
            qvec, lists["semantic"], seconds["semantic"] = semantic.result()
        early: Future[RankedList | None] | None = None
        if qvec is not None and p.semantic_feedback > 0 and p.semantic_feedback_from == "lexical_semantic":
            # its feedback documents need only the lexical and semantic lists: the second semantic
            # pass waits on the engine while the keyword strategy runs
            early = self._semantic_pool().submit(self._early_feedback_pass, dict(lists), self.fusion_weights(p),
                                                 qvec, p, filter)
        if "keyword" in wanted and p.keyword.extractor == "topicrank":
            # the source's keyword query: the narrative's keyphrases, ranked like the query by the lexical strategy
            t1 = time.perf_counter()
            phrases = " ".join(self.keyphrases(narrative))
            lists["keyword"] = RankedList([], np.zeros(0))
            if phrases:
                kw_prepared, found, _ = self._lexical(phrases, filter=filter, window=p.keyword.depth)
                base = kw_prepared.query.get("base")
                expansion = {t: float(c) for t, c in zip(base.terms, base.qtf)} if base is not None else {}
                if expansion:
                    lists["keyword"] = found
            seconds["keyword"] = time.perf_counter() - t1
        elif "keyword" in wanted:
            assert prepared is not None
            t1 = time.perf_counter()
            fb_list, fb_versions = self.keyword_feedback_documents(lists, versions)
            expansion = self.keyword_terms(prepared, fb_list, fb_versions, narrative=narrative)
            lists["keyword"] = self.keyword(expansion, filter=filter)
            seconds["keyword"] = time.perf_counter() - t1
        document_vectors: dict[str, np.ndarray] = {}
        if p.document_lists:
            t2 = time.perf_counter()
            whole, document_vectors = self._document_lists(text, qvec, filter=filter, running=ensemble)
            lists.update(whole)
            seconds["document"] = time.perf_counter() - t2
            for model, vi in self._whole_document_indices():
                if vi.pending:
                    notes.append(f"vectors_pending: {vi.pending} documents of [{self.index}] have no whole-document "
                                 f"vector of {model} yet and are not in its list (`esbridge index` or "
                                 "HybridSearcher.build_vectors() embeds them)")
        t3 = time.perf_counter()
        ordered = {k: lists[k] for k in (*STRATEGIES, *p.document_lists) if k in lists
                   and (k in wanted or k in p.document_lists)}
        result = self.aggregate(ordered, qvec, filter=filter, document_vectors=document_vectors,
                                semantic_feedback=early.result() if early is not None else None)
        if p.result_depth is not None:
            result.ids, result.scores = result.ids[:p.result_depth], result.scores[:p.result_depth]
            result.parts = {k: v[:p.result_depth] for k, v in result.parts.items()}
        seconds["fusion"] = time.perf_counter() - t3
        result.expansion = expansion
        result.seconds = {**seconds, **result.seconds}
        result.notes = notes
        return result

    def aggregate(self, lists: Mapping[str, RankedList], query_vector: np.ndarray | None, *,
                  params: PipelineParams | None = None, filter: Any = None,
                  document_vectors: Mapping[str, np.ndarray] | None = None,
                  semantic_feedback: RankedList | None = None) -> PipelineResult:
        """The aggregator: fuse the strategies' ``lists`` (those of weight > 0), then, with
        semantic feedback on, run the semantic strategy again from the query vector moved
        towards the first fusion's top documents and fuse once more; the whole-document lists
        join that last fusion.  With :attr:`PipelineParams.document_feedback`, each whole-document
        list whose query vector ``document_vectors`` gives (list name → vector) runs once more
        from it moved towards the top documents of that fusion, and everything is fused again.

        ``params`` overrides the pipeline's fusion settings (its strategy settings are what
        produced ``lists``); used to measure settings without running the strategies again.
        ``semantic_feedback``: the second semantic pass already run (:meth:`run` starts it early
        where :attr:`PipelineParams.semantic_feedback_from` allows).
        """
        p = params or self.params
        # a strategy without a list (the semantic one of an index without vectors yet) is left out
        final = {k: w for k, w in self.fusion_weights(p).items() if k in lists}
        # the whole-document lists join the last fusion only: the semantic feedback reads the first
        whole = [k for k in final if k == "document" or k.startswith("document ")]
        weights = {k: w for k, w in final.items() if k not in whole}
        out = dict(lists)
        fused = {k: v for k, v in lists.items() if k in weights}
        ids, scores, parts = fuse(fused, weights, p.fusion, rrf_k=p.rrf_k)
        seconds: dict[str, float] = {}
        if query_vector is not None and p.semantic_feedback > 0 and ids and "semantic" in fused:
            t0 = time.perf_counter()
            second = semantic_feedback
            if second is None and p.semantic_feedback_from == "lexical_semantic":
                second = self._early_feedback_pass(fused, weights, query_vector, p, filter)
            elif second is None:
                second = self._feedback_pass(ids, scores, query_vector, p, filter)
            if second is not None:
                out["semantic_feedback"] = fused["semantic"] = second
                ids, scores, parts = fuse(fused, weights, p.fusion, rrf_k=p.rrf_k)
            seconds["semantic_feedback"] = time.perf_counter() - t0
        if whole:
            fused.update({k: lists[k] for k in whole})
            ids, scores, parts = fuse(fused, final, p.fusion, rrf_k=p.rrf_k)
            again = [k for k in whole if k in (document_vectors or {})] if p.document_feedback > 0 and ids else []
            if again:
                t0 = time.perf_counter()
                assert document_vectors is not None
                from esbridge.semantic.engine_vectors import EngineVectors, vectors_of_many

                indices = [self._whole_list_index(k) for k in again]
                # the feedback documents' vectors of every model in one request (where the engine keeps them)
                feedback = vectors_of_many(indices, ids[:p.document_feedback])
                moved_to = {k: feedback_vector(document_vectors[k], fb, scores, p.document_beta,
                                               p.semantic_feedback_weighting)
                            for k, fb in zip(again, feedback) if len(fb)}

                def search(vi: VectorIndex | EngineVectors, vector: np.ndarray) -> RankedList:
                    return self._filtered(vi.search(vector, p.semantic_depth), filter)

                # a search in the engine waits on the network: those run side by side; a scan of the
                # vectors on disk is a millisecond of numpy, cheaper than a thread's round trip
                jobs = {k: self._semantic_pool().submit(search, vi, moved_to[k]) for k, vi in zip(again, indices)
                        if k in moved_to and isinstance(vi, EngineVectors)}
                share = float(p.document_feedback_share)
                final = dict(final)
                for k, vi in zip(again, indices):
                    if k not in moved_to:
                        continue
                    second = jobs[k].result() if k in jobs else search(vi, moved_to[k])
                    out[f"{k} feedback"] = fused[f"{k} feedback"] = second
                    final[f"{k} feedback"] = final[k] * share
                    final[k] *= 1 - share
                ids, scores, parts = fuse(fused, final, p.fusion, rrf_k=p.rrf_k)
                seconds["document_feedback"] = time.perf_counter() - t0
        return PipelineResult(lists=out, ids=ids, scores=scores, parts=parts, seconds=seconds)

    def _early_feedback_pass(self, lists: Mapping[str, RankedList], weights: Mapping[str, float],
                             query_vector: np.ndarray, p: PipelineParams, filter: Any) -> RankedList | None:
        """:meth:`_feedback_pass` from the lexical and semantic ``lists`` alone, fused with ``weights``."""
        seed = {k: w for k, w in weights.items() if k in ("lexical", "semantic") and k in lists}
        if "semantic" not in seed:
            return None
        ids, scores, _ = fuse({k: lists[k] for k in seed}, seed, p.fusion, rrf_k=p.rrf_k)
        return self._feedback_pass(ids, scores, query_vector, p, filter)

    def _feedback_pass(self, ids: Sequence[str], scores: np.ndarray, query_vector: np.ndarray, p: PipelineParams,
                       filter: Any) -> RankedList | None:
        """The second semantic pass: from ``query_vector`` moved towards the top
        :attr:`~PipelineParams.semantic_feedback` documents of the fused ``ids`` (``None`` where
        there is none to move towards); searching those ``ids`` alone where
        :attr:`~PipelineParams.semantic_feedback_scope` says ``candidates``."""
        if not len(ids):
            return None
        fb = self.vectors.vectors_of(ids[:p.semantic_feedback],
                                     query_vector if p.semantic_feedback_window == "best" else None)
        if not len(fb):
            return None
        moved = feedback_vector(query_vector, fb, scores, p.semantic_beta, p.semantic_feedback_weighting)
        return self.semantic(moved, filter=filter, depth=p.semantic_feedback_depth or p.semantic_depth,
                             among=ids if self.feedback_scope(p) == "candidates" else None)

    def feedback_scope(self, params: PipelineParams | None = None) -> str:
        """Which documents the second semantic pass searches on this index: ``index`` or
        ``candidates`` (:attr:`PipelineParams.semantic_feedback_scope`, ``auto`` resolved by the
        number of documents with a vector against :data:`FEEDBACK_CANDIDATES_FROM`)."""
        scope = (params or self.params).semantic_feedback_scope
        if scope != "auto":
            return scope
        return "candidates" if len(self.vectors) >= FEEDBACK_CANDIDATES_FROM else "index"

    def describe(self) -> dict[str, Any]:
        """The fusion, the weights it uses and, when calibrated, what they were measured from."""
        p = self.params
        out: dict[str, Any] = {"fusion": p.fusion.value, "weighting": p.weighting,
                               "weights": self.fusion_weights(), "scorer": p.scorer, "model": p.model}
        if p.semantic_feedback > 0:  # ``auto`` resolved once the vectors are open (describing opens nothing)
            out["semantic_feedback_scope"] = (self.feedback_scope() if self._vectors is not None
                                              else p.semantic_feedback_scope)
        cal = self.calibration() if p.weighting == "calibrated" else None
        if cal is not None:
            out["calibration"] = {"effectiveness": cal.effectiveness, "queries": cal.queries,
                                  "documents": cal.documents, "measured_at": cal.measured_at,
                                  "sharpness": p.calibration.sharpness}
        return out

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
            "_esbridge": {"pipeline": self.describe(), "expansion": res.expansion, "seconds": res.seconds,
                          **({"notes": res.notes} if res.notes else {})},
        }
