"""KVMU command files, `hwmodel kvmu trace`, and the VCD it writes, read back with pyvcd."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from fpga.kvmu.model import (
    CommandFileError,
    CycleCosts,
    Op,
    load_commands,
    parse_commands,
    read_vcd,
    run_commands,
    write_vcd,
)
from fpga.kvmu.vcd import VcdError
from hwmodel.cli import main

SCENARIO = Path(__file__).resolve().parents[1] / "examples" / "kvmu" / "scenario.txt"


# ---- the command file format
def test_parse_commands_with_comments_and_capacity() -> None:
    prog = parse_commands("# hi\ncapacity 32\n\ninit 4   # start\nspeculate +3\nmark\nwait 2\n", "x.txt")
    assert prog.capacity == 32
    assert [(c.op, c.arg, c.line) for c in prog.commands] == [
        (Op.INIT, 4, 4),
        (Op.SPECULATE, 3, 5),
        (Op.MARK, 0, 6),
        (Op.WAIT, 2, 7),
    ]


@pytest.mark.parametrize(
    "text, message",
    [
        ("init 0\nspecul 3\n", "x.txt:2: unknown command 'specul'; expected one of init, speculate"),
        ("init\n", "x.txt:1: 'init' needs one integer argument (the position"),
        ("init 0\nspeculate\n", "x.txt:2: 'speculate' needs one integer argument (the number of drafted tokens)"),
        ("init 0\n\ningest 2.5\n", "x.txt:3: the argument of 'ingest' must be an integer, got '2.5'"),
        ("init 0x10\n", "x.txt:1: the argument of 'init' must be an integer, got '0x10'"),
        ("accept now\n", "x.txt:1: 'accept' takes no argument, got 'now'"),
        ("speculate 1 2\n", "x.txt:1: 'speculate' takes one argument, got 2"),
        ("init 0\ncapacity 8\n", "x.txt:2: the 'capacity' directive must come before the first command"),
        ("capacity 0\ninit 0\n", "x.txt:1: the capacity must be >= 1"),
        ("capacity 8\ncapacity 9\n", "x.txt:2: 'capacity' given twice"),
        ("wait 99999999999999999999\n", "x.txt:1: the argument of 'wait' 99999999999999999999 does not fit in 64 bits"),
        ("# nothing\n\n", "x.txt: no commands"),
    ],
)
def test_bad_command_files_name_the_line(text: str, message: str) -> None:
    with pytest.raises(CommandFileError) as exc:
        parse_commands(text, "x.txt")
    assert str(exc.value).startswith(message), str(exc.value)
    assert "\n" not in str(exc.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(CommandFileError, match="no such command file"):
        load_commands(tmp_path / "nope.txt")


# ---- the CLI
def _run(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(main, ["kvmu", "trace", *args])
    return r.exit_code, r.output


def test_trace_prints_a_table_and_writes_a_vcd(tmp_path: Path) -> None:
    code, out = _run(str(SCENARIO), "--vcd", str(tmp_path / "s.vcd"))
    assert code == 0, out
    assert "speculate 5" in out and "rollback" in out and "34 cycles" in out
    assert (tmp_path / "s.vcd").exists()


def test_trace_json() -> None:
    code, out = _run(str(SCENARIO), "--json", "--cycles", "speculate=2")
    assert code == 0, out
    data = json.loads(out)
    assert data["capacity"] == 64 and data["refused"] == 0 and data["n_commands"] == 15
    accept = next(r for r in data["commands"] if r["command"] == "accept")
    assert (accept["valid"], accept["curr"], accept["ahead"], accept["mode"], accept["mux"]) == (
        13,
        17,
        17,
        "accept",
        "sampler",
    )
    assert accept["line"] == 12 and accept["start_cycle"] == 13 + 9  # 9 more cycles of 2-cycle speculation


@pytest.mark.parametrize(
    "text, message",
    [
        ("capacity 10\ninit 2\nspeculate 3\naccept\n", "c.txt:4: accept refused (nothing_to_verify)"),
        ("capacity 10\nspeculate 11\n", "c.txt:2: speculate 11 refused (over_capacity)"),
        ("capacity 10\ninit 11\n", "c.txt:2: init 11 refused (init_out_of_range)"),
        ("capacity 10\nspeculate -2\n", "c.txt:2: speculate -2 refused (bad_count)"),
        ("init 0\nfoo 3\n", "c.txt:2: unknown command 'foo'"),
        ("init\n", "c.txt:1: 'init' needs one integer argument"),
        ("init 1.5\n", "c.txt:1: the argument of 'init' must be an integer, got '1.5'"),
    ],
)
def test_cli_errors_name_the_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "c.txt"
    path.write_text(text)
    code, out = _run(str(path))
    assert code == 2, out
    assert f"Error: {tmp_path}/{message}" in out and "Traceback" not in out


def test_cli_keep_going_shows_refusals(tmp_path: Path) -> None:
    path = tmp_path / "c.txt"
    path.write_text("capacity 10\ninit 2\nspeculate 3\naccept\nmark\naccept\n")
    code, out = _run(str(path), "--keep-going", "--json")
    assert code == 0, out
    data = json.loads(out)
    assert data["refused"] == 1
    assert [r["status"] for r in data["commands"]] == ["ok", "ok", "nothing_to_verify", "ok", "ok"]


def test_cli_capacity_defaults(tmp_path: Path) -> None:
    path = tmp_path / "c.txt"
    path.write_text("init 30000\n")
    code, out = _run(str(path), "--json")  # Qwen2.5-0.5B max_position 32768
    assert code == 0 and json.loads(out)["capacity"] == 32768
    code, out = _run(str(path), "--capacity", "100")
    assert code == 2 and "init 30000 refused" in out


def test_cli_bad_cycles_option() -> None:
    code, out = _run(str(SCENARIO), "--cycles", "speculate")
    assert code == 2 and "COMMAND=CYCLES" in out
    code, out = _run(str(SCENARIO), "--cycles", "wait=3")
    assert code == 2 and "no cycle cost for command 'wait'" in out


# ---- the VCD: the scripted accept / reject / backtrack scenario read back at the expected cycles
# (cycle: valid, curr, ahead, mode, mux_sel, kv_wr_en, kv_wr_addr) worked out by hand from the transition table
# with one cycle per command and per token.
EXPECTED = {
    0: (8, 8, 8, "init", 1, 0, None),  # init 8
    1: (8, 8, 9, "speculate", 0, 1, 8),  # speculate 5: first draft token written at 8
    5: (8, 8, 13, "speculate", 0, 1, 12),
    6: (8, 13, 13, "speculate", 0, 0, None),  # mark: step 1 under verification
    10: (8, 13, 17, "speculate", 0, 1, 16),  # step-ahead step 2 drafted
    12: (8, 13, 17, "speculate", 0, 0, None),  # wait 2: speculation stall
    13: (13, 17, 17, "accept", 0, 0, None),  # accept
    16: (13, 17, 20, "speculate", 0, 1, 19),  # step 3 step-ahead
    17: (13, 13, 13, "rollback", 1, 0, None),  # reject: steps 2 and 3 dropped, mux -> PCIe
    18: (14, 14, 14, "rollback", 1, 1, 13),  # ingest: the target's token committed as it lands
    22: (18, 18, 18, "rollback", 1, 1, 17),
    26: (18, 18, 22, "speculate", 0, 1, 21),
    27: (18, 22, 22, "speculate", 0, 0, None),  # mark step 3
    28: (13, 13, 13, "init", 1, 0, None),  # backtrack: init below valid
    29: (14, 14, 14, "init", 1, 1, 13),  # position 13 rewritten by the target's alternative
    33: (16, 16, 18, "speculate", 0, 1, 17),
}


def test_scenario_vcd_reads_back_with_the_expected_values(tmp_path: Path) -> None:
    vcd = tmp_path / "scenario.vcd"
    code, out = _run(str(SCENARIO), "--vcd", str(vcd), "--clock-hz", "300e6")
    assert code == 0, out
    waves = read_vcd(vcd)
    assert waves.clock_hz == 300e6 and waves.timescale_ps == 1.0
    assert waves.time_of_cycle(3) == 10000  # 3.333 ns cycles, rounded per cycle (no drift)
    for cycle, (valid, curr, ahead, mode, mux, wr_en, wr_addr) in EXPECTED.items():
        got = [waves.at_cycle(name, cycle) for name in ("valid", "curr", "ahead", "mode_name", "mux_sel", "kv_wr_en")]
        assert got == [valid, curr, ahead, mode, mux, wr_en], f"cycle {cycle}"
        if wr_addr is not None:
            assert waves.at_cycle("kv_wr_addr", cycle) == wr_addr, f"cycle {cycle}"
        assert waves.at_cycle("status", cycle) == 0
    # every cycle agrees with the trace the VCD was written from
    prog = load_commands(SCENARIO)
    pc = run_commands(prog.commands, 64).per_cycle()
    for cycle in range(34):
        for name, vname in (
            ("valid", "valid"),
            ("curr", "curr"),
            ("ahead", "ahead"),
            ("mode", "mode"),
            ("mux", "mux_sel"),
            ("cmd", "cmd"),
        ):
            assert waves.at_cycle(vname, cycle) == pc[name][cycle], (cycle, name)


def test_vcd_with_clock_and_refusal(tmp_path: Path) -> None:
    prog = parse_commands("capacity 4\nspeculate 2\naccept\nmark\n")
    trace = run_commands(prog.commands, 4, CycleCosts(speculate_cycles_per_token=2))
    path = write_vcd(trace, tmp_path / "c.vcd", clock_hz=100e6, clock_signal=True)
    waves = read_vcd(path)
    assert waves.at_cycle("status", 4) == 4  # NOTHING_TO_VERIFY in the accept's one cycle
    assert waves.at_cycle("clk", 2) == 1 and waves.value_at("clk", waves.time_of_cycle(2) + 5000) == 0
    assert waves.at_cycle("kv_wr_en", 0) == 0 and waves.at_cycle("kv_wr_en", 1) == 1  # write on the slot's last cycle
    assert path.read_text() == write_vcd(trace, tmp_path / "d.vcd", clock_hz=100e6, clock_signal=True).read_text()


def test_vcd_errors(tmp_path: Path) -> None:
    trace = run_commands(parse_commands("init 0\n").commands, 4)
    with pytest.raises(VcdError, match="clock_hz"):
        write_vcd(trace, tmp_path / "x.vcd", clock_hz=0)
    (tmp_path / "bad.vcd").write_text("$var wire nonsense\n")
    with pytest.raises(VcdError, match="not a readable VCD"):
        read_vcd(tmp_path / "bad.vcd")
    with pytest.raises(VcdError, match="no signal 'nope'"):
        read_vcd(write_vcd(trace, tmp_path / "ok.vcd")).at_cycle("nope", 0)
