"""Tables of a multi-unit token for ``hwmodel fpga decode --design`` (fpga/streaming/units_result.py): per unit where
its busiest engine's cycles went, per link hop its bytes and cycles."""

from __future__ import annotations

from typing import Any

from hwmodel.cli.base import console


def print_unit_tables(res: Any) -> None:
    """Print the units and links tables of a :class:`fpga.streaming.units_result.UnitTokenResult`."""
    from rich.table import Table

    total = max(1, res.cycles)
    t = Table(
        "unit",
        "engines",
        "finished at",
        "bottleneck",
        "busy",
        "waiting on inputs",
        "waiting on HBM",
        "waiting on FIFO space",
        "drain + done",
        title=f"{res.design}: compute units (split = {res.split}; cycles of each unit's busiest engine)",
    )
    for u in res.units:
        t.add_row(
            u["unit"],
            ", ".join(u["engines"]),
            f"{u['finish_cycles']:,}",
            u["bottleneck"],
            *(
                f"{u[k]:,} ({100 * u[k] / total:.0f} %)"
                for k in ("busy_cycles", "stall_in_cycles", "stall_mem_cycles", "stall_out_cycles")
            ),
            f"{u['drain_cycles'] + u['done_cycles']:,}",
        )
    console().print(t)
    links = Table(
        "hop",
        "kind",
        "bytes",
        "chunks",
        "busy",
        "waiting for data",
        "waiting for room",
        "utilization",
        title=f"{res.design}: links (exchanged per token: "
        + ", ".join(f"{k} {v:,} B" for k, v in res.exchange_bytes.items())
        + ")",
    )
    for x in res.links:
        links.add_row(
            x["hop"],
            x["kind"],
            f"{x['bytes']:,}",
            f"{x['chunks']:,}",
            f"{x['busy_cycles']:,}",
            f"{x['stall_in_cycles']:,}",
            f"{x['stall_out_cycles']:,}",
            f"{100 * x['utilization']:.1f} %",
        )
    console().print(links)
