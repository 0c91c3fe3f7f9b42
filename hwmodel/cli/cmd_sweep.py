"""`hwmodel sweep SPEC.toml`: design-space exploration on local processes or a Dask cluster, resumable."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from hwmodel.cli.base import console, echo_json, json_option, main


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _print_plan(plan: Any, out_dir: Path, as_json: bool) -> None:
    from hwmodel.dse.runner import open_store, split_work

    rows = open_store(plan, out_dir).read()
    _screened, pending, done = split_work(plan, rows)
    info = {
        "sweep": plan.name,
        "evaluator": f"{plan.evaluator.name} (version {plan.evaluator.version})",
        "sampling": plan.sweep.sampling,
        "points": len(plan.points),
        "screened_out": len(plan.screened_out),
        "already_finished": done,
        "to_evaluate": len(pending),
        "axes": {a.name: a.describe() for a in plan.axes},
        "objectives": dict(plan.objectives),
        "constraints": plan.describe_constraints(),
        "fronts": [list(f) for f in plan.fronts],
        "results": str(out_dir / "results.csv"),
    }
    if as_json:
        echo_json(info)
        return
    from rich.table import Table

    t = Table("item", "value", title=f"Sweep plan: {plan.name}")
    for k, v in info.items():
        if isinstance(v, dict):
            v = "\n".join(f"{kk}: {vv}" for kk, vv in v.items())
        elif isinstance(v, list):
            v = "\n".join(str(x) for x in v) or "-"
        t.add_row(k, str(v))
    console().print(t)


def _print_report(rep: Any) -> None:
    from rich.table import Table

    plan = rep.plan
    varied = [a.name for a in plan.axes if a.size != 1]
    shown_metrics = list(dict.fromkeys([m for m, _s in plan.objectives] + ([plan.color_by] if plan.color_by else [])))
    c = rep.counts()
    console().print(
        f"{c['finished']:,} of {c['points']:,} points finished: {c['feasible']:,} feasible, "
        f"{c['infeasible']:,} break a constraint ({c['screened']:,} screened out before simulation), "
        f"{c['invalid']:,} invalid"
    )
    if not rep.top:
        console().print("[yellow]no feasible point yet[/]")
        return
    t = Table("#", *varied, *shown_metrics, title=f"Top {len(rep.top)} by {plan.rank_by} ({plan.sense[plan.rank_by]})")
    for rank, i in enumerate(rep.top, start=1):
        r = rep.rows[i].row
        t.add_row(str(rank), *(_fmt(r.params[n]) for n in varied), *(_fmt(r.metrics[m]) for m in shown_metrics))
    console().print(t)
    for objs, idx in rep.fronts.items():
        t = Table(
            *varied,
            *objs,
            title=f"Pareto front over {', '.join(f'{m} ({plan.sense[m]})' for m in objs)}: {len(idx)} points",
        )
        for i in idx[:25]:
            r = rep.rows[i].row
            t.add_row(*(_fmt(r.params[n]) for n in varied), *(_fmt(r.metrics[m]) for m in objs))
        if len(idx) > 25:
            t.add_row(*(["..."] * (len(varied) + len(objs))))
        console().print(t)


@main.command("sweep")
@click.argument("spec", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Directory for results.csv and the report [default: out/sweeps/<sweep name>].",
)
@click.option(
    "--workers",
    "-j",
    type=click.IntRange(min=1),
    default=None,
    help="Local worker processes [default: the CPUs available; 1 runs in this process].",
)
@click.option(
    "--scheduler",
    default=None,
    metavar="ADDRESS",
    help="Run on a Dask distributed cluster (e.g. tcp://10.0.0.5:8786) instead of local processes.",
)
@click.option(
    "--chunk-size",
    type=click.IntRange(min=1),
    default=None,
    help="Points per task [default: about 16 tasks per worker, at most 64 points each].",
)
@click.option("--fresh", is_flag=True, help="Discard results.csv and start over (default: resume).")
@click.option("--dry-run", is_flag=True, help="Validate the spec and print the plan; evaluate nothing.")
@click.option("--report-only", is_flag=True, help="Write the report from the results so far; evaluate nothing.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@click.option(
    "--front",
    "fronts",
    multiple=True,
    metavar="OBJ,OBJ[,OBJ]",
    help="Pareto front over these 2 or 3 objectives (repeatable; replaces the spec's [report] fronts).",
)
@click.option("--top-k", type=click.IntRange(min=1), default=None, help="Rows of the top-k table.")
@click.option("--rank-by", default=None, metavar="OBJ", help="Objective ranking the top-k table.")
@click.option("--svg", is_flag=True, help="Write SVG plots beside the PNGs.")
@json_option
def sweep_cmd(
    spec: Path,
    out_dir: Path | None,
    workers: int | None,
    scheduler: str | None,
    chunk_size: int | None,
    fresh: bool,
    dry_run: bool,
    report_only: bool,
    no_progress: bool,
    fronts: tuple[str, ...],
    top_k: int | None,
    rank_by: str | None,
    svg: bool,
    as_json: bool,
) -> None:
    """Evaluate every design point of the sweep SPEC (TOML), streaming results to results.csv as points finish.

    Rerunning the same command resumes: finished points are skipped, so Ctrl-C or a killed worker loses nothing
    already finished. At the end: a top-k table, Pareto fronts (CSV and PNG plots) and summary.json. The spec
    format is in docs/dse.md; every problem in it is reported before any work starts.
    """
    try:
        _sweep(
            spec,
            out_dir,
            workers,
            scheduler,
            chunk_size,
            fresh,
            dry_run,
            report_only,
            no_progress,
            fronts,
            top_k,
            rank_by,
            svg,
            as_json,
        )
    except KeyboardInterrupt:
        click.echo(
            "interrupted; every finished point is saved in results.csv: rerun the same command to resume", err=True
        )
        sys.exit(130)


def _sweep(
    spec: Path,
    out_dir: Path | None,
    workers: int | None,
    scheduler: str | None,
    chunk_size: int | None,
    fresh: bool,
    dry_run: bool,
    report_only: bool,
    no_progress: bool,
    fronts: tuple[str, ...],
    top_k: int | None,
    rank_by: str | None,
    svg: bool,
    as_json: bool,
) -> None:
    from hwmodel.dse import load_plan, read_report, run_sweep, write_report
    from hwmodel.dse.spec import with_report

    plan = load_plan(spec)
    if fronts or top_k or rank_by:
        plan = with_report(
            plan, fronts=[tuple(x.strip() for x in f.split(",")) for f in fronts] or None, top_k=top_k, rank_by=rank_by
        )
    out_dir = out_dir or Path("out") / "sweeps" / plan.name
    if dry_run:
        _print_plan(plan, out_dir, as_json)
        return
    stats = None
    if not report_only:
        stats = run_sweep(
            plan,
            out_dir,
            workers=workers,
            scheduler=scheduler,
            chunk_size=chunk_size,
            fresh=fresh,
            progress=not (no_progress or as_json),
        )
        if stats.interrupted:
            click.echo(
                f"interrupted: {stats.evaluated:,} points evaluated in this run, "
                f"{stats.already_done + stats.screened + stats.evaluated:,} of {stats.total:,} finished and "
                f"saved in {out_dir / 'results.csv'}; rerun the same command to resume",
                err=True,
            )
            sys.exit(130)
    rep = read_report(plan, out_dir)
    written = write_report(rep, out_dir, svg=svg)
    if as_json:
        from hwmodel.dse.report import summary_dict

        d = summary_dict(rep)
        if stats is not None:
            d["run"] = {
                "evaluated": stats.evaluated,
                "already_done": stats.already_done,
                "screened": stats.screened,
                "invalid": stats.invalid,
                "elapsed_s": stats.elapsed_s,
                "points_per_min": stats.points_per_min,
                "workers": stats.workers,
                "backend": stats.backend,
            }
        d["files"] = [str(p) for p in written]
        echo_json(d)
        return
    if stats is not None:
        rate = f", {stats.points_per_min:,.0f} points/min" if stats.evaluated else ""
        click.echo(
            f"{stats.evaluated:,} points evaluated ({stats.backend}, {stats.workers} worker(s)) in "
            f"{stats.elapsed_s:.1f} s{rate}; {stats.already_done:,} were already done, "
            f"{stats.screened:,} screened out now"
        )
    _print_report(rep)
    click.echo(f"wrote {', '.join(str(p) for p in written)}")
