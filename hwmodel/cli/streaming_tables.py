"""Rich tables of the streaming decode model's results (`hwmodel fpga decode` and the instruction model's
sensitivity band): where the cycles of one token went, and the prediction band over guessed fields."""

from __future__ import annotations

from typing import Any

from hwmodel.cli.base import console
from hwmodel.units import fmt_bw, fmt_s


def detail_tables(res: Any) -> None:
    """Per engine, per operator and per HBM channel: the cycles of one token and the bytes they moved."""
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


def temporal_line(design: Any, res: Any) -> str:
    """One line on a temporal design's phases (fpga/streaming/temporal.py): its fields, and (one unit) how much of
    the token its phases cover; the per-phase times are the operator spans of ``--detail``."""
    from fpga.streaming.temporal import temporal_facts

    f = temporal_facts(design, res)
    line = (
        f"execution: temporal phases, barrier {f['phase_barrier_cycles']} cycles, "
        f"{f['phase_prefetch_blocks']} blocks of a phase's loads prefetched"
    )
    if "units" in f:
        return line + " (units: " + ", ".join(f"{u} {s}" for u, s in f["units"].items()) + ")"
    return (
        line + f"; the phases cover {f['phase_cycles']:,} of {res.cycles:,} cycles, "
        f"{f['between_phases_cycles']:,} between them (per-phase time: --detail, span cycles)"
    )


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
