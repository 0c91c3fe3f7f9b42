"""`hwmodel calibrate`: fit device-model parameters to measurements, and report every point's error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from hwmodel.cli.base import CONTEXT_SETTINGS, console, echo_json, main
from hwmodel.cli.cmd_reproduce import reproduce
from hwmodel.units import fmt_s


@main.command("calibrate", context_settings=CONTEXT_SETTINGS)
@click.option(
    "--family",
    "family_name",
    default="gpu",
    show_default=True,
    help="Model family to calibrate (its measurements/<family>.csv and params/<family>.json).",
)
@click.option(
    "--fit",
    "do_fit",
    is_flag=True,
    help="Re-fit the parameters to the 'fitted' points and write calibration/params/<family>.json.",
)
@click.option(
    "--check",
    "do_check",
    is_flag=True,
    help="Re-fit and compare with the committed parameter file (exit 2 when they differ).",
)
@click.option(
    "--report/--no-report",
    "do_report",
    default=True,
    show_default=True,
    help="Print every measured point: measured, model, error; fitted and predicted listed apart.",
)
@click.option(
    "--measurements",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Another measurement CSV (same schema) instead of the family's own.",
)
@click.option(
    "--params",
    "params_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Parameter file to write (--fit) or to report against [default: the committed one].",
)
@click.option(
    "--csv",
    "csv_out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the report as CSV.",
)
@click.option(
    "--cv",
    "do_cv",
    is_flag=True,
    help="Leave-one-out: refit without each fitted point and predict it (error per fitted point).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON instead of a table.")
def calibrate_cmd(
    family_name: str,
    do_fit: bool,
    do_check: bool,
    do_report: bool,
    measurements: Path | None,
    params_file: Path | None,
    csv_out: Path | None,
    do_cv: bool,
    as_json: bool,
) -> None:
    """Calibrate a device model: --fit writes the parameters, --report (default) shows every point's error, with
    the family's accounting (points fitted, free parameters, degrees of freedom); --cv adds leave-one-out errors."""
    from calibration.cv import leave_one_out
    from calibration.family import accounting, fit_family, get_family, report_family, write_fit
    from calibration.measurements import load_measurements
    from calibration.params import load_values
    from calibration.report import render, summarize
    from hwmodel.errors import HwmodelError

    fam = get_family(family_name)
    points = load_measurements(measurements or fam.measurements_path)
    if do_check:
        result = fit_family(fam, points)
        committed = load_values(params_file or fam.params_path)
        bad = [
            f"{n}: committed {committed.get(n)!r}, re-fit {v!r}"
            for n, v in result.values.items()
            if n not in committed or abs(v - committed[n]) > 1e-6 * max(abs(v), 1e-12)
        ]
        if bad:
            raise HwmodelError(
                f"{params_file or fam.params_path} differs from a re-fit ({'; '.join(bad)}); "
                f"run `hwmodel calibrate --family {fam.name} --fit`"
            )
        click.echo(f"{params_file or fam.params_path}: matches a re-fit of {result.nfev} evaluations")
    if do_fit:
        result = fit_family(fam, points)
        target = write_fit(fam, result, params_file, measurements)
        msg = (
            f"wrote {target}: {len(result.residuals)} fitted points, "
            f"largest error {100 * result.max_abs_residual:.2f} %"
        )
        if result.at_bound:
            msg += f"; at a bound: {', '.join(result.at_bound)}"
        click.echo(msg)
    if not do_report:
        return
    rows = report_family(fam, points, params_file)
    summary = summarize(rows)
    acc = accounting(fam, points)
    loo = leave_one_out(fam, points, str(params_file) if params_file else None) if do_cv else None
    if csv_out is not None:
        _write_csv(csv_out, rows, fam.conditions, {r.id: r for r in loo or []})
    if as_json:
        doc = {
            "family": fam.name,
            "accounting": acc.as_dict(),
            "summary": summary.as_dict(),
            "points": [r.as_dict() for r in rows],
        }
        if loo is not None:
            doc["leave_one_out"] = [r.as_dict() for r in loo]
        echo_json(doc)
        return
    console().print(render(rows, f"Calibration of the {fam.name} model ({fam.description})", fam.conditions))
    click.echo(accounting_line(acc))
    click.echo(
        f"fitted: {summary.fitted_points} points, largest |error| {100 * summary.fitted_max_abs_error:.2f} %; "
        f"predicted: {summary.predicted_points} points, mean |error| "
        f"{100 * summary.predicted_mean_abs_error:.1f} %, largest {100 * summary.predicted_max_abs_error:.1f} %"
    )
    if loo is not None:
        from rich.table import Table

        t = Table(
            "fitted point",
            "measured",
            "leave-one-out model",
            "error",
            "how",
            title=f"Leave-one-out ({fam.name}): each fitted point predicted by a refit without it",
        )
        for r in loo:
            t.add_row(
                r.id,
                f"{r.measured:.4g}",
                "-" if r.model is None else f"{r.model:.4g}",
                "-" if r.error is None else f"{100 * r.error:+.1f} %",
                r.reason,
            )
        console().print(t)


def accounting_line(acc: Any) -> str:
    """One line: points fitted, free parameters (least squares + chosen), degrees of freedom."""
    chosen = f" + {len(acc.choices)} chosen on the same points ({', '.join(acc.choices)})" if acc.choices else ""
    return (
        f"{acc.family}: {acc.points_fitted} points fitted, {acc.free_params} free parameters "
        f"({len(acc.least_squares)} least squares{chosen}), {acc.degrees_of_freedom} degrees of freedom"
    )


def _write_csv(path: Path, rows: Any, conditions: tuple[str, ...], loo: dict[str, Any] | None = None) -> None:
    from hwmodel.report.tables import write_csv

    loo = loo or {}
    header = [
        "id",
        "role",
        "subject",
        *conditions,
        "quantity",
        "unit",
        "measured",
        "model",
        "error",
        "loo_model",
        "loo_error",
        "source",
    ]
    cells = (
        [
            r.id,
            r.role,
            r.subject,
            *(r.conditions.get(c, "") for c in conditions),
            r.quantity,
            r.unit,
            repr(r.measured),
            repr(r.model),
            repr(r.error),
            "" if (lr := loo.get(r.id)) is None or lr.model is None else repr(lr.model),
            "" if lr is None or lr.error is None else repr(lr.error),
            r.source,
        ]
        for r in rows
    )
    write_csv(path, cells, header, line_end="\r\n", cells="plain")  # CRLF: the file's bytes as always written


@reproduce.command("gpu")
@click.pass_context
def reproduce_gpu(ctx: click.Context) -> None:
    """GPU calibration (every published point, fitted and predicted, against the model) and the KV migration of
    LLaMA2-7B from an A100 (HF) to a U280 overlapped with the prefill, 64 to 3,072-token prompts."""
    import json

    from calibration.family import accounting, get_family, report_family
    from calibration.report import render, summarize
    from gpu.latency import GpuEngine
    from interconnect.pcie import kv_migration

    out_dir: Path = ctx.obj["out_dir"] / "gpu"
    out_dir.mkdir(parents=True, exist_ok=True)
    fam = get_family("gpu")
    rows = report_family(fam)
    summary = summarize(rows)
    _write_csv(out_dir / "calibration.csv", rows, fam.conditions)
    (out_dir / "calibration.json").write_text(
        json.dumps(
            {
                "accounting": accounting(fam).as_dict(),
                "summary": summary.as_dict(),
                "points": [r.as_dict() for r in rows],
            },
            indent=2,
        )
    )
    console().print(render(rows, "GPU model vs published measurements", fam.conditions))
    click.echo(accounting_line(accounting(fam)))
    click.echo(
        f"fitted: {summary.fitted_points} points, largest |error| {100 * summary.fitted_max_abs_error:.2f} %; "
        f"predicted: {summary.predicted_points} points, mean |error| "
        f"{100 * summary.predicted_mean_abs_error:.1f} %, largest {100 * summary.predicted_max_abs_error:.1f} %"
    )
    eng = GpuEngine("a100-40gb", "llama2-7b", "hf")
    migrations = [
        kv_migration(eng, "u280", prompt, path=path, host_thread=thread).as_dict()
        for prompt in (64, 256, 1024, 1536, 3072)
        for path, thread in (("host", "shared"), ("host", "dedicated"), ("p2p", "shared"))
    ]
    (out_dir / "migration.json").write_text(json.dumps(migrations, indent=2))
    from rich.table import Table

    t = Table(
        "prompt",
        "path",
        "host thread",
        "prefill",
        "transfer alone",
        "exposed",
        "hidden",
        title="KV migration LLaMA2-7B, A100-40GB (HF) -> U280, overlapped with the prefill",
    )
    for m in migrations:
        t.add_row(
            str(m["prompt_tokens"]),
            str(m["path"]),
            str(m["host_thread"]),
            fmt_s(float(m["prefill_s"])),
            fmt_s(float(m["transfer_s"])),
            fmt_s(float(m["exposed_s"])),
            f"{100 * float(m['hidden_fraction']):.0f} %",
        )
    console().print(t)
    click.echo(f"wrote {out_dir / 'calibration.csv'}, {out_dir / 'calibration.json'}, {out_dir / 'migration.json'}")


reproduce_gpu.order = 20  # type: ignore[attr-defined]
