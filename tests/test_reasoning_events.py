"""The lean event loop (hwmodel/reasoning/events.py) against its reference twin, SimPy: every policy's replay of
generated problems gives bit-identical outcomes, activity logs, transfers and KVMU traces on both, and the loop
keeps SimPy's event order on a generated process pattern (timeouts, interrupts, waits on processes)."""

from __future__ import annotations

import dataclasses

import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from hwmodel.reasoning import events
from hwmodel.reasoning.policies import POLICIES
from hwmodel.reasoning.runner import simulate_problem
from hwmodel.workload.generator import generate
from hwmodel.workload.trace import TraceHeader
from tests.test_reasoning import build_problem, platform_for, problems_st


def _replayed(problem, header, name, loop):  # noqa: ANN001, ANN202
    outcome, sim = simulate_problem(problem, header, name, platform_for(name), keep_log=True, event_loop=loop)
    fields = {f.name: getattr(outcome, f.name) for f in dataclasses.fields(outcome) if f.name != "devices"}
    devices = {r: (d.busy_s, d.busy_energy_j, d.free_at_s, d.log) for r, d in outcome.devices.items()}
    return fields, devices, sim.kvmu_log


@settings(max_examples=40, deadline=None)
@given(problems_st)
def test_every_policy_replays_bit_identically_on_both_loops(args: tuple) -> None:
    decisions, lengths, backtracking = args
    problem = build_problem(decisions, lengths, backtracking)
    header = TraceHeader(backtracking=backtracking)
    for name in POLICIES:
        assert _replayed(problem, header, name, "lean") == _replayed(problem, header, name, "simpy"), name


def test_generated_traces_replay_bit_identically_on_both_loops() -> None:
    for bt in (False, True):
        trace = generate("olympiadbench", "qwen2.5-math-7b", bt, limit=6)
        for name in POLICIES:
            for p in trace.problems:
                assert _replayed(p, trace.header, name, "lean") == _replayed(p, trace.header, name, "simpy")


def _pattern(env, spec: list[tuple[float, float, int]]) -> list[tuple]:  # noqa: ANN001
    """Workers that wait, may be interrupted by a controller (then wait out a tail), and a controller that waits on
    some of them: the log of who saw what when."""
    log: list[tuple] = []

    def worker(k: int, delay: float):  # noqa: ANN202
        log.append(("start", k, env.now))
        left = delay
        while True:
            try:
                yield env.timeout(left)
                log.append(("done", k, env.now))
                return k
            except simpy.Interrupt:  # wait out a tail (a forward pass in flight)
                log.append(("interrupted", k, env.now))
                left = delay / 2

    def controller():  # noqa: ANN202
        procs = []
        for k, (delay, wait, action) in enumerate(spec):
            procs.append(env.process(worker(k, delay)))
            yield env.timeout(wait)  # also 0: the worker's first step runs before it can be interrupted
            target = procs[action % len(procs)]
            if action % 3 == 0 and target.is_alive:
                target.interrupt()
            elif action % 3 == 1:
                value = yield target
                log.append(("joined", value, env.now))
        log.append(("end", env.now))

    env.process(controller())
    return log


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from([0.0, 0.5, 1.0, 1.5, 2.0]), st.sampled_from([0.0, 0.5, 1.0]), st.integers(0, 8)),
        min_size=1,
        max_size=12,
    )
)
def test_the_lean_loop_keeps_simpys_event_order(spec: list) -> None:
    ref_env = simpy.Environment()
    ref = _pattern(ref_env, spec)
    ref_env.run()
    env = events.Environment()
    got = _pattern(env, spec)
    env.run()
    assert got == ref
