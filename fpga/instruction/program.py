"""The instruction program both instruction engines execute: segments of instruction rows, each repeated with
shifted LD/ST addresses, and the traffic and MACs a program carries (every repetition counted)."""

from __future__ import annotations

import dataclasses

import numpy as np

from fpga.instruction import isa


@dataclasses.dataclass(frozen=True)
class Segment:
    """Instructions executed ``reps`` times; repetition r adds ``r * ASTRIDE`` to each LD/ST address."""

    instrs: np.ndarray
    reps: int


@dataclasses.dataclass(frozen=True)
class Program:
    """A whole run: segments in order (decode = one pass; prefill = one pass per token block)."""

    segments: tuple[Segment, ...]

    @property
    def n_instructions(self) -> int:
        return sum(s.instrs.shape[0] * s.reps for s in self.segments)

    def flat(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(concatenated instructions, segment start offsets, segment repetitions) for the engine."""
        instrs = np.concatenate([s.instrs for s in self.segments]) if self.segments else isa.empty(0)
        lens = np.array([s.instrs.shape[0] for s in self.segments], dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
        reps = np.array([s.reps for s in self.segments], dtype=np.int64)
        return np.ascontiguousarray(instrs), starts, reps

    def unrolled(self) -> np.ndarray:
        """Every instruction as executed, addresses resolved (for the reference engine and for inspection)."""
        parts = []
        for s in self.segments:
            for r in range(s.reps):
                block = s.instrs.copy()
                block[:, isa.F_ADDR] += r * block[:, isa.F_ASTRIDE]
                block[:, isa.F_ASTRIDE] = 0
                parts.append(block)
        return np.concatenate(parts) if parts else isa.empty(0)


@dataclasses.dataclass(frozen=True)
class MultiProgram:
    """One program per engine of a design of several (:mod:`fpga.instruction.placement`)."""

    engines: tuple[Program, ...]

    @property
    def segments(self) -> tuple[Segment, ...]:
        """Every engine's segments, engine after engine (for traffic totals)."""
        return tuple(s for p in self.engines for s in p.segments)

    @property
    def n_instructions(self) -> int:
        return sum(p.n_instructions for p in self.engines)


def flat_engines(program: Program | MultiProgram) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(instructions, segment starts, segment repetitions, first segment of each engine + the total) of every
    engine's program concatenated; a :class:`Program` is one engine."""
    progs = program.engines if isinstance(program, MultiProgram) else (program,)
    segs = [s for p in progs for s in p.segments]
    instrs, starts, reps = Program(tuple(segs)).flat()
    eng_seg = np.concatenate([[0], np.cumsum([len(p.segments) for p in progs])]).astype(np.int64)
    return instrs, starts, reps, eng_seg


def program_traffic(prog: Program | MultiProgram) -> dict[str, int]:
    """Bytes each datamover buffer loads / stores and the MACs of a program, every repetition counted:
    ``weights`` (weight buffer), ``metadata`` (scale + zero-point buffers: scales, zero points, biases),
    ``gather`` (activation-buffer loads: the embedding rows and their metadata), ``kv_read`` / ``kv_write``
    (KV buffer), ``macs`` (MV/MM: rows x row length x tokens)."""
    out = {"weights": 0, "metadata": 0, "gather": 0, "kv_read": 0, "kv_write": 0, "macs": 0}
    buf_class = {
        isa.BUF_WEIGHT: "weights",
        isa.BUF_SCALE: "metadata",
        isa.BUF_ZERO: "metadata",
        isa.BUF_ACT: "gather",
        isa.BUF_KV: "kv_read",
    }
    for s in prog.segments:
        ins = s.instrs
        op = ins[:, isa.F_OP]
        nbytes = ins[:, isa.F_ROWS] * ins[:, isa.F_ROW_BYTES]
        for buf, cls in buf_class.items():
            sel = (op == isa.OP_LD) & (ins[:, isa.F_TAG] == buf)
            out[cls] += s.reps * int(nbytes[sel].sum())
        st = (op == isa.OP_ST) & (ins[:, isa.F_TAG] == isa.BUF_KV)
        out["kv_write"] += s.reps * int(nbytes[st].sum())
        mm = (op == isa.OP_MV) | (op == isa.OP_MM)
        out["macs"] += s.reps * int((nbytes[mm] * ins[mm, isa.F_STRIDE]).sum())
    return out
