"""Design-space exploration: sweep specs, resumable local and Dask runners, Pareto fronts, reports, plots.

Typical use (what `hwmodel sweep SPEC.toml` does)::

    from hwmodel.dse import load_plan, run_sweep, read_report, write_report
    plan = load_plan("examples/sweeps/draft_u280.toml")   # every spec error raised here, before any work
    stats = run_sweep(plan, out_dir)                       # resumes: skips points already in out_dir/results.csv
    report = read_report(plan, out_dir)                    # feasibility, fronts, top-k, in plan order
    write_report(report, out_dir)                          # summary.json, points.csv, topk.csv, fronts + plots
"""

from __future__ import annotations

from pathlib import Path

from hwmodel.dse.evaluators import Evaluator, Metric, Param, Screen, register, resolve
from hwmodel.dse.pareto import dominates, pareto_front, top_k
from hwmodel.dse.report import SweepReport, build_report, write_report
from hwmodel.dse.runner import RunStats, open_store, results_path, run_sweep
from hwmodel.dse.spec import Point, SweepPlan, load_plan


def read_report(plan: SweepPlan, out_dir: Path | str) -> SweepReport:
    """The report of ``plan`` from the results in ``out_dir`` (only the plan's points; plan order)."""
    return build_report(plan, open_store(plan, Path(out_dir)).read())


__all__ = [
    "Evaluator",
    "Metric",
    "Param",
    "Point",
    "RunStats",
    "Screen",
    "SweepPlan",
    "SweepReport",
    "build_report",
    "dominates",
    "load_plan",
    "pareto_front",
    "read_report",
    "register",
    "resolve",
    "results_path",
    "run_sweep",
    "top_k",
    "write_report",
]
