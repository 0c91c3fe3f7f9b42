"""`hwmodel fpga decode | designs | profile-port` and `hwmodel reproduce streaming`: the cycle-level streaming decode
model from the command line."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import click

from hwmodel.cli.base import console, echo_json, group, json_option
from hwmodel.cli.cmd_reproduce import reproduce
from hwmodel.cli.options import AliasOption, clock_option
from hwmodel.errors import HwmodelError
from hwmodel.units import fmt_bw, fmt_s

fpga = group("fpga")
MAX_RANGE_POINTS = 10_000


def _range(text: str | None, what: str) -> list[float] | None:
    """'A:B:S' -> [A, A+S, ..., <= B]; 'A,B,C' -> the list."""
    if text is None:
        return None
    try:
        if ":" in text:
            a, b, s = (float(x) for x in text.split(":"))
            if not all(map(math.isfinite, (a, b, s))) or s <= 0 or b < a or (b - a) / s >= MAX_RANGE_POINTS:
                raise ValueError
            n = int((b - a) / s + 1e-9) + 1
            return [a + i * s for i in range(n)]
        vals = [float(x) for x in text.split(",")]
        if not all(map(math.isfinite, vals)) or len(vals) > MAX_RANGE_POINTS:
            raise ValueError
        return vals
    except ValueError:
        raise HwmodelError(
            f"{what}: expected A:B:S (start:stop:step, step > 0) or a comma list of finite numbers "
            f"(at most {MAX_RANGE_POINTS} points), got '{text}'"
        ) from None


def _row(res: Any) -> dict[str, Any]:
    return {
        "design": res.design,
        "ctx": res.ctx,
        "clock_mhz": res.clock_hz / 1e6,
        "cycles": res.cycles,
        "seconds": res.seconds,
        "tokens_per_s": res.tokens_per_s,
        "hbm_bytes": res.hbm_bytes,
        "achieved_bw_bytes_per_s": res.achieved_bw_bytes_per_s,
        "hbm_utilization": res.hbm_utilization,
        "ports_utilization": res.ports_utilization,
        "bandwidth_floor_s": res.bandwidth_floor_s,
    }


def _floor_s(design: Any, ctx: int, ingest: bool) -> float:
    """The design's own floor (fpga/streaming/placement.py): what `hwmodel bounds --design` prints."""
    from fpga.streaming.placement import design_floor

    return design_floor(design, ctx, with_lm_head=not ingest).floor_s


def _detail_tables(res: Any) -> None:
    from rich.table import Table

    c = console()
    t = Table(
        "engine",
        "busy",
        "drain",
        "wait input",
        "wait HBM",
        "wait FIFO",
        "done",
        "busy %",
        title=f"{res.design}: cycles per engine (token of {res.cycles:,} cycles)",
    )
    for name, e in res.engine_cycles.items():
        t.add_row(
            name,
            *(f"{e[k]:,}" for k in ("busy", "drain", "stall_in", "stall_mem", "stall_out", "done")),
            f"{100 * e['busy'] / res.cycles:.1f}",
        )
    c.print(t)
    t = Table("operator", "busy cycles", "span cycles", "span share", title="per operator (summed over layers)")
    for op, busy in res.op_busy_cycles.items():
        span = res.op_span_cycles[op]
        t.add_row(op, f"{busy:,}", f"{span:,}", f"{100 * span / res.cycles:.1f} %")
    c.print(t)
    t = Table(
        "engine",
        "ports",
        "read / port",
        "written (total)",
        "bus busy (AXI cycles)",
        "BW / port",
        "util.",
        "row misses",
        "refresh defers",
        title="HBM channels",
    )
    by_eng: dict[str, list[dict[str, Any]]] = {}
    for ch in res.channels:
        by_eng.setdefault(ch["engine"], []).append(ch)
    for name, chs in by_eng.items():
        n = len(chs)
        t.add_row(
            name,
            str(n),
            f"{max(x['read_bytes'] for x in chs) / 1e6:.2f} MB",
            f"{sum(x['write_bytes'] for x in chs):,} B",
            f"{max(x['busy_axi_cycles'] for x in chs):,}",
            fmt_bw(max(x["bw_bytes_per_s"] for x in chs)),
            f"{max(x['utilization'] for x in chs):.2f}",
            f"{max(x['row_misses'] for x in chs):,}",
            f"{max(x['refresh_defers'] for x in chs):,}",
        )
    c.print(t)


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
    ctxs = [int(c) for c in (_range(ctx_range, "--ctx-range") or [ctx])]
    freqs = _range(freq_range, "--clock-range") or [design.clock_hz / 1e6]
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
            rows.append({**_row(res), "design_floor_s": _floor_s(design, c, ingest)})
            prog.advance(task)
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
    if design.units and len(results) == 1:  # per-unit and per-link cycles (hwmodel/cli/units_tables.py)
        from hwmodel.cli.units_tables import print_unit_tables

        print_unit_tables(results[0])
    if detail and len(results) == 1:
        _detail_tables(results[0])
    if band is not None:
        sensitivity_table(band, f"{design.name}: prediction band at ctx {ctxs[0]}")


def sensitivity_table(band: dict[str, Any], title: str) -> None:
    """Per guessed field: its status, value, range, latency at both ends, and the joint band."""
    from rich.markup import escape
    from rich.table import Table

    def cell(row: dict[str, Any], side: str) -> str:
        v = row[f"{side}_s"]
        return fmt_s(v) if v is not None else f"refused: {row[side + '_error'][:60]}"

    t = Table("field", "status", "value", "range", "latency at low", "latency at high", "swing", title=title)
    for r in band["fields"]:
        t.add_row(
            escape(r["field"]),
            r["status"],
            str(r["value"]),
            f"{r['low']} .. {r['high']}",
            cell(r, "low"),
            cell(r, "high"),
            f"{100 * r['swing_fraction']:.1f} %",
        )
    c = console()
    c.print(t)
    lo, hi = band["band_s"]
    c.print(
        f"nominal {fmt_s(band['nominal_s'])}; band over all {len(band['fields'])} guessed fields together: "
        f"{fmt_s(lo) if lo is not None else 'refused'} .. {fmt_s(hi) if hi is not None else 'refused'}",
        markup=False,
        soft_wrap=True,
    )


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


@fpga.command("profile-port")
@click.option("--board", default="u280", show_default=True, help="FPGA board spec name.")
@clock_option("freq_mhz", default=300.0, help="Kernel clock in MHz (within the board's kernel-clock range).")
@click.option(
    "--sizes",
    default="32,64,128,256,512,1024,4096,16384,65536",
    show_default=True,
    help="Request sizes in bytes (comma list).",
)
@click.option("--outstanding", default="1,4,16,64", show_default=True, help="Requests in flight (comma list).")
@click.option(
    "--port-width",
    type=click.Choice(["64", "128", "256", "512", "1024"]),
    default="512",
    show_default=True,
    help="Kernel-side port width in bits.",
)
@click.option(
    "--offset",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Start address offset (non-multiples of 32 B are misaligned).",
)
@click.option(
    "--pattern",
    default="sequential",
    show_default=True,
    help="sequential | strided:BYTES | random[:SPAN] (SPAN in bytes, K/M/G suffixes; default the whole "
    "pseudo-channel).",
)
@click.option(
    "--write-fraction",
    type=click.FloatRange(0, 1),
    default=0.0,
    show_default=True,
    help="Fraction of requests that are writes (seeded).",
)
@click.option(
    "--channels",
    default="0",
    show_default=True,
    help="Pseudo-channels the port reaches (comma list / a:b ranges): the port-to-channel map.",
)
@click.option("--port", type=click.IntRange(min=0), default=None, help="AXI port (default: the first channel's).")
@click.option(
    "--total-bytes", type=click.IntRange(min=1), default=4 << 20, show_default=True, help="Bytes moved per point."
)
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Seed of random patterns.")
@click.option(
    "--ids",
    "axi_ids",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="AXI IDs the port cycles through (1: an HLS m_axi port; PG276 ports take up to 64).",
)
@click.option(
    "--outstanding-writes",
    type=click.IntRange(min=1),
    default=None,
    help="Writes in flight (default: the --outstanding value of the point).",
)
@click.option(
    "--reorder/--no-reorder",
    default=None,
    help="The controller's request reordering (PG276 64-entry queue); default: the board's.",
)
@click.option(
    "--masters",
    type=click.IntRange(1, 32),
    default=1,
    show_default=True,
    help="Ports (AXI ports --port, --port + 1, ...) sharing the channels, each with this traffic.",
)
@click.option(
    "--plot",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write bandwidth vs request size, one line per outstanding count (PNG or SVG).",
)
@json_option
def profile_hbm_cmd(
    board: str,
    freq_mhz: float,
    sizes: str,
    outstanding: str,
    port_width: str,
    offset: int,
    pattern: str,
    write_fraction: float,
    channels: str,
    port: int | None,
    total_bytes: int,
    seed: int,
    axi_ids: int,
    outstanding_writes: int | None,
    reorder: bool | None,
    masters: int,
    plot: str | None,
    as_json: bool,
) -> None:
    """Effective bandwidth of one HBM port versus request size and outstanding requests, for a traffic pattern,
    read/write mix and port-to-channel map (bank-level channel model and the HBM switch, docs/hbm.md)."""
    from fpga.hbm import channel as hbm
    from hwmodel.domains import check_kernel_clock
    from hwmodel.specs import library

    b = library().board(board)
    check_kernel_clock(b, freq_mhz * 1e6, "--clock-mhz")
    hbm.parse_pattern(pattern)
    size_list = [int(x) for x in _range(sizes, "--sizes") or []]
    outs = [int(x) for x in _range(outstanding, "--outstanding") or []]
    if any(s <= 0 for s in size_list) or any(o <= 0 for o in outs):
        raise HwmodelError("--sizes and --outstanding must be positive")
    chans = parse_channels(channels)
    rows = [
        hbm.profile_bandwidth(
            b,
            freq_mhz * 1e6,
            s,
            outstanding=o,
            port_width_bits=int(port_width),
            offset_bytes=offset,
            pattern=pattern,
            write_fraction=write_fraction,
            channels=chans,
            port=port,
            total_bytes=max(total_bytes, s),
            seed=seed,
            axi_ids=axi_ids,
            outstanding_writes=outstanding_writes,
            reorder=reorder,
            masters=masters,
        )
        for s in size_list
        for o in outs
    ]
    reo = "reorder " + ("on" if rows[0]["reorder_window"] > 1 else "off") if rows else ""
    if plot:
        plot_profile(
            rows,
            size_list,
            outs,
            plot,
            f"{board}: {pattern}, {len(chans)} channel(s), {int(100 * write_fraction)} % writes, {freq_mhz:g} MHz",
        )
    if as_json:
        echo_json(rows)
        return
    from rich.table import Table

    t = Table(
        "request",
        *(f"{o} outstanding" for o in outs),
        title=f"{board}: {masters if masters > 1 else 'one'} {port_width}-bit port{'s' if masters > 1 else ''}"
        f" at {freq_mhz:g} MHz, {pattern}, "
        f"{int(100 * write_fraction)} % writes, channels {channels}"
        + (f", offset {offset} B" if offset else "")
        + f", {axi_ids} AXI ID(s), {reo}"
        " (GB/s, efficiency vs channel peak)",
    )
    for s in size_list:
        cells = [r for r in rows if r["req_bytes"] == s]
        t.add_row(f"{s} B", *(f"{r['bw_bytes_per_s'] / 1e9:.2f} ({100 * r['efficiency']:.0f} %)" for r in cells))
    console().print(t)


def parse_channels(text: str) -> tuple[int, ...]:
    """'0,1,4:8' -> (0, 1, 4, 5, 6, 7)."""
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            if ":" in part:
                a, c = part.split(":", 1)
                out.extend(range(int(a), int(c)))
            else:
                out.append(int(part))
        except ValueError:
            raise HwmodelError(f"--channels: '{part}' is not a channel number or a:b range") from None
    if not out:
        raise HwmodelError("--channels: at least one pseudo-channel")
    return tuple(out)


def plot_profile(rows: list[dict[str, Any]], sizes: list[int], outs: list[int], path: str, title: str) -> None:
    """Bandwidth vs request size, one line per outstanding-request count."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for o in outs:
        ys = [
            next(r["bw_bytes_per_s"] for r in rows if r["req_bytes"] == s and r["outstanding"] == o) / 1e9
            for s in sizes
        ]
        ax.plot(sizes, ys, marker="o", label=f"{o} outstanding")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("request size (B)")
    ax.set_ylabel("bandwidth (GB/s)")
    ax.set_title(title, fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def freq_table(
    ctx: int = 512, freqs: tuple[int, ...] = (150, 200, 225, 250, 300, 350, 400, 450)
) -> list[dict[str, Any]]:
    """Decode time of draft-u280 (512-bit ports) and its 256-bit-port variant versus the kernel clock."""
    import dataclasses

    from fpga.streaming.engine import load_design, simulate_token

    d512 = load_design("draft-u280")
    d256 = d512.with_engine("linear", port_width_bits=256).with_engine("attn", port_width_bits=256)
    rows = []
    for f in freqs:
        r512 = simulate_token(d512, ctx, clock_hz=f * 1e6)
        r256 = simulate_token(dataclasses.replace(d256, name="draft-u280-256bit"), ctx, clock_hz=f * 1e6)
        rows.append(
            {
                "clock_mhz": f,
                "ctx": ctx,
                "t512_s": r512.seconds,
                "util512": r512.hbm_utilization,
                "t256_s": r256.seconds,
                "util256": r256.hbm_utilization,
            }
        )
    return rows


@reproduce.command("streaming")
@click.pass_context
def reproduce_streaming(ctx: click.Context) -> None:
    """Streaming decode model: draft-u280 latency and HBM utilization at 300 MHz, the clock sweep 150-450 MHz for
    512- and 256-bit ports, and the three built-in designs at ctx 0..4096."""
    from rich.table import Table

    from fpga.streaming.design import design_names
    from fpga.streaming.engine import StreamingEngine

    out_dir: Path = ctx.obj["out_dir"] / "streaming"
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in design_names():
        eng = StreamingEngine(name)
        for c in (0, 512, 1024, 2048, 4096):
            if c <= eng.design.max_ctx:
                rows.append(_row(eng.token(c)))
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
    ft = freq_table()
    with open(out_dir / "clock_sweep.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(ft[0]))
        w.writeheader()
        w.writerows(ft)
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
