"""The compiler's intermediate form and its emitter: instructions with the resources they read and write, loads
a compute step needs, and the on-chip buffers as rings of allocations.

:class:`_Emitter` emits a pass's steps in order and hoists each later load ahead of the compute before it
(software prefetch) as long as its ring allocation does not overlap data whose consumer has not been emitted yet;
a design with ``[buffers] overlap_loads = false`` has one buffer and no load runs ahead, and ``[buffers]
prefetch_depth = D`` lets a load run at most D load-carrying steps ahead of the compute (1: double buffering). :func:`_row` and
:func:`_dm_row` build instruction rows in the fields of :mod:`fpga.instruction.isa`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from fpga.instruction import isa
from fpga.instruction.design import InstructionDesign
from fpga.instruction.prefetch import PrefetchError


@dataclasses.dataclass
class _Ins:
    """One instruction before the dependency pass: its fields plus the resources it reads and writes."""

    row: list[int]
    reads: tuple[int, ...] = ()
    writes: tuple[int, ...] = ()
    partial: bool = False  # writes a disjoint part of its destination (MV tiles of one output)
    note: tuple = ()  # annotation of a context-dependent instruction (see Compiler._ctx_fields)


@dataclasses.dataclass
class _Load:
    """A load a compute step needs: into ring ``buf``; the LD row is filled when it is emitted."""

    buf: int
    nbytes: int
    row: list[int]
    reads: tuple[int, ...] = ()
    res: int = -1  # resource id of its allocation once emitted
    note: tuple = ()


@dataclasses.dataclass
class _Step:
    loads: list[_Load]
    build: Any  # callable(list of load resource ids) -> list[_Ins]
    fences: tuple[int, ...] = ()  # memory resources this step writes: loads that read them are not hoisted above


class _Ring:
    """An on-chip buffer managed as a ring of allocations (wraps to 0 when the tail does not fit)."""

    def __init__(self, name: str, capacity: int) -> None:
        self.name = name
        self.capacity = capacity
        self.head = 0
        self.live: list[tuple[int, int, int, int]] = []  # (start, end, res, consumer step)

    def new_run(self) -> None:
        """A new run of steps (next layer): allocation continues where it stopped; everything already allocated
        has had its consumer emitted."""
        self.live = [(a[0], a[1], a[2], -1) for a in self.live]

    def place(self, nbytes: int) -> tuple[int, int]:
        if nbytes > self.capacity:
            raise PrefetchError(f"a {nbytes}-byte load does not fit the {self.capacity}-byte {self.name} buffer")
        start = self.head if self.head + nbytes <= self.capacity else 0
        return start, start + nbytes

    def overlapped(self, start: int, end: int) -> list[tuple[int, int, int, int]]:
        return [a for a in self.live if a[0] < end and start < a[1]]


class _Emitter:
    """Builds the IR of one pass: resources, rings, software prefetch of loads ahead of compute."""

    def __init__(self, design: InstructionDesign) -> None:
        self.design = design
        self.single_buffer = not design.buffers.overlap_loads  # no load/compute overlap
        self.depth = design.buffers.prefetch_depth  # load steps a load may run ahead (0: as far as the rings allow)
        self.out: list[_Ins] = []
        self._res: dict[str, int] = {}
        self._next_res = 0
        b = design.buffers
        self.rings = {
            isa.BUF_WEIGHT: _Ring("weight", b.weight_bytes),
            isa.BUF_SCALE: _Ring("scale", b.scale_bytes),
            isa.BUF_ZERO: _Ring("zero", b.zero_bytes),
            isa.BUF_KV: _Ring("kv", b.kv_bytes),
        }

    def res(self, name: str) -> int:
        if name not in self._res:
            self._res[name] = self._new_res()
        return self._res[name]

    def _new_res(self) -> int:
        self._next_res += 1
        return self._next_res - 1

    def emit(self, ins: _Ins) -> None:
        self.out.append(ins)

    def run_steps(self, steps: Sequence[_Step]) -> None:
        """Emit ``steps`` in order, hoisting each later load as early as its ring allows (prefetch)."""
        for ring in self.rings.values():
            ring.new_run()
        flat = [(j, ld) for j, st in enumerate(steps) for ld in st.loads]
        rank, n = [], 0  # rank[j]: steps with loads among steps[0..j]
        for st in steps:
            n += bool(st.loads)
            rank.append(n)
        nxt = 0
        for j, step in enumerate(steps):
            while nxt < len(flat):
                sj, ld = flat[nxt]
                if ld.reads and sj > j and any(r in steps[i].fences for i in range(j, sj) for r in ld.reads):
                    break  # a store between here and its consumer writes what this load reads
                ring = self.rings[ld.buf]
                if self.single_buffer and sj > j:
                    break  # no load runs ahead of the compute before it
                if self.depth and sj > j and rank[sj] - rank[j] > self.depth:
                    break  # as many groups ahead as the prefetch depth allows
                start, end = ring.place(ld.nbytes)
                if self.single_buffer:  # one buffer: every load overwrites the last, after its consumer
                    start, end = 0, ld.nbytes
                over = ring.overlapped(start, end)
                if sj > j and any(a[3] >= j for a in over):
                    break  # would overwrite data whose consumer is not emitted yet: stop prefetching here
                ring.live = [a for a in ring.live if a not in over]
                ld.res = self._new_res()
                ring.live.append((start, end, ld.res, sj))
                ring.head = end
                self.emit(_Ins(ld.row, reads=ld.reads, writes=(ld.res, *[a[2] for a in over]), note=ld.note))
                nxt += 1
            for ins in step.build([ld.res for ld in step.loads]):
                self.emit(ins)


_FIELD_INDEX = {name: i for i, name in enumerate(isa.FIELD_NAMES)}
_BLANK = [0] * isa.N_FIELDS
for _f in isa.WAIT_FIELDS:
    _BLANK[_f] = -1


def _row(op: int, tag: int = 0, **fields: int) -> list[int]:
    """One instruction as a list of its fields (rows are stacked into an array after the dependency pass)."""
    r = list(_BLANK)
    r[isa.F_OP] = op
    r[isa.F_UNIT] = isa.OP_UNIT[op]
    r[isa.F_TAG] = tag
    for k, v in fields.items():
        r[_FIELD_INDEX[k]] = int(v)
    return r


def _dm_row(
    op: int,
    buf: int,
    addr: int,
    rows: int,
    row_bytes: int,
    *,
    stride: int | None = None,
    ch0: int = 0,
    nch: int,
    astride: int = 0,
    group: int = 0,
) -> list[int]:
    return _row(
        op,
        buf,
        addr=addr,
        astride=astride,
        rows=rows,
        row_bytes=row_bytes,
        stride=row_bytes if stride is None else stride,
        ch0=ch0,
        nch=nch,
        group=group,
    )
