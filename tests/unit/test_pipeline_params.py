"""The hybrid pipeline's parameters: validation, overrides and the CLI's parsing of them."""

from __future__ import annotations

import pytest

from esbridge.cli.options import pipeline_params
from esbridge.errors import ConfigurationError
from esbridge.hybrid import Fusion, KeywordParams, PipelineParams


def test_shipped_defaults() -> None:
    p = PipelineParams()
    assert p.fusion is Fusion.ZSCORE and p.scorer == "evolved"
    assert p.weights == {"semantic": 3.0, "lexical": 1.0, "keyword": 0.5}
    assert p.weighting == "calibrated" and p.calibration.sharpness == 2.0
    assert (p.semantic_feedback, p.semantic_beta, p.semantic_feedback_weighting) == (3, 1.0, "score")
    assert p.keyword_source == "fusion"
    assert p.keyword == KeywordParams(fb_docs=10, fb_terms=30, min_docs=2, lam=0.3, depth=1000)


def test_overrides_and_zero_weights() -> None:
    p = PipelineParams().with_overrides(w_keyword=0, fusion="rrf", keyword_fb_terms=5)
    assert p.weights == {"semantic": 3.0, "lexical": 1.0}
    assert p.fusion is Fusion.RRF and p.keyword.fb_terms == 5
    with pytest.raises(ConfigurationError, match="unknown pipeline parameter"):
        PipelineParams().with_overrides(w_semnatic=1)


@pytest.mark.parametrize("kwargs, match", [
    ({"scorer": "nope"}, "nope"),
    ({"window": 0}, "window"),
    ({"semantic_depth": True}, "semantic_depth"),
    ({"semantic_feedback": -1}, "semantic_feedback"),
    ({"w_semantic": -1.0}, "w_semantic"),
    ({"w_lexical": float("nan")}, "w_lexical"),
    ({"w_semantic": 0, "w_lexical": 0, "w_keyword": 0}, "at least one"),
    ({"fusion": "product"}, "unknown fusion"),
    ({"semantic_feedback_window": "middle"}, "semantic_feedback_window must be one of first, best"),
])
def test_bad_parameters_name_themselves(kwargs: dict, match: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(ConfigurationError, match=match):
        PipelineParams(**kwargs)


def test_cli_parsing() -> None:
    p = pipeline_params(["w_semantic=1.5", "fusion=minmax", "scorer=bmx", "keyword_lam=0.5"])
    assert (p.w_semantic, p.fusion, p.scorer, p.keyword.lam) == (1.5, Fusion.MINMAX, "bmx", 0.5)
    with pytest.raises(ConfigurationError, match="NAME=VALUE"):
        pipeline_params(["w_semantic"])
    with pytest.raises(ConfigurationError, match="keyword parameter lam"):
        pipeline_params(["keyword_lam=2"])


def test_the_scoring_document_states_the_shipped_defaults() -> None:
    """docs/scoring.md gives the pipeline's defaults as the code has them (weights, depths, feedback, keyword
    strategy, fusion)."""
    import re
    from pathlib import Path

    from esbridge.hybrid.pipeline import PipelineParams

    text = (Path(__file__).resolve().parents[2] / "docs" / "scoring.md").read_text(encoding="utf-8")
    shipped = PipelineParams()
    weights = re.search(r"Default weights: semantic (\S+), lexical (\S+), keyword (\S+?);", text)
    assert weights is not None, "docs/scoring.md no longer states the default fusion weights"
    assert tuple(float(w) for w in weights.groups()) == (shipped.w_semantic, shipped.w_lexical, shipped.w_keyword)
    assert f"semantic_depth = {shipped.semantic_depth}" in text
    assert f"semantic_feedback = {shipped.semantic_feedback}" in text
    assert f"semantic_beta = {shipped.semantic_beta}" in text
    kw = shipped.keyword
    for stated in (f"window = {shipped.window}", f"`fb_terms = {kw.fb_terms}`", f"`fb_docs = {kw.fb_docs}`",
                   f"`min_docs = {kw.min_docs}`", f"`λ = lam = {kw.lam}`", f"top `depth = {kw.depth}`",
                   f"`keyword_source = \"{shipped.keyword_source}\"`, the default",
                   f"`extractor = \"{kw.extractor}\"`, the default", f"`{shipped.scorer}` by default",
                   f"(`result_depth = {shipped.result_depth}`",
                   f"semantic_feedback_weighting = \"{shipped.semantic_feedback_weighting}\", the default"):
        assert stated in text, f"docs/scoring.md no longer states {stated}"
    assert f"zscore ({'default' if shipped.fusion is Fusion.ZSCORE else ''}):" in text


def test_the_seed004_preset_is_the_source_as_written() -> None:
    p = PipelineParams.seed004()
    # lexical: Okapi BM25 with rank_bm25's defaults (k1 1.5, b 0.75), the engine's top 500
    assert (p.scorer, p.scorer_params, p.window) == ("bm25_robertson", {"k1": 1.5, "b": 0.75}, 500)
    assert p.make_scorer_params().k1 == 1.5 and p.make_scorer_params().b == 0.75
    # semantic: top 500, one pass
    assert (p.semantic_depth, p.semantic_feedback) == (500, 0)
    # keyword: the narrative's TopicRank keyphrases through the same BM25, top 500
    assert (p.keyword.extractor, p.keyword.keyphrases, p.keyword.depth) == ("topicrank", 10, 500)
    # aggregator: raw scores summed, every strategy counted once, the top 500 returned
    assert p.fusion is Fusion.SUM and p.weights == {"semantic": 1.0, "lexical": 1.0, "keyword": 1.0}
    assert p.result_depth == 500
    assert PipelineParams.preset("seed004") == p and PipelineParams.preset("default") == PipelineParams()
    with pytest.raises(ConfigurationError, match="unknown pipeline 'seed5'; choose one of default, seed004"):
        PipelineParams.preset("seed5")


def test_new_parameters_name_themselves() -> None:
    with pytest.raises(ConfigurationError, match="scorer_params: scorer 'bm25_robertson' has no parameter"):
        PipelineParams(scorer="bm25_robertson", scorer_params={"k": 1.5})
    with pytest.raises(ConfigurationError, match="scorer_params"):
        PipelineParams(scorer="bm25_robertson", scorer_params={"b": 2.0})
    with pytest.raises(ConfigurationError, match="result_depth"):
        PipelineParams(result_depth=0)
    with pytest.raises(ConfigurationError, match="keyword parameter extractor must be one of idf, topicrank"):
        KeywordParams(extractor="rake")
    with pytest.raises(ConfigurationError, match="keyword parameter keyphrases"):
        KeywordParams(keyphrases=0)
    assert PipelineParams().scorer_params == {} and PipelineParams().result_depth is None
    assert PipelineParams().keyword.extractor == "idf"


def test_cli_presets() -> None:
    from esbridge.cli.options import PIPELINES
    from esbridge.hybrid.pipeline import PRESETS

    assert PIPELINES == PRESETS
    p = pipeline_params(["window=200", "scorer_params={\"k1\": 1.2}"], "seed004")
    assert (p.window, p.scorer_params, p.keyword.extractor) == (200, {"k1": 1.2}, "topicrank")


def test_overrides_reach_keyword_source_and_name_unknown_keyword_parameters() -> None:
    # keyword_source is the pipeline's own parameter, not a keyword parameter named "source"
    p = PipelineParams().with_overrides(keyword_source="lexical", keyword_depth=50)
    assert (p.keyword_source, p.keyword.depth) == ("lexical", 50)
    with pytest.raises(ConfigurationError, match="unknown pipeline parameter.*keyword_dpeth"):
        PipelineParams().with_overrides(keyword_dpeth=5)


def test_pipeline_parameters_are_hashable_and_compare_by_value() -> None:
    """A server keys its searchers by configuration: parameters with scorer parameters hash."""
    from esbridge.hybrid.pipeline import PipelineParams

    a, b = PipelineParams.seed004(), PipelineParams.seed004()
    assert a == b and hash(a) == hash(b) and len({a, b, PipelineParams()}) == 2
    assert a != a.with_overrides(scorer_params={"k1": 1.2, "b": 0.75})


def test_nested_parameters_given_as_objects_are_read_or_refused_by_name() -> None:
    """``keyword`` and ``calibration`` given as JSON objects (a configuration file, an overrides call)
    become their parameter classes; an unknown key or another type is an error naming it."""
    from esbridge.hybrid.calibration import CalibrationParams
    from esbridge.hybrid.keyword import KeywordParams

    p = PipelineParams().with_overrides(calibration={"queries": 20}, keyword={"fb_docs": 5})
    assert p.calibration == CalibrationParams(queries=20) and p.keyword == KeywordParams(fb_docs=5)
    assert hash(p) == hash(PipelineParams(calibration=CalibrationParams(queries=20), keyword=KeywordParams(fb_docs=5)))
    with pytest.raises(ConfigurationError, match=r"unknown pipeline parameter\(s\) calibration\.querys; valid: "):
        PipelineParams().with_overrides(calibration={"querys": 20})
    with pytest.raises(ConfigurationError, match="pipeline parameter keyword must be KeywordParams or an object"):
        PipelineParams(keyword=3)  # type: ignore[arg-type]


def test_the_ensemble_names_other_models_once() -> None:
    p = PipelineParams(ensemble=["e5-small-v2-q", "all-minilm-l6-v2-q"], w_document=1.0)  # type: ignore[arg-type]
    assert p.ensemble == ("e5-small-v2-q", "all-minilm-l6-v2-q")
    assert p.document_lists == ("document", "document e5-small-v2-q", "document all-minilm-l6-v2-q")
    assert PipelineParams(ensemble=("e5-small-v2-q",)).document_lists == ("document e5-small-v2-q",)
    assert PipelineParams().document_lists == ()
    with pytest.raises(ConfigurationError, match="unknown model|no-such-model"):
        PipelineParams(ensemble=("no-such-model",))
    with pytest.raises(ConfigurationError, match="each model once"):
        PipelineParams(ensemble=(PipelineParams().model,))
    with pytest.raises(ConfigurationError, match="each model once"):
        PipelineParams(ensemble=("e5-small-v2-q", "e5-small-v2-q"))
    with pytest.raises(ConfigurationError, match="list of model names"):
        PipelineParams(ensemble="e5-small-v2-q")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="w_ensemble"):
        PipelineParams(w_ensemble=-1.0)


def test_the_whole_document_lists_feedback_parameters_are_checked() -> None:
    assert PipelineParams().document_feedback == 0  # one pass unless asked
    with pytest.raises(ConfigurationError, match="document_feedback must be an integer >= 0, got -1"):
        PipelineParams(document_feedback=-1)
    with pytest.raises(ConfigurationError, match="document_feedback must be an integer >= 0, got True"):
        PipelineParams(document_feedback=True)
    with pytest.raises(ConfigurationError, match="document_beta must be a finite number >= 0"):
        PipelineParams(document_beta=float("nan"))
    with pytest.raises(ConfigurationError, match="document_feedback_share must be a number from 0 to 1, got 1.5"):
        PipelineParams(document_feedback_share=1.5)
    assert pipeline_params(["document_feedback=3", "document_feedback_share=1"], "default").document_feedback == 3


def test_the_ensemble_preset() -> None:
    p = PipelineParams.preset("ensemble")
    assert p == PipelineParams(w_document=1.0, ensemble=("e5-small-v2-q", "all-minilm-l6-v2-q"), document_feedback=3)
    assert (p.document_beta, p.document_feedback_share) == (0.25, 1.0)
    assert p.document_lists == ("document", "document e5-small-v2-q", "document all-minilm-l6-v2-q")
    assert (p.w_ensemble, p.ensemble_sharpness) == (1.0, 4.0)
    # everything else is the shipped pipeline's
    assert p.with_overrides(w_document=0.0, ensemble=(), document_feedback=0) == PipelineParams()
    assert pipeline_params(["w_ensemble=0.5"], "ensemble").w_ensemble == 0.5
