"""The T1 break-even study (hwmodel/reasoning/breakeven.py) on test platforms."""

from __future__ import annotations

import math

import pytest

from hwmodel.reasoning.breakeven import ScaledDraft, mean_token_s, run_breakeven
from hwmodel.reasoning.costs import TimedEngine
from tests.test_reasoning import platform_for


def _build(system: str, policy: str, **_kw):  # noqa: ANN003, ANN202
    return platform_for(policy)


def test_a_scaled_draft_scales_every_time_and_keeps_power() -> None:
    base = platform_for("heteroreason").draft
    two = TimedEngine(ScaledDraft(base, 2.0))
    assert two.decode_span_s(100, 37) == pytest.approx(2 * base.decode_span_s(100, 37), rel=1e-12)
    assert two.ingest_one_s(300) == pytest.approx(2 * base.ingest_one_s(300), rel=1e-12)
    assert two.prefill_s(20, 50) == pytest.approx(2 * base.prefill_s(20, 50), rel=1e-12)
    assert mean_token_s(two) == pytest.approx(2 * mean_token_s(base), rel=1e-12)
    with pytest.raises(ValueError):
        ScaledDraft(base, 0.0)


def test_speedup_falls_as_the_draft_slows_and_the_break_even_is_bracketed() -> None:
    b = run_breakeven(datasets=("math500",), limit=12, factors=(0.5, 1, 2, 4, 8, 16, 32), designs=(), build=_build)
    speed = sorted((p for p in b.points if p.series == "speed"), key=lambda p: p.token_s)
    s = [p.speedup_over_t2 for p in speed]
    assert all(x >= y - 1e-9 for x, y in zip(s, s[1:]))  # monotone in draft speed
    assert s[0] > 1.0 > s[-1]  # a fast draft pays off, a very slow one does not
    assert math.isfinite(b.breakeven_token_s)
    lo = max(p.token_s for p in speed if p.speedup_over_t2 >= 1.0)
    hi = min(p.token_s for p in speed if p.speedup_over_t2 <= 1.0)
    assert lo <= b.breakeven_token_s <= hi
    e = [p.energy_ratio_to_t2 for p in speed]
    assert all(x <= y + 1e-9 for x, y in zip(e, e[1:]))  # a slower draft never saves more energy
