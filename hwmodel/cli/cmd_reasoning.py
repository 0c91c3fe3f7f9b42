"""`hwmodel reason ...` (replay traces under system-A policies) and `hwmodel reproduce heteroreason`."""

from __future__ import annotations

import time
from pathlib import Path

import click

from hwmodel.cli.base import console, echo_json, group, json_option
from hwmodel.cli.cmd_reproduce import reproduce

reason = group(
    "reason",
    "System A: step-wise speculative reasoning policies replayed on traces "
    "(baseline, step-ahead, heteroreason, edge-draft).",
)

_POLICY_HELP = (
    "Policy: baseline, step-ahead, heteroreason, heteroreason-reprefill, edge-draft, step-ahead-submit, "
    "or one registered by a file named in $HWMODEL_PLUGINS (`hwmodel reason policies` lists them)."
)
_DRAFT_HELP = (
    "Put the draft on this device of the system ([devices.NAME] in its TOML) instead of the policy's own "
    "(e.g. fpga-instruction, fpga-v80, h200 in config1)."
)


@reason.command("policies")
def policies_cmd() -> None:
    """List the scheduling policies."""
    from rich.table import Table

    from hwmodel.reasoning.policies import POLICIES

    table = Table("policy", "label", "draft device", "step-ahead", "draft sync", "what it models")
    for p in POLICIES.values():
        table.add_row(p.name, p.label, p.draft_device, "yes" if p.step_ahead else "no", p.sync, p.description)
    console().print(table)


@reason.command("systems")
def systems_cmd() -> None:
    """List the built-in system configurations (hwmodel/reasoning/systems/*.toml)."""
    from hwmodel.reasoning.system import load_system, system_names

    for n in system_names():
        s = load_system(n)
        devices = "; ".join(f"{name} = {d.describe()}" for name, d in s.devices.items())
        click.echo(f"{n}: {s.display_name} ({devices})")


@reason.command("run")
@click.option(
    "--trace",
    "trace_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Trace file (JSONL). Required unless --seeds.",
)
@click.option("--policy", "policy_name", default="heteroreason", show_default=True, help=_POLICY_HELP)
@click.option(
    "--system",
    "system_name",
    default="config1",
    show_default=True,
    help="Built-in configuration name or a system TOML file.",
)
@click.option("--draft", "draft_device", default=None, metavar="DEVICE", help=_DRAFT_HELP)
@click.option(
    "--csv",
    "csv_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the per-problem metrics to this CSV file.",
)
@click.option(
    "--seeds",
    type=click.IntRange(min=1),
    default=None,
    help="Instead of --trace: generate this many traces of --dataset (seeds --first-seed, +1, ...) and "
    "replay each: every summary metric as a mean with a 95 %% confidence interval (Student t).",
)
@click.option(
    "--dataset", default="gsm8k", show_default=True, help="With --seeds: math500, gsm8k, gaokao2023en or olympiadbench."
)
@click.option("--limit", type=click.IntRange(min=1), default=None, help="With --seeds: problems per trace.")
@click.option("--first-seed", type=int, default=None, help="With --seeds: the first seed [default: the generator's].")
@click.option(
    "--plot",
    "plot_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="With --seeds: write the headline metrics with error bars (PNG/SVG) here.",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="With --seeds: write replicas.json, replicas.md and seeds.csv here.",
)
@json_option
def run_cmd(
    trace_path: Path | None,
    policy_name: str,
    system_name: str,
    draft_device: str | None,
    csv_path: Path | None,
    seeds: int | None,
    dataset: str,
    limit: int | None,
    first_seed: int | None,
    plot_path: Path | None,
    out_dir: Path | None,
    as_json: bool,
) -> None:
    """Replay a trace under one policy: latency, goodput, energy, stall ratio, communication share."""
    from hwmodel.errors import HwmodelError

    if seeds is not None:
        if trace_path is not None or csv_path is not None:
            raise HwmodelError("--seeds generates its traces: give --dataset/--limit, not --trace/--csv")
        from hwmodel.cli.cmd_serving import report_replicas
        from hwmodel.reasoning.replicas import HEADLINE, run_seeds

        with console().status(f"replaying {seeds} generated traces of {dataset}"):
            reps = run_seeds(
                dataset, policy_name, system_name, seeds, first_seed=first_seed, limit=limit, draft=draft_device
            )
        report_replicas(reps, HEADLINE, out_dir, plot_path, as_json)
        return
    if trace_path is None or plot_path is not None or out_dir is not None:
        raise HwmodelError("reason run needs --trace PATH (or --seeds N); --plot and --out go with --seeds")
    from hwmodel.reasoning.metrics import CSV_FIELDS, summarize
    from hwmodel.reasoning.policies import policy
    from hwmodel.reasoning.runner import run_trace
    from hwmodel.reasoning.system import build_platform, load_system
    from hwmodel.report.tables import write_csv
    from hwmodel.workload.traceio import read_trace

    pol = policy(policy_name)
    system = load_system(system_name)
    trace = read_trace(trace_path)
    from hwmodel.reasoning.caps import systems_caps
    from hwmodel.workload.caps import check_trace_caps

    check_trace_caps(trace, trace_path, systems_caps([system]))
    t0 = time.perf_counter()
    rows = run_trace(trace, pol, build_platform(system, pol, draft=draft_device), system.name)
    wall = time.perf_counter() - t0
    if csv_path is not None:
        write_csv(csv_path, (r.as_row() for r in rows), CSV_FIELDS)
    s = summarize(rows)
    if as_json:
        echo_json({**s.as_row(), "host_s": wall})
        return
    from rich.table import Table

    table = Table(
        "metric",
        "value",
        title=f"{pol.name} on {system.name}: {trace_path} ({len(rows)} problems, {wall:.2f} s host time)",
    )
    for label, value in [
        ("latency per problem", f"{s.latency_mean_s:.4g} s"),
        ("goodput", f"{s.goodput_tokens_per_s:.4g} tokens/s"),
        ("energy per token", f"{s.energy_per_token_j:.4g} J"),
        ("speculation-stall ratio", f"{s.stall_ratio:.2%}"),
        ("communication share", f"{s.comm_share * 100:.5f} %"),
        ("discarded step-ahead energy", f"{s.discarded_energy_share:.2%} of the energy"),
        ("utilization draft / PRM / target", f"{s.util_draft:.1%} / {s.util_prm:.1%} / {s.util_target:.1%}"),
        ("accuracy (from the trace)", f"{s.accuracy:.1%}"),
    ]:
        table.add_row(label, value)
    console().print(table)


@reason.command("timeline")
@click.option("--trace", "trace_path", type=click.Path(path_type=Path), required=True, help="Trace file (JSONL).")
@click.option("--problem", "problem_id", required=True, help="Problem id in the trace.")
@click.option("--policy", "policy_name", default="heteroreason", show_default=True, help=_POLICY_HELP)
@click.option(
    "--system",
    "system_name",
    default="config1",
    show_default=True,
    help="Built-in configuration name or a system TOML file.",
)
@click.option(
    "--out",
    "out_path",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="Chrome trace JSON to write (open in https://ui.perfetto.dev).",
)
def timeline_cmd(trace_path: Path, problem_id: str, policy_name: str, system_name: str, out_path: Path) -> None:
    """Perfetto timeline of the three devices (and the links) for one problem."""
    from hwmodel.reasoning.report import write_timeline
    from hwmodel.reasoning.system import build_platform
    from hwmodel.workload.traceio import read_trace

    trace = read_trace(trace_path)
    write_timeline(out_path, trace.problem(problem_id), trace, policy_name, build_platform(system_name, policy_name))
    click.echo(f"wrote {out_path}")


@reason.command("cosim")
@click.option("--trace", "trace_path", type=click.Path(path_type=Path), required=True, help="Trace file (JSONL).")
@click.option("--problem", "problem_id", required=True, help="Problem id in the trace (a short one).")
@click.option(
    "--system",
    "system_name",
    default="config1",
    show_default=True,
    help="Built-in configuration name or a system TOML file.",
)
@click.option(
    "--capacity",
    type=click.IntRange(min=16),
    default=1024,
    show_default=True,
    help="KV positions of the functional model (and its KVMU).",
)
@click.option(
    "--seed",
    type=int,
    default=0,
    show_default=True,
    help="Seed of the synthetic W8A8 weights and of the prompt/target token ids.",
)
@click.option(
    "--out-dir",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Directory for kvmu.vcd, cosim.json and a Perfetto timeline.",
)
def cosim_cmd(trace_path: Path, problem_id: str, system_name: str, capacity: int, seed: int, out_dir: Path) -> None:
    """Co-simulate one problem under heteroreason: the draft's tokens from the functional W8A8 model (synthetic
    weights), its KV cache addressed through a recording KVMU; writes the KVMU waveform as VCD."""
    from fpga.functional import model as functional
    from fpga.kvmu import model as kvmu_mod
    from hwmodel.reasoning.cosim import cosimulate, write_cosim_summary
    from hwmodel.reasoning.policies import policy
    from hwmodel.reasoning.report import write_timeline
    from hwmodel.reasoning.system import build_platform, load_system
    from hwmodel.specs import library
    from hwmodel.workload.traceio import read_trace

    system = load_system(system_name)
    trace = read_trace(trace_path)
    problem = trace.problem(problem_id)
    platform = build_platform(system, "heteroreason")
    model = functional.DraftModel.from_synthetic(
        library().llm(system.draft_llm), seed=seed, capacity=capacity, kvmu=kvmu_mod.Kvmu(capacity, record=True)
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    clock_hz = system.device(policy("heteroreason").draft_device).clock_hz  # the KVMU's waveform clock
    result = cosimulate(
        problem, trace.header, platform, model, clock_hz=clock_hz, vcd_path=out_dir / "kvmu.vcd", seed=seed
    )
    write_cosim_summary(out_dir / "cosim.json", result, problem)
    write_timeline(out_dir / "timeline.json", problem, trace, "heteroreason", platform)
    click.echo(
        f"problem {problem.id}: {len(result.drafted_tokens)} tokens drafted by the functional model, "
        f"{len(result.ingested_tokens)} ingested, {result.kvmu_commands} KVMU commands; wrote "
        f"{out_dir / 'kvmu.vcd'}, {out_dir / 'cosim.json'}, {out_dir / 'timeline.json'}"
    )


@reproduce.command("heteroreason")
@click.option("--jobs", type=click.IntRange(min=1), default=2, show_default=True, help="Worker processes.")
@click.option(
    "--limit", type=click.IntRange(min=1), default=None, help="Only the first N problems of each dataset (quick look)."
)
@click.option(
    "--resume",
    is_flag=True,
    help="Continue the study's journal under --out: units already finished with the same inputs are kept.",
)
@click.option(
    "--scheduler",
    default=None,
    metavar="ADDRESS",
    help="Run the units on the Dask cluster at ADDRESS (e.g. tcp://host:8786) instead of local processes.",
)
@click.pass_context
def reproduce_heteroreason_cmd(
    ctx: click.Context, jobs: int, limit: int | None, resume: bool, scheduler: str | None
) -> None:
    """System A: 4 datasets x 2 configurations x every policy, with and without backtracking, and the draft on
    other devices (instruction-driven FPGA, V80 streaming design, H200); report.md beside the published values,
    CSVs, ablation plot, Perfetto timelines."""
    from rich.progress import Progress

    from hwmodel.reasoning.reproduce import reproduce_heteroreason
    from hwmodel.reasoning.study import CONFIGS, DRAFT_PLACEMENTS, STUDY_POLICIES, study_units
    from hwmodel.studies.runner import keep_freed_memory
    from hwmodel.workload.datasets import DATASETS

    keep_freed_memory()  # this process (and the workers it forks) reuse freed memory: fewer page faults

    out_dir: Path = (ctx.obj or {}).get("out_dir", Path("out")) / "heteroreason"
    n_units = len(study_units(DATASETS, CONFIGS, STUDY_POLICIES, DRAFT_PLACEMENTS))
    with Progress(console=console(), transient=True) as progress:
        task = progress.add_task("system A units", total=n_units)
        result, report = reproduce_heteroreason(
            out_dir,
            jobs=jobs,
            limit=limit,
            resume=resume,
            scheduler=scheduler,
            on_unit_done=lambda u, n: progress.advance(task),
        )
    for pol, why in result.skipped.items():
        click.echo(f"warning: policy {pol} not run: {why}", err=True)
    click.echo(f"{len(result.rows)} problem replays in {result.wall_s:.1f} s ({result.jobs} workers); wrote {report}")


reproduce_heteroreason_cmd.order = 10  # type: ignore[attr-defined]
