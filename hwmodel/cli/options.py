"""Option types and decorators shared by every command, so the same kind of value is parsed, bounded and
refused the same way everywhere (docs/errors.md):

* :class:`Finite`: a float range that refuses NaN and infinities (click's ``FloatRange`` lets ``nan`` through);
* :func:`count`: a bounded integer count (the upper bound is part of the message);
* :data:`SEED`: a random seed, an integer in [0, 2**32 - 1] (numpy refuses negative seeds with a traceback);
* :class:`SchedulerAddress`: a Dask scheduler address, checked before dask sees it;
* :func:`parse_range`: a numeric range ``A:B:S`` or a comma list, at most :data:`MAX_RANGE_POINTS` values;
* :func:`clock_option`: THE kernel-clock option, ``--clock-mhz`` (MHz) on every command. The older spellings
  (``--freq-mhz``, ``--clock-hz`` in Hz) still work, hidden from ``--help`` and silent (so scripts and
  ``--json`` output keep working). The
  board's limits are checked by the model (:func:`hwmodel.domains.check_kernel_clock`) wherever the clock is
  used, so a clock from a design file, this option or ``--freq-range`` is bounded the same way.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from typing import Any

import click

from hwmodel.errors import HwmodelError

MAX_CLOCK_MHZ = 100_000.0
"""Parse-time sanity bound of a clock option (100 GHz); the device's own limits are checked by the model."""


class Finite(click.FloatRange):
    """A float (optionally bounded) that must be finite: ``nan``, ``inf`` and ``-inf`` are refused. With
    ``allow_inf`` (an option whose documented meaning includes ``inf``, e.g. an arrival rate) ``+inf`` passes."""

    name = "number"

    def __init__(self, *args: Any, allow_inf: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.allow_inf = allow_inf

    def _refused(self, v: float) -> bool:
        return math.isnan(v) or (math.isinf(v) and not (self.allow_inf and v > 0))

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        what = "a number (not NaN; inf allowed)" if self.allow_inf else "a finite number"
        if isinstance(value, str):
            try:
                probe = float(value)
            except ValueError:
                probe = 0.0
            if self._refused(probe):
                self.fail(f"expected {what}, got {value!r}", param, ctx)
        elif isinstance(value, float) and self._refused(value):
            self.fail(f"expected {what}, got {value!r}", param, ctx)
        return super().convert(value, param, ctx)


def finite(
    min: float | None = None, max: float | None = None, *, min_open: bool = False, max_open: bool = False
) -> Finite:
    return Finite(min=min, max=max, min_open=min_open, max_open=max_open)


def count(min: int = 1, max: int = 1_000_000) -> click.IntRange:
    """A count of things (tokens, requests, steps, points): an integer in ``[min, max]``."""
    return click.IntRange(min=min, max=max)


SEED = click.IntRange(min=0, max=2**32 - 1)
"""A random seed: numpy's generators take non-negative integers; 32 bits covers every seed written so far."""

_ADDRESS = re.compile(r"^(?:(tcp|tls|ucx|inproc|ws|wss)://)?(\[[0-9a-fA-F:]+\]|[A-Za-z0-9_.\-]+)(?::(\d{1,5}))?/?$")


class SchedulerAddress(click.ParamType):
    """A Dask scheduler address: ``[tcp|tls|ucx|inproc|ws|wss://]HOST[:PORT]`` with a port in 1..65535."""

    name = "address"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        text = str(value).strip()
        m = _ADDRESS.match(text)
        if m is None or (m.group(1) is None and m.group(3) is None):
            self.fail(f"expected a Dask scheduler address such as tcp://10.0.0.5:8786, got {value!r}", param, ctx)
        port = m.group(3)
        if port is not None and not 1 <= int(port) <= 65535:
            self.fail(f"expected a port in 1..65535, got {port} in {value!r}", param, ctx)
        return text


class AliasOption(click.Option):
    """An option whose first name is the documented one; the others are hidden, deprecated aliases (not shown
    by ``--help``, still accepted)."""

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        saved = self.opts
        self.opts = saved[:1]
        try:
            return super().get_help_record(ctx)
        finally:
            self.opts = saved

    @property
    def documented_opts(self) -> list[str]:
        return self.opts[:1]


def clock_option(
    param: str = "clock_mhz",
    *,
    unit: str = "MHz",
    default: float | None = None,
    help: str = "Kernel clock in MHz [default: the design's].",
    required: bool = False,
    legacy: tuple[str, ...] = ("--freq-mhz", "--clock-hz"),
    name: str = "--clock-mhz",
) -> Callable[[Any], Any]:
    """The kernel-clock option ``name`` (``--clock-mhz``; a command with two clocks uses ``--X-clock-mhz``) for a
    command whose function takes ``param`` (in ``unit``: "MHz" or "Hz"). ``legacy`` spellings are accepted as
    hidden, deprecated aliases (``--clock-hz`` in Hz, every other in MHz). The value must be finite and positive;
    the board's range is checked by the model."""
    if unit not in ("MHz", "Hz") or not name.endswith("-mhz"):
        raise ValueError(unit)
    scale = 1e6 if unit == "Hz" else 1.0
    dest_main = "_clock_" + name.strip("-").replace("-", "_")
    aliases = {old: dest_main + "_alias_" + old.strip("-").replace("-", "_") for old in legacy}

    def decorate(f: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(f)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            given = [(name, kwargs.pop(dest)) for name, dest in aliases.items()]
            given = [(name, v) for name, v in given if v is not None]
            mhz = kwargs.pop(dest_main)
            if given:
                old, v = given[0]
                src = click.get_current_context().get_parameter_source(dest_main)
                explicit = mhz is not None and src not in (click.core.ParameterSource.DEFAULT, None)
                if explicit or len(given) > 1:
                    raise click.UsageError(f"give the clock once, as {name} (got {old} too)")
                mhz = v / 1e6 if old == "--clock-hz" else v
            if mhz is None and required:
                raise click.UsageError(f"Missing option '{name}'.")
            kwargs[param] = None if mhz is None else mhz * scale
            return f(*args, **kwargs)

        for old, dest in aliases.items():
            in_hz = old == "--clock-hz"
            wrapper = click.option(
                old,
                dest,
                type=finite(min=0, max=MAX_CLOCK_MHZ * (1e6 if in_hz else 1), min_open=True),
                default=None,
                hidden=True,
                help=f"Deprecated: use {name} ({'Hz' if in_hz else 'MHz'}).",
            )(wrapper)
        wrapper = click.option(
            name,
            dest_main,
            type=finite(min=0, max=MAX_CLOCK_MHZ, min_open=True),
            default=default,
            show_default=default is not None,
            help=help,
        )(wrapper)
        return wrapper

    return decorate


MAX_RANGE_POINTS = 10_000
"""The most values one range option expands to."""


def parse_range(text: str | None, what: str) -> list[float] | None:
    """'A:B:S' -> [A, A+S, ..., <= B]; 'A,B,C' -> the list."""
    if text is None:
        return None
    try:
        if ":" in text:
            a, b, s = (float(x) for x in text.split(":"))
            if not all(map(math.isfinite, (a, b, s))) or s <= 0 or b < a or (b - a) / s >= MAX_RANGE_POINTS:
                raise ValueError
            n = int((b - a) / s + 1e-9) + 1
            return [a + i * s for i in range(n)]
        vals = [float(x) for x in text.split(",")]
        if not all(map(math.isfinite, vals)) or len(vals) > MAX_RANGE_POINTS:
            raise ValueError
        return vals
    except ValueError:
        raise HwmodelError(
            f"{what}: expected A:B:S (start:stop:step, step > 0) or a comma list of finite numbers "
            f"(at most {MAX_RANGE_POINTS} points), got '{text}'"
        ) from None
