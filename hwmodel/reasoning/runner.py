"""Replay a trace under a policy on a platform: one :class:`~hwmodel.reasoning.sim.ProblemSimulation` per problem,
metrics per problem."""
from __future__ import annotations

from collections.abc import Callable

from hwmodel.reasoning.metrics import ProblemMetrics, problem_metrics
from hwmodel.reasoning.platform import Platform
from hwmodel.reasoning.policies import PolicySpec, policy as get_policy
from hwmodel.reasoning.sim import ProblemOutcome, ProblemSimulation
from hwmodel.workload.trace import Problem, Trace, TraceHeader


def simulate_problem(problem: Problem, header: TraceHeader, policy: PolicySpec | str, platform: Platform,
                     keep_log: bool = False) -> tuple[ProblemOutcome, ProblemSimulation]:
    pol = get_policy(policy) if isinstance(policy, str) else policy
    sim = ProblemSimulation(problem, header, pol, platform, keep_log=keep_log)
    return sim.run(), sim


def run_trace(trace: Trace, policy: PolicySpec | str, platform: Platform, config: str = "",
              progress: Callable[[int], None] | None = None) -> list[ProblemMetrics]:
    """Metrics of every problem of ``trace`` replayed under ``policy`` on ``platform``."""
    pol = get_policy(policy) if isinstance(policy, str) else policy
    out: list[ProblemMetrics] = []
    for problem in trace.problems:
        outcome, sim = simulate_problem(problem, trace.header, pol, platform)
        out.append(problem_metrics(problem, outcome, config=config or (trace.header.config or ""), policy=pol.name,
                                   backtracking=trace.header.backtracking, rejects=sim.rp.rejects,
                                   backtracks=sim.rp.backtracks))
        if progress is not None:
            progress(1)
    return out
