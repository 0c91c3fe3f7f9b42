"""Timing-closure heuristic: ceiling below the vendor's guidelines, monotone, documented anchor values."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hwmodel.dse.timing import RESOURCES, TimingModel, reachable_clock_hz, slrs_spanned

utils = st.fixed_dictionaries({r: st.floats(0.0, 1.2) for r in RESOURCES})


def test_below_every_knee_on_one_die_is_the_ceiling() -> None:
    u = {"lut": 0.69, "ff": 0.49, "dsp": 0.79, "bram": 0.79, "uram": 0.79}
    assert reachable_clock_hz(450e6, u, slrs=1) == 450e6


def test_anchor_values() -> None:
    # a fully packed design: half the ceiling (FlightLLM/DFX-like 225 MHz on U280), less 5 % per extra SLR
    assert reachable_clock_hz(450e6, {"lut": 1.0}, slrs=1) == pytest.approx(225e6)
    assert reachable_clock_hz(450e6, {"lut": 1.0}, slrs=3) == pytest.approx(225e6 * 0.95**2)
    # LUT at 85 %: half way from the 70 % knee to full use
    assert reachable_clock_hz(450e6, {"lut": 0.85}, slrs=1) == pytest.approx(450e6 * 0.75)
    assert slrs_spanned({"dsp": 0.34}, 3) == 2 and slrs_spanned({}, 3) == 1


@given(utils, st.sampled_from(RESOURCES), st.floats(0.0, 0.5), st.integers(1, 4))
def test_more_utilisation_never_raises_the_clock(u: dict, r: str, extra: float, slrs: int) -> None:
    more = {**u, r: u[r] + extra}
    f = reachable_clock_hz(300e6, u, slrs)
    assert 0 < reachable_clock_hz(300e6, more, slrs) <= f <= 300e6


def test_model_constants_are_explicit() -> None:
    m = TimingModel(full_fraction=0.6, slr_derate=0.0)
    assert reachable_clock_hz(400e6, {"dsp": 1.0}, 3, m) == pytest.approx(240e6)
    with pytest.raises(ValueError, match="unknown resource"):
        reachable_clock_hz(400e6, {"luts": 0.5}, 1)
