"""Plots (matplotlib, Agg backend): grouped bar charts in one or more panels (generic)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def grouped_bars(
    path: Path | str,
    panels: Mapping[str, Mapping[str, Mapping[str, float]]],
    series: Sequence[str],
    *,
    ylabel: str,
    title: str = "",
    hatched: Sequence[str] = (),
    colors: Mapping[str, str] | None = None,
    reference_band: tuple[float, float, str] | None = None,
    band_panels: Sequence[str] | None = None,
    dpi: int = 150,
) -> Path:
    """One panel per key of ``panels``; in each, one group per category and one bar per series
    (``panels[panel][category][series] = value``). Series named in ``hatched`` are drawn hatched. An optional
    horizontal ``reference_band`` (low, high, label) marks a published range, on the panels named in
    ``band_panels`` (default: all). PNG or SVG by the file suffix."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n = len(panels)
    fig, axes = plt.subplots(1, n, figsize=(5.5 * n, 4.2), squeeze=False, sharey=True)
    width = 0.8 / max(1, len(series))
    for ax, (panel, cats) in zip(axes[0], panels.items()):
        names = list(cats)
        for k, s in enumerate(series):
            xs = [i + (k - (len(series) - 1) / 2) * width for i in range(len(names))]
            ys = [cats[c].get(s, float("nan")) for c in names]
            ax.bar(
                xs,
                ys,
                width,
                label=s,
                hatch="//" if s in hatched else None,
                color=(colors or {}).get(s),
                edgecolor="black",
                linewidth=0.5,
            )
        if reference_band is not None and (band_panels is None or panel in band_panels):
            lo, hi, label = reference_band
            ax.axhspan(lo, hi, color="grey", alpha=0.2, label=label)
        ax.axhline(1.0, color="black", linewidth=0.6)
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names, rotation=0)
        ax.set_title(panel)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel(ylabel)
    handles, labels = [], []
    for ax in axes[0]:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    fig.legend(handles, labels, loc="lower center", ncol=min(4, len(labels)), frameon=False)
    if title:
        fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.12, 1, 0.95))
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


def save_figure(fig: Any, stem: Path | str, svg: bool = False) -> list[Path]:
    """Write ``fig`` as STEM.png (and STEM.svg when ``svg``), close it, and return the paths written."""
    import matplotlib.pyplot as plt

    stem = Path(stem)
    out = [stem.with_suffix(".png")] + ([stem.with_suffix(".svg")] if svg else [])
    for path in out:
        fig.savefig(path)
    plt.close(fig)
    return out
