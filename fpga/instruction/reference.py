"""Plain cycle-stepped Python reference of the instruction-driven accelerator (small programs only).

Same machine as :mod:`fpga.instruction.simulator` (read its docstring for the rules), written the obvious way: one object
per unit, the fully unrolled program, and every kernel cycle evaluated in order — no event jumping, no
fast-forwarding of repeated layers. It drives the same HBM channel functions (:mod:`fpga.hbm.channel`), so the two
engines must agree exactly on cycles and counters; tests check that they do.
"""

from __future__ import annotations

import dataclasses
import math
from collections import deque

import numpy as np

from fpga.hbm import channel as hbm
from fpga.instruction import isa
from fpga.instruction.design import InstructionDesign
from fpga.instruction.program import Program
from fpga.instruction.simulator import EFF_SCALE, mm_efficiency_ppb


@dataclasses.dataclass
class _Record:
    row: np.ndarray
    need: tuple[int, int, int]
    done: int = -1  # completion cycle (MPE/SFU) once started
    pending: int = 0  # DM: requests not landed yet


@dataclasses.dataclass
class _Request:
    record: _Record
    addr: int
    nbytes: int
    nseg: int
    stride: int
    write: bool


class _Unit:
    """An in-order unit: a dispatch queue, started-but-unretired records, a retired counter."""

    def __init__(self, queue_depth: int) -> None:
        self.queue: deque[_Record] = deque()
        self.in_flight: deque[_Record] = deque()
        self.depth = queue_depth
        self.issued = 0
        self.retired = 0
        self.free_at = 0


class ReferenceMachine:
    """Cycle-by-cycle model; :meth:`run` returns the counters of :mod:`fpga.instruction.simulator`."""

    def __init__(self, design: InstructionDesign) -> None:
        self.d = design
        self.hp = hbm.hbm_params(design.board_spec, design.clock_hz)
        C = design.datamover.channels
        self.hst = [hbm.new_channel_state() for _ in range(C)]
        self.units = [_Unit(design.scheduler.unit_queue_depth) for _ in range(3)]
        self.rq: list[deque[_Request]] = [deque() for _ in range(C)]
        self.flight: list[list[tuple[_Record, int]]] = [[] for _ in range(C)]
        self.last_land = [0] * C
        self.mm_carry = 0
        self.counters = {
            name: 0
            for name in (
                "cycles",
                "instructions",
                "dm_instructions",
                "mpe_instructions",
                "sfu_instructions",
                "mpe_busy_cycles",
                "sfu_busy_cycles",
                "read_bytes",
                "write_bytes",
                "requests",
                "macs",
            )
        }

    # ---- durations
    def _mpe_cycles(self, row: np.ndarray) -> int:
        """MAC cycles at full rate; MM at the sustained efficiency, fractions carried to the next MM."""
        m = self.d.mpe
        mac = (
            math.ceil(row[isa.F_TOKENS] / m.token_lanes)
            * math.ceil(row[isa.F_ROWS] / m.row_lanes)
            * math.ceil(row[isa.F_COLS] / m.col_lanes)
        )
        if row[isa.F_OP] == isa.OP_MM:
            eff = mm_efficiency_ppb(m.mm_efficiency)
            cycles, self.mm_carry = divmod(int(mac) * EFF_SCALE + self.mm_carry, eff)
            mac = cycles
        return int(mac) + m.mv_overhead_cycles

    def _ready(self, rec: _Record) -> bool:
        return all(self.units[v].retired >= rec.need[v] for v in range(3))

    def run(self, program: Program) -> dict[str, int]:
        prog = program.unrolled()
        d, C = self.d, self.d.datamover.channels
        dm, mpe, sfu = self.units
        pc = 0
        sched_ready = 0
        now = 0
        while True:
            # 1. land, complete, retire
            for c in range(C):
                keep = []
                for rec, land in self.flight[c]:
                    if land <= now:
                        rec.pending -= 1
                    else:
                        keep.append((rec, land))
                self.flight[c] = keep
            while dm.in_flight and dm.in_flight[0].pending == 0:
                dm.in_flight.popleft()
                dm.retired += 1
            for u in (mpe, sfu):
                while u.in_flight and u.in_flight[0].done <= now:
                    u.in_flight.popleft()
                    u.retired += 1
            # 2. channels start requests
            for c in range(C):
                if self.rq[c] and len(self.flight[c]) < d.datamover.outstanding:
                    req = self.rq[c].popleft()
                    arrival = hbm.kernel_to_axi(self.hp, now + d.datamover.request_latency_cycles)
                    land = 0
                    nb = req.nbytes // req.nseg
                    for s in range(req.nseg):
                        first, end = hbm.channel_request(
                            self.hp, self.hst[c], arrival, req.addr + s * req.stride, nb, int(req.write)
                        )
                        if req.write:
                            land = hbm.axi_to_kernel(self.hp, end)
                        else:
                            land = hbm.read_landing(
                                self.hp, first, end, nb, d.datamover.port_width_bits // 8, self.last_land[c]
                            )
                            self.last_land[c] = land
                    self.flight[c].append((req.record, land))
                    self.counters["requests"] += 1
                    self.counters["write_bytes" if req.write else "read_bytes"] += req.nbytes
            # 3. datamover front-end
            if dm.queue and self._ready(dm.queue[0]):
                rec = dm.queue[0]
                row = rec.row
                nch, ch0 = int(row[isa.F_NCH]), int(row[isa.F_CH0])
                targets = [(ch0 + j) % C for j in range(nch)]
                if all(len(self.rq[c]) < d.datamover.request_queue_depth for c in targets):
                    dm.queue.popleft()
                    rows, rb, stride = int(row[isa.F_ROWS]), int(row[isa.F_ROW_BYTES]), int(row[isa.F_STRIDE])
                    for j, nrows in enumerate(isa.channel_rows(rows, nch)):
                        if nrows <= 0:
                            continue
                        contiguous = stride == rb
                        self.rq[targets[j]].append(
                            _Request(
                                rec,
                                int(row[isa.F_ADDR]) + ((ch0 + j) // C) * stride,
                                int(nrows) * rb,
                                1 if contiguous else int(nrows),
                                0 if contiguous else stride,
                                row[isa.F_OP] == isa.OP_ST,
                            )
                        )
                        rec.pending += 1
                    dm.in_flight.append(rec)
            # 4. MPE, 5. SFU
            for u, is_mpe in ((mpe, True), (sfu, False)):
                if u.queue and u.free_at <= now and self._ready(u.queue[0]):
                    rec = u.queue.popleft()
                    row = rec.row
                    if is_mpe:
                        dur = self._mpe_cycles(row)
                        rec.done = now + dur + d.mpe.pipeline_cycles
                        self.counters["mpe_busy_cycles"] += dur
                        self.counters["macs"] += int(row[isa.F_ROWS] * row[isa.F_COLS] * row[isa.F_TOKENS])
                    else:
                        dur = int(row[isa.F_PASSES]) * math.ceil(int(row[isa.F_ROWS]) / d.sfu.lanes)
                        rec.done = now + dur + d.sfu.pipeline_cycles
                        self.counters["sfu_busy_cycles"] += dur
                    u.free_at = now + dur
                    u.in_flight.append(rec)
            # 6. scheduler (any number of instructions per cycle when issue_cycles is 0)
            while pc < len(prog) and sched_ready <= now:
                row = prog[pc]
                go = False
                if row[isa.F_OP] == isa.OP_SYNC:
                    go = all(u.retired == u.issued for u in self.units)
                else:
                    ui = int(row[isa.F_UNIT])
                    unit = self.units[ui]
                    if len(unit.queue) < unit.depth:
                        need = tuple(
                            self.units[v].issued - int(row[f]) if row[f] >= 0 else 0
                            for v, f in enumerate(isa.WAIT_FIELDS)
                        )
                        unit.queue.append(_Record(row, need))  # type: ignore[arg-type]
                        unit.issued += 1
                        self.counters[("dm_instructions", "mpe_instructions", "sfu_instructions")[ui]] += 1
                        go = True
                if not go:
                    break
                self.counters["instructions"] += 1
                sched_ready = now + d.scheduler.issue_cycles
                pc += 1
            if pc == len(prog) and all(u.retired == u.issued for u in self.units):
                break
            now += 1
        self.counters["cycles"] = now + 1
        return dict(self.counters)
