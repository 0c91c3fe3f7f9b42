"""Fully-streaming batch-1 decode accelerator: cycle-level simulation of one token (fast, event-driven Numba).

The model (docs/streaming.md): a design's engines run the blocks of the token program (:mod:`fpga.streaming.program`) in
order. A block starts at the first kernel cycle at which

* the engine has finished issuing its previous block (and, for a *drain* block, that block left the pipeline);
* its input activations are visible: the producing block finished ``pipeline latency`` cycles after its issue,
  plus the FIFO latency (inter-engine) or one cycle (same engine);
* every HBM read it consumes has landed in its port's buffer;
* its output FIFO has room: the block ``fifo_depth`` entries earlier has been read by the consumer.

Ports issue their requests in program order, one per kernel cycle at most, as soon as a buffer slot is free (slots
free when the consuming block's issue ends), fewer than ``max_outstanding`` reads are in flight, and (writes) the
data exists. Requests cross to the AXI clock domain, are served by their channel (:mod:`fpga.hbm.channel`), and cross back.

Ports whose engines name the same pseudo-channel share it (:mod:`fpga.streaming.ports`): the channel serves their requests in
order of arrival, ties broken by the design's arbitration.

This engine computes those start/issue times as max-plus recurrences, visiting each block and each request once
(AXI3 bursts, row changes and refresh windows inside a request are computed in closed form), and simulates one
port per class of identical ports (same requests, same consumers, hence the same trajectory). The cycle-stepped
reference (:mod:`fpga.streaming.reference`) steps every kernel and AXI cycle of every port; the test suite proves both
give identical block start cycles, request times and counters.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from numba import njit

from fpga.hbm import channel as hbm
from fpga.streaming.design import ALL_OPS, DesignError, StreamingDesign, check_structure, design_names, load_design
from fpga.streaming.ports import channel_bases, channel_count, port_problems, shared
from fpga.streaming.program import compile_token
from fpga.streaming.program_format import (
    R_ADDR,
    R_BYTES,
    R_DEP,
    R_DEP_OFF,
    R_OUTPREV,
    R_SLOT,
    R_SLOT_OFF,
    R_WRITE,
    Program,
)
from hwmodel.allocator import keep_freed_memory
from hwmodel.engine import Capability, Phase
from hwmodel.specs import BoardSpec, LlmSpec

__all__ = [
    "StreamingDesign",
    "TokenResult",
    "StreamingEngine",
    "load_design",
    "simulate_token",
    "validate_design",
    "design_names",
    "ENGINE_COUNTERS",
]

#: Per-engine cycle classes; they add up to the token's cycles.
ENGINE_COUNTERS = ("busy", "drain", "stall_in", "stall_mem", "stall_out", "done")
EC_BUSY, EC_DRAIN, EC_IN, EC_MEM, EC_OUT, EC_DONE = range(6)


# ============================================================================================== the kernel
# per port class state (rows of gs) and per request times (rows of rt)
GS_POS, GS_LAST_ISSUE, GS_PREV_LAND, GS_PORT_BYTES, GS_ENG, GS_PORT_SHIFT, GS_CHAN, GS_SHARED, GS_HEAD_ARR = range(9)
RT_ISSUE, RT_LAND, RT_FIRST, RT_END = range(4)


@njit(cache=True, _nrt=False)  # no reference counting: it allocates nothing (see fpga/hbm/channel.py)
def _issue(
    p: np.ndarray,
    g: int,
    limit: int,
    start: np.ndarray,
    gs: np.ndarray,
    g_ptr: np.ndarray,
    rq: np.ndarray,
    rt: np.ndarray,
    st: np.ndarray,
) -> bool:
    """Issue port class g's requests in order, up to index ``limit`` (exclusive), while their conditions are
    known: a buffer slot (the consuming block of an earlier read has issued), the data of a write, and fewer
    than max_outstanding reads in flight. Each is served by the channel and lands. True if any was issued.
    (A port class on an unshared channel; the conditions and the service are inline because calls to
    :func:`_issue_time` and :func:`_serve`, which a shared channel's arbiter uses, cost half the kernel's time.)"""
    moved = False
    while gs[GS_POS, g] < limit:
        r = gs[GS_POS, g]
        ti = gs[GS_LAST_ISSUE, g] + 1
        b = rq[r, R_SLOT]
        if b >= 0:
            if start[b] < 0:
                break
            ti = max(ti, start[b] + rq[r, R_SLOT_OFF])
        b = rq[r, R_DEP]
        if b >= 0:
            if start[b] < 0:
                break
            ti = max(ti, start[b] + rq[r, R_DEP_OFF])
        o = rq[r, R_OUTPREV]
        if o >= 0:
            ti = max(ti, rt[g_ptr[g] + o, RT_LAND])
        rt[r, RT_ISSUE] = ti
        gs[GS_LAST_ISSUE, g] = ti
        arrival = hbm.kernel_to_axi(p, ti)
        w = rq[r, R_WRITE]
        f, en = hbm.channel_request_at(p, st, gs[GS_CHAN, g], arrival, rq[r, R_ADDR], rq[r, R_BYTES], w)
        rt[r, RT_FIRST] = f
        rt[r, RT_END] = en
        if w:
            rt[r, RT_LAND] = hbm.axi_to_kernel(p, en)
        else:
            land = hbm.read_landing(
                p, f, en, rq[r, R_BYTES], gs[GS_PORT_BYTES, g], gs[GS_PREV_LAND, g], gs[GS_PORT_SHIFT, g]
            )
            rt[r, RT_LAND] = land
            gs[GS_PREV_LAND, g] = land
        gs[GS_POS, g] += 1
        moved = True
    return moved


@njit(cache=True, _nrt=False)  # no reference counting
def _issue_head(
    p: np.ndarray, g: int, start: np.ndarray, gs: np.ndarray, g_ptr: np.ndarray, rq: np.ndarray, rt: np.ndarray
) -> bool:
    """A shared channel's port class g: issue its next request (the head the channel arbitrates), if it has none
    issued and the request's conditions are known."""
    if gs[GS_HEAD_ARR, g] >= 0 or gs[GS_POS, g] >= g_ptr[g + 1]:
        return False
    r = gs[GS_POS, g]
    ti = _issue_time(r, g, start, gs, g_ptr, rq, rt)
    if ti < 0:
        return False
    rt[r, RT_ISSUE] = ti
    gs[GS_LAST_ISSUE, g] = ti
    gs[GS_HEAD_ARR, g] = hbm.kernel_to_axi(p, ti)
    return True


@njit(cache=True, _nrt=False)  # no reference counting
def _issue_time(
    r: int, g: int, start: np.ndarray, gs: np.ndarray, g_ptr: np.ndarray, rq: np.ndarray, rt: np.ndarray
) -> int:
    """Issue cycle of port class g's request r once its conditions are known (as :func:`_issue`), else -1."""
    ti = gs[GS_LAST_ISSUE, g] + 1
    b = rq[r, R_SLOT]
    if b >= 0:
        if start[b] < 0:
            return -1
        ti = max(ti, start[b] + rq[r, R_SLOT_OFF])
    b = rq[r, R_DEP]
    if b >= 0:
        if start[b] < 0:
            return -1
        ti = max(ti, start[b] + rq[r, R_DEP_OFF])
    o = rq[r, R_OUTPREV]
    if o >= 0:
        ti = max(ti, rt[g_ptr[g] + o, RT_LAND])
    return ti


@njit(cache=True, _nrt=False)  # no reference counting
def _serve(
    p: np.ndarray, g: int, r: int, arrival: int, gs: np.ndarray, rq: np.ndarray, rt: np.ndarray, st: np.ndarray
) -> None:
    """Port class g's request r reaches its channel at AXI cycle ``arrival`` after every earlier one: served,
    landed (reads copy into the kernel-side buffer one after another), the class's next request is due."""
    w = rq[r, R_WRITE]
    f, en = hbm.channel_request_at(p, st, gs[GS_CHAN, g], arrival, rq[r, R_ADDR], rq[r, R_BYTES], w)
    rt[r, RT_FIRST] = f
    rt[r, RT_END] = en
    if w:
        rt[r, RT_LAND] = hbm.axi_to_kernel(p, en)
    else:
        land = hbm.read_landing(
            p, f, en, rq[r, R_BYTES], gs[GS_PORT_BYTES, g], gs[GS_PREV_LAND, g], gs[GS_PORT_SHIFT, g]
        )
        rt[r, RT_LAND] = land
        gs[GS_PREV_LAND, g] = land
    gs[GS_POS, g] += 1


@njit(cache=True, _nrt=False)  # no reference counting
def _best_head(
    c: int,
    c_ptr: np.ndarray,
    c_list: np.ndarray,
    last: np.ndarray,
    arb: int,
    gs: np.ndarray,
    g_ptr: np.ndarray,
    forced: bool,
) -> int:
    """The class whose issued head shared channel c grants next: earliest arrival, then the arbitration's order
    (fpga.streaming.ports). Unless ``forced``, -1 while a sharer's next request is not issued yet (it might come first)."""
    n = c_ptr[c + 1] - c_ptr[c]
    best = -1
    best_arr = 0
    best_rank = 0
    for k in range(n):
        g = c_list[c_ptr[c] + k]
        if gs[GS_POS, g] >= g_ptr[g + 1]:
            continue
        a = gs[GS_HEAD_ARR, g]
        if a < 0:
            if forced:
                continue
            return -1
        rank = k if arb == 1 else (k - last[c] - 1 + n) % n
        if best < 0 or a < best_arr or (a == best_arr and rank < best_rank):
            best, best_arr, best_rank = g, a, rank
    return best


@njit(cache=True, _nrt=False)  # no reference counting
def _grant(
    p: np.ndarray, c: int, g: int, last: np.ndarray, gs: np.ndarray, rq: np.ndarray, rt: np.ndarray, st: np.ndarray
) -> None:
    """Shared channel c grants class g's issued head."""
    _serve(p, g, gs[GS_POS, g], gs[GS_HEAD_ARR, g], gs, rq, rt, st)
    gs[GS_HEAD_ARR, g] = -1
    last[c] = gs[GS_SHARED, g] - 1  # GS_SHARED holds 1 + the class's position among the channel's sharers


@njit(cache=True, _nrt=False)  # no reference counting
def _run_channel(
    p: np.ndarray,
    c: int,
    start: np.ndarray,
    gs: np.ndarray,
    g_ptr: np.ndarray,
    rq: np.ndarray,
    rt: np.ndarray,
    st: np.ndarray,
    c_ptr: np.ndarray,
    c_list: np.ndarray,
    last: np.ndarray,
    arb: int,
) -> bool:
    """Shared channel c: issue its sharers' heads and grant them while the next grant is known."""
    moved = False
    while True:
        for k in range(c_ptr[c], c_ptr[c + 1]):
            if _issue_head(p, c_list[k], start, gs, g_ptr, rq, rt):
                moved = True
        g = _best_head(c, c_ptr, c_list, last, arb, gs, g_ptr, False)
        if g < 0:
            return moved
        _grant(p, c, g, last, gs, rq, rt, st)
        moved = True


@njit(cache=True)
def _simulate(
    p: np.ndarray,
    t_eng: np.ndarray,
    t_cyc: np.ndarray,
    t_drain: np.ndarray,
    t_dep: np.ndarray,
    t_off: np.ndarray,
    e_ptr: np.ndarray,
    e_list: np.ndarray,
    e_lat: np.ndarray,
    t_need: np.ndarray,
    g_ptr: np.ndarray,
    g_eng: np.ndarray,
    g_port_bytes: np.ndarray,
    rq: np.ndarray,
    final_block: int,
    g_chan: np.ndarray,
    c_ptr: np.ndarray,
    c_list: np.ndarray,
    arb: int,
):  # type: ignore[no-untyped-def]
    n = len(t_eng)
    n_e = len(e_lat)
    n_g = len(g_ptr) - 1
    n_r = rq.shape[0]
    start = np.full(n, -1, dtype=np.int64)
    cnt = np.zeros((n_e, 6), dtype=np.int64)
    e_pos = e_ptr[:-1].copy()
    e_issue_end = np.zeros(n_e, dtype=np.int64)
    e_done_at = np.zeros(n_e, dtype=np.int64)
    gs = np.zeros((9, n_g), dtype=np.int64)
    n_c = len(c_ptr) - 1
    any_shared = False
    for c in range(n_c):
        if c_ptr[c + 1] - c_ptr[c] > 1:
            any_shared = True
            for k in range(c_ptr[c + 1] - c_ptr[c]):
                gs[GS_SHARED, c_list[c_ptr[c] + k]] = k + 1
    last = np.full(n_c, -1, dtype=np.int64)
    for c in range(n_c):
        last[c] = c_ptr[c + 1] - c_ptr[c] - 1  # round-robin starts at the channel's first port
    for g in range(n_g):
        gs[GS_CHAN, g] = g_chan[g]
        gs[GS_HEAD_ARR, g] = -1
        gs[GS_POS, g] = g_ptr[g]
        gs[GS_LAST_ISSUE, g] = -1
        gs[GS_PORT_BYTES, g] = g_port_bytes[g]
        gs[GS_ENG, g] = g_eng[g]
        pb = g_port_bytes[g]
        gs[GS_PORT_SHIFT, g] = -1
        if pb > 0 and pb & (pb - 1) == 0:
            k = 0
            while (1 << k) < pb:
                k += 1
            gs[GS_PORT_SHIFT, g] = k
    st = np.zeros((n_c, hbm.CS_N), dtype=np.int64)
    reset = hbm.new_channel_state()
    for c in range(n_c):
        for j in range(hbm.CS_N):  # element by element: a row assignment compiles a shape-mismatch error path
            st[c, j] = reset[j]
    rt = np.full((n_r, 4), -1, dtype=np.int64)
    progress = True
    sweeps = 0
    while progress:
        progress = False
        sweeps += 1
        for e in range(n_e):
            local = True
            while local:  # the engine and its own ports until neither can move without another engine
                local = False
                while e_pos[e] < e_ptr[e + 1]:
                    t = e_list[e_pos[e]]
                    ok = True
                    t_in = 0
                    t_out = 0
                    for s in range(t_dep.shape[1]):  # 3 slots; multi-unit programs add more (fpga/streaming/units.py)
                        d = t_dep[t, s]
                        if d >= 0:
                            if start[d] < 0:
                                ok = False
                                break
                            v = start[d] + t_off[t, s]
                            if s < 2 or (s > 2 and s % 2 == 1):  # inputs; slot 2 and even extra slots: output space
                                t_in = max(t_in, v)
                            else:
                                t_out = max(t_out, v)
                    if not ok:
                        break
                    t_mem = 0
                    for g in range(n_g):
                        r = t_need[t, g]
                        if r >= 0:
                            rr = g_ptr[g] + r
                            if rr >= gs[GS_POS, g]:  # not issued yet
                                ok = False
                                break
                            t_mem = max(t_mem, rt[rr, RT_LAND])
                    if not ok:
                        break
                    cur = e_issue_end[e]
                    t_dr = e_done_at[e] if t_drain[t] else 0
                    s0 = max(cur, t_dr, t_in, t_mem, t_out)
                    if t_dr > cur:
                        cnt[e, EC_DRAIN] += t_dr - cur
                        cur = t_dr
                    if t_in > cur:
                        cnt[e, EC_IN] += t_in - cur
                        cur = t_in
                    if t_mem > cur:
                        cnt[e, EC_MEM] += t_mem - cur
                        cur = t_mem
                    if t_out > cur:
                        cnt[e, EC_OUT] += t_out - cur
                        cur = t_out
                    cnt[e, EC_BUSY] += t_cyc[t]
                    start[t] = s0
                    e_issue_end[e] = s0 + t_cyc[t]
                    e_done_at[e] = s0 + t_cyc[t] + e_lat[e]
                    e_pos[e] += 1
                    progress = True
                for g in range(n_g):
                    if gs[GS_ENG, g] == e:
                        if gs[GS_SHARED, g]:
                            moved = _run_channel(
                                p, gs[GS_CHAN, g], start, gs, g_ptr, rq, rt, st, c_ptr, c_list, last, arb
                            )
                        else:
                            r = gs[GS_POS, g]  # the head's conditions first: no call that would issue nothing
                            moved = (
                                r < g_ptr[g + 1]
                                and (rq[r, R_SLOT] < 0 or start[rq[r, R_SLOT]] >= 0)
                                and (rq[r, R_DEP] < 0 or start[rq[r, R_DEP]] >= 0)
                                and _issue(p, g, g_ptr[g + 1], start, gs, g_ptr, rq, rt, st)
                            )
                        if moved:
                            local = True
                            progress = True
        for g in range(n_g):
            if gs[GS_SHARED, g]:
                moved = _run_channel(p, gs[GS_CHAN, g], start, gs, g_ptr, rq, rt, st, c_ptr, c_list, last, arb)
            else:
                r = gs[GS_POS, g]
                moved = (
                    r < g_ptr[g + 1]
                    and (rq[r, R_SLOT] < 0 or start[rq[r, R_SLOT]] >= 0)
                    and (rq[r, R_DEP] < 0 or start[rq[r, R_DEP]] >= 0)
                    and _issue(p, g, g_ptr[g + 1], start, gs, g_ptr, rq, rt, st)
                )
            if moved:
                progress = True
        if not progress and any_shared:
            # nothing moves: every unknown time waits (through blocks and reads) on a head a shared channel holds
            # back, so it comes later than the earliest such head, which the channel can grant now
            bc = -1
            bg = -1
            for c in range(n_c):
                if c_ptr[c + 1] - c_ptr[c] > 1:
                    g = _best_head(c, c_ptr, c_list, last, arb, gs, g_ptr, True)
                    if g >= 0 and (bg < 0 or gs[GS_HEAD_ARR, g] < gs[GS_HEAD_ARR, bg]):
                        bc, bg = c, g
            if bg >= 0:
                _grant(p, bc, bg, last, gs, rq, rt, st)
                progress = True
    status = 0
    for e in range(n_e):
        if e_pos[e] < e_ptr[e + 1]:
            status = 1
    for g in range(n_g):
        if gs[GS_POS, g] < g_ptr[g + 1]:
            status = 1
    total = 0
    if status == 0:
        total = start[final_block] + t_cyc[final_block] + e_lat[t_eng[final_block]]
        for e in range(n_e):
            cnt[e, EC_DONE] = total - e_issue_end[e]
    return (
        status,
        total,
        start,
        cnt,
        rt,
        st,
        sweeps,
    )


# ============================================================================================== results
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


class DeadlockError(DesignError):
    """The design's FIFOs and engine order can never let the token finish."""


def _deadlock(design: StreamingDesign, ctx: int, prog: Program, start: np.ndarray) -> DeadlockError:
    """Name the blocked engines: each one's next block, and what it waits for."""
    waits = []
    for e, eng in enumerate(design.engines):
        blocks = prog.e_list[prog.e_ptr[e] : prog.e_ptr[e + 1]]
        pending = blocks[start[blocks] < 0]
        if not len(pending):
            continue
        b = int(pending[0])
        d = int(prog.t_dep[b, 2])
        why = ""
        if d >= 0 and start[d] < 0:
            other = design.engines[int(prog.t_eng[d])].name
            why = f" for FIFO space towards {ALL_OPS[prog.t_op[d]]} on '{other}'"
        waits.append(f"'{eng.name}' at {ALL_OPS[prog.t_op[b]]} (layer {prog.t_layer[b]}){why}")
    return DeadlockError(
        f"design '{design.name}' deadlocks at ctx {ctx}: " + "; ".join(waits) + f". A temporal engine cannot run "
        f"the consumer while it still produces into a full FIFO: raise fifo_depth (now {design.fifo_depth}) or "
        f"map the operators differently"
    )


# ============================================================================================== API
def validate_design(design: StreamingDesign, board: BoardSpec | None = None, llm: LlmSpec | None = None) -> None:
    """Check a design against its board and model; raise DesignError (a HwmodelError) with the numbers:
    ports, clock, resources (see :mod:`fpga.streaming.resources`), and whether weights + KV cache fit the ports' HBM."""
    try:
        _validate_design(design, board, llm)
    except DesignError as exc:  # name the design's file, not just its name
        msg = str(exc)
        if design.origin and design.origin not in msg:
            exc.args = (f"{design.origin}: {msg}",)  # same error type (e.g. DeadlockError), the file named
        raise


def _validate_design(design: StreamingDesign, board: BoardSpec | None, llm: LlmSpec | None) -> None:
    from fpga.streaming.resources import check_fits

    check_structure(design)
    board = board or design.board_spec()
    llm = llm or design.llm_spec()
    if design.units:  # each unit against its share of the board (fpga/streaming/units_result.py)
        from fpga.streaming.units_result import validate_units

        return validate_units(design, board, llm)
    h = board.hbm
    if channel_count(design) > h.axi_ports:
        raise DesignError(
            f"design '{design.name}' uses {channel_count(design)} HBM "
            f"{'pseudo-channels' if shared(design) else 'ports'} but board '{board.name}' has "
            f"{h.axi_ports} "
            f"({', '.join(f'{e.name}: {e.ports}' for e in design.engines if e.ports)})"
        )
    for problem in port_problems(design, h.axi_ports):
        raise DesignError(f"design '{design.name}': {problem}")
    check_design_clock(design, board)
    check_hbm_capacity(design, board, llm)
    check_fits(design, board, llm)


def check_design_clock(design: StreamingDesign, board: BoardSpec) -> None:
    """The kernel clock must be one the board can run (hwmodel.domains), whether it comes from the design file, a
    command-line override or a sweep; the error names the design's file."""
    from hwmodel.domains import kernel_clock_problem

    problem = kernel_clock_problem(board, design.clock_hz)
    if problem:
        where = f"{design.origin}: field 'clock_hz'" if design.origin else f"design '{design.name}': clock_hz"
        raise DesignError(f"{where}: expected {problem}, got {design.clock_hz / 1e6:g} MHz")


def check_hbm_capacity(design: StreamingDesign, board: BoardSpec, llm: LlmSpec) -> None:
    """Weights striped over an engine's ports, plus the KV cache reserved for ``max_ctx`` tokens, must fit the
    pseudo-channels those ports use."""
    from fpga.streaming.lowering import embedding_table_bytes
    from fpga.streaming.templates import _static_parts, kv_region_bytes

    total_w = list(_static_parts(design, board, llm, True).total_w)
    pc_bytes = board.hbm.pc_capacity_bytes // board.hbm.ports_per_pc
    a = design.engines.index(design.engine_of("attention"))
    kv = kv_region_bytes(design, llm, board) * 2 * llm.kv_heads * llm.layers
    # an untied embedding table is stored too (one row is read per token), and a tied one whose LM head runs on the
    # host; an embedding gathered on the host stores nothing
    if "embed" not in design.host_ops and (not llm.tied_embeddings or "lm_head" in design.host_ops):
        emb = design.engines.index(design.engine_of("embed"))
        total_w[emb] += -(-embedding_table_bytes(design, llm) // design.engines[emb].ports)
    needs = []
    for i, e in enumerate(design.engines):
        need = total_w[i]
        if i == a:  # the KV cache starts at the next MiB after the weights
            need = (-(-need // (1 << 20)) << 20) + kv
        needs.append(need)
        if not e.ports:
            continue
        if need > pc_bytes:
            raise DesignError(
                f"design '{design.name}': {llm.name} does not fit HBM: engine '{e.name}' needs {need / 2**20:.0f} MiB "
                f"per port (weights{' + KV cache for max_ctx ' + str(design.max_ctx) if i == a else ''}) but each of "
                f"its {e.ports} ports reaches a {pc_bytes / 2**20:.0f} MiB share of a pseudo-channel on "
                f"'{board.name}'"
            )
    if shared(design):  # engines sharing a channel stack their data on it (fpga.streaming.ports.channel_bases)
        ends = [b + needs[int(e)] for b, e in zip(channel_bases(design, needs), _port_engines(design))]
        if max(ends) > pc_bytes:
            raise DesignError(
                f"design '{design.name}': {llm.name} does not fit HBM: the engines sharing a pseudo-channel "
                f"need {max(ends) / 2**20:.0f} MiB of it but a port reaches a {pc_bytes / 2**20:.0f} MiB "
                f"share on '{board.name}'"
            )


def _port_engines(design: StreamingDesign) -> list[int]:
    return [i for i, e in enumerate(design.engines) for _ in range(e.ports)]


def simulate_token(
    design: StreamingDesign | str | Path, ctx: int, clock_hz: float | None = None, with_lm_head: bool = True
) -> TokenResult:
    """Simulate decoding one token after ``ctx`` cached tokens (fast engine). ``clock_hz`` overrides the design's
    kernel clock; ``with_lm_head=False`` simulates an ingested token (LM head and sampler skipped)."""
    if not isinstance(design, StreamingDesign):
        design = load_design(design)
    if clock_hz is not None:
        design = dataclasses.replace(design, clock_hz=float(clock_hz))
    keep_freed_memory()
    board, llm = design.board_spec(), design.llm_spec()
    prog = compile_token(design, board, llm, ctx, with_lm_head)
    return run_program(design, board, llm, prog, ctx, with_lm_head)


def run_program(
    design: StreamingDesign, board: BoardSpec, llm: LlmSpec, prog: Program, ctx: int, with_lm_head: bool
) -> TokenResult:
    if design.units:  # per-unit and per-link results (fpga/streaming/units_result.py)
        from fpga.streaming.units_result import run_unit_program

        return run_unit_program(design, board, llm, prog, ctx, with_lm_head)
    p = hbm.hbm_params(board, design.clock_hz, hbm.token_refresh_phase(board, ctx))
    out = run_kernel(p, prog)
    status, total, start, cnt, _i, _l, _f, _e, st, _sweeps = out
    if status:
        raise _deadlock(design, ctx, prog, start)
    seconds = total / design.clock_hz
    return build_result(
        design,
        board,
        llm,
        prog,
        ctx,
        with_lm_head,
        design.clock_hz,
        total,
        start,
        cnt,
        _channels(design, board, prog, st, seconds),
    )


def run_kernel(p: np.ndarray, prog: Program) -> tuple[Any, ...]:
    """The fast engine on a compiled program: (status, cycles, block starts, engine counters, request issue,
    landing, first-data and end cycles, channel states — per port class —, scheduling sweeps)."""
    g_port_bytes = prog.port_bytes[prog.g_port] if prog.n_groups else np.zeros(0, np.int64)
    g_chan, c_ptr, c_list = class_channels(prog)
    status, total, start, cnt, rt, st, sweeps = _simulate(
        p,
        prog.t_eng,
        prog.t_cyc,
        prog.t_drain,
        prog.t_dep,
        prog.t_off,
        prog.e_ptr,
        prog.e_list,
        prog.e_lat,
        prog.t_need_group,
        prog.g_ptr,
        prog.port_eng[prog.g_port],
        g_port_bytes,
        prog.r_table,
        prog.final_block,
        g_chan,
        c_ptr,
        c_list,
        prog.arbitration,
    )
    # per request: issue, landing, first-data and end cycles (views, not copies: a token's callers rarely read them)
    return status, total, start, cnt, rt[:, RT_ISSUE], rt[:, RT_LAND], rt[:, RT_FIRST], rt[:, RT_END], st, sweeps


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


class StreamingEngine:
    """hwmodel.engine.Engine for a streaming design: per-token latency memoized by context length.

    * ``decode_s(ctx)``: one token (LM head and argmax sampler included).
    * ``ingest_s(n, ctx)``: ``n`` tokens arriving from elsewhere (shadow synchronisation): forward passes whose
      logits are discarded, so the LM head and sampler are skipped; token i sees ``ctx + i`` cached tokens.
    * ``prefill_s(n, ctx)``: a local re-prefill. The streaming design has no batched prefill datapath: it re-runs
      the decode pipeline token by token (``n - 1`` ingested tokens, then one decoded token for the logits of the
      last), which is why the system avoids re-prefill on the FPGA.
    * ``power_w(phase)``: from :mod:`fpga.streaming.power` (static + dynamic at this design's activity).
    """

    CAPABILITIES = frozenset(
        {
            Capability.DECODER,
            Capability.PREFILLER,
            Capability.INGESTER,
            Capability.POWERED,
            Capability.CONTEXT_BOUND,
            Capability.OPERATOR_TIMES,
        }
    )

    def __init__(
        self, design: StreamingDesign | str | Path, clock_hz: float | None = None, validate: bool = True
    ) -> None:
        if not isinstance(design, StreamingDesign):
            design = load_design(design)
        if clock_hz is not None:
            design = dataclasses.replace(design, clock_hz=float(clock_hz))
        keep_freed_memory()  # a token allocates ~15 MB of temporaries: reuse freed memory (no page faults)
        self.design = design
        self.board = design.board_spec()
        self.llm = design.llm_spec()
        if validate:
            validate_design(design, self.board, self.llm)
        else:
            check_design_clock(design, self.board)
        self.name = f"fpga:{design.name}@{design.clock_hz / 1e6:g}MHz"
        self._p = hbm.hbm_params(self.board, design.clock_hz)
        self._memo: dict[tuple[int, bool], TokenResult] = {}

    @property
    def clock_hz(self) -> float:
        return self.design.clock_hz

    def token_identity(self) -> StreamingDesign:
        """What a token's result is a pure function of, with its context: the design (its clock included; the board
        and LLM specs are looked up by the names it holds). Engines of equal designs simulate identical tokens."""
        return self.design

    def token(self, ctx: int, with_lm_head: bool = True) -> TokenResult:
        key = (int(ctx), with_lm_head)
        res = self._memo.get(key)
        if res is None:
            prog = compile_token(self.design, self.board, self.llm, int(ctx), with_lm_head)
            res = run_program(self.design, self.board, self.llm, prog, int(ctx), with_lm_head)
            self._memo[key] = res
        return res

    @property
    def max_ctx(self) -> int:
        """The KV-cache capacity the design reserves (tokens)."""
        return self.design.max_ctx

    @property
    def host_link_bytes(self) -> dict[str, int]:
        """Bytes per token the design's placement sends over the host link (``to_device_bytes``, ``to_host_bytes``;
        fpga/streaming/placement.py): what a system times with its link model around the FPGA's token."""
        from fpga.streaming.placement import host_link_bytes

        return host_link_bytes(self.design, self.llm)

    def decode_s(self, ctx: int) -> float:
        return self.token(ctx).seconds

    def decode_steps_s(self, ctx0: int, n_steps: int) -> np.ndarray:
        """Times of ``n_steps`` consecutive decoded tokens at contexts ``ctx0 .. ctx0 + n_steps - 1``."""
        return np.array([self.token(ctx0 + i).seconds for i in range(n_steps)], dtype=float)

    def ingest_s(self, n_tokens: int, ctx: int) -> float:
        return sum(self.token(ctx + i, with_lm_head=False).seconds for i in range(n_tokens))

    def prefill_s(self, n_tokens: int, ctx: int = 0) -> float:
        if n_tokens < 1:
            raise DesignError(f"prefill needs at least one token, got {n_tokens}")
        return self.ingest_s(n_tokens - 1, ctx) + self.decode_s(ctx + n_tokens - 1)

    def layer_operator_shares_s(self, ctx: int) -> dict[str, float]:
        """Seconds per layer of each streaming operator in one ingested token at ``ctx`` (logits discarded).

        Operators of a dataflow design overlap, so their spans add up to more than the token: each operator gets
        the token's time in proportion to its span (first start to last result, summed over layers), which makes
        the operators' times add up to the token exactly. Layer operators are divided by the layer count; the
        embedding is reported once."""
        tok = self.token(ctx, with_lm_head=False)
        spans = tok.op_span_cycles
        scale = tok.seconds / max(1, sum(spans.values()))
        layers = self.llm.layers
        return {op: span * scale / (1 if op in _ONCE_PER_PASS else layers) for op, span in spans.items()}

    def operator_times_s(self, n_tokens: int, ctx: int) -> dict[str, float]:
        """Canonical operators' seconds per layer for ``n_tokens`` ingested one after another from ``ctx``
        (:mod:`hwmodel.interop.vidur`). The design has no batched datapath: a pass of ``n`` tokens is ``n``
        tokens. Every operator but attention takes its share of a token at context 0
        (:meth:`layer_operator_shares_s`), the same at every context; attention takes the rest of the token at
        its context, so the operators of a token at any context add up to that token exactly. Over ``n`` tokens
        attention is integrated by the trapezoid rule between the first and the last (its per-token time is
        affine in the context; ``tests/test_interop.py`` bounds the error). The KV write happens inside the
        attention engine (``kv_write`` 0)."""
        if n_tokens < 1 or ctx < 0:
            raise DesignError(f"operator times need n_tokens >= 1 and ctx >= 0, got {n_tokens}, {ctx}")
        base = self.layer_operator_shares_s(0)
        layers = self.llm.layers
        out = dict.fromkeys(
            (
                "input_norm",
                "qkv_proj",
                "rope",
                "kv_write",
                "attention",
                "o_proj",
                "residual_add",
                "post_norm",
                "up_proj",
                "act",
                "down_proj",
                "embed",
            ),
            0.0,
        )
        fixed_once = sum(v for op, v in base.items() if op in _ONCE_PER_PASS)
        fixed_layer = 0.0
        for op, sec in base.items():
            canon = _CANONICAL_OPERATOR.get(op)
            if canon is None or canon == "attention":
                continue
            out[canon] += n_tokens * sec
            if op not in _ONCE_PER_PASS:
                fixed_layer += sec

        def attention(c: int) -> float:
            return (self.token(c, with_lm_head=False).seconds - fixed_once) / layers - fixed_layer

        a0 = attention(ctx)
        a1 = attention(ctx + n_tokens - 1) if n_tokens > 1 else a0
        out["attention"] = n_tokens * (a0 + a1) / 2.0
        return out

    def power_w(self, phase: Phase) -> float:
        from fpga.streaming.power import phase_power_w

        return phase_power_w(self, phase)

    def energy_per_token_j(self, ctx: int) -> float:
        return self.power_w(Phase.DECODE) * self.decode_s(ctx)

    @property
    def memo_size(self) -> int:
        return len(self._memo)


_ONCE_PER_PASS = frozenset({"embed", "final_norm", "lm_head", "argmax"})
#: streaming operator -> canonical operator (hwmodel.interop.vidur); the head operators have none
_CANONICAL_OPERATOR = {
    "embed": "embed",
    "attn_norm": "input_norm",
    "qkv": "qkv_proj",
    "rope": "rope",
    "attention": "attention",
    "o_proj": "o_proj",
    "attn_add": "residual_add",
    "ffn_norm": "post_norm",
    "gate_up": "up_proj",
    "silu_mul": "act",
    "down": "down_proj",
    "ffn_add": "residual_add",
}
