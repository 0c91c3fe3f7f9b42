"""Sweep specs (TOML) -> a validated :class:`SweepPlan`, with every problem reported before any work starts.

A sweep spec has these tables (see docs/dse.md for a full example)::

    [sweep]
    name = "draft-u280"              # default: the file name
    evaluator = "streaming-decode"   # a registered name, module:ATTR or file.py:ATTR (hwmodel.dse.evaluators)
    sampling = "grid"                # grid | random | lhs
    samples = 0                      # points to draw for random / lhs
    seed = 0                         # for random / lhs
    max_points = 1000000             # refuse larger spaces (a typo in a range should not start a week-long run)

    [parameters]                     # one axis per parameter (forms in hwmodel.dse.space)
    lanes = [16, 32, 64]
    clock_mhz = { min = 200, max = 400, step = 50 }

    [objectives]                     # metric = "min" | "max"
    latency_s = "min"
    energy_per_token_j = "min"

    [constraints]                    # metric = { min = ..., max = ... } on top of the evaluator's own limits
    lut_util = { max = 0.7 }

    [report]
    top_k = 10
    rank_by = "latency_s"            # default: the first objective
    fronts = [["latency_s", "energy_per_token_j"]]   # 2 or 3 objectives each; default: the first two (and three)
    color_by = "dsp_util"            # metric colouring the scatter plots

Checks made here, each a one-line SpecError naming the file and the field: unknown tables and keys, unknown
evaluator, unknown parameter (with the closest known name), missing required parameter, a value the evaluator does
not accept, an empty range, a continuous range on a grid, objectives and constraints on unknown metrics, a
constraint whose min exceeds its max or that lies outside the values the metric can take, and -- after screening
every point with the evaluator's cheap estimates -- a constraint set that no point of the space can satisfy.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from hwmodel.dse.evaluators import Bound, Evaluator, canonical_ref, resolve
from hwmodel.dse.space import RANGE_KEYS, Axis, Params, grid_points, parse_axis, point_count, point_id, sampled_points
from hwmodel.errors import HwmodelError, SpecError
from hwmodel.schema import build, non_negative, one_of, plain, positive, read_toml

SENSES = ("min", "max")
_TABLES = ("sweep", "parameters", "objectives", "constraints", "report")


@dataclasses.dataclass(frozen=True, kw_only=True)
class SweepSection:
    name: str = plain(default="", doc="sweep name (default: the spec file name)")
    evaluator: str = plain(doc="registered evaluator name, module:ATTR or file.py:ATTR")
    sampling: str = plain(default="grid", check=one_of("grid", "random", "lhs"))
    samples: int = plain(default=0, check=non_negative, doc="points to draw (random, lhs)")
    seed: int = plain(default=0, check=non_negative, doc="seed of random / lhs sampling")
    max_points: int = plain(default=1_000_000, check=positive, doc="refuse larger design spaces")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ConstraintBound:
    min: float | None = plain(default=None)
    max: float | None = plain(default=None)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReportSection:
    top_k: int = plain(default=10, check=positive)
    rank_by: str = plain(default="", doc="objective ranking the top-k table (default: the first)")
    fronts: tuple[tuple[str, ...], ...] = plain(default=(), doc="lists of 2 or 3 objectives")
    color_by: str = plain(default="", doc="metric colouring the scatter plots")


@dataclasses.dataclass(frozen=True)
class Point:
    """One design point: its position in the plan, its stable id and its full parameter dict."""

    index: int
    id: str
    params: Params


@dataclasses.dataclass(frozen=True)
class SweepPlan:
    """Everything a runner and a report need: validated, with the points enumerated and screened."""

    path: Path
    name: str
    evaluator_ref: str
    evaluator: Evaluator
    sweep: SweepSection
    axes: tuple[Axis, ...]
    points: tuple[Point, ...]
    objectives: tuple[tuple[str, str], ...]
    constraints: Mapping[str, Bound]
    report: ReportSection
    fronts: tuple[tuple[str, ...], ...]
    rank_by: str
    color_by: str
    screened_out: Mapping[str, tuple[dict[str, float], str]]
    """Points the screen excludes: id -> (exact metrics known, the violated constraint in words)."""

    @property
    def param_names(self) -> tuple[str, ...]:
        names = [a.name for a in self.axes]
        names += [p.name for p in self.evaluator.params if p.name not in names and p.default is not None]
        return tuple(names)

    @property
    def sense(self) -> dict[str, str]:
        return dict(self.objectives)

    def describe_constraints(self) -> list[str]:
        return [describe_bound(m, b) for m, b in self.constraints.items()]


def describe_bound(metric: str, bound: Bound) -> str:
    lo, hi = bound
    if lo is not None and hi is not None:
        return f"{lo:g} <= {metric} <= {hi:g}"
    return f"{metric} >= {lo:g}" if lo is not None else f"{metric} <= {hi:g}"


def violation(metric: str, bound: Bound, value: float) -> str | None:
    """The broken constraint in words, or None if ``value`` satisfies ``bound`` (NaN never does)."""
    lo, hi = bound
    if math.isnan(value) or (lo is not None and value < lo) or (hi is not None and value > hi):
        return f"{describe_bound(metric, bound)} (got {value:.4g})"
    return None


def _close(name: str, known: list[str]) -> str:
    """'did you mean X? ' for the known name closest to a misspelt one (similar, or one contains the other)."""
    close = difflib.get_close_matches(name, known, n=1)
    if not close:
        close = [k for k in known if k in name or name in k][:1]
    return f"did you mean '{close[0]}'? " if close else ""


def _merge(a: Bound, b: Bound) -> Bound:
    lo = [x for x in (a[0], b[0]) if x is not None]
    hi = [x for x in (a[1], b[1]) if x is not None]
    return (max(lo) if lo else None, min(hi) if hi else None)


def load_plan(path: Path | str) -> SweepPlan:
    """Read, validate, enumerate and screen a sweep spec; raises SpecError / HwmodelError before any work."""
    path = Path(path)
    table = read_toml(path)
    unknown = sorted(set(table) - set(_TABLES))
    if unknown:
        raise SpecError(
            path, unknown[0], f"a known table ({_close(unknown[0], list(_TABLES))}known: {', '.join(_TABLES)})"
        )
    if "sweep" not in table:
        raise SpecError(path, "sweep", "a [sweep] table with at least 'evaluator'")
    sweep: SweepSection = build(SweepSection, table["sweep"], path=path, prefix="sweep.")
    try:
        ref = canonical_ref(sweep.evaluator, path.parent)
        ev = resolve(ref)
    except HwmodelError as exc:
        raise SpecError(path, "sweep.evaluator", f"a usable evaluator ({exc})", sweep.evaluator) from None
    name = sweep.name or path.stem

    axes = _axes(path, table.get("parameters", {}), ev)
    axes = tuple([a for a in axes if a.name not in ev.innermost] + [a for a in axes if a.name in ev.innermost])
    if sweep.sampling == "grid":
        cont = [a.name for a in axes if a.continuous]
        if cont:
            raise SpecError(
                path,
                f"parameters.{cont[0]}",
                'a list or a range with step, num or factor (a continuous range needs sampling = "random" or "lhs")',
            )
    elif sweep.samples < 1:
        raise SpecError(
            path,
            "sweep.samples",
            f"a positive number of points to draw for sampling = {sweep.sampling!r}",
            sweep.samples,
        )
    n = point_count(axes, sweep.sampling, sweep.samples)
    if n > sweep.max_points:
        raise SpecError(
            path,
            "parameters",
            f"a design space of at most sweep.max_points = {sweep.max_points:,} points "
            f'(this one has {n:,}; narrow the ranges, use sampling = "lhs", or raise max_points)',
        )

    objectives = tuple(_objectives(path, table.get("objectives", {}), ev))
    constraints = _constraints(path, table.get("constraints", {}), ev)
    report: ReportSection = build(ReportSection, table.get("report", {}), path=path, prefix="report.")
    fronts, rank_by, color_by = _report_choices(path, report, objectives, ev)

    raw_points = (
        grid_points(axes)
        if sweep.sampling == "grid"
        else sampled_points(axes, sweep.sampling, sweep.samples, sweep.seed)
    )
    points = []
    for i, p in enumerate(raw_points):
        full = ev.complete(p)
        points.append(Point(i, point_id(ev.name, ev.version, full), full))
    screened = _screen(path, ev, points, constraints)
    return SweepPlan(
        path=path,
        name=name,
        evaluator_ref=ref,
        evaluator=ev,
        sweep=sweep,
        axes=axes,
        points=tuple(points),
        objectives=objectives,
        constraints=constraints,
        report=report,
        fronts=fronts,
        rank_by=rank_by,
        color_by=color_by,
        screened_out=screened,
    )


def with_report(
    plan: SweepPlan,
    *,
    fronts: list[tuple[str, ...]] | None = None,
    top_k: int | None = None,
    rank_by: str | None = None,
) -> SweepPlan:
    """``plan`` with other report choices (the CLI's --front, --top-k, --rank-by), validated like the spec's."""
    report = dataclasses.replace(
        plan.report,
        fronts=tuple(fronts) if fronts else plan.report.fronts,
        top_k=top_k or plan.report.top_k,
        rank_by=rank_by or plan.report.rank_by,
    )
    if report.top_k < 1:
        raise HwmodelError(f"top-k must be positive, got {report.top_k}")
    try:
        new_fronts, new_rank, color = _report_choices(plan.path, report, plan.objectives, plan.evaluator)
    except SpecError as exc:
        raise HwmodelError(f"command line: {exc.field}: expected {exc.expected}") from None
    return dataclasses.replace(plan, report=report, fronts=new_fronts, rank_by=new_rank, color_by=color)


def _flatten(raw: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``[parameters.linear] lanes = [...]`` -> ``{"linear.lanes": [...]}`` (a table without range keys nests)."""
    out: dict[str, Any] = {}
    for k, v in raw.items():
        if isinstance(v, dict) and v and not set(v) & RANGE_KEYS:
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[prefix + k] = v
    return out


def _axes(path: Path, raw: Any, ev: Evaluator) -> list[Axis]:
    if not isinstance(raw, dict):
        raise SpecError(path, "parameters", "a table of parameter = values", raw)
    raw = _flatten(raw)
    axes = list(_each_axis(path, raw, ev))
    if ev.check_space is not None:
        values = {a.name: a.values if a.values else (a.low, a.high) for a in axes}
        for pname, expected in ev.check_space(values):
            raise SpecError(path, f"parameters.{pname}", expected)
    return axes


def _each_axis(path: Path, raw: dict[str, Any], ev: Evaluator) -> Iterator[Axis]:
    known = list(ev.param_map)
    for pname, value in raw.items():
        spec = ev.param(pname)
        if spec is None:
            raise SpecError(
                path,
                f"parameters.{pname}",
                f"a parameter of evaluator '{ev.name}' "
                f"({_close(pname, known)}known: {', '.join(known)}"
                f"{'; and the patterns in its docs' if ev.extra_param else ''})",
            )
        axis = parse_axis(pname, value, path)
        if axis.continuous:
            if spec.kind not in (int, float) or spec.choices is not None:
                raise SpecError(
                    path,
                    f"parameters.{pname}",
                    f"a list of values (parameter '{pname}' takes {spec.describe()}, not a continuous range)",
                )
            for end, v in (("min", axis.low), ("max", axis.high)):
                try:
                    spec.coerce(int(v) if spec.kind is int and float(v).is_integer() else v)
                except ValueError as exc:
                    raise SpecError(path, f"parameters.{pname}.{end}", str(exc), v) from None
            yield dataclasses.replace(axis, integer=spec.kind is int or axis.integer)
            continue
        coerced = []
        for i, v in enumerate(axis.values):
            try:
                coerced.append(spec.coerce(v))
            except ValueError as exc:
                where = f"parameters.{pname}" + (f"[{i}]" if axis.size > 1 else "")
                raise SpecError(path, where, str(exc), v) from None
        yield dataclasses.replace(axis, values=tuple(coerced))
    missing = [p.name for p in ev.params if p.default is None and p.required and p.name not in raw]
    if missing:
        raise SpecError(
            path,
            f"parameters.{missing[0]}",
            f"a value for required parameter '{missing[0]}' of evaluator "
            f"'{ev.name}' ({ev.param_map[missing[0]].describe()})",
        )


def _objectives(path: Path, raw: Any, ev: Evaluator) -> Iterator[tuple[str, str]]:
    if not isinstance(raw, dict) or not raw:
        raise SpecError(path, "objectives", 'a non-empty table of metric = "min" | "max"', raw)
    known = list(ev.metric_names)
    for m, sense in raw.items():
        if m not in ev.metric_map:
            raise SpecError(
                path,
                f"objectives.{m}",
                f"a metric of evaluator '{ev.name}' ({_close(m, known)}known: {', '.join(known)})",
            )
        if sense not in SENSES:
            raise SpecError(path, f"objectives.{m}", '"min" or "max"', sense)
        yield m, sense


def _constraints(path: Path, raw: Any, ev: Evaluator) -> dict[str, Bound]:
    if not isinstance(raw, dict):
        raise SpecError(path, "constraints", "a table of metric = { min = ..., max = ... }", raw)
    merged: dict[str, Bound] = dict(ev.constraints)
    known = list(ev.metric_names)
    for m, b in raw.items():
        if m not in ev.metric_map:
            raise SpecError(
                path,
                f"constraints.{m}",
                f"a metric of evaluator '{ev.name}' ({_close(m, known)}known: {', '.join(known)})",
            )
        cb: ConstraintBound = build(ConstraintBound, b, path=path, prefix=f"constraints.{m}.")
        if cb.min is None and cb.max is None:
            raise SpecError(path, f"constraints.{m}", "a 'min' or a 'max' (or both)", b)
        if cb.min is not None and cb.max is not None and cb.min > cb.max:
            raise SpecError(
                path, f"constraints.{m}", f"min <= max (min {cb.min:g} > max {cb.max:g}: no value can satisfy it)"
            )
        merged[m] = _merge(merged.get(m, (None, None)), (cb.min, cb.max))
    for m, (lo, hi) in merged.items():
        metric = ev.metric_map[m]
        if lo is not None and hi is not None and lo > hi:
            raise SpecError(
                path,
                f"constraints.{m}",
                f"a bound compatible with the evaluator's own limit "
                f"{describe_bound(m, ev.constraints[m])} (together they leave no value)",
            )
        if (lo is not None and lo > metric.high) or (hi is not None and hi < metric.low):
            raise SpecError(
                path,
                f"constraints.{m}",
                f"a bound {metric.name} can meet (it takes values in "
                f"[{metric.low:g}, {metric.high:g}]{', ' + metric.unit if metric.unit else ''}; "
                f"{describe_bound(m, (lo, hi))} is infeasible)",
            )
    return merged


def _report_choices(
    path: Path, report: ReportSection, objectives: tuple[tuple[str, str], ...], ev: Evaluator
) -> tuple[tuple[tuple[str, ...], ...], str, str]:
    names = [m for m, _s in objectives]
    fronts = report.fronts
    if not fronts:
        fronts = ((names[0], names[1]),) if len(names) >= 2 else ()
        if len(names) >= 3:
            fronts += ((names[0], names[1], names[2]),)
    for i, f in enumerate(fronts):
        if len(f) not in (2, 3) or len(set(f)) != len(f):
            raise SpecError(path, f"report.fronts[{i}]", "2 or 3 different objectives", list(f))
        for m in f:
            if m not in names:
                raise SpecError(
                    path, f"report.fronts[{i}]", f"objectives listed in [objectives] ({', '.join(names)})", m
                )
    rank_by = report.rank_by or names[0]
    if rank_by not in names:
        raise SpecError(path, "report.rank_by", f"one of the objectives ({', '.join(names)})", rank_by)
    color_by = report.color_by or ("dsp_util" if "dsp_util" in ev.metric_map else "")
    if color_by and color_by not in ev.metric_map:
        raise SpecError(
            path,
            "report.color_by",
            f"a metric of evaluator '{ev.name}' ({_close(color_by, list(ev.metric_map))}"
            f"known: {', '.join(ev.metric_names)})",
            color_by,
        )
    return tuple(tuple(f) for f in fronts), rank_by, color_by


def _screen(
    path: Path, ev: Evaluator, points: list[Point], constraints: Mapping[str, Bound]
) -> dict[str, tuple[dict[str, float], str]]:
    """Points the evaluator's cheap screen proves infeasible; refuse the spec if that is every point."""
    if ev.screen is None or not constraints or not points:
        return {}
    out: dict[str, tuple[dict[str, float], str]] = {}
    excluded = {m: 0 for m in constraints}
    best: dict[str, float] = {}
    for pt in points:
        try:
            scr = ev.screen(pt.params)
        except HwmodelError:
            continue  # the evaluation itself will report the problem for this point
        broken = None
        for m, (lo, hi) in constraints.items():
            if m in scr.exact:
                v = float(scr.exact[m])
                fails = violation(m, (lo, hi), v) is not None
                low_v, high_v = v, v
            elif m in scr.bounds:
                low_v, high_v = scr.bounds[m]
                fails = (lo is not None and high_v < lo) or (hi is not None and low_v > hi)
            else:
                continue
            closest = low_v if hi is not None else high_v
            if m not in best or (hi is not None and closest < best[m]) or (hi is None and closest > best[m]):
                best[m] = closest
            if fails:
                excluded[m] += 1
                if broken is None:
                    got = f"got {low_v:.4g}" if m in scr.exact else f"at best {closest:.4g}"
                    broken = f"{describe_bound(m, (lo, hi))} ({got})"
        if broken is not None:
            out[pt.id] = ({k: float(v) for k, v in scr.exact.items()}, broken)
    if len(out) == len(points):
        n = len(points)
        alone = [m for m, k in excluded.items() if k == n]
        if alone:
            m = alone[0]
            raise SpecError(
                path,
                f"constraints.{m}",
                f"a constraint some design point can meet: "
                f"{describe_bound(m, constraints[m])} fails at all {n:,} points "
                f"(closest value {best[m]:.4g}), before any simulation",
            )
        parts = ", ".join(f"{describe_bound(m, constraints[m])} excludes {k:,}" for m, k in excluded.items() if k)
        raise SpecError(
            path,
            "constraints",
            f"a constraint set some design point can meet: together they exclude "
            f"all {n:,} points ({parts}), before any simulation",
        )
    return out
