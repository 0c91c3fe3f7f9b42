"""`hwmodel workload ...`: generate, validate, import and summarize reasoning traces (docs/traces.md)."""

from __future__ import annotations

from pathlib import Path

import click

from hwmodel.cli.base import console, echo_json, group, json_option

workload = group("workload")

_DATASET = click.Choice(["math500", "gsm8k", "gaokao2023en", "olympiadbench"])


@workload.command("generate")
@click.option("--dataset", type=_DATASET, required=True, help="Benchmark whose real prompts and scale to use.")
@click.option(
    "--target",
    default="qwen2.5-math-7b",
    show_default=True,
    help="Target LLM of the baseline (sets refinement failures and accuracy).",
)
@click.option(
    "--backtracking/--no-backtracking",
    default=True,
    show_default=True,
    help="Re-score the target's refinements and backtrack on failure (HeteroReason) or not (RSD).",
)
@click.option("--seed", type=int, default=None, help="Random seed [default: the built-in traces' seed].")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Only the first N problems.")
@click.option(
    "--out",
    "out_path",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="Trace file to write (.jsonl, or .jsonl.gz to compress).",
)
def generate_cmd(
    dataset: str, target: str, backtracking: bool, seed: int | None, limit: int | None, out_path: Path
) -> None:
    """Generate a trace from the shipped real data and the seeded acceptance model."""
    from hwmodel.workload.generator import DEFAULT_SEED, generate, trace_stats
    from hwmodel.workload.traceio import write_trace

    trace = generate(dataset, target, backtracking, seed=DEFAULT_SEED if seed is None else seed, limit=limit)
    write_trace(trace, out_path)
    s = trace_stats(trace)
    click.echo(
        f"wrote {out_path}: {s['problems']} problems, step rejection {s['step_reject_rate']:.1%}, "
        f"{s['backtracks_per_problem']:.2f} backtracks/problem, accuracy {s['accuracy']:.1%}"
    )


@workload.command("validate")
@click.argument("trace_path", type=click.Path(path_type=Path))
@click.option(
    "--system",
    "systems",
    multiple=True,
    metavar="NAME|TOML",
    help="Check the contexts against this reasoning system's caps (LLM max_position, FPGA max_ctx, "
    "KVMU capacity); repeatable [default: every built-in system].",
)
def validate_cmd(trace_path: Path, systems: tuple[str, ...]) -> None:
    """Check a trace file; the first problem is reported with its line, field and why. Contexts are checked
    against the context caps of the systems that replay traces, so a valid trace never breaks a replay."""
    from hwmodel.reasoning.caps import systems_caps
    from hwmodel.reasoning.system import load_system, system_names
    from hwmodel.workload.caps import check_trace_caps
    from hwmodel.workload.traceio import read_trace

    trace = read_trace(trace_path)
    check_trace_caps(trace, trace_path, systems_caps(load_system(s) for s in (systems or system_names())))
    click.echo(
        f"{trace_path}: valid, {len(trace.problems)} problems, backtracking "
        f"{'on' if trace.header.backtracking else 'off'}"
    )


@workload.command("stats")
@click.argument("trace_path", type=click.Path(path_type=Path))
@json_option
def stats_cmd(trace_path: Path, as_json: bool) -> None:
    """Step- and token-level rates of a trace (rejections, backtracks, accuracy, lengths)."""
    from hwmodel.workload.generator import trace_stats
    from hwmodel.workload.traceio import read_trace

    stats = trace_stats(read_trace(trace_path))
    if as_json:
        echo_json(stats)
        return
    from rich.table import Table

    table = Table("statistic", "value", title=str(trace_path))
    for k, v in stats.items():
        table.add_row(k, f"{v:.4g}" if isinstance(v, float) else str(v))
    console().print(table)


@workload.command("import-rsd")
@click.argument("log_path", type=click.Path(path_type=Path))
@click.option("--dataset", required=True, help="Dataset of the log (prompt lengths come from its shipped data).")
@click.option(
    "--prm-threshold",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=0.7,
    show_default=True,
    help="The threshold the RSD run used (RSD --prm_threshold).",
)
@click.option(
    "--out", "out_path", type=click.Path(dir_okay=False, path_type=Path), required=True, help="Trace file to write."
)
def import_rsd_cmd(log_path: Path, dataset: str, prm_threshold: float, out_path: Path) -> None:
    """Convert a reference RSD per-sample log (token_counts, turn_info, reward) into a trace."""
    from hwmodel.workload.rsd import import_rsd
    from hwmodel.workload.traceio import write_trace

    trace = import_rsd(log_path, dataset, prm_threshold)
    write_trace(trace, out_path)
    click.echo(
        f"wrote {out_path}: {len(trace.problems)} problems (backtracking off, per-step tokens split evenly "
        "from RSD's per-model totals)"
    )
