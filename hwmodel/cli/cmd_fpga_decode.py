"""`hwmodel fpga decode`: the cycle-level streaming decode model of one token from the command line (the other
`hwmodel fpga` commands: cmd_fpga_designs.py, cmd_fpga_profile.py; `hwmodel reproduce streaming`:
cmd_reproduce_streaming.py)."""

from __future__ import annotations

from typing import Any

import click

from hwmodel.cli.base import console, echo_json, group, json_option
from hwmodel.cli.options import AliasOption, clock_option, parse_range
from hwmodel.cli.streaming_tables import detail_tables, sensitivity_table, temporal_line
from hwmodel.errors import HwmodelError
from hwmodel.studies.streaming import token_row
from hwmodel.units import fmt_bw, fmt_s

fpga = group("fpga")

__all__ = ["decode_cmd", "fpga", "sensitivity_table"]


def _floor_s(design: Any, ctx: int, ingest: bool) -> float:
    """The design's own floor (fpga/streaming/placement.py): what `hwmodel bounds --design` prints."""
    from fpga.streaming.placement import design_floor

    return design_floor(design, ctx, with_lm_head=not ingest).floor_s


@fpga.command("decode")
@click.option(
    "--design",
    "design_name",
    required=True,
    help="Built-in design (draft-u280, draft-v80, flexllm-u280-mem-opt, flexllm-u280-mem-opt-new, "
    "flexllm-draft-u280) or a design TOML file.",
)
@click.option("--ctx", type=click.IntRange(min=0), default=0, show_default=True, help="Tokens already in the KV cache.")
@click.option("--ctx-range", default=None, help="Table over contexts: A:B:S (e.g. 0:4096:512) or a comma list.")
@clock_option("freq_mhz", help="Kernel clock in MHz [default: the design's].")
@click.option(
    "--clock-range",
    "--freq-range",
    "freq_range",
    cls=AliasOption,
    default=None,
    help="Table over kernel clocks in MHz: A:B:S (e.g. 150:450:50) or a comma list.",
)
@click.option(
    "--ingest",
    "--no-lm-head",
    "ingest",
    is_flag=True,
    help="An ingested token (logits discarded: LM head and sampler skipped).",
)
@click.option(
    "--detail/--no-detail",
    default=True,
    show_default=True,
    help="Per-engine, per-operator and per-channel tables (single point).",
)
@click.option(
    "--sensitivity",
    is_flag=True,
    help="Vary every guessed field (left at its default, unsourced or [estimate]) over its documented "
    "range: per-field latency movement and the band they span together (single point; "
    "docs/model-your-design.md).",
)
@click.option(
    "--vary", default=None, help="With --sensitivity: only these field names (comma list, e.g. burst_bytes,fifo_depth)."
)
@json_option
def decode_cmd(
    design_name: str,
    ctx: int,
    ctx_range: str | None,
    freq_mhz: float | None,
    freq_range: str | None,
    ingest: bool,
    detail: bool,
    sensitivity: bool,
    vary: str | None,
    as_json: bool,
) -> None:
    """Cycle-level simulation of decoding one token on a fully-streaming FPGA design: cycles, seconds, where the
    cycles went, HBM bytes, bandwidth and utilization."""
    import dataclasses

    from fpga.streaming.engine import StreamingEngine, load_design, validate_design
    from hwmodel.domains import check_context, check_kernel_clock

    design = load_design(design_name)
    if freq_mhz is not None:
        check_kernel_clock(design.board_spec(), freq_mhz * 1e6, "--clock-mhz")
        design = dataclasses.replace(design, clock_hz=freq_mhz * 1e6)
    validate_design(design)
    ctxs = [int(c) for c in (parse_range(ctx_range, "--ctx-range") or [ctx])]
    freqs = parse_range(freq_range, "--clock-range") or [design.clock_hz / 1e6]
    for f in freqs:
        check_kernel_clock(design.board_spec(), f * 1e6, "--clock-range")
    for c in ctxs:
        if c < 0:
            raise HwmodelError(f"--ctx-range: expected contexts >= 0, got {c}")
        check_context(
            c, design.llm_spec(), "--ctx-range" if ctx_range else "--ctx", max_ctx=design.max_ctx, design=design.name
        )
    points = [(c, f) for f in freqs for c in ctxs]
    if sensitivity and len(points) > 1:
        raise HwmodelError("--sensitivity: one point at a time (drop --ctx-range / --clock-range)")
    engines: dict[float, StreamingEngine] = {}
    rows = []
    results = []
    from rich.progress import Progress

    with Progress(transient=True, disable=len(points) < 20 or as_json) as prog:
        task = prog.add_task("simulating tokens", total=len(points))
        for c, f in points:
            if f not in engines:
                engines[f] = StreamingEngine(dataclasses.replace(design, clock_hz=f * 1e6), validate=False)
            res = engines[f].token(c, with_lm_head=not ingest)
            results.append(res)
            rows.append({**token_row(res), "design_floor_s": _floor_s(design, c, ingest)})
            prog.advance(task)
    from fpga.streaming.temporal import is_temporal, temporal_facts

    band = None
    if sensitivity:
        from hwmodel.studies.sensitivity import check_fields
        from hwmodel.studies.sensitivity import sensitivity as band_of

        d0 = dataclasses.replace(design, clock_hz=freqs[0] * 1e6)
        fields = check_fields(vary.split(",")) if vary else None
        band = band_of(
            d0, lambda d: StreamingEngine(d, validate=False).token(ctxs[0], with_lm_head=not ingest).seconds, fields
        )
    if as_json:
        if len(results) == 1:
            from hwmodel.quantities import decode_point

            point = {} if ingest else {"decode": decode_point(engines[points[0][1]], points[0][0]).to_dict()}
            one = {**results[0].as_dict(), "design_floor_s": rows[0]["design_floor_s"], **point}
            if band is not None:
                one["sensitivity"] = band
            if is_temporal(design):
                one["execution"] = temporal_facts(design, results[0])
            echo_json(one)
        else:
            echo_json(rows)
        return
    from rich.table import Table

    t = Table(
        "ctx",
        "clock",
        "cycles",
        "latency",
        "tokens/s",
        "HBM bytes",
        "achieved BW",
        "HBM util.",
        "floor @peak",
        "design floor",
        title=f"{design.name}: {design.llm} W{design.weight_bits}A{design.act_bits} "
        f"KV{design.kv_bits} on {design.board}" + (" (ingest)" if ingest else ""),
    )
    for r in rows:
        t.add_row(
            str(r["ctx"]),
            f"{r['clock_mhz']:g} MHz",
            f"{r['cycles']:,}",
            fmt_s(r["seconds"]),
            f"{r['tokens_per_s']:.0f}",
            f"{r['hbm_bytes'] / 1e6:.1f} MB",
            fmt_bw(r["achieved_bw_bytes_per_s"]),
            f"{100 * r['hbm_utilization']:.1f} %",
            fmt_s(r["bandwidth_floor_s"]),
            fmt_s(r["design_floor_s"]),
        )
    console().print(t)
    if design.host_ops or design.onchip_params:
        from fpga.streaming.placement import host_link_bytes

        hl = host_link_bytes(design, design.llm_spec())
        console().print(
            f"placement: on the host {', '.join(design.host_ops) or 'nothing'} "
            f"({hl['to_device_bytes']} B in, {hl['to_host_bytes']} B out per token over the host link, "
            f"timed by the system's link model); on chip: {', '.join(design.onchip_params) or '-'}",
            markup=False,
            soft_wrap=True,
        )
    if is_temporal(design) and len(results) == 1:  # temporal phases (fpga/streaming/temporal.py)
        console().print(temporal_line(design, results[0]), markup=False, soft_wrap=True)
    if design.units and len(results) == 1:  # per-unit and per-link cycles (hwmodel/cli/units_tables.py)
        from hwmodel.cli.units_tables import print_unit_tables

        print_unit_tables(results[0])
    if detail and len(results) == 1:
        detail_tables(results[0])
    if band is not None:
        sensitivity_table(band, f"{design.name}: prediction band at ctx {ctxs[0]}")
