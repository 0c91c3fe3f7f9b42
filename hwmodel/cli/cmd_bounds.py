"""`hwmodel bounds`: bandwidth and compute floors of one LLM on one device."""

from __future__ import annotations

from typing import Any

import click

from hwmodel.bounds import Bounds, bounds, default_bits
from hwmodel.cli.base import SpecName, console, echo_json, json_option, main
from hwmodel.units import fmt_bw, fmt_bytes, fmt_s


def bounds_table(rows: list[Bounds], title: str) -> Any:
    """A rich table of bounds rows (shared by `hwmodel bounds` and `hwmodel reproduce bounds`)."""
    from rich.table import Table

    table = Table(
        "LLM",
        "device",
        "W/KV bits",
        "ctx",
        "bytes/token",
        "floor @peak",
        "tok/s @peak",
        "floor @measured",
        f"prefill {rows[0].prefill_tokens} tok compute floor" if rows else "prefill",
        "resident",
        "fits",
        title=title,
    )
    for b in rows:
        table.add_row(
            b.llm,
            b.device,
            f"W{b.weight_bits}/KV{b.kv_bits}",
            str(b.ctx_tokens),
            fmt_bytes(b.bytes.total_bytes),
            fmt_s(b.decode_floor_peak_s),
            f"{1 / b.decode_floor_peak_s:.0f}",
            fmt_s(b.decode_floor_measured_s),
            fmt_s(b.prefill_compute_floor_s),
            fmt_bytes(b.resident_bytes),
            "yes" if b.fits else f"[red]no[/] (> {fmt_bytes(b.memory_bytes)})",
        )
    return table


@main.command("bounds")
@click.option(
    "--llm",
    "llm",
    type=SpecName("llm"),
    default=None,
    help="LLM spec name (see `hwmodel specs list`) [default: the design's].",
)
@click.option(
    "--device",
    "device",
    type=SpecName("device"),
    default=None,
    help="FPGA board or GPU spec name [default: the design's board].",
)
@click.option(
    "--design",
    "design_name",
    default=None,
    help="A streaming design (built-in name or TOML file): add its own floor, on its ports, precision "
    "and placement (host-side operators and on-chip parameters excluded).",
)
@click.option(
    "--weight-bits",
    type=click.Choice(["4", "8", "16"]),
    default=None,
    help="Weight precision [default: 8 on FPGA boards, 16 on GPUs].",
)
@click.option(
    "--kv-bits",
    type=click.Choice(["4", "8", "16"]),
    default=None,
    help="KV-cache precision [default: 8 on FPGA boards, 16 on GPUs].",
)
@click.option(
    "--ctx",
    "ctx_tokens",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Tokens already in the KV cache.",
)
@click.option(
    "--prefill-tokens",
    type=click.IntRange(min=1),
    default=1024,
    show_default=True,
    help="Prompt length for the prefill compute floor.",
)
@click.option(
    "--ingest",
    "--no-lm-head",
    "ingest",
    is_flag=True,
    help="Floors of an ingested token (logits discarded: no final norm, LM head or sampling).",
)
@json_option
def bounds_cmd(
    llm: Any,
    device: Any,
    design_name: str | None,
    weight_bits: str | None,
    kv_bits: str | None,
    ctx_tokens: int,
    prefill_tokens: int,
    ingest: bool,
    as_json: bool,
) -> None:
    """Bytes per decoded token, decode bandwidth floor at peak and measured bandwidth, prefill compute floor,
    and whether weights + KV cache fit the device memory; with --design, the design's own floor too (the one
    `hwmodel fpga decode` prints)."""
    from hwmodel.domains import check_context
    from hwmodel.errors import HwmodelError
    from hwmodel.specs import library

    design = None
    if design_name is not None:
        from fpga.streaming.design import load_design

        design = load_design(design_name)
        llm = llm or library().llm(design.llm)
        device = device or library().board(design.board)
        if (llm.name, device.name) != (design.llm, design.board):
            raise HwmodelError(
                f"--design {design.name} runs {design.llm} on {design.board}; leave out --llm/--device "
                f"or give those (got {llm.name} on {device.name})"
            )
        weight_bits, kv_bits = weight_bits or str(design.weight_bits), kv_bits or str(design.kv_bits)
    if llm is None or device is None:
        raise HwmodelError("bounds: give --llm and --device, or --design")
    check_context(
        ctx_tokens, llm, "--ctx", max_ctx=design.max_ctx if design else None, design=design.name if design else ""
    )
    check_context(0, llm, "--prefill-tokens", new_tokens=prefill_tokens)
    dw, dk = default_bits(device)
    b = bounds(
        llm, device, int(weight_bits or dw), int(kv_bits or dk), ctx_tokens, prefill_tokens, with_lm_head=not ingest
    )
    floor = None
    if design is not None:
        import dataclasses

        from fpga.streaming.placement import design_floor

        design = dataclasses.replace(design, weight_bits=int(weight_bits), kv_bits=int(kv_bits))
        floor = design_floor(design, ctx_tokens, with_lm_head=not ingest)
    if as_json:
        echo_json({**b.as_dict(), **({"design_floor": floor.as_dict()} if floor else {})})
        return
    from rich.table import Table

    t = Table(
        "quantity",
        "value",
        title=f"Physical floors: {llm.name} on {device.name}, W{b.weight_bits}/KV{b.kv_bits}, "
        f"ctx {b.ctx_tokens}" + (" (ingest)" if ingest else ""),
    )
    db = b.bytes
    for label, value in [
        ("decoder weights read / token", fmt_bytes(db.weights_bytes)),
        ("output head read / token", fmt_bytes(db.head_bytes)),
        ("scales + biases + norms / token", fmt_bytes(db.scales_bytes + db.vectors_bytes)),
        (f"KV cache read / token (ctx {b.ctx_tokens})", fmt_bytes(db.kv_bytes)),
        ("total bytes / token", fmt_bytes(db.total_bytes)),
        (
            f"decode floor at peak {fmt_bw(b.peak_bw_bytes_per_s)}",
            f"{fmt_s(b.decode_floor_peak_s)}/token ({1 / b.decode_floor_peak_s:.0f} tokens/s)",
        ),
        (
            f"decode floor at measured {fmt_bw(b.measured_bw_bytes_per_s)}",
            f"{fmt_s(b.decode_floor_measured_s)}/token ({1 / b.decode_floor_measured_s:.0f} tokens/s)",
        ),
        (
            f"prefill {b.prefill_tokens} tokens: compute floor",
            f"{fmt_s(b.prefill_compute_floor_s)} ({b.prefill_ops:.3g} ops at {b.peak_ops_per_s:.3g} ops/s)",
        ),
        ("resident weights + KV", fmt_bytes(b.resident_bytes)),
        (
            "fits device memory",
            f"yes ({fmt_bytes(b.memory_bytes)})"
            if b.fits
            else f"NO: {fmt_bytes(b.resident_bytes)} > {fmt_bytes(b.memory_bytes)}",
        ),
    ]:
        t.add_row(label, value)
    if floor is not None:
        host = ", ".join(design.host_ops) or "none"
        onchip = ", ".join(design.onchip_params) or "norm gains only"
        for label, value in [
            (
                f"design {design.name}: bytes / token on its ports",
                fmt_bytes(floor.total_bytes) + f" (host: {host}; on chip: {onchip})",
            ),
            (
                f"design floor at {floor.channels} channels' peak {fmt_bw(floor.ports_peak_bw_bytes_per_s)}",
                f"{fmt_s(floor.floor_s)}/token ({1 / floor.floor_s:.0f} tokens/s)",
            ),
        ]:
            t.add_row(label, value)
    console().print(t)
