"""Checked derivations: a declared time or rate turned into whole clock cycles, with the rounding reported.

A board declares its DRAM timings in seconds (JEDEC style) and its clocks in Hz; the controller model counts whole
cycles of the memory-side (AXI) clock. :func:`checked_cycles` does that conversion once, by the JEDEC rule (round
up: a constraint of 8.1 cycles is met only after 9), and keeps what it did as a :class:`Derivation` so `specs show`
and `fpga designs --verbose` can print the declared value beside the cycles it became (as Ramulator 2 checks its
derived timings against the declared ones at init).

Two outcomes are not silent:

* **a near-whole value rounded up by a whole cycle** (the declared value lies less than 1 % above ``N`` cycles, so
  rounding up makes it ``N + 1``, more than 1 % off): almost always a value computed for another clock or written
  with too few digits (``tCCD_S = 2.5063 ns`` at a 399 MHz AXI clock is 1.00001 cycles and would become 2, halving
  a port's column rate). It warns (:class:`RoundingWarning`) naming the file, the field, the value and both cycle
  counts. An ordinary rounding (8.1 -> 9 cycles) is the intended JEDEC behaviour and is only reported.
* **an impossible command** (a timing that needs a cycle count the clock domain cannot give, e.g. a refresh that
  never ends before the next one is due) is refused by the caller with a :class:`~hwmodel.errors.SpecError`
  naming the field (:func:`refuse`).
"""

from __future__ import annotations

import dataclasses
import math
import warnings

from hwmodel.errors import SpecError

#: relative rounding beyond which a near-whole value warns (issue 26: "more than 1 % off")
WARN_FRACTION = 0.01
#: float noise absorbed before rounding up (1e-6 of a cycle, as fpga/hbm.to_cycles always did)
_NOISE_CYCLES = 1e-6


class RoundingWarning(UserWarning):
    """A declared time or rate became a whole number of cycles far (> 1 %) from its exact value."""


@dataclasses.dataclass(frozen=True)
class Derivation:
    """One declared quantity turned into whole cycles of ``clock_field``."""

    field: str  # dotted spec field, e.g. "hbm.tccds_s"
    value: float  # the declared value, in its own unit (s)
    clock_hz: float
    clock_field: str  # the field that declares the clock, e.g. "hbm.axi_clock_hz"
    exact_cycles: float  # value x clock, before rounding
    cycles: int  # what the model uses

    @property
    def off_fraction(self) -> float:
        """(cycles - exact) / exact: how far the rounding moved the value (0 when exact)."""
        return (self.cycles - self.exact_cycles) / self.exact_cycles if self.exact_cycles else 0.0

    @property
    def suspicious(self) -> bool:
        """Rounded up by (almost) a whole cycle from just above a whole number: the issue-26 pattern."""
        whole = math.floor(self.exact_cycles + _NOISE_CYCLES)
        just_above = whole >= 1 and (self.exact_cycles - whole) <= WARN_FRACTION * whole
        return just_above and self.cycles > whole and self.off_fraction > WARN_FRACTION

    def describe(self) -> str:
        return (
            f"field '{self.field}' = {self.value:.6g} s is {self.exact_cycles:.6g} cycles at "
            f"{self.clock_hz / 1e6:.6g} MHz ({self.clock_field}); it became {self.cycles} cycles "
            f"({100 * self.off_fraction:+.3g} %)"
        )


def ceil_cycles(seconds: float, clock_hz: float) -> int:
    """JEDEC rounding: a time in whole clock cycles, rounded up (a 1e-6 cycle tolerance absorbs float noise)."""
    return max(0, int(math.ceil(seconds * clock_hz - _NOISE_CYCLES)))


_warned: set[tuple[str, str, float, float]] = set()


def checked_cycles(
    seconds: float, clock_hz: float, *, origin: str, field: str, clock_field: str, minimum: int = 0
) -> Derivation:
    """``seconds`` in whole cycles of ``clock_hz`` (rounded up, at least ``minimum``), warning once per process
    (per file, field, value and clock) when the rounding is suspicious (see the module docstring)."""
    exact = seconds * clock_hz
    d = Derivation(
        field=field,
        value=seconds,
        clock_hz=clock_hz,
        clock_field=clock_field,
        exact_cycles=exact,
        cycles=max(minimum, ceil_cycles(seconds, clock_hz)),
    )
    key = (origin, field, seconds, clock_hz)
    if d.suspicious and key not in _warned:
        _warned.add(key)
        warnings.warn(
            f"{origin}: {d.describe()}: a value a hair above {math.floor(exact)} cycle(s) was probably "
            f"meant as {math.floor(exact)}; write it at this clock",
            RoundingWarning,
            stacklevel=2,
        )
    return d


def refuse(origin: str, d: Derivation, expected: str) -> SpecError:
    """The error for a derivation that makes a command impossible in its clock domain (the caller raises it)."""
    return SpecError(
        origin,
        d.field,
        f"{expected} ({d.exact_cycles:.6g} -> {d.cycles} cycles at {d.clock_hz / 1e6:.6g} MHz, {d.clock_field})",
        d.value,
    )


#: the HBM timings a controller counts in AXI cycles, in the order of the HbmSpec fields
HBM_TIMINGS = (
    "tcl_s",
    "trcd_s",
    "trp_s",
    "tras_s",
    "trc_s",
    "tccds_s",
    "tccdl_s",
    "trrds_s",
    "trrdl_s",
    "tfaw_s",
    "twtrs_s",
    "twtrl_s",
    "trtw_s",
    "twr_s",
    "trtp_s",
    "refresh_interval_s",
    "refresh_cycle_s",
)


def hbm_cycles(board: object) -> dict[str, Derivation]:
    """Every HBM timing of ``board`` (a BoardSpec) in AXI cycles, checked: near-whole values rounded up warn, and a
    timing that makes a command impossible at the AXI clock is refused. tCL may be 0 cycles; the others are at
    least 1 (a command takes a cycle)."""
    h = board.hbm  # type: ignore[attr-defined]
    origin = getattr(board, "origin", "") or f"board '{getattr(board, 'name', '?')}'"
    out = {
        t: checked_cycles(
            getattr(h, t),
            h.axi_clock_hz,
            origin=origin,
            field="hbm." + t,
            clock_field="hbm.axi_clock_hz",
            minimum=0 if t == "tcl_s" else 1,
        )
        for t in HBM_TIMINGS
    }
    cl, refi, rfc = out["tcl_s"], out["refresh_interval_s"], out["refresh_cycle_s"]
    if cl.cycles > h.latency_page_hit_cycles:
        raise refuse(
            origin,
            cl,
            f"at most latency_page_hit_cycles ({h.latency_page_hit_cycles}) in AXI cycles: a "
            f"read's data cannot return before its column latency",
        )
    if rfc.cycles >= refi.cycles:
        raise refuse(origin, rfc, f"fewer AXI cycles than tREFI ({refi.cycles}): the channel would never leave refresh")
    return out


def board_derived(board: object) -> list[tuple[str, object, str, str]]:
    """(name, value, unit, how) rows of what follows from a board's fields, for `specs show`: per-channel peak
    from width x clock against the declared peak, port bytes per AXI cycle, and every timing in AXI cycles."""
    h = getattr(board, "hbm", None)
    if not h:  # a DDR-only card
        return []
    rows: list[tuple[str, object, str, str]] = []
    beat = h.axi_port_width_bits // 8
    wire = beat * h.axi_clock_hz
    rows.append(("hbm.port_bytes_per_axi_cycle", beat, "B", "axi_port_width_bits / 8"))
    rows.append(("hbm.port_wire_bw_bytes_per_s", wire, "B/s", "axi_port_width_bits / 8 x axi_clock_hz"))
    chan = min(h.granule_bytes * h.axi_clock_hz, h.port_bw_cap_bytes_per_s)
    off = 100 * (chan * h.ports_per_pc / h.pc_peak_bw_bytes_per_s - 1)
    rows.append(
        (
            "hbm.pc_derived_peak_bw_bytes_per_s",
            chan * h.ports_per_pc,
            "B/s",
            f"min(granule x axi clock, port cap) x ports_per_pc; {off:+.2f} % vs declared pc_peak_bw",
        )
    )
    rows.append(
        (
            "hbm.derived_peak_bw_bytes_per_s",
            chan * h.ports_per_pc * h.pseudo_channels,
            "B/s",
            "per pseudo-channel x pseudo_channels",
        )
    )
    for t, d in hbm_cycles(board).items():
        flag = " ROUNDED UP FROM NEAR-WHOLE" if d.suspicious else ""
        rows.append(
            (
                f"hbm.{t[:-2]}_cycles",
                d.cycles,
                "axi cycles",
                f"{d.exact_cycles:.4g} exact, {100 * d.off_fraction:+.1f} %{flag}",
            )
        )
    return rows


def design_derived(design: object, board: object) -> list[tuple[str, object, str, str]]:
    """(name, value, unit, how) rows of what a streaming design's fields imply on its board, for
    `fpga designs --verbose`: the kernel:AXI clock ratio the controller model uses (clocks rounded to 1 Hz, as in
    fpga/hbm.clock_ticks), and per engine the bytes a port moves per kernel cycle and the port's rate against the
    channel peak that bounds it."""
    h = board.hbm  # type: ignore[attr-defined]
    fk, fa = int(round(design.clock_hz)), int(round(h.axi_clock_hz))  # type: ignore[attr-defined]
    g = math.gcd(fk, fa)
    rows: list[tuple[str, object, str, str]] = [
        (
            "kernel_to_axi_ticks",
            f"{fa // g}:{fk // g}",
            "",
            f"kernel {fk} Hz, AXI {fa} Hz (hbm.axi_clock_hz); "
            f"{100 * (fk / design.clock_hz - 1):+.2g} % from 1 Hz "  # type: ignore[attr-defined]
            f"rounding",
        )
    ]
    chan = min(h.granule_bytes * h.axi_clock_hz, h.port_bw_cap_bytes_per_s)
    for e in design.engines:  # type: ignore[attr-defined]
        if not e.ports:
            continue
        kernel = e.port_bytes * design.clock_hz  # type: ignore[attr-defined]
        bound = "kernel side" if kernel < chan else "channel"
        rows.append((f"{e.name}.port_bytes_per_kernel_cycle", e.port_bytes, "B", "port_width_bits / 8"))
        rows.append(
            (
                f"{e.name}.port_peak_bw_bytes_per_s",
                min(kernel, chan),
                "B/s",
                f"min(kernel {kernel / 1e9:.4g}, channel {chan / 1e9:.4g} GB/s): {bound} bound",
            )
        )
        rows.append((f"{e.name}.peak_bw_bytes_per_s", e.ports * min(kernel, chan), "B/s", f"{e.ports} ports"))
    return rows
