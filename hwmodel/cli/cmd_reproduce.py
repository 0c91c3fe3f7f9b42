"""`hwmodel reproduce`: every study of the project, on built-in defaults. Each study is a sub-command; with no
sub-command, all of them run in order (``order`` attribute) and write under ``--out``."""

from __future__ import annotations

from pathlib import Path

import click

from hwmodel.bounds import bounds, default_bits
from hwmodel.cli.base import CONTEXT_SETTINGS, console, main


@main.group("reproduce", invoke_without_command=True, context_settings=CONTEXT_SETTINGS)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("out"),
    show_default=True,
    help="Directory for reports, CSV/JSON results, plots and traces.",
)
@click.option(
    "--jobs",
    type=click.IntRange(min=1),
    default=None,
    help="Studies run at once when every study runs (default: one per core; 1: one after another in this "
    "process). The outputs and the log's order are the same for any value.",
)
@click.pass_context
def reproduce(ctx: click.Context, out_dir: Path, jobs: int | None) -> None:
    """Reproduce the project's studies (all of them when no study is named)."""
    ctx.obj = {"out_dir": out_dir}
    if ctx.invoked_subcommand is None:
        studies = sorted(reproduce.commands.values(), key=lambda c: (getattr(c, "order", 100), c.name))
        _run_studies(ctx, studies, jobs)
        index = _write_index(out_dir, studies)
        page = _write_html_index(out_dir, studies)
        click.echo(f"== wrote {index} and {page}: every study's outputs")


#: what each study costs on a fresh run (CPU-s, empty caches, the studies one after another on the shared 2-core VM
#: under a load of 4-7, 2026-12; docs/studies.md): only the order in which studies start depends on it (longest
#: first, hwmodel.studies.concurrent); a study not listed is taken as STUDY_COST_S_DEFAULT
STUDY_COST_S = {
    "glitches": 114.0,
    "heteroreason": 106.0,
    "validate": 44.0,
    "glitches-fpga": 26.0,
    "streaming": 5.0,
    "dse": 2.0,
    "gpu": 0.5,
    "freq": 0.5,
    "bounds": 0.2,
}
STUDY_COST_S_DEFAULT = 10.0
#: studies that start only after others: validate's system A and B rows replay what heteroreason and glitches
#: simulate, and read the draft samples and engine tables those two leave in the disk cache
#: (hwmodel.numba_cache.cache_root) instead of computing them a second time beside them
STUDY_AFTER = {"validate": ("heteroreason", "glitches")}


def _run_studies(ctx: click.Context, studies: list[click.Command], jobs: int | None) -> None:
    """Every study, each announced by a "== hwmodel reproduce NAME" line and followed by its output, in order;
    with more than one job, the studies run side by side in forked processes (hwmodel.studies.concurrent), unless
    this process cannot fork safely (a library with threads of its own loaded, e.g. JAX from a notebook or a test
    worker): then one after another here, with the same outputs and the same log."""
    from hwmodel.studies.runner import default_workers, pool_start_method

    slots = default_workers() if jobs is None else jobs
    header = lambda name: click.echo(f"== hwmodel reproduce {name}")  # noqa: E731
    if slots <= 1 or pool_start_method() != "fork":
        for cmd in studies:
            header(cmd.name)
            ctx.invoke(cmd)
        return
    from hwmodel.studies.concurrent import Job, run_jobs

    names = {c.name for c in studies}
    run_jobs(
        [
            Job(
                c.name,
                lambda c=c: ctx.invoke(c),
                tuple(a for a in STUDY_AFTER.get(c.name, ()) if a in names),
                STUDY_COST_S.get(c.name, STUDY_COST_S_DEFAULT),
            )
            for c in studies
        ],
        slots,
        before_head=header,
    )


def _write_index(out_dir: Path, studies: list[click.Command]) -> Path:
    """out/README.md: one section per study (its one-line help and the files it wrote)."""
    lines = [
        "# hwmodel reproduce: outputs\n",
        "Every number is a model output; each study's report puts the published reference beside it.\n",
    ]
    for cmd in studies:
        folder = _study_folder(out_dir, cmd)
        lines.append(f"## {cmd.name}\n\n{cmd.get_short_help_str(limit=200)}\n")
        files = sorted(p for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else []
        lines += [f"- [{p.relative_to(out_dir)}]({p.relative_to(out_dir)})" for p in files] or ["- (no files)"]
        lines.append("")
    path = out_dir / "README.md"
    path.write_text("\n".join(lines))
    return path


def _study_folder(out_dir: Path, cmd: click.Command) -> Path:
    folder = out_dir / cmd.name.replace("-", "_")
    return folder if folder.is_dir() else out_dir / cmd.name


def _write_html_index(out_dir: Path, studies: list[click.Command]) -> Path:
    """out/index.html: the same index as one self-contained page with every table and figure."""
    from hwmodel.report.html import Study, write_index

    return write_index(
        out_dir, [Study(c.name, c.get_short_help_str(limit=200), _study_folder(out_dir, c)) for c in studies]
    )


@reproduce.command("bounds")
@click.option(
    "--ctx",
    "ctx_tokens",
    type=click.IntRange(min=0),
    default=1024,
    show_default=True,
    help="Tokens already in the KV cache.",
)
@click.pass_context
def reproduce_bounds(ctx: click.Context, ctx_tokens: int) -> None:
    """Physical floors for every built-in LLM x device at default precision (W8/KV8 FPGA, FP16 GPU)."""
    from hwmodel.cli.cmd_bounds import bounds_table
    from hwmodel.specs import library

    lib = library()
    rows = []
    for device_name in lib.names("device"):
        device = lib.device(device_name)
        wb, kb = default_bits(device)
        for llm_name in lib.names("llm"):
            rows.append(bounds(lib.llm(llm_name), device, wb, kb, ctx_tokens))
    out_dir: Path = ctx.obj["out_dir"] / "bounds"
    out_dir.mkdir(parents=True, exist_ok=True)
    import json

    (out_dir / "bounds.json").write_text(json.dumps([r.as_dict() for r in rows], indent=2))
    console().print(bounds_table(rows, title=f"Physical floors, every built-in LLM x device, ctx {ctx_tokens}"))
    click.echo(f"wrote {out_dir / 'bounds.json'}")


reproduce_bounds.order = 0  # type: ignore[attr-defined]
