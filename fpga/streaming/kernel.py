"""The fast engine's kernel (Numba): one token of a streaming design as max-plus recurrences over its blocks and
requests, event-driven (docs/streaming.md; the model is in :mod:`fpga.streaming.engine`'s docstring).

It visits each block and each request once (AXI3 bursts, row changes and refresh windows inside a request are
computed in closed form by :mod:`fpga.hbm.channel`), and simulates one port per class of identical ports (same
requests, same consumers, hence the same trajectory). :func:`_simulate` is the entry point, called by
:func:`fpga.streaming.engine.run_kernel` on a compiled program (:mod:`fpga.streaming.program`); the cycle-stepped
reference (:mod:`fpga.streaming.reference`) steps every cycle, and the test suite proves both identical.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from fpga.hbm import channel as hbm
from fpga.streaming.program_format import (
    R_ADDR,
    R_BYTES,
    R_DEP,
    R_DEP_OFF,
    R_OUTPREV,
    R_SLOT,
    R_SLOT_OFF,
    R_WRITE,
)

#: per-engine cycle counters of a token (columns of the kernel's ``cnt``), in token_result.ENGINE_COUNTERS order
EC_BUSY, EC_DRAIN, EC_IN, EC_MEM, EC_OUT, EC_DONE = range(6)


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
