"""Properties every registered scorer must have, on random inputs (hypothesis).

The inputs are built to satisfy every scorer in the registry: all four channels,
``title``/``text`` :class:`FieldArrays` that add up to the channel's frequencies and
lengths (BM25F), per-term ``entropy`` (BMX), ``unique_terms`` (architecture B) and
sometimes ``mean_idf`` (architecture C).  Statistics are consistent: ``0 <= df <= N``,
a term with ``df = 0`` occurs in no candidate, ``|d| >= Σ_t tf``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from esbridge.scoring import (
    CHANNELS,
    ChannelArrays,
    FieldArrays,
    ScoreResult,
    ScoringInput,
    available_scorers,
    get_scorer,
)

SCORERS = available_scorers()

#: Parts that the formulas bound at >= 1 (docs/scoring.md §5.3 and §6), as suffixes of
#: part names.
MULTIPLIERS_AT_LEAST_ONE: Mapping[str, tuple[str, ...]] = {
    "evolved": (".B_cov", ".B_spec", ".B_coord", ".B_anc", ".B_len"),
    "arch_a": (".B_cov", ".B_len"),
    "arch_b": (".B_coord", ".B_pair"),
    "arch_c": (".B_info", ".B_sal"),
}

#: Scorers whose formula is not monotone non-decreasing in tf(t, d) when the other
#: statistics are held fixed and every IDF is >= 0 (df <= N/2).  The evolved
#: scorer and A, B, C are monotone: every term and multiplier is non-decreasing in
#: tf and the length statistics do not move.
NOT_MONOTONE_IN_TF: frozenset[str] = frozenset()

PROPERTY_SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# --- input strategy ----------------------------------------------------------------


@st.composite
def channel_arrays(
    draw: st.DrawFn,
    n_candidates: int,
    n_docs: int,
    *,
    n_terms: st.SearchStrategy[int] = st.integers(0, 4),
    df_strategy: Callable[[int], st.SearchStrategy[int]] | None = None,
) -> ChannelArrays:
    t = draw(n_terms)
    df_of = df_strategy or (lambda n: st.integers(0, n))
    df = np.array([draw(df_of(n_docs)) for _ in range(t)], dtype=np.float64)
    qtf = np.array([draw(st.integers(1, 3)) for _ in range(t)], dtype=np.float64)
    tf = np.zeros((n_candidates, t))
    title_tf = np.zeros((n_candidates, t))
    for i in range(n_candidates):
        for j in range(t):
            if df[j] > 0:
                tf[i, j] = draw(st.integers(0, 6))
                title_tf[i, j] = draw(st.integers(0, int(tf[i, j])))
    extra = np.array([draw(st.integers(0, 40)) for _ in range(n_candidates)], dtype=np.float64)
    doc_len = tf.sum(axis=1) + extra
    title_extra = np.array([draw(st.integers(0, int(e))) for e in extra], dtype=np.float64)
    title_len = title_tf.sum(axis=1) + title_extra
    unique = np.count_nonzero(tf, axis=1) + np.minimum(extra, title_extra + 1.0)
    avgdl = draw(st.floats(1.0, 60.0))
    title_avg = draw(st.floats(1.0, 10.0))
    return ChannelArrays(
        terms=tuple(f"term{j}" for j in range(t)),
        qtf=qtf,
        df=df,
        n_docs=n_docs,
        tf=tf,
        doc_len=doc_len,
        avgdl=avgdl,
        fields={
            "title": FieldArrays(tf=title_tf, doc_len=title_len, avgdl=title_avg),
            "text": FieldArrays(tf=tf - title_tf, doc_len=doc_len - title_len, avgdl=max(avgdl - title_avg, 1.0)),
        },
        unique_terms=unique,
        entropy=np.array([draw(st.floats(0.0, 5.0)) for _ in range(t)], dtype=np.float64),
        mean_idf=draw(st.none() | st.floats(0.5, 8.0)),
    )


@st.composite
def scoring_inputs(
    draw: st.DrawFn,
    *,
    n_docs: st.SearchStrategy[int] = st.integers(1, 60),
    n_candidates: st.SearchStrategy[int] = st.integers(0, 5),
    n_terms: Mapping[str, st.SearchStrategy[int]] | None = None,
    df_strategy: Callable[[int], st.SearchStrategy[int]] | None = None,
) -> ScoringInput:
    n = draw(n_docs)
    d = draw(n_candidates)
    terms = n_terms or {}
    return ScoringInput(
        {
            name: draw(
                channel_arrays(
                    d, n, n_terms=terms.get(name, st.integers(0, 4)), df_strategy=df_strategy
                )
            )
            for name in CHANNELS
        }
    )


def assert_finite(name: str, result: ScoreResult, n_candidates: int) -> None:
    assert result.scores.shape == (n_candidates,), name
    assert np.all(np.isfinite(result.scores)), (name, result.scores)
    for part, values in result.parts.items():
        assert np.all(np.isfinite(values)), (name, part, values)


def test_registry_has_the_scorers_of_this_module() -> None:
    assert {"evolved", "arch_a", "arch_b", "arch_c"} <= set(SCORERS)


# --- finiteness on any input and on the edge cases ---------------------------------


@PROPERTY_SETTINGS
@given(scoring_inputs())
def test_finite_on_any_input(inputs: ScoringInput) -> None:
    for name in SCORERS:
        assert_finite(name, get_scorer(name).score(inputs), inputs.n_candidates)


@PROPERTY_SETTINGS
@given(scoring_inputs(n_terms={c: st.just(0) for c in CHANNELS}, n_candidates=st.integers(1, 5)))
def test_empty_query(inputs: ScoringInput) -> None:
    for name in SCORERS:
        result = get_scorer(name).score(inputs)
        assert_finite(name, result, inputs.n_candidates)
        if name in MULTIPLIERS_AT_LEAST_ONE:
            np.testing.assert_array_equal(result.scores, 0.0, err_msg=name)


@PROPERTY_SETTINGS
@given(scoring_inputs(n_terms={"base": st.just(0)}, n_candidates=st.integers(1, 5)))
def test_stopwords_only_query(inputs: ScoringInput) -> None:
    # the base analyzer removed every term; the other channels may still have some
    for name in SCORERS:
        assert_finite(name, get_scorer(name).score(inputs), inputs.n_candidates)


@PROPERTY_SETTINGS
@given(scoring_inputs(df_strategy=lambda n: st.just(n)))
def test_every_term_in_every_document(inputs: ScoringInput) -> None:
    for name in SCORERS:
        assert_finite(name, get_scorer(name).score(inputs), inputs.n_candidates)


@PROPERTY_SETTINGS
@given(scoring_inputs(n_docs=st.just(1), n_candidates=st.integers(1, 3)))
def test_one_document_index(inputs: ScoringInput) -> None:
    for name in SCORERS:
        assert_finite(name, get_scorer(name).score(inputs), inputs.n_candidates)


@st.composite
def inputs_with_empty_documents(draw: st.DrawFn) -> ScoringInput:
    """Some candidates have length 0 in every channel (and so no matches)."""
    inputs = draw(scoring_inputs(n_candidates=st.integers(1, 5)))
    empty = np.array([draw(st.booleans()) for _ in range(inputs.n_candidates)])
    return ScoringInput({name: _blank_rows(arrays, empty) for name, arrays in inputs.channels.items()})


def _blank_rows(arrays: ChannelArrays, rows: np.ndarray) -> ChannelArrays:
    def zero(a: np.ndarray) -> np.ndarray:
        out = a.copy()
        out[rows] = 0.0
        return out

    return ChannelArrays(
        terms=arrays.terms,
        qtf=arrays.qtf,
        df=arrays.df,
        n_docs=arrays.n_docs,
        tf=zero(arrays.tf),
        doc_len=zero(arrays.doc_len),
        avgdl=arrays.avgdl,
        fields={
            f: FieldArrays(tf=zero(fa.tf), doc_len=zero(fa.doc_len), avgdl=fa.avgdl) for f, fa in arrays.fields.items()
        },
        unique_terms=None if arrays.unique_terms is None else zero(arrays.unique_terms),
        entropy=arrays.entropy,
        mean_idf=arrays.mean_idf,
    )


@PROPERTY_SETTINGS
@given(inputs_with_empty_documents())
def test_zero_length_documents(inputs: ScoringInput) -> None:
    for name in SCORERS:
        assert_finite(name, get_scorer(name).score(inputs), inputs.n_candidates)


# --- bounded multipliers -----------------------------------------------------------


@PROPERTY_SETTINGS
@given(scoring_inputs())
def test_multipliers_bounded_at_one_stay_at_least_one(inputs: ScoringInput) -> None:
    for name, suffixes in MULTIPLIERS_AT_LEAST_ONE.items():
        result = get_scorer(name).score(inputs)
        checked = [p for p in result.parts if p.endswith(suffixes)]
        assert checked, name
        for part in checked:
            assert np.all(result.parts[part] >= 1.0), (name, part, result.parts[part])
        assert np.all(result.scores >= 0.0), name


@PROPERTY_SETTINGS
@given(scoring_inputs())
def test_gates_in_their_ranges(inputs: ScoringInput) -> None:
    parts = get_scorer("arch_b").score(inputs).parts
    assert np.all((parts["base.gate_spec"] >= 0.55) & (parts["base.gate_spec"] <= 1.0))
    parts = get_scorer("arch_c").score(inputs).parts
    assert np.all((parts["base.gate_ent"] >= 0.35) & (parts["base.gate_ent"] <= 1.0))
    assert np.all((parts["base.w_anchor"] >= 0.0) & (parts["base.w_anchor"] <= 0.35))
    parts = get_scorer("evolved").score(inputs, get_scorer("evolved").make_params(mic_gate=True)).parts
    assert np.all((parts["micro.G"] > 0.0) & (parts["micro.G"] <= 1.0))


# --- monotone in tf ----------------------------------------------------------------


@st.composite
def tf_increase(draw: st.DrawFn) -> tuple[ScoringInput, ScoringInput, int]:
    """The same input twice, the second with one base-channel tf(t, d) raised.

    Lengths are the same in both (the first is padded), every IDF is >= 0 (df <= N/2).
    """
    inputs = draw(
        scoring_inputs(
            n_candidates=st.integers(1, 4),
            n_docs=st.integers(2, 60),
            n_terms={"base": st.integers(1, 4)},
            df_strategy=lambda n: st.integers(0, n // 2),
        )
    )
    base = inputs.channels["base"]
    d = draw(st.integers(0, base.n_candidates - 1))
    t = draw(st.integers(0, base.n_terms - 1))
    k = float(draw(st.integers(1, 5)))
    df = base.df.copy()
    df[t] = max(df[t], 1.0)

    def variant(extra_tf: float) -> ChannelArrays:
        tf = base.tf.copy()
        tf[d, t] += extra_tf
        doc_len = base.doc_len.copy()
        doc_len[d] += k
        text = base.fields["text"]
        text_tf = text.tf.copy()
        text_tf[d, t] += extra_tf
        text_len = text.doc_len.copy()
        text_len[d] += k
        # one more distinct term in both, so the count stays consistent after the raise
        unique = None if base.unique_terms is None else base.unique_terms + 1.0
        return ChannelArrays(
            terms=base.terms,
            qtf=base.qtf,
            df=df,
            n_docs=base.n_docs,
            tf=tf,
            doc_len=doc_len,
            avgdl=base.avgdl,
            fields={"title": base.fields["title"], "text": FieldArrays(tf=text_tf, doc_len=text_len, avgdl=text.avgdl)},
            unique_terms=unique,
            entropy=base.entropy,
            mean_idf=base.mean_idf,
        )

    before = ScoringInput({**inputs.channels, "base": variant(0.0)})
    after = ScoringInput({**inputs.channels, "base": variant(k)})
    return before, after, d


@PROPERTY_SETTINGS
@given(tf_increase())
def test_monotone_non_decreasing_in_tf(case: tuple[ScoringInput, ScoringInput, int]) -> None:
    before, after, d = case
    for name in SCORERS:
        if name in NOT_MONOTONE_IN_TF:
            continue
        lo = get_scorer(name).score(before).scores[d]
        hi = get_scorer(name).score(after).scores[d]
        assert hi >= lo - 1e-12 * max(1.0, abs(lo)), (name, lo, hi)


# --- candidate order ---------------------------------------------------------------


def _permute(arrays: ChannelArrays, perm: np.ndarray) -> ChannelArrays:
    return ChannelArrays(
        terms=arrays.terms,
        qtf=arrays.qtf,
        df=arrays.df,
        n_docs=arrays.n_docs,
        tf=arrays.tf[perm],
        doc_len=arrays.doc_len[perm],
        avgdl=arrays.avgdl,
        fields={
            f: FieldArrays(tf=fa.tf[perm], doc_len=fa.doc_len[perm], avgdl=fa.avgdl) for f, fa in arrays.fields.items()
        },
        unique_terms=None if arrays.unique_terms is None else arrays.unique_terms[perm],
        entropy=arrays.entropy,
        mean_idf=arrays.mean_idf,
    )


@PROPERTY_SETTINGS
@given(scoring_inputs(n_candidates=st.integers(2, 6)), st.randoms(use_true_random=False))
def test_scores_do_not_depend_on_candidate_order(inputs: ScoringInput, rnd: random.Random) -> None:
    perm = np.arange(inputs.n_candidates)
    rnd.shuffle(perm)  # type: ignore[arg-type]
    shuffled = ScoringInput({name: _permute(arrays, perm) for name, arrays in inputs.channels.items()})
    for name in SCORERS:
        original = get_scorer(name).score(inputs).scores
        permuted = get_scorer(name).score(shuffled).scores
        np.testing.assert_allclose(permuted, original[perm], rtol=1e-12, atol=1e-15, err_msg=name)


@pytest.mark.parametrize("name", SCORERS)
def test_no_candidates(name: str) -> None:
    inputs = ScoringInput(
        {
            c: ChannelArrays(
                terms=("a",),
                qtf=np.ones(1),
                df=np.ones(1),
                n_docs=5,
                tf=np.zeros((0, 1)),
                doc_len=np.zeros(0),
                avgdl=3.0,
                fields={
                    "title": FieldArrays(tf=np.zeros((0, 1)), doc_len=np.zeros(0), avgdl=1.0),
                    "text": FieldArrays(tf=np.zeros((0, 1)), doc_len=np.zeros(0), avgdl=2.0),
                },
                unique_terms=np.zeros(0),
                entropy=np.ones(1),
            )
            for c in CHANNELS
        }
    )
    assert get_scorer(name).score(inputs).scores.shape == (0,)
