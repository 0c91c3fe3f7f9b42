"""`hwmodel study freq`: linear frequency projection vs the cycle model, per operator; `hwmodel reproduce freq`
and `hwmodel reproduce dse` (the built-in frequency study and design-space sweep)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from hwmodel.cli.base import console, echo_json, group, json_option
from hwmodel.cli.cmd_reproduce import reproduce
from hwmodel.cli.options import clock_option
from hwmodel.units import fmt_s

study = group("study")
EXAMPLE_SWEEP = Path(__file__).resolve().parent.parent.parent / "examples" / "sweeps" / "draft_u280.toml"


def _write_study(st: Any, out_dir: Path, svg: bool) -> list[Path]:
    from hwmodel.dse.freq import plot_freq_study
    from hwmodel.report.tables import write_csv

    out_dir.mkdir(parents=True, exist_ok=True)
    stem = out_dir / f"freq_{st.design}_{st.measured_hz / 1e6:g}_to_{st.target_hz / 1e6:g}mhz"
    paths = [stem.with_suffix(".json"), stem.with_suffix(".csv")]
    paths[0].write_text(json.dumps(st.as_dict(), indent=2) + "\n")
    cols = [
        "op",
        "engine",
        "measured_s",
        "linear_s",
        "model_s",
        "projection_error",
        "efficiency",
        "bw_gain",
        "stall_in_share",
        "verdict",
    ]
    # floats as repr, NaN included ("nan": a gain that does not exist), unlike write_csv's empty non-finite cells
    rows = (
        {c: repr(v) if isinstance(v := getattr(o, c), float) else v for c in cols} for o in (st.token, *st.operators)
    )
    write_csv(paths[1], rows, cols)
    return paths + plot_freq_study(st, stem, svg=svg)


def _print_study(st: Any) -> None:
    from rich.table import Table

    fm, ft = st.measured_hz / 1e6, st.target_hz / 1e6
    t = Table(
        "operator",
        "engine",
        f"at {fm:g} MHz",
        f"linear to {ft:g}",
        f"model at {ft:g}",
        "projection error",
        "scaling eff.",
        "verdict",
        title=f"{st.design} ({st.llm} on {st.board}, ctx {st.ctx}): {fm:g} -> {ft:g} MHz, per operator "
        "(time summed over layers)",
    )
    for o in (st.token, *sorted(st.operators, key=lambda o: -o.model_s)):
        err = f"{100 * o.projection_error:+.0f}%"
        style = "bold" if o.op == "token" else None
        t.add_row(
            o.op,
            o.engine,
            fmt_s(o.measured_s),
            fmt_s(o.linear_s),
            fmt_s(o.model_s),
            err,
            f"{o.efficiency:.2f}",
            o.verdict,
            style=style,
        )
    console().print(t)
    tok = st.token
    click.echo(
        f"token: the linear projection says {fmt_s(tok.linear_s)} ({ft / fm:.2f}x), the cycle model "
        f"{fmt_s(tok.model_s)} ({tok.measured_s / tok.model_s:.2f}x); the bandwidth floor is "
        f"{fmt_s(st.bandwidth_floor_s)} ({tok.measured_s / st.bandwidth_floor_s:.2f}x)"
    )
    if tok.linear_s < st.bandwidth_floor_s:
        click.echo(
            "the linear projection is below the HBM bandwidth floor: no design can stream the token's bytes "
            "that fast on this board"
        )
    if st.target_hz > st.board_max_hz:
        click.echo(f"note: {ft:g} MHz is above the board's max kernel clock ({st.board_max_hz / 1e6:g} MHz)")


@study.command("freq")
@click.option("--design", required=True, help="Streaming design: built-in name (draft-u280, ...) or TOML path.")
@clock_option(
    "measured_mhz",
    name="--measured-clock-mhz",
    legacy=("--measured-mhz",),
    required=True,
    help="Kernel clock in MHz the design was measured at (within the board's range).",
)
@clock_option(
    "target_mhz",
    name="--target-clock-mhz",
    legacy=("--target-mhz",),
    required=True,
    help="Kernel clock in MHz to project to (within the board's range).",
)
@click.option(
    "--ctx", "ctx_tokens", type=click.IntRange(min=0), default=512, show_default=True, help="Tokens in the KV cache."
)
@click.option(
    "--steps",
    type=click.IntRange(min=2, max=64),
    default=9,
    show_default=True,
    help="Clocks simulated for the speedup curve.",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("out/study/freq"),
    show_default=True,
    help="Directory for the JSON, CSV and plot.",
)
@click.option("--svg", is_flag=True, help="Write an SVG beside the PNG.")
@json_option
def freq_cmd(
    design: str,
    measured_mhz: float,
    target_mhz: float,
    ctx_tokens: int,
    steps: int,
    out_dir: Path,
    svg: bool,
    as_json: bool,
) -> None:
    """What a design measured at one clock does at another: the linear projection a paper would make beside the
    cycle model (HBM in its own clock domain), per operator, marking where HBM saturation breaks the projection."""
    from fpga.streaming.design import load_design
    from hwmodel.domains import check_kernel_clock
    from hwmodel.dse.freq import run_freq_study

    board = load_design(design).board_spec()
    check_kernel_clock(board, measured_mhz * 1e6, "--measured-clock-mhz")
    check_kernel_clock(board, target_mhz * 1e6, "--target-clock-mhz")
    st = run_freq_study(design, measured_mhz * 1e6, target_mhz * 1e6, ctx_tokens, steps)
    paths = _write_study(st, out_dir, svg)
    if as_json:
        echo_json({**st.as_dict(), "files": [str(p) for p in paths]})
        return
    _print_study(st)
    click.echo(f"wrote {', '.join(str(p) for p in paths)}")


@reproduce.command("freq")
@click.pass_context
def reproduce_freq(ctx: click.Context) -> None:
    """The draft accelerator measured at 200 MHz on U280 and projected to 300 MHz (system A's FPGA clock)."""
    from hwmodel.dse.freq import run_freq_study

    st = run_freq_study("draft-u280", 200e6, 300e6, 512)
    paths = _write_study(st, ctx.obj["out_dir"] / "freq", svg=False)
    _print_study(st)
    click.echo(f"wrote {', '.join(str(p) for p in paths)}")


reproduce_freq.order = 60  # type: ignore[attr-defined]


@reproduce.command("dse")
@click.pass_context
def reproduce_dse(ctx: click.Context) -> None:
    """The example design-space sweep of the draft accelerator on U280 (examples/sweeps/draft_u280.toml)."""
    from hwmodel.cli.cmd_sweep import sweep_cmd

    ctx.invoke(
        sweep_cmd,
        spec=EXAMPLE_SWEEP,
        out_dir=ctx.obj["out_dir"] / "dse",
        workers=None,
        scheduler=None,
        chunk_size=None,
        fresh=False,
        dry_run=False,
        report_only=False,
        no_progress=False,
        fronts=(),
        top_k=None,
        rank_by=None,
        svg=False,
        as_json=False,
    )


reproduce_dse.order = 70  # type: ignore[attr-defined]
