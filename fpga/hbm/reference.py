"""Cycle-stepped twin of :func:`fpga.hbm.scheduler.port_profile`: one port issuing to several pseudo-channels through
the HBM switch, every kernel cycle and every AXI cycle of every channel stepped in time order (plain Python, small
runs only). Each channel is a :class:`fpga.streaming.reference._Channel` (the bank-level rules as predicates) that is
handed one request at a time by the controller's pick (:class:`_SchedChannel`); the port rules (read and write
in-flight limits, per-ID ordering through the switch, lateral hops each way) are tested as predicates each cycle."""
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
        for j, e in enumerate(self.pending[:self.window]):
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


def port_profile_stepped(p: np.ndarray, phases: list[int], addrs: list[int], chans: list[int], req_bytes: int,
                         writes: list[int], out_rd: int, out_wr: int, n_ids: int, window: int, port_bytes: int,
                         hops: list[int], lateral_cycles: int) -> tuple[list[int], list[int], list[np.ndarray]]:
    """Returns (landing kernel cycle per request, first-data AXI cycle per request, channel states)."""
    pl = [int(x) for x in p]
    tk, ta, sync = pl[hbm.HP_TK], pl[hbm.HP_TA], pl[hbm.HP_SYNC]
    chs = []
    for ph in phases:
        ch = _SchedChannel(pl, window)
        ch.s[hbm.CS_REF_OFF] = pl[hbm.HP_REFI] - ph % pl[hbm.HP_REFI]
        chs.append(ch)
    n = len(addrs)
    land = [-1] * n
    first = [-1] * n
    end = [-1] * n
    issued = 0
    last_issue = -1
    reads = [r for r in range(n) if not writes[r]]
    kind = [[r for r in range(n) if writes[r] == w] for w in (0, 1)]
    copy_pos = 0
    copy_start = -1
    prev_land = 0

    def a2k(m: int) -> int:
        return -(-(m * ta) // tk) + sync

    def landed(q: int, kc: int) -> bool:
        return land[q] >= 0 and kc >= land[q]

    kc = ac = 0
    while not (issued == n and all(x >= 0 for x in land)):
        if ac * ta <= kc * tk:  # an AXI cycle of every channel
            for c, ch in enumerate(chs):
                def on_first(r: int, mm: int) -> None:
                    first[r] = mm

                def on_end(r: int, mm: int, c: int = c) -> None:
                    end[r] = mm
                    if writes[r]:
                        land[r] = a2k(mm + hops[c] * lateral_cycles)
                ch.step(ac, on_first, on_end)
            ac += 1
            continue
        # kernel cycle kc: reads land in program order, then the port may issue one request
        while copy_pos < len(reads):
            r = reads[copy_pos]
            x = hops[chans[r]] * lateral_cycles
            if copy_start < 0:
                if first[r] < 0 or kc < a2k(first[r] + x + 1) or kc < prev_land:
                    break
                copy_start = kc
            if end[r] < 0 or kc < a2k(end[r] + x) or kc < copy_start + -(-req_bytes // port_bytes):
                break
            land[r] = prev_land = kc
            copy_pos += 1
            copy_start = -1
        r = issued
        if r < n and kc >= last_issue + 1:
            mine = kind[writes[r]]
            k = mine.index(r)
            lim = out_wr if writes[r] else out_rd
            ok = k < lim or landed(mine[k - lim], kc)
            same_id = [q for q in range(r) if q % n_ids == r % n_ids]
            if ok and same_id and chans[same_id[-1]] != chans[r]:  # the ID changes destination: all of it done
                ok = all(landed(q, kc) for q in same_id)
            if ok:
                arrival = -(-((kc + 1) * tk) // ta) + sync + pl[hbm.HP_SWITCH] + hops[chans[r]] * lateral_cycles
                chs[chans[r]].pending.append([r, arrival, addrs[r], req_bytes, writes[r]])
                last_issue = kc
                issued += 1
        kc += 1
    return land, first, [ch.state() for ch in chs]
