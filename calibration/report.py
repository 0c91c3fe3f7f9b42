"""Calibration report: every measured point with its model value and error, fitted and predicted listed apart.

Generic like :mod:`calibration.fit`: it takes the points and a ``model(point) -> float`` callable. The error is
``(model - measured) / measured``; the summary gives the largest error of the fitted points (the fit's quality) and
the mean / largest error of the predicted ones (the model's predictive power on data it never saw). Points marked
``fitted-derived`` (a value that follows from fitted points by identity) are listed after the fitted ones and count
in neither.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

from calibration.measurements import Measurement

ROLE_ORDER = {"fitted": 0, "fitted-derived": 1, "predicted": 2}


@dataclasses.dataclass(frozen=True)
class ReportRow:
    """One point of the report."""

    id: str
    role: str
    subject: str
    quantity: str
    unit: str
    conditions: dict[str, str]
    measured: float
    model: float
    error: float  # (model - measured) / measured
    source: str

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Summary:
    fitted_points: int
    fitted_max_abs_error: float
    fitted_derived_points: int
    predicted_points: int
    predicted_mean_abs_error: float
    predicted_max_abs_error: float

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def build_report(
    points: Sequence[Measurement], model: Callable[[Measurement], float], condition_columns: Sequence[str] = ()
) -> list[ReportRow]:
    """Rows for ``points``: fitted ones first, then fitted-derived, then predicted, each in file order."""
    rows = []
    for pt in sorted(points, key=lambda p: ROLE_ORDER.get(p.role, len(ROLE_ORDER))):
        value = float(model(pt))
        err = (value - pt.value) / pt.value if math.isfinite(value) else math.inf
        cond = {c: pt.conditions.get(c, "") for c in condition_columns} if condition_columns else dict(pt.conditions)
        rows.append(
            ReportRow(
                id=pt.id,
                role=pt.role,
                subject=pt.subject,
                quantity=pt.quantity,
                unit=pt.unit,
                conditions=cond,
                measured=pt.value,
                model=value,
                error=err,
                source=pt.source,
            )
        )
    return rows


def summarize(rows: Sequence[ReportRow]) -> Summary:
    fit = [abs(r.error) for r in rows if r.role == "fitted"]
    pred = [abs(r.error) for r in rows if r.role == "predicted"]
    derived = [r for r in rows if r.role == "fitted-derived"]
    return Summary(
        fitted_points=len(fit),
        fitted_max_abs_error=max(fit, default=0.0),
        fitted_derived_points=len(derived),
        predicted_points=len(pred),
        predicted_mean_abs_error=sum(pred) / len(pred) if pred else 0.0,
        predicted_max_abs_error=max(pred, default=0.0),
    )


def render(rows: Sequence[ReportRow], title: str, condition_columns: Sequence[str]) -> Any:
    """A rich table of the report (fitted points, then a separator, then predicted points)."""
    from rich.table import Table

    table = Table("role", "id", "subject", *condition_columns, "quantity", "measured", "model", "error", title=title)
    last_role = None
    for r in rows:
        if last_role is not None and r.role != last_role:
            table.add_section()
        last_role = r.role
        colour = "green" if abs(r.error) <= 0.05 else ("yellow" if abs(r.error) <= 0.15 else "red")
        table.add_row(
            r.role,
            r.id,
            r.subject,
            *(r.conditions.get(c, "") for c in condition_columns),
            f"{r.quantity} [{r.unit}]",
            f"{r.measured:.4g}",
            f"{r.model:.4g}",
            f"[{colour}]{100 * r.error:+.1f} %[/]",
        )
    return table
