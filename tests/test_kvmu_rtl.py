"""The KVMU RTL flow: the reference Verilog (fpga/kvmu/rtl/kvmu.v) passes `hwmodel kvmu verify` on 1,000 hypothesis
examples, every RTL mutant (one per model mutant of tests/test_kvmu_properties.py) fails it with a shrunk
counterexample that the reference passes, the examples cover the transition table, and without a simulator the
tests skip and the command says what to install.

Needs Icarus Verilog and cocotb (`.ci/run` installs iverilog; cocotb is in the dev extra); the tests that drive a
simulator skip with the reason when either is missing."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from fpga.kvmu.codes import Op, Status
from fpga.kvmu.verify.contract import UNKNOWN_OP, BusCommand, Example, compare, schedule
from fpga.kvmu.verify.mutants import MUTANTS, REFERENCE_RTL, write_mutants
from fpga.kvmu.verify.session import missing_tool
from fpga.kvmu.verify.streams import draw
from hwmodel.cli import main

MISSING = missing_tool("icarus")
needs_sim = pytest.mark.skipif(MISSING is not None, reason=f"no RTL simulator: {MISSING}")

#: The signal each mutant's counterexample must first differ on (what the bug breaks first).
FIRST_SIGNAL = {
    "init_keeps_curr": "curr_ptr",
    "speculate_moves_curr": "curr_ptr",
    "accept_forgets_curr": "curr_ptr",
    "rollback_keeps_ahead": "ahead_ptr",
    "ingest_keeps_valid": "valid_ptr",
    "ingest_from_sampler": "status",
    "mark_moves_valid": "valid_ptr",
    "mux_stuck_on_sampler": "mux_sel",
    "write_port_on_curr": "kv_wr_addr",
    "ingest_rewrites_last_verified": "kv_wr_addr",
    "capacity_off_by_one": "cmd_ready",
    "accept_curr_lands_late": "curr_ptr",
}


def test_examples_cover_the_table() -> None:
    """Over the 1,000 default examples: every legal command in every mode it can run in, every refusal (the
    unknown opcode too), every pointer relation with ahead at and below the capacity, counts that fill the room
    exactly and pass it by one, resets in every mode and inside every multi-cycle command; capacities at both
    ends of the range and at power-of-two edges; waits both as idle bus cycles and as opcode 6; long streams."""
    from fpga.kvmu.verify.coverage import Coverage

    exs = draw(1000, 0)
    assert len(exs) == 1000
    cov = Coverage()
    for ex in exs:
        cov.add(ex)
    for group in ("legal", "refusal", "pointers", "reset"):
        empty = [b for b, n in cov.hits[group].items() if n == 0]
        assert not empty, f"{group}: {empty}"
    assert min(cov.hits["refusal"].values()) >= 20
    assert cov.percent >= 80, cov.summary()
    caps = [ex.capacity for ex in exs]
    assert min(caps) == 1 and max(caps) == 2**31 - 1
    assert sum(c in (2**k - 1, 2**k, 2**k + 1) for c in caps for k in range(9, 31)) >= 50
    waits = [c for ex in exs for c in ex.commands if c.op == Op.WAIT and c.arg >= 1]
    assert sum(c.idle for c in waits) >= 50 and sum(not c.idle for c in waits) >= 50
    assert sum(len(ex.commands) >= 30 for ex in exs) >= 100


def test_runs_cross_every_power_of_two() -> None:
    """Counts of 2**k - 1, 2**k and 2**k + 1 for every k up to MAX_RUN_LOG appear among 1,000 examples (for
    speculate, ingest and wait together), and so do resets inside runs."""
    from fpga.kvmu.verify.contract import RESET_OP
    from fpga.kvmu.verify.streams import MAX_RUN_LOG

    exs = draw(1000, 0)
    counts = {c.arg for ex in exs for c in ex.commands if c.op in (Op.SPECULATE, Op.INGEST, Op.WAIT)}
    for k in range(2, MAX_RUN_LOG + 1):
        assert {2**k - 1, 2**k, 2**k + 1} & counts, k
        assert 2**k + 1 in counts or 2**k + 1 > 2**MAX_RUN_LOG, k
    assert sum(c.op == RESET_OP for ex in exs for c in ex.commands) >= 300


def test_schedule_follows_the_model_cycles() -> None:
    """The stimulus starts with two reset edges, holds the next command on the bus while one is busy, drives
    idle waits with cmd_valid low, and expects cmd_ready low exactly on the non-first cycles of bus commands."""
    ex = Example(
        8,
        (
            BusCommand(int(Op.SPECULATE), 3),
            BusCommand(int(Op.MARK)),
            BusCommand(int(Op.WAIT), 2, True),
            BusCommand(int(Op.WAIT), 2),
            BusCommand(UNKNOWN_OP, 5),
        ),
    )
    sch = schedule(ex)
    stim = sch.stimulus
    assert [(int(w) >> 36) & 1 for w in stim] == [1, 1] + [0] * 9  # rst
    stim = stim[2:]
    valid_bit = [(int(w) >> 35) & 1 for w in stim]
    op_field = [(int(w) >> 32) & 7 for w in stim]
    assert valid_bit == [1, 1, 1, 1, 0, 0, 1, 1, 1]
    assert op_field[:4] == [Op.SPECULATE, Op.MARK, Op.MARK, Op.MARK] and op_field[6:] == [Op.WAIT, 7, UNKNOWN_OP]
    assert list(sch.observe) == list(range(11))
    assert list(sch.expected["cmd_ready"]) == [1, 1, 0, 0, 1, 1, 1, 1, 0, 1, 1]
    assert list(sch.expected["kv_wr_addr"][2:5]) == [0, 1, 2]
    assert list(sch.expected["status"][-1:]) == [int(Status.UNKNOWN_OPCODE)]
    # a perfect observation matches; one flipped bit is reported at its cycle and signal
    from fpga.kvmu.verify.contract import OUT_BITS, OUTPUTS

    def word(row: int) -> str:
        v, shift = 0, 0
        for name, width in OUTPUTS:
            want = int(sch.expected[name][row])
            v |= (max(want, 0) & ((1 << width) - 1)) << shift
            shift += width
        return format(v, f"0{OUT_BITS}b")

    rows = [word(r) for r in range(len(sch.observe))]
    assert compare(sch, rows) is None
    bad = list(rows)
    bad[4] = bad[4][:-1] + ("1" if bad[4][-1] == "0" else "0")  # valid_ptr bit 0 in model cycle 2
    mm = compare(sch, bad)
    assert (mm.cycle, mm.signal, mm.command) == (2, "valid_ptr", 0)
    xs = list(rows)
    xs[1] = "x" * OUT_BITS
    assert compare(sch, xs).signal == "cmd_ready" and compare(sch, xs).rtl == "x"


def test_schedule_of_resets_and_long_runs() -> None:
    """A reset inside a run cuts it: the reset edge expects the reset state, the next segment restarts from it;
    a long run is observed sparsely (edges, powers of two, evenly spaced samples), not in every cycle."""
    from fpga.kvmu.verify.contract import RESET_OP

    S, W = int(Op.SPECULATE), int(Op.WAIT)
    ex = Example(
        10**6, (BusCommand(S, 30), BusCommand(RESET_OP, 10), BusCommand(S, 2**16 + 1), BusCommand(W, 5000, True))
    )
    sch = schedule(ex)
    assert sch.n_rows == 2 + 10 + 1 + 2**16 + 1 + 5000
    assert 100 < len(sch.observe) < 600
    reset_rows = np.flatnonzero(sch.cycle < 0)
    assert list(sch.observe[reset_rows]) == [0, 1, 12]
    assert sch.expected["ahead_ptr"][reset_rows[-1] - 1] == 10 and sch.expected["ahead_ptr"][reset_rows[-1]] == 0
    seg2 = sch.segment == 1
    assert set(sch.cycle[seg2 & (sch.cycle >= 0)].tolist()) >= {0, 1, 2, 2**16 - 1, 2**16, 2**16 + 1}
    assert sch.expected["ahead_ptr"][-1] == 2**16 + 1 and int(sch.cmd[-1]) == 3


def test_mutants_are_single_edits_of_the_reference(tmp_path: Path) -> None:
    paths = write_mutants(tmp_path)
    ref = REFERENCE_RTL.read_text()
    assert len(MUTANTS) == 12 and len({m.name for m in MUTANTS}) == 12
    for m in MUTANTS:
        src = paths[m.name].read_text()
        assert src != ref and "module kvmu" in src
        assert m.name in FIRST_SIGNAL


def test_missing_simulator_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    why = missing_tool("icarus")
    assert why is not None and "apt-get install iverilog" in why
    assert "apt-get install verilator" in missing_tool("verilator")
    res = CliRunner().invoke(main, ["kvmu", "verify", "--rtl", str(REFERENCE_RTL), "--top", "kvmu"])
    assert res.exit_code == 2
    assert res.output.strip().count("\n") == 0 and "apt-get install iverilog" in res.output


# ---------------------------------------------------------------------------------------------------------------
# With a simulator
@pytest.fixture(scope="module")
def reference_session():  # type: ignore[no-untyped-def]
    if MISSING is not None:
        pytest.skip(f"no RTL simulator: {MISSING}")
    from fpga.kvmu.verify.session import RtlSession

    with RtlSession([REFERENCE_RTL], "kvmu") as s:
        yield s


@needs_sim
def test_reference_rtl_passes() -> None:
    # 300 of the default 1,000 examples: the long runs of the generator (up to 2**16 + 1 cycles) make the full
    # default run cost about a minute of CPU, too much for the test suite; `.ci/run`'s campaign sample and
    # docs/kvmu.md record the full default run
    res = CliRunner().invoke(
        main, ["kvmu", "verify", "--rtl", str(REFERENCE_RTL), "--top", "kvmu", "--examples", "300"]
    )
    assert res.exit_code == 0, res.output
    assert "PASS kvmu: 300 of 300 examples passed" in res.output
    assert re.search(r"coverage \d+\.\d% of \d+ bins over 300 examples", res.output), res.output


@needs_sim
@pytest.mark.parametrize("name", [m.name for m in MUTANTS])
def test_rtl_mutant_is_caught(name: str, tmp_path: Path, reference_session) -> None:  # type: ignore[no-untyped-def]
    from fpga.kvmu.verify.verify import verify

    rtl = write_mutants(tmp_path / "rtl")[name]
    result = verify([rtl], "kvmu", out_dir=tmp_path / "out")
    assert not result.passed
    assert result.example is not None and result.mismatch is not None
    assert len(result.example.commands) <= 5, result.example.command_file()  # shrunk
    assert result.mismatch.signal == FIRST_SIGNAL[name], result.message()
    # the counterexample is the mutant's bug, not the testbench's: the reference RTL passes it
    sched, observed = reference_session.run(result.example)
    assert compare(sched, observed) is None
    text = (tmp_path / "out" / "counterexample.txt").read_text()
    assert result.example.command_file() in text and "first difference" in text
    for vcd in ("model.vcd", "rtl.vcd"):
        assert "$enddefinitions" in (tmp_path / "out" / vcd).read_text()


@needs_sim
def test_cli_failure_report_and_determinism(tmp_path: Path) -> None:
    rtl = write_mutants(tmp_path)["speculate_moves_curr"]
    outs = []
    for run in ("a", "b"):
        res = CliRunner().invoke(
            main, ["kvmu", "verify", "--rtl", str(rtl), "--top", "kvmu", "--seed", "7", "--out", str(tmp_path / run)]
        )
        assert res.exit_code == 1, res.output
        outs.append(res.output.replace(str(tmp_path / run), "OUT"))
    assert outs[0] == outs[1]
    assert re.search(
        r"FAIL kvmu: first difference at cycle \d+ \(command \d+: speculate \d+\): curr_ptr RTL=\d+ "
        r"model=\d+",
        outs[0],
    ), outs[0]
    assert "shrunk counterexample (command file):" in outs[0] and "OUT/rtl.vcd" in outs[0]
    # the counterexample file runs in `hwmodel kvmu trace`
    res = CliRunner().invoke(main, ["kvmu", "trace", str(tmp_path / "a" / "counterexample.txt"), "--keep-going"])
    assert res.exit_code == 0, res.output


@needs_sim
def test_bad_rtl_is_one_line_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.v"
    bad.write_text("module kvmu(input clk); wire x = ; endmodule\n")
    res = CliRunner().invoke(main, ["kvmu", "verify", "--rtl", str(bad), "--top", "kvmu"])
    assert res.exit_code == 2 and "build failed" in res.output and str(bad) in res.output
    assert res.output.strip().count("\n") == 0
    res = CliRunner().invoke(main, ["kvmu", "verify", "--rtl", str(REFERENCE_RTL), "--top", "no_such"])
    assert res.exit_code == 2 and "build failed" in res.output
    res = CliRunner().invoke(main, ["kvmu", "verify", "--rtl", str(tmp_path / "missing.v"), "--top", "kvmu"])
    assert res.exit_code == 2 and "no such RTL file" in res.output
