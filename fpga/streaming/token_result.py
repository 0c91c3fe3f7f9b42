"""What a simulated token returns (:class:`TokenResult`) and how it is built from the fast engine's outputs:
per-engine cycle classes, per-operator issue and span cycles (one Numba pass, :func:`_op_sums`), per-channel
bytes, bus time and row misses, and the port classes' channel lists the kernel and the results share
(:func:`class_channels`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np
from numba import njit

from fpga.hbm import channel as hbm
from fpga.streaming.design import ALL_OPS, StreamingDesign
from fpga.streaming.ports import channel_count
from fpga.streaming.program_format import R_BYTES, R_WRITE, Program
from hwmodel.specs import BoardSpec, LlmSpec

#: Per-engine cycle classes; they add up to the token's cycles.
ENGINE_COUNTERS = ("busy", "drain", "stall_in", "stall_mem", "stall_out", "done")


@dataclasses.dataclass(frozen=True)
class TokenResult:
    """One simulated token: cycles and seconds at the kernel clock, where the cycles went, HBM traffic."""

    design: str
    llm: str
    board: str
    ctx: int
    with_lm_head: bool
    clock_hz: float
    cycles: int
    engine_cycles: Mapping[str, Mapping[str, int]]  # engine -> ENGINE_COUNTERS (+ stalled, idle)
    op_busy_cycles: Mapping[str, int]  # operator -> engine issue cycles
    op_span_cycles: Mapping[str, int]  # operator -> sum over its instances of first start .. last result
    channels: tuple[Mapping[str, Any], ...]  # per port: engine, counters, bandwidth
    hbm_read_bytes: int
    hbm_write_bytes: int
    macs: int
    peak_bw_bytes_per_s: float  # board HBM peak (all pseudo-channels)
    ports_peak_bw_bytes_per_s: float  # peak of the channels the design's ports use
    lanes_macs_per_cycle: int  # MAC lanes of the engines that run matrix-vector products and attention

    @property
    def seconds(self) -> float:
        return self.cycles / self.clock_hz

    @property
    def tokens_per_s(self) -> float:
        return 1.0 / self.seconds

    @property
    def hbm_bytes(self) -> int:
        return self.hbm_read_bytes + self.hbm_write_bytes

    @property
    def achieved_bw_bytes_per_s(self) -> float:
        return self.hbm_bytes / self.seconds

    @property
    def hbm_utilization(self) -> float:
        """Achieved HBM bandwidth over the board's peak (all pseudo-channels)."""
        return self.achieved_bw_bytes_per_s / self.peak_bw_bytes_per_s

    @property
    def ports_utilization(self) -> float:
        """Achieved bandwidth over the peak of the channels the design uses."""
        return self.achieved_bw_bytes_per_s / self.ports_peak_bw_bytes_per_s

    @property
    def bandwidth_floor_s(self) -> float:
        return self.hbm_bytes / self.peak_bw_bytes_per_s

    def as_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d.update(
            seconds=self.seconds,
            tokens_per_s=self.tokens_per_s,
            hbm_bytes=self.hbm_bytes,
            achieved_bw_bytes_per_s=self.achieved_bw_bytes_per_s,
            hbm_utilization=self.hbm_utilization,
            ports_utilization=self.ports_utilization,
            bandwidth_floor_s=self.bandwidth_floor_s,
        )
        return d


def _engine_table(design: StreamingDesign, cnt: np.ndarray) -> dict[str, dict[str, int]]:
    out = {}
    for i, e in enumerate(design.engines):
        row = {name: int(cnt[i, k]) for k, name in enumerate(ENGINE_COUNTERS)}
        row["stalled"] = row["stall_mem"] + row["stall_out"]
        row["idle"] = row["drain"] + row["stall_in"] + row["done"]
        out[e.name] = row
    return out


def _op_tables(prog: Program, start: np.ndarray) -> tuple[dict[str, int], dict[str, int]]:
    """Per operator: engine issue cycles, and the sum over its instances (one per layer) of first start to last
    result. An instance's blocks are contiguous in the program."""
    busy, span = _op_sums(prog.t_op, prog.t_cyc, prog.t_layer, prog.t_eng, prog.e_lat, start, len(ALL_OPS))
    ops = [op for i, op in enumerate(ALL_OPS) if busy[i] > 0]
    return ({op: int(busy[ALL_OPS.index(op)]) for op in ops}, {op: int(span[ALL_OPS.index(op)]) for op in ops})


@njit(cache=True)
def _op_sums(
    t_op: np.ndarray,
    t_cyc: np.ndarray,
    t_layer: np.ndarray,
    t_eng: np.ndarray,
    e_lat: np.ndarray,
    start: np.ndarray,
    n_ops: int,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_op_tables` in one pass over the blocks: per operator the issue cycles, and per run of blocks of one
    operator and layer (one instance) its last result minus its first start, summed per operator."""
    busy = np.zeros(n_ops, dtype=np.int64)
    span = np.zeros(n_ops, dtype=np.int64)
    n = len(t_op)
    i = 0
    while i < n:
        op = t_op[i]
        layer = t_layer[i]
        lo = start[i]
        hi = start[i] + t_cyc[i] + e_lat[t_eng[i]]
        busy[op] += t_cyc[i]
        j = i + 1
        while j < n and t_op[j] == op and t_layer[j] == layer:
            lo = min(lo, start[j])
            hi = max(hi, start[j] + t_cyc[j] + e_lat[t_eng[j]])
            busy[op] += t_cyc[j]
            j += 1
        span[op] += hi - lo
        i = j
    return busy, span


def _channels(
    design: StreamingDesign, board: BoardSpec, prog: Program, st: np.ndarray, seconds: float
) -> tuple[dict[str, Any], ...]:
    """Per port: its engine, its channel's counters and bandwidth. A port on a shared channel reports the bytes of
    its own requests (the channel's timers and commands are the channel's, ``shared_with`` names the others)."""
    peak = hbm.channel_peak_bytes_per_s(board)
    g_chan = class_channels(prog)[0]
    per_class: dict[int, dict[str, Any]] = {}
    chans = prog.port_chan.tolist()
    rows = []
    for port in range(prog.n_ports):
        g = int(prog.port_group[port])
        if g not in per_class:
            per_class[g] = hbm.channel_counters(st[g_chan[g]])
        c = dict(per_class[g])
        others = [q for q, ch in enumerate(chans) if ch == chans[port] and q != port]
        if others:
            rq = prog.r_table[prog.g_ptr[g] : prog.g_ptr[g + 1]]
            w = rq[:, R_WRITE] == 1
            c.update(read_bytes=int(rq[~w, R_BYTES].sum()), write_bytes=int(rq[w, R_BYTES].sum()), shared_with=others)
        moved = c["read_bytes"] + c["write_bytes"]
        rows.append(
            {
                "port": port,
                "engine": design.engines[int(prog.port_eng[port])].name,
                **c,
                "bw_bytes_per_s": moved / seconds,
                "utilization": moved / seconds / peak,
            }
        )
    return tuple(rows)


def build_result(
    design: StreamingDesign,
    board: BoardSpec,
    llm: LlmSpec,
    prog: Program,
    ctx: int,
    with_lm_head: bool,
    clock_hz: float,
    total: int,
    start: np.ndarray,
    cnt: np.ndarray,
    channels: tuple[dict[str, Any], ...],
) -> TokenResult:
    op_busy, op_span = _op_tables(prog, start)
    lanes = sum(
        e.lanes
        for e in design.engines
        if any(op in e.ops for op in ("qkv", "attention", "lm_head", "o_proj", "gate_up", "down"))
    )
    used_channels = channel_count(design)
    return TokenResult(
        design=design.name,
        llm=llm.name,
        board=board.name,
        ctx=ctx,
        with_lm_head=with_lm_head,
        clock_hz=clock_hz,
        cycles=int(total),
        engine_cycles=_engine_table(design, cnt),
        op_busy_cycles=op_busy,
        op_span_cycles=op_span,
        channels=channels,
        hbm_read_bytes=sum(c["read_bytes"] for c in channels),
        hbm_write_bytes=sum(c["write_bytes"] for c in channels),
        macs=prog.macs,
        peak_bw_bytes_per_s=board.hbm.peak_bw_bytes_per_s,
        ports_peak_bw_bytes_per_s=used_channels * hbm.channel_peak_bytes_per_s(board),
        lanes_macs_per_cycle=lanes,
    )


def class_channels(prog: Program) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The channel state of each port class (classes on unshared channels have their own, numbered as the classes;
    a shared channel's ports are classes of their own), and per channel state its classes (CSR)."""
    n_g = prog.n_groups
    if not len(prog.port_chan) or len(set(prog.port_chan.tolist())) == len(prog.port_chan):
        ar = np.arange(n_g, dtype=np.int64)
        return ar, np.arange(n_g + 1, dtype=np.int64), ar
    ids: dict[int, int] = {}
    g_chan = np.array([ids.setdefault(int(prog.port_chan[q]), len(ids)) for q in prog.g_port], np.int64)
    order = np.argsort(g_chan, kind="stable").astype(np.int64)
    c_ptr = np.concatenate([[0], np.cumsum(np.bincount(g_chan, minlength=len(ids)))]).astype(np.int64)
    return g_chan, c_ptr, order
