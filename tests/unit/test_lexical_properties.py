"""Properties of the BM25, BM25F and BMX scorers on generated inputs.

- finite scores and parts of shape ``(D,)`` for any consistent input, including empty
  queries, no candidates, empty documents, ``df = N``, ``N = 1`` and ``avgdl = 0``;
- each candidate's score does not depend on the order of the candidates;
- the score does not decrease when a term's frequency grows (IDF >= 0).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from esbridge.scoring import ChannelArrays, FieldArrays, ScoringInput, get_scorer
from esbridge.scoring.bm25 import BM25Params
from esbridge.scoring.bmx import BMXParams

SCORERS: list[tuple[str, Any]] = [
    ("bm25", None),
    ("bm25", BM25Params(k1=1.2, b=0.75, k1_plus_one=True, lucene_norms=True)),
    ("bm25", BM25Params(k1=0.0, b=1.0)),
    ("bm25_robertson", None),
    ("bm25_atire", None),
    ("bm25l", None),
    ("bm25plus", None),
    ("bm25f_pubmed", None),
    ("bm25f_robertson", None),
    ("bmx", None),
    ("bmx", BMXParams(entropy_over_matched_terms=True, drop_absent_terms=True)),
    ("bmx", BMXParams(alpha=0.0, beta=0.0)),
    ("bmx_normalized", None),
    ("bm25_normalized", None),
]
IDS = [f"{name}-{i}" for i, (name, _) in enumerate(SCORERS)]
PROPERTY_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def channels(draw: st.DrawFn, *, max_candidates: int = 6, max_terms: int = 4) -> ChannelArrays:
    d = draw(st.integers(0, max_candidates))
    t = draw(st.integers(0, max_terms))
    n_docs = draw(st.integers(0, 60))
    ints = st.integers(0, 30)

    def matrix(rows: int, cols: int) -> np.ndarray:
        row = st.lists(ints, min_size=cols, max_size=cols)
        values = draw(st.lists(row, min_size=rows, max_size=rows))
        return np.array(values, dtype=np.float64).reshape(rows, cols)

    def vector(n: int, elements: st.SearchStrategy[int]) -> np.ndarray:
        return np.array(draw(st.lists(elements, min_size=n, max_size=n)), dtype=np.float64)

    avgdl = draw(st.one_of(st.just(0.0), st.floats(0.5, 300.0)))
    field_avgdl = st.one_of(st.just(0.0), st.floats(0.5, 300.0))
    title_tf, body_tf = matrix(d, t), matrix(d, t)
    title_len, body_len = vector(d, st.integers(0, 40)), vector(d, st.integers(0, 300))
    return ChannelArrays(
        terms=tuple(f"t{i}" for i in range(t)),
        qtf=vector(t, st.integers(1, 3)),
        df=vector(t, st.integers(0, n_docs)),
        n_docs=n_docs,
        tf=title_tf + body_tf,
        doc_len=title_len + body_len,
        avgdl=avgdl,
        fields={
            "title": FieldArrays(tf=title_tf, doc_len=title_len, avgdl=draw(field_avgdl)),
            "body": FieldArrays(tf=body_tf, doc_len=body_len, avgdl=draw(field_avgdl)),
        },
        entropy=vector(t, st.floats(0.0, 50.0)),  # type: ignore[arg-type]
    )


def _score(name: str, params: Any, arrays: ChannelArrays) -> Any:
    return get_scorer(name).score(ScoringInput({"base": arrays}), params)


def _permuted(arrays: ChannelArrays, order: np.ndarray) -> ChannelArrays:
    return replace(
        arrays,
        tf=arrays.tf[order],
        doc_len=arrays.doc_len[order],
        fields={
            name: FieldArrays(tf=fa.tf[order], doc_len=fa.doc_len[order], avgdl=fa.avgdl)
            for name, fa in arrays.fields.items()
        },
    )


@pytest.mark.parametrize(("name", "params"), SCORERS, ids=IDS)
@PROPERTY_SETTINGS
@given(arrays=channels())
def test_finite_with_shape_d(name: str, params: Any, arrays: ChannelArrays) -> None:
    result = _score(name, params, arrays)
    d = arrays.n_candidates
    assert result.scores.shape == (d,)
    assert np.all(np.isfinite(result.scores))
    for part, values in result.parts.items():
        assert values.shape == (d,), part
        assert np.all(np.isfinite(values)), part
    if arrays.n_terms == 0:
        assert np.all(result.scores == 0.0)


@pytest.mark.parametrize(("name", "params"), SCORERS, ids=IDS)
@PROPERTY_SETTINGS
@given(arrays=channels(), data=st.data())
def test_candidate_order_does_not_matter(
    name: str, params: Any, arrays: ChannelArrays, data: st.DataObject
) -> None:
    order = np.array(data.draw(st.permutations(range(arrays.n_candidates))), dtype=np.int64)
    before = _score(name, params, arrays).scores
    after = _score(name, params, _permuted(arrays, order)).scores
    np.testing.assert_allclose(after, before[order], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(("name", "params"), SCORERS, ids=IDS)
@PROPERTY_SETTINGS
@given(arrays=channels(max_candidates=4), data=st.data())
def test_monotone_in_tf(name: str, params: Any, arrays: ChannelArrays, data: st.DataObject) -> None:
    if arrays.n_candidates == 0 or arrays.n_terms == 0:
        return
    if name == "bm25_robertson":
        # Robertson's IDF is negative above df = N/2, where the score falls with tf (as written).
        arrays = replace(arrays, df=np.minimum(arrays.df, arrays.n_docs // 2))
    row = data.draw(st.integers(0, arrays.n_candidates - 1))
    col = data.draw(st.integers(0, arrays.n_terms - 1))
    extra = float(data.draw(st.integers(1, 20)))
    field = data.draw(st.sampled_from(sorted(arrays.fields)))
    grown_field = arrays.fields[field].tf.copy()
    grown_field[row, col] += extra
    tf = arrays.tf.copy()
    tf[row, col] += extra
    grown = replace(
        arrays,
        tf=tf,
        fields={**arrays.fields, field: replace(arrays.fields[field], tf=grown_field)},
    )
    before = _score(name, params, arrays).scores[row]
    after = _score(name, params, grown).scores[row]
    assert after >= before - 1e-12 * max(1.0, abs(before))
