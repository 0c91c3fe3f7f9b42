"""The KVMU RTL flow: the reference Verilog (fpga/rtl/kvmu.v) passes `hwmodel kvmu verify` on 1,000 hypothesis
examples, every RTL mutant (one per model mutant of tests/test_kvmu_properties.py) fails it with a shrunk
counterexample that the reference passes, the examples cover the transition table, and without a simulator the
tests skip and the command says what to install.

Needs Icarus Verilog and cocotb (`.ci/run` installs iverilog; cocotb is in the dev extra); the tests that drive a
simulator skip with the reason when either is missing."""
from __future__ import annotations

import re
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from fpga.kvmu_codes import Op, Status
from fpga.kvmu_verify.contract import UNKNOWN_OP, BusCommand, Example, compare, model_trace, schedule
from fpga.kvmu_verify.mutants import MUTANTS, REFERENCE_RTL, write_mutants
from fpga.kvmu_verify.session import missing_tool
from fpga.kvmu_verify.streams import draw
from hwmodel.cli import main

MISSING = missing_tool("icarus")
needs_sim = pytest.mark.skipif(MISSING is not None, reason=f"no RTL simulator: {MISSING}")

#: The signal each mutant's counterexample must first differ on (what the bug breaks first).
FIRST_SIGNAL = {
    "init_keeps_curr": "curr_ptr", "speculate_moves_curr": "curr_ptr", "accept_forgets_curr": "curr_ptr",
    "rollback_keeps_ahead": "ahead_ptr", "ingest_keeps_valid": "valid_ptr", "ingest_from_sampler": "status",
    "mark_moves_valid": "valid_ptr", "mux_stuck_on_sampler": "mux_sel", "write_port_on_curr": "kv_wr_addr",
    "ingest_rewrites_last_verified": "kv_wr_addr", "capacity_off_by_one": "cmd_ready",
    "accept_curr_lands_late": "curr_ptr",
}


def test_examples_cover_the_table() -> None:
    """Over the 1,000 default examples: every command runs legally often, every refusal occurs (the unknown
    opcode too), capacities sit at both ends, counts fill the capacity exactly and pass it by one, and waits go
    both as idle bus cycles and as opcode 6."""
    exs = draw(1000, 0)
    assert len(exs) == 1000
    legal: Counter[int] = Counter()
    refused: Counter[int] = Counter()
    fill = over_by_one = idle = on_bus = 0
    caps = [ex.capacity for ex in exs]
    for ex in exs:
        tr = model_trace(ex)
        ahead_before = np.concatenate([[0], tr.commands["ahead"][:-1]]) if len(ex.commands) else []
        for i, c in enumerate(ex.commands):
            st = int(tr.commands["status"][i])
            (legal if st == Status.OK else refused)[c.op if st == Status.OK else st] += 1
            if c.op in (Op.SPECULATE, Op.INGEST) and st == Status.OK and tr.commands["ahead"][i] == ex.capacity:
                fill += 1
            if (c.op in (Op.SPECULATE, Op.INGEST) and st == Status.OVER_CAPACITY
                    and c.arg == ex.capacity - int(ahead_before[i]) + 1):
                over_by_one += 1
            if c.op == Op.WAIT and c.arg >= 1:
                idle += c.idle
                on_bus += not c.idle
    for op in Op:
        assert legal[int(op)] >= 100, f"{op.name} ran legally {legal[int(op)]} times"
    for st in Status:
        if st is not Status.OK:
            assert refused[int(st)] >= 20, f"refusal {st.name} occurred {refused[int(st)]} times"
    assert fill >= 50 and over_by_one >= 50
    assert idle >= 50 and on_bus >= 50
    assert min(caps) == 1 and max(caps) == 2**31 - 1
    assert sum(len(ex.commands) >= 30 for ex in exs) >= 100


def test_schedule_follows_the_model_cycles() -> None:
    """The stimulus holds the next command on the bus while one is busy, drives idle waits with cmd_valid low,
    and expects cmd_ready low exactly on the non-first cycles of bus commands."""
    ex = Example(8, (BusCommand(int(Op.SPECULATE), 3), BusCommand(int(Op.MARK)), BusCommand(int(Op.WAIT), 2, True),
                     BusCommand(int(Op.WAIT), 2), BusCommand(UNKNOWN_OP, 5)))
    sch = schedule(ex)
    valid_bit = [(int(w) >> 35) & 1 for w in sch.stimulus]
    op_field = [(int(w) >> 32) & 7 for w in sch.stimulus]
    assert valid_bit == [1, 1, 1, 1, 0, 0, 1, 1, 1]
    assert op_field[:4] == [Op.SPECULATE, Op.MARK, Op.MARK, Op.MARK] and op_field[6:] == [Op.WAIT, 7, UNKNOWN_OP]
    assert list(sch.expected["cmd_ready"]) == [1, 0, 0, 1, 1, 1, 1, 0, 1, 1]
    assert list(sch.expected["kv_wr_addr"][1:4]) == [0, 1, 2]
    assert list(sch.expected["status"][-1:]) == [int(Status.UNKNOWN_OPCODE)]
    # a perfect observation matches; one flipped bit is reported at its cycle and signal
    from fpga.kvmu_verify.contract import OUT_BITS, OUTPUTS

    def word(row: int) -> str:
        v, shift = 0, 0
        for name, width in OUTPUTS:
            want = int(sch.expected[name][row])
            v |= (max(want, 0) & ((1 << width) - 1)) << shift
            shift += width
        return format(v, f"0{OUT_BITS}b")

    rows = [word(r) for r in range(len(sch.expected["valid_ptr"]))]
    assert compare(sch, rows) is None
    bad = list(rows)
    bad[3] = bad[3][:-1] + ("1" if bad[3][-1] == "0" else "0")  # valid_ptr bit 0 in model cycle 2
    mm = compare(sch, bad)
    assert (mm.cycle, mm.signal, mm.command) == (2, "valid_ptr", 0)
    xs = list(rows)
    xs[1] = "x" * OUT_BITS
    assert compare(sch, xs).signal == "cmd_ready" and compare(sch, xs).rtl == "x"


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
    from fpga.kvmu_verify.session import RtlSession

    with RtlSession([REFERENCE_RTL], "kvmu") as s:
        yield s


@needs_sim
def test_reference_rtl_passes_1000_examples() -> None:
    res = CliRunner().invoke(main, ["kvmu", "verify", "--rtl", str(REFERENCE_RTL), "--top", "kvmu"])
    assert res.exit_code == 0, res.output
    assert "PASS kvmu: 1000 of 1000 examples passed" in res.output


@needs_sim
@pytest.mark.parametrize("name", [m.name for m in MUTANTS])
def test_rtl_mutant_is_caught(name: str, tmp_path: Path, reference_session) -> None:  # type: ignore[no-untyped-def]
    from fpga.kvmu_verify.verify import verify

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
        res = CliRunner().invoke(main, ["kvmu", "verify", "--rtl", str(rtl), "--top", "kvmu", "--seed", "7",
                                        "--out", str(tmp_path / run)])
        assert res.exit_code == 1, res.output
        outs.append(res.output.replace(str(tmp_path / run), "OUT"))
    assert outs[0] == outs[1]
    assert re.search(r"FAIL kvmu: first difference at cycle \d+ \(command \d+: speculate \d+\): curr_ptr RTL=\d+ "
                     r"model=\d+", outs[0]), outs[0]
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
