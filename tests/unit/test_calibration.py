"""The pipeline's calibration: weights from effectiveness, the measure, what is stored."""

from __future__ import annotations

from dataclasses import replace

import pytest

from esbridge.errors import ConfigurationError
from esbridge.hybrid import PipelineParams
from esbridge.hybrid.calibration import (
    CALIBRATION_VERSION,
    Calibration,
    CalibrationParams,
    mean_reciprocal_rank,
    weights_from,
)


def test_the_most_effective_strategy_weighs_one_and_the_others_by_their_ratio() -> None:
    eff = {"lexical": 0.8, "semantic": 0.4, "keyword": 0.6}
    assert weights_from(eff, 1.0) == pytest.approx({"lexical": 1.0, "semantic": 0.5, "keyword": 0.75})
    assert weights_from(eff, 2.0) == pytest.approx({"lexical": 1.0, "semantic": 0.25, "keyword": 0.5625})
    assert weights_from(eff, 0.0) == {"lexical": 1.0, "semantic": 1.0, "keyword": 1.0}
    # a strategy that never finds the answer weighs nothing; none finding anything: equal weights
    assert weights_from({"lexical": 0.5, "semantic": 0.0}, 2.0) == {"lexical": 1.0, "semantic": 0.0}
    assert weights_from({"lexical": 0.0, "semantic": 0.0}, 2.0) == {"lexical": 1.0, "semantic": 1.0}


def test_mean_reciprocal_rank_counts_the_answer_within_the_depth_only() -> None:
    answers = ["a", "b", "c"]
    rankings = [["a", "x"], ["x", "y", "b"], ["x", "y", "z", "c"]]
    assert mean_reciprocal_rank(answers, rankings, depth=10) == pytest.approx((1 + 1 / 3 + 1 / 4) / 3)
    assert mean_reciprocal_rank(answers, rankings, depth=3) == pytest.approx((1 + 1 / 3) / 3)
    assert mean_reciprocal_rank([], [], depth=3) == 0.0


@pytest.mark.parametrize("name,value", [("queries", 0), ("words", True), ("depth", 1.5), ("sharpness", -1.0),
                                        ("sharpness", float("nan")), ("refresh", "x"), ("seed", None)])
def test_bad_calibration_parameters_are_named(name: str, value: object) -> None:
    with pytest.raises(ConfigurationError, match=f"calibration parameter {name}"):
        CalibrationParams(**{name: value})  # type: ignore[arg-type]


def _cal(params: CalibrationParams | None = None) -> Calibration:
    return Calibration(effectiveness={"lexical": 0.9, "semantic": 0.3}, queries=200, documents=1000,
                       model="bge-small-en-v1.5-q", scorer="evolved", params=params or CalibrationParams(),
                       measured_at="2026-01-01T00:00:00Z", seconds=3.5)


def test_a_stored_calibration_reads_back_for_the_same_setting_only() -> None:
    cal = _cal()
    meta = cal.to_meta()
    assert meta["version"] == CALIBRATION_VERSION
    assert Calibration.from_meta(meta, CalibrationParams()) == cal
    # sharpness and refresh do not change what was measured: the stored effectiveness serves
    again = Calibration.from_meta(meta, CalibrationParams(sharpness=4.0))
    assert again is not None and again.weights == weights_from(cal.effectiveness, 4.0)
    # another sample, another version, or a torn entry: measured again
    assert Calibration.from_meta(meta, CalibrationParams(queries=50)) is None
    assert Calibration.from_meta({**meta, "version": CALIBRATION_VERSION + 1}, CalibrationParams()) is None
    assert Calibration.from_meta({k: v for k, v in meta.items() if k != "effectiveness"}, CalibrationParams()) is None


def test_strategies_are_listed_in_one_order_whatever_order_they_were_stored_in() -> None:
    """A stored mapping may come back from the engine with its keys in another order: what is
    reported (eval's results.json, --explain) must not depend on it."""
    meta = _cal().to_meta()
    meta["effectiveness"] = {"keyword": 0.5, "lexical": 0.9, "semantic": 0.3}
    again = Calibration.from_meta(meta, CalibrationParams())
    assert again is not None and list(again.effectiveness) == ["semantic", "lexical", "keyword"]
    assert list(Calibration.from_meta(again.to_meta(), CalibrationParams()).effectiveness) == list(again.effectiveness)


def test_a_calibration_is_stale_once_the_index_has_changed_by_more_than_refresh() -> None:
    cal = _cal()
    assert not cal.stale(1000) and not cal.stale(1100) and not cal.stale(900)
    assert cal.stale(1101) and cal.stale(899)
    assert _cal(replace(CalibrationParams(), refresh=0.0)).stale(1001)


def test_pipeline_parameters_take_calibration_overrides_and_name_the_bad_ones() -> None:
    p = PipelineParams().with_overrides(calibration_queries=50, calibration_sharpness=1.0, weighting="fixed")
    assert p.calibration.queries == 50 and p.calibration.sharpness == 1.0 and p.weighting == "fixed"
    with pytest.raises(ConfigurationError, match="calibration_nosuch"):
        PipelineParams().with_overrides(calibration_nosuch=1)
    with pytest.raises(ConfigurationError, match="weighting must be one of calibrated, fixed"):
        PipelineParams(weighting="learned")
