"""Cycle-stepped twin of :func:`fpga.hbm.port_profile`: one port issuing to several pseudo-channels through the
HBM switch, every kernel cycle and every AXI cycle of every channel stepped in time order (plain Python, small
runs only). The channels are :class:`fpga.streaming_ref._Channel`; the port rules (in-flight limit, one AXI ID:
a new destination waits for every earlier request, lateral hops each way) are tested as predicates each cycle."""
from __future__ import annotations

import numpy as np

from fpga import hbm
from fpga.streaming_ref import _Channel


def port_profile_stepped(p: np.ndarray, phases: list[int], addrs: list[int], chans: list[int], req_bytes: int,
                         writes: list[int], outstanding: int, port_bytes: int, hops: list[int],
                         lateral_cycles: int) -> tuple[list[int], list[int], list[np.ndarray]]:
    """Returns (landing kernel cycle per request, first-data AXI cycle per request, channel states)."""
    pl = [int(x) for x in p]
    tk, ta, sync = pl[hbm.HP_TK], pl[hbm.HP_TA], pl[hbm.HP_SYNC]
    chs = []
    for ph in phases:
        ch = _Channel(pl)
        ch.s[hbm.CS_REF_OFF] = pl[hbm.HP_REFI] - ph % pl[hbm.HP_REFI]
        chs.append(ch)
    n = len(addrs)
    land = [-1] * n
    first = [-1] * n
    end = [-1] * n
    issued = 0
    last_issue = -1
    reads = [r for r in range(n) if not writes[r]]
    copy_pos = 0
    copy_start = -1
    prev_land = 0

    def a2k(m: int) -> int:
        return -(-(m * ta) // tk) + sync

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
        # kernel cycle kc: reads land in order, then the port may issue one request
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
            ok = r < outstanding or (land[r - outstanding] >= 0 and kc >= land[r - outstanding])
            if ok and r > 0 and chans[r] != chans[r - 1]:  # one AXI ID: every earlier request completed
                ok = all(land[q] >= 0 and kc >= land[q] for q in range(r))
            if ok:
                arrival = -(-((kc + 1) * tk) // ta) + sync + pl[hbm.HP_SWITCH] + hops[chans[r]] * lateral_cycles
                chs[chans[r]].queue.append([r, arrival, addrs[r], req_bytes, writes[r], 0])
                last_issue = kc
                issued += 1
        kc += 1
    return land, first, [ch.state() for ch in chs]
