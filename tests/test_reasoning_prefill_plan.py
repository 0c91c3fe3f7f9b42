"""The GPU prefill plan (hwmodel/reasoning/prefill_plan.py): points computed ahead, in large passes, hold exactly
the values a replay would compute on demand, and the plan covers almost every prefill a real replay asks for."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hwmodel.engine import Phase
from hwmodel.reasoning import prefill_plan, study
from hwmodel.reasoning.costs import TimedEngine
from hwmodel.reasoning.system import clear_engine_memo


@pytest.fixture(scope="module")
def gpu_engines():  # noqa: ANN201
    from gpu.latency import GpuEngine

    return [
        GpuEngine("rtx3090", "qwen2.5-math-7b", framework="vllm-eager"),
        GpuEngine("rtx3090", "skywork-prm-7b", framework="vllm"),
    ]


@settings(max_examples=20, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 3000), st.integers(0, 5000)), min_size=1, max_size=60))
def test_a_points_value_does_not_depend_on_the_other_points_of_its_pass(gpu_engines, points) -> None:  # noqa: ANN001
    """prefill_many's element for a point is bit-identical in a pass of any size and order (so a planned pass
    and an on-demand block agree)."""
    for eng in gpu_engines:
        n, c = (np.array(col) for col in zip(*points))
        t, p = eng.prefill_many(n, c)
        t_rev, p_rev = eng.prefill_many(n[::-1], c[::-1])
        assert t.tolist() == t_rev[::-1].tolist() and p.tolist() == p_rev[::-1].tolist()
        for k in (0, len(points) - 1):
            t1, p1 = eng.prefill_many(n[k : k + 1], c[k : k + 1])
            assert (t1[0], p1[0]) == (t[k], p[k])


def test_planned_points_equal_points_computed_on_demand(gpu_engines) -> None:  # noqa: ANN001
    rng = np.random.default_rng(7)
    n = rng.integers(1, 2000, 300)
    c = rng.integers(0, 4000, 300)
    n[:3], c[:3] = 10**6, 0  # more than the device holds: left to the engine, which refuses them
    for eng in gpu_engines:
        planned, lazy = TimedEngine(eng), TimedEngine(eng)
        computed = planned.prefill_points(n, c)
        assert 0 < computed <= len(set(zip(n[3:].tolist(), c[3:].tolist())))
        assert planned.prefill_points(n, c) == 0  # nothing left to compute
        for a, b in zip(n[3:].tolist(), c[3:].tolist()):
            assert planned.prefill(a, b) == lazy.prefill(a, b)  # == on floats: bit-identical
        assert planned._blocks == 0  # every read was planned


def test_the_plan_covers_a_real_replays_prefills() -> None:
    """A study unit replayed on planned engines gives the same rows and fills few blocks on demand: every prefill
    but those resuming a stopped generation mid-step is planned."""
    units = [study.Unit("math500", "config1", "heteroreason"), study.Unit("math500", "config2", "step-ahead")]
    clear_engine_memo()
    try:
        lazy_rows = [study.run_unit(u, limit=30) for u in units]
        lazy_blocks = _blocks(units)
        clear_engine_memo()
        assert prefill_plan.warm(study.prefill_targets(units, limit=30)) > 0
        assert [study.run_unit(u, limit=30) for u in units] == lazy_rows
        planned_blocks = _blocks(units)
    finally:
        clear_engine_memo()
    assert sum(lazy_blocks.values()) > 100
    assert sum(planned_blocks.values()) <= 0.1 * sum(lazy_blocks.values()), (planned_blocks, lazy_blocks)


def _blocks(units: list[study.Unit]) -> dict[str, int]:
    """Prefill blocks each GPU engine of the units' platforms computed on demand."""
    out = {}
    for u in units:
        pf = study.build_platform(u.config, u.policy)
        for role in ("draft", "prm", "target"):
            te: TimedEngine = getattr(pf, role)
            out[f"{u.config}/{te.name}"] = te._blocks
    return out


def test_scoring_passes_are_planned_as_the_prm_reads_them(gpu_engines) -> None:  # noqa: ANN001
    unit = study.Unit("math500", "config1", "baseline")
    (trace, replays), *_ = study.unit_traces(unit, limit=10)
    prm = TimedEngine(gpu_engines[1])
    for cache in (False, True):
        codes = prefill_plan.score_points(trace.problems, replays, prm, cache)
        want = {
            prm.engine.score_pass(a.tokens, ctx, cache)
            for p, rp in zip(trace.problems, replays)
            for a, ctx in zip(p.attempts, rp.context_tokens)
        }
        assert {(int(x) >> 32, int(x) & 0xFFFFFFFF) for x in codes} == want


def test_the_parents_warm_steps_leave_a_resident_draft_unit_nothing_shared_to_compute() -> None:
    """After the parent's steps, a heteroreason unit (resident draft) computes no prompt migration and no phase
    power of its sampled draft, and gives the rows it gives on fresh engines."""
    unit = study.Unit("math500", "config1", "heteroreason")
    clear_engine_memo()
    try:
        lazy_rows = study.run_unit(unit, limit=8)
        clear_engine_memo()
        sampled = study.warm_targets([unit], limit=8)
        for _ in study.parent_warm_steps([unit], sampled, limit=8):
            pass
        pf = study.build_platform(unit.config, unit.policy)
        migrations, powers = dict(pf.prompt_migration._memo), dict(pf.draft._power)
        assert migrations and len(powers) == len(Phase)
        assert study.run_unit(unit, limit=8) == lazy_rows
        assert pf.prompt_migration._memo == migrations and pf.draft._power == powers
    finally:
        clear_engine_memo()


def test_prefills_resuming_a_stopped_prefetch_are_planned(monkeypatch) -> None:  # noqa: ANN001
    """A backtrack's target step that resumes a stopped T2 prefetch asks for a prefill of the reused tokens on the
    cached context: planned, those fill no block on demand (the rows are the same either way)."""
    units = [study.Unit("gsm8k", "config2", p) for p in ("step-ahead", "step-ahead-submit", "heteroreason")]
    out = {}
    try:
        for planned in (False, True):
            clear_engine_memo()
            if not planned:
                monkeypatch.setattr(prefill_plan, "_resumed_points", lambda p, rp: [])
            prefill_plan.warm(study.prefill_targets(units, limit=40))
            monkeypatch.undo()
            rows = [study.run_unit(u, limit=40) for u in units]
            out[planned] = rows, sum(_blocks(units).values())
    finally:
        clear_engine_memo()
    assert any(r.reused_target_tokens for rows in out[True][0] for r in rows)
    assert out[True][0] == out[False][0]
    assert out[True][1] < out[False][1], (out[True][1], out[False][1])
