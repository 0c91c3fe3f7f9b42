"""`hwmodel serve run | clusters | sweep`: serving-cluster simulation from the command line (request files:
cmd_requests.py; `hwmodel reproduce glitches`: cmd_reproduce_glitches.py)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import click

from hwmodel.cli.base import CONTEXT_SETTINGS, console, echo_json, group, json_option
from hwmodel.cli.replicas_report import report_replicas
from hwmodel.cli.serving_options import (
    cluster_of,
    cluster_options,
    load_stream,
    scheduler_options,
    slo_options,
    stream_options,
)
from hwmodel.errors import HwmodelError

serve = group("serve", "Serving-cluster simulation (system B): GPU prefill, FPGA decode, schedulers, metrics.")

__all__ = ["report_replicas", "serve"]


@serve.command("run", context_settings=CONTEXT_SETTINGS)
@click.option(
    "--cluster",
    "cluster_name",
    default="a100+7xu280",
    show_default=True,
    help="Built-in cluster name (`hwmodel serve clusters`) or a cluster TOML path.",
)
@cluster_options
@scheduler_options
@stream_options
@slo_options
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Write metrics.json, requests.csv and a Perfetto trace.json here.",
)
@click.option(
    "--trace-requests",
    type=click.IntRange(min=1),
    default=200,
    show_default=True,
    help="Requests shown in the Perfetto trace (the first arrivals).",
)
@click.option(
    "--load",
    "load_fraction",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Instead of --rate: this fraction of the saturation rate (requests/s completed with all --n "
    "requests queued at t=0, same lengths and scheduler), e.g. 0.8.",
)
@click.option(
    "--seeds",
    type=click.IntRange(min=1),
    default=None,
    help="Replicate the generated stream over this many seeds (--seed, --seed + 1, ...): every metric as "
    "a mean with a 95 %% confidence interval (Student t).",
)
@click.option(
    "--plot",
    "plot_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="With --seeds: write the headline metrics with error bars (PNG/SVG) here.",
)
@json_option
def serve_run(
    cluster_name: str,
    llm: str | None,
    kv_path: str | None,
    gpu_batch: int | None,
    scheduler: str,
    requests_file: Path | None,
    n_requests: int,
    rate: float,
    prompt: str,
    output: str,
    seed: int,
    slo_ttft: float,
    slo_tpot: float,
    out_dir: Path | None,
    trace_requests: int,
    load_fraction: float | None,
    seeds: int | None,
    plot_path: Path | None,
    as_json: bool,
) -> None:
    """Simulate a request stream on a serving cluster and print its metrics."""
    from hwmodel.serving.metrics import compute_metrics
    from hwmodel.serving.report import device_table, metrics_table, perfetto_trace, write_json, write_request_csv
    from hwmodel.serving.schedulers import Slo
    from hwmodel.serving.simulator import simulate

    cluster = cluster_of(cluster_name, llm, kv_path, gpu_batch)
    if load_fraction is not None:
        if requests_file is not None or math.isfinite(rate):
            raise HwmodelError("--load sets the rate from the saturation rate: give it without --rate or --requests")
        sat = load_stream(None, n_requests, math.inf, prompt, output, seed, cluster.llm.max_position)
        rate = load_fraction * compute_metrics(simulate(cluster, sat, scheduler)).request_rate_per_s
        if not as_json:
            click.echo(f"--load {load_fraction:g}: {rate:.4g} requests/s")
    if seeds is not None or plot_path is not None:
        if seeds is None or requests_file is not None:
            raise HwmodelError("--seeds N replicates a generated stream (no --requests); --plot needs --seeds")
        _serve_seeds(
            cluster,
            n_requests,
            rate,
            prompt,
            output,
            seed,
            seeds,
            scheduler,
            Slo(slo_ttft, slo_tpot),
            out_dir,
            plot_path,
            as_json,
        )
        return
    reqs = load_stream(requests_file, n_requests, rate, prompt, output, seed, cluster.llm.max_position)
    with console().status(f"simulating {len(reqs)} requests on {cluster.spec.name} (device models first)"):
        res = simulate(cluster, reqs, scheduler, slo=Slo(slo_ttft, slo_tpot), record_segments=out_dir is not None)
    m = compute_metrics(res)
    if out_dir is not None:
        write_json(out_dir / "metrics.json", m)
        write_request_csv(out_dir / "requests.csv", res)
        perfetto_trace(res, out_dir / "trace.json", max_requests=trace_requests)
    if as_json:
        echo_json(m)
        return
    con = console()
    con.print(
        metrics_table(
            [(f"{m.cluster} / {m.scheduler}", m)],
            f"{len(reqs)} requests on {cluster.spec.display_name} ({cluster.llm.display_name})",
        )
    )
    con.print(device_table(m, "Devices"))
    if out_dir is not None:
        click.echo(f"wrote {out_dir}/metrics.json, requests.csv, trace.json (open in ui.perfetto.dev)")


def _serve_seeds(
    cluster: Any,
    n_requests: int,
    rate: float,
    prompt: str,
    output: str,
    seed: int,
    seeds: int,
    scheduler: str,
    slo: Any,
    out_dir: Path | None,
    plot_path: Path | None,
    as_json: bool,
) -> None:
    """`serve run --seeds N`: the replicas' means and intervals (hwmodel.serving.replicas)."""
    from hwmodel.serving.replicas import HEADLINE, run_seeds

    max_ctx = cluster.llm.max_position
    with console().status(f"simulating {seeds} seeds x {n_requests} requests on {cluster.spec.name}"):
        reps = run_seeds(
            cluster,
            lambda s: load_stream(None, n_requests, rate, prompt, output, s, max_ctx),
            seeds,
            seed,
            scheduler,
            slo,
        )
    report_replicas(reps, HEADLINE, out_dir, plot_path, as_json)


def _backends(spec: Any, pool: str) -> str:
    """The back-ends (gpu, instruction, streaming) that build a pool's devices, as ``device (back-end)``."""
    from hwmodel.serving.engines import resolve_builder
    from hwmodel.specs import library

    groups = {
        (g.device, resolve_builder(g, library(), spec.name, pool).name) for n in spec.nodes for g in getattr(n, pool)
    }
    return ", ".join(f"{d} ({b})" for d, b in sorted(groups)) or "-"


@serve.command("clusters", context_settings=CONTEXT_SETTINGS)
@json_option
def serve_clusters(as_json: bool) -> None:
    """List the built-in clusters."""
    from hwmodel.serving.cluster import builtin_cluster_names, load_cluster

    rows = []
    for name in builtin_cluster_names():
        c = load_cluster(name)
        rows.append(
            {
                "name": name,
                "display_name": c.display_name,
                "llm": c.llm,
                "nodes": len(c.nodes),
                "prefill pool": c.prefill_count,
                "decode pool": c.decode_count,
                "prefill back-end": _backends(c, "prefill"),
                "decode back-end": _backends(c, "decode"),
                "kv_path": c.kv_path,
                "network": c.network.link if c.network else None,
            }
        )
    if as_json:
        echo_json(rows)
        return
    from rich.table import Table

    t = Table(title="Built-in serving clusters")
    for col in rows[0]:
        t.add_column(col)
    for r in rows:
        t.add_row(*[str(v) if v is not None else "-" for v in r.values()])
    console().print(t)


@serve.command("sweep", context_settings=CONTEXT_SETTINGS)
@click.option(
    "--cluster",
    "cluster_names",
    multiple=True,
    default=("8xa100", "8xu280", "a100+7xu280"),
    show_default=True,
    help="Cluster name or TOML path; repeatable.",
)
@click.option(
    "--rates",
    default="0.1,0.2,0.4,0.6,0.8,1.0",
    show_default=True,
    help="Comma-separated Poisson arrival rates (requests/s).",
)
@click.option(
    "--n", "n_requests", type=click.IntRange(min=1), default=400, show_default=True, help="Generated requests per rate."
)
@click.option(
    "--prompt",
    default="1536",
    show_default=True,
    help="Prompt length law: N, fixed:N, uniform:LO:HI or lognormal:MEDIAN:SIGMA:MAX.",
)
@click.option("--output", default="512", show_default=True, help="Output length law (same forms).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the request generator.")
@scheduler_options
@slo_options
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("out/serve-sweep"),
    show_default=True,
    help="Writes sweep.json and throughput_vs_load.png here.",
)
@json_option
def serve_sweep(
    cluster_names: tuple[str, ...],
    rates: str,
    n_requests: int,
    prompt: str,
    output: str,
    seed: int,
    scheduler: str,
    slo_ttft: float,
    slo_tpot: float,
    out_dir: Path,
    as_json: bool,
) -> None:
    """Throughput and latency against offered load, for one or more clusters."""
    from rich.progress import Progress

    from hwmodel.serving.metrics import compute_metrics
    from hwmodel.serving.report import metrics_table, plot_load, write_json
    from hwmodel.serving.schedulers import Slo
    from hwmodel.serving.simulator import simulate

    try:
        rate_list = [float(x) for x in rates.split(",") if x.strip()]
    except ValueError:
        raise HwmodelError(f"--rates: expected comma-separated numbers, got {rates!r}") from None
    if not rate_list or any(not (r > 0) for r in rate_list):
        raise HwmodelError(f"--rates: expected positive rates, got {rates!r}")
    rows = []
    with Progress(console=console(), transient=True) as bar:
        task = bar.add_task("simulating", total=len(rate_list) * len(cluster_names))
        for name in cluster_names:
            cluster = cluster_of(name, None, None, None)
            for r in rate_list:
                reqs = load_stream(None, n_requests, r, prompt, output, seed, cluster.llm.max_position)
                m = compute_metrics(simulate(cluster, reqs, scheduler, slo=Slo(slo_ttft, slo_tpot)))
                rows.append({"config": name, "cluster": name, "offered_req_per_s": r, "metrics": m})
                bar.advance(task)
    write_json(out_dir / "sweep.json", rows)
    plot_load(rows, out_dir / "throughput_vs_load.png", f"{prompt}/{output} tokens, {scheduler}")
    if as_json:  # the rows as sweep.json holds them
        echo_json(rows)
        return
    console().print(
        metrics_table(
            [(f"{r['cluster']} @ {r['offered_req_per_s']:g}/s", r["metrics"]) for r in rows],
            "Throughput vs offered load",
        )
    )
    click.echo(f"wrote {out_dir / 'sweep.json'} and {out_dir / 'throughput_vs_load.png'}")
