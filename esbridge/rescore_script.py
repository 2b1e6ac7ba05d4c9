"""In-engine rescoring with the evolved formula: ``rescore`` clauses over stored Painless scripts.

:class:`EvolvedRescorer` builds the ``rescore`` section of a search body that recomputes one
channel's evolved relevance (docs/scoring.md §5.3)

.. math::

    R(q, d) = \\ln(1 + E) · B_{cov} · B_{spec} · B_{coord} · B_{anc} / B_{len}

inside the engine for the top ``window`` hits of each shard, so that no term vectors
travel to the client.  What a ``script_score`` script can see differs by engine, hence two
modes (:class:`RescoreMode`):

``term_freq`` (OpenSearch >= 2.10)
    One ``query_rescorer`` whose ``script_score`` runs ``painless/rescore_evolved_termfreq.painless``:
    OpenSearch's score context has ``termFreq(field, term)``, so the script reads every query
    term's frequency in the document and computes the whole ``R`` exactly, with the exact
    length ``|d|`` from the ``<field>.length`` token count.  ``df``, ``N`` and ``avgdl`` are not
    available to score scripts (OpenSearch's ``totalTermFreq``/``sumTotalTermFreq`` are per
    shard, and there is no document frequency at all), so they come in ``params``, index-wide,
    from one ``_mtermvectors`` statistics request (:func:`query_statistics`).

``similarity_chain`` (Elasticsearch 7.10 and OpenSearch)
    Elasticsearch 7.10's score context has no term statistics of any kind (``_termStats``
    arrived in Elasticsearch 8.16; there is no ``termFreq``), only ``_score``, doc values and
    ``params``.  The one in-engine source of a term frequency is then a similarity, so this
    mode needs the index's ``evolved`` scripted-similarity sub-field (``create_index(...,
    similarity="evolved")``) and multiplies ``R`` together from chained rescorers, each one
    aggregate per document:

    1. ``ln(1 + E) / B_len``: the ``evolved`` sub-field's score summed over the query terms is
       ``E / B_len(q(|d|))``; ``painless/rescore_evolved_evidence.painless`` multiplies back the
       damper at Lucene's quantised length ``q(|d|)`` and divides by the exact one;
    2. ``B_cov``: constant scores ``w(t)`` summed over the matched terms;
    3. ``B_coord``: constant scores 1 summed (``|M|``);
    4. ``B_anc``: ``dis_max`` over constant scores ``(IDF - π)/IDF`` of matched terms with
       ``IDF > π``;

    steps 2-4 through ``painless/rescore_factor.painless`` with ``score_mode: multiply``.
    **Not expressible:** ``B_spec`` needs, per matched term, ``tf``, ``|d|`` and ``df`` together
    and then a clipped logarithm; a script sees only one aggregate ``_score``, and the
    ``evolved`` similarity's per-term output is the evidence, not the PMI.  This mode
    therefore requires ``beta_spec = 0`` (it raises otherwise, rather than silently
    computing a different formula).

Neither mode computes the multi-channel sum ``R(base) + w_pfx R(pfx) + …``: only the base
channel has an exact length in doc values (``<field>.length``); the other channels' lengths
exist only as Lucene norms, which score scripts cannot read.

Query text never enters a script source: terms, weights and statistics are ``params`` of
stored scripts (``PUT _scripts/<id>/score``, compiled once, content-addressed ids).

Use ``search_type=dfs_query_then_fetch`` on multi-shard indices so that the similarity in
``similarity_chain`` mode sees the same index-wide statistics as the ``params``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np

from esbridge.deprecation import renamed_keyword
from esbridge.engine.calls import path_segment
from esbridge.engine.client import Engine
from esbridge.engine.connection import EngineInfo
from esbridge.errors import ConfigurationError, UnsupportedEngineError
from esbridge.features.cache import FeatureStore
from esbridge.features.termvectors import analyze_query
from esbridge.index.definitions import IndexLayout, index_meta, read_layout
from esbridge.painless import (
    EvolvedSimilarityConstants,
    PainlessScript,
    SimilarityKind,
    put_stored_script,
    require_painless,
)
from esbridge.scoring.evolved import EvolvedParams, term_weight

__all__ = [
    "EngineSupport",
    "EvolvedRescorer",
    "QueryStatistics",
    "RescoreMode",
    "engine_support",
    "query_statistics",
]

#: OpenSearch version that added termFreq & co. to the score context (PR #9081).
OPENSEARCH_TERM_FREQ_SINCE = (2, 10, 0)

TERM_FREQ_SCRIPT = "rescore_evolved_termfreq.painless"
EVIDENCE_SCRIPT = "rescore_evolved_evidence.painless"
FACTOR_SCRIPT = "rescore_factor.painless"


class RescoreMode(str, Enum):
    """How the evolved relevance is computed in the engine (see the module docstring)."""

    TERM_FREQ = "term_freq"
    SIMILARITY_CHAIN = "similarity_chain"


@dataclass(frozen=True)
class EngineSupport:
    """What an engine's Painless offers esbridge.

    Attributes:
        scripted_similarity: ``index.similarity.*.type: scripted`` (weight + score scripts
            with ``query``, ``field``, ``term``, ``doc`` statistics; no ``params``).
        term_freq: ``termFreq(field, term)`` in the score context (OpenSearch >= 2.10).
        term_stats: ``_termStats`` in the score context (Elasticsearch >= 8.16; not used
            by esbridge yet).
    """

    scripted_similarity: bool
    term_freq: bool
    term_stats: bool

    def modes(self) -> tuple[RescoreMode, ...]:
        """The rescore modes this engine can run, best first."""
        out = []
        if self.term_freq:
            out.append(RescoreMode.TERM_FREQ)
        if self.scripted_similarity:
            out.append(RescoreMode.SIMILARITY_CHAIN)
        return tuple(out)


def engine_support(info: EngineInfo) -> EngineSupport:
    """What ``info``'s engine supports (from its distribution and version)."""
    if info.distribution == "opensearch":
        return EngineSupport(scripted_similarity=True,
                             term_freq=info.version >= OPENSEARCH_TERM_FREQ_SINCE,
                             term_stats=False)
    return EngineSupport(scripted_similarity=True, term_freq=False,
                         term_stats=info.version >= (8, 16, 0))


@dataclass(frozen=True)
class QueryStatistics:
    """One channel of one query with the index-wide statistics a rescore script needs.

    Attributes:
        field: the text or combined field, e.g. ``esb_all``.
        channel: the channel, e.g. ``base``.
        terms: distinct analysed query terms, first-seen order.
        qtf: how often each occurs in the analysed query.
        df: index-wide document frequency of each term in ``<field>.<channel>``.
        n_docs: index-wide number of documents with the field (``N``).
        avgdl: index-wide mean length (``sum_ttf / N``).
    """

    field: str
    channel: str
    terms: tuple[str, ...]
    qtf: tuple[int, ...]
    df: tuple[int, ...]
    n_docs: int
    avgdl: float
    indexed: str = ""

    def __post_init__(self) -> None:
        if not (len(self.terms) == len(self.qtf) == len(self.df)):
            raise ConfigurationError(
                f"terms, qtf and df must have the same length, got {len(self.terms)}, "
                f"{len(self.qtf)}, {len(self.df)}"
            )

    @property
    def subfield(self) -> str:
        """The field of the index the channel is read from (``indexed``, else ``<field>.<channel>``)."""
        return self.indexed or f"{self.field}.{self.channel}"


def query_statistics(
    engine: Engine,
    index: str,
    text: str,
    *,
    field: str | None = None,
    channel: str = "base",
    layout: IndexLayout | None = None,
    store: FeatureStore | None = None,
) -> QueryStatistics:
    """The query's terms in ``channel`` and their index-wide statistics in ``<field>.<channel>``.

    Two requests: ``_analyze`` with the index's analyzer and one ``_mtermvectors`` holding
    an artificial document per shard (summed, see :mod:`esbridge.features.termvectors`).

    Args:
        field: default the layout's combined field.
        store: the feature store to read the statistics through (default: a new one); the
            same store the rerankers use, so its statistics are index-wide and cached alike.
    """
    layout = store.layout if store is not None else (layout or read_layout(engine, index))
    field = field or layout.combined
    if field not in (*layout.fields, layout.combined):
        raise ConfigurationError(
            f"field {field!r} is not a text field of {index!r}; it has {[*layout.fields, layout.combined]}"
        )
    query = analyze_query(engine, index, layout, text, [channel])
    qc = query[channel]
    store = store or FeatureStore(engine, index, layout)
    stats = store.fetch(query, [], [], fields=[field]).stats[layout.subfield(field, channel)]
    return QueryStatistics(
        field=field, channel=channel, terms=qc.terms, qtf=qc.qtf,
        df=tuple(int(stats.df.get(t, 0)) for t in qc.terms),
        n_docs=stats.doc_count, avgdl=stats.avgdl, indexed=layout.subfield(field, channel),
    )


def _float_list(values: Any) -> list[float]:
    return [float(v) for v in np.asarray(values, dtype=np.float64)]


class EvolvedRescorer:
    """Builds ``rescore`` clauses computing the evolved ``R`` of one channel in the engine.

    Construction reads the index's mapping once (checks the length field and, for
    ``similarity_chain``, the ``evolved`` sub-field and its constants) and stores the
    scripts it needs once.

    Args:
        engine: the engine.
        index: an esbridge index.
        params: the evolved parameters (channel weights and the gate are not used: one
            channel is rescored).
        mode: default the best the engine supports (``term_freq`` on OpenSearch >= 2.10,
            else ``similarity_chain``).
        window: hits per shard to rescore (default 100; the rescore clause's ``window_size``).
        field: the text or combined field (default the combined field).
        similarity: for ``similarity_chain``, the name of the index's ``evolved``
            similarity (default: the only one of kind ``evolved``).

    Raises:
        UnsupportedEngineError: the engine cannot run ``mode``.
        ConfigurationError: the index lacks what the mode needs, or ``params`` differ from
            what the index's similarity computes; the message says what to change.

    ``window_size`` is the former name of ``window``: it still works, with a
    :class:`DeprecationWarning`.
    """

    def __init__(
        self,
        engine: Engine,
        index: str,
        *,
        params: EvolvedParams | None = None,
        mode: RescoreMode | str | None = None,
        window: int | None = None,
        field: str | None = None,
        similarity: str | None = None,
        window_size: int | None = None,
    ) -> None:
        window = renamed_keyword("EvolvedRescorer", "window", window, "window_size", window_size)
        if window is None:
            window = 100
        require_painless(engine, "rescore inside the engine (its rescorer runs Painless scripts)")
        self.engine = engine
        self.index = index
        self.params = params or EvolvedParams()
        if not isinstance(self.params, EvolvedParams):
            raise ConfigurationError(f"params must be EvolvedParams, got {type(self.params).__name__}")
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ConfigurationError(f"window must be an int >= 1, got {window!r}")
        self.window = window
        support = engine_support(engine.info)
        if mode is None:
            if not support.modes():  # pragma: no cover - every supported engine has one
                raise UnsupportedEngineError(f"{engine.info.label} cannot rescore with Painless")
            self.mode = support.modes()[0]
        else:
            try:
                self.mode = RescoreMode(mode)
            except ValueError:
                raise ConfigurationError(
                    f"unknown rescore mode {mode!r}; choose one of {[m.value for m in RescoreMode]}"
                ) from None
        if self.mode not in support.modes():
            raise UnsupportedEngineError(
                f"{engine.info.label} cannot rescore in mode {self.mode.value!r}: its score context "
                "has no termFreq (OpenSearch >= 2.10 has it; Elasticsearch 7.x has no term "
                f"statistics in score scripts); use mode {RescoreMode.SIMILARITY_CHAIN.value!r}"
            )
        self.layout = read_layout(engine, index)
        self.field = field or self.layout.combined
        if self.field not in (*self.layout.fields, self.layout.combined):
            raise ConfigurationError(
                f"field {self.field!r} is not a text field of {index!r}; it has "
                f"{[*self.layout.fields, self.layout.combined]}"
            )
        self.store = FeatureStore(engine, index, self.layout)
        self.length_field = f"{self.field}.length"
        self._check_length_field()
        self.similarity_subfield = ""
        self.alpha_len_in_index = self.params.alpha_len
        if self.mode is RescoreMode.SIMILARITY_CHAIN:
            self.similarity_subfield = self._check_similarity(similarity)
            if self.params.beta_spec != 0.0:
                raise ConfigurationError(
                    "mode 'similarity_chain' cannot compute the specificity multiplier B_spec "
                    f"(params.beta_spec = {self.params.beta_spec}); pass EvolvedParams(beta_spec=0) "
                    "to rescore without it, or use mode 'term_freq' on OpenSearch >= 2.10"
                )
        self.script_ids: dict[str, str] = {}
        names = [TERM_FREQ_SCRIPT] if self.mode is RescoreMode.TERM_FREQ else [EVIDENCE_SCRIPT, FACTOR_SCRIPT]
        for name in names:
            self.script_ids[name] = put_stored_script(engine, PainlessScript.load(name))

    @property
    def window_size(self) -> int:
        """The former name of :attr:`window` (warns)."""
        warnings.warn("EvolvedRescorer.window_size is deprecated; use EvolvedRescorer.window", DeprecationWarning,
                      stacklevel=2)
        return self.window

    # ---- checks on the index -------------------------------------------------------

    def _mapping_properties(self) -> Mapping[str, Any]:
        resp = self.engine.request("GET", f"/{path_segment(self.index, patterns=True)}/_mapping",
                                   context=f"reading the mapping of {self.index!r}")
        for spec in resp.values():
            props = (spec.get("mappings") or {}).get("properties")
            if props:
                return dict(props)
        return {}

    def _check_length_field(self) -> None:
        props = self._mapping_properties()
        length = ((props.get(self.field) or {}).get("fields") or {}).get("length") or {}
        if length.get("type") != "token_count" or length.get("enable_position_increments", True):
            raise ConfigurationError(
                f"index {self.index!r} has no exact base-channel length in {self.length_field!r} "
                "(a token_count with enable_position_increments: false, as mappings/text_field.json "
                "now defines it; older esbridge indices counted stopword positions too, and an index without "
                "term vectors, whose lengths the engine plugin reads from the norms, has none): re-create the "
                "index with esbridge's scripted similarities (create_index(similarity=...)), or with term vectors "
                "(esbridge index --term-vectors yes)"
            )

    def _check_similarity(self, name: str | None) -> str:
        sims = index_meta(self.engine, self.index).get("similarities") or {}
        evolved = {k: v for k, v in sims.items() if v.get("kind") == SimilarityKind.EVOLVED.value}
        if name is None:
            if len(evolved) != 1:
                raise ConfigurationError(
                    f"mode 'similarity_chain' needs exactly one 'evolved' scripted similarity on "
                    f"{self.index!r} (found {sorted(evolved)}); create the index with "
                    "similarity='evolved' or pass similarity=<name>"
                )
            name = next(iter(evolved))
        if name not in evolved:
            raise ConfigurationError(
                f"index {self.index!r} has no 'evolved' similarity named {name!r}; it has {sorted(evolved)}"
            )
        stored = {k: float(v) for k, v in (evolved[name].get("constants") or {}).items()}
        wanted = EvolvedSimilarityConstants.from_params(self.params).values()
        differ = {k: (stored.get(k), v) for k, v in wanted.items() if stored.get(k) != v}
        if differ:
            detail = ", ".join(f"{k}: index {a} vs params {b}" for k, (a, b) in sorted(differ.items()))
            raise ConfigurationError(
                f"the 'evolved' similarity of {self.index!r} was built with other constants ({detail}); "
                "pass EvolvedParams matching the index, or re-create it"
            )
        self.alpha_len_in_index = stored["alpha_len"]
        return f"{self.field}.{evolved[name]['subfield']}"

    # ---- statistics and clauses ----------------------------------------------------

    def statistics(self, text: str) -> QueryStatistics:
        """:func:`query_statistics` of ``text`` for this rescorer's field (base channel)."""
        return query_statistics(self.engine, self.index, text, field=self.field, store=self.store)

    def _weights(self, stats: QueryStatistics) -> tuple[list[float], list[float]]:
        df = np.asarray(stats.df, dtype=np.float64)
        idf = self.params.idf.compute(df, stats.n_docs)
        w = term_weight(idf, np.asarray(stats.qtf, dtype=np.float64), alpha_qtf=self.params.alpha_qtf,
                        gamma_e=self.params.gamma_e, gamma=self.params.gamma, beta_tf=self.params.beta_tf)
        return _float_list(w), _float_list(idf)

    def rescore(self, query: QueryStatistics | str) -> list[dict[str, Any]]:
        """The ``rescore`` list for a search body (query text or its statistics).

        Raises:
            ConfigurationError: ``query`` is statistics of another field or channel.
        """
        stats = self.statistics(query) if isinstance(query, str) else query
        if stats.field != self.field or stats.channel != "base":
            raise ConfigurationError(
                f"statistics are for {stats.subfield!r}; this rescorer scores "
                f"{self.layout.subfield(self.field, 'base')!r}"
            )
        if self.mode is RescoreMode.TERM_FREQ:
            return [self._term_freq_clause(stats)]
        return self._chain_clauses(stats)

    def _rescorer(self, query: Mapping[str, Any], *, replace: bool) -> dict[str, Any]:
        return {
            "window_size": self.window,
            "query": {
                "rescore_query": dict(query),
                "query_weight": 0.0 if replace else 1.0,
                "rescore_query_weight": 1.0,
                "score_mode": "total" if replace else "multiply",
            },
        }

    def _term_freq_clause(self, stats: QueryStatistics) -> dict[str, Any]:
        p = self.params
        w, idf = self._weights(stats)
        script_params = {
            "field": stats.subfield,
            "length_field": self.length_field,
            "terms": list(stats.terms),
            "w": w,
            "idf": idf,
            "df": [float(d) for d in stats.df],
            "n_docs": float(stats.n_docs),
            "avgdl": float(stats.avgdl),
            "gamma_cov": p.gamma_cov, "beta_spec": p.beta_spec, "c_spec": p.c_spec,
            "floor": p.floor, "gamma_coord": p.gamma_coord, "alpha_anc": p.alpha_anc,
            "pi_anchor": p.pi_anchor, "alpha_len": p.alpha_len,
        }
        query = {"script_score": {
            "query": {"match_all": {}},
            "script": {"id": self.script_ids[TERM_FREQ_SCRIPT], "params": script_params},
        }}
        return self._rescorer(query, replace=True)

    @staticmethod
    def _scored_matches(clauses: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """Every document matches; its ``_score`` is the sum of the ``clauses`` it matches (0 if none)."""
        return {"bool": {"should": list(clauses), "filter": [{"match_all": {}}]}}

    def _factor(self, inner: Mapping[str, Any], scale: float, *, log: bool) -> dict[str, Any]:
        query = {"script_score": {
            "query": dict(inner),
            "script": {"id": self.script_ids[FACTOR_SCRIPT], "params": {"scale": scale, "log": log}},
        }}
        return self._rescorer(query, replace=False)

    def _chain_clauses(self, stats: QueryStatistics) -> list[dict[str, Any]]:
        p = self.params
        w, idf = self._weights(stats)
        terms = stats.terms
        sub = stats.subfield
        evidence_query = self._scored_matches([
            {"term": {self.similarity_subfield: {"value": t, "boost": float(q)}}}
            for t, q in zip(terms, stats.qtf)
        ])
        clauses = [self._rescorer({"script_score": {
            "query": evidence_query,
            "script": {"id": self.script_ids[EVIDENCE_SCRIPT], "params": {
                "length_field": self.length_field, "avgdl": float(stats.avgdl),
                "alpha_len": self.alpha_len_in_index,
            }},
        }}, replace=True)]
        total_w = float(sum(w))
        if terms and total_w > 0.0 and p.gamma_cov != 0.0:
            mass = self._scored_matches([
                {"constant_score": {"filter": {"term": {sub: t}}, "boost": wt}} for t, wt in zip(terms, w)
            ])
            clauses.append(self._factor(mass, p.gamma_cov / total_w, log=False))
        den = p.gamma_coord + math.log1p(max(total_w, 0.0))
        if terms and den > 0.0 and p.gamma_coord != 0.0:
            count = self._scored_matches([
                {"constant_score": {"filter": {"term": {sub: t}}, "boost": 1.0}} for t in terms
            ])
            clauses.append(self._factor(count, p.gamma_coord * p.gamma_coord / den / len(terms), log=False))
        anchors = [(t, (i - p.pi_anchor) / i) for t, i in zip(terms, idf) if i > p.pi_anchor]
        if anchors and p.alpha_anc != 0.0:
            best = self._scored_matches([{"dis_max": {"tie_breaker": 0.0, "queries": [
                {"constant_score": {"filter": {"term": {sub: t}}, "boost": x}} for t, x in anchors
            ]}}])
            clauses.append(self._factor(best, p.alpha_anc, log=True))
        return clauses
