"""Tables, plots and CSV rows of the instruction-driven FPGA model's sweeps (prefetch ratio, access size)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hwmodel.report.tables import write_csv
from hwmodel.units import fmt_s


def size_label(n: int) -> str:
    """Bytes as a short label: 256 B, 4 KB, 2 MB."""
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return f"{n >> 20} MB"
    return f"{n // 1024} KB" if n >= 1024 and n % 1024 == 0 else f"{n} B"


def write_rows_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    """Rows of one result type, columns in the first row's order (CRLF lines, cells as Python's csv writes them:
    the bytes these files have always had)."""
    write_csv(path, rows, list(rows[0]), line_end="\r\n", cells="plain")


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
            size_label(r.weight_access_bytes),
            size_label(r.metadata_access_bytes),
            "best" if r.best else "",
        )
    return t


def plot_sweep(rows: Any, design: Any, path: Path) -> None:
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
def plot_access_profile(rows: Any, board: Any, design: Any, path: Path) -> None:
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
