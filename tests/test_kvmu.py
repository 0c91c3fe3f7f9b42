"""The KVMU's Python face and kernel on written scenarios: each command's effect, refusals and their messages,
argument checks, the KV memory tags, cycle costs, recording on/off, and the kernel at the edges of int64."""

from __future__ import annotations

import numpy as np
import pytest

from fpga.kvmu.codes import WRITER_NONE, WRITER_PCIE, WRITER_SAMPLER
from fpga.kvmu.model import (
    Command,
    CommandRefused,
    CycleCosts,
    Kvmu,
    KvmuError,
    KvmuState,
    Mode,
    Mux,
    Op,
    Status,
    kernel_per_cycle,
    run_commands,
    run_kernel,
)
from hwmodel.errors import HwmodelError


def regs(kv: Kvmu) -> tuple[int, int, int, Mode, Mux]:
    return kv.valid, kv.curr, kv.ahead, kv.mode, kv.mux_source


def test_reset_is_init_zero() -> None:
    kv = Kvmu(16)
    assert regs(kv) == (0, 0, 0, Mode.INIT, Mux.PCIE)
    assert kv.cycle == 0 and kv.capacity == 16


def test_step_ahead_speculation_accept_reject_backtrack() -> None:
    """The reasoning flow of MISSION.md, command by command."""
    kv = Kvmu(64)
    kv.init(8)  # prompt KV migrated
    assert regs(kv) == (8, 8, 8, Mode.INIT, Mux.PCIE)
    assert kv.speculate(5) == range(8, 13)  # step 1
    assert regs(kv) == (8, 8, 13, Mode.SPECULATE, Mux.SAMPLER)
    kv.mark()  # step 1 submitted
    assert regs(kv) == (8, 13, 13, Mode.SPECULATE, Mux.SAMPLER)
    kv.speculate(4)  # step 2, step-ahead
    assert regs(kv) == (8, 13, 17, Mode.SPECULATE, Mux.SAMPLER)
    kv.accept()  # step 1 accepted, step 2 submitted
    assert regs(kv) == (13, 17, 17, Mode.ACCEPT, Mux.SAMPLER)
    kv.speculate(3)  # step 3, step-ahead
    kv.rollback()  # step 2 rejected: step 3 dropped with it
    assert regs(kv) == (13, 13, 13, Mode.ROLLBACK, Mux.PCIE)
    assert kv.ingest(4) == range(13, 17)  # the target's refined step 2
    assert regs(kv) == (17, 17, 17, Mode.ROLLBACK, Mux.PCIE)
    kv.speculate(2)
    kv.mark()
    kv.init(13)  # backtrack below valid
    assert regs(kv) == (13, 13, 13, Mode.INIT, Mux.PCIE)
    kv.ingest(1)
    assert regs(kv) == (14, 14, 14, Mode.INIT, Mux.PCIE)


def test_accept_without_step_ahead_leaves_nothing_pending() -> None:
    kv = Kvmu(10)
    kv.speculate(3)
    kv.mark()
    kv.accept()
    assert regs(kv)[:3] == (3, 3, 3)
    with pytest.raises(CommandRefused) as exc:
        kv.accept()
    assert exc.value.status is Status.NOTHING_TO_VERIFY


@pytest.mark.parametrize(
    "setup, call, status, words",
    [
        ([], lambda kv: kv.accept(), Status.NOTHING_TO_VERIFY, "submit a drafted step with `mark`"),
        ([], lambda kv: kv.rollback(), Status.NOTHING_TO_VERIFY, "no step is under verification"),
        ([], lambda kv: kv.speculate(11), Status.OVER_CAPACITY, "would pass the capacity 10"),
        ([], lambda kv: kv.speculate(0), Status.BAD_COUNT, "integer >= 1, got 0"),
        ([], lambda kv: kv.speculate(-3), Status.BAD_COUNT, "got -3"),
        ([], lambda kv: kv.init(11), Status.INIT_OUT_OF_RANGE, "in 0..10"),
        ([], lambda kv: kv.init(-1), Status.INIT_OUT_OF_RANGE, "got -1"),
        ([], lambda kv: kv.ingest(-1), Status.BAD_COUNT, "got -1"),
        ([], lambda kv: kv.ingest(11), Status.OVER_CAPACITY, "room for 10"),
        ([], lambda kv: kv.mark(), Status.EMPTY_STEP, "no drafted token"),
        ([], lambda kv: kv.idle(0), Status.BAD_COUNT, "got 0"),
        ([("speculate", 2)], lambda kv: kv.ingest(1), Status.MUX_NOT_PCIE, "selects the local sampler"),
        (
            [("speculate", 2), ("mark", None), ("speculate", 1)],
            lambda kv: kv.mark(),
            Status.STEP_PENDING,
            "already under verification",
        ),
        (
            [("speculate", 2), ("mark", None), ("accept", None)],
            lambda kv: kv.ingest(1),
            Status.MUX_NOT_PCIE,
            "init or rollback mode",
        ),
    ],
)
def test_refusals_change_nothing_but_the_cycle(setup: list, call, status: Status, words: str) -> None:
    kv = Kvmu(10)
    for name, arg in setup:
        getattr(kv, name)(*(() if arg is None else (arg,)))
    before, cycle, tags = kv.state, kv.cycle, kv.memory.writer.copy()
    with pytest.raises(CommandRefused) as exc:
        call(kv)
    assert exc.value.status is status
    msg = str(exc.value)
    assert words in msg and "\n" not in msg and f"({status.name.lower()})" in msg
    assert isinstance(exc.value, HwmodelError)
    assert kv.state == before and kv.cycle == cycle + 1
    assert np.array_equal(kv.memory.writer, tags)


@pytest.mark.parametrize(
    "call",
    [
        lambda kv: kv.speculate(2.0),
        lambda kv: kv.speculate(True),
        lambda kv: kv.init("3"),
        lambda kv: kv.ingest(None),
        lambda kv: kv.idle(1.5),
    ],
)
def test_non_integer_arguments_are_rejected_without_a_cycle(call) -> None:
    kv = Kvmu(10)
    with pytest.raises(KvmuError, match="must be an integer") as exc:
        call(kv)
    assert not isinstance(exc.value, CommandRefused)
    assert kv.cycle == 0 and kv.state == KvmuState(0, 0, 0, Mode.INIT)


def test_numpy_integers_are_accepted() -> None:
    kv = Kvmu(np.int64(10))
    kv.init(np.int32(2))
    kv.speculate(np.int64(3))
    assert regs(kv)[:3] == (2, 2, 5)


@pytest.mark.parametrize("capacity", [0, -1, 2**31, 3.0])
def test_bad_capacity(capacity) -> None:
    with pytest.raises(KvmuError, match="capacity"):
        Kvmu(capacity)


def test_bad_costs() -> None:
    with pytest.raises(KvmuError, match="speculate_cycles_per_token must be in 1.."):
        CycleCosts(speculate_cycles_per_token=0)
    with pytest.raises(KvmuError, match="no cycle cost for command 'wait'"):
        CycleCosts.from_overrides({"wait": 2})
    assert CycleCosts.from_overrides({"speculate": 4}).speculate_cycles_per_token == 4


def test_memory_tags_who_and_when() -> None:
    costs = CycleCosts(speculate_cycles_per_token=3, ingest_cycles_per_token=2, init_cycles=2)
    kv = Kvmu(12, costs)
    kv.init(2)  # cycles 0-1, command 0
    kv.speculate(2)  # cycles 2-7, writes land at 4 and 7, command 1
    mem = kv.memory
    assert mem.writer[2:4].tolist() == [WRITER_SAMPLER] * 2
    assert mem.cycle[2:4].tolist() == [4, 7] and mem.command[2:4].tolist() == [1, 1]
    assert mem.writer[4:].tolist() == [WRITER_NONE] * 8 and mem.writer[:2].tolist() == [WRITER_NONE] * 2
    kv.mark()  # cycle 8
    kv.rollback()  # cycle 9: pointers move, the tags stay (no data copy)
    assert mem.writer[2:4].tolist() == [WRITER_SAMPLER] * 2
    kv.ingest(3)  # cycles 10-15, writes at 11, 13, 15 overwrite 2, 3 and write 4
    assert mem.writer[2:5].tolist() == [WRITER_PCIE] * 3
    assert mem.cycle[2:5].tolist() == [11, 13, 15] and mem.writes[2:5].tolist() == [2, 2, 1]
    assert kv.cycle == 16


def _random_legal_program(rng: np.random.Generator, capacity: int, n: int) -> list[Command]:
    """A reasoning-like legal command stream (the face decides legality as it goes)."""
    kv = Kvmu(capacity)
    out: list[Command] = []
    while len(out) < n:
        choice = int(rng.integers(0, 7))
        cmd = [
            Command(Op.SPECULATE, int(rng.integers(1, 5))),
            Command(Op.MARK),
            Command(Op.ACCEPT),
            Command(Op.ROLLBACK),
            Command(Op.INGEST, int(rng.integers(1, 4))),
            Command(Op.INIT, int(rng.integers(0, kv.ahead + 1))),
            Command(Op.WAIT, 2),
        ][choice]
        try:
            kv.apply(cmd)
        except CommandRefused:
            continue
        out.append(cmd)
    return out


def test_recording_does_not_change_the_model() -> None:
    rng = np.random.default_rng(7)
    costs = CycleCosts(speculate_cycles_per_token=2, accept_cycles=3)
    program = _random_legal_program(rng, 200, 400)
    fast, slow = Kvmu(200, costs), Kvmu(200, costs, record=True)
    fast.run(program)
    slow.run(program)
    assert fast.state == slow.state and fast.cycle == slow.cycle
    for name in ("writer", "cycle", "command", "writes"):
        assert np.array_equal(getattr(fast.memory, name), getattr(slow.memory, name)), name
    with pytest.raises(KvmuError, match="record=True"):
        fast.trace()


def test_without_tags_the_registers_cycles_refusals_and_trace_are_the_same() -> None:
    """tags=False (the system-A replay's KVMU) keeps no write tags and changes nothing else."""
    rng = np.random.default_rng(5)
    costs = CycleCosts(speculate_cycles_per_token=2, ingest_cycles_per_token=3)
    program = _random_legal_program(rng, 64, 300)
    for record in (False, True):
        tagged, bare = Kvmu(64, costs, record=record), Kvmu(64, costs, record=record, tags=False)
        tagged.run(program)
        bare.run(program)
        assert bare.memory is None
        assert (bare.state, bare.cycle) == (tagged.state, tagged.cycle)
        said = []
        for kv in (tagged, bare):  # a refusal: the same message, the same cycle taken
            with pytest.raises(CommandRefused) as err:
                kv.speculate(65)
            said.append(str(err.value))
        assert said[0] == said[1] and (bare.state, bare.cycle) == (tagged.state, tagged.cycle)
        if record:
            a, b = tagged.trace(), bare.trace()
            assert all(np.array_equal(a.commands[k], b.commands[k]) for k in a.commands)
            assert all(np.array_equal(a.runs[k], b.runs[k]) for k in a.runs)


def test_face_history_replays_through_the_kernel() -> None:
    rng = np.random.default_rng(11)
    costs = CycleCosts(speculate_cycles_per_token=3, ingest_cycles_per_token=2, rollback_cycles=2)
    kv = Kvmu(300, costs, record=True)
    kv.run(_random_legal_program(rng, 300, 300))
    face = kv.trace()
    kernel = run_commands(kv.history, 300, costs)
    for name in face.runs:
        assert np.array_equal(face.runs[name], kernel.runs[name]), name
    for name in face.commands:
        assert np.array_equal(face.commands[name], kernel.commands[name]), name


def test_idle_and_advance_to() -> None:
    kv = Kvmu(8, record=True)
    kv.speculate(2)
    kv.advance_to(1_000_000_000)  # a simulator placing the next command at its own time: one run, not 1e9 rows
    kv.advance_to(1_000_000_000)
    kv.mark()
    assert kv.cycle == 1_000_000_001
    trace = kv.trace()
    assert trace.n_cycles == 1_000_000_001 and len(trace.runs["start"]) == 4
    assert trace.at_cycle(999_999_999)["ahead"] == 2 and trace.at_cycle(1_000_000_000)["curr"] == 2
    with pytest.raises(KvmuError, match="already at cycle"):
        kv.advance_to(5)


def test_multi_cycle_command_switches_mode_first_and_registers_last() -> None:
    kv = Kvmu(8, CycleCosts(accept_cycles=3), record=True)
    kv.speculate(2)
    kv.mark()
    kv.speculate(1)
    kv.accept()  # cycles 4, 5, 6
    pc = kv.trace().per_cycle()
    assert pc["mode"][4:7].tolist() == [Mode.ACCEPT] * 3
    assert pc["valid"][3:7].tolist() == [0, 0, 0, 2] and pc["curr"][3:7].tolist() == [2, 2, 2, 3]


# ---- the kernel on its own
def test_kernel_extreme_arguments_are_refused_not_wrapped() -> None:
    big, small = 2**63 - 1, -(2**63)
    ops = np.array([Op.SPECULATE, Op.INGEST, Op.INIT, Op.INIT, Op.SPECULATE, Op.WAIT, Op.SPECULATE], np.int64)
    args = np.array([big, big, big, small, small, small, 3], np.int64)
    trace = run_kernel(ops, args, 5)
    assert trace.commands["status"].tolist() == [
        Status.OVER_CAPACITY,
        Status.OVER_CAPACITY,
        Status.INIT_OUT_OF_RANGE,
        Status.INIT_OUT_OF_RANGE,
        Status.BAD_COUNT,
        Status.BAD_COUNT,
        Status.OK,
    ]
    assert trace.commands["ahead"].tolist() == [0, 0, 0, 0, 0, 0, 3]
    assert trace.n_cycles == 6 + 3


def test_kernel_refuses_unknown_opcodes() -> None:
    trace = run_kernel(np.array([1, 9, -1, 257], np.int64), np.array([2, 0, 0, 0], np.int64), 8)
    assert trace.commands["status"].tolist() == [Status.OK] + [Status.UNKNOWN_OPCODE] * 3
    assert "unknown opcode 9" in trace.refusal_message(1)
    assert "unknown opcode 257" in trace.refusal_message(3)  # not wrapped to a valid opcode
    assert trace.refusals() == [1, 2, 3]


def test_kernel_starts_from_a_given_state() -> None:
    start = KvmuState(4, 6, 9, Mode.SPECULATE)
    trace = run_kernel(np.array([Op.ACCEPT], np.int64), np.array([0], np.int64), 16, initial=start)
    assert (trace.commands["valid"][0], trace.commands["curr"][0], trace.commands["ahead"][0]) == (6, 9, 9)
    with pytest.raises(KvmuError, match="initial state"):
        run_kernel(np.zeros(1, np.int64), np.zeros(1, np.int64), 16, initial=KvmuState(5, 4, 9, Mode.INIT))


def test_dense_and_run_length_kernels_agree_on_a_long_program() -> None:
    rng = np.random.default_rng(3)
    program = _random_legal_program(rng, 500, 2000)
    ops = np.array([int(c.op) for c in program], np.int64)
    args = np.array([c.arg for c in program], np.int64)
    costs = CycleCosts(speculate_cycles_per_token=2, mark_cycles=2)
    dense = kernel_per_cycle(ops, args, 500, costs)
    runs = run_kernel(ops, args, 500, costs).per_cycle()
    for name in dense:
        assert np.array_equal(dense[name], runs[name]), name


def test_dense_kernel_refuses_huge_traces() -> None:
    with pytest.raises(KvmuError, match="run_kernel"):
        kernel_per_cycle(np.array([Op.WAIT], np.int64), np.array([2**40], np.int64), 8)
    assert run_kernel(np.array([Op.WAIT], np.int64), np.array([2**40], np.int64), 8).n_cycles == 2**40


def test_cycle_counter_overflow_is_an_error() -> None:
    with pytest.raises(KvmuError, match="runs past"):
        run_kernel(np.array([Op.WAIT, Op.WAIT], np.int64), np.array([2**62, 2**62], np.int64), 8)
    with pytest.raises(KvmuError, match="does not fit in 64 bits"):
        Kvmu(8).idle(2**63)
    kv = Kvmu(8)
    kv.idle(2**62)
    with pytest.raises(KvmuError, match="runs past"):
        kv.idle(2**62)


def test_run_commands_checks_its_input() -> None:
    with pytest.raises(KvmuError, match="line 3: the argument of speculate 18446744073709551616 does not fit"):
        run_commands([Command(Op.SPECULATE, 2**64, line=3)], 8)
    with pytest.raises(KvmuError, match="expected a Command"):
        run_commands([("speculate", 1)], 8)  # type: ignore[list-item]
