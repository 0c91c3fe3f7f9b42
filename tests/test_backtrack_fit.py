"""The backtracking parameter is fitted to the published accuracy gains (hwmodel/workload/backtrack_fit.py)."""

from __future__ import annotations

import pytest

from hwmodel.workload.acceptance import TARGET_HAZARD_RATIO
from hwmodel.workload.backtrack_fit import (
    PUBLISHED_GAIN_OPT_PTS,
    PUBLISHED_GAIN_PTS,
    SENSITIVITY_RATIO,
    expected_gain,
    fit_ratio,
    mean_gain_pts,
)


@pytest.mark.parametrize("target", sorted(PUBLISHED_GAIN_PTS))
def test_the_stored_ratios_reproduce_their_fitting_points(target: str) -> None:
    # the shipped acceptance model is the fit: its expected gain is the published one (to within one step)
    assert mean_gain_pts(target, TARGET_HAZARD_RATIO[target]) == pytest.approx(PUBLISHED_GAIN_PTS[target], abs=0.03)


def test_the_fit_converges_and_is_deterministic() -> None:
    a = fit_ratio("qwen2.5-math-7b", 3.0, datasets=("math500", "gsm8k"), limit=150)
    b = fit_ratio("qwen2.5-math-7b", 3.0, datasets=("math500", "gsm8k"), limit=150)
    assert a == b
    assert a.gain_pts == pytest.approx(3.0, abs=0.3)  # 150 problems: steps of ~0.2 points
    assert 0.0 < a.ratio < 2.0


def test_gain_is_zero_without_target_errors_and_grows_with_them() -> None:
    gains = [expected_gain("math500", "qwen2.5-math-1.5b", r, limit=200).gain_pts for r in (0.0, 0.1, 0.4, 1.0)]
    assert gains[0] == pytest.approx(0.0, abs=1e-9)
    assert gains == sorted(gains) and gains[-1] > gains[1] > 0


def test_an_unreachable_gain_is_refused() -> None:
    with pytest.raises(ValueError, match="outside"):
        fit_ratio("qwen2.5-math-7b", 60.0, datasets=("gsm8k",), limit=50, hi=0.5)


@pytest.mark.parametrize("target", sorted(PUBLISHED_GAIN_OPT_PTS))
def test_the_stored_sensitivity_ratios_reproduce_the_complete_systems_gains(target: str) -> None:
    assert mean_gain_pts(target, SENSITIVITY_RATIO[target]) == pytest.approx(PUBLISHED_GAIN_OPT_PTS[target], abs=0.03)
