"""Parameter search for a scorer, on features fetched once.

For every training query the first stage runs once, and the candidates' term
vectors and index-wide statistics are fetched once into :class:`ScoringInput`
arrays (:meth:`Reranker.scoring_input`, the features :meth:`Reranker.rank` scores).
Each parameter setting is then scored in numpy alone and judged with
:class:`FastJudge` (``nDCG@10`` and ``R@100``, pinned to ir-measures by a test;
equal scores keep the first stage's order, as every command ranks them), so
hundreds of settings cost no engine request.

The objective is the mean over the training sets of each set's
``combined_score = 0.8·R@100 + 0.2·nDCG@10``: one setting for all collections,
each collection weighing the same whatever its number of queries.  The search is
optuna's TPE sampler with a fixed seed (single-threaded, so reproducible), with
the scorer's current defaults as the first trial.  Held-out sets (the test
judgments of a collection tuned on ``train``, or the other half of a split
tuned on ``test:tune``) are scored only after the search, for the report.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np

from esbridge.augment import AugmentationSpec
from esbridge.engine.client import Engine
from esbridge.errors import ConfigurationError
from esbridge.evaluation.datasets import BeirDataset, Part, SplitSpec, file_sha256
from esbridge.evaluation.indexing import PYSERINI_BM25, ensure_index, index_name, mapping_fingerprint
from esbridge.evaluation.metrics import FastJudge, combined_score
from esbridge.features.cache import TermVectorCache
from esbridge.features.entropy import CollectionEntropy
from esbridge.index.definitions import IndexLayout
from esbridge.rerank import Reranker, hit_version
from esbridge.scoring import ScoringInput, get_scorer
from esbridge.scoring.bmx import weighted_query_augmentation
from esbridge.spaces import FIELD_DEFAULTS, NOT_SEARCHED, SEARCH_SPACES, Dimension, space_for

__all__ = [
    "NOT_SEARCHED",
    "SEARCH_SPACES",
    "Dimension",
    "QueryFeatures",
    "QuerySet",
    "TuneResult",
    "collect_features",
    "evaluate",
    "flat_values",
    "heldout_split",
    "params_with",
    "search",
    "space_for",
    "text_fields_of",
]


@dataclass(frozen=True)
class QueryFeatures:
    """One query's candidates, their scoring arrays and judgments.

    With query augmentation, the candidates are the union of the query's and its variants'
    first-stage candidates, ``inputs`` the original query's arrays over them and
    ``augmented`` each variant's weight and arrays; a setting is then measured on
    ``original_weight · score(inputs) + Σ_i w_i · score(inputs_i)``.
    """

    query_id: str
    candidates: tuple[str, ...]
    inputs: ScoringInput | None  # None when the first stage found nothing
    judge: FastJudge
    augmented: tuple[tuple[float, ScoringInput], ...] | None = None
    original_weight: float = 1.0


@dataclass(frozen=True)
class QuerySet:
    """The features of one collection's split (or half)."""

    dataset: str
    split: str
    queries: tuple[QueryFeatures, ...]

    @property
    def label(self) -> str:
        return f"{self.dataset}/{self.split}"


def heldout_split(dataset: BeirDataset, split: SplitSpec) -> SplitSpec | None:
    """What a setting tuned on ``split`` is reported on: the other half, or ``test``."""
    if split.part is not Part.ALL:
        return split.complement()
    if split.name != "test" and "test" in dataset.splits():
        return SplitSpec("test")
    return None


def _all_channel_params(scorer: str) -> Any:
    """Parameters under which the reranker reads every channel the scorer can read."""
    s = get_scorer(scorer)
    params = s.params_type()
    names = {f.name for f in fields(params)}
    on = {n: 0.1 for n in ("w_pfx", "w_bi", "w_mic") if n in names and getattr(params, n) <= 0.0}
    return replace(params, **on) if on else params


#: Bumped whenever what :func:`collect_features` stores changes meaning.
FEATURES_VERSION = 1


def _features_key(dataset: BeirDataset, corpus_sha: str, split: SplitSpec, scorer: str, window: int,
                  channels: Sequence[str], index: str, augmentation: Mapping[str, Any] | None = None) -> str:
    parts = {
        "version": FEATURES_VERSION,
        "corpus": corpus_sha,
        "mapping": mapping_fingerprint(IndexLayout(), PYSERINI_BM25),
        "queries": file_sha256(dataset.path / "queries.jsonl"),
        "qrels": file_sha256(dataset.path / "qrels" / f"{split.name}.tsv"),
        "split": [split.name, split.part.value, split.seed],
        "entropy": scorer.startswith("bmx"),
        "window": window,
        "channels": list(channels),
        "index": index,
    }
    if augmentation is not None:
        parts["augmentation"] = dict(augmentation)
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:32]


def collect_features(engine: Engine, dataset: BeirDataset, split: SplitSpec, scorer: str, *,
                     window: int = 1000, index_prefix: str = "esbridge-eval", progress: bool = False,
                     vector_cache: TermVectorCache | None = None,
                     cache: Path | None = None, augmentation: AugmentationSpec | None = None) -> QuerySet:
    """Run the first stage once per judged query and fetch the candidates' arrays once.

    The index is the evaluation index (Pyserini BM25), built if needed.  With
    ``cache`` (a folder), the result is kept there as a pickle keyed on everything
    it depends on (corpus, index body, queries, judgments, split, window, channels,
    augmentation) and read back by later runs; the folder is esbridge's own, never
    shared input.  With ``augmentation``, each query's variants are found and their
    arrays fetched once with the query's, through the reranker's own path
    (:meth:`Reranker.fetch_union`, :meth:`Reranker.augmented_inputs`); the parameters are
    then tuned on the augmented scores.  An augmentation with a custom augmenter (not a
    shipped one by name) is not cached: its output cannot be keyed.
    """
    corpus_sha = dataset.fingerprint()
    index = ensure_index(engine, dataset, index_name(index_prefix, dataset, PYSERINI_BM25),
                         bm25=PYSERINI_BM25, progress=progress, corpus_sha256=corpus_sha)
    path = None
    cacheable = augmentation is None or augmentation.augmenter is None or isinstance(augmentation.augmenter, str)
    if cache is not None and cacheable:
        channels_read = get_scorer(scorer).channels
        key = _features_key(dataset, corpus_sha, split, scorer, window, channels_read, index,
                            augmentation.describe() if augmentation is not None else None)
        path = cache / f"{dataset.name}-{str(split).replace(':', '-')}-{scorer}-{key}.pickle"
        if path.is_file():
            with open(path, "rb") as f:
                loaded = pickle.load(f)
            if isinstance(loaded, QuerySet):
                return loaded
    result = _collect(engine, dataset, index, split, scorer, window=window, progress=progress,
                      vector_cache=vector_cache, augmentation=augmentation)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".part")
        with open(tmp, "wb") as f:
            pickle.dump(result, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    return result


def _collect(engine: Engine, dataset: BeirDataset, index: str, split: SplitSpec, scorer: str, *,
             window: int, progress: bool, vector_cache: TermVectorCache | None,
             augmentation: AugmentationSpec | None = None) -> QuerySet:
    rr = Reranker(engine, index, scorer=scorer, params=_all_channel_params(scorer), window=window,
                  vector_cache=vector_cache or TermVectorCache(max_entries=max(50_000, 2 * dataset.corpus_size())))
    if get_scorer(scorer).needs_entropy:  # build the collection entropy now, with its own progress bar
        rr._entropy = CollectionEntropy(engine, index, rr.layout, progress=progress)  # type: ignore[arg-type]
    qrels = dataset.qrels(split)
    out = []
    variants_of = augmentation.bind(rr) if augmentation is not None else None
    from tqdm import tqdm

    for q in tqdm(dataset.queries(split), desc=f"features {dataset.name}/{split}", unit="query",
                  disable=not progress, file=sys.stderr):
        # the reranker's own path: first stage, then candidates → features
        prepared = rr.analyze(q.text)
        variants = variants_of(q.id, q.text) if variants_of is not None else None
        if variants is None:
            hits = rr.fetch_candidates(prepared, q.text, window=window)["hits"]["hits"]
            ids = tuple(str(h["_id"]) for h in hits)
            inputs = None
            if ids:
                inputs, _ = rr.scoring_input(prepared, ids, [hit_version(h) for h in hits], stats_validated=True)
            out.append(QueryFeatures(q.id, ids, inputs, FastJudge.build(ids, qrels[q.id])))
            continue
        assert augmentation is not None
        analysed = rr.analyze_variants(variants)
        union = rr.fetch_union([(prepared, q.text), *((v, text) for (v, _), (text, _) in zip(analysed, variants))],
                               window=window)
        ids = tuple(str(h["_id"]) for h in union.hits)
        if not ids:
            out.append(QueryFeatures(q.id, ids, None, FastJudge.build(ids, qrels[q.id])))
            continue
        every, _ = rr.augmented_inputs([prepared, *(v for v, _ in analysed)], ids,
                                       [hit_version(h) for h in union.hits], stats_validated=True)
        out.append(QueryFeatures(q.id, ids, every[0], FastJudge.build(ids, qrels[q.id]),
                                 augmented=tuple((w, inp) for (_, w), inp in zip(analysed, every[1:])),
                                 original_weight=augmentation.original_weight))
    return QuerySet(dataset.name, str(split), tuple(out))


@dataclass(frozen=True)
class SetScore:
    """Mean nDCG@10, R@100 and combined score of one query set."""

    ndcg10: float
    recall100: float

    @property
    def combined(self) -> float:
        return combined_score(self.recall100, self.ndcg10)


def evaluate(qs: QuerySet, scorer: str, params: Any) -> SetScore:
    """Score every query of ``qs`` with ``params`` and judge it (no engine involved)."""
    sc = get_scorer(scorer)
    fn = sc.fn
    nd = np.zeros(len(qs.queries))
    rc = np.zeros(len(qs.queries))
    for i, qf in enumerate(qs.queries):
        if qf.inputs is None:
            continue
        if qf.augmented is None:
            scores = fn(qf.inputs, params).scores
        else:
            scores = weighted_query_augmentation(sc, qf.inputs, qf.augmented, params,
                                                 original_weight=qf.original_weight).scores
        nd[i], rc[i] = qf.judge.ndcg10_recall(scores)
    if not qs.queries:
        raise ConfigurationError(f"{qs.label} has no judged queries")
    return SetScore(float(nd.mean()), float(rc.mean()))


@dataclass
class TuneResult:
    """The outcome of a search."""

    scorer: str
    defaults: dict[str, Any]
    best: dict[str, Any]
    objective_defaults: float
    objective_best: float
    train: dict[str, tuple[SetScore, SetScore]]  # label -> (defaults, best)
    heldout: dict[str, tuple[SetScore, SetScore]]
    trials: list[tuple[int, float, dict[str, float]]] = field(default_factory=list)
    seconds: float = 0.0
    seed: int = 0
    space: str = "open"
    searched: list[str] = field(default_factory=list)  # the dimensions searched

    def to_json(self) -> dict[str, Any]:
        def sets(d: Mapping[str, tuple[SetScore, SetScore]]) -> dict[str, Any]:
            return {k: {which: {"ndcg@10": s.ndcg10, "recall@100": s.recall100, "combined_score": s.combined}
                        for which, s in zip(("defaults", "best"), v)} for k, v in d.items()}

        return {"scorer": self.scorer, "seed": self.seed, "space": self.space, "searched": self.searched,
                "trials": len(self.trials),
                "objective": {"defaults": self.objective_defaults, "best": self.objective_best},
                "defaults": self.defaults, "best": self.best,
                "train": sets(self.train), "heldout": sets(self.heldout)}


def _jsonable(params: Any) -> dict[str, Any]:
    out = {}
    for k, v in asdict(params).items():
        out[k] = v.value if hasattr(v, "value") else v
    return out


def _optuna() -> Any:
    try:
        import optuna
    except ImportError as err:
        raise ConfigurationError(
            "tuning needs optuna; install it with: pip install 'esbridge[eval]'"
        ) from err
    return optuna


def params_with(scorer: str, values: Mapping[str, Any], base: Any = None) -> Any:
    """``base`` (default: the scorer's defaults) with ``values`` applied.

    A name ``<param>.<field>`` sets one field's value of a per-field parameter (BM25F's
    ``field_weights.title``); the field's other values are kept.  An integral float given
    for an integer parameter is taken as the integer.

    Raises:
        ConfigurationError: an unknown parameter, a field value for a parameter that is not
            per field (or the reverse), or values the scorer refuses (the message names them).
    """
    params = get_scorer(scorer).params_type() if base is None else base
    declared = {f.name: f for f in fields(params)}
    plain: dict[str, Any] = {}
    per_field: dict[str, dict[str, Any]] = {}
    for key, value in values.items():
        name, dot, field_name = key.partition(".")
        if name not in declared:
            raise ConfigurationError(f"scorer {scorer!r} has no parameter {name!r}; "
                                     f"valid: {', '.join(sorted(declared))}")
        pairs = name in FIELD_DEFAULTS
        if dot and not pairs:
            raise ConfigurationError(f"parameter {name!r} of scorer {scorer!r} is not set per field; "
                                     f"give {name}=VALUE")
        if pairs and not dot and isinstance(value, (int, float)):
            raise ConfigurationError(f"parameter {name!r} of scorer {scorer!r} is set per field; "
                                     f"give {name}.FIELD=VALUE")
        if dot:
            if not field_name or value is None:
                raise ConfigurationError(f"{key}: give a field name and a number, e.g. {name}.title=2")
            per_field.setdefault(name, dict(getattr(params, name)))[field_name] = value
            continue
        if declared[name].type in (int, "int") and isinstance(value, float) and value.is_integer():
            value = int(value)
        plain[name] = value
    for name, mapping in per_field.items():
        plain[name] = tuple(sorted(mapping.items()))
    try:
        return replace(params, **plain)
    except (TypeError, ValueError) as err:
        raise ConfigurationError(f"scorer {scorer!r}: {err}") from err


def flat_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` with each per-field parameter (``(field, value)`` pairs, as in a tuning JSON's
    ``best``) spread into ``<param>.<field>`` entries, the names the search uses."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if key in FIELD_DEFAULTS and isinstance(value, (list, tuple)):
            for pair in value:
                out[f"{key}.{pair[0]}"] = pair[1]
        else:
            out[key] = value
    return out


def _current(params: Any, name: str) -> Any:
    """The value of search dimension ``name`` under ``params``."""
    param, dot, field_name = name.partition(".")
    if not dot:
        return getattr(params, param)
    pairs = dict(getattr(params, param))
    return pairs.get(field_name, getattr(params, FIELD_DEFAULTS[param]))


def text_fields_of(sets: Sequence[QuerySet]) -> tuple[str, ...]:
    """The text fields of which the features hold per-field arrays (BM25F scorers), sorted."""
    names: set[str] = set()
    for qs in sets:
        for qf in qs.queries:
            if qf.inputs is not None and "base" in qf.inputs.channels:
                names.update(qf.inputs.channels["base"].fields)
    return tuple(sorted(names))


def search(scorer: str, train: Sequence[QuerySet], heldout: Sequence[QuerySet], *, trials: int = 200,
           seed: int = 0, space: str = "open", fixed: Mapping[str, float | None] | None = None,
           progress: bool = False, on_trial: Callable[[int, float], None] | None = None,
           warm_start: Sequence[Mapping[str, Any]] = ()) -> TuneResult:
    """TPE search of ``scorer``'s parameters maximising the mean combined score over ``train``.

    A BM25F scorer's per-field parameters are searched per text field of the training
    features (``field_weights.title``, ``field_weights.text``, ...; see :func:`space_for`).

    Args:
        fixed: parameters held at a value (not searched), applied to every trial; a name
            ``<param>.<field>`` holds one field's value (:func:`params_with`).
        warm_start: settings tried right after the defaults (e.g. the ``best`` of an earlier
            search's JSON); values outside the searched ranges are clipped into them.
    """
    if not train:
        raise ConfigurationError("tuning needs at least one training set")
    if trials < 1:
        raise ConfigurationError(f"trials must be >= 1, got {trials}")
    optuna = _optuna()
    text_fields = text_fields_of(train)
    if any(d.per_field for d in SEARCH_SPACES.get(scorer, ())) and not text_fields:
        raise ConfigurationError(f"scorer {scorer!r} weighs text fields, but the training features hold no "
                                 "per-field arrays; collect them with collect_features for this scorer")
    for key in fixed or {}:
        param, dot, field_name = key.partition(".")
        if dot and param in FIELD_DEFAULTS and field_name not in text_fields:
            raise ConfigurationError(f"{key}: the index has no text field {field_name!r} "
                                     f"(its text fields: {', '.join(text_fields) or 'none'})")
    dims = space_for(scorer, space, fixed, text_fields)
    if not dims:
        raise ConfigurationError(f"every searched parameter of {scorer!r} is fixed; nothing to search")
    defaults = get_scorer(scorer).params_type()
    base = params_with(scorer, fixed) if fixed else defaults
    started = time.perf_counter()

    def objective_of(params: Any) -> float:
        return float(np.mean([evaluate(qs, scorer, params).combined for qs in train]))

    history: list[tuple[int, float, dict[str, float]]] = []

    def objective(trial: Any) -> float:
        values = {d.name: trial.suggest_int(d.name, int(d.low), int(d.high)) if d.integer
                  else trial.suggest_float(d.name, d.low, d.high, log=d.log) for d in dims}
        value = objective_of(params_with(scorer, values, base))
        history.append((trial.number, value, values))
        if on_trial:
            on_trial(trial.number, value)
        return value

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sampler = optuna.samplers.TPESampler(seed=seed, multivariate=True, n_startup_trials=min(20, trials))
    study = optuna.create_study(direction="maximize", sampler=sampler)

    def clip(d: Dimension, v: float) -> float:
        v = min(max(v, d.low), d.high)
        return int(round(v)) if d.integer else v

    start_values = {}
    for d in dims:
        v = _current(base, d.name)
        start = float(v) if v is not None else (d.low * d.high) ** 0.5 if d.log else (d.low + d.high) / 2
        start_values[d.name] = clip(d, start)
    study.enqueue_trial(start_values)
    for values in warm_start:
        flat = flat_values(values)
        study.enqueue_trial({d.name: clip(d, float(flat[d.name])) for d in dims if flat.get(d.name) is not None})
    from tqdm import tqdm

    bar = tqdm(total=trials, desc=f"tuning {scorer}", unit="trial", disable=not progress, file=sys.stderr)

    def tick(study_: Any, trial_: Any) -> None:
        bar.update(1)
        bar.set_postfix(best=f"{study_.best_value:.4f}")

    try:
        study.optimize(objective, n_trials=trials, callbacks=[tick])
    finally:
        bar.close()
    best_params = params_with(scorer, study.best_params, base)
    best_value = float(study.best_value)
    default_value = objective_of(defaults)
    # the search found nothing better than what ships (with the fixed values, if any: they hold)
    start_value = default_value if base == defaults else objective_of(base)
    if start_value >= best_value:
        best_params, best_value = base, start_value
    train_scores = {qs.label: (evaluate(qs, scorer, defaults), evaluate(qs, scorer, best_params)) for qs in train}
    held = {qs.label: (evaluate(qs, scorer, defaults), evaluate(qs, scorer, best_params)) for qs in heldout}
    return TuneResult(
        scorer=scorer, defaults=_jsonable(defaults), best=_jsonable(best_params),
        objective_defaults=default_value, objective_best=best_value, train=train_scores, heldout=held,
        trials=history, seconds=time.perf_counter() - started, seed=seed, space=space,
        searched=[d.name for d in dims],
    )


def _fmt(value: Any) -> str:
    if isinstance(value, (list, tuple)) and all(isinstance(p, (list, tuple)) and len(p) == 2 for p in value):
        return ", ".join(f"{f}={_fmt(v)}" for f, v in value) or "(none)"  # per-field values
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def tuning_markdown(result: TuneResult, command: str | None = None) -> str:
    """A report: objective, per-set figures on training and held-out queries, chosen values."""
    lines = [f"# Tuning `{result.scorer}`", ""]
    if command:
        lines += ["Produced by:", "", "```", command, "```", ""]
    lines += [
        f"optuna TPE, seed {result.seed}, {len(result.trials)} trials, space `{result.space}` "
        f"({', '.join(f'`{n}`' for n in result.searched)}); objective = "
        "mean over the training sets of combined = 0.8·R@100 + 0.2·nDCG@10 "
        "(FastJudge, equal to ir-measures' nDCG@10 and R@100).",
        "",
        f"Objective: defaults {result.objective_defaults:.4f} → best {result.objective_best:.4f}",
        "",
    ]
    for title, sets in (("Training sets", result.train), ("Held-out sets (never seen by the search)", result.heldout)):
        if not sets:
            continue
        lines += [f"## {title}", "", "| set | nDCG@10 defaults | nDCG@10 best | R@100 defaults | R@100 best | "
                  "combined defaults | combined best |", "|---|---:|---:|---:|---:|---:|---:|"]
        for label, (d, b) in sets.items():
            lines.append(f"| {label} | {d.ndcg10:.4f} | {b.ndcg10:.4f} | {d.recall100:.4f} | {b.recall100:.4f} | "
                         f"{d.combined:.4f} | {b.combined:.4f} |")
        ds = list(sets.values())
        lines.append(f"| **mean** | {np.mean([d.ndcg10 for d, _ in ds]):.4f} | "
                     f"{np.mean([b.ndcg10 for _, b in ds]):.4f} | "
                     f"{np.mean([d.recall100 for d, _ in ds]):.4f} | {np.mean([b.recall100 for _, b in ds]):.4f} | "
                     f"{np.mean([d.combined for d, _ in ds]):.4f} | {np.mean([b.combined for _, b in ds]):.4f} |")
        lines.append("")
    lines += ["## Parameters", "", "| parameter | default | best |", "|---|---:|---:|"]
    for key, value in result.defaults.items():
        lines.append(f"| {key} | {_fmt(value)} | {_fmt(result.best.get(key))} |")
    lines.append("")
    return "\n".join(lines)
