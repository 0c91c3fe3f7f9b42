"""KVMU waveforms as VCD (IEEE 1364 Value Change Dump, opens in GTKWave), written and read with pyvcd.

Scope ``kvmu``: ``valid``, ``curr``, ``ahead`` (wires wide enough for the capacity), ``mode`` (2 bits: 0 init,
1 speculate, 2 accept, 3 rollback) and ``mode_name`` (a GTKWave string), ``mux_sel`` (0 local sampler, 1 PCIe),
``status`` (4 bits, :class:`fpga.kvmu.codes.Status`), ``cmd`` (index of the command in its cycle),
``kv_wr_en`` / ``kv_wr_addr`` (the KV write port; the address holds its last value while ``kv_wr_en`` is 0), and
``clk`` when asked for. Time is in picoseconds: cycle ``c`` is at ``round(c * 1e12 / clock_hz)`` and the values
there are the state at the end of that cycle. The header comment records the clock, so :func:`read_vcd` maps
times back to cycles. Output is deterministic (no wall-clock date in the header).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from fpga.kvmu.codes import Mode
from hwmodel.errors import HwmodelError
from hwmodel.io import atomic_open

if TYPE_CHECKING:
    from fpga.kvmu.model import KvmuTrace

MAX_CLOCK_SIGNAL_CYCLES = 5_000_000
_MODE_NAMES = [m.name.lower() for m in Mode]
_CLOCK_RE = re.compile(r"clock_hz=([0-9.eE+-]+)")


class VcdError(HwmodelError):
    """A VCD file that cannot be written or read back as a KVMU trace."""


def _times_ps(cycles: np.ndarray, clock_hz: float) -> np.ndarray:
    period_ps = 1e12 / clock_hz
    if abs(period_ps - round(period_ps)) < 1e-9:
        return cycles.astype(np.int64) * int(round(period_ps))
    return np.rint(cycles.astype(np.float64) * period_ps).astype(np.int64)


def write_vcd(trace: KvmuTrace, path: str | Path, clock_hz: float = 200e6, clock_signal: bool = False) -> Path:
    """Write ``trace`` to ``path`` as VCD at ``clock_hz`` (default 200 MHz, the draft design's measured clock on
    the U280). ``clock_signal`` adds a ``clk`` wire (two changes per cycle; for short traces)."""
    from vcd import VCDWriter

    if not 1e3 <= clock_hz <= 1e11:
        raise VcdError(f"clock_hz must be in 1e3..1e11 Hz, got {clock_hz:g}")
    if clock_signal and trace.n_cycles > MAX_CLOCK_SIGNAL_CYCLES:
        raise VcdError(
            f"a clk signal for {trace.n_cycles} cycles would write {2 * trace.n_cycles} changes; "
            f"leave it off above {MAX_CLOCK_SIGNAL_CYCLES} cycles"
        )
    path = Path(path)
    width = max(1, int(trace.capacity).bit_length())
    runs = trace.runs
    starts = _times_ps(runs["start"], clock_hz)
    comment = (
        f"hwmodel KVMU trace: capacity={trace.capacity} clock_hz={clock_hz!r} cycles={trace.n_cycles}; "
        f"values at time t are the state at the end of cycle round(t * clock_hz / 1e12)"
    )
    try:
        fh = atomic_open(path, "w", encoding="ascii")  # whole or not at all (a full disk: no short VCD)
    except OSError as exc:
        raise VcdError(f"{path}: cannot write the VCD ({exc})") from None
    with fh, VCDWriter(fh, timescale="1 ps", date="", comment=comment, version="hwmodel kvmu") as w:
        clk = w.register_var("kvmu", "clk", "wire", size=1, init=0) if clock_signal else None
        v = {name: w.register_var("kvmu", name, "wire", size=width, init=0) for name in ("valid", "curr", "ahead")}
        mode = w.register_var("kvmu", "mode", "wire", size=2, init=0)
        mode_name = w.register_var("kvmu", "mode_name", "string", init="init")
        mux = w.register_var("kvmu", "mux_sel", "wire", size=1, init=1)
        status = w.register_var("kvmu", "status", "wire", size=4, init=0)
        cmd = w.register_var("kvmu", "cmd", "integer", size=32, init=0)
        wr_en = w.register_var("kvmu", "kv_wr_en", "wire", size=1, init=0)
        wr_addr = w.register_var("kvmu", "kv_wr_addr", "wire", size=width, init=0)

        def emit(i: int, t: int) -> None:
            for name in ("valid", "curr", "ahead"):
                w.change(v[name], t, int(runs[name][i]))
            m = int(runs["mode"][i])
            w.change(mode, t, m)
            w.change(mode_name, t, _MODE_NAMES[m])
            w.change(mux, t, int(runs["mux"][i]))
            w.change(status, t, int(runs["status"][i]))
            w.change(cmd, t, int(runs["cmd"][i]))
            pos = int(runs["write_pos"][i])
            w.change(wr_en, t, 1 if pos >= 0 else 0)
            if pos >= 0:
                w.change(wr_addr, t, pos)

        if clk is None:
            for i in range(starts.shape[0]):
                emit(i, int(starts[i]))
        else:
            rise = _times_ps(np.arange(trace.n_cycles + 1, dtype=np.int64), clock_hz)
            run = 0
            for c in range(trace.n_cycles):
                t = int(rise[c])
                if run < starts.shape[0] and runs["start"][run] == c:
                    emit(run, t)
                    run += 1
                w.change(clk, t, 1)
                w.change(clk, t + max(1, int(rise[c + 1] - t) // 2), 0)
    return path


@dataclass(frozen=True)
class VcdWaves:
    """Signals read back from a VCD: per name, the change times (in the file's time unit) and values
    (ints for wires and integers; str for strings)."""

    timescale_ps: float
    clock_hz: float | None
    changes: dict[str, tuple[np.ndarray, list[int | str]]]

    def value_at(self, name: str, time: int) -> int | str:
        """The value of ``name`` at ``time`` (after the changes at that time)."""
        if name not in self.changes:
            raise VcdError(f"no signal '{name}' in the VCD; signals: {', '.join(sorted(self.changes))}")
        times, values = self.changes[name]
        i = int(np.searchsorted(times, time, side="right")) - 1
        if i < 0:
            raise VcdError(f"signal '{name}' has no value at time {time}")
        return values[i]

    def time_of_cycle(self, cycle: int) -> int:
        if self.clock_hz is None:
            raise VcdError("the VCD header does not record clock_hz; cannot map cycles to times")
        return int(round(cycle * 1e12 / self.clock_hz / self.timescale_ps))

    def at_cycle(self, name: str, cycle: int) -> int | str:
        """The value of ``name`` at the end of ``cycle`` (needs the clock recorded in the header)."""
        return self.value_at(name, self.time_of_cycle(cycle))


_UNIT_PS = {"s": 1e12, "ms": 1e9, "us": 1e6, "ns": 1e3, "ps": 1.0, "fs": 1e-3, "as": 1e-6, "zs": 1e-9}


def read_vcd(path: str | Path) -> VcdWaves:
    """Read a VCD (any, but ``clock_hz`` comes from the header comment :func:`write_vcd` writes)."""
    from vcd.reader import TokenKind, tokenize

    path = Path(path)
    by_id: dict[str, list[str]] = {}
    changes: dict[str, tuple[list[int], list[int | str]]] = {}
    timescale_ps = 1.0
    clock_hz: float | None = None
    t = 0
    try:
        with path.open("rb") as fh:
            for tok in tokenize(fh):
                kind = tok.kind
                if kind is TokenKind.TIMESCALE:
                    ts = tok.timescale
                    timescale_ps = int(ts.magnitude) * _UNIT_PS[ts.unit.value]
                elif kind is TokenKind.COMMENT:
                    m = _CLOCK_RE.search(tok.comment)
                    if m:
                        clock_hz = float(m.group(1))
                elif kind is TokenKind.VAR:
                    var = tok.var
                    by_id.setdefault(var.id_code, []).append(var.reference)
                    changes.setdefault(var.reference, ([], []))
                elif kind is TokenKind.CHANGE_TIME:
                    t = tok.time_change
                elif kind in (TokenKind.CHANGE_SCALAR, TokenKind.CHANGE_VECTOR, TokenKind.CHANGE_STRING):
                    ident, value = tok.data.id_code, tok.data.value  # type: ignore[union-attr]
                    if kind is TokenKind.CHANGE_SCALAR:
                        value = int(value) if value in ("0", "1") else value
                    for name in by_id.get(ident, ()):
                        times, values = changes[name]
                        if times and times[-1] == t:
                            values[-1] = value
                        else:
                            times.append(t)
                            values.append(value)
    except FileNotFoundError:
        raise VcdError(f"{path}: no such VCD file") from None
    except Exception as exc:  # pyvcd raises its own parse errors
        if isinstance(exc, HwmodelError):
            raise
        raise VcdError(f"{path}: not a readable VCD ({type(exc).__name__}: {exc})") from None
    return VcdWaves(
        timescale_ps, clock_hz, {name: (np.asarray(ts, dtype=np.int64), vs) for name, (ts, vs) in changes.items()}
    )
