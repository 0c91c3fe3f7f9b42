"""Sweep reports: feasibility under the current constraints, Pareto fronts, a top-k table, files and plots.

Everything here is computed from the results file and the plan, in plan order (the order points are enumerated),
so the report of a resumed sweep is identical to that of an uninterrupted one, whatever order points finished in.
Fronts and top-k only consider *feasible* points: evaluated (status ok) and meeting every constraint.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from hwmodel.dse.pareto import pareto_front, top_k
from hwmodel.dse.spec import SweepPlan, violation
from hwmodel.dse.store import Row
from hwmodel.io import jsonable
from hwmodel.report.tables import write_csv


@dataclasses.dataclass(frozen=True)
class ReportRow:
    """A finished point of the plan, with its feasibility under the current constraints."""

    index: int
    row: Row
    feasible: bool
    why_not: str


@dataclasses.dataclass(frozen=True)
class SweepReport:
    plan: SweepPlan
    rows: tuple[ReportRow, ...]
    fronts: dict[tuple[str, ...], tuple[int, ...]]
    """Objectives -> positions in ``rows`` of the front's points (ascending plan order)."""
    top: tuple[int, ...]
    """Positions in ``rows`` of the top-k points, best first."""

    @property
    def feasible(self) -> list[ReportRow]:
        return [r for r in self.rows if r.feasible]

    def counts(self) -> dict[str, int]:
        c = {
            "points": len(self.plan.points),
            "finished": len(self.rows),
            "feasible": sum(r.feasible for r in self.rows),
            "evaluated": sum(r.row.status == "ok" for r in self.rows),
            "screened": sum(r.row.status == "screened" for r in self.rows),
            "invalid": sum(r.row.status == "invalid" for r in self.rows),
        }
        c["infeasible"] = c["finished"] - c["feasible"] - c["invalid"]
        return c

    def column(self, metric: str, positions: Any = None) -> np.ndarray:
        rows = self.rows if positions is None else [self.rows[i] for i in positions]
        return np.array([r.row.metrics.get(metric, math.nan) for r in rows], dtype=float)


def feasibility(plan: SweepPlan, row: Row) -> tuple[bool, str]:
    if row.status == "screened":
        return False, row.message
    if row.status == "invalid":
        return False, f"invalid: {row.message}"
    for m, bound in plan.constraints.items():
        why = violation(m, bound, row.metrics.get(m, math.nan))
        if why:
            return False, why
    return True, ""


def build_report(plan: SweepPlan, rows: Mapping[str, Row]) -> SweepReport:
    """The report of the finished points of ``plan`` found in ``rows`` (point id -> row)."""
    out: list[ReportRow] = []
    for pt in plan.points:
        r = rows.get(pt.id)
        if r is not None:
            ok, why = feasibility(plan, r)
            out.append(ReportRow(pt.index, r, ok, why))
    feas = [i for i, r in enumerate(out) if r.feasible]
    sense = plan.sense
    fronts: dict[tuple[str, ...], tuple[int, ...]] = {}
    for objs in plan.fronts:
        vals = np.array([[out[i].row.metrics[m] for m in objs] for i in feas], dtype=float)
        vals = vals.reshape(len(feas), len(objs))
        idx = pareto_front(vals, [sense[m] for m in objs])
        fronts[objs] = tuple(feas[i] for i in idx)
    order = [plan.rank_by] + [m for m, _s in plan.objectives if m != plan.rank_by]
    vals = np.array([[out[i].row.metrics[m] for m in order] for i in feas], dtype=float).reshape(len(feas), len(order))
    top = tuple(feas[i] for i in top_k(vals, [sense[m] for m in order], plan.report.top_k))
    return SweepReport(plan, tuple(out), fronts, top)


def front_name(objs: tuple[str, ...]) -> str:
    return "__".join(objs)


def _row_dict(plan: SweepPlan, r: ReportRow) -> dict[str, Any]:
    d: dict[str, Any] = {"point_id": r.row.point_id, "index": r.index, "status": r.row.status, "feasible": r.feasible}
    d.update(r.row.params)
    d.update({m: v for m, v in r.row.metrics.items()})
    d["why_not"] = r.why_not
    return d


def _write_csv(path: Path, plan: SweepPlan, rows: list[ReportRow]) -> None:
    cols = ["point_id", "index", "status", "feasible", *plan.param_names, *plan.evaluator.metric_names, "why_not"]
    dicts = (_row_dict(plan, r) for r in rows)
    write_csv(path, ({c: _cell(d.get(c, "")) for c in cols} for d in dicts), cols)


def _cell(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "" if math.isnan(v) else repr(v)
    return str(v)


def summary_dict(rep: SweepReport) -> dict[str, Any]:
    plan = rep.plan
    return {
        "sweep": plan.name,
        "spec": str(plan.path),
        "evaluator": plan.evaluator.name,
        "evaluator_version": plan.evaluator.version,
        "sampling": plan.sweep.sampling,
        "objectives": dict(plan.objectives),
        "constraints": plan.describe_constraints(),
        "counts": rep.counts(),
        "fronts": {
            front_name(k): [{kk: jsonable(vv) for kk, vv in _row_dict(plan, rep.rows[i]).items()} for i in v]
            for k, v in rep.fronts.items()
        },
        "top_k": {
            "rank_by": plan.rank_by,
            "rows": [{kk: jsonable(vv) for kk, vv in _row_dict(plan, rep.rows[i]).items()} for i in rep.top],
        },
    }


def write_report(rep: SweepReport, out_dir: Path, *, svg: bool = False) -> list[Path]:
    """Write ``summary.json``, ``points.csv`` (all finished points, plan order, with feasibility),
    ``topk.csv``, one ``front_<objectives>.csv`` and plot per front, and the interactive ``explorer.html``;
    returns the paths written."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    p = out_dir / "summary.json"
    p.write_text(json.dumps(summary_dict(rep), indent=2) + "\n")
    written.append(p)
    p = out_dir / "points.csv"
    _write_csv(p, rep.plan, list(rep.rows))
    written.append(p)
    p = out_dir / "topk.csv"
    _write_csv(p, rep.plan, [rep.rows[i] for i in rep.top])
    written.append(p)
    from hwmodel.dse.plots import plot_front

    for objs, idx in rep.fronts.items():
        p = out_dir / f"front_{front_name(objs)}.csv"
        _write_csv(p, rep.plan, [rep.rows[i] for i in idx])
        written.append(p)
        written += plot_front(rep, objs, out_dir / f"front_{front_name(objs)}", svg=svg)
    from hwmodel.dse.explorer import write_explorer

    written.append(write_explorer(rep, out_dir / "explorer.html"))
    return written
