"""Weighted query augmentation (WQA): where a query's weighted variants come from (docs/scoring.md §4.6).

The BMX paper's equation 9 scores a document against the original query ``Q`` and its
augmented variants ``Q_1 … Q_t`` (rewrites, expansions) separately and adds the scores::

    score(D) = w_0 · score(D, Q) + Σ_i w_i · score(D, Q_i)

with ``w_0 = 1`` unless the caller gives another original weight.  esbridge applies it to
every scorer: each variant is analysed by the index's own analyzers, scored by the
reranker's scorer over the same candidates, and the weighted scores are added
(:meth:`esbridge.rerank.Reranker.search` and ``rescore`` with ``augmentations=``; the checks,
the merged terms and the weighted sum are in :mod:`esbridge.rerank.augmentation`, and are
exported here too).

This module holds the sources of variants:

* :class:`Augmenter`, the protocol of a variant source: any callable
  ``(query_text) -> [(variant_text, weight), ...]``, e.g. a wrapper around a language model;
* :class:`FeedbackAugmenter` (``"prf"``), an offline augmenter: pseudo-relevance feedback
  from the top first-stage documents' term vectors, with the RM3-style term weights of the
  hybrid pipeline's keyword strategy (:mod:`esbridge.hybrid.keyword`);
* :func:`read_augmentations`: variants per query from a JSON or JSON-lines file, and
  :class:`AugmentationSpec`, where ``esbridge eval``, ``run`` and ``tune`` take each query's
  variants from.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from esbridge.errors import ConfigurationError
from esbridge.features.termvectors import FieldVector, QueryChannel
from esbridge.jsoninput import parse_json
from esbridge.rerank.augmentation import (
    Augmentation,
    Augmenter,
    callable_name,
    check_augmentations,
    check_weight,
    merge_queries,
    resolve_augmentations,
    resolve_augmentations_plan,
    score_augmented,
    select_terms,
)

if TYPE_CHECKING:
    from esbridge.rerank.reranker import Reranker

__all__ = [
    "AUGMENTERS",
    "Augmentation",
    "AugmentationSpec",
    "Augmenter",
    "FeedbackAugmenter",
    "FeedbackParams",
    "check_augmentations",
    "check_weight",
    "make_augmenter",
    "merge_queries",
    "read_augmentations",
    "resolve_augmentations",
    "resolve_augmentations_plan",
    "score_augmented",
    "select_terms",
]


# ---- an offline augmenter: pseudo-relevance feedback ----------------------------------------------


@dataclass(frozen=True)
class FeedbackParams:
    """Constants of :class:`FeedbackAugmenter`; the defaults were chosen on tuning judgments
    (``benchmarks/results/wqa.md``).

    Attributes:
        fb_docs: feedback documents: the top of the reranker's first stage.
        fb_terms: expansion terms kept (the best by RM3 weight times idf).
        min_docs: an expansion term occurs in at least this many feedback documents.
        weight: the variant's weight ``w_1``.
        repeat: the best term is written this many times in the variant, the others in
            proportion to their weight (at least once), so the scorer's query-term counts
            carry the feedback weights; 1 writes every term once.
    """

    fb_docs: int = 5
    fb_terms: int = 10
    min_docs: int = 2
    weight: float = 0.2
    repeat: int = 3

    def __post_init__(self) -> None:
        for name in ("fb_docs", "fb_terms", "min_docs", "repeat"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"prf augmenter parameter {name} must be an integer >= 1, got {value!r}")
        check_weight(self.weight, "prf augmenter parameter weight")

    @classmethod
    def parse(cls, items: Sequence[str]) -> FeedbackParams:
        """``["fb_docs=5", "weight=0.2"]`` -> the defaults with those values."""
        valid = {f.name: f for f in fields(cls)}
        values: dict[str, Any] = {}
        for item in items:
            name, eq, raw = item.partition("=")
            name = name.strip()
            if not eq or not name:
                raise ConfigurationError(f"--augmenter-param {item!r} must look like NAME=VALUE, e.g. fb_docs=5")
            if name not in valid:
                raise ConfigurationError(f"--augmenter-param {item!r}: the prf augmenter has no parameter {name!r}; "
                                         f"valid: {', '.join(valid)}")
            try:
                values[name] = parse_json(raw, f"--augmenter-param {item!r}")
            except json.JSONDecodeError:
                raise ConfigurationError(f"--augmenter-param {item!r}: {raw!r} is not a number") from None
        return cls(**values)


class FeedbackAugmenter:
    """Pseudo-relevance feedback as one weighted variant (``--augmenter prf``).

    For a query, the reranker's first stage returns its top ``fb_docs`` documents (one small
    search); their ``base``-channel term vectors (from the reranker's feature store, so a
    reranking of the same query reads them from its cache) give the expansion terms of
    :func:`esbridge.hybrid.keyword.expansion_terms`: terms found in at least ``min_docs`` of
    them, weighted by ``idf(t) · Σ_d p(d) tf(t, d)/|d|`` with ``p(d)`` the documents' first-stage
    scores normalised, the query's own terms left out.  The ``fb_terms`` best are written,
    best first, as one variant of weight ``weight``.  The terms are the index's analysed
    ``base`` tokens (stems), so the variant reaches the ``base`` channel fully; the other
    channels see those stems as text.

    Args:
        reranker: the reranker whose index, first stage and caches are used.
        params: the constants (default :class:`FeedbackParams`).
    """

    name = "prf"

    def __init__(self, reranker: Reranker, params: FeedbackParams | None = None) -> None:
        self.reranker = reranker
        self.params = params or FeedbackParams()

    def __repr__(self) -> str:
        return f"FeedbackAugmenter({self.params})"

    def expansion(self, query_text: str) -> dict[str, float]:
        """The expansion terms and their weights, best first (empty when there are none)."""
        from esbridge.hybrid.keyword import KeywordParams, expansion_candidates, expansion_terms
        from esbridge.rerank.candidates import hit_version

        rr = self.reranker
        p = self.params
        prepared = rr.analyze(query_text)
        base = prepared.query.get("base") or QueryChannel((), ())
        if not base.terms:
            return {}
        hits = rr.fetch_candidates(prepared, query_text, window=p.fb_docs)["hits"]["hits"]
        if not hits:
            return {}
        layout = rr.store.layout
        combined, sub = layout.combined, layout.subfield(layout.combined, "base")
        ids = [str(h["_id"]) for h in hits]
        got = rr.store.fetch({"base": base}, ids, [hit_version(h) for h in hits], fields=[combined])
        vecs = [FieldVector(v.get(sub) or {}) for v, ok in zip(got.candidates.vectors, got.candidates.found) if ok]
        scores = np.array([float(h.get("_score") or 0.0) for h, ok in zip(hits, got.candidates.found) if ok])
        cands = tuple(expansion_candidates(vecs, p.min_docs))
        if not cands:
            return {}
        st = rr.store.fetch({"base": QueryChannel(cands, (1,) * len(cands))}, [], [], fields=[combined]).stats[sub]
        kp = KeywordParams(fb_docs=p.fb_docs, fb_terms=p.fb_terms, min_docs=p.min_docs)
        return expansion_terms(vecs, scores, st.df, st.doc_count, kp, exclude=base.terms)

    def __call__(self, query_text: str) -> list[tuple[str, float]]:
        terms = self.expansion(query_text)
        if not terms or self.params.weight == 0:
            return []
        top = max(terms.values())
        words = []
        for t, w in terms.items():  # best first
            words += [t] * max(1, round(self.params.repeat * w / top))
        return [(" ".join(words), float(self.params.weight))]


#: Augmenters shipped with esbridge, by name (``--augmenter NAME``).
AUGMENTERS: Mapping[str, Callable[[Reranker, Sequence[str]], Augmenter]] = {
    "prf": lambda rr, items: FeedbackAugmenter(rr, FeedbackParams.parse(items)),
}


def make_augmenter(name: str, reranker: Reranker, params: Sequence[str] = ()) -> Augmenter:
    """The shipped augmenter ``name`` bound to ``reranker``, with ``NAME=VALUE`` parameters."""
    if name not in AUGMENTERS:
        raise ConfigurationError(f"unknown augmenter {name!r}; esbridge ships {', '.join(AUGMENTERS)} "
                                 "(a custom one is any callable query_text -> [(variant, weight), ...])")
    return AUGMENTERS[name](reranker, params)


# ---- variants from a file -------------------------------------------------------------------------


def _line_of(raw: str, key: str) -> int | None:
    for form in (json.dumps(key, ensure_ascii=False), json.dumps(key)):
        at = raw.find(form)
        if at >= 0:
            return raw.count("\n", 0, at) + 1
    return None


def _pairs(value: Any, where: str) -> tuple[Augmentation, ...]:
    if not isinstance(value, list):
        raise ConfigurationError(f"{where}: expected a list of [variant, weight] pairs, got {json.dumps(value)[:80]}")
    out = []
    for i, pair in enumerate(value, start=1):
        if not isinstance(pair, list) or len(pair) != 2:
            raise ConfigurationError(f"{where}: pair {i} must be [variant, weight], got {json.dumps(pair)[:80]}")
        text, weight = pair
        if not isinstance(text, str):
            raise ConfigurationError(f"{where}: pair {i}: the variant must be a string, got {json.dumps(text)[:80]}")
        out.append((text, check_weight(weight, f"{where}: pair {i}: the weight")))
    return tuple(out)


def read_augmentations(path: str | Path) -> dict[str, tuple[Augmentation, ...]]:
    """Variants per query from a JSON or JSON-lines file.

    The file holds one JSON object, or one JSON object per line; each maps a query id (or,
    where no id is known, the query text) to a list of ``[variant text, weight]`` pairs::

        {"42": [["vitamin D deficiency and bone loss", 0.5], ["cholecalciferol", 0.2]]}

    Raises:
        ConfigurationError: the file cannot be read, or is malformed; the message names the
            file, the line and what is wrong.
    """
    p = Path(path)
    try:
        raw = p.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigurationError(f"augmentations file {str(p)!r} cannot be read: {err.strerror or err}") from None
    except UnicodeDecodeError as err:
        raise ConfigurationError(f"{p}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    lines = raw.splitlines()
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None:
        raise ConfigurationError(f"{p}: the file is empty; give a JSON object mapping query ids or texts to "
                                 "[[variant, weight], ...] lists (or one such object per line)")
    table: dict[str, tuple[Augmentation, ...]] = {}
    where_given: dict[str, int | None] = {}

    def no_duplicates(pairs: list[tuple[str, Any]], line: int | None) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        for k, v in pairs:
            if k in seen:
                if line is not None:
                    raise ConfigurationError(f"{p}, line {line}: query {k!r} is given twice on this line")
                first_at = _line_of(raw, k)
                raise ConfigurationError(f"{p}{f', line {first_at}' if first_at else ''}: query {k!r} is given "
                                         "more than once (first here)")
            seen[k] = v
        return seen

    def add(obj: Any, line: int | None) -> None:
        if not isinstance(obj, dict):
            raise ConfigurationError(f"{p}, line {line if line is not None else 1}: expected a JSON object mapping "
                                     "query ids or texts to "
                                     f"[[variant, weight], ...] lists, got {type(obj).__name__}")
        for key, value in obj.items():
            at = line if line is not None else _line_of(raw, key)
            where = f"{p}, line {at}" if at is not None else f"{p}"
            if key in table:
                before = where_given[key]
                raise ConfigurationError(f"{where}: query {key!r} is already given"
                                         + (f" on line {before}" if before is not None else ""))
            table[key] = _pairs(value, f"{where}: query {key!r}")
            where_given[key] = at

    one_line = None
    try:
        one_line = parse_json(lines[first], f"{p}, line {first + 1}", object_pairs_hook=lambda kv: kv)
    except json.JSONDecodeError:
        pass
    if isinstance(one_line, list) and all(isinstance(kv, tuple) for kv in one_line):
        # JSON lines: every non-blank line is an object of its own
        for n, line in enumerate(lines, start=1):
            if not line.strip():
                continue

            def hook(kv: list[tuple[str, Any]], n: int = n) -> dict[str, Any]:
                return no_duplicates(kv, n)

            try:
                obj = parse_json(line, f"{p}, line {n}", object_pairs_hook=hook)
            except json.JSONDecodeError as err:
                raise ConfigurationError(f"{p}, line {n}: not valid JSON ({err.msg} at column {err.colno})") from None
            add(obj, n)
    else:
        try:
            obj = parse_json(raw, str(p), object_pairs_hook=lambda kv: no_duplicates(kv, None))
        except json.JSONDecodeError as err:
            raise ConfigurationError(f"{p}, line {err.lineno}: not valid JSON ({err.msg} at column {err.colno})"
                                     ) from None
        add(obj, None)
    return table


@dataclass(frozen=True)
class AugmentationSpec:
    """Where ``esbridge eval``, ``run`` and ``tune`` take each query's variants from.

    Attributes:
        table: variants by query id or query text (:func:`read_augmentations`); the id is
            looked up first.
        source: the file's name, for reports.
        sha256: the file's SHA-256, for reports and caches.
        augmenter: a shipped augmenter's name (``"prf"``) or any :class:`Augmenter`; its
            variants follow the table's.
        augmenter_params: ``NAME=VALUE`` parameters of a shipped augmenter.
        original_weight: ``w_0``, the original query's weight.
    """

    table: Mapping[str, tuple[Augmentation, ...]] = field(default_factory=dict)
    source: str | None = None
    sha256: str | None = None
    augmenter: str | Augmenter | None = None
    augmenter_params: tuple[str, ...] = ()
    original_weight: float = 1.0

    def __post_init__(self) -> None:
        check_weight(self.original_weight, "original_weight")
        if isinstance(self.augmenter, str) and self.augmenter not in AUGMENTERS:
            raise ConfigurationError(f"unknown augmenter {self.augmenter!r}; esbridge ships {', '.join(AUGMENTERS)}")
        if self.augmenter_params and not isinstance(self.augmenter, str):
            raise ConfigurationError("augmenter parameters belong to a shipped augmenter (--augmenter prf)")
        if isinstance(self.augmenter, str):
            FeedbackParams.parse(self.augmenter_params)  # fail now, not at the first query

    @classmethod
    def from_file(cls, path: str | Path, **kwargs: Any) -> AugmentationSpec:
        """The spec of an augmentations file (read and checked now)."""
        from esbridge.beirfolder import file_sha256

        table = read_augmentations(path)
        return cls(table=table, source=Path(path).name, sha256=file_sha256(path), **kwargs)

    def bind(self, reranker: Reranker) -> Callable[[str | None, str], tuple[Augmentation, ...] | None]:
        """``variants(query_id, text)``: a query's variants, or ``None`` when neither the table
        nor the augmenter gives it any (the query is then ranked as it is)."""
        augmenter: Augmenter | None
        if isinstance(self.augmenter, str):
            augmenter = make_augmenter(self.augmenter, reranker, self.augmenter_params)
        else:
            augmenter = self.augmenter

        def variants(query_id: str | None, text: str) -> tuple[Augmentation, ...] | None:
            got: tuple[Augmentation, ...] = ()
            found = False
            if query_id is not None and query_id in self.table:
                got, found = self.table[query_id], True
            elif text in self.table:
                got, found = self.table[text], True
            if augmenter is not None:
                got = got + resolve_augmentations(augmenter, text)
                found = True
            return got if found else None

        return variants

    def unused_keys(self, queries: Sequence[tuple[str, str]]) -> list[str]:
        """Keys of the table that match none of ``queries`` (``(id, text)`` pairs)."""
        known = {k for pair in queries for k in pair}
        return [k for k in self.table if k not in known]

    def describe(self) -> dict[str, Any]:
        """What produced the variants, for reports and cache keys."""
        out: dict[str, Any] = {"original_weight": self.original_weight}
        if self.source is not None:
            out["file"] = self.source
            out["sha256"] = self.sha256
            out["queries"] = len(self.table)
        if isinstance(self.augmenter, str):
            out["augmenter"] = self.augmenter
            params = FeedbackParams.parse(self.augmenter_params)
            out["augmenter_params"] = {f.name: getattr(params, f.name) for f in fields(params)}
        elif self.augmenter is not None:
            out["augmenter"] = callable_name(self.augmenter)
        return out

    def label(self) -> str:
        """One line for a system's description."""
        parts = []
        if self.source is not None:
            parts.append(f"variants from {self.source}")
        if self.augmenter is not None:
            d = self.describe()
            if isinstance(self.augmenter, str):
                ps = ", ".join(f"{k}={v}" for k, v in d["augmenter_params"].items())
                parts.append(f"{self.augmenter} augmenter ({ps})")
            else:
                parts.append(f"augmenter {d['augmenter']}")
        w0 = "" if self.original_weight == 1.0 else f", original weight {self.original_weight:g}"
        return "weighted query augmentation: " + " + ".join(parts) + w0
