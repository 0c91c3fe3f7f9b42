"""Studies on the instruction-driven accelerator: the prefetch-ratio sweep, the access-size bandwidth profile,
and Perfetto timelines of the cycle-level engine."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from fpga.hbm import profile as hbm_profile
from fpga.instruction import isa
from fpga.instruction import run as instruction_sim
from fpga.instruction.compiler import Compiler, load_stream_program
from fpga.instruction.design import InstructionDesign
from fpga.instruction.engine import InstructionEngine
from fpga.instruction.prefetch import prefetch_fits
from hwmodel.errors import HwmodelError
from hwmodel.specs import BoardSpec

Progress = Callable[[], None]


def parse_ratios(text: str) -> list[int]:
    """``"1:8"`` (a range, both ends included), ``"1,2,4,8"`` or a mix like ``"1:4,8"``."""
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        try:
            if ":" in part:
                lo, hi = (int(x) for x in part.split(":", 1))
                out += list(range(lo, hi + 1))
            elif part:
                out.append(int(part))
        except ValueError:
            raise HwmodelError(f"ratios: expected integers like '1:8' or '1,2,4', got {text!r}") from None
    if not out or min(out) < 1:
        raise HwmodelError(f"ratios: expected positive integers like '1:8' or '1,2,4', got {text!r}")
    return sorted(set(out))


def parse_sizes(text: str) -> list[int]:
    """Byte sizes with optional K/M suffixes (powers of 1024): ``"256,4K,32K,1M"``."""
    out = []
    for part in text.split(","):
        p = part.strip().upper().removesuffix("B")
        scale = 1
        if p.endswith("K"):
            scale, p = 1024, p[:-1]
        elif p.endswith("M"):
            scale, p = 1024 * 1024, p[:-1]
        try:
            v = int(p) * scale
        except ValueError:
            raise HwmodelError(f"sizes: expected byte sizes like '256,4K,1M', got {part!r}") from None
        if v <= 0:
            raise HwmodelError(f"sizes: expected positive sizes, got {part!r}")
        out.append(v)
    return out


def access_bytes(compiler: Compiler, matrix: str = "q_proj") -> tuple[int, int]:
    """(weight, metadata) bytes of one access (one channel) of ``matrix``'s first LD pair in layer 0, read from the
    decode instruction stream (a design of several engines: the first engine that runs linears)."""
    compiler = getattr(compiler, "first_linear", compiler)
    lay = compiler.layout
    m = lay.linears[matrix]
    prog = compiler.decode_program(0).segments[1].instrs
    w = s = 0
    for row in prog[prog[:, isa.F_OP] == isa.OP_LD]:
        if row[isa.F_TAG] == isa.BUF_WEIGHT and row[isa.F_ADDR] == lay.layer_base + m.weight_addr and not w:
            w = int(isa.request_bytes(row).max())
        if row[isa.F_TAG] == isa.BUF_SCALE and row[isa.F_ADDR] == lay.layer_base + m.scale_addr and not s:
            s = int(isa.request_bytes(row).max())
    return w, s


# ============================================================================================== prefetch sweep
@dataclasses.dataclass(frozen=True)
class SweepRow:
    seq: int
    ratio: int
    fits: bool
    decode_s: float | None
    speedup: float | None
    hbm_utilization: float | None
    weight_access_bytes: int | None
    metadata_access_bytes: int | None
    best: bool = False

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def prefetch_sweep(
    design: InstructionDesign, ratios: Sequence[int], seqs: Sequence[int], progress: Progress | None = None
) -> list[SweepRow]:
    """Decode step time at each sequence length (cached tokens) for each prefetch ratio, its speedup over ratio 1
    (simulated as the baseline even when not listed), and the best ratio per sequence length: the fastest among the
    ratios that fit the buffers (ties to the smaller ratio)."""
    llm = design.llm_spec
    rows: list[SweepRow] = []
    for seq in seqs:
        base = InstructionEngine(design, prefetch_ratio=1).decode(seq)
        seq_rows = []
        for k in ratios:
            if not prefetch_fits(design, llm, k):
                seq_rows.append(SweepRow(seq, k, False, None, None, None, None, None))
            else:
                eng = InstructionEngine(design, prefetch_ratio=k)
                r = eng.decode(seq)
                w, m = access_bytes(eng.compiler)
                seq_rows.append(SweepRow(seq, k, True, r.seconds, base.seconds / r.seconds, r.hbm_utilization, w, m))
            if progress:
                progress()
        ok = [r for r in seq_rows if r.fits]
        if ok:
            best = min(ok, key=lambda r: (r.decode_s, r.ratio)).ratio
            seq_rows = [dataclasses.replace(r, best=r.ratio == best) for r in seq_rows]
        rows += seq_rows
    return rows


# ============================================================================================== HBM profile
@dataclasses.dataclass(frozen=True)
class ProfileRow:
    access_bytes: int
    raw_bw_bytes_per_s: float
    raw_efficiency: float
    scheduler_bw_bytes_per_s: float
    scheduler_efficiency: float
    with_metadata_bw_bytes_per_s: float
    with_metadata_efficiency: float

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def raw_bandwidth(
    board: BoardSpec,
    access_bytes: int,
    total_bytes_per_channel: int,
    pattern: str = "sequential",
    write_fraction: float = 0.0,
) -> float:
    """Every port of the board issuing ``access_bytes`` requests in ``pattern`` (sequential, strided:BYTES,
    random[:SPAN]; a ``write_fraction`` of them writes) to its own pseudo-channel with 64 in flight and a port that
    never limits: the HBM channel model alone (:func:`fpga.hbm.profile.profile_bandwidth`), summed over the ports."""
    r = hbm_profile.profile_bandwidth(
        board,
        board.hbm.axi_clock_hz,
        access_bytes,
        outstanding=64,
        port_width_bits=4096,
        total_bytes=max(total_bytes_per_channel, access_bytes),
        pattern=pattern,
        write_fraction=write_fraction,
    )
    return float(r["bw_bytes_per_s"]) * board.hbm.axi_ports


def scheduler_bandwidth(
    design: InstructionDesign, access_bytes: int, total_bytes_per_channel: int, with_metadata: bool = False
) -> float:
    """Independent LD instructions of ``access_bytes`` per channel through the scheduler and datamover of
    ``design`` (issue cost, request queue, requests in flight, request latency, port width); ``with_metadata``
    adds the scale and zero-point loads the lowering pairs with each weight load (all bytes counted)."""
    n = max(4, total_bytes_per_channel // access_bytes)
    prog = load_stream_program(design, access_bytes, n, with_metadata)
    c = instruction_sim.simulate_program(design, prog)
    return (c["read_bytes"] + c["write_bytes"]) / (c["cycles"] / design.clock_hz)


def profile_hbm(
    board: BoardSpec,
    design: InstructionDesign,
    sizes: Iterable[int],
    total_bytes_per_channel: int = 2 << 20,
    progress: Progress | None = None,
    pattern: str = "sequential",
    write_fraction: float = 0.0,
) -> list[ProfileRow]:
    """Effective bandwidth versus access size: raw (HBM model), through the instruction scheduler, and through the
    scheduler with each weight access followed by its scale and zero-point accesses (the decode lowering's
    pattern)."""
    if design.board != board.name:
        raise HwmodelError(f"design '{design.name}' is for board '{design.board}', not '{board.name}'")
    peak = board.hbm.peak_bw_bytes_per_s
    rows = []
    for b in sizes:
        raw = raw_bandwidth(board, b, total_bytes_per_channel, pattern, write_fraction)
        via = scheduler_bandwidth(design, b, total_bytes_per_channel)
        meta = scheduler_bandwidth(design, b, total_bytes_per_channel, with_metadata=True)
        rows.append(ProfileRow(b, raw, raw / peak, via, via / peak, meta, meta / peak))
        if progress:
            progress()
    return rows


# ============================================================================================== timeline
def chrome_trace(
    design: InstructionDesign, prefetch_ratio: int, ctx: int, max_instructions: int = 20000, prefill_tokens: int = 0
) -> dict[str, Any]:
    """A Chrome/Perfetto trace (JSON object format) of one decode step (or prefill): one track per unit (DM, MPE,
    SFU), each instruction a complete event from its start to its completion, named by its full assembly text.

    Instructions in flight together on one unit (the datamover keeps several loads outstanding) go to separate
    lanes of the unit's track (:func:`hwmodel.report.perfetto.chrome_trace`), and a counter track shows the HBM
    bandwidth the traced datamover instructions draw (each one's bytes spread evenly over its duration)."""
    from hwmodel.report.perfetto import Counter, Slice
    from hwmodel.report.perfetto import chrome_trace as build_trace

    eng = InstructionEngine(design, prefetch_ratio=prefetch_ratio)
    prog = eng.compiler.prefill_program(prefill_tokens, ctx) if prefill_tokens else eng.compiler.decode_program(ctx)
    flat, starts, _reps = prog.flat()
    counters, trace = instruction_sim.simulate_program(eng.design, prog, trace_instructions=max_instructions)
    s_per_cycle = 1.0 / eng.design.clock_hz
    tracks: dict[str, list[Slice]] = {}
    steps: dict[float, float] = {}  # time -> change of the bandwidth drawn (bytes/s)
    for u in range(3):
        lane = tracks.setdefault(isa.UNIT_NAMES[u], [])
        for row, rep, t0, t1 in trace[u]:
            if row < 0 or t1 < 0:
                continue
            seg = int(np.searchsorted(starts, row, side="right") - 1)
            instr = flat[row]
            text = isa.describe(instr)
            name = text.split("  wait")[0].strip()
            lane.append(
                Slice(
                    t0 * s_per_cycle,
                    max(t1, t0 + 1) * s_per_cycle,
                    name,
                    isa.UNIT_NAMES[u],
                    {"instruction": text, "segment": seg, "repetition": int(rep)},
                )
            )
            if int(instr[isa.F_OP]) in (isa.OP_LD, isa.OP_ST):
                dur_s = max(t1 - t0, 1) * s_per_cycle
                rate = float(isa.request_bytes(instr).sum()) / dur_s
                steps[t0 * s_per_cycle] = steps.get(t0 * s_per_cycle, 0.0) + rate
                steps[t0 * s_per_cycle + dur_s] = steps.get(t0 * s_per_cycle + dur_s, 0.0) - rate
    level, samples = 0.0, []
    for t in sorted(steps):
        level += steps[t]
        samples.append(Counter(t, {"GB/s": max(0.0, level) / 1e9}))
    out = build_trace(
        tracks,
        process_name=f"{design.name} k={prefetch_ratio}",
        counters={"HBM bandwidth (traced DM instructions)": samples},
    )
    out["displayTimeUnit"] = "ns"
    out["otherData"] = {
        "design": design.name,
        "prefetch_ratio": prefetch_ratio,
        "ctx": ctx,
        "cycles": counters["cycles"],
        "clock_hz": eng.design.clock_hz,
    }
    return out


__all__ = [
    "prefetch_sweep",
    "profile_hbm",
    "chrome_trace",
    "parse_ratios",
    "parse_sizes",
    "access_bytes",
    "SweepRow",
    "ProfileRow",
]
