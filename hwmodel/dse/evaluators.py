"""Evaluators: what a sweep computes at each design point, and the registry a spec names them from.

An :class:`Evaluator` maps a parameter dict to a record of metrics (objectives and constraint values). It declares
the parameters it accepts (with their types and allowed values, so a spec with an unknown parameter or a bad value
is refused before any work starts) and the metrics it returns (with the range each can take, so a constraint that
no point could ever meet is refused too). An optional ``screen`` gives, cheaply and without the full evaluation,
some metrics exactly (e.g. resource use from an analytic estimate) and bounds on others (e.g. a latency floor);
the planner uses it to drop points that cannot meet the constraints and to refuse a constraint set that no point
of the space can meet.

A spec's ``evaluator`` is one of:

* a registered name (``streaming-decode``; see :func:`names` and :data:`EVALUATORS`: each built-in registers
  itself from its own file, ``hwmodel/dse/*_eval.py``, and a user's from a file in ``HWMODEL_PLUGINS``);
* ``package.module:ATTRIBUTE`` naming an Evaluator object in an importable module;
* ``path/to/file.py:ATTRIBUTE`` naming an Evaluator object in a Python file (relative to the spec file).

Worker processes (local or Dask) receive only this reference and resolve it themselves, so an evaluator never has
to be pickled; a Dask cluster needs the package (and any evaluator file) installed at the same path on its workers.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import math
import os
from collections.abc import Callable, Hashable, Iterable, Mapping
from pathlib import Path
from typing import Any

from hwmodel.dse.space import Params, Scalar
from hwmodel.errors import HwmodelError, UnknownNameError
from hwmodel.registry import Registry, load_plugin

_KIND_WORDS = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}


@dataclasses.dataclass(frozen=True)
class Param:
    """A parameter an evaluator accepts: its type, allowed values or interval, and default (None: required)."""

    name: str
    kind: type
    doc: str = ""
    unit: str = ""
    choices: tuple[Scalar, ...] | None = None
    low: float | None = None
    high: float | None = None
    default: Scalar | None = None
    required: bool = True
    """With no default: True means a spec must give a value; False means the evaluator decides when absent."""

    def coerce(self, value: Any) -> Scalar:
        """The value converted to this parameter's type; raises ValueError(expected ...) if it does not fit."""
        kind = self.kind
        if kind is bool:
            if not isinstance(value, bool):
                raise ValueError("true or false")
            v: Scalar = value
        elif kind is int:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or float(value) != int(value):
                raise ValueError("an integer")
            v = int(value)
        elif kind is float:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError("a finite number")
            v = float(value)
        elif kind is str:
            if not isinstance(value, str):
                raise ValueError("a string")
            v = value
        else:  # pragma: no cover - a programming error in an evaluator declaration
            raise TypeError(f"parameter {self.name}: unsupported kind {kind!r}")
        if self.choices is not None and v not in self.choices:
            raise ValueError("one of " + ", ".join(repr(c) for c in self.choices))
        if self.low is not None and v < self.low:  # type: ignore[operator]
            raise ValueError(f"at least {self.low:g}")
        if self.high is not None and v > self.high:  # type: ignore[operator]
            raise ValueError(f"at most {self.high:g}")
        return v

    def describe(self) -> str:
        what = _KIND_WORDS.get(self.kind, str(self.kind))
        if self.choices is not None:
            what = "one of " + ", ".join(str(c) for c in self.choices)
        elif self.low is not None or self.high is not None:
            lo = self.low if self.low is not None else "-inf"
            hi = self.high if self.high is not None else "inf"
            what += f" in [{lo}, {hi}]"
        dflt = f"default {self.default}" if self.default is not None else ("required" if self.required else "optional")
        return f"{what}; {dflt}"


@dataclasses.dataclass(frozen=True)
class Metric:
    """A quantity an evaluator returns, with the interval it can take (used to refuse impossible constraints)."""

    name: str
    unit: str = ""
    doc: str = ""
    low: float = -math.inf
    high: float = math.inf


@dataclasses.dataclass(frozen=True)
class Screen:
    """What an evaluator knows about a point before evaluating it: some metrics exactly, bounds on others."""

    exact: Mapping[str, float] = dataclasses.field(default_factory=dict)
    bounds: Mapping[str, tuple[float, float]] = dataclasses.field(default_factory=dict)


Bound = tuple[float | None, float | None]


def decode_floor_screen(
    exact: Mapping[str, float], llm: Any, weight_bits: int, kv_bits: int, ctx: int, peak_bw_bytes_per_s: float
) -> Screen:
    """A decode evaluator's screen: ``exact`` metrics, and latency bounded below by the decoder weights and KV cache
    of ``ctx`` tokens at the board's peak HBM bandwidth (every model streams at least those bytes, no faster)."""
    floor_s = _decode_floor_s(llm, weight_bits, kv_bits, ctx, peak_bw_bytes_per_s)
    return Screen(exact=exact, bounds={"latency_s": (floor_s, math.inf), "tokens_per_s": (0.0, 1.0 / floor_s)})


@functools.lru_cache(maxsize=256)
def _decode_floor_s(llm: Any, weight_bits: int, kv_bits: int, ctx: int, peak_bw_bytes_per_s: float) -> float:
    """The decode latency floor of :func:`decode_floor_screen`, memoized (a sweep screens every clock of a design
    with the same one; 36 us a call, ~3 % of an 864-point sweep's wall time on 2 workers)."""
    from hwmodel.bounds import decode_bytes

    b = decode_bytes(llm, weight_bits, kv_bits, ctx)
    return (b.weights_bytes + b.kv_bytes) / peak_bw_bytes_per_s


@dataclasses.dataclass(frozen=True)
class Evaluator:
    """A named, versioned function from a parameter dict to metrics.

    ``version`` is part of every point's identity: bump it when the model behind the evaluator changes, so a resumed
    sweep does not mix results of two model versions. ``constraints`` are always applied (physical limits such as
    "fits the board"); a spec can only add to them.
    """

    name: str
    version: str
    doc: str
    params: tuple[Param, ...]
    metrics: tuple[Metric, ...]
    evaluate: Callable[[Params], Mapping[str, float]]
    screen: Callable[[Params], Screen] | None = None
    constraints: Mapping[str, Bound] = dataclasses.field(default_factory=dict)
    innermost: tuple[str, ...] = ()
    """Parameters a grid varies fastest (after all others), because consecutive points that differ only in them
    share work the evaluator caches (e.g. a token program compiled once, run at several clocks)."""
    affinity: Callable[[Params], Hashable] | None = None
    """Points with equal keys share work the evaluator caches beyond ``innermost`` (e.g. the parts of a compiled
    program that designs differing in one engine have in common): the runner gives them to one worker, in a chunk."""
    extra_param: Callable[[str], Param | None] | None = None
    """Parameters beyond ``params`` whose names follow a pattern (e.g. ``<engine>.lanes``): name -> Param or None."""
    check_space: Callable[[Mapping[str, tuple[Scalar, ...]]], Iterable[tuple[str, str]]] | None = None
    """Checks of the whole space before any work (e.g. every design named has the engines the parameters name):
    given each parameter's values, yields (parameter, expected) for each problem."""
    preload: tuple[str, ...] = ()
    """Modules its points need that its own module imports lazily: a fork server imports them once for all the
    workers it starts (hwmodel.dse.runner), instead of each worker at its first point."""

    def __post_init__(self) -> None:
        names = {m.name for m in self.metrics}
        for c in self.constraints:
            if c not in names:  # pragma: no cover - a programming error in an evaluator declaration
                raise TypeError(f"evaluator {self.name}: constraint on unknown metric {c}")

    @functools.cached_property
    def param_map(self) -> dict[str, Param]:
        return {p.name: p for p in self.params}

    @functools.cached_property
    def metric_map(self) -> dict[str, Metric]:
        return {m.name: m for m in self.metrics}

    def param(self, name: str) -> Param | None:
        """The declaration of parameter ``name`` (a fixed one or one matched by ``extra_param``), or None."""
        if name in self.param_map:
            return self.param_map[name]
        return self.extra_param(name) if self.extra_param is not None else None

    @property
    def metric_names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.metrics)

    def complete(self, params: Mapping[str, Scalar]) -> Params:
        """The parameters with defaults filled in for those not given."""
        out = dict(params)
        for p in self.params:
            if p.name not in out and p.default is not None:
                out[p.name] = p.default
        return out

    def run(self, params: Params) -> dict[str, float]:
        """Evaluate one point: every declared metric as a float (missing or extra metrics are evaluator bugs)."""
        raw = self.evaluate(params)
        missing = [m for m in self.metric_names if m not in raw]
        if missing:
            raise TypeError(f"evaluator {self.name} returned no value for metric(s) {', '.join(missing)}")
        return {m: float(raw[m]) for m in self.metric_names}


# ---------------------------------------------------------------------------------------------------- registry
#: the registered evaluators: the built-ins register themselves from their own files (``hwmodel/dse/*_eval.py``),
#: a user's from a file loaded by :func:`hwmodel.registry.load_plugin` (``HWMODEL_PLUGINS`` in every process,
#: workers included) -- the project's one registry mechanism
EVALUATORS: Registry[Evaluator] = Registry("evaluator", "hwmodel.dse", suffix="_eval")


def register(evaluator: Evaluator, name: str | None = None, *, replace: bool = False) -> Evaluator:
    """Register ``evaluator`` under ``name`` (default: its own name); called at import by the file defining it."""
    return EVALUATORS.register(name or evaluator.name, evaluator, replace=replace)


def names() -> list[str]:
    return sorted(EVALUATORS.names())


#: the module each built-in evaluator registers itself from: a spec naming one imports that module alone instead
#: of every built-in's (the replay evaluator's imports the system-A simulator: ~0.05 s of a streaming sweep's
#: planning); tests/test_dse_spec.py checks the table against the registry
BUILTIN_MODULES = {
    "streaming-decode": "hwmodel.dse.streaming_eval",
    "instruction-decode": "hwmodel.dse.instruction_eval",
    "reasoning-replay": "hwmodel.dse.replay_eval",
}


def _builtin(ref: str) -> Evaluator | None:
    """The built-in evaluator named ``ref`` from its own module, or None: not a built-in's name, or plugin files
    named in ``HWMODEL_PLUGINS`` (which may replace a built-in: the whole registry decides)."""
    module = BUILTIN_MODULES.get(ref)
    if module is None or os.environ.get("HWMODEL_PLUGINS", "").strip():
        return None
    ev = getattr(importlib.import_module(module), "EVALUATOR", None)
    return ev if isinstance(ev, Evaluator) and ev.name == ref else None


def canonical_ref(ref: str, base_dir: Path | None = None) -> str:
    """A reference any process can resolve: registered names as they are, file paths made absolute."""
    if _builtin(ref) is not None or ref in EVALUATORS:
        return ref
    if ":" not in ref:
        raise UnknownNameError("evaluator", ref, names() + ["<module>:<ATTRIBUTE>", "<file.py>:<ATTRIBUTE>"])
    target, attr = ref.rsplit(":", 1)
    if target.endswith(".py"):
        path = Path(target)
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        path = path.resolve()
        if not path.is_file():
            raise HwmodelError(f"evaluator file {path} does not exist (from evaluator = {ref!r})")
        return f"{path}:{attr}"
    return ref


@functools.lru_cache(maxsize=32)
def resolve(ref: str) -> Evaluator:
    """The Evaluator a canonical reference names (cached per process): a registered name, or the object at
    ``module:ATTRIBUTE`` / ``file.py:ATTRIBUTE`` (a file is loaded with :func:`hwmodel.registry.load_plugin`, the
    same way as every user file)."""
    ev = _builtin(ref)
    if ev is not None:
        return ev
    if ref in EVALUATORS:
        return EVALUATORS.get(ref)
    if ":" not in ref:
        raise UnknownNameError("evaluator", ref, names())
    module_name, attr = ref.rsplit(":", 1)
    module: Any
    if module_name.endswith(".py"):
        module = load_plugin(module_name)
    else:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            raise HwmodelError(f"evaluator {ref!r}: cannot import module {module_name!r} ({exc})") from None
    obj = getattr(module, attr, None)
    if not isinstance(obj, Evaluator):
        raise HwmodelError(f"evaluator {ref!r}: {module_name} has no Evaluator object named {attr!r}")
    return obj
