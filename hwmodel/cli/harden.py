"""Uniform option hygiene over the whole command tree, applied once after every ``cmd_*`` module is imported
(:func:`harden`), so commands added later inherit it without edits:

* every float option refuses NaN and infinities (click's ``FLOAT`` and ``FloatRange`` accept ``nan``): the type is
  swapped for :class:`hwmodel.cli.options.Finite` with the same bounds (an option whose default is ``inf`` or
  whose help text gives ``inf`` a meaning keeps ``+inf``);
* every ``--seed`` is an integer in [0, 2**32 - 1] (:data:`hwmodel.cli.options.SEED`);
* a free-text ``--scheduler`` (a Dask address) is checked by :class:`hwmodel.cli.options.SchedulerAddress`;
* every command gets a heartbeat on stderr when it runs longer than 1.5 s (:mod:`hwmodel.cli.progress`);
* one set of global output flags: every command accepts ``--quiet`` (no progress bar, no heartbeat), also given
  as ``hwmodel --quiet CMD``; ``hwmodel --json CMD`` is the command's own ``--json`` (refused, in one line, by a
  command that has no JSON output);
* every integer option without an upper bound gets one: :data:`hwmodel.domains.MAX_BYTES` for a byte count or
  offset, :data:`hwmodel.domains.MAX_COUNT` for any other count (a huge value failed deep inside numpy).

:func:`walk` yields every (command path, parameter) pair; the test suite uses it to check that every visible option
has help text and that no visible option spells the clock other than ``--…clock-mhz``.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterator
from typing import Any

import click

from hwmodel.cli.base import JSON_KEY, QUIET_KEY, quiet_option
from hwmodel.cli.options import SEED, Finite, SchedulerAddress
from hwmodel.domains import MAX_BYTES, MAX_COUNT


def walk(cmd: click.Command, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    """Every command (groups included) under ``cmd``, with its path of names."""
    yield path, cmd
    if isinstance(cmd, click.Group):
        for name, sub in sorted(cmd.commands.items()):
            yield from walk(sub, (*path, name))


def _allows_inf(p: click.Parameter) -> bool:
    """An option whose default is +inf or whose help gives ``inf`` a meaning keeps +inf (NaN is still refused)."""
    default = p.default if not callable(p.default) else None
    helptext = getattr(p, "help", None) or ""
    return (isinstance(default, float) and math.isinf(default) and default > 0) or re.search(
        r"\binf\b", helptext
    ) is not None


def _finite_twin(p: click.Parameter) -> click.ParamType | None:
    t = p.type
    if isinstance(t, Finite):
        return None
    inf = _allows_inf(p)
    if isinstance(t, click.FloatRange):
        return Finite(min=t.min, max=t.max, min_open=t.min_open, max_open=t.max_open, clamp=t.clamp, allow_inf=inf)
    if isinstance(t, click.types.FloatParamType):
        return Finite(allow_inf=inf)
    return None


def _bounded_int(p: click.Parameter) -> click.IntRange | None:
    """The bounded twin of an integer option with no upper bound (None when it has one, or its default is above)."""
    t = p.type
    if not isinstance(t, click.types.IntParamType) or getattr(t, "max", None) is not None:
        return None
    name = (p.name or "").lower()
    hi = MAX_BYTES if "bytes" in name or "offset" in name else MAX_COUNT
    default = p.default if not callable(p.default) else None
    if isinstance(default, int) and default > hi:
        return None
    lo = getattr(t, "min", None)
    return click.IntRange(min=lo, max=hi, min_open=getattr(t, "min_open", False))


def _global_output_flags(cmd: click.Command, callback: Any) -> Any:
    """``callback`` under the global flags: ``--quiet`` (a quiet scope), ``hwmodel --json`` (the own --json)."""
    from hwmodel.cli.progress import quiet_scope

    has_json = any(p.name == "as_json" for p in cmd.params)

    @functools.wraps(callback)
    def run(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        if ctx.meta.get(JSON_KEY):
            if not has_json:
                raise click.UsageError(f"'{ctx.command_path}' has no JSON output (hwmodel --json)", ctx)
            kwargs["as_json"] = True
        if ctx.meta.get(QUIET_KEY):
            with quiet_scope():
                return callback(*args, **kwargs)
        return callback(*args, **kwargs)

    run._hwmodel_flags = True  # type: ignore[attr-defined]
    return run


def harden(root: click.Command) -> None:
    """Apply the module docstring's rules to every parameter under ``root`` (idempotent)."""
    from hwmodel.cli.progress import with_heartbeat

    for path, cmd in walk(root):
        runs = not isinstance(cmd, click.Group) or cmd.invoke_without_command  # e.g. `hwmodel reproduce`
        if runs and cmd.callback is not None and not getattr(cmd.callback, "_hwmodel_flags", False):
            if not any(isinstance(p, click.Option) and "--quiet" in p.opts for p in cmd.params):
                quiet_option(cmd)
            inner = cmd.callback if isinstance(cmd, click.Group) else with_heartbeat(" ".join(path), cmd.callback)
            cmd.callback = _global_output_flags(cmd, inner)  # (a group's sub-commands have their own heartbeat)
        for p in cmd.params:
            bounded = _bounded_int(p)
            if bounded is not None and not (isinstance(p, click.Option) and "--seed" in p.opts):
                p.type = bounded
            twin = _finite_twin(p)
            if twin is not None:
                p.type = twin
            elif isinstance(p, click.Option) and "--seed" in p.opts and isinstance(p.type, click.types.IntParamType):
                lo = getattr(p.type, "min", None)
                if lo is None or lo < 0 or getattr(p.type, "max", None) is None:
                    p.type = SEED
            elif (
                isinstance(p, click.Option)
                and "--scheduler" in p.opts
                and p.default is None
                and isinstance(p.type, click.types.StringParamType)
            ):  # a Dask address (serving's names a policy)
                p.type = SchedulerAddress()
