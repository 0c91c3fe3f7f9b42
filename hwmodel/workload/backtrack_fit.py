"""Fit of the acceptance model's backtracking parameter to the published accuracy gain of backtracking
(docs/traces.md, "Backtracking, fitted"; shared/research/measurements.md s3).

HeteroReason publishes (Table III, 3-GPU BF16 baseline) how much accuracy backtracking (BRSD) adds over forward-only
RSD, averaged over the four datasets: **+2.0 points with the 7B target (config 1), +5.0 with the 1.5B target
(config 2)**; the complete system (BRSD + the system optimizations) keeps +1.7 and +4.2. In the acceptance model
(:mod:`hwmodel.workload.acceptance`) that gain is set by how often the target's refinement fails the PRM -- the
per-target ``target_hazard_ratio`` -- and by how much a kept failed step spoils the answer
(``flawed_step_penalty``, an estimate left at 0.5, not fitted). So one free parameter per target is fitted to one
published gain per configuration: 2 parameters, 2 fitting points, an exact fit (zero degrees of freedom). How often
backtracking happens, and what it costs in latency and energy, are then predictions.

The quantity fitted is the model's *expected* gain: per problem the probability of a right answer is
``(not truncated) * min(1, a0 * (1 - penalty) ** flawed_steps_kept)`` (``a0`` solved per dataset so that the
trace without backtracking is as accurate as the target alone, as the generator does), averaged over the
dataset's problems; the gain is with-minus-without backtracking, averaged over the four datasets (unweighted, as
the paper averages its per-dataset accuracies). The traces' realized accuracies (one seeded draw per problem) are
reported beside it. The gain is a step function of the ratio (each refinement's fail draw flips at one value),
non-decreasing in practice; bisection finds the crossing to within one step (a few hundredths of a point).

The complete system's gains (+1.7 / +4.2) are fitted the same way as a *sensitivity* (the ratios a trace would need
if those gains were the baseline's); the model's policies replay the same trace, so they cannot lose accuracy
against backtracking alone, and the report says so.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

from hwmodel.workload.acceptance import AcceptanceModel
from hwmodel.workload.datasets import DATASETS
from hwmodel.workload.generator import (
    DEFAULT_SEED,
    dataset_hazard,
    difficulty_weights,
    plan_dataset,
    play_problem,
    solve_base_accuracy,
)
from hwmodel.workload.steps import fit_length_model

#: published accuracy gain of backtracking over forward-only RSD, points, mean of the four datasets
#: (shared/research/measurements.md s3, Table III of the paper): target LLM -> gain
PUBLISHED_GAIN_PTS: Mapping[str, float] = {"qwen2.5-math-7b": 2.0, "qwen2.5-math-1.5b": 5.0}
#: the same with the system optimizations (BRSD + T1 + T2): fitted only as a sensitivity
PUBLISHED_GAIN_OPT_PTS: Mapping[str, float] = {"qwen2.5-math-7b": 1.7, "qwen2.5-math-1.5b": 4.2}
#: the ratios the complete system's gains would need (a sensitivity; ``python -m hwmodel.workload.backtrack_fit
#: --optimized`` recomputes them; tests/test_backtrack_fit.py checks they reproduce +1.7 / +4.2)
SENSITIVITY_RATIO: Mapping[str, float] = {"qwen2.5-math-7b": 0.067383, "qwen2.5-math-1.5b": 0.189453}
CONFIG_OF_TARGET: Mapping[str, str] = {"qwen2.5-math-7b": "config1", "qwen2.5-math-1.5b": "config2"}
FREE_PARAMS = 2  # one target_hazard_ratio per target, fitted to one published gain per configuration


def _a0(factors: np.ndarray, goal: float) -> float:
    """``a0`` with mean(min(1, a0 * factors)) == goal (generator.base_accuracy's bisection)."""
    return solve_base_accuracy(factors, goal)


@dataclasses.dataclass(frozen=True)
class GainPoint:
    """The expected accuracies (fractions) of one dataset without and with backtracking, and backtrack counts."""

    dataset: str
    acc_no_bt: float
    acc_bt: float
    backtracks_per_problem: float

    @property
    def gain_pts(self) -> float:
        return 100.0 * (self.acc_bt - self.acc_no_bt)


def expected_gain(
    dataset: str,
    target: str,
    ratio: float,
    *,
    seed: int = DEFAULT_SEED,
    model: AcceptanceModel | None = None,
    limit: int | None = None,
) -> GainPoint:
    """Expected accuracy with and without backtracking of ``dataset`` when the target's hazard ratio is ``ratio``
    (everything else as ``model``; module docstring)."""
    base = model or AcceptanceModel()
    m = dataclasses.replace(base, target_hazard_ratio={**base.target_hazard_ratio, target: float(ratio)})
    sigma = fit_length_model().regen_sigma
    plans = plan_dataset(dataset, seed, base)  # plans and the draft hazard do not depend on the ratio
    diff = difficulty_weights(plans, base)
    hazard = dataset_hazard(dataset, seed, base)
    if limit is not None:
        plans, diff = plans[:limit], diff[:limit]
    keep = 1.0 - m.flawed_step_penalty
    f0, f1, bts = [], [], 0
    for p, d in zip(plans, diff):
        _a, fl0, cut0 = play_problem(p, hazard, float(d), target, False, m, sigma)
        att, fl1, cut1 = play_problem(p, hazard, float(d), target, True, m, sigma)
        f0.append(0.0 if cut0 else keep**fl0)
        f1.append(0.0 if cut1 else keep**fl1)
        bts += sum(a.verdict == "backtrack" for a in att)
    f0a, f1a = np.array(f0), np.array(f1)
    a0 = _a0(f0a, m.accuracy(dataset, target))
    return GainPoint(
        dataset,
        float(np.mean(np.minimum(1.0, a0 * f0a))),
        float(np.mean(np.minimum(1.0, a0 * f1a))),
        bts / max(1, len(plans)),
    )


def mean_gain_pts(
    target: str,
    ratio: float,
    *,
    datasets: Sequence[str] = DATASETS,
    seed: int = DEFAULT_SEED,
    model: AcceptanceModel | None = None,
    limit: int | None = None,
) -> float:
    """The expected gain of backtracking, points, averaged over ``datasets`` (unweighted)."""
    pts = [expected_gain(d, target, ratio, seed=seed, model=model, limit=limit).gain_pts for d in datasets]
    return float(np.mean(pts))


@dataclasses.dataclass(frozen=True)
class RatioFit:
    target: str
    goal_pts: float
    ratio: float
    gain_pts: float  # the model's expected gain at ``ratio``
    iterations: int


def fit_ratio(
    target: str,
    goal_pts: float,
    *,
    datasets: Sequence[str] = DATASETS,
    seed: int = DEFAULT_SEED,
    model: AcceptanceModel | None = None,
    limit: int | None = None,
    lo: float = 0.0,
    hi: float = 2.0,
    tol_pts: float = 0.02,
    max_iter: int = 40,
) -> RatioFit:
    """The ``target_hazard_ratio`` of ``target`` whose expected mean gain equals ``goal_pts`` (bisection: the gain
    grows with the ratio); stops when within ``tol_pts`` or when the bracket is 1e-6 wide."""

    def g(r: float) -> float:
        return mean_gain_pts(target, r, datasets=datasets, seed=seed, model=model, limit=limit)

    if not g(lo) <= goal_pts <= g(hi):
        raise ValueError(f"the published gain {goal_pts} points is outside what ratios in [{lo}, {hi}] give")
    best = (abs(g(hi) - goal_pts), hi, g(hi))
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007 - the count of iterations is read after the loop
        mid = 0.5 * (lo + hi)
        gm = g(mid)
        if abs(gm - goal_pts) < best[0]:
            best = (abs(gm - goal_pts), mid, gm)
        if abs(gm - goal_pts) <= tol_pts or hi - lo < 1e-6:
            break
        if gm < goal_pts:
            lo = mid
        else:
            hi = mid
    return RatioFit(target, goal_pts, round(best[1], 6), best[2], it)


def fit_all(goals: Mapping[str, float] = PUBLISHED_GAIN_PTS, **kw) -> dict[str, RatioFit]:  # noqa: ANN003
    """Fit every target's ratio to its configuration's published gain."""
    return {t: fit_ratio(t, g, **kw) for t, g in goals.items()}


if __name__ == "__main__":  # python -m hwmodel.workload.backtrack_fit: rerun the fit (docs/traces.md)
    import json
    import sys

    goals = PUBLISHED_GAIN_OPT_PTS if "--optimized" in sys.argv else PUBLISHED_GAIN_PTS
    print(json.dumps({t: dataclasses.asdict(f) for t, f in fit_all(goals).items()}, indent=1))
