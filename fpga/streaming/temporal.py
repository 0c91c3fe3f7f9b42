"""Temporal execution: the phases of a layer run one after another on shared engines, with barriers between them.

A streaming design (or one of its ``[[units]]``) says how it runs a token's operators (``execution``):

* ``dataflow`` (the default): layer-pipelined. Operators on different engines overlap through the FIFOs between
  them (``fifo_depth`` blocks, with back-pressure), and an engine that runs several operators starts the next
  one's blocks as soon as it has issued the previous ones.
* ``temporal``: every *phase* (one operator of one layer: a run of consecutive program blocks with the same
  operator and layer, such as an HLS kernel's sequential loops with no DATAFLOW region) starts only after the
  previous phase has drained: its first block on each engine waits for the last block of the previous phase on
  every engine to leave its pipeline, plus ``phase_barrier_cycles`` (the control hand-over). Phases hand over
  through on-chip buffers that hold a whole vector, so no FIFO back-pressure applies between them (nor on the
  chunks a link delivers to the unit: they land in such a buffer).
  ``phase_prefetch_blocks`` says how far a phase's HBM loads may run ahead of its barrier: the reads of its
  first N HBM-reading blocks may be issued while the previous phase still runs (into the port buffer, as far
  as ``buffer_depth`` allows); the next read waits for the barrier. 0 = no overlap of a phase's loads with the
  previous phase's compute; N >= ``buffer_depth`` = as early as the buffer allows, as in dataflow.

The style is applied to the compiled token program (:func:`apply_temporal`) with the mechanisms both simulators
already execute: extra input dependencies of blocks (odd dependency slots beyond the program's three, as
:mod:`fpga.streaming.units` uses), cleared output-space dependencies (slot 2), and a write-source style
dependency (``R_DEP``) on the first read request a phase may not prefetch. Every dependency a temporal unit's
block keeps points at an earlier block of the program, so a temporal unit never deadlocks. So the fast engine
(:mod:`fpga.streaming.engine`) and the cycle-stepped reference (:mod:`fpga.streaming.reference`) run it alike
(tests/test_temporal.py), and a dataflow design's program is left untouched (bit-identical results). The
program's requests, bytes and MACs do not change with the style.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import numpy as np

from fpga.streaming.program_format import R_DEP, R_DEP_OFF, R_WRITE, Program

if TYPE_CHECKING:
    from fpga.streaming.design import StreamingDesign


def unit_styles(design: StreamingDesign) -> list[str]:
    """The execution style of each unit (one entry for a design without ``[[units]]``)."""
    if not design.units:
        return [design.execution]
    return [u.execution or design.execution for u in design.units]


def is_temporal(design: StreamingDesign) -> bool:
    return "temporal" in unit_styles(design)


def without_temporal(design: StreamingDesign) -> StreamingDesign:
    """The design with every unit dataflow: what the units' programs are compiled from before the style of each
    unit is applied to the joined program (so the barriers are added once, in the joined program)."""
    if not is_temporal(design):
        return design
    units = tuple(dataclasses.replace(u, execution="dataflow") for u in design.units)
    return dataclasses.replace(design, execution="dataflow", units=units)


def _unit_ranges(design: StreamingDesign, prog: Program) -> list[tuple[int, int]]:
    """Block range [lo, hi) of each temporal unit in the program (units' blocks come first, one unit after
    another; link blocks after them)."""
    if not design.units:
        return [(0, prog.n_blocks)] if design.execution == "temporal" else []
    subs: tuple[Program, ...] = getattr(prog, "unit_programs", ())
    bounds = np.cumsum([0] + [p.n_blocks for p in subs])
    return [(int(bounds[u]), int(bounds[u + 1])) for u, s in enumerate(unit_styles(design)) if s == "temporal"]


@dataclasses.dataclass(frozen=True)
class Phases:
    """The phases of a program's temporal units: per block its phase (-1: a dataflow unit or a link), per phase
    its first block and the barrier's source blocks (the last block of the previous phase on each of its
    engines; -1 padded)."""

    of_block: np.ndarray  # (n_blocks,) phase id or -1
    sources: np.ndarray  # (n_phases, k) blocks the phase's barrier waits for; row all -1 for a unit's first phase
    first: np.ndarray  # (n_phases,) first block of the phase


def phases(design: StreamingDesign, prog: Program) -> Phases:
    """The phases of ``prog`` (see the module docstring)."""
    of_block = np.full(prog.n_blocks, -1, np.int64)
    n_e = len(prog.e_lat)
    srcs: list[np.ndarray] = []
    firsts: list[np.ndarray] = []
    n_ph = 0
    for lo, hi in _unit_ranges(design, prog):
        op, lay, eng = prog.t_op[lo:hi], prog.t_layer[lo:hi], prog.t_eng[lo:hi]
        cut = np.ones(hi - lo, bool)
        cut[1:] = (op[1:] != op[:-1]) | (lay[1:] != lay[:-1])
        pid = np.cumsum(cut) - 1
        n = int(pid[-1]) + 1
        key = pid * n_e + eng
        uk = np.unique(key)
        _u, last_rev = np.unique(key[::-1], return_index=True)
        last_k = hi - lo - 1 - last_rev
        kp = uk // n_e  # phase of each (phase, engine) pair, sorted
        cnt = np.bincount(kp, minlength=n)
        ptr = np.concatenate([[0], np.cumsum(cnt)])
        width = int(cnt.max())
        s = np.full((n + 1, width), -1, np.int64)  # row p + 1: the last blocks of phase p (its successor's sources)
        s[kp + 1, np.arange(len(uk)) - ptr[kp]] = last_k + lo
        srcs.append(s[:n])
        firsts.append(np.nonzero(cut)[0] + lo)
        of_block[lo:hi] = pid + n_ph
        n_ph += n
    k = max((s.shape[1] for s in srcs), default=1)
    sources = np.full((n_ph, k), -1, np.int64)
    row = 0
    for s in srcs:
        sources[row : row + len(s), : s.shape[1]] = s
        row += len(s)
    first = np.concatenate(firsts) if firsts else np.zeros(0, np.int64)
    return Phases(of_block, sources, first)


def apply_temporal(design: StreamingDesign, prog: Program) -> Program:
    """``prog`` with the barriers, buffers and load gates of its temporal units (the program itself when every
    unit is dataflow)."""
    ranges = _unit_ranges(design, prog)
    if not ranges:
        return prog
    ph = phases(design, prog)
    done_off = prog.t_cyc + prog.e_lat[prog.t_eng]  # cycles from a block's start to its last result
    barrier = design.phase_barrier_cycles
    # 1. barriers: the first block of each phase on each engine waits for every source of its phase
    n, k = prog.n_blocks, ph.sources.shape[1]
    dep = np.full((n, 2 * k), -1, np.int64)
    off = np.zeros((n, 2 * k), np.int64)
    pid = ph.of_block
    key = np.where(pid >= 0, pid * len(prog.e_lat) + prog.t_eng, -1)
    _u, targets = np.unique(key, return_index=True)  # the first block of each (phase, engine)
    targets = targets[key[targets] >= 0]
    src = ph.sources[pid[targets]]  # (targets, k)
    rows, slot = np.nonzero(src >= 0)
    dep[targets[rows], 2 * slot] = src[rows, slot]  # columns 3, 5, ... of the program: input slots
    off[targets[rows], 2 * slot] = done_off[src[rows, slot]] + barrier
    t_dep = prog.t_dep.copy()
    t_off = prog.t_off.copy()
    # 2. whole-vector buffers: no block waits for FIFO space towards a block of a temporal unit (its own
    # phases' hand-over, and a link hop's chunks arriving at the unit)
    reader = t_dep[:, 2]
    free = (reader >= 0) & (pid[np.maximum(reader, 0)] >= 0)
    t_dep[free, 2] = -1
    t_off[free, 2] = 0
    changes: dict[str, Any] = {
        "t_dep": np.ascontiguousarray(np.hstack([t_dep, dep])),
        "t_off": np.ascontiguousarray(np.hstack([t_off, off])),
    }
    # 3. load gates: the first read a phase may not prefetch waits for the phase's barrier
    gate = np.full(len(ph.first), -1, np.int64)
    with_src = ph.sources.max(axis=1) >= 0
    gate[with_src] = ph.sources[with_src].max(axis=1)  # the latest-placed source (its result comes last)
    gate_off = np.where(gate >= 0, done_off[np.maximum(gate, 0)] + barrier, 0)
    n_pre = design.phase_prefetch_blocks
    changes["r_table"] = _gate_reads(prog.g_ptr, prog.r_table, prog.t_need_group, pid, gate, gate_off, n_pre)
    if len(prog.pr_table):
        changes["pr_table"] = _gate_reads(prog.p_ptr, prog.pr_table, prog.t_need_port, pid, gate, gate_off, n_pre)
    return dataclasses.replace(prog, **changes)


def _gate_reads(
    ptr: np.ndarray,
    table: np.ndarray,
    need: np.ndarray,
    pid: np.ndarray,
    gate: np.ndarray,
    gate_off: np.ndarray,
    n_pre: int,
) -> np.ndarray:
    """Request table with, per port (class) and phase, the first read of the phase's HBM-reading block number
    ``n_pre`` depending on the phase's barrier source (issue >= its result + the barrier)."""
    out = table.copy()
    for g in range(len(ptr) - 1):
        nd = need[:, g]
        bs = np.nonzero(nd >= 0)[0]  # blocks that consume this port's reads, in consumption order
        if not len(bs):
            continue
        ph = pid[bs]
        new = np.ones(len(bs), bool)
        new[1:] = ph[1:] != ph[:-1]
        heads = np.nonzero(new)[0]
        pos = np.arange(len(bs)) - np.repeat(heads, np.diff(np.append(heads, len(bs))))
        sel = (pos == n_pre) & (ph >= 0)
        sel[sel] = gate[ph[sel]] >= 0
        if not sel.any():
            continue
        rows = out[ptr[g] : ptr[g + 1]]
        reads = np.nonzero(rows[:, R_WRITE] == 0)[0]
        prev_last = np.concatenate([[-1], nd[bs[:-1]]])  # a block's reads follow the previous consumer's
        first_read = reads[np.searchsorted(reads, prev_last[sel], side="right")]
        assert (rows[first_read, R_DEP] < 0).all()  # reads carry no write-source dependency of their own
        rows[first_read, R_DEP] = gate[ph[sel]]
        rows[first_read, R_DEP_OFF] = gate_off[ph[sel]]
    return out


def temporal_facts(design: StreamingDesign, res: Any = None) -> dict[str, Any]:
    """The execution fields of a design with temporal units (the JSON of ``hwmodel fpga decode``), and with a
    one-unit token result ``res``: the cycles its phases cover (each operator's span, summed over layers: the
    per-phase times of ``op_span_cycles``) and those between them (barriers, loads not prefetched)."""
    out: dict[str, Any] = {
        "style": design.execution,
        "phase_barrier_cycles": design.phase_barrier_cycles,
        "phase_prefetch_blocks": design.phase_prefetch_blocks,
    }
    if design.units:
        out["units"] = dict(zip([u.name for u in design.units], unit_styles(design), strict=True))
    elif res is not None:
        spans = int(sum(res.op_span_cycles.values()))
        out.update(phase_cycles=spans, between_phases_cycles=int(res.cycles) - spans)
    return out
