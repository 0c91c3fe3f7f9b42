"""Uniform option hygiene over the whole command tree, applied once after every ``cmd_*`` module is imported
(:func:`harden`), so commands added later inherit it without edits:

* every float option refuses NaN and infinities (click's ``FLOAT`` and ``FloatRange`` accept ``nan``): the type is
  swapped for :class:`hwmodel.cli.options.Finite` with the same bounds (an option whose default is ``inf`` or
  whose help text gives ``inf`` a meaning keeps ``+inf``);
* every ``--seed`` is an integer in [0, 2**32 - 1] (:data:`hwmodel.cli.options.SEED`);
* a free-text ``--scheduler`` (a Dask address) is checked by :class:`hwmodel.cli.options.SchedulerAddress`;
* every command gets a heartbeat on stderr when it runs longer than 1.5 s (:mod:`hwmodel.cli.progress`).

:func:`walk` yields every (command path, parameter) pair; the test suite uses it to check that every visible option
has help text and that no visible option spells the clock other than ``--…clock-mhz``.
"""
from __future__ import annotations

import math
import re
from collections.abc import Iterator

import click

from hwmodel.cli.options import SEED, Finite, SchedulerAddress


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
    return (isinstance(default, float) and math.isinf(default) and default > 0) or \
        re.search(r"\binf\b", helptext) is not None


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


def harden(root: click.Command) -> None:
    """Apply the module docstring's rules to every parameter under ``root`` (idempotent)."""
    from hwmodel.cli.progress import with_heartbeat

    for path, cmd in walk(root):
        if not isinstance(cmd, click.Group) and cmd.callback is not None:
            cmd.callback = with_heartbeat(" ".join(path), cmd.callback)
        for p in cmd.params:
            twin = _finite_twin(p)
            if twin is not None:
                p.type = twin
            elif isinstance(p, click.Option) and "--seed" in p.opts and isinstance(p.type, click.types.IntParamType):
                lo = getattr(p.type, "min", None)
                if lo is None or lo < 0 or getattr(p.type, "max", None) is None:
                    p.type = SEED
            elif (isinstance(p, click.Option) and "--scheduler" in p.opts and p.default is None
                  and isinstance(p.type, click.types.StringParamType)):  # a Dask address (serving's names a policy)
                p.type = SchedulerAddress()
