"""Physical domains, checked once where a value enters the model (spec loaders, design validation, engines), so
every command that reaches a model inherits the check.

Each check raises :class:`DomainError` (a :class:`~hwmodel.errors.HwmodelError`: one line, exit status 2) whose
message names where the value came from (a file and field, or a command-line option), what was expected and what
was given, e.g. ``--clock-mhz: expected a kernel clock of board 'u280' in [6.25, 450] MHz, got 1e+12 MHz``.
"""

from __future__ import annotations

import math
from typing import Any

from hwmodel.errors import HwmodelError

MIN_KERNEL_CLOCK_HZ = 6.25e6
"""Lowest clock an FPGA kernel can be given: the UltraScale+ MMCM's minimum output frequency (AMD DS923/DS925,
F_OUTMIN = 6.25 MHz) [M]. Boards give the ceiling (``max_kernel_clock_hz``); this is the common floor."""

MAX_COUNT = 1_000_000
"""Largest device/replica count a cluster or system may declare: well above any deployed cluster (tens of
thousands of GPUs), low enough that a typo (100000 GPUs of one group is allowed, 1e9 is not) fails fast."""


MAX_DEVICES_PER_GROUP = 1024
"""Most devices one node's group may declare: a server holds a few dozen accelerators at most (PCIe slots); 1024
leaves room for abstract nodes while a typo (100,000 GPUs in one group) fails before a minutes-long simulation."""


MAX_DEVICES = 16384
"""Most devices a whole cluster may declare (all nodes together), for the same reason."""


def device_count(v: int) -> str | None:
    """A schema check (:func:`hwmodel.schema.plain`) for the number of devices in one group."""
    if v < 1:
        return "a positive number"
    return (
        None
        if v <= MAX_DEVICES_PER_GROUP
        else (
            f"a device count in [1, {MAX_DEVICES_PER_GROUP}] per group (a node holds at most a few dozen; "
            "describe larger deployments as more nodes)"
        )
    )


class DomainError(HwmodelError):
    """A value outside its physical domain; the message names where it came from, what was expected and got."""

    def __init__(self, where: str, expected: str, got: object = ...) -> None:
        got_txt = "" if got is ... else f", got {got}"
        super().__init__(f"{where}: expected {expected}{got_txt}")
        self.where, self.expected = where, expected


def finite(value: Any, where: str, what: str = "a finite number") -> float:
    """``value`` as a float, refusing NaN and infinities."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise DomainError(where, what, repr(value)) from None
    if not math.isfinite(v):
        raise DomainError(where, what, repr(value))
    return v


def kernel_clock_problem(board: Any, clock_hz: float) -> str | None:
    """None when ``clock_hz`` is a kernel clock ``board`` can run, else the expectation it violates."""
    hi = float(board.max_kernel_clock_hz)
    if not clock_hz > 0:
        return f"a positive kernel clock (board '{board.name}' runs [{MIN_KERNEL_CLOCK_HZ / 1e6:g}, {hi / 1e6:g}] MHz)"
    if not (math.isfinite(clock_hz) and MIN_KERNEL_CLOCK_HZ <= clock_hz <= hi):
        return (
            f"a kernel clock of board '{board.name}' in [{MIN_KERNEL_CLOCK_HZ / 1e6:g}, {hi / 1e6:g}] MHz "
            f"(MMCM floor; the board's max_kernel_clock_hz)"
        )
    return None


def check_kernel_clock(board: Any, clock_hz: float, where: str) -> None:
    """Raise DomainError when ``clock_hz`` is outside ``board``'s kernel-clock range."""
    problem = kernel_clock_problem(board, clock_hz)
    if problem:
        raise DomainError(where, problem, f"{clock_hz / 1e6:g} MHz")


def check_context(
    ctx: int, llm: Any, where: str, *, new_tokens: int = 1, max_ctx: int | None = None, design: str = ""
) -> None:
    """Raise DomainError when ``ctx`` tokens already in the KV cache plus ``new_tokens`` exceed the LLM's
    ``max_position``, or ``ctx`` exceeds a design's ``max_ctx`` (the KV-cache rows it reserves)."""
    limit = int(llm.max_position)
    if ctx < 0 or ctx + new_tokens > limit:
        why = f"LLM '{llm.name}' max_position = {limit:,}"
        if new_tokens == 1:
            raise DomainError(where, f"at most {limit - 1:,} tokens already in the KV cache ({why})", f"{ctx:,}")
        got = f"{ctx + new_tokens:,}" if ctx == 0 else f"{ctx:,} + {new_tokens:,} = {ctx + new_tokens:,}"
        raise DomainError(where, f"at most {limit:,} tokens in the context ({why})", got)
    if max_ctx is not None and ctx > max_ctx:
        name = f"design '{design}'" if design else "the design"
        raise DomainError(
            where,
            f"a context of at most {max_ctx:,} tokens ({name} max_ctx: the KV-cache rows it reserves in HBM)",
            f"{ctx:,}",
        )


def check_count(n: int, where: str, *, lo: int = 1, hi: int = MAX_COUNT) -> None:
    """Raise DomainError when a count is outside ``[lo, hi]``."""
    if not lo <= n <= hi:
        raise DomainError(where, f"a count in [{lo:,}, {hi:,}]", f"{n:,}")


MAX_BYTES = 2**50
"""Largest byte count a transfer, buffer or chunk may be given (1 PiB): far above any one transfer of the modelled
systems (a whole 70B model's KV cache is tens of GB), below 2**53 so every count is exact as a float."""


def byte_count(value: Any, where: str, *, lo: int = 1, hi: int = MAX_BYTES) -> int:
    """``value`` as a whole number of bytes in ``[lo, hi]``: a transfer moves whole bytes, so ``0.5`` (which the
    timing would round to an empty transfer) and NaN are refused, not rounded."""
    v = finite(value, where, "a whole number of bytes")
    if v != math.floor(v) or not lo <= v <= hi:
        raise DomainError(where, f"a whole number of bytes in [{lo:,}, {hi:,}]", repr(value))
    return int(v)
