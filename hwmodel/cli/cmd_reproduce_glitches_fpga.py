"""`hwmodel reproduce glitches-fpga`: the GLITCHES U280 decode accelerator's reproduction (calibration, prefetch
sweeps, access-size profile, the V80 port)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from hwmodel.cli.base import console
from hwmodel.cli.cmd_reproduce import reproduce
from hwmodel.cli.instruction_tables import sweep_table, write_rows_csv


@reproduce.command("glitches-fpga")
@click.pass_context
def reproduce_glitches_fpga(ctx: click.Context) -> None:
    """GLITCHES U280 decode accelerator: calibration (fitted and predicted points), the prefetch sweep at sequence
    lengths 128 and 1024, the access-size bandwidth profile, and the V80 port (predicted)."""
    from calibration.family import get_family, report_family
    from calibration.report import render, summarize
    from fpga.instruction.design import load_design
    from hwmodel.specs import library
    from hwmodel.studies.instruction import prefetch_sweep, profile_hbm

    out_dir: Path = ctx.obj["out_dir"] / "glitches_fpga"
    out_dir.mkdir(parents=True, exist_ok=True)
    fam = get_family("calibration.fpga_instruction:FAMILY")
    rows = report_family(fam)
    summary = summarize(rows)
    (out_dir / "calibration.json").write_text(
        json.dumps({"summary": summary.as_dict(), "points": [r.as_dict() for r in rows]}, indent=2)
    )
    console().print(render(rows, "Instruction-driven FPGA model vs GLITCHES (U280)", fam.conditions))
    for name in ("glitches-u280", "glitches-v80"):
        d = load_design(name)
        sweep = prefetch_sweep(d, list(range(1, 9)), [128, 1024])
        write_rows_csv(out_dir / f"prefetch_sweep_{name}.csv", [r.as_dict() for r in sweep])
        console().print(sweep_table(sweep, d))
    u280 = library().board("u280")
    prof = profile_hbm(u280, load_design("glitches-u280"), [256 << i for i in range(13)])
    write_rows_csv(out_dir / "profile_hbm_u280.csv", [r.as_dict() for r in prof])
    click.echo(f"wrote {out_dir}")


reproduce_glitches_fpga.order = 30  # type: ignore[attr-defined]
