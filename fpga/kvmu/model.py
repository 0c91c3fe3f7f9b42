"""The KV-cache management unit (KVMU) of the FPGA draft accelerator: three pointer registers, four modes, the
input multiplexer, and the KV memory the pointers guard — as a cycle-level model.

Source: the disaggregated step-wise speculative reasoning design (draft on FPGA, PRM and target on GPUs) described
in the project brief (HeteroReason-style disaggregation): registers ``valid`` (end of the verified tokens), ``curr`` (end of the step under
verification), ``ahead`` (step-ahead frontier); modes *init*, *speculate*, *accept*, *rollback*; the decoder's
input mux reads the local sampler in speculate/accept and PCIe (the target's tokens) in init/rollback.

Positions are KV slots: the KV of token ``p`` lives at position ``p``. At every cycle::

    0 <= valid <= curr <= ahead <= capacity
    [0, valid)      verified tokens (the prompt, accepted draft steps, the target's tokens)
    [valid, curr)   the drafted step under verification (sent to the PRM)
    [curr, ahead)   step-ahead tokens (drafted, not yet submitted)

The decoder attends to ``[0, ahead)`` and writes the KV of its next token at ``ahead``.

Transition table (a command that breaks its "legal when" column is refused with the status in brackets and changes
nothing — no register, no mode, no KV write; ``-`` = unchanged)::

   command      legal when                                  valid  curr   ahead  KV writes           mode       mux
   init p       0 <= p <= capacity [INIT_OUT_OF_RANGE]       p      p      p      none                init       PCIe
   speculate n  n >= 1 [BAD_COUNT];                          -      -      +n     n drafts at ahead.. speculate  sampler
                ahead + n <= capacity [OVER_CAPACITY]
   mark         curr == valid [STEP_PENDING];                -      ahead  -      none                speculate  sampler
                ahead > curr [EMPTY_STEP]
   accept       curr > valid [NOTHING_TO_VERIFY]             curr   ahead  -      none                accept     sampler
   rollback     curr > valid [NOTHING_TO_VERIFY]             -      valid  valid  none                rollback   PCIe
   ingest n     n >= 1 [BAD_COUNT]; mode init or rollback    +n     +n     +n     n target tokens     -          PCIe
                [MUX_NOT_PCIE]; ahead + n <= cap [OVER_CAP.]                      at ahead..
   wait n       n >= 1 [BAD_COUNT]                           -      -      -      none                -          -

Checks run in the order listed. Reset is the state after ``init 0`` (all registers 0, mode init, mux PCIe).

Why two commands beyond the four modes:

* ``mark`` (speculate mode) closes a drafted step and submits it: ``curr <- ahead``. The spec's ``accept``
  (``valid <- curr, curr <- ahead``) submits the *next* step at the same time as it commits the verified one, so
  with step-ahead speculation the boundary is carried by ``accept``; but the first step after ``init``,
  ``rollback`` or ``ingest`` has no step under verification to accept (``curr == valid``), and something must move
  ``curr`` to the step's end. That is ``mark``. It is legal only with no step pending, so it can never merge two
  steps into one verification window. Driver contract: ``accept`` is issued at a draft step boundary; an accept
  verdict that arrives while the draft is part-way through the step-ahead step is held by the controller until
  the draft closes that step (the draft does not stall; only the pointer update waits). A reject is applied at
  once (``rollback`` drops the step-ahead tokens with the rejected step).
* ``ingest n`` is shadow synchronization: the target's tokens arrive over PCIe after a ``rollback`` (refinement)
  or an ``init`` (backtrack), and the FPGA runs forward passes on them, writing their KV at ``ahead..``. The
  target's tokens are authoritative, so ingest commits them at once: all three pointers advance by ``n`` (one per
  token, in the token's last cycle). If the PRM later rejects the refined step too, the system backtracks with
  ``init p`` to an earlier step boundary — the only command that moves ``valid`` down. It is legal only while the
  mux selects PCIe (init or rollback mode), and leaves the mode as it is.
* ``wait n`` is not a KVMU command: the command bus is idle for ``n`` cycles (a verdict in flight, a stall).

Positions below ``valid`` are never written again until an ``init`` moves ``valid`` below them (a backtrack).

Cycle semantics (shared with the Numba kernel, :mod:`fpga.kvmu.kernel`): commands issue back to back; the mode and
mux switch on a command's first cycle; register updates land on its last cycle; ``speculate n`` and ``ingest n``
take ``n`` token slots of :class:`CycleCosts` cycles each, and each token's KV write and pointer increment land
on its slot's last cycle; a refused command takes one cycle, shows its status code, and changes nothing.

Public API: :class:`Kvmu` (the Python face, also the cycle-by-cycle reference the kernel is checked against),
:func:`run_commands` / :func:`run_kernel` (the kernel on a command list / on opcode arrays; run-length cycles),
:func:`kernel_per_cycle` (the kernel, one sample per cycle), :class:`KvmuTrace`, :func:`write_vcd` /
:func:`read_vcd`, :func:`load_commands` / :func:`parse_commands`, :class:`CycleCosts`, :class:`Command`.
The command-file format is in :mod:`fpga.kvmu.commands`, the VCD signals in :mod:`fpga.kvmu.vcd`, and the user
documentation in docs/kvmu.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

import numpy as np

from fpga.kvmu.codes import (
    MUX_OF_MODE,
    TAKES_ARG,
    WRITER_PCIE,
    WRITER_SAMPLER,
    Mode,
    Mux,
    Op,
    Status,
    refusal_reason,
)
from fpga.kvmu.commands import Command, CommandFileError, CommandProgram, load_commands, parse_commands
from fpga.kvmu.state import (  # noqa: F401 - the public names of the KVMU, importable from here
    _COMMAND_DTYPES,
    _SIGNAL_DTYPES,
    COMMAND_FIELDS,
    INT64_MAX,
    MAX_CAPACITY,
    MAX_COST_CYCLES,
    RESET_STATE,
    SIGNALS,
    CommandRefused,
    CycleCosts,
    KvMemory,
    KvmuError,
    KvmuState,
    KvmuTrace,
    _as_int,
    check_capacity,
)
from fpga.kvmu.vcd import read_vcd, write_vcd


class Kvmu:
    """The KVMU's Python face: the commands of the transition table above as methods, the registers as read-only
    properties, and a KV-memory write-tag model. A refused command raises :class:`CommandRefused` (one line: which
    command, why, the registers) after taking its one cycle; nothing else changes.

    With ``record=True`` every cycle is recorded (run-length encoded) and ``trace()`` returns a :class:`KvmuTrace`
    identical to what the Numba kernel produces for ``history`` — the face is the cycle-by-cycle reference the
    kernel is verified against. ``idle`` / ``advance_to`` let a discrete-event simulator place commands at its own
    times (``advance_to(round(t_s * clock_hz))``). With ``tags=False`` the write tags are not kept (``memory`` is
    None): the registers, refusals, cycles and trace are the same; a replay that drives the KVMU and checks its
    pointers, reading no tag, saves writing one per token."""

    def __init__(
        self, capacity: int, costs: CycleCosts | None = None, *, record: bool = False, tags: bool = True
    ) -> None:
        self._capacity = check_capacity(capacity)
        self._costs = costs if costs is not None else CycleCosts()
        if not isinstance(self._costs, CycleCosts):
            raise KvmuError(f"costs must be a CycleCosts, got {type(costs).__name__}")
        self._valid = 0
        self._curr = 0
        self._ahead = 0
        self._mode = Mode.INIT
        self._cycle = 0
        self._n_commands = 0
        self.memory: KvMemory | None = KvMemory(self._capacity) if tags else None
        self._record = record
        self._history: list[Command] = []
        self._cmd_rows: list[tuple[int, ...]] = []
        self._runs: list[list[int]] = []
        self._status = Status.OK

    # ---- read-only registers
    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def costs(self) -> CycleCosts:
        return self._costs

    @property
    def valid(self) -> int:
        """End of the verified tokens: positions [0, valid) are committed."""
        return self._valid

    @property
    def curr(self) -> int:
        """End of the step under verification: [valid, curr) is with the PRM."""
        return self._curr

    @property
    def ahead(self) -> int:
        """Step-ahead frontier: the next token's KV is written here; the decoder attends to [0, ahead)."""
        return self._ahead

    @property
    def mode(self) -> Mode:
        return self._mode

    @property
    def mux_source(self) -> Mux:
        """Where the decoder's next input comes from: the local sampler or PCIe (follows the mode)."""
        return MUX_OF_MODE[self._mode]

    @property
    def state(self) -> KvmuState:
        return KvmuState(self._valid, self._curr, self._ahead, self._mode)

    @property
    def cycle(self) -> int:
        """Cycles elapsed since reset (the next command issues at this cycle)."""
        return self._cycle

    @property
    def n_commands(self) -> int:
        return self._n_commands

    @property
    def history(self) -> list[Command]:
        """Every command issued, refused ones included, in order (only with ``record=True``)."""
        self._need_record("history")
        return list(self._history)

    # ---- the commands
    def init(self, pos: int) -> None:
        """Set all three registers to ``pos`` (problem start after the KV migration, or a backtrack); mux PCIe."""
        pos = _as_int(pos, "init position")
        if pos < 0 or pos > self._capacity:
            self._refuse(Op.INIT, pos, Status.INIT_OUT_OF_RANGE)
        self._begin(Op.INIT, pos, Mode.INIT)
        self._update(self._costs.init_cycles, pos, pos, pos)
        self._end()

    def speculate(self, n: int = 1) -> range:
        """Draft ``n`` tokens: their KV is written at ahead, ahead+1, ...; only ``ahead`` moves. Returns the
        positions written."""
        n = _as_int(n, "speculate count")
        if n < 1:
            self._refuse(Op.SPECULATE, n, Status.BAD_COUNT)
        if n > self._capacity - self._ahead:
            self._refuse(Op.SPECULATE, n, Status.OVER_CAPACITY)
        self._begin(Op.SPECULATE, n, Mode.SPECULATE)
        written = self._tokens(n, self._costs.speculate_cycles_per_token, WRITER_SAMPLER, commit=False)
        self._end()
        return written

    def mark(self) -> None:
        """Close the drafted step and submit it for verification: ``curr <- ahead`` (no step may be pending)."""
        if self._curr != self._valid:
            self._refuse(Op.MARK, 0, Status.STEP_PENDING)
        if self._ahead == self._curr:
            self._refuse(Op.MARK, 0, Status.EMPTY_STEP)
        self._begin(Op.MARK, 0, Mode.SPECULATE)
        self._update(self._costs.mark_cycles, self._valid, self._ahead, self._ahead)
        self._end()

    def accept(self) -> None:
        """The step under verification is accepted: ``valid <- curr``, and the step-ahead step is submitted:
        ``curr <- ahead``."""
        if self._curr == self._valid:
            self._refuse(Op.ACCEPT, 0, Status.NOTHING_TO_VERIFY)
        self._begin(Op.ACCEPT, 0, Mode.ACCEPT)
        self._update(self._costs.accept_cycles, self._curr, self._ahead, self._ahead)
        self._end()

    def rollback(self) -> None:
        """The step under verification is rejected: ``curr <- valid``, ``ahead <- valid`` (step-ahead tokens
        dropped; no data moves); mux PCIe for the target's tokens."""
        if self._curr == self._valid:
            self._refuse(Op.ROLLBACK, 0, Status.NOTHING_TO_VERIFY)
        self._begin(Op.ROLLBACK, 0, Mode.ROLLBACK)
        self._update(self._costs.rollback_cycles, self._valid, self._valid, self._valid)
        self._end()

    def ingest(self, n: int) -> range:
        """Shadow synchronization: ``n`` target tokens from PCIe; their KV is written at ahead.. and they are
        committed (valid, curr and ahead advance together). Only in init or rollback mode. Returns the positions."""
        n = _as_int(n, "ingest count")
        if n < 1:
            self._refuse(Op.INGEST, n, Status.BAD_COUNT)
        if self._mode not in (Mode.INIT, Mode.ROLLBACK):
            self._refuse(Op.INGEST, n, Status.MUX_NOT_PCIE)
        if n > self._capacity - self._ahead:
            self._refuse(Op.INGEST, n, Status.OVER_CAPACITY)
        self._begin(Op.INGEST, n, self._mode)
        written = self._tokens(n, self._costs.ingest_cycles_per_token, WRITER_PCIE, commit=True)
        self._end()
        return written

    def idle(self, n_cycles: int) -> None:
        """No command for ``n_cycles`` cycles (``wait n`` in a command file); everything holds."""
        n_cycles = _as_int(n_cycles, "wait cycles")
        if n_cycles < 1:
            self._refuse(Op.WAIT, n_cycles, Status.BAD_COUNT)
        if self._cycle + n_cycles > INT64_MAX:
            raise KvmuError(
                f"waiting {n_cycles} cycles at cycle {self._cycle} runs past {INT64_MAX} cycles "
                f"(a cycle counter of 64 bits)"
            )
        self._begin(Op.WAIT, n_cycles, self._mode)
        self._emit(n_cycles)
        self._end()

    def advance_to(self, cycle: int) -> None:
        """Idle until ``cycle`` (no-op if already there); for simulators that issue commands at their own times."""
        cycle = _as_int(cycle, "target cycle")
        if cycle < self._cycle:
            raise KvmuError(f"cannot advance the KVMU to cycle {cycle}: it is already at cycle {self._cycle}")
        if cycle > self._cycle:
            self.idle(cycle - self._cycle)

    def apply(self, command: Command) -> range | None:
        """Issue one :class:`Command`."""
        op = command.op
        if op is Op.INIT:
            return self.init(command.arg)
        if op is Op.SPECULATE:
            return self.speculate(command.arg)
        if op is Op.MARK:
            return self.mark()
        if op is Op.ACCEPT:
            return self.accept()
        if op is Op.ROLLBACK:
            return self.rollback()
        if op is Op.INGEST:
            return self.ingest(command.arg)
        if op is Op.WAIT:
            return self.idle(command.arg)
        raise KvmuError(f"unknown KVMU command {op!r}")

    def run(self, commands: Iterable[Command]) -> None:
        """Issue commands in order (stops at the first refusal, which raises)."""
        for command in commands:
            self.apply(command)

    def trace(self) -> KvmuTrace:
        """Everything recorded since construction (needs ``record=True``)."""
        self._need_record("trace()")
        cols = list(zip(*self._cmd_rows)) if self._cmd_rows else [()] * len(COMMAND_FIELDS)
        commands = {name: np.asarray(col, dtype=_COMMAND_DTYPES[name]) for name, col in zip(COMMAND_FIELDS, cols)}
        names = ("start", "length", *SIGNALS)
        rcols = list(zip(*self._runs)) if self._runs else [()] * len(names)
        runs = {
            name: np.asarray(col, dtype=np.int64 if name in ("start", "length") else _SIGNAL_DTYPES[name])
            for name, col in zip(names, rcols)
        }
        return KvmuTrace(self._capacity, self._costs, RESET_STATE, commands, runs, tuple(c.line for c in self._history))

    # ---- cycle bookkeeping
    def _need_record(self, what: str) -> None:
        if not self._record:
            raise KvmuError(f"Kvmu.{what} needs Kvmu(..., record=True)")

    def _begin(self, op: Op, arg: int, mode: Mode) -> None:
        """A legal command starts: its mode (and mux) switches on its first cycle."""
        self._op, self._arg, self._start = op, arg, self._cycle
        self._mode = mode
        self._status = Status.OK
        if self._record:
            self._history.append(Command(op, arg))

    def _end(self) -> None:
        if self._record:
            self._cmd_rows.append(
                (
                    int(self._op),
                    self._arg,
                    int(self._status),
                    self._start,
                    self._cycle - self._start,
                    self._valid,
                    self._curr,
                    self._ahead,
                    int(self._mode),
                )
            )
        self._n_commands += 1

    def _emit(self, n_cycles: int, write_pos: int = -1) -> None:
        """``n_cycles`` cycles with the current registers (and a KV write at ``write_pos`` if >= 0)."""
        if n_cycles <= 0:
            return
        if self._record:
            row = [
                self._cycle,
                n_cycles,
                self._valid,
                self._curr,
                self._ahead,
                int(self._mode),
                int(MUX_OF_MODE[self._mode]),
                int(self._status),
                self._n_commands,
                write_pos,
            ]
            last = self._runs[-1] if self._runs else None
            if last is not None and last[2:] == row[2:]:
                last[1] += n_cycles
            else:
                self._runs.append(row)
        self._cycle += n_cycles

    def _update(self, cost: int, valid: int, curr: int, ahead: int) -> None:
        """A one-shot register update landing on the command's last cycle."""
        self._emit(cost - 1)
        self._valid, self._curr, self._ahead = valid, curr, ahead
        self._emit(1)

    def _tokens(self, n: int, slot_cycles: int, writer: int, commit: bool) -> range:
        """``n`` token slots: each token's KV is written at ``ahead`` on its slot's last cycle, then ``ahead``
        (and ``valid``, ``curr`` when ``commit``) increments."""
        first = self._ahead
        memory = self.memory
        if self._record:
            for _ in range(n):
                self._emit(slot_cycles - 1)
                pos = self._ahead
                if memory is not None:
                    memory.write(slice(pos, pos + 1), writer, self._cycle, self._n_commands)
                self._ahead += 1
                if commit:
                    self._valid += 1
                    self._curr += 1
                self._emit(1, write_pos=pos)
        else:
            if memory is not None:  # each token's KV on its slot's last cycle
                write_cycles = self._cycle + slot_cycles * np.arange(1, n + 1, dtype=np.int64) - 1
                memory.write(slice(first, first + n), writer, write_cycles, self._n_commands)
            self._ahead += n
            if commit:
                self._valid += n
                self._curr += n
            self._cycle += n * slot_cycles
        return range(first, first + n)

    def _refuse(self, op: Op, arg: int, status: Status) -> None:
        """Take the refused command's one cycle (status shown, nothing changes), then raise."""
        message = refusal_reason(
            int(op), arg, int(status), self._valid, self._curr, self._ahead, int(self._mode), self._capacity
        )
        self._op, self._arg, self._start = op, arg, self._cycle
        self._status = status
        if self._record:
            self._history.append(Command(op, arg))
        self._emit(1)
        self._end()
        self._status = Status.OK
        raise CommandRefused(message, op, arg, status)


def run_commands(
    commands: Sequence[Command], capacity: int, costs: CycleCosts | None = None, initial: KvmuState = RESET_STATE
) -> KvmuTrace:
    """Run a command list through the Numba kernel; refused commands are recorded with their status (see
    ``KvmuTrace.refusals()``), not raised. Arguments must fit in 64 bits."""
    cap = check_capacity(capacity)
    for i, c in enumerate(commands):
        if not isinstance(c, Command) or not isinstance(c.op, Op):
            raise KvmuError(f"command {i}: expected a Command with an Op, got {c!r}")
        where = f"line {c.line}" if c.line is not None else f"command {i}"
        _as_int(c.arg, f"{where}: the argument of {c.op.name.lower()}")
    ops = np.fromiter((int(c.op) for c in commands), dtype=np.int64, count=len(commands))
    args = np.fromiter((int(c.arg) for c in commands), dtype=np.int64, count=len(commands))
    trace = run_kernel(ops, args, cap, costs, initial)
    return dataclasses.replace(trace, lines=tuple(c.line for c in commands))


def _kernel_pass1(
    ops: np.ndarray, args: np.ndarray, capacity: int, costs: CycleCosts | None, initial: KvmuState
) -> tuple[np.ndarray, np.ndarray, int, CycleCosts, tuple[np.ndarray, ...]]:
    from fpga.kvmu.kernel import kvmu_commands

    cap = check_capacity(capacity)
    costs = costs if costs is not None else CycleCosts()
    ops = np.ascontiguousarray(ops, dtype=np.int64)
    args = np.ascontiguousarray(args, dtype=np.int64)
    if ops.shape != args.shape or ops.ndim != 1:
        raise KvmuError(f"opcodes and arguments must be 1-D arrays of one length, got {ops.shape} and {args.shape}")
    if not 0 <= initial.valid <= initial.curr <= initial.ahead <= cap:
        raise KvmuError(f"initial state breaks 0 <= valid <= curr <= ahead <= capacity: {initial} (capacity {cap})")
    per_cmd = kvmu_commands(
        ops, args, cap, costs.as_array(), initial.valid, initial.curr, initial.ahead, int(initial.mode)
    )
    start, n_cycles = per_cmd[1], per_cmd[2]
    if ops.shape[0] and (np.any(start < 0) or int(start[-1]) + int(n_cycles[-1]) > INT64_MAX):
        raise KvmuError(f"the command stream runs past {INT64_MAX} cycles (a cycle counter of 64 bits)")
    return ops, args, cap, costs, per_cmd


def run_kernel(
    ops: np.ndarray, args: np.ndarray, capacity: int, costs: CycleCosts | None = None, initial: KvmuState = RESET_STATE
) -> KvmuTrace:
    """The Numba kernel on opcode / argument arrays (int64), per-cycle signals run-length encoded (any length of
    ``wait`` is cheap). Unknown opcodes are refused (UNKNOWN_OPCODE)."""
    from fpga.kvmu.kernel import kvmu_runs

    ops, args, cap, costs, per_cmd = _kernel_pass1(ops, args, capacity, costs, initial)
    status, start, n_cycles, valid_after, curr_after, ahead_after, mode_after = per_cmd
    runs = kvmu_runs(
        ops,
        args,
        costs.as_array(),
        status,
        start,
        n_cycles,
        valid_after,
        curr_after,
        ahead_after,
        mode_after,
        initial.valid,
        initial.curr,
        initial.ahead,
    )
    commands = {
        "op": ops,
        "arg": args,
        "status": status,
        "start_cycle": start,
        "n_cycles": n_cycles,
        "valid": valid_after,
        "curr": curr_after,
        "ahead": ahead_after,
        "mode": mode_after,
    }
    return KvmuTrace(cap, costs, initial, commands, dict(zip(("start", "length", *SIGNALS), runs)))


MAX_DENSE_CYCLES = 2**26


def kernel_per_cycle(
    ops: np.ndarray, args: np.ndarray, capacity: int, costs: CycleCosts | None = None, initial: KvmuState = RESET_STATE
) -> dict[str, np.ndarray]:
    """The Numba kernel with one sample per cycle: {signal: array over cycles} for SIGNALS. Refuses runs longer
    than MAX_DENSE_CYCLES (use :func:`run_kernel`, whose runs expand to the same arrays)."""
    from fpga.kvmu.kernel import kvmu_cycles

    ops, args, cap, costs, per_cmd = _kernel_pass1(ops, args, capacity, costs, initial)
    status, start, n_cycles, valid_after, curr_after, ahead_after, mode_after = per_cmd
    total = int(n_cycles.sum())
    if total > MAX_DENSE_CYCLES:
        raise KvmuError(
            f"{total} cycles is too long for one sample per cycle (limit {MAX_DENSE_CYCLES}); "
            f"use run_kernel, which encodes runs of unchanged cycles"
        )
    cyc = kvmu_cycles(
        ops,
        args,
        costs.as_array(),
        status,
        n_cycles,
        valid_after,
        curr_after,
        ahead_after,
        mode_after,
        initial.valid,
        initial.curr,
        initial.ahead,
    )
    return dict(zip(SIGNALS, cyc))


__all__ = [
    "COMMAND_FIELDS",
    "SIGNALS",
    "TAKES_ARG",
    "Command",
    "CommandFileError",
    "CommandProgram",
    "CommandRefused",
    "CycleCosts",
    "KvMemory",
    "Kvmu",
    "KvmuError",
    "KvmuState",
    "KvmuTrace",
    "Mode",
    "Mux",
    "Op",
    "RESET_STATE",
    "Status",
    "kernel_per_cycle",
    "load_commands",
    "parse_commands",
    "read_vcd",
    "run_commands",
    "run_kernel",
    "write_vcd",
]
