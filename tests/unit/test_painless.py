"""The Painless loader, without an engine: files, constants, index bodies, error messages."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from esbridge.errors import ConfigurationError, EngineError
from esbridge.index import build_index_body
from esbridge.index.definitions import ID_VALUES
from esbridge.painless import (
    BM25SimilarityConstants,
    BMXSimilarityConstants,
    EvolvedSimilarityConstants,
    PainlessScript,
    SimilarityKind,
    available_scripts,
    failing_scripts,
    resolve_similarities,
    script_error,
    scripted_similarity,
)
from esbridge.scoring.bm25 import lucene_norm_length
from esbridge.scoring.common import IdfVariant
from esbridge.scoring.evolved import EvolvedParams

PAINLESS_DIR = Path(__file__).resolve().parents[2] / "painless"


def test_every_similarity_has_weight_and_score_scripts() -> None:
    names = set(available_scripts())
    for kind in SimilarityKind:
        assert f"{kind.value}.weight.painless" in names
        assert f"{kind.value}.score.painless" in names


def test_readme_describes_every_script() -> None:
    readme = (PAINLESS_DIR / "README.md").read_text("utf-8")
    for name in available_scripts():
        assert name in readme, f"painless/README.md does not mention {name}"


@pytest.mark.parametrize("kind", list(SimilarityKind))
def test_file_defaults_equal_the_dataclass_defaults(kind: SimilarityKind) -> None:
    sim = scripted_similarity(kind)
    declared = {}
    for name in (f"{kind.value}.weight.painless", f"{kind.value}.score.painless"):
        declared.update(PainlessScript.load(name).constants())
    assert declared == {k: v for k, v in sim.values.items() if k in declared}
    # a default similarity's scripts are the files unchanged
    assert sim.weight_script == PainlessScript.load(f"{kind.value}.weight.painless")
    assert sim.script == PainlessScript.load(f"{kind.value}.score.painless")


def test_every_constant_is_declared_somewhere() -> None:
    for kind in SimilarityKind:
        sim = scripted_similarity(kind)
        declared = set(sim.weight_script.constants()) | set(sim.script.constants())
        assert declared == set(sim.values), kind


def test_evolved_constants_follow_evolved_params() -> None:
    params = EvolvedParams(gamma_e=0.3, alpha_len=0.4, idf=IdfVariant.LUCENE)
    c = EvolvedSimilarityConstants.from_params(params)
    assert (c.gamma_e, c.alpha_len, c.idf) == (0.3, 0.4, IdfVariant.LUCENE)
    assert EvolvedSimilarityConstants.from_params(EvolvedParams()) == EvolvedSimilarityConstants()


def test_constants_are_rewritten_as_literals_only() -> None:
    sim = scripted_similarity("evolved", EvolvedSimilarityConstants(gamma_e=1e-5, alpha_len=2.0))
    assert "double GAMMA_E = 1e-05; // esbridge:constant gamma_e" in sim.weight_script.source
    assert "double ALPHA_LEN = 2.0; // esbridge:constant alpha_len" in sim.script.source
    assert sim.weight_script.constants()["gamma_e"] == 1e-5
    # nothing but the declarations changed
    base = PainlessScript.load("evolved.weight.painless").source.splitlines()
    changed = [a for a, b in zip(base, sim.weight_script.source.splitlines()) if a != b]
    assert changed == ["double GAMMA_E = 1.24; // esbridge:constant gamma_e"]


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan, "0.9; return 0", None])
def test_constants_must_be_finite_numbers(value: object) -> None:
    script = PainlessScript.load("bm25_pyserini.score.painless")
    with pytest.raises(ConfigurationError, match="'k1'"):
        script.with_constants({"k1": value})  # type: ignore[dict-item]


def test_unknown_constant_lists_the_declared_ones() -> None:
    script = PainlessScript.load("bm25_pyserini.score.painless")
    with pytest.raises(ConfigurationError, match=r"no constants \['k2'\].*\['b', 'k1'\]"):
        script.with_constants({"k2": 1.0})


@pytest.mark.parametrize("make", [
    lambda: BM25SimilarityConstants(b=1.5),
    lambda: BM25SimilarityConstants(k1=-1.0),
    lambda: BM25SimilarityConstants(k1_plus_one=1),  # type: ignore[arg-type]
    lambda: EvolvedSimilarityConstants(gamma=0.0),
    lambda: EvolvedSimilarityConstants(alpha_len=math.nan),
    lambda: EvolvedSimilarityConstants(idf="bm25"),  # type: ignore[arg-type]
    lambda: BMXSimilarityConstants(alpha=-0.5),
    lambda: BMXSimilarityConstants(mean_entropy=math.inf),
])
def test_bad_constants_name_the_parameter(make: object) -> None:
    with pytest.raises(ConfigurationError, match=r"Constants\.\w+ must"):
        make()  # type: ignore[operator]


def test_unknown_similarity_lists_the_valid_ones() -> None:
    with pytest.raises(ConfigurationError, match="bm25_pyserini.*evolved.*bmx"):
        scripted_similarity("bm25")
    with pytest.raises(ConfigurationError, match="takes EvolvedSimilarityConstants"):
        scripted_similarity("evolved", BM25SimilarityConstants())
    with pytest.raises(ConfigurationError, match="unique"):
        resolve_similarities(["bmx", "bmx"])
    with pytest.raises(ConfigurationError, match="similarity name"):
        scripted_similarity("bmx", name="BMX-2")


def test_unknown_script_file_lists_the_shipped_ones() -> None:
    with pytest.raises(ConfigurationError, match="rescore_factor.painless"):
        PainlessScript.load("nope.painless")


def test_index_body_without_similarity_is_unchanged() -> None:
    body = build_index_body()
    assert "similarity" not in body["settings"]
    assert "similarities" not in body["mappings"]["_meta"]["esbridge"]
    props = body["mappings"]["properties"]
    assert set(props["esb_all"]["fields"]) == {"prefix", "bigram", "micro", "length"}
    for name in ("title", "text"):  # the other channels of a text field only when asked for
        assert set(props[name]["fields"]) == {"length"}


def test_index_body_with_similarities() -> None:
    body = build_index_body(bm25=(1.2, 0.75), similarity=["evolved", scripted_similarity(
        "bmx", BMXSimilarityConstants(alpha=1.0), name="bmx_a1")])
    sims = body["settings"]["similarity"]
    assert set(sims) == {"default", "esb_evolved", "esb_bmx_a1"}
    assert sims["esb_evolved"]["type"] == "scripted"
    assert sims["esb_evolved"]["script"]["source"] == PainlessScript.load("evolved.score.painless").source
    assert "double ALPHA = 1.0;" in sims["esb_bmx_a1"]["script"]["source"]
    for name, spec in body["mappings"]["properties"].items():
        if name == ID_VALUES:  # the ids' doc values
            continue
        assert spec["fields"]["base_evolved"] == {"type": "text", "analyzer": "esb_base",
                                                  "similarity": "esb_evolved"}, name
        assert spec["fields"]["base_bmx_a1"]["similarity"] == "esb_bmx_a1"
        assert "base" not in spec["fields"] and spec["analyzer"] == "esb_base" and spec["term_vector"] == "yes"
    meta = body["mappings"]["_meta"]["esbridge"]["similarities"]
    assert meta["evolved"]["subfield"] == "base_evolved"
    assert meta["bmx_a1"]["constants"] == {"alpha": 1.0, "mean_entropy": 1.0}


def test_length_field_counts_tokens_not_positions() -> None:
    body = build_index_body()
    for name, spec in body["mappings"]["properties"].items():
        if name != ID_VALUES:
            assert spec["fields"]["length"]["enable_position_increments"] is False


def _painless_quantised(length: int) -> int:
    """The algorithm of ``quantised`` in rescore_evolved_evidence.painless, step for step."""
    if length < 24:
        return length
    x = length - 24
    shift = 0
    while (x >> shift) >= 16:
        shift += 1
    return 24 + ((x >> shift) << shift)


def test_painless_quantisation_is_lucenes() -> None:
    source = PainlessScript.load("rescore_evolved_evidence.painless").source
    assert "while ((x >> shift) >= 16)" in source and "return 24 + ((x >> shift) << shift);" in source
    lengths = np.concatenate([np.arange(0, 20000), np.array([2**20 + 12345, 2**31 - 1])])
    ours = np.array([_painless_quantised(int(n)) for n in lengths], dtype=np.float64)
    np.testing.assert_array_equal(ours, lucene_norm_length(lengths))


#: An Elasticsearch 7.10 answer to PUT _scripts with a compile error (recorded).
RECORDED_ERROR = {
    "error": {
        "root_cause": [{"type": "script_exception", "reason": "compile error",
                        "script_stack": ["return x +;", "          ^---- HERE"],
                        "script": "double x = _score;\nreturn x +;\n", "lang": "painless"}],
        "type": "script_exception", "reason": "compile error",
        "script_stack": ["return x +;", "          ^---- HERE"],
        "script": "double x = _score;\nreturn x +;\n", "lang": "painless",
        "caused_by": {"type": "illegal_argument_exception", "reason": "invalid sequence of tokens near [';']."},
    },
    "status": 400,
}


def test_script_error_names_the_file_and_keeps_the_stack() -> None:
    from esbridge.engine.calls import engine_error

    err = engine_error(400, RECORDED_ERROR)
    bad = PainlessScript("broken.painless", "double x = _score;\nreturn x +;\n")
    good = PainlessScript.load("rescore_factor.painless")
    assert failing_scripts(err, [good, bad]) == [bad]
    wrapped = script_error(err, [good, bad], action="storing")
    assert isinstance(wrapped, EngineError)
    assert "painless/broken.painless" in str(wrapped)
    assert "rescore_factor" not in str(wrapped)
    assert re.search(r"script_stack:\n  return x \+;\n  +\^---- HERE", str(wrapped))
    assert "invalid sequence of tokens" in str(wrapped)
    assert wrapped.script_stack == ["return x +;", "          ^---- HERE"]
