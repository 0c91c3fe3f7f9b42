"""Plain cycle-stepped Python reference of the instruction-driven accelerator (small programs only).

Same machine as :mod:`fpga.instruction.simulator` (read its docstring for the rules), written the obvious way: one object
per unit, the fully unrolled program, and every kernel cycle evaluated in order — no event jumping, no
fast-forwarding of repeated layers; several engines are stepped one after the other in each cycle (they meet only
at semaphores, whose signals become visible ``scheduler.sync_cycles`` >= 1 later, so the order is immaterial). It drives the same HBM channel functions (:mod:`fpga.hbm.channel`), so the two
engines must agree exactly on cycles and counters; tests check that they do.
"""

from __future__ import annotations

import dataclasses
import math
from collections import deque
from typing import Any

import numpy as np

from fpga.hbm import channel as hbm
from fpga.instruction import isa
from fpga.instruction.design import InstructionDesign
from fpga.instruction.program import MultiProgram, Program
from fpga.instruction.run import mm_efficiency_ppb
from fpga.instruction.simulator import EFF_SCALE, ENGINE_COUNTER_NAMES
from hwmodel.errors import HwmodelError


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


class _Engine:
    """One engine's scheduler, units, signal queue and the program it runs."""

    def __init__(self, design: InstructionDesign, prog: np.ndarray, index: int) -> None:
        self.index = index
        self.prog = prog
        self.units = [_Unit(design.scheduler.unit_queue_depth) for _ in range(3)]
        self.signals: deque[tuple[int, tuple[int, int, int]]] = deque()  # (destination, need), in order
        self.pc = 0
        self.sched_ready = 0
        self.mm_carry = 0
        self.blocked_at = -1
        self.finish = -1
        self.counters = dict.fromkeys(ENGINE_COUNTER_NAMES, 0)

    def idle(self) -> bool:
        return self.pc == len(self.prog) and all(u.retired == u.issued for u in self.units) and not self.signals


class ReferenceMachine:
    """Cycle-by-cycle model; :meth:`run` returns the counters of :mod:`fpga.instruction.simulator`."""

    def __init__(self, design: InstructionDesign) -> None:
        self.d = design
        self.hp = hbm.hbm_params(design.board_spec, design.clock_hz)
        C = design.datamover.channels
        self.hst = [hbm.new_channel_state() for _ in range(C)]
        self.rq: list[deque[_Request]] = [deque() for _ in range(C)]
        self.flight: list[list[tuple[_Record, int, _Engine]]] = [[] for _ in range(C)]
        self.last_land = [0] * C
        self.sems: dict[tuple[int, int], deque[int]] = {}  # (src, dst) -> cycles its signals become visible
        self.counters = dict.fromkeys(
            (
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
            ),
            0,
        )

    # ---- durations
    def _mpe_cycles(self, eng: _Engine, row: np.ndarray) -> int:
        """MAC cycles at full rate; MM at the sustained efficiency, fractions carried to the next MM."""
        m = self.d.mpe
        mac = (
            math.ceil(row[isa.F_TOKENS] / m.token_lanes)
            * math.ceil(row[isa.F_ROWS] / m.row_lanes)
            * math.ceil(row[isa.F_COLS] / m.col_lanes)
        )
        if row[isa.F_OP] == isa.OP_MM:
            eff = mm_efficiency_ppb(m.mm_efficiency)
            cycles, eng.mm_carry = divmod(int(mac) * EFF_SCALE + eng.mm_carry, eff)
            mac = cycles
        return int(mac) + m.mv_overhead_cycles

    @staticmethod
    def _ready(eng: _Engine, need: tuple[int, int, int]) -> bool:
        return all(eng.units[v].retired >= need[v] for v in range(3))

    def run(self, program: Program | MultiProgram) -> dict[str, Any]:
        progs = program.engines if isinstance(program, MultiProgram) else (program,)
        d = self.d
        ce = d.channels_per_engine
        engines = [_Engine(d, p.unrolled(), e) for e, p in enumerate(progs)]
        now = 0
        while True:
            # 1. land, complete, retire
            for c in range(d.datamover.channels):
                keep = []
                for rec, land, eng in self.flight[c]:
                    if land <= now:
                        rec.pending -= 1
                    else:
                        keep.append((rec, land, eng))
                self.flight[c] = keep
            for eng in engines:
                dm, mpe, sfu = eng.units
                while dm.in_flight and dm.in_flight[0].pending == 0:
                    dm.in_flight.popleft()
                    dm.retired += 1
                for u in (mpe, sfu):
                    while u.in_flight and u.in_flight[0].done <= now:
                        u.in_flight.popleft()
                        u.retired += 1
            # 2. channels start requests
            for c in range(d.datamover.channels):
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
                    owner = engines[c // ce]
                    self.flight[c].append((req.record, land, owner))
                    self.counters["requests"] += 1
                    kind = "write_bytes" if req.write else "read_bytes"
                    self.counters[kind] += req.nbytes
                    owner.counters[kind] += req.nbytes
            for eng in engines:
                self._step_engine(eng, now, ce)
            for eng in engines:
                if eng.finish < 0 and eng.idle():
                    eng.finish = now + 1
            if all(eng.finish >= 0 for eng in engines):
                break
            if self._stuck(engines):
                from fpga.instruction.run import deadlock_message

                raise HwmodelError(deadlock_message(now, len(engines)))
            now += 1
        self.counters["cycles"] = now + 1
        out: dict[str, Any] = dict(self.counters)
        if len(engines) > 1:
            out["engines"] = [{**eng.counters, "finish_cycle": eng.finish} for eng in engines]
        return out

    def _stuck(self, engines: list[_Engine]) -> bool:
        """Nothing in flight anywhere and every unfinished engine blocked at a WAIT nobody will answer."""
        if any(self.rq) or any(self.flight):
            return False
        for eng in engines:
            if eng.signals or any(u.queue or u.in_flight for u in eng.units):
                return False
            if eng.finish >= 0:
                continue
            row = eng.prog[eng.pc] if eng.pc < len(eng.prog) else None
            if row is None or row[isa.F_OP] != isa.OP_WAIT or self.sems.get((int(row[isa.F_TAG]), eng.index)):
                return False
        return True

    def _step_engine(self, eng: _Engine, now: int, ce: int) -> None:
        d = self.d
        dm, mpe, sfu = eng.units
        # 3. datamover front-end
        if dm.queue and self._ready(eng, dm.queue[0].need):
            rec = dm.queue[0]
            row = rec.row
            nch, ch0 = int(row[isa.F_NCH]), int(row[isa.F_CH0])
            targets = [eng.index * ce + (ch0 + j) % ce for j in range(nch)]
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
                            int(row[isa.F_ADDR]) + ((ch0 + j) // ce) * stride,
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
            if u.queue and u.free_at <= now and self._ready(eng, u.queue[0].need):
                rec = u.queue.popleft()
                row = rec.row
                if is_mpe:
                    dur = self._mpe_cycles(eng, row)
                    rec.done = now + dur + d.mpe.pipeline_cycles
                    macs = int(row[isa.F_ROWS] * row[isa.F_COLS] * row[isa.F_TOKENS])
                    self.counters["mpe_busy_cycles"] += dur
                    self.counters["macs"] += macs
                    eng.counters["mpe_busy_cycles"] += dur
                    eng.counters["macs"] += macs
                else:
                    dur = int(row[isa.F_PASSES]) * math.ceil(int(row[isa.F_ROWS]) / d.sfu.lanes)
                    rec.done = now + dur + d.sfu.pipeline_cycles
                    self.counters["sfu_busy_cycles"] += dur
                    eng.counters["sfu_busy_cycles"] += dur
                u.free_at = now + dur
                u.in_flight.append(rec)
        # 5b. the oldest signal fires once what it publishes is computed
        if eng.signals and self._ready(eng, eng.signals[0][1]):
            dst, _need = eng.signals.popleft()
            self.sems.setdefault((eng.index, dst), deque()).append(now + d.scheduler.sync_cycles)
            eng.counters["signals"] += 1
        # 6. scheduler (any number of instructions per cycle when issue_cycles is 0)
        while eng.pc < len(eng.prog) and eng.sched_ready <= now:
            row = eng.prog[eng.pc]
            op = row[isa.F_OP]
            need = tuple(eng.units[v].issued - int(row[f]) if row[f] >= 0 else 0 for v, f in enumerate(isa.WAIT_FIELDS))
            go = False
            if op == isa.OP_SYNC:
                go = all(u.retired == u.issued for u in eng.units) and not eng.signals
            elif op == isa.OP_SIGNAL:
                if len(eng.signals) < d.scheduler.unit_queue_depth:
                    eng.signals.append((int(row[isa.F_TAG]), need))  # type: ignore[arg-type]
                    go = True
            elif op == isa.OP_WAIT:
                sem = self.sems.get((int(row[isa.F_TAG]), eng.index))
                if sem and sem[0] <= now:
                    sem.popleft()
                    if eng.blocked_at >= 0:
                        eng.counters["wait_cycles"] += now - eng.blocked_at
                        eng.blocked_at = -1
                    go = True
                elif eng.blocked_at < 0:
                    eng.blocked_at = now
            else:
                ui = int(row[isa.F_UNIT])
                unit = eng.units[ui]
                if len(unit.queue) < unit.depth:
                    unit.queue.append(_Record(row, need))  # type: ignore[arg-type]
                    unit.issued += 1
                    self.counters[("dm_instructions", "mpe_instructions", "sfu_instructions")[ui]] += 1
                    go = True
            if not go:
                break
            self.counters["instructions"] += 1
            eng.counters["instructions"] += 1
            eng.sched_ready = now + d.scheduler.issue_cycles
            eng.pc += 1
