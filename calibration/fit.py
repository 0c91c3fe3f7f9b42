"""Fit a few named physical parameters of any model to measured points (scipy least squares).

The machinery knows nothing about GPUs or FPGAs: a model family supplies

* ``params`` -- the free parameters, each a :class:`Param` with an initial value, bounds, a unit and its meaning;
* ``predict(values, point) -> float`` -- the model's value of ``point.quantity`` under ``point.conditions`` for the
  parameter ``values`` (a name -> float mapping; ``fixed`` values are merged in);

and :func:`fit` minimises the *relative* residuals ``(model - measured) / measured`` over the points whose role is
``fitted`` (so a 3 ms point and a 170 ms point weigh the same), within the bounds (trust-region reflective, a
deterministic method: the same inputs give the same parameters). The points marked ``predicted`` are never seen by
the fit; :mod:`calibration.report` shows the error on both.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np
from scipy.optimize import least_squares

from calibration.measurements import Measurement
from hwmodel.errors import HwmodelError

Predict = Callable[[Mapping[str, float], Measurement], float]


@dataclasses.dataclass(frozen=True)
class Param:
    """A free parameter: initial value, bounds, unit and what it means physically."""

    name: str
    initial: float
    lower: float
    upper: float
    unit: str = ""
    doc: str = ""

    def __post_init__(self) -> None:
        if not (self.lower < self.upper and self.lower <= self.initial <= self.upper):
            raise ValueError(f"parameter {self.name}: need lower < upper and initial within them")


@dataclasses.dataclass(frozen=True)
class FitResult:
    """Fitted values, the residual of every fitted point, and how the optimiser ended."""

    values: Mapping[str, float]
    residuals: Mapping[str, float]  # point id -> (model - measured) / measured
    cost: float
    nfev: int
    success: bool
    message: str
    at_bound: tuple[str, ...]  # parameters that ended on a bound (the data push beyond the physical range)

    @property
    def max_abs_residual(self) -> float:
        return max((abs(r) for r in self.residuals.values()), default=0.0)


class FitError(HwmodelError):
    """A fit cannot be set up (no fitted points, a prediction failed...)."""


def fit(
    points: Sequence[Measurement],
    predict: Predict,
    params: Sequence[Param],
    fixed: Mapping[str, float] | None = None,
    max_nfev: int = 2000,
) -> FitResult:
    """Least-squares fit of ``params`` to the points whose role is ``fitted``."""
    fitted = [p for p in points if p.fitted]
    if not fitted:
        raise FitError("no measurement has role 'fitted'")
    if len(fitted) < len(params):
        raise FitError(f"{len(params)} parameters need at least as many fitted points, got {len(fitted)}")
    fixed = dict(fixed or {})
    names = [p.name for p in params]
    lower = np.array([p.lower for p in params])
    upper = np.array([p.upper for p in params])

    def values_of(x: np.ndarray) -> dict[str, float]:
        return {**fixed, **{n: float(v) for n, v in zip(names, x)}}

    def residuals(x: np.ndarray) -> np.ndarray:
        vals = values_of(x)
        out = np.empty(len(fitted))
        for k, pt in enumerate(fitted):
            model = predict(vals, pt)
            out[k] = (model - pt.value) / pt.value if math.isfinite(model) else 1e3
        return out

    x0 = np.array([p.initial for p in params])
    res = least_squares(
        residuals,
        x0,
        bounds=(lower, upper),
        method="trf",
        x_scale=np.maximum(np.abs(x0), 1e-12),
        xtol=1e-12,
        ftol=1e-12,
        gtol=1e-12,
        max_nfev=max_nfev,
    )
    final = residuals(res.x)
    span = upper - lower
    at_bound = tuple(
        n for n, v, lo, hi, s in zip(names, res.x, lower, upper, span) if v - lo < 1e-6 * s or hi - v < 1e-6 * s
    )
    return FitResult(
        values=values_of(res.x),
        residuals={p.id: float(r) for p, r in zip(fitted, final)},
        cost=float(0.5 * np.sum(final**2)),
        nfev=int(res.nfev),
        success=bool(res.success),
        message=str(res.message),
        at_bound=at_bound,
    )
