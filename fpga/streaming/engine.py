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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from numba import njit

from fpga.hbm import channel as hbm
from fpga.streaming.checks import check_design_clock, check_hbm_capacity, validate_design
from fpga.streaming.design import ALL_OPS, DesignError, StreamingDesign, design_names, load_design
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
from fpga.streaming.token_result import (  # noqa: F401  (re-exported: callers import them from here)
    ENGINE_COUNTERS,
    TokenResult,
    _channels,
    _engine_table,
    _op_tables,
    build_result,
    class_channels,
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
    "check_design_clock",
    "check_hbm_capacity",
    "design_names",
    "ENGINE_COUNTERS",
]

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
    # the class's state in locals while it issues (stores to rt would otherwise force a reload of every gs field)
    r0 = r = gs[GS_POS, g]
    last = gs[GS_LAST_ISSUE, g]
    prev_land = gs[GS_PREV_LAND, g]
    chan = gs[GS_CHAN, g]
    port_bytes = gs[GS_PORT_BYTES, g]
    port_shift = gs[GS_PORT_SHIFT, g]
    base = g_ptr[g]
    while r < limit:
        ti = last + 1
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
            ti = max(ti, rt[base + o, RT_LAND])
        rt[r, RT_ISSUE] = ti
        last = ti
        arrival = hbm.kernel_to_axi(p, ti)
        w = rq[r, R_WRITE]
        nbytes = rq[r, R_BYTES]
        f, en = hbm.channel_request_at(p, st, chan, arrival, rq[r, R_ADDR], nbytes, w)
        rt[r, RT_FIRST] = f
        rt[r, RT_END] = en
        if w:
            rt[r, RT_LAND] = hbm.axi_to_kernel(p, en)
        else:
            prev_land = hbm.read_landing(p, f, en, nbytes, port_bytes, prev_land, port_shift)
            rt[r, RT_LAND] = prev_land
        r += 1
    gs[GS_POS, g] = r
    gs[GS_LAST_ISSUE, g] = last
    gs[GS_PREV_LAND, g] = prev_land
    return r > r0


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
    rt = np.empty((n_r, 4), dtype=np.int64)  # every row is written when issued; the rest -1 at the end
    progress = True
    sweeps = 0
    while progress:
        progress = False
        sweeps += 1
        for e in range(n_e):
            local = True
            while local:  # the engine and its own ports until neither can move without another engine
                local = False
                # the engine's state in locals while it runs blocks (stores to start would force reloads)
                pos = e_pos[e]
                pos_end = e_ptr[e + 1]
                cur_end = e_issue_end[e]
                done_at = e_done_at[e]
                lat_e = e_lat[e]
                n_dr = n_in = n_mem = n_out = n_busy = 0
                while pos < pos_end:
                    t = e_list[pos]
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
                    cur = cur_end
                    t_dr = done_at if t_drain[t] else 0
                    s0 = max(cur, t_dr, t_in, t_mem, t_out)
                    if t_dr > cur:
                        n_dr += t_dr - cur
                        cur = t_dr
                    if t_in > cur:
                        n_in += t_in - cur
                        cur = t_in
                    if t_mem > cur:
                        n_mem += t_mem - cur
                        cur = t_mem
                    if t_out > cur:
                        n_out += t_out - cur
                        cur = t_out
                    c_t = t_cyc[t]
                    n_busy += c_t
                    start[t] = s0
                    cur_end = s0 + c_t
                    done_at = cur_end + lat_e
                    pos += 1
                if pos > e_pos[e]:
                    progress = True
                    e_pos[e] = pos
                    e_issue_end[e] = cur_end
                    e_done_at[e] = done_at
                    cnt[e, EC_DRAIN] += n_dr
                    cnt[e, EC_IN] += n_in
                    cnt[e, EC_MEM] += n_mem
                    cnt[e, EC_OUT] += n_out
                    cnt[e, EC_BUSY] += n_busy
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
        for r in range(gs[GS_POS, g], g_ptr[g + 1]):  # not served (a deadlock): -1, but a held head's issue cycle
            status = 1
            if r > gs[GS_POS, g] or gs[GS_HEAD_ARR, g] < 0:
                rt[r, RT_ISSUE] = -1
            rt[r, RT_LAND] = -1
            rt[r, RT_FIRST] = -1
            rt[r, RT_END] = -1
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
    return kernel_result(design, design, board, llm, prog, ctx, with_lm_head)[0]


def kernel_result(
    design: StreamingDesign,
    shown: StreamingDesign,
    board: BoardSpec,
    llm: LlmSpec,
    prog: Program,
    ctx: int,
    with_lm_head: bool,
    deadlock: Callable[[StreamingDesign, int, Any, np.ndarray], Exception] | None = None,
) -> tuple[TokenResult, np.ndarray, int]:
    """Run the fast engine on ``prog`` and build the token's result with the engines of ``shown`` (``design`` itself,
    or a multi-unit design's engines flattened, fpga/streaming/units_result.py); a deadlock raises what
    ``deadlock`` (default: the one-unit message) makes of it. Returns the result, the per-engine counters and the
    token's cycles."""
    p = hbm.hbm_params(board, design.clock_hz, hbm.token_refresh_phase(board, ctx))
    status, total, start, cnt, _i, _l, _f, _e, st, _sweeps = run_kernel(p, prog)
    if status:
        raise (deadlock or _deadlock)(design, ctx, prog, start)
    seconds = total / design.clock_hz
    channels = _channels(shown, board, prog, st, seconds)
    res = build_result(shown, board, llm, prog, ctx, with_lm_head, design.clock_hz, total, start, cnt, channels)
    return res, cnt, int(total)


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
