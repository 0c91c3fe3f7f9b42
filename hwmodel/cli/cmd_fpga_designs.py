"""`hwmodel fpga designs`: the built-in streaming designs with their estimated resources."""

from __future__ import annotations

import click

from hwmodel.cli.base import console, echo_json, json_option
from hwmodel.cli.cmd_fpga_decode import fpga


@fpga.command("designs")
@click.option(
    "--verbose",
    is_flag=True,
    help="Also show what each design's fields derive to on its board: the "
    "kernel:AXI clock ratio, port bytes per cycle and port peaks.",
)
@json_option
def designs_cmd(verbose: bool, as_json: bool) -> None:
    """Built-in streaming designs: model, board, clock, precision, engines and estimated resources (the KVMU's
    LUT/FF, where a design has one, from the yosys synthesis of fpga/kvmu/rtl/kvmu.v)."""
    from fpga.streaming.design import design_names, load_design
    from fpga.streaming.resources import estimate
    from hwmodel.derive import design_derived

    rows = []
    for name in design_names():
        d = load_design(name)
        use = estimate(d)
        rows.append(
            {
                "name": name,
                "llm": d.llm,
                "board": d.board,
                "clock_mhz": d.clock_hz / 1e6,
                "bits": f"W{d.weight_bits}A{d.act_bits}KV{d.kv_bits}",
                "ports": d.total_ports,
                "engines": {e.name: list(e.ops) for e in d.engines},
                "resources": {k: getattr(use, k) for k in ("lut", "ff", "dsp", "bram18k", "uram")},
                "blocks": use.blocks,
            }
        )
        if verbose:
            rows[-1]["derived"] = {
                k: {"value": v, "unit": u, "how": how} for k, v, u, how in design_derived(d, d.board_spec())
            }
    if as_json:
        echo_json(rows)
        return
    from rich.table import Table

    t = Table(
        "design", "LLM", "board", "clock", "bits", "ports", "engines", "DSP", "LUT", "FF", "BRAM18K", "KVMU LUT/FF"
    )
    for r in rows:
        kv = r["blocks"].get("kvmu")
        t.add_row(
            r["name"],
            r["llm"],
            r["board"],
            f"{r['clock_mhz']:g} MHz",
            r["bits"],
            str(r["ports"]),
            "; ".join(f"{k}: {', '.join(v)}" for k, v in r["engines"].items()),
            f"{r['resources']['dsp']:,}",
            f"{r['resources']['lut']:,}",
            f"{r['resources']['ff']:,}",
            f"{r['resources']['bram18k']:,}",
            f"{kv['lut']:,}/{kv['ff']:,}" if kv else "-",
        )
    console().print(t)
    for r in rows if verbose else ():
        dt = Table("derived", "value", "unit", "how", title=f"{r['name']} on {r['board']}")
        for k, v in r["derived"].items():
            val = v["value"]
            dt.add_row(
                k,
                f"{val:,}" if isinstance(val, int) else (f"{val:.6g}" if isinstance(val, float) else val),
                v["unit"],
                v["how"],
            )
        console().print(dt)
    if any("kvmu" in r["blocks"] for r in rows):
        from fpga.kvmu.verify.synth import recorded

        rec = recorded()
        console().print(
            f"LUT and FF totals include the KVMU where listed: {rec['lut']} LUT / {rec['ff']} FF of "
            f"fpga/kvmu/rtl/kvmu.v from {rec['source']}",
            markup=False,
            soft_wrap=True,
        )
