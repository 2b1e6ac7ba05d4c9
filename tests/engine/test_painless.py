"""Painless inside the engine: scripted similarities and rescoring equal esbridge's numpy formulas.

One index per engine (2 shards, searched with ``dfs_query_then_fetch`` so that the engine
uses index-wide statistics) holds the shipped SciFact sample with a sub-field per scripted
similarity.  For a few of its judged claims, every hit's engine score must equal the same
per-term formula computed from fetched term vectors and index-wide statistics, with
Lucene's quantised lengths (``lucene_norm_length``) where the similarity reads
``doc.length``; rescoring must equal the evolved channel relevance with exact lengths.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from esbridge.engine.client import Engine
from esbridge.errors import ConfigurationError, EngineError, UnsupportedEngineError
from esbridge.features import analyze_query, build_input, fetch_raw
from esbridge.index import IndexLayout, create_index
from esbridge.ingest import ingest
from esbridge.painless import (
    BM25SimilarityConstants,
    BMXSimilarityConstants,
    EvolvedSimilarityConstants,
    PainlessScript,
    put_stored_script,
    scripted_similarity,
)
from esbridge.rescore_script import EvolvedRescorer, RescoreMode, engine_support
from esbridge.scoring import get_scorer
from esbridge.scoring.arrays import ChannelArrays, FloatArray
from esbridge.scoring.bm25 import clipped_df, length_ratio, lucene_norm_length
from esbridge.scoring.bmx import bmx_term_part, default_alpha
from esbridge.scoring.common import IdfVariant
from esbridge.scoring.evolved import EvolvedParams, channel_relevance, evidence, length_damper, term_weight
from esbridge.scoring.idf import lucene_idf
from tests.data import documents, judged_queries

pytestmark = pytest.mark.painless

REL_TOL = 1e-5
N_DOCS = 1000
N_QUERIES = 8
HITS = 25
SEARCH = {"search_type": "dfs_query_then_fetch"}
LAYOUT = IndexLayout()
FIELD = LAYOUT.combined

#: Similarities on the test index: the defaults, plus one of each kind with other constants
#: (so that rewriting the constants is checked too).
EVOLVED_ALT = EvolvedSimilarityConstants(alpha_qtf=1.3, gamma_e=0.3, gamma=2.0, beta_tf=0.5,
                                         alpha_len=0.4, idf=IdfVariant.LUCENE)
SIMILARITIES = [
    scripted_similarity("bm25_pyserini"),
    scripted_similarity("bm25_pyserini", BM25SimilarityConstants(k1=1.2, b=0.75, k1_plus_one=True),
                        name="bm25_lucene8"),
    scripted_similarity("evolved"),
    scripted_similarity("evolved", EVOLVED_ALT, name="evolved_alt"),
    scripted_similarity("bmx"),
    scripted_similarity("bmx", BMXSimilarityConstants(alpha=1.1, mean_entropy=0.6), name="bmx_fixed"),
]

WORST: dict[str, float] = {}


@pytest.fixture(scope="module")
def sim_index(engine: Engine) -> Iterator[str]:
    """The SciFact sample's first documents in a 2-shard index with every similarity of SIMILARITIES."""
    name = f"esb-test-painless-{uuid.uuid4().hex[:8]}"
    create_index(engine, name, LAYOUT, shards=2, similarity=SIMILARITIES)
    try:
        ingest(engine, name, documents(N_DOCS), create=False, progress=False, strict=True)
        yield name
    finally:
        engine.delete_index(name)


@pytest.fixture(scope="module")
def queries() -> list[str]:
    """A few judged claims of the sample, and one repeating its terms (qtf > 1)."""
    repeated = "protein folding: protein misfolding of the protein in cells and cell death"
    return [q["text"] for q in judged_queries(limit=N_QUERIES)] + [repeated]


def _hits_and_arrays(
    engine: Engine, index: str, text: str, body: dict[str, Any]
) -> tuple[list[str], FloatArray, ChannelArrays]:
    """The engine's hits for ``body`` and the base channel's arrays for them (term vectors)."""
    hits = engine.search(index, body, params=SEARCH)["hits"]["hits"]
    ids = [h["_id"] for h in hits]
    query = analyze_query(engine, index, LAYOUT, text, ["base"])
    fetched = fetch_raw(engine, index, LAYOUT, query, ids, fields=[FIELD])
    arrays = build_input(fetched, LAYOUT, query, fields=[FIELD]).channel("base")
    return ids, np.array([h["_score"] for h in hits], dtype=np.float64), arrays


def _compare(label: str, engine: Engine, ids: list[str], got: FloatArray, expected: FloatArray) -> float:
    assert len(ids) > 0, f"{label}: no hits"
    rel = np.abs(got - expected) / np.maximum(np.abs(expected), 1e-30)
    worst = float(rel.max())
    key = f"{engine.info.label} {label}"
    WORST[key] = max(WORST.get(key, 0.0), worst)
    i = int(rel.argmax())
    assert worst <= REL_TOL, f"{key}: hit {ids[i]} engine {got[i]!r} esbridge {expected[i]!r}"
    return worst


# --- the per-term formulas, from term vectors (Lucene's quantised lengths) ---------------


def _pyserini(constants: BM25SimilarityConstants) -> Callable[[ChannelArrays], FloatArray]:
    def run(arrays: ChannelArrays) -> FloatArray:
        from esbridge.scoring.arrays import ScoringInput

        bm25 = get_scorer("bm25")
        params = bm25.make_params(k1=constants.k1, b=constants.b, lucene_norms=True,
                                  k1_plus_one=constants.k1_plus_one)
        scores: FloatArray = bm25.score(ScoringInput(channels={"base": arrays}), params).scores
        return scores
    return run


def _evolved(c: EvolvedSimilarityConstants) -> Callable[[ChannelArrays], FloatArray]:
    def run(arrays: ChannelArrays) -> FloatArray:
        idf = c.idf.compute(arrays.df, arrays.n_docs)
        w = term_weight(idf, arrays.qtf, alpha_qtf=c.alpha_qtf, gamma_e=c.gamma_e, gamma=c.gamma,
                        beta_tf=c.beta_tf)
        damper = length_damper(lucene_norm_length(arrays.doc_len), arrays.avgdl, c.alpha_len)
        out: FloatArray = evidence(arrays.tf, w) / damper
        return out
    return run


def _bmx(c: BMXSimilarityConstants, mean_entropy: float) -> Callable[[ChannelArrays], FloatArray]:
    def run(arrays: ChannelArrays) -> FloatArray:
        alpha = default_alpha(arrays.avgdl) if c.alpha is None else c.alpha
        ratio = length_ratio(lucene_norm_length(arrays.doc_len), arrays.avgdl)
        idf = lucene_idf(clipped_df(arrays), arrays.n_docs)
        out: FloatArray = bmx_term_part(arrays.tf, ratio, idf, alpha, mean_entropy) @ arrays.qtf
        return out
    return run


def _reference(name: str) -> Callable[[ChannelArrays], FloatArray]:
    """The numpy formula of similarity ``name``."""
    sim = next(s for s in SIMILARITIES if s.name == name)
    c = sim.constants
    if isinstance(c, BM25SimilarityConstants):
        return _pyserini(c)
    if isinstance(c, EvolvedSimilarityConstants):
        return _evolved(c)
    return _bmx(c, c.mean_entropy)


@pytest.mark.parametrize("name", [s.name for s in SIMILARITIES])
def test_scripted_similarity_equals_numpy(
    engine: Engine, sim_index: str, queries: list[str], name: str
) -> None:
    formula = _reference(name)
    subfield = f"{FIELD}.base_{name}"
    checked = 0
    for text in queries:
        body = {"size": HITS, "query": {"match": {subfield: text}}}
        ids, got, arrays = _hits_and_arrays(engine, sim_index, text, body)
        _compare(f"similarity {name}", engine, ids, got, formula(arrays))
        checked += len(ids)
    assert checked >= N_QUERIES * 10
    print(f"{engine.info.label} similarity {name}: {checked} hits, max rel. error "
          f"{WORST[f'{engine.info.label} similarity {name}']:.2e}")


def test_pyserini_similarity_equals_engine_bm25(engine: Engine, sim_index: str, queries: list[str]) -> None:
    """The ``bm25_lucene8`` similarity (k1 = 1.2, b = 0.75) ranks exactly as the engine's
    own BM25 on the field does, with equal scores where the engine multiplies by k1 + 1."""
    text = queries[0]
    own = engine.search(sim_index, {"size": HITS, "query": {"match": {FIELD: text}}},
                        params=SEARCH)
    scripted = engine.search(
        sim_index, {"size": HITS, "query": {"match": {f"{FIELD}.base_bm25_lucene8": text}}}, params=SEARCH
    )
    a = {h["_id"]: h["_score"] for h in own["hits"]["hits"]}
    b = {h["_id"]: h["_score"] for h in scripted["hits"]["hits"]}
    common = sorted(set(a) & set(b))
    assert len(common) >= HITS // 2
    ratio = np.array([b[i] / a[i] for i in common])
    factor = 1.0 if engine.info.bm25_k1_plus_one else 2.2
    np.testing.assert_allclose(ratio, factor, rtol=REL_TOL)


# --- rescoring ---------------------------------------------------------------------------


def _rescore_check(engine: Engine, index: str, rescorer: EvolvedRescorer, text: str,
                   params: EvolvedParams, label: str) -> float:
    body = {
        "size": HITS,
        "query": {"match": {FIELD: text}},
        "rescore": rescorer.rescore(text),
    }
    ids, got, arrays = _hits_and_arrays(engine, index, text, body)
    expected, _ = channel_relevance(arrays, params)  # exact lengths
    return _compare(label, engine, ids, got, expected)


def test_rescore_term_freq(engine: Engine, sim_index: str, queries: list[str]) -> None:
    """OpenSearch: the whole evolved R (all five multipliers) from termFreq in one script."""
    if not engine_support(engine.info).term_freq:
        with pytest.raises(UnsupportedEngineError, match="termFreq"):
            EvolvedRescorer(engine, sim_index, mode=RescoreMode.TERM_FREQ)
        return
    params = EvolvedParams()
    rescorer = EvolvedRescorer(engine, sim_index, params=params, mode="term_freq", window=60)
    assert rescorer.mode is RescoreMode.TERM_FREQ
    with pytest.warns(DeprecationWarning, match="use window="):  # the former name: the same clauses
        old = EvolvedRescorer(engine, sim_index, params=params, mode="term_freq", window_size=60)
    assert old.window == 60 and old.rescore(queries[0]) == rescorer.rescore(queries[0])
    worst = max(_rescore_check(engine, sim_index, rescorer, text, params, "rescore term_freq")
                for text in queries)
    print(f"{engine.info.label} rescore term_freq: max rel. error {worst:.2e}")


def test_rescore_similarity_chain(engine: Engine, sim_index: str, queries: list[str]) -> None:
    """Both engines: R without B_spec from the evolved similarity and chained rescorers."""
    with pytest.raises(ConfigurationError, match="beta_spec"):
        EvolvedRescorer(engine, sim_index, mode="similarity_chain", similarity="evolved")  # beta_spec 0.1
    params = EvolvedParams(beta_spec=0.0)
    rescorer = EvolvedRescorer(engine, sim_index, params=params, mode="similarity_chain",
                               window=60, similarity="evolved")
    worst = max(_rescore_check(engine, sim_index, rescorer, text, params, "rescore similarity_chain")
                for text in queries)
    print(f"{engine.info.label} rescore similarity_chain: max rel. error {worst:.2e}")


def test_chain_refuses_other_constants(engine: Engine, sim_index: str) -> None:
    with pytest.raises(ConfigurationError, match="alpha_len"):
        EvolvedRescorer(engine, sim_index, params=EvolvedParams(beta_spec=0.0, alpha_len=0.3),
                        mode="similarity_chain", similarity="evolved")


def test_query_text_is_only_params(engine: Engine, sim_index: str) -> None:
    """Quotes, backslashes and Painless syntax in the query change nothing but the terms."""
    text = 'protein "folding\\" + 1; return 0; } // \' \\\\ params.x ${x} \\u0022 cells'
    params = EvolvedParams(beta_spec=0.0)
    rescorer = EvolvedRescorer(engine, sim_index, params=params, similarity="evolved")
    ids_before = dict(rescorer.script_ids)
    _rescore_check(engine, sim_index, rescorer, text, params, "rescore hostile text")
    clauses = rescorer.rescore(text)
    assert all("source" not in c["query"]["rescore_query"]["script_score"]["script"] for c in clauses)
    for name, script_id in ids_before.items():
        stored = engine.request("GET", f"/_scripts/{script_id}")["script"]["source"]
        assert stored == PainlessScript.load(name).source
    # and the similarities, which get the text only through the analyzer
    body = {"size": 5, "query": {"match": {f"{FIELD}.base_evolved": text}}}
    assert engine.search(sim_index, body, params=SEARCH)["hits"]["total"]["value"] > 0


# --- errors ------------------------------------------------------------------------------


def test_similarity_compile_error_names_the_file(engine: Engine, index_name: str, tmp_path: Path) -> None:
    broken = tmp_path / "broken.weight.painless"
    broken.write_text("double n = field.docCount;\nreturn query.boost * n +;\n")
    sim = scripted_similarity("evolved", weight_script=PainlessScript.from_file(broken), name="broken")
    with pytest.raises(EngineError) as caught:
        create_index(engine, index_name, LAYOUT, similarity=[sim])
    err = caught.value
    assert err.script_stack, err
    assert f"(in {broken})" in str(err)
    assert "HERE" in str(err)
    assert not engine.index_exists(index_name)


def test_stored_script_compile_error_names_the_file(engine: Engine) -> None:
    bad = PainlessScript(name="broken_rescore.painless", source="double x = _score;\nreturn x +;\n")
    with pytest.raises(EngineError) as caught:
        put_stored_script(engine, bad)
    err = caught.value
    assert err.script_stack, err
    assert "painless/broken_rescore.painless" in str(err)
    assert "compile error" in str(err)
