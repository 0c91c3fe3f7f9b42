"""`hwmodel kvmu trace`: run a KVMU command file through the cycle-level kernel, print a per-command table, write
the waveform as VCD."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from hwmodel.cli.base import SpecName, console, echo_json, group, json_option
from hwmodel.cli.options import clock_option

kvmu = group("kvmu")


def _parse_costs(values: tuple[str, ...]) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in values:
        name, sep, number = item.partition("=")
        if not sep or not number.strip().lstrip("+").isdigit():
            raise click.BadParameter(f"expected COMMAND=CYCLES such as speculate=4, got '{item}'",
                                     param_hint="'--cycles'")
        out[name.strip()] = int(number)
    return out


@kvmu.command("trace")
@click.argument("commands_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--vcd", "vcd_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the waveform (registers, mode, mux select, status, KV write port) to this VCD file.")
@click.option("--capacity", type=click.IntRange(min=1), default=None,
              help="KV capacity in tokens [default: the file's `capacity` line, else the LLM's max_position].")
@click.option("--llm", "llm", type=SpecName("llm"), default="qwen2.5-0.5b", show_default=True,
              help="Draft LLM whose max_position is the default capacity.")
@click.option("--cycles", "cycle_costs", multiple=True, metavar="COMMAND=CYCLES",
              help="Cycles per command (per token for speculate and ingest), e.g. --cycles speculate=4; "
                   "repeatable [default: 1 each].")
@clock_option("clock_hz", unit="Hz", default=200.0, legacy=("--clock-hz",),
              help="KVMU clock in MHz for the VCD time axis (200 MHz: the draft design measured on the U280).")
@click.option("--clock", "clock_signal", is_flag=True, help="Add a clk signal to the VCD (short traces).")
@click.option("--keep-going", is_flag=True,
              help="Record refused commands (status code in the table and VCD) instead of stopping at the first.")
@click.option("--rows", type=click.IntRange(min=0), default=60, show_default=True,
              help="Commands shown in the table (0 = all).")
@json_option
def trace_cmd(commands_file: Path, vcd_path: Path | None, capacity: int | None, llm: Any,
              cycle_costs: tuple[str, ...], clock_hz: float, clock_signal: bool, keep_going: bool, rows: int,
              as_json: bool) -> None:
    """Run COMMANDS_FILE (one command per line: init POS, speculate N, mark, accept, rollback, ingest N,
    wait N; `#` comments; see docs/kvmu.md) through the KVMU kernel, print one row per command (registers,
    mode and mux after it, cycles), and optionally write a VCD. A refused command stops the run with the
    line and the reason, unless --keep-going."""
    from fpga.kvmu import CycleCosts, KvmuError, Status, load_commands, run_commands, write_vcd

    program = load_commands(commands_file)
    cap = capacity or program.capacity or llm.max_position
    costs = CycleCosts.from_overrides(_parse_costs(cycle_costs))
    trace = run_commands(program.commands, cap, costs)
    refused = trace.refusals()
    if refused and not keep_going:
        first = refused[0]
        raise KvmuError(f"{commands_file}:{program.commands[first].line}: {trace.refusal_message(first)}")
    if vcd_path is not None:
        write_vcd(trace, vcd_path, clock_hz=clock_hz, clock_signal=clock_signal)
    table_rows = trace.command_rows()
    if as_json:
        echo_json({"source": str(commands_file), "capacity": cap, "n_commands": trace.n_commands,
                   "n_cycles": trace.n_cycles, "refused": len(refused), "vcd": vcd_path, "commands": table_rows})
        return
    from rich.table import Table

    shown = table_rows if rows == 0 else table_rows[:rows]
    table = Table("line", "command", "cycles", "valid", "curr", "ahead", "mode", "mux", "status",
                  title=f"KVMU trace of {commands_file.name}")
    for r in shown:
        end = r["start_cycle"] + r["n_cycles"] - 1
        span = str(r["start_cycle"]) if end == r["start_cycle"] else f"{r['start_cycle']}-{end}"
        status = r["status"] if r["status"] == Status.OK.name.lower() else f"[red]{r['status']}[/]"
        table.add_row(str(r["line"]), r["command"], span, str(r["valid"]), str(r["curr"]), str(r["ahead"]),
                      r["mode"], r["mux"], status)
    out = console()
    out.print(table)
    if len(shown) < len(table_rows):
        out.print(f"... {len(table_rows) - len(shown)} more commands (--rows 0 shows all)")
    out.print(f"{trace.n_commands} commands, {trace.n_cycles} cycles, capacity {cap} tokens", markup=False)
    if refused:
        out.print(f"{len(refused)} command(s) refused, first at line {program.commands[refused[0]].line}: "
                  f"{trace.refusal_message(refused[0])}", markup=False)
    if vcd_path is not None:
        click.echo(f"wrote {vcd_path}")

