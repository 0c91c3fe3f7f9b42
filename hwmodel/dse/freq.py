"""Frequency-scaling study: the linear projection a paper makes from a measured clock, beside the cycle model.

A design measured at ``f_m`` is often "projected" to ``f_t`` by scaling every time by ``f_m / f_t``. That holds only
for work counted in kernel cycles. HBM runs in its own clock domain (U280: 450 MHz AXI, 14.375 GB/s per
pseudo-channel), so an operator that streams weights at the channels' limit does not get faster with the kernel
clock, and fixed latencies in nanoseconds (page hits, clock-domain crossings) shrink in cycles only on the memory
side. The cycle model (:mod:`fpga.streaming.engine`) simulates both clock domains, so comparing it with the projection shows
per operator where HBM saturation breaks the projection.

Per operator the study reports its time (the sum over its instances of first start to last result, at each clock,
from ``TokenResult.op_span_cycles``), the linear projection, the model at the target and the *scaling efficiency*
``(t_measured / t_model) / (f_t / f_m)`` (1 = scales with the clock, 0 = does not move). An operator below 0.9 is
classified by the engine that runs it:

* *HBM-bound*: its engine's ports move less than 80 % more bytes per second of the clock's gain (the channels
  are saturated: raising the kernel clock 1.5x raised the bandwidth by less than 1.4x);
* *latency-bound*: its ports' bandwidth did follow the clock, yet the operator did not (fixed-latency effects);
* *paced by its inputs*: an engine without ports that spends at least half its cycles waiting for activations --
  in a streaming dataflow it runs at the pace of the HBM-bound producer that feeds it.

A sweep of clocks from the measured one to 1.5x the higher of the two draws the token's speedup curve against the
linear line and the bandwidth floor.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from hwmodel.errors import HwmodelError
from hwmodel.report.plots import save_figure

SCALES = 0.9
SATURATED = 0.8
VERDICT_COLORS = {
    "scales with the clock": "tab:blue",
    "HBM-bound": "tab:red",
    "paced by its inputs": "tab:purple",
    "latency-bound": "tab:orange",
}


@dataclasses.dataclass(frozen=True)
class OperatorScaling:
    """One operator (or the whole token) at the measured clock, projected linearly, and simulated at the target."""

    op: str
    engine: str
    measured_s: float
    linear_s: float
    model_s: float
    efficiency: float
    bw_gain: float
    """Growth of the engine's HBM bytes/s from the measured to the target clock (1 = none; NaN: no ports)."""
    stall_in_share: float
    """Share of the engine's cycles at the target clock spent waiting for input activations."""
    verdict: str

    @property
    def projection_error(self) -> float:
        """How far the linear projection is below the model (0.2 = the model is 20 % slower than projected)."""
        return self.model_s / self.linear_s - 1.0 if self.linear_s > 0 else 0.0


@dataclasses.dataclass(frozen=True)
class FreqStudy:
    design: str
    board: str
    llm: str
    ctx: int
    measured_hz: float
    target_hz: float
    token: OperatorScaling
    operators: tuple[OperatorScaling, ...]
    curve_hz: tuple[float, ...]
    curve_model_s: tuple[float, ...]
    bandwidth_floor_s: float
    board_max_hz: float

    def as_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        for row in [d["token"], *d["operators"]]:
            row["projection_error"] = row["model_s"] / row["linear_s"] - 1.0 if row["linear_s"] > 0 else 0.0
        return d


def _engine_bw(tok: Any, engine: str | None) -> float:
    """HBM bytes per second the engine's ports (all ports when ``engine`` is None) move in ``tok``."""
    return float(sum(c["bw_bytes_per_s"] for c in tok.channels if engine is None or c["engine"] == engine))


def _stall_in_share(tok: Any, engine: str) -> float:
    ec = tok.engine_cycles[engine]
    total = sum(ec[k] for k in ("busy", "drain", "stall_in", "stall_mem", "stall_out", "done")) or 1
    return ec["stall_in"] / total


def _verdict(eff: float, bw_gain: float, clock_gain: float, stall_in: float) -> str:
    """Why an operator does or does not follow the clock (see the module docstring)."""
    if eff >= SCALES:
        return "scales with the clock"
    if bw_gain == bw_gain:  # the engine has HBM ports
        if bw_gain - 1.0 < SATURATED * (clock_gain - 1.0):
            return "HBM-bound"
        return "latency-bound"
    return "paced by its inputs" if stall_in >= 0.5 else "latency-bound"


def run_freq_study(design_name: str, measured_hz: float, target_hz: float, ctx: int = 512, steps: int = 9) -> FreqStudy:
    """Simulate ``design_name`` at the measured and target kernel clocks (and ``steps`` clocks spanning both and
    beyond) and compare each operator with the linear projection (see the module docstring)."""
    from fpga.streaming.engine import load_design, simulate_token

    if measured_hz <= 0 or target_hz <= 0:
        raise HwmodelError(f"clocks must be positive, got measured {measured_hz:g} Hz and target {target_hz:g} Hz")
    if ctx < 0:
        raise HwmodelError(f"ctx must be >= 0, got {ctx}")
    from hwmodel.domains import check_kernel_clock

    design = load_design(design_name)
    board = design.board_spec()
    check_kernel_clock(board, measured_hz, "measured clock")
    check_kernel_clock(board, target_hz, "target clock")
    t_m = simulate_token(design, ctx, clock_hz=measured_hz)
    t_t = simulate_token(design, ctx, clock_hz=target_hz)
    ratio = measured_hz / target_hz
    clock_gain = target_hz / measured_hz

    def row(op: str, engine: str | None, cyc_m: int, cyc_t: int) -> OperatorScaling:
        sec_m, sec_t = cyc_m / measured_hz, cyc_t / target_hz
        eff = (sec_m / sec_t) / clock_gain if sec_t > 0 else 1.0
        bw_m, bw_t = _engine_bw(t_m, engine), _engine_bw(t_t, engine)
        gain = bw_t / bw_m if bw_m > 0 else float("nan")
        stall_in = _stall_in_share(t_t, engine) if engine is not None else 0.0
        return OperatorScaling(
            op,
            engine or "all",
            sec_m,
            sec_m * ratio,
            sec_t,
            eff,
            gain,
            stall_in,
            _verdict(eff, gain, clock_gain, stall_in),
        )

    ops = tuple(
        row(op, design.engine_of(op).name, cyc_m, t_t.op_span_cycles[op]) for op, cyc_m in t_m.op_span_cycles.items()
    )
    token = row("token", None, t_m.cycles, t_t.cycles)
    hi = max(measured_hz, target_hz) * 1.5
    lo = min(measured_hz, target_hz)
    curve = tuple(float(f) for f in np.linspace(lo, hi, max(2, steps)))
    curve_s = tuple(simulate_token(design, ctx, clock_hz=f).seconds for f in curve)
    return FreqStudy(
        design.name,
        board.name,
        design.llm,
        ctx,
        measured_hz,
        target_hz,
        token,
        ops,
        curve,
        curve_s,
        t_t.bandwidth_floor_s,
        board.max_kernel_clock_hz,
    )


def plot_freq_study(study: FreqStudy, stem: Path, *, svg: bool = False) -> list[Path]:
    """Left: token speedup vs clock, model against the linear projection (and the HBM bandwidth floor). Right: per
    operator, time at the target clock by linear projection and by the model."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12.5, 4.8), dpi=120, gridspec_kw={"width_ratios": [1, 1.4]})
    f = np.array(study.curve_hz)
    t = np.array(study.curve_model_s)
    t_meas = study.token.measured_s
    a1.plot(f / 1e6, f / study.measured_hz, "--", color="0.4", label="linear projection")
    a1.plot(f / 1e6, t_meas / t, "o-", color="tab:blue", label="cycle model")
    a1.axhline(
        t_meas / study.bandwidth_floor_s,
        color="tab:red",
        linewidth=0.9,
        label="speedup at the HBM bandwidth floor (bytes / board peak)",
    )
    a1.axvline(study.target_hz / 1e6, color="tab:green", linewidth=0.8, linestyle=":", label="target clock")
    if study.board_max_hz < f.max():
        a1.axvspan(study.board_max_hz / 1e6, f.max() / 1e6, color="0.9", label="above board max clock")
    a1.set_xlabel("kernel clock [MHz]")
    a1.set_ylabel(f"token speedup over {study.measured_hz / 1e6:g} MHz")
    a1.set_title(f"{study.design} ({study.llm}, ctx {study.ctx}): token", fontsize=10)
    a1.grid(True, alpha=0.3)
    a1.legend(fontsize=8)
    ops = sorted(study.operators, key=lambda o: -o.model_s)
    x = np.arange(len(ops))
    a2.bar(x - 0.2, [o.linear_s * 1e6 for o in ops], 0.4, color="0.6", label="linear projection")
    a2.bar(x + 0.2, [o.model_s * 1e6 for o in ops], 0.4, color=[VERDICT_COLORS[o.verdict] for o in ops])
    for verdict, color in VERDICT_COLORS.items():
        if any(o.verdict == verdict for o in ops):
            a2.bar([0], [0], 0, color=color, label=f"cycle model: {verdict}")
    for i, o in enumerate(ops):
        if o.projection_error > 0.02:
            a2.annotate(
                f"+{100 * o.projection_error:.0f}%", (i + 0.2, o.model_s * 1e6), ha="center", va="bottom", fontsize=7
            )
    a2.set_xticks(x, [o.op for o in ops], rotation=45, ha="right", fontsize=8)
    a2.set_ylabel(f"time at {study.target_hz / 1e6:g} MHz [us] (sum over layers)")
    a2.set_yscale("log")
    a2.set_title("per operator: where the projection breaks", fontsize=10)
    a2.legend(fontsize=8)
    a2.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    return save_figure(fig, stem, svg)
