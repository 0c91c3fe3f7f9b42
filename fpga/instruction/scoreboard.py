"""The dependency pass: resource reads and writes of the emitted instructions become the scoreboard fields (RAW,
WAR, WAW waits, as relative per-unit lags) of :mod:`fpga.instruction.isa`."""

from __future__ import annotations

import numpy as np

from fpga.instruction import isa
from fpga.instruction.emitter import _Ins


def _dependencies(ins: list[_Ins]) -> np.ndarray:
    """Scoreboard fields from resource reads/writes (RAW, WAR, WAW), as relative per-unit lags (see fpga.instruction.isa).

    For each resource: its last writer (unit, unit position, partial) and, per unit, the last reader since that
    write. A reader waits for the last writer (RAW); a writer waits for the readers since the last write (WAR) and
    for the last writer (WAW) unless both write disjoint parts from the same in-order unit."""
    n_res = 1 + max((r for it in ins for r in (*it.reads, *it.writes)), default=0)
    w_unit = [-1] * n_res
    w_pos = [0] * n_res
    w_part = [False] * n_res
    rd = [[-1, -1, -1] for _ in range(n_res)]  # last reader position per unit since the last write
    pos = [0, 0, 0]
    wait_fields = isa.WAIT_FIELDS
    for it in ins:
        u = it.row[isa.F_UNIT]
        n0 = n1 = n2 = 0
        for r in it.reads:
            wu = w_unit[r]
            if wu == 0:
                n0 = max(n0, w_pos[r] + 1)
            elif wu == 1:
                n1 = max(n1, w_pos[r] + 1)
            elif wu == 2:
                n2 = max(n2, w_pos[r] + 1)
        for r in it.writes:
            a = rd[r]
            n0, n1, n2 = max(n0, a[0] + 1), max(n1, a[1] + 1), max(n2, a[2] + 1)
            wu = w_unit[r]
            if wu >= 0 and not (it.partial and w_part[r] and wu == u):
                if wu == 0:
                    n0 = max(n0, w_pos[r] + 1)
                elif wu == 1:
                    n1 = max(n1, w_pos[r] + 1)
                else:
                    n2 = max(n2, w_pos[r] + 1)
        if u < isa.N_UNITS or it.row[isa.F_OP] == isa.OP_SIGNAL:  # a SIGNAL fires when what it publishes is ready
            row = it.row
            row[wait_fields[0]] = pos[0] - n0 if n0 > 0 else -1
            row[wait_fields[1]] = pos[1] - n1 if n1 > 0 else -1
            row[wait_fields[2]] = pos[2] - n2 if n2 > 0 else -1
        if u < isa.N_UNITS:
            p = pos[u]
            for r in it.reads:
                rd[r][u] = p
            for r in it.writes:
                w_unit[r] = u
                w_pos[r] = p
                w_part[r] = it.partial
                rd[r] = [-1, -1, -1]
            pos[u] = p + 1
    return np.array([it.row for it in ins], dtype=np.int64) if ins else isa.empty(0)
