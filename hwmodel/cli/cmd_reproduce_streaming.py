"""`hwmodel reproduce streaming`: the streaming decode model's reproduction (built-in designs over contexts, the
kernel-clock sweep of draft-u280 with 512- and 256-bit ports)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from hwmodel.cli.base import console
from hwmodel.cli.cmd_reproduce import reproduce
from hwmodel.report.tables import write_csv
from hwmodel.studies.streaming import run_study
from hwmodel.units import fmt_s


@reproduce.command("streaming")
@click.pass_context
def reproduce_streaming(ctx: click.Context) -> None:
    """Streaming decode model: draft-u280 latency and HBM utilization at 300 MHz, the clock sweep 150-450 MHz for
    512- and 256-bit ports, and the three built-in designs at ctx 0..4096."""
    from rich.table import Table

    out_dir: Path = ctx.obj["out_dir"] / "streaming"
    out_dir.mkdir(parents=True, exist_ok=True)
    rows, ft = run_study()
    (out_dir / "designs.json").write_text(json.dumps(rows, indent=2))
    t = Table("design", "ctx", "latency", "tokens/s", "HBM util.", "floor @peak", title="Built-in streaming designs")
    for r in rows:
        t.add_row(
            r["design"],
            str(r["ctx"]),
            fmt_s(r["seconds"]),
            f"{r['tokens_per_s']:.0f}",
            f"{100 * r['hbm_utilization']:.1f} %",
            fmt_s(r["bandwidth_floor_s"]),
        )
    console().print(t)
    write_csv(out_dir / "clock_sweep.csv", ft, list(ft[0]), line_end="\r\n", cells="plain")  # bytes as always
    t = Table(
        "clock",
        "512-bit ports",
        "HBM util.",
        "256-bit ports",
        "HBM util.",
        title="draft-u280 decode time vs kernel clock (ctx 512)",
    )
    for r in ft:
        t.add_row(
            f"{r['clock_mhz']} MHz",
            fmt_s(r["t512_s"]),
            f"{100 * r['util512']:.0f} %",
            fmt_s(r["t256_s"]),
            f"{100 * r['util256']:.0f} %",
        )
    console().print(t)
    click.echo(f"wrote {out_dir / 'designs.json'} and {out_dir / 'clock_sweep.csv'}")


reproduce_streaming.order = 10  # type: ignore[attr-defined]
