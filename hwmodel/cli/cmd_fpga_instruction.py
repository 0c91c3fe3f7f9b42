"""`hwmodel fpga prefetch-sweep | instruction ...`: the instruction-driven FPGA accelerator.

(`hwmodel fpga profile-hbm` is the board-level profile, raw and through the scheduler; the streaming module's
`hwmodel fpga profile-port` profiles one port against request size and outstanding requests.)"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import click

from hwmodel.cli.base import SpecName, console, echo_json, group, json_option
from hwmodel.cli.cmd_reproduce import reproduce
from hwmodel.cli.options import clock_option
from hwmodel.units import fmt_bytes, fmt_s

fpga = group("fpga")

instruction = click.Group(
    "instruction",
    help="The instruction-driven accelerator: designs, runs, instruction streams, timelines.",
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110},
)
fpga.add_command(instruction)


class DesignName(click.ParamType):
    """An instruction design: a built-in name or a TOML path (errors list the built-in names)."""

    name = "design"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value
        from fpga.instruction.design import load_design
        from hwmodel.errors import HwmodelError

        try:
            return load_design(value)
        except HwmodelError as exc:
            self.fail(str(exc), param, ctx)


def _size(n: int) -> str:
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return f"{n >> 20} MB"
    return f"{n // 1024} KB" if n >= 1024 and n % 1024 == 0 else f"{n} B"


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


# ============================================================================================== prefetch-sweep
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
        _write_csv(csv_out, data)
    if plot_out:
        _plot_sweep(rows, design, plot_out)
    if as_json:
        best = {r.seq: r.ratio for r in rows if r.best}
        echo_json({"design": design.name, "role": design.role, "best_ratio": best, "rows": data})
        return
    console().print(sweep_table(rows, design))


def sweep_table(rows: Any, design: Any) -> Any:
    from rich.table import Table

    note = "" if design.role == "calibrated" else " (predicted design)"
    t = Table(
        "seq",
        "ratio",
        "decode",
        "speedup",
        "HBM util.",
        "q_proj weight access",
        "metadata access",
        "best",
        title=f"Prefetch sweep, {design.display_name}{note}",
    )
    for r in rows:
        if not r.fits:
            t.add_row(str(r.seq), str(r.ratio), "does not fit the buffers", "", "", "", "", "")
            continue
        t.add_row(
            str(r.seq),
            str(r.ratio),
            f"{fmt_s(r.decode_s)}/token",
            f"{r.speedup:.3f}x",
            f"{100 * r.hbm_utilization:.1f} %",
            _size(r.weight_access_bytes),
            _size(r.metadata_access_bytes),
            "best" if r.best else "",
        )
    return t


def _plot_sweep(rows: Any, design: Any, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for seq in sorted({r.seq for r in rows}):
        pts = [r for r in rows if r.seq == seq and r.fits]
        ax.plot([r.ratio for r in pts], [r.speedup for r in pts], "o-", label=f"seq {seq}")
    ax.set_xlabel("prefetch ratio k")
    ax.set_ylabel("decode speedup over k = 1")
    ax.set_title(f"{design.name}: prefetch / coalescing sweep")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


# ============================================================================================== profile-hbm
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
        from fpga.hbm.channel import parse_pattern

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
        _write_csv(csv_out, data)
    if plot_out:
        _plot_profile(rows, board, design, plot_out)
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
            _size(r.access_bytes),
            f"{r.raw_bw_bytes_per_s / 1e9:.1f} GB/s",
            f"{100 * r.raw_efficiency:.0f} %",
            f"{r.scheduler_bw_bytes_per_s / 1e9:.1f} GB/s",
            f"{100 * r.scheduler_efficiency:.0f} %",
            f"{r.with_metadata_bw_bytes_per_s / 1e9:.1f} GB/s",
            f"{100 * r.with_metadata_efficiency:.0f} %",
        )
    console().print(t)


def _plot_profile(rows: Any, board: Any, design: Any, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    x = [r.access_bytes for r in rows]
    ax.semilogx(x, [r.raw_bw_bytes_per_s / 1e9 for r in rows], "o-", base=2, label="raw HBM (channel model)")
    ax.semilogx(
        x,
        [r.scheduler_bw_bytes_per_s / 1e9 for r in rows],
        "s-",
        base=2,
        label=f"through the scheduler ({design.name})",
    )
    ax.semilogx(
        x,
        [r.with_metadata_bw_bytes_per_s / 1e9 for r in rows],
        "^-",
        base=2,
        label="through the scheduler, + scale/zero-point loads",
    )
    ax.axhline(board.hbm.peak_bw_bytes_per_s / 1e9, color="grey", ls="--", lw=0.8, label="peak")
    ax.set_xlabel("access size per channel (bytes)")
    ax.set_ylabel("effective bandwidth (GB/s)")
    ax.set_title(f"{board.display_name}: bandwidth vs access size")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


@instruction.command("designs")
@json_option
def designs_cmd(as_json: bool) -> None:
    """List the built-in instruction designs."""
    from fpga.instruction.design import design_names, load_design

    rows = [
        {"name": n, "board": (d := load_design(n)).board, "llm": d.llm, "role": d.role, "display_name": d.display_name}
        for n in design_names()
    ]
    if as_json:
        echo_json(rows)
        return
    from rich.table import Table

    t = Table("name", "board", "LLM", "role", "display name")
    for r in rows:
        t.add_row(r["name"], r["board"], r["llm"], r["role"], r["display_name"])
    console().print(t)


@instruction.command("run")
@click.option(
    "--design",
    "design",
    type=DesignName(),
    default="glitches-u280",
    show_default=True,
    help="Instruction-driven design: a built-in name or a design TOML file.",
)
@click.option("--ratio", type=click.IntRange(min=1), default=None, help="Prefetch ratio [default: the design's].")
@click.option(
    "--ctx",
    type=click.IntRange(min=0),
    default=1536,
    show_default=True,
    help="Tokens in the KV cache before the step / prefill.",
)
@click.option(
    "--prefill",
    "prefill_tokens",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Prefill this many tokens instead of decoding one.",
)
@clock_option(
    "clock_hz", unit="Hz", help="Kernel clock override in MHz (the HBM keeps its own clock) [default: the design's]."
)
@click.option(
    "--ingest",
    "--no-lm-head",
    "ingest",
    is_flag=True,
    help="Ingested token(s): logits discarded, no output head (as `fpga decode --ingest`).",
)
@click.option(
    "--sensitivity",
    is_flag=True,
    help="Vary every [estimate] integer of the design over its documented range: per-field latency "
    "movement and the joint band (docs/model-your-design.md).",
)
@click.option("--vary", default=None, help="With --sensitivity: only these field names (comma list).")
@click.option(
    "--output-tokens",
    type=click.IntRange(min=1),
    default=None,
    help="Also the mean figures of this many decode steps from --ctx (a generation window).",
)
@json_option
def run_cmd(
    design: Any,
    ratio: int | None,
    ctx: int,
    prefill_tokens: int,
    clock_hz: float | None,
    ingest: bool,
    sensitivity: bool,
    vary: str | None,
    output_tokens: int | None,
    as_json: bool,
) -> None:
    """Simulate one decode step (or a prefill) cycle by cycle and print time, traffic and unit activity."""
    from fpga.instruction.engine import InstructionEngine
    from hwmodel.quantities import decode_point, decode_window, prefill_power_w

    def point_of(d: Any) -> tuple[Any, Any]:
        e = InstructionEngine(d, prefetch_ratio=ratio, clock_hz=clock_hz)
        if ingest:
            return e, e.prefill(max(1, prefill_tokens), ctx, logits=False)
        return e, (e.prefill(prefill_tokens, ctx) if prefill_tokens else e.decode(ctx))

    eng, res = point_of(design)
    band = None
    if sensitivity:
        from hwmodel.studies.sensitivity import instruction_knobs
        from hwmodel.studies.sensitivity import sensitivity as band_of

        guesses = instruction_knobs(design, vary.split(",") if vary else None)
        band = band_of(design, lambda d: point_of(d)[1].seconds, guesses=guesses)
    point = None if prefill_tokens else decode_point(eng, ctx)
    power = prefill_power_w(eng, prefill_tokens, ctx) if point is None else point.power_w
    window = decode_window(eng, ctx, output_tokens) if output_tokens and not (prefill_tokens or ingest) else None
    out = {
        "design": design.name,
        "role": design.role,
        "prefetch_ratio": eng.prefetch_ratio,
        "ctx": ctx,
        "prefill_tokens": prefill_tokens,
        "ingest": ingest,
        **res.as_dict(),
        "power_w": power,
        "energy_j": power * res.seconds,
        "weights_bytes": eng.weights_bytes,
        "kv_bytes": eng.kv_bytes(ctx),
    }
    if point is not None and not ingest:
        out["decode"] = point.to_dict()
    if window:
        out["window"] = window.to_dict()
    if band is not None:
        out["sensitivity"] = band
    if as_json:
        echo_json(out)
        return
    from rich.table import Table

    what = f"prefill of {prefill_tokens} tokens" if prefill_tokens else "one decode step"
    if ingest:
        what = f"ingest of {max(1, prefill_tokens)} token(s), no output head"
    t = Table(
        "quantity",
        "value",
        title=f"{design.display_name}, k={eng.prefetch_ratio}: {what} at ctx {ctx}"
        + ("" if design.role == "calibrated" else " (predicted)"),
    )
    c = res.counters
    for label, value in [
        ("time", fmt_s(res.seconds) + (f" ({1 / res.seconds:.1f} tokens/s)" if not prefill_tokens else "")),
        (
            "kernel cycles",
            f"{res.cycles:,} at {design.clock_hz / 1e6:.0f} MHz"
            if clock_hz is None
            else f"{res.cycles:,} at {clock_hz / 1e6:.0f} MHz",
        ),
        (
            "instructions",
            f"{c['instructions']:,} (DM {c['dm_instructions']:,}, MPE {c['mpe_instructions']:,}, "
            f"SFU {c['sfu_instructions']:,})",
        ),
        ("HBM traffic", f"{fmt_bytes(res.hbm_bytes)} in {c['requests']:,} requests"),
        ("HBM utilization", f"{100 * res.hbm_utilization:.1f} % of {eng.board.hbm.peak_bw_bytes_per_s / 1e9:.0f} GB/s"),
        ("MPE busy", f"{100 * res.mpe_busy_fraction:.1f} %"),
        ("SFU busy", f"{100 * res.sfu_busy_fraction:.1f} %"),
        ("board power", f"{power:.1f} W"),
        *([] if point is None else [("tokens/s/W (this step)", f"{point.tokens_per_s_per_w:.3f}")]),
        *(
            [
                (
                    f"mean of {output_tokens} steps",
                    f"{fmt_s(window.seconds_per_token)}/token, {window.power_w:.1f} W, "
                    f"{window.tokens_per_s_per_w:.3f} tokens/s/W",
                )
            ]
            if window
            else []
        ),
        ("weights + metadata in HBM", fmt_bytes(eng.weights_bytes)),
        (f"KV cache of {ctx} tokens", fmt_bytes(eng.kv_bytes(ctx))),
    ]:
        t.add_row(label, value)
    console().print(t)
    if band is not None:
        from hwmodel.cli.streaming_tables import sensitivity_table

        sensitivity_table(band, f"{design.name}: prediction band")


@instruction.command("dump")
@click.option(
    "--design",
    "design",
    type=DesignName(),
    default="glitches-u280",
    show_default=True,
    help="Instruction-driven design: a built-in name or a design TOML file.",
)
@click.option("--ratio", type=click.IntRange(min=1), default=None, help="Prefetch ratio [default: the design's].")
@click.option(
    "--ctx", type=click.IntRange(min=0), default=128, show_default=True, help="Tokens in the KV cache before the step."
)
@click.option(
    "--layer",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Decoder layer to print (the prologue comes with layer 0).",
)
@click.option("--limit", type=click.IntRange(min=1), default=60, show_default=True, help="Instructions to print.")
def dump_cmd(design: Any, ratio: int | None, ctx: int, layer: int, limit: int) -> None:
    """Print the decode instruction stream of one layer as assembly (sizes per channel, scoreboard waits)."""
    from fpga.instruction import isa
    from fpga.instruction.engine import InstructionEngine
    from hwmodel.errors import HwmodelError

    eng = InstructionEngine(design, prefetch_ratio=ratio)
    if layer >= eng.llm.layers:
        raise HwmodelError(f"--layer: {eng.llm.name} has layers 0..{eng.llm.layers - 1}, got {layer}")
    prog = eng.compiler.decode_program(ctx)
    seg_of_layer, first = [], 0
    for s in prog.segments[1:-1]:
        seg_of_layer += [(s, r) for r in range(s.reps)]
        first += 1
    seg, rep = seg_of_layer[layer]
    rows = seg.instrs.copy()
    rows[:, isa.F_ADDR] += rep * rows[:, isa.F_ASTRIDE]
    lines = isa.disassemble(prog.segments[0].instrs) if layer == 0 else []
    lines += isa.disassemble(rows)
    click.echo(f"# {design.name} k={eng.prefetch_ratio} decode at ctx {ctx}, layer {layer}: {len(rows)} instructions")
    for i, line in enumerate(lines[:limit]):
        click.echo(f"{i:6d}  {line}")


@instruction.command("trace")
@click.option(
    "--design",
    "design",
    type=DesignName(),
    default="glitches-u280",
    show_default=True,
    help="Instruction-driven design: a built-in name or a design TOML file.",
)
@click.option("--ratio", type=click.IntRange(min=1), default=None, help="Prefetch ratio [default: the design's].")
@click.option(
    "--ctx", type=click.IntRange(min=0), default=128, show_default=True, help="Tokens in the KV cache before the step."
)
@click.option(
    "--prefill",
    "prefill_tokens",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Trace a prefill of this many tokens instead of a decode step.",
)
@click.option(
    "--max-instructions",
    type=click.IntRange(min=1),
    default=20000,
    show_default=True,
    help="Instructions traced per unit (from the start).",
)
@click.option(
    "--out",
    "out_path",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="Chrome/Perfetto trace JSON to write (open in ui.perfetto.dev).",
)
def trace_cmd(
    design: Any, ratio: int | None, ctx: int, prefill_tokens: int, max_instructions: int, out_path: Path
) -> None:
    """Write a Perfetto timeline of the DM, MPE and SFU units (one event per instruction)."""
    from hwmodel.studies.instruction import chrome_trace

    trace = chrome_trace(design, ratio or design.prefetch_ratio, ctx, max_instructions, prefill_tokens)
    out_path.write_text(json.dumps(trace))
    click.echo(f"wrote {out_path}: {len(trace['traceEvents'])} events, {trace['otherData']['cycles']:,} cycles")


# ============================================================================================== reproduce
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
        _write_csv(out_dir / f"prefetch_sweep_{name}.csv", [r.as_dict() for r in sweep])
        console().print(sweep_table(sweep, d))
    u280 = library().board("u280")
    prof = profile_hbm(u280, load_design("glitches-u280"), [256 << i for i in range(13)])
    _write_csv(out_dir / "profile_hbm_u280.csv", [r.as_dict() for r in prof])
    click.echo(f"wrote {out_dir}")


reproduce_glitches_fpga.order = 30  # type: ignore[attr-defined]
