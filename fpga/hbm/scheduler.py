"""Fabric ports through the HBM switch into their pseudo-channels, with the controller's request scheduling
(Numba; the cycle-stepped twin is :func:`fpga.hbm.reference.masters_profile_stepped`; several masters sharing channels:
:func:`masters_profile`).

What is modelled (docs/hbm.md, "Scheduling"):

* **The port** (an HLS ``m_axi`` master or an RTL one) issues its requests in program order, at most one per
  kernel cycle, with at most ``out_rd`` reads and ``out_wr`` writes in flight (HLS ``num_read_outstanding`` /
  ``num_write_outstanding``). Request ``r`` carries AXI ID ``r % n_ids`` (an HLS ``m_axi`` port issues every
  transaction with one ID: ``n_ids = 1``).
* **The switch** (PG276; AXI ordering): a request whose ID last went to another pseudo-channel waits until every
  earlier request of that ID has completed (responses of one ID return in order; AMD's RAMA IP exists to lift
  this). A channel ``hops`` segments away pays ``lateral_cycles`` per hop each way.
* **The controller's queue** (PG276 "HBM Reordering Options"): each pseudo-channel picks its next request among the
  first ``window`` pending ones in arrival order (64 with *Enable Request Reordering*, the 64-entry AXI command
  queue; 1 without it: arrival order, the memory controller's 12-entry queue only opening rows ahead). The pick is made when the
  previous request's last column command has issued (or when the first request enters the queue), among requests
  already in the queue (``latency_page_hit - tCL`` after they reach the controller: the controller's front
  pipeline, the same delay that bounds their first command), by PG276's priorities in its order: an open bank/row (row hit) first, then a bank group other
  than the last column command's, then an access whose activation can issue at once over one that must wait for a
  precharge (ranked by how long its bank's timers make it wait: first-ready), then the direction of the last
  command (read/write grouping, no bus turnaround), then age. A request never passes
  an older pending one to the same bank and row (PG276 *coherency in reordering*). The picked request's column
  commands, activations and refresh follow the bank-level rules of :func:`fpga.hbm.channel.channel_request_at`.
* **Return**: data of one ID returns in request order (the controller's reorder buffer); the kernel copies read
  data in program order, ``port_bytes`` per kernel cycle (:func:`fpga.hbm.channel.read_landing`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from fpga.hbm.channel import (
    CS_B_ACT,
    CS_B_RD,
    CS_B_ROW,
    CS_B_WR,
    CS_BG_ACT,
    CS_BG_COL,
    CS_BG_WR_END,
    CS_BURST_COL,
    CS_CLOSED_AT,
    CS_FAW,
    CS_FAW_PTR,
    CS_LAST_ACT,
    CS_LAST_COL,
    CS_LAST_RD_COL,
    CS_LAST_WR_END,
    CS_REF_OFF,
    HP_BA_BITS,
    HP_CCDL,
    HP_CCDS,
    HP_CMD,
    HP_FAW,
    HP_FRONT,
    HP_G_SHIFT,
    HP_GRANULE,
    HP_LOOKAHEAD,
    HP_MISALIGN,
    HP_RAS,
    HP_RC,
    HP_RCD,
    HP_REF_PHASE,
    HP_REFI,
    HP_RFC,
    HP_RP,
    HP_RRDL,
    HP_RRDS,
    HP_RTP,
    HP_RTW,
    HP_WR,
    HP_WTRL,
    HP_WTRS,
    axi_to_kernel,
    channel_request_at,
    div_by,
    granule_bank,
    granule_row,
    kernel_to_axi,
    read_landing,
    refresh_offset,
)

BIG = 1 << 62
WAIT_CAP = 1 << 20  # AXI cycles: activation waits are ranked up to this


@njit(cache=True, inline="always")
def refresh_closed_at(p: np.ndarray, off: int, a: int, b: int) -> int:
    """End of the last refresh window of a channel (window 0 at ``off``) that starts in the AXI cycles ``(a, b]``
    (every bank is closed until then), or -1 when none starts there."""
    if b < off:
        return -1
    s0 = off + ((b - off) // p[HP_REFI]) * p[HP_REFI]  # last window start at or before b
    return s0 + p[HP_RFC] if s0 > a else -1


@njit(cache=True, inline="always")
def pick_key(
    p: np.ndarray, st: np.ndarray, c: int, addr: int, is_write: int, ready: int, now: int, closed_at: int
) -> int:
    """PG276 priority of a pending request at AXI cycle ``now`` (smaller first): a row hit before a miss; then the
    earliest its first column command could issue - which promotes another bank group (tCCD_S, not tCCD_L), an
    access whose activation can issue at once over one that waits for a precharge or a bank timer (look-ahead
    PRE/ACT may issue from ``ready``, when it entered the queue) and the direction of the last command (no
    tWTR / tRTW turnaround). ``closed_at`` >= 0: a refresh window began since the last column command, every
    bank is closed until then."""
    g = p[HP_GRANULE]
    ga = div_by(addr, g, p[HP_G_SHIFT])
    bank = granule_bank(p, ga)
    row = granule_row(p, ga)
    bg = bank >> p[HP_BA_BITS]
    gap = p[HP_CMD] * (p[HP_MISALIGN] if addr % g != 0 else 1)
    col = max(ready, st[c, CS_BURST_COL] + gap, st[c, CS_LAST_COL] + p[HP_CCDS], st[c, CS_BG_COL + bg] + p[HP_CCDL])
    if is_write:
        col = max(col, st[c, CS_LAST_RD_COL] + p[HP_RTW])
    else:
        col = max(col, st[c, CS_LAST_WR_END] + p[HP_WTRS], st[c, CS_BG_WR_END + bg] + p[HP_WTRL])
    open_row = -1 if closed_at >= 0 else st[c, CS_B_ROW + bank]
    miss = 0
    if open_row != row:
        miss = 1
        t = ready if p[HP_LOOKAHEAD] else max(ready, st[c, CS_LAST_COL])
        if open_row >= 0:
            a = (
                max(
                    t,
                    st[c, CS_B_ACT + bank] + p[HP_RAS],
                    st[c, CS_B_RD + bank] + p[HP_RTP],
                    st[c, CS_B_WR + bank] + p[HP_WR],
                )
                + p[HP_RP]
            )
        else:
            a = max(t, closed_at if closed_at >= 0 else st[c, CS_CLOSED_AT])
        a = max(
            a,
            st[c, CS_B_ACT + bank] + p[HP_RC],
            st[c, CS_LAST_ACT] + p[HP_RRDS],
            st[c, CS_BG_ACT + bg] + p[HP_RRDL],
            st[c, CS_FAW + st[c, CS_FAW_PTR]] + p[HP_FAW],
        )
        col = max(col, a + p[HP_RCD])
    return miss * WAIT_CAP + min(max(col - now, 0), WAIT_CAP - 1)


@njit(cache=True, inline="always")
def same_bank_row(p: np.ndarray, a: int, b: int) -> bool:
    ga, gb = div_by(a, p[HP_GRANULE], p[HP_G_SHIFT]), div_by(b, p[HP_GRANULE], p[HP_G_SHIFT])
    return granule_bank(p, ga) == granule_bank(p, gb) and granule_row(p, ga) == granule_row(p, gb)


def port_profile(
    p: np.ndarray,
    st: np.ndarray,
    addrs: np.ndarray,
    chans: np.ndarray,
    req_bytes: int,
    writes: np.ndarray,
    out_rd: int,
    out_wr: int,
    n_ids: int,
    window: int,
    port_bytes: int,
    hops: np.ndarray,
    lateral_cycles: int,
) -> tuple[int, int, np.ndarray]:
    """One port issuing requests ``addrs[r]`` (byte address inside pseudo-channel ``chans[r]``, a row of the state
    table ``st``) as the module docstring says, with an always-ready consumer: :func:`masters_profile` with one
    master. Plain Python on purpose: compiled, it passed the literal 1 and Numba compiled a second specialization
    of :func:`masters_profile` for it in every process that called both; from Python the count is an int64.

    Returns (kernel cycle the last request landed, last AXI cycle any channel moved data, landing kernel cycle of
    every request)."""
    masters = np.zeros(len(addrs), dtype=np.int64)
    return masters_profile(
        p,
        st,
        addrs,
        chans,
        masters,
        1,
        req_bytes,
        writes,
        out_rd,
        out_wr,
        n_ids,
        window,
        port_bytes,
        hops.reshape(1, -1),
        lateral_cycles,
    )


@njit(cache=True)
def masters_profile(
    p: np.ndarray,
    st: np.ndarray,
    addrs: np.ndarray,
    chans: np.ndarray,
    masters: np.ndarray,
    n_masters: int,
    req_bytes: int,
    writes: np.ndarray,
    out_rd: int,
    out_wr: int,
    n_ids: int,
    window: int,
    port_bytes: int,
    hops: np.ndarray,
    lateral_cycles: int,
) -> tuple[int, int, np.ndarray]:
    """Several masters (fabric ports) sharing the pseudo-channels through the switch: request ``r`` belongs to
    master ``masters[r]`` (each master issues its own requests in index order, with its own in-flight limits,
    AXI IDs - the ID of a master's ``k``-th request is ``k % n_ids`` - and read landing order); ``hops[m, c]``:
    lateral segments from master ``m`` to channel ``c``.

    The switch (docs/hbm.md "Several masters"): a master's commands are forwarded in its order, each no earlier
    than the AXI cycle after its previous one entered its channel; a channel's input takes one command per AXI
    cycle, in the order the commands reach it, commands reaching it in the same cycle taken round-robin from the
    master after the one it granted last. A command waiting there does not stall its master."""
    n = len(addrs)
    n_pc = st.shape[0]
    lands = np.full(n, -1, dtype=np.int64)
    first = np.full(n, -1, dtype=np.int64)
    end = np.full(n, -1, dtype=np.int64)
    arrival = np.zeros(n, dtype=np.int64)
    done = np.zeros(n, dtype=np.int64)
    # per channel: its requests in arrival order, and the first not yet picked
    q = np.zeros(n, dtype=np.int64)  # channel c's slice starts at qoff[c]
    qoff = np.zeros(n_pc, dtype=np.int64)
    for r in range(n):
        if chans[r] + 1 < n_pc:
            qoff[chans[r] + 1] += 1
    for c in range(1, n_pc):
        qoff[c] += qoff[c - 1]
    qn = np.zeros(n_pc, dtype=np.int64)
    qh = np.zeros(n_pc, dtype=np.int64)
    pc_entry = np.full(n_pc, -1, dtype=np.int64)  # last AXI cycle a command entered the channel
    pc_rr = np.full(n_pc, n_masters - 1, dtype=np.int64)  # master granted last
    # per master (its slice off[m] .. of the flat lists): its program, k-th read / write
    cnt = np.zeros(n_masters, dtype=np.int64)
    for r in range(n):
        cnt[masters[r]] += 1
    off = np.zeros(n_masters, dtype=np.int64)
    for m in range(1, n_masters):
        off[m] = off[m - 1] + cnt[m - 1]
    prog = np.zeros(n, dtype=np.int64)
    pos = np.zeros(n, dtype=np.int64)
    kind_idx = np.zeros(n, dtype=np.int64)
    rd_list = np.zeros(n, dtype=np.int64)
    wr_list = np.zeros(n, dtype=np.int64)
    nk = np.zeros(n_masters, dtype=np.int64)
    nr = np.zeros(n_masters, dtype=np.int64)
    nw = np.zeros(n_masters, dtype=np.int64)
    for r in range(n):
        m = masters[r]
        pos[r] = nk[m]
        prog[off[m] + nk[m]] = r
        nk[m] += 1
        if writes[r]:
            kind_idx[r] = nw[m]
            wr_list[off[m] + nw[m]] = r
            nw[m] += 1
        else:
            kind_idx[r] = nr[m]
            rd_list[off[m] + nr[m]] = r
            nr[m] += 1
    id_chan = np.full((n_masters, n_ids), -1, dtype=np.int64)
    id_open = np.zeros((n_masters, n_ids), dtype=np.int64)  # issued, not yet landed
    id_land = np.zeros((n_masters, n_ids), dtype=np.int64)  # latest landing of the ID's requests so far
    for c in range(n_pc):
        if st[c, CS_REF_OFF] == 0:
            st[c, CS_REF_OFF] = refresh_offset(p, p[HP_REF_PHASE])
    issue = np.full(n_masters, -1, dtype=np.int64)
    nxt = np.zeros(n_masters, dtype=np.int64)
    m_entry = np.full(n_masters, -1, dtype=np.int64)  # AXI cycle the master's previous command entered
    land_ptr = np.zeros(n_masters, dtype=np.int64)  # next read (program order) whose landing is not known yet
    prev_land = np.zeros(n_masters, dtype=np.int64)
    committed = 0
    last_all = 0
    last_axi = 0
    while committed < n:
        # the next command to enter a channel, among each master's next request whose waits are known
        b_m = -1
        b_entry = BIG
        b_reach = BIG
        b_rank = BIG
        b_iss = -1
        for m in range(n_masters):
            if nxt[m] >= cnt[m]:
                continue
            r = prog[off[m] + nxt[m]]
            t = issue[m] + 1
            ok = True
            lim = out_wr if writes[r] else out_rd
            k = kind_idx[r]
            if k >= lim:
                qq = wr_list[off[m] + k - lim] if writes[r] else rd_list[off[m] + k - lim]
                if lands[qq] < 0:
                    ok = False
                elif lands[qq] > t:
                    t = lands[qq]
            i = pos[r] % n_ids
            c = chans[r]
            if ok and id_chan[m, i] >= 0 and id_chan[m, i] != c:
                if id_open[m, i] > 0:
                    ok = False
                elif id_land[m, i] > t:
                    t = id_land[m, i]
            if not ok:
                continue
            reach = max(kernel_to_axi(p, t) + hops[m, c] * lateral_cycles, m_entry[m] + 1)
            ent = max(reach, pc_entry[c] + 1)
            rank = (m - pc_rr[c] - 1) % n_masters
            if ent < b_entry or (ent == b_entry and (reach < b_reach or (reach == b_reach and rank < b_rank))):
                b_m, b_entry, b_reach, b_rank, b_iss = m, ent, reach, rank, t
        # the channel that decides first
        best_c = np.int64(-1)  # int64 from the start: the literal -1 compiled channel_request_at once more
        best_now = BIG
        for c in range(n_pc):
            while qh[c] < qn[c] and done[q[qoff[c] + qh[c]]]:
                qh[c] += 1
            if qh[c] == qn[c]:
                continue
            now = max(st[c, CS_LAST_COL] + 1, arrival[q[qoff[c] + qh[c]]] + p[HP_FRONT])
            if now < best_now:
                best_now = now
                best_c = c
        if b_m >= 0 and b_entry <= best_now:
            m = b_m
            r = prog[off[m] + nxt[m]]
            c = chans[r]
            arrival[r] = b_entry
            q[qoff[c] + qn[c]] = r
            qn[c] += 1
            pc_entry[c] = b_entry
            pc_rr[c] = m
            m_entry[m] = b_entry
            i = pos[r] % n_ids
            id_chan[m, i] = c
            id_open[m, i] += 1
            issue[m] = b_iss
            nxt[m] += 1
            continue
        if best_c < 0:
            break  # unreachable: a blocked request always waits on a pending one
        c = best_c
        now = best_now
        closed_at = refresh_closed_at(p, st[c, CS_REF_OFF], st[c, CS_LAST_COL], now)
        pick = -1
        pick_k = BIG
        seen = 0
        j = qh[c]
        while j < qn[c] and seen < window:
            r = q[qoff[c] + j]
            j += 1
            if done[r]:
                continue
            seen += 1
            if arrival[r] + p[HP_FRONT] > now:
                break  # arrival order: the rest are not in the queue yet either
            blocked = False
            for jj in range(qh[c], j - 1):
                o = q[qoff[c] + jj]
                if not done[o] and same_bank_row(p, addrs[o], addrs[r]):
                    blocked = True
                    break
            if blocked:
                continue
            kk = pick_key(p, st, c, addrs[r], writes[r], arrival[r] + p[HP_FRONT], now, closed_at)
            if kk < pick_k:
                pick_k = kk
                pick = r
        r = pick
        m = masters[r]
        f, e = channel_request_at(p, st, c, arrival[r], addrs[r], req_bytes, writes[r])
        first[r] = f
        end[r] = e
        done[r] = 1
        committed += 1
        last_axi = max(last_axi, e)
        if writes[r]:
            lands[r] = axi_to_kernel(p, e + hops[m, c] * lateral_cycles)
            _landed(m, pos[r] % n_ids, lands[r], id_open, id_land)
            last_all = max(last_all, lands[r])
        while land_ptr[m] < nr[m] and done[rd_list[off[m] + land_ptr[m]]]:
            rr = rd_list[off[m] + land_ptr[m]]
            xr = hops[m, chans[rr]] * lateral_cycles
            lands[rr] = read_landing(p, first[rr] + xr, end[rr] + xr, req_bytes, port_bytes, prev_land[m])
            prev_land[m] = lands[rr]
            _landed(m, pos[rr] % n_ids, lands[rr], id_open, id_land)
            last_all = max(last_all, lands[rr])
            land_ptr[m] += 1
    return last_all, last_axi, lands


@njit(cache=True, inline="always")
def _landed(m: int, i: int, land: int, id_open: np.ndarray, id_land: np.ndarray) -> None:
    id_open[m, i] -= 1
    id_land[m, i] = max(id_land[m, i], land)


def controller_window(board_hbm) -> int:  # type: ignore[no-untyped-def]
    """Requests the controller picks among (PG276 "HBM Reordering Options"): the 64-entry AXI command queue when
    request reordering is on, else 1 (column commands in arrival order; the memory controller's 12-entry queue
    still opens rows ahead with look-ahead precharge/activate, fpga/hbm/channel.py)."""
    if board_hbm.request_reordering and board_hbm.controller_policy == "lookahead":
        return int(board_hbm.reorder_queue_depth)
    return 1  # PG276: with look-ahead off "all commands are processed in the order received"
