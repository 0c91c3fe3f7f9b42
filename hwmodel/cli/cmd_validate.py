"""`hwmodel validate` (and `hwmodel reproduce validate`): one table of every published or measured figure beside the
model, with its role, its family's free parameters, its error or band position and its source."""

from __future__ import annotations

from pathlib import Path

import click

from hwmodel.cli.base import CONTEXT_SETTINGS, console, echo_json, main
from hwmodel.cli.cmd_reproduce import reproduce


def _reasons(items: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for it in items:
        rid, sep, why = it.partition("=")
        if not sep or not rid.strip() or not why.strip():
            raise click.BadParameter(f"expected ID=REASON, got {it!r}", param_hint="--reason")
        out[rid.strip()] = why.strip()
    return out


def _run(
    out_dir: Path | None,
    cv: bool,
    limit: int | None,
    jobs: int,
    as_json: bool,
    readme: bool,
    update_guards: bool,
    b_requests: int = 1000,
    reasons: tuple[str, ...] = (),
    record_full: bool = False,
    record_bands: bool = False,
) -> None:
    from hwmodel.validate import guards
    from hwmodel.validate import readme as readme_mod
    from hwmodel.validate.table import band_counts_line, build, record_full_values, summary, write

    why = _reasons(reasons)
    if record_bands:
        from hwmodel.validate import perturb

        click.echo(f"wrote {perturb.record(log=lambda m: click.echo(m, err=True))}", err=as_json)
    v = build(cv=cv, system_a_limit=limit, jobs=jobs, system_b_requests=b_requests)
    written = write(v, out_dir) if out_dir is not None else []
    if readme:
        changed = readme_mod.rewrite(v)
        click.echo(f"{readme_mod.README}: {'rewritten' if changed else 'already current'}", err=as_json)
    if update_guards:
        click.echo(f"wrote {guards.write_guards(v.rows, v.options, reasons=why)}", err=as_json)
    if record_full:
        click.echo(f"wrote {record_full_values(v.rows)}", err=as_json)
    if as_json:
        echo_json(v.as_dict())
        return
    from rich.table import Table

    t = Table(
        "area",
        "figure",
        "setting",
        "role",
        "free",
        "model [band]",
        "published",
        "unit",
        "error / band",
        title="Every published or measured figure beside the model",
    )
    for r in v.rows:
        pub = f"{r['published']:.4g}" if r["published"] is not None else f"[{r['band'][0]:.4g}, {r['band'][1]:.4g}]"
        err = (
            f"{100 * r['error']:+.1f} %"
            if r["band"] is None
            else r["band_position"] + ("" if r["band_position"] == "inside" else f" {100 * r['error']:+.1f} %")
        )
        model = f"{r['model']:.4g}"
        if r.get("model_band") is not None:
            model += f" [{r['model_band'][0]:.4g}–{r['model_band'][1]:.4g}]"
        else:
            model += " (band: none)"
        if r.get("setting"):
            model += "" if r.get("full_model") is None else f" (full {r['full_model']:.4g})"
        t.add_row(r["area"], r["name"], r["setting"], r["role"], str(r["free_params"]), model, pub, r["unit"], err)
    console().print(t)
    if written:
        click.echo("wrote " + ", ".join(str(p) for p in written))
    for a in v.accounting:
        click.echo(
            f"{a['family']}: {a['points_fitted']} points fitted, {a['free_params']} free parameters, "
            f"{a['degrees_of_freedom']} degrees of freedom"
        )
    for s in summary(v.rows):
        if s["mean_abs_error"] is not None and not s["role"].startswith(("fitted", "identity")):
            click.echo(
                f"{s['area']} {s['role']}: {s['point_values']} points, mean |error| "
                f"{100 * s['mean_abs_error']:.1f} %, largest {100 * s['max_abs_error']:.1f} %"
            )
        if s["role"].startswith("predicted"):
            click.echo(
                f"{s['area']} {s['role']}: published figure inside the model's band "
                f"{s['published_inside_model_band']}, outside {s['published_outside_model_band']}, "
                f"no band {s['predicted_without_band']}"
            )
    click.echo(band_counts_line(v.rows))
    if not guards.GUARDS_PATH.is_file():
        click.echo(f"guards: {guards.GUARDS_PATH} not found (hwmodel validate --update-guards writes it)")
        return
    g = guards.load_guards()
    if g.get("options", v.options) != v.options:
        click.echo(
            f"guards: recorded with {g['options']}, this run used {v.options}; not compared "
            "(the test suite compares them at the recorded options)"
        )
        return
    bad = guards.violations(v.rows, g)
    click.echo("guards: all within their committed limits" if not bad else "guards exceeded:\n  " + "\n  ".join(bad))


@main.command("validate", context_settings=CONTEXT_SETTINGS)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Write validation.md, validation.csv and validation.json into this directory.",
)
@click.option(
    "--cv/--no-cv",
    default=True,
    show_default=True,
    help="Add a leave-one-out row for every fitted point that can be left out (refits).",
)
@click.option(
    "--system-a-limit",
    "limit",
    type=click.IntRange(min=1),
    default=40,
    show_default=True,
    help="System A rows replay the first N problems of each dataset.",
)
@click.option(
    "--system-b-requests",
    "b_requests",
    type=click.IntRange(min=10, max=100_000),
    default=1000,
    show_default=True,
    help="Requests per simulated system-B point (8-card node at saturation); fewer "
    "than the full study's 1000 marks the rows quick.",
)
@click.option(
    "--jobs",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Worker processes for the system A replays.",
)
@click.option(
    "--readme", is_flag=True, help="Rewrite README.md's 'beside the published numbers' table from these rows."
)
@click.option(
    "--update-guards",
    is_flag=True,
    help="Rewrite hwmodel/validate/guards.json with today's errors; a limit that grows needs --reason.",
)
@click.option(
    "--reason",
    "reasons",
    multiple=True,
    metavar="ID=TEXT",
    help="Why the guard of row (or group) ID may grow; stored beside it in guards.json (repeatable).",
)
@click.option(
    "--record-full",
    is_flag=True,
    help="Record the full-setting system A/B values (hwmodel/validate/full_values.json), shown beside quick runs.",
)
@click.option(
    "--record-bands",
    is_flag=True,
    help="Recompute the perturbation bands of the system A, system B and HBM rows (reruns, minutes) into "
    "hwmodel/validate/recorded_bands.json.",
)
@click.option("--json", "as_json", is_flag=True, help="Print every row (and the accounting) as JSON.")
def validate_cmd(
    out_dir: Path | None,
    cv: bool,
    limit: int,
    b_requests: int,
    jobs: int,
    readme: bool,
    update_guards: bool,
    reasons: tuple[str, ...],
    record_full: bool,
    record_bands: bool,
    as_json: bool,
) -> None:
    """Every published or measured figure (GPU, edge, HBM, FPGA instruction, FPGA streaming, system A, system B):
    model value, role (fitted / fitted-derived / predicted / leave-one-out), the family's free parameters, error
    or band position, physical bound, source. Checks the guards (docs/validation.md)."""
    _run(out_dir, cv, limit, jobs, as_json, readme, update_guards, b_requests, reasons, record_full, record_bands)


@reproduce.command("validate")
@click.pass_context
def reproduce_validate(ctx: click.Context) -> None:
    """The validation table (hwmodel validate) under out/validation: every published figure beside the model."""
    from hwmodel.studies.runner import default_workers

    # the system A replays on every core (the table is byte-identical to --jobs 1: checked at --system-a-limit 4)
    _run(ctx.obj["out_dir"] / "validation", True, 40, default_workers(), False, False, False)


reproduce_validate.order = 95  # type: ignore[attr-defined]
