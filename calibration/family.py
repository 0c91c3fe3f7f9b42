"""A *model family* ties the generic machinery (measurements, fit, report, parameter files) to one device model.

A family declares its free parameters (:class:`calibration.fit.Param`, fitted by least squares), the values it
*chose* by looking at the same fitted points outside least squares (``choices``: a profile over a discrete
parameter, a design value inferred from a fitted figure -- free parameters all the same), its fixed constants, the
measurement file it is calibrated on, the condition columns it reads, and ``predict(values, point)``. Its
*accounting* (:func:`accounting`) counts points fitted, free parameters (least squares + choices) and degrees of
freedom (points fitted - free parameters). Everything else is shared:

* :func:`fit_family` -- least squares on the ``fitted`` points; :func:`write_fit` stores the result in
  ``calibration/params/<family>.json`` (what the device model loads);
* :func:`report_family` -- every point, fitted and predicted, against the committed parameters.

Each family registers itself from its own module (``FAMILY = register(Family(...))``) in :data:`REGISTRY`, the
project's one registry mechanism (:mod:`hwmodel.registry`): the modules of this package, and a user's family
from a file in ``HWMODEL_PLUGINS`` (or :func:`hwmodel.registry.load_plugin`). Listings (:func:`names`, reports)
follow each family's ``rank``, then registration order. Any other family is reachable by its import path,
``hwmodel calibrate --family fpga.calibration:FAMILY``.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from calibration.fit import FitResult, Param, fit
from calibration.measurements import MEASUREMENTS_DIR, Measurement, load_measurements
from calibration.params import load_values, params_path, write_params_file
from calibration.report import ReportRow, build_report
from hwmodel.errors import HwmodelError
from hwmodel.registry import Registry


@dataclasses.dataclass(frozen=True)
class Family:
    """A calibrated device model (see the module docstring)."""

    name: str
    description: str
    params: tuple[Param, ...]
    fixed: Mapping[str, float]
    fixed_docs: Mapping[str, str]
    conditions: tuple[str, ...]
    predict: Callable[[Mapping[str, float], Measurement], float]
    reset: Callable[[], None] = lambda: None  # drop caches after the parameter file changed
    #: the fitted values as the device model runs them (e.g. rounded to whole cycles); reports use these, so a
    #: fitted point's "model" value is what every study computes with the committed parameters
    as_deployed: Callable[[Mapping[str, float]], Mapping[str, float]] = lambda values: values
    #: values picked by looking at the fitted points outside least squares (name -> how): free parameters too
    choices: Mapping[str, str] = dataclasses.field(default_factory=dict)
    #: where the family stands in listings and reports (lowest first; a user's family without one comes last)
    rank: float = 100

    @property
    def free_params(self) -> int:
        """Least-squares parameters plus the values chosen on the same points."""
        return len(self.params) + len(self.choices)

    @property
    def measurements_path(self) -> Path:
        return MEASUREMENTS_DIR / f"{self.name}.csv"

    @property
    def params_path(self) -> Path:
        return params_path(self.name)


@dataclasses.dataclass(frozen=True)
class Accounting:
    """How many points a family's parameters were matched to, and how many parameters did the matching."""

    family: str
    points_fitted: int
    least_squares: tuple[str, ...]
    choices: Mapping[str, str]
    points_predicted: int
    points_fitted_derived: int

    @property
    def free_params(self) -> int:
        return len(self.least_squares) + len(self.choices)

    @property
    def degrees_of_freedom(self) -> int:
        """Fitted points minus free parameters: 0 means every fitted point is matched by construction."""
        return self.points_fitted - self.free_params

    def as_dict(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "points_fitted": self.points_fitted,
            "free_params": self.free_params,
            "degrees_of_freedom": self.degrees_of_freedom,
            "least_squares": list(self.least_squares),
            "choices": dict(self.choices),
            "points_predicted": self.points_predicted,
            "points_fitted_derived": self.points_fitted_derived,
        }


def accounting(fam: Family, points: Sequence[Measurement] | None = None) -> Accounting:
    """Points fitted, free parameters and degrees of freedom of ``fam`` on ``points`` (default: its own file)."""
    pts = list(points) if points is not None else load_measurements(fam.measurements_path)
    return Accounting(
        family=fam.name,
        points_fitted=sum(p.role == "fitted" for p in pts),
        least_squares=tuple(p.name for p in fam.params),
        choices=dict(fam.choices),
        points_predicted=sum(p.role == "predicted" for p in pts),
        points_fitted_derived=sum(p.role == "fitted-derived" for p in pts),
    )


#: the registered families (filled from the modules of this package on first use; :func:`register`)
REGISTRY: Registry[Family] = Registry("calibration family", "calibration", rank=lambda f: f.rank)


def register(fam: Family) -> Family:
    """Register ``fam`` under its name; called at import by the module defining it."""
    return REGISTRY.register(fam.name, fam)


def names() -> list[str]:
    """The registered families' names, in ``rank`` order (the order reports list them in)."""
    return REGISTRY.names()


def get_family(name: str) -> Family:
    """A registered family by name, or any family by import path ``"package.module:ATTR"``."""
    if ":" not in name:
        return REGISTRY.get(name)
    target = name
    module, attr = target.split(":", 1)
    try:
        fam = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise HwmodelError(f"calibration family {name!r}: cannot import {target} ({exc})") from None
    if not isinstance(fam, Family):
        raise HwmodelError(f"calibration family {name!r}: {target} is not a calibration.family.Family")
    return fam


def fit_family(fam: Family, points: Sequence[Measurement] | None = None) -> FitResult:
    """Fit ``fam``'s parameters to its ``fitted`` points."""
    pts = list(points) if points is not None else load_measurements(fam.measurements_path)
    return fit(pts, fam.predict, fam.params, fixed=fam.fixed)


def write_fit(
    fam: Family, result: FitResult, path: Path | str | None = None, measurements: Path | str | None = None
) -> Path:
    """Store a fit as ``fam``'s parameter file (values with bounds, units and meaning; the fit record)."""
    target = Path(path) if path is not None else fam.params_path
    params = {
        p.name: {"value": result.values[p.name], "unit": p.unit, "lower": p.lower, "upper": p.upper, "doc": p.doc}
        for p in fam.params
    }
    fixed = {k: {"value": v, "doc": fam.fixed_docs.get(k, "")} for k, v in fam.fixed.items()}
    record: dict[str, Any] = {
        "command": f"hwmodel calibrate --family {fam.name} --fit",
        "measurements": _relative(Path(measurements) if measurements else fam.measurements_path),
        "fitted_points": {k: {"rel_error": v} for k, v in result.residuals.items()},
        "cost": result.cost,
        "success": result.success,
        "at_bound": list(result.at_bound),
    }
    write_params_file(target, fam.name, params, fixed, record, fam.description)
    fam.reset()
    return target


def report_family(
    fam: Family, points: Sequence[Measurement] | None = None, params_file: Path | str | None = None
) -> list[ReportRow]:
    """Every point against the parameters of ``params_file`` (default: the committed ones), each point's model
    value computed through the one runner (:mod:`hwmodel.studies.runner`, in this process)."""
    from hwmodel.studies.runner import run_points

    pts = list(points) if points is not None else load_measurements(fam.measurements_path)
    values = dict(fam.as_deployed(load_values(params_file if params_file is not None else fam.params_path)))
    # a registered family is found by name in any process; another family object is evaluated here by itself
    fn: Any = POINT_FN if fam.name in REGISTRY and REGISTRY.get(fam.name) is fam else functools.partial(_predict, fam)
    keys = [f"{i:05d}:{p.id}" for i, p in enumerate(pts)]
    specs = [{"family": fam.name, "values": values, "point": dataclasses.asdict(p)} for p in pts]
    run = run_points(fn, list(zip(keys, specs)), workers=1)
    model = {id(p): run.results[k] for k, p in zip(keys, pts)}
    return build_report(pts, lambda pt: model[id(pt)], fam.conditions)


POINT_FN = "calibration.family:predict_point"


def predict_point(spec: Mapping[str, Any]) -> float:
    """One point of a family's report (:func:`report_family`): the model's value at a measured point under the
    given parameter values."""
    return _predict(get_family(spec["family"]), spec)


def _predict(fam: Family, spec: Mapping[str, Any]) -> float:
    return float(fam.predict(spec["values"], Measurement(**spec["point"])))


def _relative(path: Path) -> str:
    root = Path(__file__).resolve().parent.parent
    try:
        return str(path.resolve().relative_to(root))
    except ValueError:
        return str(path)
