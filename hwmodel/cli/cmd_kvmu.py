"""`hwmodel kvmu`: `trace` runs a KVMU command file through the cycle-level kernel (per-command table, VCD);
`verify` checks a KVMU RTL against the model cycle by cycle; `mutants` writes the RTL mutants; `synth` gives the
yosys LUT/FF counts of a KVMU RTL."""

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
            raise click.BadParameter(
                f"expected COMMAND=CYCLES such as speculate=4, got '{item}'", param_hint="'--cycles'"
            )
        out[name.strip()] = int(number)
    return out


@kvmu.command("trace")
@click.argument("commands_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--vcd",
    "vcd_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the waveform (registers, mode, mux select, status, KV write port) to this VCD file.",
)
@click.option(
    "--capacity",
    type=click.IntRange(min=1),
    default=None,
    help="KV capacity in tokens [default: the file's `capacity` line, else the LLM's max_position].",
)
@click.option(
    "--llm",
    "llm",
    type=SpecName("llm"),
    default="qwen2.5-0.5b",
    show_default=True,
    help="Draft LLM whose max_position is the default capacity.",
)
@click.option(
    "--cycles",
    "cycle_costs",
    multiple=True,
    metavar="COMMAND=CYCLES",
    help="Cycles per command (per token for speculate and ingest), e.g. --cycles speculate=4; "
    "repeatable [default: 1 each].",
)
@clock_option(
    "clock_hz",
    unit="Hz",
    default=200.0,
    legacy=("--clock-hz",),
    help="KVMU clock in MHz for the VCD time axis (200 MHz: the draft design measured on the U280).",
)
@click.option("--clock", "clock_signal", is_flag=True, help="Add a clk signal to the VCD (short traces).")
@click.option(
    "--keep-going",
    is_flag=True,
    help="Record refused commands (status code in the table and VCD) instead of stopping at the first.",
)
@click.option(
    "--rows", type=click.IntRange(min=0), default=60, show_default=True, help="Commands shown in the table (0 = all)."
)
@json_option
def trace_cmd(
    commands_file: Path,
    vcd_path: Path | None,
    capacity: int | None,
    llm: Any,
    cycle_costs: tuple[str, ...],
    clock_hz: float,
    clock_signal: bool,
    keep_going: bool,
    rows: int,
    as_json: bool,
) -> None:
    """Run COMMANDS_FILE (one command per line: init POS, speculate N, mark, accept, rollback, ingest N,
    wait N; `#` comments; see docs/kvmu.md) through the KVMU kernel, print one row per command (registers,
    mode and mux after it, cycles), and optionally write a VCD. A refused command stops the run with the
    line and the reason, unless --keep-going."""
    from fpga.kvmu.model import CycleCosts, KvmuError, Status, load_commands, run_commands, write_vcd

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
        echo_json(
            {
                "source": str(commands_file),
                "capacity": cap,
                "n_commands": trace.n_commands,
                "n_cycles": trace.n_cycles,
                "refused": len(refused),
                "vcd": vcd_path,
                "commands": table_rows,
            }
        )
        return
    from rich.table import Table

    shown = table_rows if rows == 0 else table_rows[:rows]
    table = Table(
        "line",
        "command",
        "cycles",
        "valid",
        "curr",
        "ahead",
        "mode",
        "mux",
        "status",
        title=f"KVMU trace of {commands_file.name}",
    )
    for r in shown:
        end = r["start_cycle"] + r["n_cycles"] - 1
        span = str(r["start_cycle"]) if end == r["start_cycle"] else f"{r['start_cycle']}-{end}"
        status = r["status"] if r["status"] == Status.OK.name.lower() else f"[red]{r['status']}[/]"
        table.add_row(
            str(r["line"]),
            r["command"],
            span,
            str(r["valid"]),
            str(r["curr"]),
            str(r["ahead"]),
            r["mode"],
            r["mux"],
            status,
        )
    out = console()
    out.print(table)
    if len(shown) < len(table_rows):
        out.print(f"... {len(table_rows) - len(shown)} more commands (--rows 0 shows all)")
    out.print(f"{trace.n_commands} commands, {trace.n_cycles} cycles, capacity {cap} tokens", markup=False)
    if refused:
        out.print(
            f"{len(refused)} command(s) refused, first at line {program.commands[refused[0]].line}: "
            f"{trace.refusal_message(refused[0])}",
            markup=False,
        )
    if vcd_path is not None:
        click.echo(f"wrote {vcd_path}")


@kvmu.command("verify")
@click.option(
    "--rtl",
    "rtl_files",
    multiple=True,
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Verilog (or SystemVerilog, where the simulator takes it) source of the KVMU under test; "
    "repeatable (all files of the design).",
)
@click.option("--top", required=True, help="Name of the KVMU module (its ports follow docs/kvmu.md's signal contract).")
@click.option(
    "--simulator",
    type=click.Choice(["icarus", "verilator"]),
    default="icarus",
    show_default=True,
    help="Simulator cocotb drives (Icarus Verilog 11+, or Verilator 5.036+).",
)
@click.option(
    "--examples",
    type=click.IntRange(min=1, max=10**7),
    default=1000,
    show_default=True,
    help="Hypothesis examples (command streams of up to 40 commands and resets) that must pass.",
)
@click.option(
    "--seed",
    type=click.IntRange(min=0, max=2**32 - 1),
    default=0,
    show_default=True,
    help="Hypothesis seed: the same seed draws the same examples.",
)
@click.option(
    "--min-coverage",
    type=click.FloatRange(0.0, 100.0),
    default=0.0,
    show_default=True,
    help="Fail (exit 1) a passing run whose functional coverage (percent of bins hit, docs/kvmu.md) is below this.",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("kvmu-verify"),
    show_default=True,
    help="Where a failure writes counterexample.txt (the shrunk command file), model.vcd and rtl.vcd.",
)
@json_option
def verify_cmd(
    rtl_files: tuple[Path, ...],
    top: str,
    simulator: str,
    examples: int,
    seed: int,
    min_coverage: float,
    out_dir: Path,
    as_json: bool,
) -> None:
    """Verify a KVMU RTL against the model: hypothesis draws command streams (legal and illegal commands,
    capacity edges, runs across every power of two up to 2**16 + 1 cycles, resets at random cycles, back-to-back
    commands and idle cycles), cocotb drives them into the RTL, and every contract signal is compared with the
    model's per-cycle kernel. A mismatch is shrunk and replayed on a fresh simulator; the command prints the
    shrunk command file and the first differing cycle and signal, writes VCDs of the model and the RTL, and exits
    1 (so does state that survives reset, a simulator error, or coverage below --min-coverage). Exit 0 only when
    all examples pass; exit 2 when the RTL does not build or no simulator is installed."""
    from fpga.kvmu.verify.verify import verify
    from hwmodel.errors import HwmodelError

    report: dict[str, Any] = {
        "rtl": [str(p) for p in rtl_files],
        "top": top,
        "simulator": simulator,
        "seed": seed,
        "examples": examples,
        "min_coverage": min_coverage,
    }
    try:
        result = verify(list(rtl_files), top, simulator=simulator, examples=examples, seed=seed, out_dir=out_dir)
    except HwmodelError as e:  # no simulator, or the RTL does not build: a usage error (exit 2)
        if not as_json:
            raise
        echo_json({**report, "verdict": "error", "passed": False, "error": str(e)})
        raise SystemExit(2) from None
    except Exception as e:  # noqa: BLE001 - whatever else goes wrong is a verdict, never a traceback
        msg = f"internal error ({type(e).__name__}): {e}"
        if as_json:
            echo_json({**report, "verdict": "error", "passed": False, "error": msg})
        else:
            click.echo(f"FAIL {top}: {msg}")
        raise SystemExit(1) from None
    cov = result.coverage
    low = cov is not None and result.passed and cov.percent < min_coverage
    if as_json:
        echo_json(
            {
                **report,
                "verdict": "coverage below --min-coverage" if low else result.verdict,
                "passed": result.passed and not low,
                "examples_passed": result.examples_passed,
                "simulated": result.simulator_runs,
                "message": result.message(),
                "error": result.error,
                "counterexample": result.example.command_file() if result.example else None,
                "first_example": result.before.command_file() if result.before else None,
                "first_difference": result.mismatch.describe(result.example)
                if result.mismatch and result.example
                else None,
                "coverage": cov.as_dict() if cov is not None else None,
                "files": {k: str(v) for k, v in result.files.items()},
            }
        )
    elif result.passed:
        click.echo(f"{'FAIL' if low else 'PASS'} {top}: {result.message()}, seed {seed}, {simulator}")
        if cov is not None:
            click.echo(cov.summary())
            if cov.empty():
                click.echo(f"empty bins: {'; '.join(cov.empty())}")
        if low:
            click.echo(f"coverage {cov.percent:.1f}% is below --min-coverage {min_coverage:g}%")
    else:
        click.echo(f"FAIL {top}: {result.message()}")
        if result.before is not None:
            click.echo("first example (passes; its state survives the reset):")
            click.echo("".join(f"  {ln}\n" for ln in result.before.command_file().splitlines()), nl=False)
            click.echo("second example (passes alone on a fresh simulator, fails after the first):")
        elif result.example is not None:
            click.echo("shrunk counterexample (command file):")
        if result.example is not None:
            click.echo("".join(f"  {ln}\n" for ln in result.example.command_file().splitlines()), nl=False)
        for what, path in result.files.items():
            click.echo(f"wrote {path} ({what})")
        if cov is not None:
            click.echo(cov.summary())
    if not result.passed or low:
        raise SystemExit(1)


@kvmu.command("mutants")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Directory to write the RTL mutants into, one <name>.v each (module kvmu).",
)
def mutants_cmd(out_dir: Path) -> None:
    """Write the 12 RTL mutants of the reference KVMU (one per model mutant of the property tests), each a single
    deliberate bug that `hwmodel kvmu verify` must catch."""
    from fpga.kvmu.verify.mutants import MUTANTS, write_mutants

    paths = write_mutants(out_dir)
    for m in MUTANTS:
        click.echo(f"{paths[m.name]}: {m.what} (mirrors {m.model_mutant})")


@kvmu.command("synth")
@click.option(
    "--rtl",
    "rtl_file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="Verilog file to synthesize [default: the reference fpga/kvmu/rtl/kvmu.v].",
)
@click.option("--top", default="kvmu", show_default=True, help="Top module.")
@click.option(
    "--write",
    "write_record",
    is_flag=True,
    help="Record the counts in fpga/data/kvmu_rtl_resources.toml (the reference RTL only), which the "
    "resource model reads for the KVMU.",
)
@json_option
def synth_cmd(rtl_file: Path | None, top: str, write_record: bool, as_json: bool) -> None:
    """LUT and FF counts of a KVMU RTL from yosys synth_xilinx for UltraScale+ (-family xcup), with the yosys
    version and command; --write records the reference's counts for the resource model."""
    from fpga.kvmu.verify import synth
    from fpga.kvmu.verify.mutants import REFERENCE_RTL
    from hwmodel.errors import HwmodelError

    rtl = rtl_file or REFERENCE_RTL
    result = synth.synthesize(rtl, top)
    if write_record:
        if rtl.resolve() != REFERENCE_RTL.resolve():
            raise HwmodelError(f"--write records the reference RTL ({REFERENCE_RTL}) only, not {rtl}")
        result["record"] = str(synth.write_record(result))
    if as_json:
        echo_json(result)
        return
    cells = ", ".join(f"{k} {v}" for k, v in result["cells"].items())
    click.echo(f"{rtl} ({top}): {result['lut']} LUT, {result['ff']} FF [UltraScale+, yosys {result['yosys']}]")
    click.echo(f"cells: {cells}")
    if write_record:
        click.echo(f"wrote {result['record']}")
