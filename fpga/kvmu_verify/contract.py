"""The KVMU RTL signal contract and the model's expected value of every contract signal in every cycle.

The contract (docs/kvmu.md, "RTL signal contract") fixes port names and widths:

=================  =====  ===  =========================================================================
port               width  dir  meaning
=================  =====  ===  =========================================================================
``clk``            1      in   rising-edge clock; one model cycle per edge
``rst``            1      in   synchronous, active high: the state after ``init 0``
``cfg_capacity``   32     in   KV capacity in tokens, held stable while ``rst`` is low
``cmd_valid``      1      in   a command is on the bus
``cmd_op``         3      in   opcode (:class:`fpga.kvmu_codes.Op`; 7 is unknown and refused)
``cmd_arg``        32     in   argument, two's complement (init's position, the count of speculate, ingest, wait)
``cmd_ready``      1      out  the KVMU takes the bus command on the next edge (low during multi-cycle commands)
``valid_ptr``      32     out  register ``valid``
``curr_ptr``       32     out  register ``curr``
``ahead_ptr``      32     out  register ``ahead``
``mode``           2      out  :class:`fpga.kvmu_codes.Mode`
``mux_sel``        1      out  0 local sampler, 1 PCIe
``kv_wr_en``       1      out  a KV write in this cycle
``kv_wr_addr``     32     out  its position (compared only while ``kv_wr_en`` is 1)
``status``         4      out  :class:`fpga.kvmu_codes.Status` of the command occupying this cycle
=================  =====  ===  =========================================================================

Timing. Model cycle ``t`` is the ``t``-th rising edge after reset. Inputs for cycle ``t`` are sampled at edge ``t``;
the outputs between edges ``t`` and ``t + 1`` are the model's per-cycle sample of cycle ``t`` (the state at the end
of that cycle, :mod:`fpga.kvmu_kernel`); ``cmd_ready`` between those edges says whether edge ``t + 1`` may take a
command. Commands issue back to back at the model's default cycle costs (one cycle per command and per token).
A ``wait n`` of the model is driven either as ``n`` idle cycles (``cmd_valid`` low, the other command inputs
random) or as opcode 6 on the bus; both must look the same on the outputs. While a command is busy the next
command is already held on the bus (``cmd_valid`` high), and must not be taken before ``cmd_ready``.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from fpga.kvmu_codes import Op

if TYPE_CHECKING:
    from fpga.kvmu import KvmuTrace

PTR_BITS = 32
ARG_BITS = 32
OP_BITS = 3
STATUS_BITS = 4
MODE_BITS = 2
UNKNOWN_OP = 7  # the one opcode of the 3-bit field outside Op

#: Inputs of the contract, in the order the testbench packs them (LSB first): cmd_arg, cmd_op, cmd_valid.
INPUTS = (("cmd_arg", ARG_BITS), ("cmd_op", OP_BITS), ("cmd_valid", 1))
#: Outputs of the contract, in the order the wrapper packs them (LSB first).
OUTPUTS = (("valid_ptr", PTR_BITS), ("curr_ptr", PTR_BITS), ("ahead_ptr", PTR_BITS), ("mode", MODE_BITS),
           ("mux_sel", 1), ("kv_wr_addr", PTR_BITS), ("kv_wr_en", 1), ("status", STATUS_BITS), ("cmd_ready", 1))
OUT_BITS = sum(w for _, w in OUTPUTS)
IN_BITS = sum(w for _, w in INPUTS)
#: Order in which a cycle's signals are compared (the first differing one is reported).
COMPARE_ORDER = ("cmd_ready", "status", "mode", "mux_sel", "valid_ptr", "curr_ptr", "ahead_ptr", "kv_wr_en",
                 "kv_wr_addr")
MAX_CAPACITY = 2**31 - 1


@dataclass(frozen=True)
class BusCommand:
    """One command of an example: ``op`` (0..7), ``arg`` (a 32-bit signed integer), and for ``wait`` whether it
    is driven as idle bus cycles (``idle=True``) or as opcode 6 on the bus."""

    op: int
    arg: int = 0
    idle: bool = False

    def text(self) -> str:
        from fpga.kvmu_codes import command_text

        if self.op == UNKNOWN_OP:
            return f"# opcode 7 (unknown), argument {self.arg}"
        t = command_text(self.op, self.arg)
        if self.op == Op.WAIT and not self.idle:
            t += "  # on the bus as opcode 6"
        return t


@dataclass(frozen=True)
class Example:
    """A verification example: a capacity, a command stream, and the seed of the don't-care bus bits."""

    capacity: int
    commands: tuple[BusCommand, ...]
    noise_seed: int = 0

    def command_file(self) -> str:
        """The example as a command file (fpga/kvmu_commands.py format) that `hwmodel kvmu trace` can run;
        an unknown opcode, which a command file cannot spell, is a comment naming it."""
        lines = [f"capacity {self.capacity}"]
        lines += [c.text() for c in self.commands]
        return "\n".join(lines) + "\n"


def _idle_on_bus(c: BusCommand) -> bool:
    """A wait driven as idle cycles (only a legal count can be idle: a refused wait is a bus command)."""
    return c.op == Op.WAIT and c.idle and c.arg >= 1


def pack_input(valid: int, op: int, arg: int) -> int:
    return (arg & (2**ARG_BITS - 1)) | ((op & 7) << ARG_BITS) | ((valid & 1) << (ARG_BITS + OP_BITS))


def unpack_output(word: int) -> dict[str, int]:
    out, shift = {}, 0
    for name, width in OUTPUTS:
        out[name] = (word >> shift) & ((1 << width) - 1)
        shift += width
    return out


@dataclass(frozen=True)
class Schedule:
    """What the testbench drives and what the model expects: per cycle, the packed bus input and the expected
    value of every output signal (``kv_wr_addr`` is -1 where ``kv_wr_en`` is 0: not compared). Row 0 is the
    reset state; row ``t + 1`` is model cycle ``t``. ``cmd`` maps a model cycle to the index of its command."""

    stimulus: np.ndarray  # uint64-safe python ints, one per model cycle
    expected: dict[str, np.ndarray]
    cmd: np.ndarray


def model_trace(example: Example) -> KvmuTrace:
    """The model's run-length trace of ``example`` (for the VCD and the coverage checks)."""
    from fpga.kvmu import CycleCosts, run_kernel

    ops = np.array([c.op for c in example.commands], dtype=np.int64)
    args = np.array([c.arg for c in example.commands], dtype=np.int64)
    return run_kernel(ops, args, example.capacity, CycleCosts())


def schedule(example: Example) -> Schedule:
    """The model's per-cycle kernel on ``example`` and the bus stimulus that drives it on the RTL."""
    from fpga.kvmu import CycleCosts, kernel_per_cycle

    ops = np.array([c.op for c in example.commands], dtype=np.int64)
    args = np.array([c.arg for c in example.commands], dtype=np.int64)
    sig = kernel_per_cycle(ops, args, example.capacity, CycleCosts())
    n = int(sig["valid"].shape[0])
    cmd = sig["cmd"].astype(np.int64)
    start = np.searchsorted(cmd, np.arange(len(example.commands)))  # every command has >= 1 cycle
    rng = np.random.default_rng(example.noise_seed)
    noise_op = rng.integers(0, 8, size=n + 1)
    noise_arg = rng.integers(-2**31, 2**31, size=n + 1)
    stim = []
    for t in range(n):
        i = int(cmd[t])
        c = example.commands[i]
        if _idle_on_bus(c):
            stim.append(pack_input(0, int(noise_op[t]), int(noise_arg[t])))
        elif t == int(start[i]):
            stim.append(pack_input(1, c.op, c.arg))
        else:  # busy: the next command (if it goes on the bus) already waits on the bus
            nxt = example.commands[i + 1] if i + 1 < len(example.commands) else None
            if nxt is not None and not _idle_on_bus(nxt):
                stim.append(pack_input(1, nxt.op, nxt.arg))
            else:
                stim.append(pack_input(0, int(noise_op[t]), int(noise_arg[t])))
    # cmd_ready after cycle t: may cycle t+1 take a command? Not while t+1 is a non-first cycle of a bus command.
    ready = np.ones(n + 1, dtype=np.int64)
    for t in range(n - 1):
        i = int(cmd[t + 1])
        if not _idle_on_bus(example.commands[i]) and t + 1 != int(start[i]):
            ready[t + 1] = 0
    write = sig["write_pos"].astype(np.int64)
    expected = {
        "valid_ptr": np.concatenate([[0], sig["valid"]]).astype(np.int64),
        "curr_ptr": np.concatenate([[0], sig["curr"]]).astype(np.int64),
        "ahead_ptr": np.concatenate([[0], sig["ahead"]]).astype(np.int64),
        "mode": np.concatenate([[0], sig["mode"]]).astype(np.int64),
        "mux_sel": np.concatenate([[1], sig["mux"]]).astype(np.int64),
        "status": np.concatenate([[0], sig["status"]]).astype(np.int64),
        "kv_wr_en": np.concatenate([[0], (write >= 0).astype(np.int64)]),
        "kv_wr_addr": np.concatenate([[-1], write]),
        "cmd_ready": ready,
    }
    return Schedule(np.array(stim, dtype=object), expected, cmd)


@dataclass(frozen=True)
class Mismatch:
    """The first cycle where the RTL and the model differ."""

    cycle: int  # model cycle; -1 = the reset state
    signal: str
    rtl: str
    model: int
    command: int | None  # index of the command occupying that cycle

    def describe(self, example: Example) -> str:
        when = "in the reset state" if self.cycle < 0 else f"at cycle {self.cycle}"
        what = ""
        if self.command is not None:
            what = f" (command {self.command + 1}: {example.commands[self.command].text()})"
        return f"first difference {when}{what}: {self.signal} RTL={self.rtl} model={self.model}"


def compare(sched: Schedule, observed: Sequence[str]) -> Mismatch | None:
    """Compare the RTL's observed packed outputs (hex strings, 'x'/'z' digits allowed; one per row of the
    schedule) with the model, cycle by cycle, signal by signal in COMPARE_ORDER."""
    n_rows = len(sched.expected["valid_ptr"])
    if len(observed) != n_rows:
        raise ValueError(f"expected {n_rows} observed samples, got {len(observed)}")
    for row, word in enumerate(observed):
        cycle = row - 1
        command = int(sched.cmd[cycle]) if cycle >= 0 else None
        fields = _unpack_text(word)
        for name in COMPARE_ORDER:
            want = int(sched.expected[name][row])
            if name == "kv_wr_addr" and want < 0:
                continue
            got = fields[name]
            if got != str(want):
                return Mismatch(cycle, name, got, want, command)
    return None


def _unpack_text(word: str) -> dict[str, str]:
    """Split a packed output given as a binary string (MSB first, may hold x/z) into decimal strings per field."""
    bits = word.rjust(OUT_BITS, "0")[::-1]  # LSB first
    out, shift = {}, 0
    for name, width in OUTPUTS:
        chunk = bits[shift:shift + width][::-1]
        shift += width
        if set(chunk) <= {"0", "1"}:
            out[name] = str(int(chunk, 2))
        else:
            out[name] = chunk.lower()
    return out
