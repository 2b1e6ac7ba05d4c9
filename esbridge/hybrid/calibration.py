"""Fusion weights measured on the index itself (docs/hybrid.md, "Weights from the index").

How much each strategy of the hybrid pipeline deserves to count differs from one collection to
the next: an embedding model that is as good as BM25 on one collection is far below it on
another. Weights fixed in the code encode how good a strategy was on the collections they were
chosen on. Here they are measured, without judgments, on the index the pipeline searches:

1. **Known-item pseudo-queries.** ``queries`` documents are drawn from the index by the engine
   (a ``random_score`` query with a fixed seed, so the same index gives the same sample). From
   each, a run of ``words`` consecutive words inside one of its sentences is the query and that
   document is its one answer (after the known-item query generation of Azzopardi, de Rijke and
   Balog, SIGIR 2007: a query made from a document's own words, the document as the target). The
   sentences are cut at ``. ! ? ;`` and line ends; the words are the text's whitespace-separated
   pieces. Only the query *text* is made here: each strategy analyses it as it analyses a user's
   query (the engine's analysers for the lexical and keyword strategies, the model's tokenizer for
   the semantic one).
2. **Each strategy alone** ranks the documents for every pseudo-query (its top ``depth``), and
   its effectiveness is the mean reciprocal rank of the answer (0 when it is not in the top
   ``depth``).
3. **Weights**: strategy *s* weighs ``(m_s / max_t m_t) ** sharpness``: the most effective
   strategy weighs 1, and a strategy half as effective weighs ``0.5 ** sharpness``. The pipeline
   multiplies these by its own weights (``w_semantic`` ..., 1 each by default).

A calibration is computed once per index and stored in the index's ``_meta.esbridge.calibration``
(one entry per model, scorer and calibration setting), so every client and process reads the same
weights; it is measured again when the number of documents has changed by more than ``refresh``
(a fraction) since. Where the mapping cannot be written (a user allowed to read only), the weights
are kept for the life of the searcher and a warning says so.
"""

from __future__ import annotations

import logging
import math
import random
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from esbridge.engine.calls import path_segment
from esbridge.engine.client import Engine
from esbridge.errors import ConfigurationError, EngineError
from esbridge.semantic.text import document_text

log = logging.getLogger(__name__)

__all__ = ["CalibrationParams", "Calibration", "pseudo_queries", "weights_from", "mean_reciprocal_rank",
           "stored_calibration", "store_calibration"]

#: Bumped when the way a calibration is measured changes: older stored calibrations are measured again.
CALIBRATION_VERSION = 1

_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")
#: The hybrid pipeline's strategies, in the order their lists are fused and reported.
STRATEGIES = ("semantic", "lexical", "keyword")
_ORDER = {s: i for i, s in enumerate(STRATEGIES)}


@dataclass(frozen=True)
class CalibrationParams:
    """How the pipeline measures its strategies on the index.

    Attributes:
        queries: known-item pseudo-queries drawn from the index (fewer when the index holds fewer
            documents with a sentence of ``words`` words).
        words: consecutive words of one sentence a pseudo-query takes.
        depth: each strategy's top documents in which the answer is looked for.
        sharpness: the exponent of the effectiveness ratio (0: equal weights).
        seed: the sample's seed (the engine's ``random_score`` seed and the choice of words).
        refresh: measure again when the document count has changed by more than this fraction.
    """

    queries: int = 200
    words: int = 8
    depth: int = 100
    sharpness: float = 2.0
    seed: int = 1
    refresh: float = 0.1

    def __post_init__(self) -> None:
        for name in ("queries", "words", "depth"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"calibration parameter {name} must be an integer >= 1, got {value!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ConfigurationError(f"calibration parameter seed must be an integer, got {self.seed!r}")
        for name in ("sharpness", "refresh"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value < 0:
                raise ConfigurationError(f"calibration parameter {name} must be a finite number >= 0, "
                                         f"got {value!r}")

    def key(self) -> str:
        """What distinguishes one measurement from another (``refresh`` and ``sharpness`` do not:
        the weights are recomputed from the stored effectiveness)."""
        return f"q{self.queries}-w{self.words}-d{self.depth}-s{self.seed}"


@dataclass(frozen=True)
class Calibration:
    """What the pipeline measured on an index.

    Attributes:
        effectiveness: strategy → mean reciprocal rank of the known item on the pseudo-queries.
        queries: pseudo-queries measured.
        documents: documents in the index when it was measured.
        model, scorer: the semantic model and the lexical scorer measured.
        params: how it was measured.
        measured_at: when (UTC, ISO 8601).
        seconds: how long it took.
    """

    effectiveness: dict[str, float]
    queries: int
    documents: int
    model: str
    scorer: str
    params: CalibrationParams = field(default_factory=CalibrationParams)
    measured_at: str = ""
    seconds: float = 0.0

    def __post_init__(self) -> None:
        # one order wherever it comes from (the engine may hand a stored mapping's keys back in another)
        ordered = dict(sorted(self.effectiveness.items(), key=lambda kv: (_ORDER.get(kv[0], len(_ORDER)), kv[0])))
        object.__setattr__(self, "effectiveness", ordered)

    @property
    def weights(self) -> dict[str, float]:
        """Strategy → its weight factor (see :func:`weights_from`)."""
        return weights_from(self.effectiveness, self.params.sharpness)

    def to_meta(self) -> dict[str, Any]:
        out = asdict(self)
        out["version"] = CALIBRATION_VERSION
        return out

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any], params: CalibrationParams) -> Calibration | None:
        """The calibration a ``to_meta`` dict records, measured as ``params`` says (``None`` when it
        is of another version or setting, or unreadable)."""
        try:
            if meta.get("version") != CALIBRATION_VERSION:
                return None
            stored = CalibrationParams(**{k: v for k, v in dict(meta["params"]).items()
                                          if k in CalibrationParams.__dataclass_fields__})
            if stored.key() != params.key():
                return None
            eff = {str(k): float(v) for k, v in dict(meta["effectiveness"]).items()}
            return cls(effectiveness=eff, queries=int(meta["queries"]), documents=int(meta["documents"]),
                       model=str(meta["model"]), scorer=str(meta["scorer"]), params=params,
                       measured_at=str(meta.get("measured_at", "")), seconds=float(meta.get("seconds", 0.0)))
        except (KeyError, TypeError, ValueError, ConfigurationError):
            return None

    def stale(self, documents: int) -> bool:
        """Whether an index now holding ``documents`` documents should be measured again."""
        return abs(documents - self.documents) > self.params.refresh * max(self.documents, 1)


def weights_from(effectiveness: Mapping[str, float], sharpness: float) -> dict[str, float]:
    """``(m_s / max_t m_t) ** sharpness`` for every strategy (all 1 when no strategy found an answer)."""
    best = max(effectiveness.values(), default=0.0)
    if best <= 0:
        return {s: 1.0 for s in effectiveness}
    return {s: (max(m, 0.0) / best) ** sharpness for s, m in effectiveness.items()}


def mean_reciprocal_rank(answers: Sequence[str], rankings: Sequence[Sequence[str]], depth: int) -> float:
    """The mean over pseudo-queries of 1 / the answer's rank in its ranking (0 beyond ``depth``)."""
    if not answers:
        return 0.0
    total = 0.0
    for answer, ranking in zip(answers, rankings, strict=True):
        for rank, doc_id in enumerate(ranking[:depth], start=1):
            if doc_id == answer:
                total += 1.0 / rank
                break
    return total / len(answers)


def pseudo_queries(engine: Engine, index: str, fields: Sequence[str],
                   params: CalibrationParams) -> list[tuple[str, str]]:
    """``(document id, query text)`` known-item pairs drawn from ``index`` (see the module text)."""
    body = {"size": min(10_000, 3 * params.queries), "_source": list(fields),
            "query": {"function_score": {"query": {"match_all": {}}, "boost_mode": "replace",
                                         "random_score": {"seed": params.seed, "field": "_seq_no"}}}}
    resp = engine.search(index, body)
    rng = random.Random(params.seed)
    out: list[tuple[str, str]] = []
    for hit in resp.get("hits", {}).get("hits", []):
        text = document_text(hit.get("_source") or {}, fields)
        sentences = [s.split() for s in _SENTENCE.split(text)]
        usable = [s for s in sentences if len(s) >= params.words]
        if not usable:
            continue
        words = rng.choice(usable)
        start = rng.randrange(len(words) - params.words + 1)
        out.append((str(hit["_id"]), " ".join(words[start:start + params.words])))
        if len(out) == params.queries:
            break
    return out


def measure(engine: Engine, index: str, fields: Sequence[str], rank: Callable[[str], Mapping[str, Sequence[str]]],
            params: CalibrationParams, *, model: str, scorer: str, documents: int | None = None,
            progress: Callable[[int], None] | None = None) -> Calibration:
    """Rank the index's pseudo-queries with ``rank`` (query text → strategy → its ranked ids) and
    measure every strategy it returns (``documents``: the index's document count, when the caller
    has just read it)."""
    t0 = time.perf_counter()
    pairs = pseudo_queries(engine, index, fields, params)
    answers = [d for d, _ in pairs]
    rankings: dict[str, list[Sequence[str]]] = {}
    for _, text in pairs:
        for name, ids in rank(text).items():
            rankings.setdefault(name, []).append(ids)
        if progress is not None:
            progress(1)
    eff = {name: mean_reciprocal_rank(answers, got, params.depth) for name, got in rankings.items()}
    if documents is None:
        documents = engine.count(index)
    return Calibration(effectiveness=eff, queries=len(pairs), documents=documents, model=model, scorer=scorer,
                       params=params, measured_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                       seconds=time.perf_counter() - t0)


def _entry(model: str, scorer: str, params: CalibrationParams) -> str:
    return f"{model}/{scorer}/{params.key()}"


def stored_calibration(engine: Engine, index: str, model: str, scorer: str,
                       params: CalibrationParams) -> Calibration | None:
    """The calibration stored in ``index``'s mapping for this model, scorer and setting, if any."""
    from esbridge.index.definitions import index_meta

    entry = (index_meta(engine, index).get("calibration") or {}).get(_entry(model, scorer, params))
    if not isinstance(entry, Mapping):
        return None
    return Calibration.from_meta(entry, params)


def store_calibration(engine: Engine, index: str, calibration: Calibration) -> bool:
    """Record ``calibration`` in ``index``'s ``_meta.esbridge.calibration`` (other entries kept);
    ``False`` (and a warning) when the engine refuses the mapping update."""
    where = path_segment(index, patterns=True)
    try:
        resp = engine.request("GET", f"/{where}/_mapping", context=f"reading the mapping of {index!r}")
        for concrete, spec in resp.items():
            meta = dict((spec.get("mappings") or {}).get("_meta") or {})
            mine = dict(meta.get("esbridge") or {})
            table = dict(mine.get("calibration") or {})
            table[_entry(calibration.model, calibration.scorer, calibration.params)] = calibration.to_meta()
            mine["calibration"] = table
            meta["esbridge"] = mine
            engine.request("PUT", f"/{path_segment(concrete)}/_mapping", body={"_meta": meta},
                           context=f"recording the pipeline's calibration in {index!r}")
    except EngineError as exc:
        log.warning("could not record the calibration in the mapping of %r (%s); it is kept in memory only",
                    index, exc)
        return False
    return True
