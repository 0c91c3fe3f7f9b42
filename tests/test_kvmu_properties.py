"""Property-based verification of the KVMU (hypothesis RuleBasedStateMachine over random command sequences, legal
and illegal):

* after every command, the Python face matches a spec model written here from the transition table
  (docs/kvmu.md) — status, every register, the mode, the cycle count and every KV write tag — so each mode does
  exactly what the table says and nothing else moves;
* 0 <= valid <= curr <= ahead <= capacity, and the mux source follows the mode, after every command and in every
  cycle;
* a position below ``valid`` is never written again until an ``init`` moves ``valid`` below it;
* the Numba kernel, run on the same command stream, agrees with the face on every signal in every cycle and on
  every per-command record, and its write port tags the same positions as the face's KV memory model;
* a broken variant of each command (mutants below, one per rule of the table, plus a broken kernel) is caught.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from hypothesis import Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import fpga.kvmu.kernel as kvmu_kernel
from fpga.kvmu.codes import WRITER_PCIE, WRITER_SAMPLER
from fpga.kvmu.model import (
    COMMAND_FIELDS,
    SIGNALS,
    CommandRefused,
    CycleCosts,
    Kvmu,
    Mode,
    Mux,
    Op,
    Status,
    kernel_per_cycle,
    run_kernel,
)

# ---------------------------------------------------------------------------------------------------------------
# The spec, written from the transition table independently of fpga/kvmu/model.py and fpga/kvmu/kernel.py.
SPEC_MUX = {Mode.INIT: Mux.PCIE, Mode.SPECULATE: Mux.SAMPLER, Mode.ACCEPT: Mux.SAMPLER, Mode.ROLLBACK: Mux.PCIE}
SPEC_WRITER = {Mux.SAMPLER: WRITER_SAMPLER, Mux.PCIE: WRITER_PCIE}


@dataclass
class SpecKvmu:
    capacity: int
    costs: CycleCosts
    valid: int = 0
    curr: int = 0
    ahead: int = 0
    mode: Mode = Mode.INIT
    cycle: int = 0
    n_commands: int = 0
    writer: np.ndarray = field(init=False)
    write_cycle: np.ndarray = field(init=False)
    write_cmd: np.ndarray = field(init=False)
    writes: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.writer = np.zeros(self.capacity, np.int8)
        self.write_cycle = np.full(self.capacity, -1, np.int64)
        self.write_cmd = np.full(self.capacity, -1, np.int64)
        self.writes = np.zeros(self.capacity, np.int64)

    def status(self, op: Op, arg: int) -> Status:
        v, c, a, cap = self.valid, self.curr, self.ahead, self.capacity
        if op is Op.INIT:
            return Status.OK if 0 <= arg <= cap else Status.INIT_OUT_OF_RANGE
        if op is Op.SPECULATE:
            return Status.BAD_COUNT if arg < 1 else Status.OVER_CAPACITY if a + arg > cap else Status.OK
        if op is Op.MARK:
            return Status.STEP_PENDING if c != v else Status.EMPTY_STEP if a == c else Status.OK
        if op in (Op.ACCEPT, Op.ROLLBACK):
            return Status.NOTHING_TO_VERIFY if c == v else Status.OK
        if op is Op.INGEST:
            if arg < 1:
                return Status.BAD_COUNT
            if SPEC_MUX[self.mode] is not Mux.PCIE:
                return Status.MUX_NOT_PCIE
            return Status.OVER_CAPACITY if a + arg > cap else Status.OK
        if op is Op.WAIT:
            return Status.BAD_COUNT if arg < 1 else Status.OK
        raise AssertionError(op)

    def step(self, op: Op, arg: int) -> Status:
        status = self.status(op, arg)
        index = self.n_commands
        self.n_commands += 1
        if status is not Status.OK:
            self.cycle += 1
            return status
        costs = self.costs
        if op is Op.INIT:
            self.valid = self.curr = self.ahead = arg
            self.mode = Mode.INIT
            self.cycle += costs.init_cycles
        elif op is Op.SPECULATE:
            self._write(arg, costs.speculate_cycles_per_token, WRITER_SAMPLER, index)
            self.ahead += arg
            self.mode = Mode.SPECULATE
        elif op is Op.MARK:
            self.curr = self.ahead
            self.mode = Mode.SPECULATE
            self.cycle += costs.mark_cycles
        elif op is Op.ACCEPT:
            self.valid, self.curr = self.curr, self.ahead
            self.mode = Mode.ACCEPT
            self.cycle += costs.accept_cycles
        elif op is Op.ROLLBACK:
            self.curr = self.ahead = self.valid
            self.mode = Mode.ROLLBACK
            self.cycle += costs.rollback_cycles
        elif op is Op.INGEST:
            self._write(arg, costs.ingest_cycles_per_token, WRITER_PCIE, index)
            self.valid += arg
            self.curr += arg
            self.ahead += arg
        elif op is Op.WAIT:
            self.cycle += arg
        return status

    def _write(self, n: int, slot: int, writer: int, index: int) -> None:
        for j in range(n):
            pos = self.ahead + j
            self.writer[pos] = writer
            self.write_cycle[pos] = self.cycle + (j + 1) * slot - 1
            self.write_cmd[pos] = index
            self.writes[pos] += 1
        self.cycle += n * slot


def check_cycle_properties(
    cap: int, sig: dict[str, np.ndarray], ops: list[Op], args: list[int]
) -> dict[str, np.ndarray]:
    """Per-cycle properties of per-cycle signals (from reset); returns the KV write tags a harness derives from
    the write port."""
    n = sig["valid"].shape[0]
    valid, curr, ahead = sig["valid"].astype(np.int64), sig["curr"].astype(np.int64), sig["ahead"].astype(np.int64)
    assert np.all((0 <= valid) & (valid <= curr) & (curr <= ahead) & (ahead <= cap)), "pointer order broken"
    for mode, mux in SPEC_MUX.items():
        assert np.all(sig["mux"][sig["mode"] == mode] == mux), f"mux does not follow mode {mode.name}"
    tags = {
        "writer": np.zeros(cap, np.int8),
        "cycle": np.full(cap, -1, np.int64),
        "command": np.full(cap, -1, np.int64),
        "writes": np.zeros(cap, np.int64),
    }
    pv, pc, pa = 0, 0, 0
    for t in range(n):
        i = int(sig["cmd"][t])
        op, arg, st_ = ops[i], args[i], Status(int(sig["status"][t]))
        v, c, a, w = int(valid[t]), int(curr[t]), int(ahead[t]), int(sig["write_pos"][t])
        moved = (v, c, a) != (pv, pc, pa)
        if w >= 0:
            assert st_ is Status.OK and op in (Op.SPECULATE, Op.INGEST), f"cycle {t}: write by {op.name}"
            assert w == pa, f"cycle {t}: KV write at {w}, ahead was {pa}"
            assert w >= pv, f"cycle {t}: position {w} below valid={pv} written"
            tags["writer"][w] = SPEC_WRITER[Mux(int(sig["mux"][t]))]
            tags["cycle"][w] = t
            tags["command"][w] = i
            tags["writes"][w] += 1
        if st_ is not Status.OK or op is Op.WAIT:
            assert not moved, f"cycle {t}: {op.name} (status {st_.name}) moved a register"
        elif op is Op.SPECULATE:
            assert (v, c, a) == ((pv, pc, pa + 1) if w >= 0 else (pv, pc, pa)), f"cycle {t}: speculate"
        elif op is Op.INGEST:
            assert (v, c, a) == ((pv + 1, pc + 1, pa + 1) if w >= 0 else (pv, pc, pa)), f"cycle {t}: ingest"
        elif moved:
            expected = {
                Op.INIT: (arg, arg, arg),
                Op.MARK: (pv, pa, pa),
                Op.ACCEPT: (pc, pa, pa),
                Op.ROLLBACK: (pv, pv, pv),
            }[op]
            assert (v, c, a) == expected, f"cycle {t}: {op.name} moved registers to {(v, c, a)}"
        pv, pc, pa = v, c, a
    return tags


# ---------------------------------------------------------------------------------------------------------------
STATS: dict[str, Counter[tuple[Op, Status]]] = defaultdict(Counter)
COSTS = st.builds(
    CycleCosts,
    init_cycles=st.integers(1, 3),
    speculate_cycles_per_token=st.integers(1, 3),
    mark_cycles=st.integers(1, 2),
    accept_cycles=st.integers(1, 3),
    rollback_cycles=st.integers(1, 2),
    ingest_cycles_per_token=st.integers(1, 3),
)


class KvmuMachine(RuleBasedStateMachine):
    """Random command sequences against the face; the spec, invariants and the kernel watch."""

    face_class: type[Kvmu] = Kvmu

    @initialize(capacity=st.one_of(st.integers(16, 48), st.integers(1, 4)), costs=COSTS)
    def setup(self, capacity: int, costs: CycleCosts) -> None:
        self.kv = self.face_class(capacity, costs, record=True)
        self.spec = SpecKvmu(capacity, costs)
        self.ops: list[Op] = []
        self.args: list[int] = []

    def _issue(self, op: Op, arg: int, call: Any) -> None:
        self.clean = False  # until every check below has passed (teardown must not mask a rule's failure)
        kv, spec = self.kv, self.spec
        text = f"{op.name.lower()} {arg}" if op in (Op.INIT, Op.SPECULATE, Op.INGEST, Op.WAIT) else op.name.lower()
        floor = kv.valid
        below = [a[:floor].copy() for a in (kv.memory.writer, kv.memory.cycle, kv.memory.command, kv.memory.writes)]
        expected = spec.step(op, arg)
        self.ops.append(op)
        self.args.append(arg)
        try:
            call()
            got = Status.OK
        except CommandRefused as exc:
            got = exc.status
            assert exc.op is op and str(exc).startswith(text), f"{text}: refusal names {exc.op}: {exc}"
        STATS[type(self).__name__][(op, got)] += 1
        assert got is expected, f"{text}: face status {got.name}, the spec says {expected.name}"
        for name in ("valid", "curr", "ahead", "mode", "cycle", "n_commands"):
            assert getattr(kv, name) == getattr(spec, name), (
                f"{text}: {name} = {getattr(kv, name)}, the spec says {getattr(spec, name)}"
            )
        after = (kv.memory.writer, kv.memory.cycle, kv.memory.command, kv.memory.writes)
        for tag_before, tag_after in zip(below, after):
            assert np.array_equal(tag_before, tag_after[:floor]), f"{text}: a position below valid={floor} written"
        for mine, theirs, what in zip(
            after,
            (spec.writer, spec.write_cycle, spec.write_cmd, spec.writes),
            ("writer", "cycle", "command", "writes"),
        ):
            bad = np.flatnonzero(mine != theirs)
            assert bad.size == 0, f"{text}: KV {what} tags differ from the spec at positions {bad.tolist()}"
        self.clean = True

    def _count(self, data: st.DataObject) -> int:
        """Mostly a count that fits (1..4 tokens, within the room left); sometimes anything, refusals included."""
        room = self.kv.capacity - self.kv.ahead
        if room >= 1 and data.draw(st.sampled_from([True, True, True, False]), label="fits"):
            return data.draw(st.integers(1, min(4, room)), label="n")
        return data.draw(st.integers(-2, self.kv.capacity + 3), label="n")

    @rule(data=st.data())
    def init(self, data: st.DataObject) -> None:
        # mostly a start or a backtrack at or below the frontier; sometimes anywhere, out of range included
        cap = self.kv.capacity
        pos = data.draw(st.one_of(st.integers(0, self.kv.ahead), st.integers(-2, cap + 2)), label="pos")
        self._issue(Op.INIT, pos, lambda: self.kv.init(pos))

    @rule(data=st.data())
    def speculate(self, data: st.DataObject) -> None:
        n = self._count(data)

        def call() -> None:
            written = self.kv.speculate(n)
            assert written == range(self.kv.ahead - n, self.kv.ahead), "speculate returned the wrong positions"

        self._issue(Op.SPECULATE, n, call)

    @rule(data=st.data())
    def ingest(self, data: st.DataObject) -> None:
        n = self._count(data)

        def call() -> None:
            written = self.kv.ingest(n)
            assert written == range(self.kv.ahead - n, self.kv.ahead), "ingest returned the wrong positions"

        self._issue(Op.INGEST, n, call)

    @rule(n=st.sampled_from([1, 2, 3, 1, 2, 3, 0, -1]))
    def wait(self, n: int) -> None:
        self._issue(Op.WAIT, n, lambda: self.kv.idle(n))

    @rule(op=st.sampled_from([Op.MARK, Op.ACCEPT, Op.ROLLBACK]))
    def mark_or_verdict_anywhere(self, op: Op) -> None:
        self._issue(op, 0, {Op.MARK: self.kv.mark, Op.ACCEPT: self.kv.accept, Op.ROLLBACK: self.kv.rollback}[op])

    # mark and the verdicts again, drawn only where legal, so that long legal runs (step-ahead speculation,
    # verdicts, refinements, backtracks) are as common as refusals.
    @precondition(lambda self: hasattr(self, "kv") and self.kv.curr == self.kv.valid < self.kv.ahead)
    @rule()
    def mark(self) -> None:
        self._issue(Op.MARK, 0, self.kv.mark)

    @precondition(lambda self: hasattr(self, "kv") and self.kv.curr > self.kv.valid)
    @rule()
    def accept(self) -> None:
        self._issue(Op.ACCEPT, 0, self.kv.accept)

    @precondition(lambda self: hasattr(self, "kv") and self.kv.curr > self.kv.valid)
    @rule()
    def rollback(self) -> None:
        self._issue(Op.ROLLBACK, 0, self.kv.rollback)

    @invariant()
    def pointer_order(self) -> None:
        if hasattr(self, "kv"):
            kv = self.kv
            self.clean = False
            assert 0 <= kv.valid <= kv.curr <= kv.ahead <= kv.capacity, f"pointer order broken: {kv.state}"
            self.clean = True

    @invariant()
    def mux_follows_mode(self) -> None:
        if hasattr(self, "kv"):
            self.clean = False
            assert self.kv.mux_source is SPEC_MUX[self.kv.mode], (
                f"mux {self.kv.mux_source.name} in mode {self.kv.mode.name}"
            )
            self.clean = True

    def teardown(self) -> None:
        if not hasattr(self, "kv") or not self.ops or not getattr(self, "clean", True):
            return
        face = self.kv.trace()
        ops, args = np.array(self.ops, np.int64), np.array(self.args, np.int64)
        kernel = run_kernel(ops, args, self.kv.capacity, self.kv.costs)
        dense = kernel_per_cycle(ops, args, self.kv.capacity, self.kv.costs)
        for name in COMMAND_FIELDS:
            assert np.array_equal(face.commands[name], kernel.commands[name]), (
                f"kernel and face disagree on per-command {name}"
            )
        assert face.n_cycles == kernel.n_cycles == dense["valid"].shape[0], (
            f"kernel ran {kernel.n_cycles} cycles ({dense['valid'].shape[0]} dense), face {face.n_cycles}"
        )
        fc = face.per_cycle()
        for name in SIGNALS:
            bad = np.flatnonzero(fc[name] != dense[name])
            assert bad.size == 0, f"kernel and face disagree on {name} from cycle {bad[:1].tolist()}"
        for name in kernel.runs:
            assert np.array_equal(face.runs[name], kernel.runs[name]), f"kernel and face disagree on runs of {name}"
        tags = check_cycle_properties(face.capacity, dense, self.ops, self.args)
        mem = self.kv.memory
        for what, mine in (
            ("writer", mem.writer),
            ("cycle", mem.cycle),
            ("command", mem.command),
            ("writes", mem.writes),
        ):
            assert np.array_equal(tags[what], mine), f"the kernel's write port and the KV memory disagree on {what}"


MAIN_SETTINGS = settings(max_examples=1000, stateful_step_count=40)


def test_state_machine_1000_examples() -> None:
    STATS.pop("KvmuMachine", None)
    run_state_machine_as_test(KvmuMachine, settings=MAIN_SETTINGS)
    seen = STATS["KvmuMachine"]
    # The properties are only as strong as the sequences: every command must have run legally many times, and
    # every refusal must have been exercised.
    for op in Op:
        assert seen[(op, Status.OK)] >= 200, f"{op.name} ran legally only {seen[(op, Status.OK)]} times"
    refusals = Counter(status for (_, status), k in seen.items() for _ in range(k) if status is not Status.OK)
    for status in Status:
        if status not in (Status.OK, Status.UNKNOWN_OPCODE):
            assert refusals[status] >= 20, f"refusal {status.name} exercised {refusals[status]} times"


# ---------------------------------------------------------------------------------------------------------------
# Mutants: a deliberately broken variant of each command must be caught by the properties.
class InitKeepsCurr(Kvmu):
    def init(self, pos: int) -> None:
        curr = self._curr
        super().init(pos)
        self._curr = max(curr, pos)  # init forgets curr (except where it must rise to keep the order)


class SpeculateMovesCurr(Kvmu):
    def speculate(self, n: int = 1) -> range:
        out = super().speculate(n)
        self._curr = self._ahead  # speculate also moves curr
        return out


class AcceptForgetsCurr(Kvmu):
    def accept(self) -> None:
        curr = self._curr
        super().accept()
        self._curr = curr  # valid <- curr, but curr stays


class RollbackKeepsAhead(Kvmu):
    def rollback(self) -> None:
        ahead = self._ahead
        super().rollback()
        self._ahead = ahead  # step-ahead tokens survive the rollback


class IngestKeepsValid(Kvmu):
    def ingest(self, n: int) -> range:
        valid = self._valid
        out = super().ingest(n)
        self._valid = valid  # the target's tokens are written but not committed
        return out


class IngestFromSampler(Kvmu):
    def ingest(self, n: int) -> range:  # Kvmu.ingest without the mux check
        if n < 1:
            self._refuse(Op.INGEST, n, Status.BAD_COUNT)
        if n > self._capacity - self._ahead:
            self._refuse(Op.INGEST, n, Status.OVER_CAPACITY)
        self._begin(Op.INGEST, n, self._mode)
        written = self._tokens(n, self._costs.ingest_cycles_per_token, WRITER_PCIE, commit=True)
        self._end()
        return written


class MarkMovesValid(Kvmu):
    def mark(self) -> None:
        super().mark()
        self._valid = self._curr  # mark commits instead of submitting


class MuxStuckOnSampler(Kvmu):
    @property
    def mux_source(self) -> Mux:
        return Mux.SAMPLER


class WritePortOnCurr(Kvmu):
    def speculate(self, n: int = 1) -> range:
        curr = self._curr
        out = super().speculate(n)
        self.memory.write(slice(curr, curr + n), WRITER_SAMPLER, self.cycle - 1, self.n_commands - 1)
        return out


class IngestRewritesLastVerified(Kvmu):
    def ingest(self, n: int) -> range:
        out = super().ingest(n)
        if out.start > 0:  # an off-by-one write address: the first token also lands on the last verified slot
            self.memory.write(slice(out.start - 1, out.start), WRITER_PCIE, self.cycle - 1, self.n_commands - 1)
        return out


class CapacityOffByOne(Kvmu):
    def speculate(self, n: int = 1) -> range:
        if isinstance(n, int) and n == self.capacity - self.ahead + 1 and n >= 1:
            self._capacity += 1  # lets one token past the end
            try:
                return super().speculate(n)
            finally:
                self._capacity -= 1
        return super().speculate(n)


MUTANTS = [
    (InitKeepsCurr, r"init .*curr"),
    (SpeculateMovesCurr, r"speculate .*curr"),
    (AcceptForgetsCurr, r"accept.*curr"),
    (RollbackKeepsAhead, r"rollback.*ahead"),
    (IngestKeepsValid, r"ingest .*valid"),
    (IngestFromSampler, r"ingest .*status"),
    (MarkMovesValid, r"mark.*valid"),
    (MuxStuckOnSampler, r"mux SAMPLER in mode (INIT|ROLLBACK)"),
    (WritePortOnCurr, r"KV .*tags differ"),
    (IngestRewritesLastVerified, r"ingest .*a position below valid"),
    (CapacityOffByOne, r"speculate .*status"),
]
MUTANT_SETTINGS = settings(max_examples=1000, stateful_step_count=40, phases=[Phase.generate])


@pytest.mark.parametrize("mutant, caught_by", MUTANTS, ids=[m.__name__ for m, _ in MUTANTS])
def test_mutant_is_caught(mutant: type[Kvmu], caught_by: str) -> None:
    machine = type(f"Machine_{mutant.__name__}", (KvmuMachine,), {"face_class": mutant})
    with pytest.raises(AssertionError, match=caught_by):
        run_state_machine_as_test(machine, settings=MUTANT_SETTINGS)


def test_kernel_mutant_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel whose accept forgets curr disagrees with the face. The command pass runs as plain Python from the
    kernel's own source (``py_func``) with the broken transition; the compiled cycle passes expand its output."""
    original = kvmu_kernel._transition.py_func

    def broken(op: int, arg: int, cap: int, v: int, c: int, a: int, m: int) -> tuple[int, int, int, int, int]:
        st_, v2, c2, a2, m2 = original(op, arg, cap, v, c, a, m)
        if op == int(Op.ACCEPT) and st_ == int(Status.OK):
            c2 = c
        return st_, v2, c2, a2, m2

    monkeypatch.setattr(kvmu_kernel, "_transition", broken)
    monkeypatch.setattr(kvmu_kernel, "kvmu_commands", kvmu_kernel.kvmu_commands.py_func)
    machine = type("Machine_KernelAcceptForgetsCurr", (KvmuMachine,), {})
    with pytest.raises(AssertionError, match=r"kernel and face disagree"):
        run_state_machine_as_test(machine, settings=MUTANT_SETTINGS)
