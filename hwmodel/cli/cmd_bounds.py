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

    table = Table("LLM", "device", "W/KV bits", "ctx", "bytes/token", "floor @peak", "tok/s @peak",
                  "floor @measured", f"prefill {rows[0].prefill_tokens} tok compute floor" if rows else "prefill",
                  "resident", "fits", title=title)
    for b in rows:
        table.add_row(b.llm, b.device, f"W{b.weight_bits}/KV{b.kv_bits}", str(b.ctx_tokens),
                      fmt_bytes(b.bytes.total_bytes), fmt_s(b.decode_floor_peak_s),
                      f"{1 / b.decode_floor_peak_s:.0f}", fmt_s(b.decode_floor_measured_s),
                      fmt_s(b.prefill_compute_floor_s), fmt_bytes(b.resident_bytes),
                      "yes" if b.fits else f"[red]no[/] (> {fmt_bytes(b.memory_bytes)})")
    return table


@main.command("bounds")
@click.option("--llm", "llm", type=SpecName("llm"), required=True, help="LLM spec name (see `hwmodel specs list`).")
@click.option("--device", "device", type=SpecName("device"), required=True, help="FPGA board or GPU spec name.")
@click.option("--weight-bits", type=click.Choice(["4", "8", "16"]), default=None,
              help="Weight precision [default: 8 on FPGA boards, 16 on GPUs].")
@click.option("--kv-bits", type=click.Choice(["4", "8", "16"]), default=None,
              help="KV-cache precision [default: 8 on FPGA boards, 16 on GPUs].")
@click.option("--ctx", "ctx_tokens", type=click.IntRange(min=0), default=0, show_default=True,
              help="Tokens already in the KV cache.")
@click.option("--prefill-tokens", type=click.IntRange(min=1), default=1024, show_default=True,
              help="Prompt length for the prefill compute floor.")
@json_option
def bounds_cmd(llm: Any, device: Any, weight_bits: str | None, kv_bits: str | None, ctx_tokens: int,
               prefill_tokens: int, as_json: bool) -> None:
    """Bytes per decoded token, decode bandwidth floor at peak and measured bandwidth, prefill compute floor,
    and whether weights + KV cache fit the device memory."""
    from hwmodel.domains import check_context

    check_context(ctx_tokens, llm, "--ctx")
    check_context(0, llm, "--prefill-tokens", new_tokens=prefill_tokens)
    dw, dk = default_bits(device)
    b = bounds(llm, device, int(weight_bits or dw), int(kv_bits or dk), ctx_tokens, prefill_tokens)
    if as_json:
        echo_json(b.as_dict())
        return
    from rich.table import Table

    t = Table("quantity", "value", title=f"Physical floors: {llm.name} on {device.name}, W{b.weight_bits}/KV{b.kv_bits}, "
                                          f"ctx {b.ctx_tokens}")
    db = b.bytes
    for label, value in [
        ("decoder weights read / token", fmt_bytes(db.weights_bytes)),
        ("output head read / token", fmt_bytes(db.head_bytes)),
        ("scales + biases + norms / token", fmt_bytes(db.scales_bytes + db.vectors_bytes)),
        (f"KV cache read / token (ctx {b.ctx_tokens})", fmt_bytes(db.kv_bytes)),
        ("total bytes / token", fmt_bytes(db.total_bytes)),
        (f"decode floor at peak {fmt_bw(b.peak_bw_bytes_per_s)}",
         f"{fmt_s(b.decode_floor_peak_s)}/token ({1 / b.decode_floor_peak_s:.0f} tokens/s)"),
        (f"decode floor at measured {fmt_bw(b.measured_bw_bytes_per_s)}",
         f"{fmt_s(b.decode_floor_measured_s)}/token ({1 / b.decode_floor_measured_s:.0f} tokens/s)"),
        (f"prefill {b.prefill_tokens} tokens: compute floor",
         f"{fmt_s(b.prefill_compute_floor_s)} ({b.prefill_ops:.3g} ops at {b.peak_ops_per_s:.3g} ops/s)"),
        ("resident weights + KV", fmt_bytes(b.resident_bytes)),
        ("fits device memory", f"yes ({fmt_bytes(b.memory_bytes)})" if b.fits
         else f"NO: {fmt_bytes(b.resident_bytes)} > {fmt_bytes(b.memory_bytes)}"),
    ]:
        t.add_row(label, value)
    console().print(t)
