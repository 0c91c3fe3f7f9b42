"""The paper's discarded-token energy (hwmodel/reasoning/waste.py): only step-ahead work a PRM rejection
invalidated counts; interrupted prefetch whose tokens are cached does not."""

from __future__ import annotations

import math

from hwmodel.reasoning.runner import simulate_problem
from hwmodel.reasoning.waste import from_invalid_state
from hwmodel.workload.trace import ACCEPT, BACKTRACK, DRAFT, REJECT, TARGET, Attempt, Problem, TraceHeader
from tests.test_reasoning import platform_for


def _energy_of(sim, role: str, prefix: str) -> float:  # noqa: ANN001
    """Busy energy of the activities of ``role`` whose label starts with ``prefix`` (from the replay's log)."""
    return math.fsum(a.busy_s * a.power_w for a in sim.activities()[role] if a.label.startswith(prefix))


def test_only_step_ahead_tokens_after_a_rejection_count() -> None:
    # step 0 accepted; step 1 rejected (the draft had speculated step 2 on it); the target's refinement committed;
    # step 2 accepted and final. Without backtracking.
    attempts = (
        Attempt(0, DRAFT, 40, 0.9, ACCEPT),
        Attempt(1, DRAFT, 60, 0.3, REJECT),
        Attempt(1, TARGET, 50, None, ACCEPT),
        Attempt(2, DRAFT, 30, 0.95, ACCEPT, True),
    )
    problem = Problem("math500", "hand", 80, True, attempts)
    header = TraceHeader(backtracking=False)
    out, sim = simulate_problem(problem, header, "step-ahead", platform_for("step-ahead"), keep_log=True)
    # the draft's speculation of step 2 on the rejected step 1 is the only invalidated work
    assert out.invalidated_draft_tokens > 0
    assert out.invalidated_draft_tokens == out.discarded_draft_tokens
    assert out.invalidated_target_tokens == 0
    spec_j = _energy_of(sim, "draft", "speculate step 2")
    assert spec_j > 0
    # the first speculation of step 2 (on the rejected step) is the invalidated one; the one on the refinement is
    # used (it is the accepted step 2), so compare with the discarded ops themselves
    assert math.isclose(
        out.invalidated_energy_j,
        math.fsum(op.energy_j for op in sim._discarded_ops if op.role == "draft"),
        rel_tol=1e-12,
    )
    # the target's interrupted runs (on accepted steps 0 and 2) are cached: broad waste, not the paper's
    assert out.discarded_target_tokens > 0
    assert out.discarded_energy_j > out.invalidated_energy_j > 0


def test_the_sequential_baseline_invalidates_nothing() -> None:
    attempts = (
        Attempt(0, DRAFT, 40, 0.9, ACCEPT),
        Attempt(1, DRAFT, 60, 0.3, REJECT),
        Attempt(1, TARGET, 50, None, ACCEPT),
        Attempt(2, DRAFT, 30, 0.95, ACCEPT, True),
    )
    out, _ = simulate_problem(
        Problem("math500", "hand", 80, True, attempts),
        TraceHeader(backtracking=False),
        "baseline",
        platform_for("baseline"),
    )
    assert out.invalidated_energy_j == 0.0 and out.invalidated_draft_tokens == out.invalidated_target_tokens == 0


def test_a_backtrack_invalidates_the_work_built_on_the_failed_step() -> None:
    # step 0 accepted; step 1 rejected; the target's refinement fails -> backtrack (drops step 0); the target's
    # alternative for step 0 accepted; step 1 drafted again and accepted, final. With backtracking.
    attempts = (
        Attempt(0, DRAFT, 40, 0.9, ACCEPT),
        Attempt(1, DRAFT, 60, 0.3, REJECT),
        Attempt(1, TARGET, 50, 0.2, BACKTRACK),
        Attempt(0, TARGET, 45, 0.8, ACCEPT),
        Attempt(1, DRAFT, 55, 0.9, ACCEPT, True),
    )
    problem = Problem("math500", "hand", 80, True, attempts)
    out, sim = simulate_problem(problem, TraceHeader(backtracking=True), "step-ahead", platform_for("step-ahead"))
    counted = [op for op in sim._discarded_ops if from_invalid_state(op.ctx_key, attempts)]
    assert all(2 in op.ctx_key or 1 in op.ctx_key for op in counted)  # built on the rejected or backtracked step
    assert counted and math.isclose(out.invalidated_energy_j, math.fsum(op.energy_j for op in counted))
    assert out.invalidated_draft_tokens + out.invalidated_target_tokens == sum(op.produced - op.reuse for op in counted)
    assert out.invalidated_energy_j <= out.discarded_energy_j


def test_summaries_report_both_metrics() -> None:
    from hwmodel.reasoning.metrics import summarize
    from hwmodel.reasoning.runner import run_trace
    from hwmodel.workload.generator import generate

    trace = generate("math500", "qwen2.5-math-7b", True, limit=40)
    s = summarize(run_trace(trace, "step-ahead", platform_for("step-ahead")))
    assert 0.0 < s.invalidated_energy_share < s.discarded_energy_share < 1.0
