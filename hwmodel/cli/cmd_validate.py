"""`hwmodel validate` (and `hwmodel reproduce validate`): one table of every published or measured figure beside the
model, with its role, its family's free parameters, its error or band position and its source."""
from __future__ import annotations

from pathlib import Path

import click

from hwmodel.cli.base import CONTEXT_SETTINGS, console, echo_json, main
from hwmodel.cli.cmd_reproduce import reproduce


def _run(out_dir: Path | None, cv: bool, limit: int | None, jobs: int, as_json: bool, readme: bool,
         update_guards: bool, b_requests: int = 200) -> None:
    from hwmodel.validate import guards, readme as readme_mod
    from hwmodel.validate.table import build, summary, write

    v = build(cv=cv, system_a_limit=limit, jobs=jobs, system_b_requests=b_requests)
    written = write(v, out_dir) if out_dir is not None else []
    if readme:
        changed = readme_mod.rewrite(v)
        click.echo(f"{readme_mod.README}: {'rewritten' if changed else 'already current'}", err=as_json)
    if update_guards:
        click.echo(f"wrote {guards.write_guards(v.rows, v.options)}", err=as_json)
    if as_json:
        echo_json(v.as_dict())
        return
    from rich.table import Table

    t = Table("area", "figure", "role", "free", "model", "published", "unit", "error / band",
              title="Every published or measured figure beside the model")
    for r in v.rows:
        pub = f"{r['published']:.4g}" if r["published"] is not None else f"[{r['band'][0]:.4g}, {r['band'][1]:.4g}]"
        err = (f"{100 * r['error']:+.1f} %" if r["band"] is None
               else r["band_position"] + ("" if r["band_position"] == "inside" else f" {100 * r['error']:+.1f} %"))
        t.add_row(r["area"], r["name"], r["role"], "" if r["free_params"] is None else str(r["free_params"]),
                  f"{r['model']:.4g}", pub, r["unit"], err)
    console().print(t)
    if written:
        click.echo("wrote " + ", ".join(str(p) for p in written))
    for a in v.accounting:
        click.echo(f"{a['family']}: {a['points_fitted']} points fitted, {a['free_params']} free parameters, "
                   f"{a['degrees_of_freedom']} degrees of freedom")
    for s in summary(v.rows):
        if s["mean_abs_error"] is not None and s["role"] != "fitted":
            click.echo(f"{s['area']} {s['role']}: {s['point_values']} points, mean |error| "
                       f"{100 * s['mean_abs_error']:.1f} %, largest {100 * s['max_abs_error']:.1f} %")
    if not guards.GUARDS_PATH.is_file():
        click.echo(f"guards: {guards.GUARDS_PATH} not found (hwmodel validate --update-guards writes it)")
        return
    g = guards.load_guards()
    if g.get("options", v.options) != v.options:
        click.echo(f"guards: recorded with {g['options']}, this run used {v.options}; not compared "
                   "(the test suite compares them at the recorded options)")
        return
    bad = guards.violations(v.rows, g)
    click.echo("guards: all within their committed limits" if not bad else
               "guards exceeded:\n  " + "\n  ".join(bad))


@main.command("validate", context_settings=CONTEXT_SETTINGS)
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write validation.md, validation.csv and validation.json into this directory.")
@click.option("--cv/--no-cv", default=True, show_default=True,
              help="Add a leave-one-out row for every fitted point that can be left out (refits).")
@click.option("--system-a-limit", "limit", type=click.IntRange(min=1), default=40, show_default=True,
              help="System A rows replay the first N problems of each dataset.")
@click.option("--system-b-requests", "b_requests", type=click.IntRange(min=10, max=100_000), default=200,
              show_default=True, help="Requests per simulated system-B point (8-card node at saturation).")
@click.option("--jobs", type=click.IntRange(min=1), default=1, show_default=True,
              help="Worker processes for the system A replays.")
@click.option("--readme", is_flag=True,
              help="Rewrite README.md's 'beside the published numbers' table from these rows.")
@click.option("--update-guards", is_flag=True,
              help="Rewrite hwmodel/validate/guards.json with today's errors (say why in the commit).")
@click.option("--json", "as_json", is_flag=True, help="Print every row (and the accounting) as JSON.")
def validate_cmd(out_dir: Path | None, cv: bool, limit: int, b_requests: int, jobs: int, readme: bool,
                 update_guards: bool, as_json: bool) -> None:
    """Every published or measured figure (GPU, edge, HBM, FPGA instruction, FPGA streaming, system A, system B):
    model value, role (fitted / fitted-derived / predicted / leave-one-out), the family's free parameters, error
    or band position, physical bound, source. Checks the guards (docs/validation.md)."""
    _run(out_dir, cv, limit, jobs, as_json, readme, update_guards, b_requests)


@reproduce.command("validate")
@click.pass_context
def reproduce_validate(ctx: click.Context) -> None:
    """The validation table (hwmodel validate) under out/validation: every published figure beside the model."""
    _run(ctx.obj["out_dir"] / "validation", True, 40, 1, False, False, False)


reproduce_validate.order = 95  # type: ignore[attr-defined]
