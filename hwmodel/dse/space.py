"""Parameter axes of a sweep, the design points they span, and the stable identity of a point.

A sweep spec's ``[parameters]`` table gives one axis per parameter, in one of these forms (TOML):

* ``name = [v1, v2, ...]`` or ``name = { values = [v1, v2, ...] }``: an explicit list (numbers, strings, booleans);
* ``name = v``: a single value (a constant input of every point);
* ``name = { min = a, max = b, step = s }``: an arithmetic range, both ends included;
* ``name = { min = a, max = b, num = n }``: ``n`` points spaced evenly, or geometrically with ``scale = "log"``;
* ``name = { min = a, max = b, factor = f }``: a geometric range ``a, a*f, a*f^2, ... <= b`` (powers of two: f = 2);
* ``name = { min = a, max = b }``: a continuous interval, for random or Latin-hypercube sampling only
  (``scale = "log"`` samples it log-uniformly).

Points are built by a full Cartesian product (``sampling = "grid"``, parameters varying in the order the spec
lists them, the last fastest, except that the evaluator's ``innermost`` parameters always vary fastest) or by
seeded sampling (``"random"``: independent uniform draws; ``"lhs"``: a Latin hypercube from scipy.stats.qmc).
The same spec and seed always give the same points in the same order.

The identity of a point is a SHA-256 digest of the evaluator's name and version and of the parameter dict in a
canonical JSON form, so the same point gets the same id in any run, on any machine; a resumed sweep skips exactly
the points whose ids are already in its results file.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from decimal import Decimal
from typing import Any

import numpy as np

from hwmodel.errors import SpecError

Scalar = int | float | str | bool
Params = dict[str, Scalar]

RANGE_KEYS = {"values", "min", "max", "step", "num", "factor", "scale"}


@dataclasses.dataclass(frozen=True)
class Axis:
    """One parameter axis: a finite list of values, or a continuous interval (random / LHS sampling only)."""

    name: str
    values: tuple[Scalar, ...] = ()
    low: float | None = None
    high: float | None = None
    integer: bool = False
    log: bool = False

    @property
    def continuous(self) -> bool:
        return not self.values

    @property
    def size(self) -> int:
        """Number of values of a discrete axis (0 for a continuous one)."""
        return len(self.values)

    def pick(self, u: float) -> Scalar:
        """The value at quantile ``u`` in [0, 1): a list index for a discrete axis, a point of the interval else."""
        if self.values:
            return self.values[min(int(u * len(self.values)), len(self.values) - 1)]
        assert self.low is not None and self.high is not None
        if self.log:
            x = math.exp(math.log(self.low) + u * (math.log(self.high) - math.log(self.low)))
        else:
            x = self.low + u * (self.high - self.low)
        if self.integer:
            return int(min(max(math.floor(x + 0.5), math.ceil(self.low)), math.floor(self.high)))
        return float(x)

    def describe(self) -> str:
        if self.values:
            shown = ", ".join(str(v) for v in self.values[:6]) + (", ..." if len(self.values) > 6 else "")
            return f"{len(self.values)} values: {shown}"
        kind = f"{'log-' if self.log else ''}uniform in [{self.low:g}, {self.high:g}]"
        return kind + (" (integers)" if self.integer else "")


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _exact_add(a: float, i: int, step: float) -> float:
    """a + i * step without binary drift (0.1 + 2 * 0.1 gives 0.3, not 0.30000000000000004)."""
    return float(Decimal(repr(a)) + i * Decimal(repr(step)))


def parse_axis(name: str, raw: Any, path: object) -> Axis:
    """Parse one ``[parameters]`` entry; an empty or malformed range is a SpecError naming the field."""
    key = f"parameters.{name}"
    if isinstance(raw, list) or (isinstance(raw, dict) and "values" in raw):
        if isinstance(raw, dict):
            extra = sorted(set(raw) - {"values"})
            if extra:
                raise SpecError(path, f"{key}.{extra[0]}", "no other key beside 'values'")
            raw = raw["values"]
            if not isinstance(raw, list):
                raise SpecError(path, f"{key}.values", "a list of values", raw)
        if not raw:
            raise SpecError(path, key, "a non-empty list of values (this range is empty)", raw)
        for i, v in enumerate(raw):
            if not isinstance(v, (int, float, str, bool)):
                raise SpecError(path, f"{key}[{i}]", "a number, string or boolean", v)
            if isinstance(v, float) and not math.isfinite(v):
                raise SpecError(path, f"{key}[{i}]", "a finite number", v)
        kinds = {type(v) for v in raw}
        if len(kinds) > 1 and not kinds <= {int, float}:
            raise SpecError(path, key, "values of one type", raw)
        if len(set(map(repr, raw))) != len(raw):
            raise SpecError(path, key, "a list without repeated values", raw)
        return Axis(name, values=tuple(raw))
    if isinstance(raw, (int, float, str, bool)):
        return parse_axis(name, [raw], path)
    if not isinstance(raw, dict):
        raise SpecError(path, key, "a value, a list of values, or a range table { min, max, step | num | factor }", raw)
    unknown = sorted(set(raw) - RANGE_KEYS)
    if unknown:
        raise SpecError(path, f"{key}.{unknown[0]}", "one of the range keys " + ", ".join(sorted(RANGE_KEYS)))
    for k in ("min", "max"):
        if k not in raw:
            raise SpecError(path, key, f"a '{k}' in the range table")
        if not _is_number(raw[k]) or not math.isfinite(raw[k]):
            raise SpecError(path, f"{key}.{k}", "a finite number", raw[k])
    lo, hi = raw["min"], raw["max"]
    if lo > hi:
        raise SpecError(path, key, f"min <= max (this range is empty: min {lo} > max {hi})")
    scale = raw.get("scale", "linear")
    if scale not in ("linear", "log"):
        raise SpecError(path, f"{key}.scale", "'linear' or 'log'", scale)
    if scale == "log" and lo <= 0:
        raise SpecError(path, f"{key}.min", "a positive number for a log-scale range", lo)
    integer = isinstance(lo, int) and isinstance(hi, int)
    chosen = [k for k in ("step", "num", "factor") if k in raw]
    if len(chosen) > 1:
        raise SpecError(path, key, f"at most one of step, num, factor (got {', '.join(chosen)})")
    if not chosen:
        return Axis(name, low=float(lo), high=float(hi), integer=integer, log=scale == "log")
    how = chosen[0]
    arg = raw[how]
    if how == "step":
        if not _is_number(arg) or not arg > 0:
            raise SpecError(path, f"{key}.step", "a positive number", arg)
        integer = integer and isinstance(arg, int)
        n = int(math.floor((hi - lo) / arg + 1e-9)) + 1
        vals: list[Scalar] = [lo + i * arg if integer else _exact_add(lo, i, arg) for i in range(n)]
    elif how == "num":
        if isinstance(arg, bool) or not isinstance(arg, int) or arg < 1:
            raise SpecError(path, f"{key}.num", "a positive integer", arg)
        if arg == 1:
            vals = [lo]
        elif scale == "log":
            vals = [float(x) for x in np.geomspace(lo, hi, arg)]
        else:
            vals = [float(x) for x in np.linspace(lo, hi, arg)]
        if integer:
            vals = list(dict.fromkeys(int(round(v)) for v in vals))
    else:
        if not _is_number(arg) or not arg > 1:
            raise SpecError(path, f"{key}.factor", "a number > 1", arg)
        if lo <= 0:
            raise SpecError(path, f"{key}.min", "a positive number for a geometric range", lo)
        vals = []
        v: float = lo
        while v <= hi * (1 + 1e-12):
            vals.append(int(v) if integer and float(v).is_integer() else v)
            v = v * arg
    if not vals:
        raise SpecError(path, key, "a range with at least one value (this range is empty)")
    return Axis(name, values=tuple(vals))


def point_count(axes: Sequence[Axis], sampling: str, samples: int) -> int:
    """How many points the axes span (before de-duplication for random / LHS sampling)."""
    if sampling == "grid":
        return math.prod(a.size for a in axes)
    return samples


def grid_points(axes: Sequence[Axis]) -> Iterator[Params]:
    """The Cartesian product of discrete axes, first axis slowest."""
    names = [a.name for a in axes]
    for combo in itertools.product(*(a.values for a in axes)):
        yield dict(zip(names, combo))


def sampled_points(axes: Sequence[Axis], sampling: str, samples: int, seed: int) -> list[Params]:
    """``samples`` points drawn with ``seed``: independent uniform draws (random) or a Latin hypercube (lhs).

    Repeated points (possible on discrete axes) are dropped, keeping the first occurrence, so the list can be
    shorter than ``samples``.
    """
    d = len(axes)
    if sampling == "lhs":
        import inspect

        from scipy.stats import qmc

        gen = np.random.default_rng(seed)
        kw = {"rng": gen} if "rng" in inspect.signature(qmc.LatinHypercube).parameters else {"seed": gen}
        u = qmc.LatinHypercube(d=d, **kw).random(samples) if d else np.zeros((samples, 0))
    else:
        u = np.random.default_rng(seed).random((samples, d))
    out: dict[str, Params] = {}
    for row in u:
        p = {a.name: a.pick(float(x)) for a, x in zip(axes, row)}
        out.setdefault(canonical_json(p), p)
    return list(out.values())


def canonical_json(obj: Mapping[str, Any]) -> str:
    """Sorted-key compact JSON; floats in shortest round-trip form (so equal values always print the same)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)


def point_id(evaluator: str, version: str, params: Mapping[str, Scalar]) -> str:
    """The stable identity of a design point: 16 hex digits of SHA-256 over evaluator, version and parameters."""
    text = canonical_json({"evaluator": evaluator, "version": version, "params": dict(params)})
    return hashlib.sha256(text.encode()).hexdigest()[:16]
