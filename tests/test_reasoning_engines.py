"""The engine wrappers of the reasoning replay never change a device model's numbers (or, for the sampled FPGA
engine, change them by a measured, bounded amount)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hwmodel.reasoning.costs import TimedEngine
from hwmodel.sampled import ContextSampledEngine
from tests.token_engine import TokenEngine as _TokenEngine


@pytest.fixture(scope="module")
def gpu_engines():  # noqa: ANN201
    from gpu.latency import GpuEngine

    return {
        name: GpuEngine("rtx3090", name, framework="vllm-eager")
        for name in ("qwen2.5-0.5b", "skywork-prm-7b", "qwen2.5-math-7b")
    }


def test_vectorized_gpu_prefill_equals_prefill_cost(gpu_engines) -> None:  # noqa: ANN001
    rng = np.random.default_rng(1)
    for eng in gpu_engines.values():
        n = rng.integers(1, 600, 40)
        c = rng.integers(0, 3000, 40)
        t, p = eng.prefill_many(n, c)
        for k in range(len(n)):
            cost = eng.prefill_cost(int(n[k]), int(c[k]))
            assert t[k] == cost.time_s
            assert p[k] == pytest.approx(cost.power_w, rel=1e-12)


@settings(max_examples=25)
@given(st.integers(1, 400), st.integers(0, 3000))
def test_timed_gpu_engine_returns_the_engine_values(gpu_engines, n: int, ctx: int) -> None:  # noqa: ANN001
    eng = gpu_engines["qwen2.5-math-7b"]
    te = _timed(eng)
    assert te.prefill_s(n, ctx) == eng.prefill_s(n, ctx)
    assert te.prefill(n, ctx)[1] == pytest.approx(eng.prefill_cost(n, ctx).power_w, rel=1e-12)
    assert te.decode_span_s(ctx, n) == pytest.approx(float(np.sum(eng.decode_steps_s(ctx, n))), rel=1e-12)
    assert te.decode_energy_j(ctx, n) == pytest.approx(eng.decode_energy_j(ctx, n), rel=1e-9)
    prm = _timed(gpu_engines["skywork-prm-7b"])
    for cache in (False, True):
        want = gpu_engines["skywork-prm-7b"].score_cost(n, ctx, prefix_cache=cache)
        got = prm.score(n, ctx, cache)
        assert got[0] == want.time_s and got[1] == pytest.approx(want.power_w, rel=1e-12)


_TIMED: dict[int, TimedEngine] = {}


def _timed(eng) -> TimedEngine:  # noqa: ANN001
    if id(eng) not in _TIMED:
        _TIMED[id(eng)] = TimedEngine(eng)
    return _TIMED[id(eng)]


def test_decode_progress_is_consistent_with_the_span(gpu_engines) -> None:  # noqa: ANN001
    te = _timed(gpu_engines["qwen2.5-0.5b"])
    offsets = te.decode_finish_times(100, 50)
    assert offsets[-1] == pytest.approx(te.decode_span_s(100, 50), rel=1e-12)
    for k in (0, 1, 17, 49):
        assert te.decode_done(100, offsets[k], 50) == k + 1
        assert te.decode_done(100, offsets[k] * (1 - 1e-6), 50) == k
    assert te.decode_done(100, 1e9, 50) == 50


def test_context_sampled_engine_is_exact_on_the_grid_and_close_between() -> None:
    exact = _TokenEngine()
    sampled = ContextSampledEngine(_TokenEngine(), grid=64)
    for ctx in range(0, 2047, 64):
        assert sampled.decode_s(ctx) == exact.decode_s(ctx)
    errs = [abs(sampled.decode_s(c) - exact.decode_s(c)) / exact.decode_s(c) for c in range(0, 2047)]
    assert max(errs) < 2e-3
    # a step of 60 tokens: the sampling errors average out
    for c in (10, 500, 990, 1900):
        assert sampled.prefill_s(60, c) == pytest.approx(exact.prefill_s(60, c), rel=1e-3)
    assert sampled.ingest_s(5, 2040) == pytest.approx(exact.ingest_s(5, 2040), rel=1e-3)
    with pytest.raises(ValueError, match="beyond"):
        sampled.decode_s(2048)
    assert ContextSampledEngine(_TokenEngine(), grid=1).decode_s(777) == exact.decode_s(777)


def test_context_sampled_engine_refuses_engines_with_batched_prefill() -> None:
    class Batched(_TokenEngine):
        def prefill_s(self, n: int, ctx: int = 0) -> float:
            return 0.01

    with pytest.raises(TypeError, match="not token by token"):
        ContextSampledEngine(Batched())


def test_timed_engine_stays_within_the_engine_context_capacity() -> None:
    te = TimedEngine(ContextSampledEngine(_TokenEngine(), grid=64), initial_ctx=0)
    assert te.decode_span_s(2000, 47) > 0  # contexts up to 2046: the table grows to the capacity, not beyond
    with pytest.raises(ValueError, match="beyond"):
        te.decode_span_s(2040, 9)


def test_cumulative_tables_do_not_depend_on_query_order() -> None:
    """Determinism across worker splits: the memoized tables are bit-identical whatever order contexts are asked in."""
    from hwmodel.engine import Phase
    from hwmodel.reasoning.costs import TimedEngine

    class Wobbly:  # per-token times whose running sums round differently when summed in other chunks
        name = "wobbly"

        def decode_s(self, ctx: int) -> float:
            return 1e-3 * (1.0 + (ctx % 7) / 3.0) + ctx * 1.1e-9

        def ingest_s(self, n_tokens: int, ctx: int) -> float:
            return n_tokens * 0.7 * self.decode_s(ctx)

        def prefill_s(self, n_tokens: int, ctx: int = 0) -> float:
            return n_tokens * 1e-4

        def power_w(self, phase: Phase) -> float:
            return 10.0

    one_go, piecewise = TimedEngine(Wobbly()), TimedEngine(Wobbly())
    one_go.decode_span_s(0, 9000)
    one_go.ingest_one_s(9000)
    for ctx, n in ((1500, 10), (5000, 3), (100, 8000), (0, 9000)):
        piecewise.decode_span_s(ctx, n)
        piecewise.ingest_one_s(ctx + n)
    assert one_go.cum_table[:9001] == piecewise.cum_table[:9001]
    assert [one_go.ingest_one_s(c) for c in range(0, 9000, 97)] == [
        piecewise.ingest_one_s(c) for c in range(0, 9000, 97)
    ]
    assert one_go.decode_energy_j(123, 4567) == piecewise.decode_energy_j(123, 4567)
