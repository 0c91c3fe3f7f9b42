"""How the fast engine's kernel visits a token's blocks and requests (Numba; :mod:`fpga.streaming.kernel` holds the
per-request and per-channel steps, docs/streaming.md the model).

:func:`_simulate` is the entry point (:func:`fpga.streaming.engine.run_kernel` calls it on a compiled program). On
unshared channels it sweeps every engine and port class in order while anything moves: few sweeps, each cheap, and
the block loop inline (a call per engine visit costs 3-4 % of a LLaMA2-7B token, measured). A program with a
shared channel (ports of two engines on one channel: multi-unit designs, shared-port designs) is scheduled by
:func:`_schedule_shared`, a ready queue: its arbiter waits for every sharer's head, so sweeps advanced one block or
request each (1.1 M sweeps for a TeraFly two-unit token) where the queue visits each waiter when it can move.
Both give the same cycles (tests/test_streaming_equivalence.py, tests/test_shared_ports.py, tests/test_units.py).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from fpga.hbm import channel as hbm
from fpga.streaming.kernel import (
    EC_BUSY,
    EC_DONE,
    EC_DRAIN,
    EC_IN,
    EC_MEM,
    EC_OUT,
    GS_CHAN,
    GS_ENG,
    GS_HEAD_ARR,
    GS_LAST_ISSUE,
    GS_PORT_BYTES,
    GS_PORT_SHIFT,
    GS_POS,
    GS_SHARED,
    RT_END,
    RT_FIRST,
    RT_ISSUE,
    RT_LAND,
    _best_head,
    _grant,
    _issue,
    _run_channel,
)
from fpga.streaming.program_format import R_DEP, R_SLOT


@njit(cache=True, _nrt=False)  # no reference counting: it allocates nothing
def _wake(
    w_head: int, w_next: np.ndarray, w_reg: np.ndarray, queue: np.ndarray, queued: np.ndarray, qs: np.ndarray
) -> None:
    """Put every waiter of one list (first waiter ``w_head``, chained by ``w_next``) on the ready queue, once."""
    w = w_head
    while w >= 0:
        nxt = w_next[w]
        w_next[w] = -1
        w_reg[w] = 0
        _wait_ready(w, queue, queued, qs)
        w = nxt


@njit(cache=True, _nrt=False)  # no reference counting
def _wait(w: int, heads: np.ndarray, on: int, w_next: np.ndarray, w_reg: np.ndarray) -> None:
    """Waiter w waits in list ``heads[on]`` (a block's start or a port class's issue), unless already waiting."""
    if not w_reg[w]:
        w_reg[w] = 1
        w_next[w] = heads[on]
        heads[on] = w


@njit(cache=True, _nrt=False)  # no reference counting
def _wait_ready(w: int, queue: np.ndarray, queued: np.ndarray, qs: np.ndarray) -> None:
    """Waiter w on the ready queue, once."""
    if not queued[w]:
        queued[w] = 1
        queue[qs[1]] = w
        qs[1] = (qs[1] + 1) % len(queue)


@njit(cache=True, _nrt=False)  # no reference counting
def _try_issue(
    p: np.ndarray,
    g: int,
    start: np.ndarray,
    gs: np.ndarray,
    g_ptr: np.ndarray,
    rq: np.ndarray,
    rt: np.ndarray,
    st: np.ndarray,
) -> bool:
    """Port class g on an unshared channel: issue what it can (the head's conditions first: no call that would
    issue nothing)."""
    r = gs[GS_POS, g]
    return (
        r < g_ptr[g + 1]
        and (rq[r, R_SLOT] < 0 or start[rq[r, R_SLOT]] >= 0)
        and (rq[r, R_DEP] < 0 or start[rq[r, R_DEP]] >= 0)
        and _issue(p, g, g_ptr[g + 1], start, gs, g_ptr, rq, rt, st)
    )


@njit(cache=True, _nrt=False)  # no reference counting
def _group_waits_on(g: int, start: np.ndarray, gs: np.ndarray, g_ptr: np.ndarray, rq: np.ndarray) -> int:
    """The block whose start port class g's next request waits for to issue (-1: none left, issued, or free to)."""
    r = gs[GS_POS, g]
    if r >= g_ptr[g + 1] or gs[GS_HEAD_ARR, g] >= 0:  # none left, or a shared channel's head waiting for its grant
        return -1
    b = rq[r, R_SLOT]
    if b >= 0 and start[b] < 0:
        return b
    b = rq[r, R_DEP]
    if b >= 0 and start[b] < 0:
        return b
    return -1


@njit(cache=True, _nrt=False)  # no reference counting
def _run_class(
    g: int,
    n_e: int,
    p: np.ndarray,
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
    bw_head: np.ndarray,
    gw_head: np.ndarray,
    w_next: np.ndarray,
    w_reg: np.ndarray,
    queue: np.ndarray,
    queued: np.ndarray,
    qs: np.ndarray,
) -> bool:
    """Port class g issues what it can (on a shared channel: the channel issues its sharers' heads and grants
    while the next grant is known). The engines waiting on a class that moved are woken, and each class left waiting
    for a block's start waits in that block's list. True if anything was issued or granted."""
    if gs[GS_SHARED, g]:
        c = gs[GS_CHAN, g]
        moved = _run_channel(p, c, start, gs, g_ptr, rq, rt, st, c_ptr, c_list, last, arb)
        lo, hi = c_ptr[c], c_ptr[c + 1]  # every sharer may have moved
    else:
        moved = _try_issue(p, g, start, gs, g_ptr, rq, rt, st)
        lo, hi = -1, 0  # g alone
    for k in range(lo, hi):
        h = c_list[k] if k >= 0 else g
        if moved and gw_head[h] >= 0:
            _wake(gw_head[h], w_next, w_reg, queue, queued, qs)
            gw_head[h] = -1
        b = _group_waits_on(h, start, gs, g_ptr, rq)
        if b >= 0:
            _wait(n_e + h, bw_head, b, w_next, w_reg)
    return moved


@njit(cache=True, _nrt=False)  # no reference counting: it allocates nothing
def _run_blocks(
    e: int,
    start: np.ndarray,
    cnt: np.ndarray,
    e_pos: np.ndarray,
    e_ptr: np.ndarray,
    e_list: np.ndarray,
    e_issue_end: np.ndarray,
    e_done_at: np.ndarray,
    e_lat: np.ndarray,
    t_dep: np.ndarray,
    t_off: np.ndarray,
    t_need: np.ndarray,
    t_drain: np.ndarray,
    t_cyc: np.ndarray,
    g_ptr: np.ndarray,
    gs: np.ndarray,
    rt: np.ndarray,
    bw_head: np.ndarray,
    w_next: np.ndarray,
    w_reg: np.ndarray,
    queue: np.ndarray,
    queued: np.ndarray,
    qs: np.ndarray,
) -> int:
    """Engine e starts its blocks in order while their inputs, output space and memory reads are known, as the
    sweeps of :func:`_simulate` do, and wakes the waiters of every block it starts. Returns what its next block
    waits for: -1 nothing (the engine is done), a block ``b >= 0``, or ``-(g + 2)``: a request of port class g.
    The block rule is written twice, here and inline in :func:`_simulate`'s sweeps (a call there costs 3-4 % of an
    unshared token): a change to one is a change to both, and the fast-vs-reference tests run both paths."""
    n_g = len(g_ptr) - 1
    pos = e_pos[e]
    pos_end = e_ptr[e + 1]
    cur_end = e_issue_end[e]
    done_at = e_done_at[e]
    lat_e = e_lat[e]
    n_dr = n_in = n_mem = n_out = n_busy = 0
    why = -1
    while pos < pos_end:
        t = e_list[pos]
        t_in = 0
        t_out = 0
        for s in range(t_dep.shape[1]):
            d = t_dep[t, s]
            if d >= 0:
                if start[d] < 0:
                    why = d
                    break
                v = start[d] + t_off[t, s]
                if s < 2 or (s > 2 and s % 2 == 1):  # inputs; slot 2 and even extra slots: output space
                    t_in = max(t_in, v)
                else:
                    t_out = max(t_out, v)
        if why >= 0:
            break
        t_mem = 0
        for g in range(n_g):
            r = t_need[t, g]
            if r >= 0:
                rr = g_ptr[g] + r
                if rr >= gs[GS_POS, g]:  # not issued yet
                    why = -(g + 2)
                    break
                t_mem = max(t_mem, rt[rr, RT_LAND])
        if why < -1:
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
        if bw_head[t] >= 0:
            _wake(bw_head[t], w_next, w_reg, queue, queued, qs)
            bw_head[t] = -1
        cur_end = s0 + c_t
        done_at = cur_end + lat_e
        pos += 1
    if pos > e_pos[e]:
        e_pos[e] = pos
        e_issue_end[e] = cur_end
        e_done_at[e] = done_at
        cnt[e, EC_DRAIN] += n_dr
        cnt[e, EC_IN] += n_in
        cnt[e, EC_MEM] += n_mem
        cnt[e, EC_OUT] += n_out
        cnt[e, EC_BUSY] += n_busy
    return why


@njit(cache=True)
def _schedule_shared(
    p: np.ndarray,
    start: np.ndarray,
    cnt: np.ndarray,
    e_pos: np.ndarray,
    e_ptr: np.ndarray,
    e_list: np.ndarray,
    e_issue_end: np.ndarray,
    e_done_at: np.ndarray,
    e_lat: np.ndarray,
    t_dep: np.ndarray,
    t_off: np.ndarray,
    t_need: np.ndarray,
    t_drain: np.ndarray,
    t_cyc: np.ndarray,
    g_eng: np.ndarray,
    g_ptr: np.ndarray,
    gs: np.ndarray,
    rq: np.ndarray,
    rt: np.ndarray,
    st: np.ndarray,
    c_ptr: np.ndarray,
    c_list: np.ndarray,
    last: np.ndarray,
    arb: int,
) -> int:
    """Every block and request of a program with a shared channel, by a ready queue: an engine or port class runs
    when it can move; one that cannot waits in the list of the one block start or port class issue it needs, and
    is woken by it. When nothing can move, the earliest head a shared channel holds back is granted (as the sweeps
    do). The cycles are those of the sweeps whatever the visiting order: a block's start and a request's issue are
    max-plus functions of earlier times, and a shared channel grants only the head it would grant in any order.
    Returns the number of visits."""
    n = len(t_dep)
    n_e = len(e_lat)
    n_g = len(g_ptr) - 1
    n_c = len(c_ptr) - 1
    eg_ptr = np.zeros(n_e + 1, dtype=np.int64)  # each engine's port classes, in class order (CSR)
    for g in range(n_g):
        if 0 <= g_eng[g] < n_e:
            eg_ptr[g_eng[g] + 1] += 1
    for e in range(n_e):
        eg_ptr[e + 1] += eg_ptr[e]
    eg_list = np.empty(eg_ptr[n_e], dtype=np.int64)
    eg_fill = eg_ptr[:-1].copy()
    for g in range(n_g):
        if 0 <= g_eng[g] < n_e:
            eg_list[eg_fill[g_eng[g]]] = g
            eg_fill[g_eng[g]] += 1
    # waiters: engine e is e, port class g is n_e + g; each waits in at most one list at a time
    n_w = n_e + n_g
    bw_head = np.full(n, -1, dtype=np.int64)  # block -> its first waiter
    gw_head = np.full(n_g, -1, dtype=np.int64)  # port class -> the first engine waiting for its next issue
    w_next = np.full(n_w, -1, dtype=np.int64)
    w_reg = np.zeros(n_w, dtype=np.int8)
    queue = np.arange(n_w + 1, dtype=np.int64)  # the ready ring, every waiter in it to begin with
    queued = np.ones(n_w, dtype=np.int8)
    qs = np.array([0, n_w], dtype=np.int64)  # head, tail
    visits = 0
    while True:
        if qs[0] == qs[1]:
            # nothing moves: every unknown time waits (through blocks and reads) on a head a shared channel holds
            # back, so it comes later than the earliest such head, which the channel can grant now
            # typed int64 from the start: the literal -1 made Numba also compile _grant, _serve and
            # channel_request_at for the literal (1-2 CPU-s of every fresh compile, never called)
            bc = np.int64(-1)
            bg = np.int64(-1)
            for c in range(n_c):
                if c_ptr[c + 1] - c_ptr[c] > 1:
                    g = _best_head(c, c_ptr, c_list, last, arb, gs, g_ptr, True)
                    if g >= 0 and (bg < 0 or gs[GS_HEAD_ARR, g] < gs[GS_HEAD_ARR, bg]):
                        bc, bg = c, g
            if bg < 0:
                return visits  # every block started, or a deadlock
            _grant(p, bc, bg, last, gs, rq, rt, st)
            if gw_head[bg] >= 0:
                _wake(gw_head[bg], w_next, w_reg, queue, queued, qs)
                gw_head[bg] = -1
            _wait_ready(n_e + bg, queue, queued, qs)  # its channel may grant again (a class with a head waits nowhere)
        w = queue[qs[0]]
        qs[0] = (qs[0] + 1) % len(queue)
        queued[w] = 0
        visits += 1
        if w >= n_e:  # a port class
            _run_class(
                w - n_e, n_e, p, start, gs, g_ptr, rq, rt, st, c_ptr, c_list, last, arb, bw_head, gw_head, w_next,
                w_reg, queue, queued, qs,
            )  # fmt: skip
            continue
        local = True
        why = -1
        while local:  # the engine and its own ports until neither can move without another engine
            why = _run_blocks(
                w, start, cnt, e_pos, e_ptr, e_list, e_issue_end, e_done_at, e_lat, t_dep, t_off, t_need, t_drain,
                t_cyc, g_ptr, gs, rt, bw_head, w_next, w_reg, queue, queued, qs,
            )  # fmt: skip
            local = False
            for k in range(eg_ptr[w], eg_ptr[w + 1]):
                if _run_class(
                    eg_list[k], n_e, p, start, gs, g_ptr, rq, rt, st, c_ptr, c_list, last, arb, bw_head, gw_head,
                    w_next, w_reg, queue, queued, qs,
                ):  # fmt: skip
                    local = True
        if why >= 0:  # waits for a block to start
            _wait(w, bw_head, why, w_next, w_reg)
        elif why < -1:  # waits for a port class to issue
            _wait(w, gw_head, -why - 2, w_next, w_reg)


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
    sweeps = 0
    if any_shared:
        sweeps = _schedule_shared(
            p, start, cnt, e_pos, e_ptr, e_list, e_issue_end, e_done_at, e_lat, t_dep, t_off, t_need, t_drain, t_cyc,
            g_eng, g_ptr, gs, rq, rt, st, c_ptr, c_list, last, arb,
        )  # fmt: skip
    progress = not any_shared
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
                        r = gs[GS_POS, g]  # the head's conditions first: no call that would issue nothing
                        if (
                            r < g_ptr[g + 1]
                            and (rq[r, R_SLOT] < 0 or start[rq[r, R_SLOT]] >= 0)
                            and (rq[r, R_DEP] < 0 or start[rq[r, R_DEP]] >= 0)
                            and _issue(p, g, g_ptr[g + 1], start, gs, g_ptr, rq, rt, st)
                        ):
                            local = True
                            progress = True
        for g in range(n_g):
            r = gs[GS_POS, g]
            if (
                r < g_ptr[g + 1]
                and (rq[r, R_SLOT] < 0 or start[rq[r, R_SLOT]] >= 0)
                and (rq[r, R_DEP] < 0 or start[rq[r, R_DEP]] >= 0)
                and _issue(p, g, g_ptr[g + 1], start, gs, g_ptr, rq, rt, st)
            ):
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
