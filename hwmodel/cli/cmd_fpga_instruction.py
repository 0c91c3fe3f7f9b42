"""`hwmodel fpga instruction designs | run | dump | trace`: the instruction-driven FPGA accelerator (its sweeps,
`hwmodel fpga prefetch-sweep | profile-hbm`: cmd_fpga_instruction_sweeps.py; `hwmodel reproduce glitches-fpga`:
cmd_reproduce_glitches_fpga.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from hwmodel.cli.base import console, echo_json, group, json_option
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
    help="Vary every [estimate] integer of the design over its documented range, and the execution-style fields "
    "it leaves at their default (load/compute overlap, prefetch depth, with several engines the sync cost): "
    "per-field latency movement and the joint band (docs/model-your-design.md).",
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

        names = vary.split(",") if vary else None
        guesses = instruction_knobs(design, names) + overlay_knobs(design, names)
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
        "overlay": overlay_fields(design),
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
    if res.engines:
        engines_table(design, res)
    if band is not None:
        from hwmodel.cli.streaming_tables import sensitivity_table

        sensitivity_table(band, f"{design.name}: prediction band")


def overlay_fields(design: Any) -> dict[str, Any]:
    """The execution-style fields of an overlay (JSON key ``overlay``): engines and placement, load/compute
    overlap, prefetch depth, instruction issue cost, cross-engine synchronisation cost."""
    p = design.placement
    return {
        "engines": design.engines,
        "placement": {"linears": p.linears, "attention": p.attention},
        "overlap_loads": design.buffers.overlap_loads,
        "prefetch_depth": design.buffers.prefetch_depth,
        "issue_cycles": design.scheduler.issue_cycles,
        "sync_cycles": design.scheduler.sync_cycles,
    }


def overlay_knobs(design: Any, fields: list[str] | None) -> list[Any]:
    """Execution-style fields a design file leaves at their default, for the prediction band: the prefetch depth
    (unbounded .. double buffering) when loads overlap compute, and, with several engines, the synchronisation
    cost (x/2 .. 2x). Written with an [estimate] source, they are varied like any estimate (instruction_knobs)."""
    from hwmodel.schema import read_toml
    from hwmodel.studies.sensitivity import Knob

    raw = read_toml(Path(design.origin)) if design.origin and Path(design.origin).exists() else {}
    want = set(fields) if fields else None
    out = []
    b, sch = design.buffers, design.scheduler
    if b.overlap_loads and "prefetch_depth" not in raw.get("buffers", {}):
        out.append(Knob("buffers.prefetch_depth", None, "prefetch_depth", "default", b.prefetch_depth, 1, 0))
    if design.engines > 1 and "sync_cycles" not in raw.get("scheduler", {}):
        v = sch.sync_cycles
        out.append(Knob("scheduler.sync_cycles", None, "sync_cycles", "default", v, max(1, v // 2), 2 * v))
    return [k for k in out if want is None or k.field in want]


def engines_table(design: Any, res: Any) -> None:
    """Per engine of a design of several: instructions, busy cycles, bytes, semaphores, time waiting."""
    from rich.table import Table

    p = design.placement
    t = Table(
        "engine",
        "role",
        "instructions",
        "MPE busy",
        "HBM bytes",
        "MACs",
        "signals",
        "waiting",
        "done at",
        title=f"{design.engines} engines: linears {p.linears}, attention on engine {p.attention}",
    )
    for i, e in enumerate(res.engines):
        role = ("attention + " if i == p.attention else "") + ("linears" if p.linear_engine in (None, i) else "")
        t.add_row(
            str(i),
            role.rstrip(" +") or "-",
            f"{e['instructions']:,}",
            f"{100 * e['mpe_busy_cycles'] / res.cycles:.1f} %",
            fmt_bytes(e["read_bytes"] + e["write_bytes"]),
            f"{e['macs']:,}",
            f"{e['signals']:,}",
            f"{100 * e['wait_cycles'] / res.cycles:.1f} % of cycles",
            f"{e['finish_cycle']:,}",
        )
    console().print(t)


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
@click.option(
    "--engine",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Which engine's stream to print (designs of several engines).",
)
def dump_cmd(design: Any, ratio: int | None, ctx: int, layer: int, limit: int, engine: int) -> None:
    """Print the decode instruction stream of one layer as assembly (sizes per channel, scoreboard waits)."""
    from fpga.instruction import isa
    from fpga.instruction.engine import InstructionEngine
    from hwmodel.errors import HwmodelError

    eng = InstructionEngine(design, prefetch_ratio=ratio)
    if layer >= eng.llm.layers:
        raise HwmodelError(f"--layer: {eng.llm.name} has layers 0..{eng.llm.layers - 1}, got {layer}")
    prog = eng.compiler.decode_program(ctx)
    if design.engines > 1:
        if engine >= design.engines:
            raise HwmodelError(f"--engine: design '{design.name}' has engines 0..{design.engines - 1}, got {engine}")
        prog = prog.engines[engine]
    seg_of_layer, first = [], 0
    for s in prog.segments[1:-1]:
        seg_of_layer += [(s, r) for r in range(s.reps)]
        first += 1
    seg, rep = seg_of_layer[layer]
    rows = seg.instrs.copy()
    rows[:, isa.F_ADDR] += rep * rows[:, isa.F_ASTRIDE]
    lines = isa.disassemble(prog.segments[0].instrs) if layer == 0 else []
    lines += isa.disassemble(rows)
    which = f", engine {engine}" if design.engines > 1 else ""
    click.echo(
        f"# {design.name}{which} k={eng.prefetch_ratio} decode at ctx {ctx}, layer {layer}: {len(rows)} instructions"
    )
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
    from hwmodel.errors import HwmodelError

    if design.engines > 1:
        raise HwmodelError(f"trace: design '{design.name}' has {design.engines} engines; traces cover one engine")
    from hwmodel.studies.instruction import chrome_trace

    trace = chrome_trace(design, ratio or design.prefetch_ratio, ctx, max_instructions, prefill_tokens)
    out_path.write_text(json.dumps(trace))
    click.echo(f"wrote {out_path}: {len(trace['traceEvents'])} events, {trace['otherData']['cycles']:,} cycles")
