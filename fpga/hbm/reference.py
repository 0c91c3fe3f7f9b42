"""Cycle-stepped twin of :func:`fpga.hbm.scheduler.masters_profile`: one or several ports issuing to several
pseudo-channels through the HBM switch, every kernel cycle and every AXI cycle of every channel stepped in time
order (plain Python, small runs only). Each channel is a :class:`fpga.streaming.reference._Channel` (the bank-level rules
as predicates) that is handed one request at a time by the controller's pick (:class:`_SchedChannel`); the port
rules (read and write in-flight limits, per-ID ordering through the switch, lateral hops each way) and the switch's
arbitration at each channel's input are tested as predicates each cycle."""

from __future__ import annotations

import collections

import numpy as np

from fpga.hbm import channel as hbm
from fpga.streaming.reference import _Channel


class _SchedChannel(_Channel):
    """A pseudo-channel whose controller picks its next request among the first ``window`` pending ones, once the
    previous request's last column command has issued (PG276 priorities, see fpga/hbm/scheduler.py)."""

    def __init__(self, p: list[int], window: int) -> None:
        super().__init__(p)
        self.window = window
        self.pending: list[list[int]] = []  # [request, arrival, addr, bytes, write] in arrival order

    def _where0(self, addr: int) -> tuple[int, int]:  # bank and row of a request's first granule
        bank, row, _bg = self._where(addr // self.p[hbm.HP_GRANULE])
        return bank, row

    def _key(self, entry: list[int], m: int) -> int:
        """Row hit first, then the first cycle its first column command could issue (fpga/hbm_sched.pick_key): the
        channel's own cycle-by-cycle plan of that access as if it were next."""
        queue, self.queue = self.queue, collections.deque([entry + [0]])
        act, col, _first_cmd = self._plan()
        self.queue = queue
        return (int(act >= 0) << 20) + min(max(col - m, 0), (1 << 20) - 1)

    def _pick(self, m: int) -> None:
        best, best_k = None, None
        for j, e in enumerate(self.pending[: self.window]):
            if e[1] + self.p[hbm.HP_FRONT] > m:
                break  # not through the controller's front pipeline yet
            if any(self._where0(o[2]) == self._where0(e[2]) for o in self.pending[:j]):
                continue  # never passes an older access to the same bank and row
            k = self._key(e, m)
            if best_k is None or k < best_k:
                best, best_k = e, k
        if best is not None:
            self.pending.remove(best)
            self.queue.append(best + [0])

    def step(self, m: int, on_first: callable, on_end: callable) -> None:  # type: ignore[valid-type]
        if self.queue:
            super().step(m, on_first, on_end)
            return
        super().step(m, on_first, on_end)  # nothing picked: only the refresh rules act
        self._pick(m)
        if self.queue:  # the pick may issue this very cycle (a window starting now counts it as waiting)
            p, s = self.p, self.s
            arrival, off, refi = self.queue[0][1], s[hbm.CS_REF_OFF], p[hbm.HP_REFI]
            # windows that began since the last column command while the picked request was at the controller
            k = 0
            while off + k * refi < m:
                w0 = off + k * refi
                if w0 > s[hbm.CS_LAST_COL] and w0 >= arrival:
                    s[hbm.CS_REFRESH_DEFERS] += 1
                k += 1
            super().step(m, on_first, on_end)


def port_profile_stepped(
    p: np.ndarray,
    phases: list[int],
    addrs: list[int],
    chans: list[int],
    req_bytes: int,
    writes: list[int],
    out_rd: int,
    out_wr: int,
    n_ids: int,
    window: int,
    port_bytes: int,
    hops: list[int],
    lateral_cycles: int,
) -> tuple[list[int], list[int], list[np.ndarray]]:
    """One port: :func:`masters_profile_stepped` with one master."""
    return masters_profile_stepped(
        p,
        phases,
        addrs,
        chans,
        [0] * len(addrs),
        req_bytes,
        writes,
        out_rd,
        out_wr,
        n_ids,
        window,
        port_bytes,
        [list(hops)],
        lateral_cycles,
    )


def masters_profile_stepped(
    p: np.ndarray,
    phases: list[int],
    addrs: list[int],
    chans: list[int],
    masters: list[int],
    req_bytes: int,
    writes: list[int],
    out_rd: int,
    out_wr: int,
    n_ids: int,
    window: int,
    port_bytes: int,
    hops: list[list[int]],
    lateral_cycles: int,
) -> tuple[list[int], list[int], list[np.ndarray]]:
    """Several masters through the switch (the rules of :func:`fpga.hbm.scheduler.masters_profile`): each kernel cycle
    every master may put its next request into its own in-order switch FIFO; each AXI cycle, each channel's input
    takes the one FIFO head (its master's previous command entered before this cycle) that reached it earliest,
    ties round-robin after the master granted last. Returns (landing kernel cycle per request, first-data AXI
    cycle per request, channel states)."""
    pl = [int(x) for x in p]
    tk, ta, sync = pl[hbm.HP_TK], pl[hbm.HP_TA], pl[hbm.HP_SYNC]
    chs = []
    for ph in phases:
        ch = _SchedChannel(pl, window)
        ch.s[hbm.CS_REF_OFF] = pl[hbm.HP_REFI] - ph % pl[hbm.HP_REFI]
        chs.append(ch)
    n = len(addrs)
    n_m = len(hops)
    land = [-1] * n
    first = [-1] * n
    end = [-1] * n
    prog = [[r for r in range(n) if masters[r] == m] for m in range(n_m)]
    issued = [0] * n_m
    last_issue = [-1] * n_m
    fifo: list[collections.deque[list[int]]] = [collections.deque() for _ in range(n_m)]  # [request, reach base]
    m_entry = [-1] * n_m  # AXI cycle the master's previous command entered its channel
    rr = [n_m - 1] * len(chs)
    copy_pos = [0] * n_m
    copy_start = [-1] * n_m
    prev_land = [0] * n_m

    def a2k(m: int) -> int:
        return -(-(m * ta) // tk) + sync

    def landed(q: int, kc: int) -> bool:
        return land[q] >= 0 and kc >= land[q]

    kc = ac = 0
    while not (sum(issued) == n and all(x >= 0 for x in land)):
        if ac * ta <= kc * tk:  # an AXI cycle: the switch's channel inputs, then every channel
            for c in range(len(chs)):
                cand = []
                for m in range(n_m):
                    if fifo[m] and chans[fifo[m][0][0]] == c:
                        reach = max(fifo[m][0][1], m_entry[m] + 1)
                        if reach <= ac:
                            cand.append((reach, (m - rr[c] - 1) % n_m, m))
                if cand:
                    _reach, _rank, m = min(cand)
                    r = fifo[m].popleft()[0]
                    chs[c].pending.append([r, ac, addrs[r], req_bytes, writes[r]])
                    m_entry[m] = ac
                    rr[c] = m
            for c, ch in enumerate(chs):

                def on_first(r: int, mm: int) -> None:
                    first[r] = mm

                def on_end(r: int, mm: int, c: int = c) -> None:
                    end[r] = mm
                    if writes[r]:
                        land[r] = a2k(mm + hops[masters[r]][c] * lateral_cycles)

                ch.step(ac, on_first, on_end)
            ac += 1
            continue
        for m in range(n_m):  # kernel cycle kc: each master's reads land in its program order, then it may issue
            mine_all = prog[m]
            reads = [r for r in mine_all if not writes[r]]
            while copy_pos[m] < len(reads):
                r = reads[copy_pos[m]]
                x = hops[m][chans[r]] * lateral_cycles
                if copy_start[m] < 0:
                    if first[r] < 0 or kc < a2k(first[r] + x + 1) or kc < prev_land[m]:
                        break
                    copy_start[m] = kc
                if end[r] < 0 or kc < a2k(end[r] + x) or kc < copy_start[m] + -(-req_bytes // port_bytes):
                    break
                land[r] = prev_land[m] = kc
                copy_pos[m] += 1
                copy_start[m] = -1
            if issued[m] == len(mine_all) or kc < last_issue[m] + 1:
                continue
            k_all = issued[m]
            r = mine_all[k_all]
            mine = [q for q in mine_all if writes[q] == writes[r]]
            k = mine.index(r)
            lim = out_wr if writes[r] else out_rd
            ok = k < lim or landed(mine[k - lim], kc)
            same_id = [q for j, q in enumerate(mine_all[:k_all]) if j % n_ids == k_all % n_ids]
            if ok and same_id and chans[same_id[-1]] != chans[r]:  # the ID changes destination: all of it done
                ok = all(landed(q, kc) for q in same_id)
            if ok:
                reach = -(-((kc + 1) * tk) // ta) + sync + pl[hbm.HP_SWITCH] + hops[m][chans[r]] * lateral_cycles
                fifo[m].append([r, reach])
                last_issue[m] = kc
                issued[m] += 1
        kc += 1
    return land, first, [ch.state() for ch in chs]
