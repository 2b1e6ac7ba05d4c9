"""The parameter search on synthetic features: reproducible, better than or equal to the
defaults on training data, and held-out sets only reported."""

from __future__ import annotations

import json
from dataclasses import fields
from enum import Enum
from pathlib import Path

import numpy as np
import pytest

from esbridge.errors import ConfigurationError
from esbridge.evaluation.datasets import BeirDataset, SplitSpec
from esbridge.evaluation.metrics import FastJudge
from esbridge.evaluation.tune import (
    NOT_SEARCHED,
    SEARCH_SPACES,
    QueryFeatures,
    QuerySet,
    evaluate,
    heldout_split,
    params_with,
    search,
    space_for,
)
from esbridge.scoring import ChannelArrays, FieldArrays, ScoringInput, available_scorers, get_scorer
from tests.data import write_beir


def _query(rng: np.random.Generator, qid: str, n: int = 60) -> QueryFeatures:
    t = 3
    tf = rng.poisson(0.6, size=(n, t)).astype(np.float64)
    doc_len = rng.integers(20, 400, size=n).astype(np.float64)
    arrays = ChannelArrays(terms=("a", "b", "c"), qtf=np.ones(t), df=np.array([5.0, 50.0, 400.0]), n_docs=1000,
                           tf=tf, doc_len=doc_len, avgdl=150.0)
    ids = tuple(f"{qid}-d{i}" for i in range(n))
    # relevant: documents with the rare term, shorter ones more often
    judged = {ids[i]: 1 for i in range(n) if tf[i, 0] > 0 and doc_len[i] < 250}
    judged = judged or {ids[0]: 1}
    return QueryFeatures(qid, ids, ScoringInput({"base": arrays}), FastJudge.build(ids, judged))


def _set(seed: int, name: str) -> QuerySet:
    rng = np.random.default_rng(seed)
    return QuerySet(name, "test", tuple(_query(rng, f"q{i}") for i in range(12)))


def test_search_is_reproducible_and_never_worse_than_defaults() -> None:
    train = [_set(1, "one"), _set(2, "two")]
    held = [_set(3, "three")]
    a = search("bm25", train, held, trials=12, seed=5, progress=False)
    b = search("bm25", train, held, trials=12, seed=5, progress=False)
    assert a.best == b.best and a.objective_best == b.objective_best
    assert a.objective_best >= a.objective_defaults
    assert len(a.trials) == 12
    assert a.trials[0][2] == {"k1": 0.9, "b": 0.4}  # the defaults are tried first
    assert set(a.train) == {"one/test", "two/test"} and set(a.heldout) == {"three/test"}
    data = a.to_json()
    assert data["objective"]["best"] == pytest.approx(
        np.mean([s.combined for _, s in a.train.values()]))


def test_evaluate_counts_queries_without_candidates() -> None:
    qs = _set(1, "one")
    empty = QueryFeatures("none", (), None, FastJudge.build((), {"x": 1}))
    both = QuerySet("one", "test", (*qs.queries, empty))
    from esbridge.scoring.bm25 import BM25Params

    full, with_empty = evaluate(qs, "bm25", BM25Params()), evaluate(both, "bm25", BM25Params())
    assert with_empty.ndcg10 == pytest.approx(full.ndcg10 * 12 / 13)


def test_spaces_and_heldout_splits(tmp_path: Path) -> None:
    assert [d.name for d in space_for("bmx")] == ["alpha", "beta"]
    assert "w_pfx" not in [d.name for d in space_for("evolved")]
    assert "w_pfx" in [d.name for d in space_for("evolved", "all")]
    assert "w_bi" not in [d.name for d in space_for("evolved", fixed={"w_bi": 0.1})]
    with pytest.raises(ConfigurationError, match="no search space for scorer 'nope'; tunable: evolved, bmx"):
        space_for("nope")
    both = BeirDataset(write_beir(tmp_path / "both", [{"_id": "d", "text": "x"}], {"a": "x", "b": "y"},
                                  {"test": {"a": {"d": 1}}, "train": {"b": {"d": 1}}}))
    assert heldout_split(both, SplitSpec("train")) == SplitSpec("test")
    assert heldout_split(both, SplitSpec.parse("test:tune")) == SplitSpec.parse("test:heldout")
    assert heldout_split(both, SplitSpec("test")) is None
    train_only = BeirDataset(write_beir(tmp_path / "train-only", [{"_id": "d", "text": "x"}], {"b": "y"},
                                        {"train": {"b": {"d": 1}}}))
    assert heldout_split(train_only, SplitSpec("train")) is None


# ---- every scorer has a search space -----------------------------------------------------------


def _numeric_params(scorer: str) -> set[str]:
    """The parameters a search can move: numbers (not switches, not the IDF choice) and per-field values."""
    params = get_scorer(scorer).params_type()
    out = set()
    for f in fields(params):
        value = getattr(params, f.name)
        if isinstance(value, bool) or isinstance(value, Enum):
            continue
        if f.type in (bool, "bool"):
            continue
        out.add(f.name)
    return out


@pytest.mark.parametrize("scorer", available_scorers())
def test_every_registered_scorer_has_a_space_covering_its_parameters(scorer: str) -> None:
    """A new scorer, or a new number in a scorer's parameters, fails here until it is given a
    search dimension or a reason in NOT_SEARCHED."""
    assert scorer in SEARCH_SPACES, f"scorer {scorer!r} has tunable parameters but no search space"
    searched = {d.name for d in SEARCH_SPACES[scorer]}
    skipped = set(NOT_SEARCHED.get(scorer, {}))
    assert not searched & skipped
    missing = _numeric_params(scorer) - searched - skipped
    assert not missing, f"{scorer}: parameters neither searched nor listed in NOT_SEARCHED: {sorted(missing)}"
    assert searched | skipped <= _numeric_params(scorer), "a dimension names no parameter of the scorer"
    defaults = get_scorer(scorer).params_type()
    for d in SEARCH_SPACES[scorer]:
        assert d.low <= d.high
        if d.per_field:
            assert isinstance(getattr(defaults, d.name), tuple)
            continue
        value = getattr(defaults, d.name)
        # the defaults are inside the space, so the first trial is exactly the defaults
        assert value is None or d.low <= value <= d.high, (scorer, d.name, value)


def test_open_space_of_a_scorer_whose_every_value_is_published() -> None:
    assert [d.name for d in space_for("arch_a")] == [d.name for d in space_for("arch_a", "all")]
    assert [d.name for d in space_for("arch_b")] == ["k1", "b"]
    assert "pair_boost" in [d.name for d in space_for("arch_b", "all")]
    assert [d.name for d in space_for("arch_c", "all") if d.integer] == ["q_drop_min_len"]


def _field_query(rng: np.random.Generator, qid: str, n: int = 50) -> QueryFeatures:
    """Two text fields; relevant documents have the rare term in the title."""
    t = 3
    title = rng.poisson(0.3, size=(n, t)).astype(np.float64)
    text = rng.poisson(0.8, size=(n, t)).astype(np.float64)
    title_len = rng.integers(5, 20, size=n).astype(np.float64)
    text_len = rng.integers(50, 400, size=n).astype(np.float64)
    per_field = {"title": FieldArrays(title, title_len, 12.0), "text": FieldArrays(text, text_len, 200.0)}
    arrays = ChannelArrays(terms=("a", "b", "c"), qtf=np.ones(t), df=np.array([5.0, 60.0, 300.0]), n_docs=1000,
                           tf=title + text, doc_len=title_len + text_len, avgdl=212.0, fields=per_field)
    ids = tuple(f"{qid}-d{i}" for i in range(n))
    judged = {ids[i]: 1 for i in range(n) if title[i, 0] > 0} or {ids[0]: 1}
    return QueryFeatures(qid, ids, ScoringInput({"base": arrays}), FastJudge.build(ids, judged))


def _field_set(seed: int, name: str) -> QuerySet:
    rng = np.random.default_rng(seed)
    return QuerySet(name, "test", tuple(_field_query(rng, f"q{i}") for i in range(10)))


@pytest.mark.parametrize("scorer", ["bm25f_robertson", "bm25f_pubmed"])
def test_bm25f_searches_one_weight_per_text_field(scorer: str) -> None:
    train, held = [_field_set(1, "one")], [_field_set(2, "two")]
    result = search(scorer, train, held, trials=8, seed=3, progress=False)
    assert "field_weights.text" in result.searched and "field_weights.title" in result.searched
    assert ("field_b.title" in result.searched) == (scorer == "bm25f_robertson")
    assert "field_weights" not in result.searched and "default_weight" not in result.searched
    # the first trial is the scorer's defaults, field by field
    defaults = get_scorer(scorer).params_type()
    first = result.trials[0][2]
    assert first["field_weights.title"] == defaults.weight("title")
    assert first["field_weights.text"] == defaults.weight("text")
    # the best setting is a valid parameter object of the scorer, and scores as reported
    data = json.loads(json.dumps(result.to_json()))
    best = get_scorer(scorer).make_params(**data["best"])
    assert best == params_with(scorer, {k: v for k, v in result.best.items()})
    assert evaluate(train[0], scorer, best).combined == pytest.approx(data["objective"]["best"])
    assert result.objective_best >= result.objective_defaults
    # a trial's values are what the scorer was given
    number, value, values = result.trials[-1]
    params = params_with(scorer, values)
    assert evaluate(train[0], scorer, params).combined == pytest.approx(value)
    assert {f: w for f, w in params.field_weights if f in ("title", "text")} == {
        "title": values["field_weights.title"], "text": values["field_weights.text"]}


def test_a_field_value_can_be_fixed_and_searches_warm_start_from_a_json() -> None:
    train = [_field_set(1, "one")]
    result = search("bm25f_robertson", train, [], trials=5, seed=0, progress=False,
                    fixed={"field_weights.title": 3.0, "k1": 0.9})
    assert "field_weights.title" not in result.searched and "k1" not in result.searched
    assert all("field_weights.title" not in v and "k1" not in v for _, _, v in result.trials)
    assert result.trials[0][2]["field_weights.text"] == 1.0  # the other field starts at its default
    # every trial scored the fixed values: re-scoring with them gives each trial's objective
    base = params_with("bm25f_robertson", {"field_weights.title": 3.0, "k1": 0.9})
    for _, value, values in result.trials:
        params = params_with("bm25f_robertson", values, base)
        assert params.weight("title") == 3.0 and params.k1 == 0.9
        assert evaluate(train[0], "bm25f_robertson", params).combined == pytest.approx(value)
    earlier = {"k1": 2.0, "field_weights": [["text", 0.5], ["title", 4.0]], "field_b": [["text", 0.3]]}
    again = search("bm25f_robertson", train, [], trials=2, seed=0, progress=False, warm_start=[earlier])
    assert again.trials[1][2]["field_weights.title"] == 4.0 and again.trials[1][2]["field_b.text"] == 0.3
    assert again.trials[1][2]["k1"] == 2.0


def test_params_with_names_what_is_wrong() -> None:
    p = params_with("bm25f_robertson", {"field_weights.title": 3, "field_b.text": 0.2, "k1": 1.5})
    assert p.weight("title") == 3 and p.b("text") == 0.2 and p.k1 == 1.5 and p.weight("text") == 1.0
    assert params_with("arch_c", {"q_drop_min_len": 6.0}).q_drop_min_len == 6
    assert params_with("bmx", {"alpha": None}).alpha is None
    with pytest.raises(ConfigurationError, match="scorer 'bm25' has no parameter 'k2'"):
        params_with("bm25", {"k2": 1.0})
    with pytest.raises(ConfigurationError, match="'k1' of scorer 'bm25f_robertson' is not set per field"):
        params_with("bm25f_robertson", {"k1.title": 1.0})
    with pytest.raises(ConfigurationError, match="is set per field; give field_weights.FIELD=VALUE"):
        params_with("bm25f_robertson", {"field_weights": 2.0})
    with pytest.raises(ConfigurationError, match=r"field_b\['title'\] must be in \[0, 1\]"):
        params_with("bm25f_robertson", {"field_b.title": 1.5})
    with pytest.raises(ConfigurationError, match=r"field_weights.titel: the index has no text field 'titel' "
                                                 r"\(its text fields: text, title\)"):
        search("bm25f_robertson", [_field_set(1, "one")], [], trials=2, progress=False,
               fixed={"field_weights.titel": 2.0})
    with pytest.raises(ConfigurationError, match="weighs text fields, but the training features hold no"):
        search("bm25f_pubmed", [_set(1, "one")], [], trials=2, progress=False)


@pytest.mark.parametrize("scorer", ["arch_a", "arch_b", "arch_c", "bm25l", "bm25plus", "bm25_atire",
                                    "bm25_robertson", "bm25_normalized"])
def test_new_spaces_search_on_synthetic_features(scorer: str) -> None:
    rng = np.random.default_rng(4)
    queries = []
    for i in range(8):
        qf = _query(rng, f"q{i}")
        assert qf.inputs is not None
        base = qf.inputs.channel("base")
        queries.append(QueryFeatures(qf.query_id, qf.candidates, ScoringInput({"base": base, "prefix": base}),
                                     qf.judge))
    train = [QuerySet("one", "test", tuple(queries))]
    result = search(scorer, train, [], trials=6, seed=1, space="all", progress=False)
    assert len(result.trials) == 6 and result.objective_best >= result.objective_defaults
    best = get_scorer(scorer).make_params(**json.loads(json.dumps(result.to_json()))["best"])
    assert evaluate(train[0], scorer, best).combined == pytest.approx(result.objective_best)
    assert result.searched == [d.name for d in space_for(scorer, "all")]


def test_fixed_values_hold_in_the_best_setting_even_when_nothing_beats_the_start() -> None:
    # BMX's alpha and beta default to eq. 3's values (None), which no trial can reproduce; with
    # alpha fixed the fallback is the fixed setting, not the shipped defaults
    rng = np.random.default_rng(0)
    queries = []
    for i in range(6):
        qf = _query(rng, f"q{i}")
        assert qf.inputs is not None
        base = qf.inputs.channel("base")
        with_entropy = ChannelArrays(terms=base.terms, qtf=base.qtf, df=base.df, n_docs=base.n_docs, tf=base.tf,
                                     doc_len=base.doc_len, avgdl=base.avgdl, entropy=np.array([0.5, 3.0, 20.0]))
        queries.append(QueryFeatures(qf.query_id, qf.candidates, ScoringInput({"base": with_entropy}), qf.judge))
    train = [QuerySet("one", "test", tuple(queries))]
    result = search("bmx", train, [], trials=1, seed=0, fixed={"alpha": 0.7}, progress=False)
    assert result.best["alpha"] == 0.7 and result.searched == ["beta"]
