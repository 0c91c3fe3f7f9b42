"""Device-model tables of the serving simulator: decode prefix sums, the bisected step table, prefill plans."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hwmodel.errors import HwmodelError
from hwmodel.serving.devices import STEP_GRID_TOKENS, DecodeTable


def step_function(block: int, base: float, per_block: float, jumps: dict[int, float]) -> tuple[object, list[int]]:
    """A non-decreasing step function of ctx (KV read in blocks), counting its calls."""
    calls: list[int] = []

    def f(ctx: int) -> float:
        calls.append(ctx)
        return base + per_block * ((ctx + block - 1) // block) + sum(v for k, v in jumps.items() if ctx > k)

    return f, calls


@settings(max_examples=60)
@given(
    block=st.sampled_from([1, 7, 32, 64, 100]),
    per_block=st.floats(0, 1e-5),
    jumps=st.dictionaries(st.integers(0, 5000), st.floats(0, 1e-3), max_size=3),
    ranges=st.lists(st.tuples(st.integers(0, 4000), st.integers(1, 600)), min_size=1, max_size=6),
)
def test_step_table_equals_exact_for_monotone_steps(
    block: int, per_block: float, jumps: dict[int, float], ranges: list[tuple[int, int]]
) -> None:
    f, _ = step_function(block, 0.02, per_block, jumps)
    exact, steps = DecodeTable(f, "exact"), DecodeTable(f, "steps")  # type: ignore[arg-type]
    for ctx0, n in ranges:
        assert steps.steps_s(ctx0, n) == pytest.approx(exact.steps_s(ctx0, n), rel=1e-12)
        assert steps.step_s(ctx0) == exact.step_s(ctx0)


def test_step_table_saves_calls_on_block_steps() -> None:
    f, calls = step_function(32, 0.02, 3e-5, {2048: 7e-4})
    t = DecodeTable(f, "steps")  # type: ignore[arg-type]
    t.steps_s(1536, 511)
    assert len(set(calls)) == len(calls)  # never asks twice
    assert len(calls) < 511 / 3
    f2, calls2 = step_function(32, 0.02, 3e-5, {2048: 7e-4})
    DecodeTable(f2, "exact").steps_s(1536, 511)  # type: ignore[arg-type]
    assert len(calls2) == 511


def test_step_table_asks_just_inside_a_grid_interval_first() -> None:
    """KV blocks of the grid's spacing step where a block opens and where it fills (the instruction-driven
    FPGA's decode steps at ctx 32k and 32k + 1): two calls per such interval beyond its ends, not a bisection."""
    g = STEP_GRID_TOKENS

    def f(ctx: int) -> float:
        return 0.02 + 3e-5 * ((ctx + g - 1) // g) + 1e-5 * (ctx // g)

    t = DecodeTable(f, "steps")  # type: ignore[arg-type]
    ref = DecodeTable(f, "exact")  # type: ignore[arg-type]
    assert t.steps_s(0, 1024) == ref.steps_s(0, 1024)
    grid_points, intervals = 1024 // g + 1, 1024 // g
    assert t.calls == grid_points + 2 * intervals  # a bisection of both steps took 9 more per interval


def test_step_table_does_not_depend_on_request_order() -> None:
    """Non-monotone engines are approximated, but always the same way (global grid intervals)."""
    wobble = lambda c: 0.02 + 1e-6 * ((c * 7919) % 13)  # noqa: E731
    a, b = DecodeTable(wobble, "steps"), DecodeTable(wobble, "steps")
    a.steps_s(100, 300)
    a.steps_s(1000, 50)
    b.steps_s(1000, 50)
    b.steps_s(100, 300)
    assert a.steps_s(100, 300) == b.steps_s(100, 300) and a.steps_s(1000, 50) == b.steps_s(1000, 50)
    assert a.calls == b.calls


@settings(max_examples=60)
@given(
    mode=st.sampled_from(["exact", "steps", "grid"]),
    ctx0=st.integers(0, 3000),
    n=st.integers(1, 600),
    others=st.lists(st.integers(0, 4000), max_size=5),
)
def test_sums_do_not_depend_on_what_else_the_table_holds(mode: str, ctx0: int, n: int, others: list[int]) -> None:
    """A run on a warm disk cache (a table that already holds other contexts) reads bit-identical step sums."""
    f = lambda c: 0.02 + 1e-6 * (c // 32) + 1e-9 * ((c * 7919) % 13)  # noqa: E731
    fresh, warm = DecodeTable(f, mode), DecodeTable(f, mode)
    for c in others:
        warm.step_s(c)
    warm.restore(*warm.snapshot())
    assert warm.steps_s(ctx0, n) == fresh.steps_s(ctx0, n)
    assert (warm.cumulative_from(ctx0, n) == fresh.cumulative_from(ctx0, n)).all()


def test_table_refuses_bad_engine_values() -> None:
    t = DecodeTable(lambda c: -1.0 if c == 5 else 0.01, "exact")
    with pytest.raises(HwmodelError, match="non-positive or non-finite time -1.0 at ctx 5"):
        t.steps_s(0, 10)
    with pytest.raises(HwmodelError, match="decode table mode"):
        DecodeTable(lambda c: 1.0, "spline")


def test_cumulative_from_matches_sums() -> None:
    t = DecodeTable(lambda c: 0.01 + 1e-6 * c, "exact")
    ends = t.cumulative_from(10, 5)
    assert ends[-1] == pytest.approx(sum(0.01 + 1e-6 * c for c in range(10, 15)))
    assert list(ends) == sorted(ends)


def test_step_table_stays_within_the_engine_context_limit() -> None:
    def f(ctx: int) -> float:
        if ctx > 4095:
            raise HwmodelError(f"context {ctx} too long")
        return 0.02 + 1e-6 * (ctx // 32)

    t, ref = DecodeTable(f, "steps", max_ctx=4095), DecodeTable(f, "exact")
    assert t.steps_s(4000, 96) == pytest.approx(ref.steps_s(4000, 96), rel=1e-12)
    assert t.step_s(4095) == f(4095)
