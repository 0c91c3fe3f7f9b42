"""Replicas of a simulation over seeds, reported: JSON, a table of means with intervals, per-seed CSV and an
error-bar plot (`hwmodel serve run --seeds`, `hwmodel reason run --seeds`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from hwmodel.cli.base import console, echo_json


def report_replicas(
    reps: Any, headline: tuple[str, ...], out_dir: Path | None, plot_path: Path | None, as_json: bool
) -> None:
    """Print (or write) replicas: JSON, a table of means with intervals, per-seed CSV and an error-bar plot."""
    import json

    from hwmodel.report.tables import write_csv

    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "replicas.json").write_text(json.dumps(reps.to_dict(), indent=1, sort_keys=True) + "\n")
        (out_dir / "replicas.md").write_text(reps.markdown(headline) + "\n")
        recs = reps.records()
        write_csv(out_dir / "seeds.csv", recs, list(recs[0]))
    if plot_path is not None:
        reps.plot(plot_path, headline)
    if as_json:
        echo_json(reps.to_dict())
        return
    from rich.table import Table

    conf = int(round(100 * reps[headline[0]].confidence))
    t = Table(
        "metric",
        "mean",
        f"{conf} % interval",
        "std over seeds",
        title=f"{reps.what}: {reps.n} seeds ({reps.seeds[0]}..{reps.seeds[-1]})",
    )
    for m in headline:
        iv = reps[m]
        t.add_row(m, f"{iv.mean:.4g}", f"[{iv.low:.4g}, {iv.high:.4g}]", f"{iv.std:.3g}")
    console().print(t)
    for path in ([out_dir / "replicas.json", out_dir / "replicas.md", out_dir / "seeds.csv"] if out_dir else []) + (
        [plot_path] if plot_path else []
    ):
        click.echo(f"wrote {path}")
