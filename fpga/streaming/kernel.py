"""The fast engine's kernel (Numba), its steps: a port class issuing its requests to its own channel, and a shared
channel issuing and granting its sharers' heads (docs/streaming.md; the model is in :mod:`fpga.streaming.engine`'s
docstring). :mod:`fpga.streaming.schedule` visits a token's blocks and requests with these steps (its
:func:`~fpga.streaming.schedule._simulate` is the entry point, called by :func:`fpga.streaming.engine.run_kernel`).

Each block and each request is visited once (AXI3 bursts, row changes and refresh windows inside a request are
computed in closed form by :mod:`fpga.hbm.channel`), and one port per class of identical ports is simulated (same
requests, same consumers, hence the same trajectory); the cycle-stepped reference (:mod:`fpga.streaming.reference`)
steps every cycle, and the test suite proves both identical.
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
