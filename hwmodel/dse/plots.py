"""Plots of a sweep (matplotlib, Agg backend): objective scatter coloured by a metric, with the front highlighted.

For a two-objective front: x and y are the objectives, colour is ``report.color_by`` (default: DSP use), the
front is drawn as a staircase through its points. For a three-objective front: x and y are the first two, colour
is the third, and the front's points are ringed. Evaluated points that break a constraint are grey crosses.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from hwmodel.report.plots import save_figure

if TYPE_CHECKING:
    from hwmodel.dse.report import SweepReport


def _label(plan_metric: str, unit: str) -> str:
    return f"{plan_metric} [{unit}]" if unit else plan_metric


def _log_worthy(v: np.ndarray) -> bool:
    v = v[np.isfinite(v)]
    return bool(v.size and np.all(v > 0) and v.max() / v.min() > 30)


def plot_front(rep: SweepReport, objs: tuple[str, ...], stem: Path, *, svg: bool = False) -> list[Path]:
    """Write ``stem.png`` (and ``stem.svg``); returns the paths written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plan = rep.plan
    metrics = plan.evaluator.metric_map
    x_m, y_m = objs[0], objs[1]
    c_m = objs[2] if len(objs) == 3 else plan.color_by
    feas = [i for i, r in enumerate(rep.rows) if r.feasible]
    infeas = [i for i, r in enumerate(rep.rows) if not r.feasible and r.row.status == "ok"]
    front = list(rep.fronts.get(objs, ()))

    fig, ax = plt.subplots(figsize=(7.5, 5.0), dpi=120)
    if infeas:
        ax.scatter(
            rep.column(x_m, infeas),
            rep.column(y_m, infeas),
            marker="x",
            s=14,
            c="0.75",
            linewidths=0.8,
            label=f"breaks a constraint ({len(infeas)})",
            zorder=1,
        )
    if feas:
        xs, ys = rep.column(x_m, feas), rep.column(y_m, feas)
        if c_m:
            cs = rep.column(c_m, feas)
            sc = ax.scatter(xs, ys, c=cs, cmap="viridis", s=16, label=f"feasible ({len(feas)})", zorder=2)
            fig.colorbar(sc, ax=ax, label=_label(c_m, metrics[c_m].unit))
        else:
            ax.scatter(xs, ys, s=16, color="tab:blue", label=f"feasible ({len(feas)})", zorder=2)
    if front:
        fx, fy = rep.column(x_m, front), rep.column(y_m, front)
        ax.scatter(
            fx,
            fy,
            s=60,
            facecolors="none",
            edgecolors="red",
            linewidths=1.4,
            label=f"Pareto front ({len(front)})",
            zorder=3,
        )
        if len(objs) == 2:
            order = np.argsort(fx, kind="stable")
            ax.step(fx[order], fy[order], where="post", color="red", linewidth=1.0, zorder=3)
    for _axis_m, setter, vals in (
        (x_m, ax.set_xscale, rep.column(x_m, feas + infeas)),
        (y_m, ax.set_yscale, rep.column(y_m, feas + infeas)),
    ):
        if _log_worthy(vals):
            setter("log")
    sense = plan.sense
    ax.set_xlabel(_label(x_m, metrics[x_m].unit) + f" ({sense[x_m]})")
    ax.set_ylabel(_label(y_m, metrics[y_m].unit) + f" ({sense[y_m]})")
    title = f"{plan.name}: {' vs '.join(objs)}"
    ax.set_title(title if len(title) < 90 else title[:87] + "...", fontsize=10)
    ax.grid(True, alpha=0.3)
    if feas or infeas:
        ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    return save_figure(fig, stem, svg)
