"""The KVMU RTL signal contract and the model's expected value of every contract signal in every cycle.

The contract (docs/kvmu.md, "RTL signal contract") fixes port names and widths:

=================  =====  ===  =========================================================================
port               width  dir  meaning
=================  =====  ===  =========================================================================
``clk``            1      in   rising-edge clock; one model cycle per edge
``rst``            1      in   synchronous, active high: the state after ``init 0``
``cfg_capacity``   32     in   KV capacity in tokens, held stable while ``rst`` is low
``cmd_valid``      1      in   a command is on the bus
``cmd_op``         3      in   opcode (:class:`fpga.kvmu.codes.Op`; 7 is unknown and refused)
``cmd_arg``        32     in   argument, two's complement (init's position, the count of speculate, ingest, wait)
``cmd_ready``      1      out  the KVMU takes the bus command on the next edge (low during multi-cycle commands)
``valid_ptr``      32     out  register ``valid``
``curr_ptr``       32     out  register ``curr``
``ahead_ptr``      32     out  register ``ahead``
``mode``           2      out  :class:`fpga.kvmu.codes.Mode`
``mux_sel``        1      out  0 local sampler, 1 PCIe
``kv_wr_en``       1      out  a KV write in this cycle
``kv_wr_addr``     32     out  its position (compared only while ``kv_wr_en`` is 1)
``status``         4      out  :class:`fpga.kvmu.codes.Status` of the command occupying this cycle
=================  =====  ===  =========================================================================

Timing. Model cycle ``t`` is the ``t``-th rising edge after reset. Inputs for cycle ``t`` are sampled at edge ``t``;
the outputs between edges ``t`` and ``t + 1`` are the model's per-cycle sample of cycle ``t`` (the state at the end
of that cycle, :mod:`fpga.kvmu.kernel`); ``cmd_ready`` between those edges says whether edge ``t + 1`` may take a
command. Commands issue back to back at the model's default cycle costs (one cycle per command and per token).
A ``wait n`` of the model is driven either as ``n`` idle cycles (``cmd_valid`` low, the other command inputs
random) or as opcode 6 on the bus; both must look the same on the outputs. While a command is busy the next
command is already held on the bus (``cmd_valid`` high), and must not be taken before ``cmd_ready``.

Resets. An example starts with ``rst`` held for two edges, and an entry RESET_OP asserts it for one more edge in
the middle of the stream, possibly inside a multi-cycle command (the bus then holds random bits). After every
reset edge the outputs must be the reset state; the model restarts from it (a segment: the commands between two
resets).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from fpga.kvmu.codes import Op

if TYPE_CHECKING:
    from fpga.kvmu.model import KvmuTrace

PTR_BITS = 32
ARG_BITS = 32
OP_BITS = 3
STATUS_BITS = 4
MODE_BITS = 2
UNKNOWN_OP = 7  # the one opcode of the 3-bit field outside Op
RESET_OP = -1  # an example entry that asserts rst (not an opcode: never on the bus)

#: Inputs of the contract, in the order the testbench packs them (LSB first): cmd_arg, cmd_op, cmd_valid.
INPUTS = (("cmd_arg", ARG_BITS), ("cmd_op", OP_BITS), ("cmd_valid", 1))
#: Outputs of the contract, in the order the wrapper packs them (LSB first).
OUTPUTS = (
    ("valid_ptr", PTR_BITS),
    ("curr_ptr", PTR_BITS),
    ("ahead_ptr", PTR_BITS),
    ("mode", MODE_BITS),
    ("mux_sel", 1),
    ("kv_wr_addr", PTR_BITS),
    ("kv_wr_en", 1),
    ("status", STATUS_BITS),
    ("cmd_ready", 1),
)
OUT_BITS = sum(w for _, w in OUTPUTS)
IN_BITS = sum(w for _, w in INPUTS)
#: Order in which a cycle's signals are compared (the first differing one is reported).
COMPARE_ORDER = (
    "cmd_ready",
    "status",
    "mode",
    "mux_sel",
    "valid_ptr",
    "curr_ptr",
    "ahead_ptr",
    "kv_wr_en",
    "kv_wr_addr",
)
MAX_CAPACITY = 2**31 - 1


@dataclass(frozen=True)
class BusCommand:
    """One entry of an example: a command ``op`` (0..7) with ``arg`` (a 32-bit signed integer) and, for ``wait``,
    whether it is driven as idle bus cycles (``idle=True``) or as opcode 6 on the bus; or, with ``op`` RESET_OP,
    a reset: ``rst`` is asserted for one edge after the first ``arg`` cycles of the commands since the previous
    reset (``arg`` at or past their length: after all of them), which can fall inside a multi-cycle command."""

    op: int
    arg: int = 0
    idle: bool = False

    def text(self) -> str:
        from fpga.kvmu.codes import command_text

        if self.op == RESET_OP:
            return f"# reset: rst high for one edge after cycle {self.arg} since the last reset; the model restarts"
        if self.op == UNKNOWN_OP:
            return f"# opcode 7 (unknown), argument {self.arg}"
        t = command_text(self.op, self.arg)
        if self.op == Op.WAIT and not self.idle:
            t += "  # on the bus as opcode 6"
        return t


@dataclass(frozen=True)
class Example:
    """A verification example: a capacity, a command stream (resets included), and the seed of the don't-care
    bus bits."""

    capacity: int
    commands: tuple[BusCommand, ...]
    noise_seed: int = 0

    def command_file(self) -> str:
        """The example as a command file (fpga/kvmu/commands.py format) that `hwmodel kvmu trace` can run;
        an unknown opcode and a reset, which a command file cannot spell, are comments naming them."""
        lines = [f"capacity {self.capacity}"]
        lines += [c.text() for c in self.commands]
        return "\n".join(lines) + "\n"

    def segments(self) -> list[tuple[int, tuple[BusCommand, ...], int | None]]:
        """The example split at its resets: (index of the segment's first command in ``commands``, its commands,
        the cycles it runs before the reset that ends it, or None for the last segment)."""
        out, first, cur = [], 0, []
        for i, c in enumerate(self.commands):
            if c.op == RESET_OP:
                out.append((first, tuple(cur), max(0, c.arg)))
                first, cur = i + 1, []
            else:
                cur.append(c)
        out.append((first, tuple(cur), None))
        return out


def _idle_on_bus(c: BusCommand) -> bool:
    """A wait driven as idle cycles (only a legal count can be idle: a refused wait is a bus command)."""
    return c.op == Op.WAIT and c.idle and c.arg >= 1


def pack_input(valid: int, op: int, arg: int, rst: int = 0) -> int:
    return (
        (arg & (2**ARG_BITS - 1))
        | ((op & 7) << ARG_BITS)
        | ((valid & 1) << (ARG_BITS + OP_BITS))
        | ((rst & 1) << IN_BITS)
    )


def unpack_output(word: int) -> dict[str, int]:
    out, shift = {}, 0
    for name, width in OUTPUTS:
        out[name] = (word >> shift) & ((1 << width) - 1)
        shift += width
    return out


#: Runs (one command's cycles) up to this long are observed in every cycle; a longer one is observed in its first
#: and last cycles, around every power of two of its elapsed and remaining cycles and of the pointers, and at
#: RUN_SAMPLES evenly spaced cycles; the simulator runs the unobserved stretches without the testbench.
DENSE_RUN = 16
RUN_SAMPLES = 16
EDGE_CYCLES = 3
RESET_EDGES_FIRST = 2  # an example starts with rst held for two edges


@dataclass(frozen=True)
class Schedule:
    """What the testbench drives and what the model expects. The bus is ``segments``: (packed input word with
    the ``rst`` bit, number of edges it is held). Row ``r`` is the outputs after the ``r``-th edge; ``observe``
    lists the rows the testbench samples and ``expected`` holds the model's value of every output signal at
    those rows (``kv_wr_addr`` is -1 where ``kv_wr_en`` is 0: not compared). ``cycle`` is a row's model cycle
    within its segment (-1: a reset edge), ``cmd`` the index in ``Example.commands`` of its command (-1: none),
    ``segment`` the segment it belongs to."""

    segments: list[tuple[int, int]]
    observe: np.ndarray
    expected: dict[str, np.ndarray]
    cycle: np.ndarray
    cmd: np.ndarray
    segment: np.ndarray

    @property
    def n_rows(self) -> int:
        return sum(n for _, n in self.segments)

    @property
    def stimulus(self) -> list[int]:
        """The packed input word of every row (for short schedules)."""
        return [w for w, n in self.segments for _ in range(n)]


def model_trace(example: Example, segment: int = -1) -> KvmuTrace:
    """The model's run-length trace of one segment of ``example`` (the last by default; for the VCD and the
    coverage model). The segment is not cut at its reset."""
    from fpga.kvmu.model import CycleCosts, run_kernel

    cmds = example.segments()[segment][1]
    ops = np.array([c.op for c in cmds], dtype=np.int64)
    args = np.array([c.arg for c in cmds], dtype=np.int64)
    return run_kernel(ops, args, example.capacity, CycleCosts())


_SIGNAL_OF = {
    "valid_ptr": "valid",
    "curr_ptr": "curr",
    "ahead_ptr": "ahead",
    "mode": "mode",
    "mux_sel": "mux",
    "status": "status",
}
_RESET_VALUE = {
    "valid_ptr": 0,
    "curr_ptr": 0,
    "ahead_ptr": 0,
    "mode": 0,
    "mux_sel": 1,
    "status": 0,
    "kv_wr_en": 0,
    "kv_wr_addr": -1,
    "cmd_ready": 1,
}


def _near_pow2(x: np.ndarray, reach: int = 2) -> np.ndarray:
    """x within ``reach`` of a power of two (1, 2, 4, ...)."""
    hit = np.zeros(x.shape, dtype=bool)
    for d in range(-reach, reach + 1):
        y = x - d
        hit |= (y > 0) & ((y & (y - 1)) == 0)
    return hit


def _moves(x: np.ndarray) -> np.ndarray:
    """The register changed in this cycle."""
    return np.concatenate([[True], x[1:] != x[:-1]]) if len(x) else np.zeros(0, dtype=bool)


class _Rows:
    """Accumulates the rows of a schedule, one segment of cycles or one reset at a time."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.words: list[np.ndarray] = []
        self.keep: list[np.ndarray] = []
        self.cols: dict[str, list[np.ndarray]] = {k: [] for k in (*_RESET_VALUE, "cycle", "cmd", "segment")}

    def reset(self, edges: int, segment: int) -> None:
        noise_valid = self.rng.integers(0, 2, size=edges)
        noise_op = self.rng.integers(0, 8, size=edges)
        noise_arg = self.rng.integers(-(2**31), 2**31, size=edges)
        self.words.append(
            np.array(
                [pack_input(int(v), int(o), int(a), 1) for v, o, a in zip(noise_valid, noise_op, noise_arg)],
                dtype=object,
            )
        )
        self.keep.append(np.ones(edges, dtype=bool))
        for k, v in _RESET_VALUE.items():
            self.cols[k].append(np.full(edges, v, dtype=np.int64))
        self.cols["cycle"].append(np.full(edges, -1, dtype=np.int64))
        self.cols["cmd"].append(np.full(edges, -1, dtype=np.int64))
        self.cols["segment"].append(np.full(edges, segment, dtype=np.int64))

    def cycles(self, first: int, cmds: tuple[BusCommand, ...], capacity: int, cut: int | None, segment: int) -> None:
        from fpga.kvmu.model import CycleCosts, kernel_per_cycle

        if not cmds:
            return
        ops = np.array([c.op for c in cmds], dtype=np.int64)
        args = np.array([c.arg for c in cmds], dtype=np.int64)
        sig = kernel_per_cycle(ops, args, capacity, CycleCosts())
        n = int(sig["valid"].shape[0])
        m = n if cut is None else min(n, cut)
        if m == 0:
            return
        cmd = sig["cmd"].astype(np.int64)
        start = np.searchsorted(cmd, np.arange(len(cmds)))  # every command has >= 1 cycle
        length = np.diff(np.append(start, n))
        off = np.arange(n) - start[cmd]
        idle = np.array([_idle_on_bus(c) for c in cmds] + [True], dtype=bool)
        # cmd_ready after cycle t: may cycle t+1 take a command? Not while t+1 is a non-first cycle of a bus
        # command (computed on the whole segment: a reset edge that cuts it does not change the cycle before)
        ready = np.ones(n, dtype=np.int64)
        ready[:-1] = np.where((~idle[cmd[1:]]) & (off[1:] != 0), 0, 1)
        cmd, off, ready = cmd[:m], off[:m], ready[:m]
        t = np.arange(m)
        rem = length[cmd] - off  # cycles of the command left, this one included
        bus = np.array([pack_input(1, c.op, c.arg) for c in cmds] + [0], dtype=object)
        # don't-care bits: four draws per command (its first three cycles, then one for the rest)
        noise = np.array(
            [
                pack_input(0, int(o), int(a))
                for o, a in zip(
                    self.rng.integers(0, 8, size=4 * len(cmds)), self.rng.integers(-(2**31), 2**31, size=4 * len(cmds))
                )
            ],
            dtype=object,
        )
        noise_t = noise[4 * cmd + np.minimum(off, 3)]
        nxt = cmd + 1
        held = np.where(idle[nxt], noise_t, bus[nxt])  # busy: the next bus command already waits on the bus
        words = np.where(idle[cmd], noise_t, np.where(off == 0, bus[cmd], held))
        write = sig["write_pos"].astype(np.int64)[:m]
        ahead = sig["ahead"][:m].astype(np.int64)
        valid = sig["valid"][:m].astype(np.int64)
        keep = (
            (length[cmd] <= DENSE_RUN)
            | (off < EDGE_CYCLES)
            | (rem <= EDGE_CYCLES)
            | _near_pow2(off)
            | _near_pow2(rem)
            | (_moves(ahead) & _near_pow2(ahead))
            | (_moves(valid) & _near_pow2(valid))
            | (off % np.maximum(1, length[cmd] // RUN_SAMPLES) == 0)
        )
        keep[-1] = True
        self.words.append(words)
        self.keep.append(keep)
        for k, s in _SIGNAL_OF.items():
            self.cols[k].append(sig[s][:m].astype(np.int64))
        self.cols["kv_wr_en"].append((write >= 0).astype(np.int64))
        self.cols["kv_wr_addr"].append(write)
        self.cols["cmd_ready"].append(ready)
        self.cols["cycle"].append(t)
        self.cols["cmd"].append(cmd + first)
        self.cols["segment"].append(np.full(m, segment, dtype=np.int64))

    def schedule(self) -> Schedule:
        words = np.concatenate(self.words)
        keep = np.concatenate(self.keep)
        change = np.flatnonzero(np.concatenate([[True], words[1:] != words[:-1]]))
        counts = np.diff(np.append(change, len(words)))
        segments = [(int(words[i]), int(c)) for i, c in zip(change, counts)]
        observe = np.flatnonzero(keep)
        cols = {k: np.concatenate(v)[observe] for k, v in self.cols.items()}
        expected = {k: cols[k] for k in _RESET_VALUE}
        return Schedule(segments, observe, expected, cols["cycle"], cols["cmd"], cols["segment"])


def schedule(example: Example) -> Schedule:
    """The model's per-cycle kernel on every segment of ``example`` and the bus stimulus that drives it on the
    RTL: two reset edges, then the segments, each ended by its reset edge."""
    rows = _Rows(np.random.default_rng(example.noise_seed))
    rows.reset(RESET_EDGES_FIRST, 0)
    for k, (first, cmds, cut) in enumerate(example.segments()):
        rows.cycles(first, cmds, example.capacity, cut, k)
        if cut is not None:
            rows.reset(1, k + 1)
    return rows.schedule()


@dataclass(frozen=True)
class Mismatch:
    """The first observed row where the RTL and the model differ."""

    cycle: int  # model cycle within its segment; -1 = a reset edge
    signal: str
    rtl: str
    model: int
    command: int | None  # index in Example.commands of the command occupying that cycle
    segment: int = 0  # resets before it

    def describe(self, example: Example) -> str:
        seg = f" of segment {self.segment + 1} (after reset {self.segment})" if self.segment else ""
        if self.cycle < 0:
            when = (
                f"in the reset state after reset {self.segment} (rst asserted after the preceding commands)"
                if self.segment
                else "in the reset state"
            )
        else:
            when = f"at cycle {self.cycle}{seg}"
        what = ""
        if self.command is not None:
            what = f" (command {self.command + 1}: {example.commands[self.command].text()})"
        return f"first difference {when}{what}: {self.signal} RTL={self.rtl} model={self.model}"


def compare(sched: Schedule, observed: Sequence[str]) -> Mismatch | None:
    """Compare the RTL's observed packed outputs (binary strings, 'x'/'z' digits allowed; one per observed row
    of the schedule) with the model, row by row, signal by signal in COMPARE_ORDER."""
    n_rows = len(sched.observe)
    if len(observed) != n_rows:
        raise ValueError(f"expected {n_rows} observed samples, got {len(observed)}")
    for j, word in enumerate(observed):
        fields = _unpack_text(word)
        for name in COMPARE_ORDER:
            want = int(sched.expected[name][j])
            if name == "kv_wr_addr" and want < 0:
                continue
            got = fields[name]
            if got != str(want):
                cmd = int(sched.cmd[j])
                return Mismatch(int(sched.cycle[j]), name, got, want, cmd if cmd >= 0 else None, int(sched.segment[j]))
    return None


def _unpack_text(word: str) -> dict[str, str]:
    """Split a packed output given as a binary string (MSB first, may hold x/z) into decimal strings per field."""
    bits = word.rjust(OUT_BITS, "0")[::-1]  # LSB first
    out, shift = {}, 0
    for name, width in OUTPUTS:
        chunk = bits[shift : shift + width][::-1]
        shift += width
        if set(chunk) <= {"0", "1"}:
            out[name] = str(int(chunk, 2))
        else:
            out[name] = chunk.lower()
    return out
