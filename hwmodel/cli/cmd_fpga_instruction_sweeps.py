"""`hwmodel fpga prefetch-sweep | profile-hbm`: the instruction-driven accelerator's sweeps over prefetch ratio and
access size (`hwmodel fpga profile-hbm` is the board-level profile, raw and through the scheduler; the streaming
module's `hwmodel fpga profile-port` profiles one port against request size and outstanding requests)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from hwmodel.cli.base import SpecName, console, echo_json, json_option
from hwmodel.cli.cmd_fpga_instruction import DesignName, fpga
from hwmodel.cli.instruction_tables import plot_access_profile, plot_sweep, size_label, sweep_table, write_rows_csv


@fpga.command("prefetch-sweep")
@click.option(
    "--design",
    "design",
    type=DesignName(),
    default="glitches-u280",
    show_default=True,
    help="Instruction design (built-in name or TOML path).",
)
@click.option("--ratios", default="1:8", show_default=True, help="Prefetch ratios: '1:8', '1,2,4,8' or a mix.")
@click.option(
    "--seq",
    "seqs",
    default="128,1024",
    show_default=True,
    help="Sequence lengths (tokens in the KV cache), comma-separated.",
)
@click.option("--csv", "csv_out", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Write CSV.")
@click.option(
    "--plot",
    "plot_out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write a PNG/SVG plot of speedup versus ratio.",
)
@json_option
def prefetch_sweep_cmd(
    design: Any, ratios: str, seqs: str, csv_out: Path | None, plot_out: Path | None, as_json: bool
) -> None:
    """Decode speedup per prefetch/coalescing ratio: the weights and metadata of k consecutive matrix-vector
    operations fetched in one access each. The best ratio per sequence length comes out of the simulation (the
    fastest ratio that fits the on-chip buffers)."""
    from hwmodel.errors import HwmodelError
    from hwmodel.studies.instruction import parse_ratios, prefetch_sweep

    ratio_list = parse_ratios(ratios)
    try:
        seq_list = [int(s) for s in seqs.split(",") if s.strip()]
    except ValueError:
        raise HwmodelError(f"--seq: expected integers like '128,1024', got {seqs!r}") from None
    if not seq_list or min(seq_list) < 0:
        raise HwmodelError(f"--seq: expected non-negative integers like '128,1024', got {seqs!r}")
    from rich.progress import Progress

    with Progress(transient=True, console=console()) as prog:
        task = prog.add_task("simulating", total=len(ratio_list) * len(seq_list))
        rows = prefetch_sweep(design, ratio_list, seq_list, progress=lambda: prog.advance(task))
    data = [r.as_dict() for r in rows]
    if csv_out:
        write_rows_csv(csv_out, data)
    if plot_out:
        plot_sweep(rows, design, plot_out)
    if as_json:
        best = {r.seq: r.ratio for r in rows if r.best}
        echo_json({"design": design.name, "role": design.role, "best_ratio": best, "rows": data})
        return
    console().print(sweep_table(rows, design))


@fpga.command("profile-hbm")
@click.option(
    "--board", "board", type=SpecName("fpga-board"), default="u280", show_default=True, help="FPGA board spec name."
)
@click.option(
    "--design",
    "design",
    type=DesignName(),
    default=None,
    help="Instruction design whose scheduler/datamover to profile [default: the built-in one for the board].",
)
@click.option(
    "--sizes",
    default="256,512,1K,2K,4K,8K,16K,32K,64K,128K,256K,512K,1M",
    show_default=True,
    help="Access sizes per channel (K/M = 1024/1024^2).",
)
@click.option("--csv", "csv_out", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Write CSV.")
@click.option(
    "--plot",
    "plot_out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write a PNG/SVG plot of bandwidth versus access size.",
)
@click.option(
    "--pattern",
    default="sequential",
    show_default=True,
    help="Raw column: sequential | strided:BYTES | random[:SPAN] (docs/hbm.md).",
)
@click.option(
    "--write-fraction",
    type=click.FloatRange(0, 1),
    default=0.0,
    show_default=True,
    help="Raw column: fraction of requests that are writes.",
)
@json_option
def profile_hbm_cmd(
    board: Any,
    design: Any,
    sizes: str,
    csv_out: Path | None,
    plot_out: Path | None,
    pattern: str,
    write_fraction: float,
    as_json: bool,
) -> None:
    """Effective HBM bandwidth versus access size (256 B ... 1 MB): raw (the HBM channel model, every port, many
    requests in flight), through the instruction scheduler and datamover, and with each weight load's scale and
    zero-point loads (the decode's pattern): the curve that explains why small loads waste HBM."""
    from fpga.instruction.design import design_names, load_design
    from hwmodel.errors import HwmodelError
    from hwmodel.studies.instruction import parse_sizes, profile_hbm

    if design is None:
        candidates = [n for n in design_names() if load_design(n).board == board.name]
        if not candidates:
            raise HwmodelError(f"no built-in instruction design for board '{board.name}'; pass --design")
        design = load_design(candidates[0])
    size_list = parse_sizes(sizes)
    from rich.progress import Progress

    with Progress(transient=True, console=console()) as prog:
        task = prog.add_task("profiling", total=len(size_list))
        from fpga.hbm.profile import parse_pattern

        parse_pattern(pattern)
        rows = profile_hbm(
            board,
            design,
            size_list,
            progress=lambda: prog.advance(task),
            pattern=pattern,
            write_fraction=write_fraction,
        )
    data = [r.as_dict() for r in rows]
    if csv_out:
        write_rows_csv(csv_out, data)
    if plot_out:
        plot_access_profile(rows, board, design, plot_out)
    if as_json:
        echo_json(
            {
                "board": board.name,
                "design": design.name,
                "peak_bw_bytes_per_s": board.hbm.peak_bw_bytes_per_s,
                "rows": data,
            }
        )
        return
    from rich.table import Table

    t = Table(
        "access / channel",
        "raw HBM",
        "% of peak",
        "via scheduler",
        "% of peak",
        "+ scale/zero loads",
        "% of peak",
        title=f"{board.display_name}: effective bandwidth vs access size "
        f"(peak {board.hbm.peak_bw_bytes_per_s / 1e9:.0f} GB/s; scheduler of {design.name})",
    )
    for r in rows:
        t.add_row(
            size_label(r.access_bytes),
            f"{r.raw_bw_bytes_per_s / 1e9:.1f} GB/s",
            f"{100 * r.raw_efficiency:.0f} %",
            f"{r.scheduler_bw_bytes_per_s / 1e9:.1f} GB/s",
            f"{100 * r.scheduler_efficiency:.0f} %",
            f"{r.with_metadata_bw_bytes_per_s / 1e9:.1f} GB/s",
            f"{100 * r.with_metadata_efficiency:.0f} %",
        )
    console().print(t)
