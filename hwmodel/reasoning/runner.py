"""Replay a trace under a policy on a platform: one :class:`~hwmodel.reasoning.sim.ProblemSimulation` per problem,
metrics per problem."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from hwmodel.reasoning.metrics import ProblemMetrics, problem_metrics
from hwmodel.reasoning.platform import Platform
from hwmodel.reasoning.policies import PolicySpec
from hwmodel.reasoning.policies import policy as get_policy
from hwmodel.reasoning.sim import ProblemOutcome, ProblemSimulation
from hwmodel.workload.trace import Problem, Replay, Trace, TraceHeader


def simulate_problem(
    problem: Problem,
    header: TraceHeader,
    policy: PolicySpec | str,
    platform: Platform,
    keep_log: bool = False,
    replay: Replay | None = None,
    event_loop: str = "lean",
) -> tuple[ProblemOutcome, ProblemSimulation]:
    pol = get_policy(policy) if isinstance(policy, str) else policy
    sim = ProblemSimulation(problem, header, pol, platform, keep_log=keep_log, replay=replay, event_loop=event_loop)
    return sim.run(), sim


def run_trace(
    trace: Trace,
    policy: PolicySpec | str,
    platform: Platform,
    config: str = "",
    progress: Callable[[int], None] | None = None,
    replays: Sequence[Replay] | None = None,
    event_loop: str = "lean",
) -> list[ProblemMetrics]:
    """Metrics of every problem of ``trace`` replayed under ``policy`` on ``platform`` (``replays``: the
    problems' :func:`~hwmodel.workload.trace.replay_of`, when the caller already has them; ``event_loop``: "lean"
    or its reference twin "simpy", :data:`~hwmodel.reasoning.sim.EVENT_LOOPS`)."""
    pol = get_policy(policy) if isinstance(policy, str) else policy
    out: list[ProblemMetrics] = []
    for k, problem in enumerate(trace.problems):
        outcome, sim = simulate_problem(
            problem,
            trace.header,
            pol,
            platform,
            replay=replays[k] if replays is not None else None,
            event_loop=event_loop,
        )
        out.append(
            problem_metrics(
                problem,
                outcome,
                config=config or (trace.header.config or ""),
                policy=pol.name,
                backtracking=trace.header.backtracking,
                rejects=sim.rp.rejects,
                backtracks=sim.rp.backtracks,
            )
        )
        if progress is not None:
            progress(1)
    return out
