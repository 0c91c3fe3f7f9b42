"""`hwmodel fpga profile-port`: effective bandwidth of one HBM port versus request size, outstanding requests,
traffic pattern and port-to-channel map (fpga/hbm)."""

from __future__ import annotations

from typing import Any

import click

from hwmodel.cli.base import console, echo_json, json_option
from hwmodel.cli.cmd_fpga_decode import fpga
from hwmodel.cli.options import clock_option, parse_range
from hwmodel.errors import HwmodelError


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
    from fpga.hbm import profile as hbm_profile
    from hwmodel.domains import check_kernel_clock
    from hwmodel.specs import library

    b = library().board(board)
    check_kernel_clock(b, freq_mhz * 1e6, "--clock-mhz")
    hbm_profile.parse_pattern(pattern)
    size_list = [int(x) for x in parse_range(sizes, "--sizes") or []]
    outs = [int(x) for x in parse_range(outstanding, "--outstanding") or []]
    if any(s <= 0 for s in size_list) or any(o <= 0 for o in outs):
        raise HwmodelError("--sizes and --outstanding must be positive")
    chans = parse_channels(channels)
    rows = [
        hbm_profile.profile_bandwidth(
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
