"""`hwmodel serve ...` (serving-cluster simulation), `hwmodel workload requests ...` (request streams) and
`hwmodel reproduce glitches` (the GLITCHES 8-card study)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import click

from hwmodel.cli.base import CONTEXT_SETTINGS, console, echo_json, group, json_option
from hwmodel.cli.cmd_reproduce import reproduce
from hwmodel.errors import HwmodelError

serve = group("serve", "Serving-cluster simulation (system B): GPU prefill, FPGA decode, schedulers, metrics.")


def _stream_options(f: Any) -> Any:
    for opt in reversed(
        [
            click.option(
                "--requests",
                "requests_file",
                type=click.Path(dir_okay=False, path_type=Path),
                help="Request file (.csv or .jsonl with arrival_s, prompt_tokens, output_tokens). "
                "Overrides the generator options.",
            ),
            click.option(
                "--n",
                "n_requests",
                type=click.IntRange(min=1),
                default=200,
                show_default=True,
                help="Generated requests.",
            ),
            click.option(
                "--rate",
                type=float,
                default=math.inf,
                show_default=True,
                help="Poisson arrival rate (requests/s); inf queues every request at t=0 (saturation).",
            ),
            click.option(
                "--prompt",
                default="1536",
                show_default=True,
                help="Prompt length law: N, fixed:N, uniform:LO:HI or lognormal:MEDIAN:SIGMA:MAX.",
            ),
            click.option("--output", default="512", show_default=True, help="Output length law (same forms)."),
            click.option("--seed", type=int, default=0, show_default=True, help="Seed of the request generator."),
        ]
    ):
        f = opt(f)
    return f


def _load_stream(
    requests_file: Path | None,
    n_requests: int,
    rate: float,
    prompt: str,
    output: str,
    seed: int,
    max_context: int | None,
) -> tuple[Any, ...]:
    from hwmodel.workload.requests import load_requests, parse_length, poisson_stream, validate

    if requests_file is not None:
        return load_requests(requests_file, max_context_tokens=max_context)
    reqs = poisson_stream(n_requests, rate, parse_length(prompt, "--prompt"), parse_length(output, "--output"), seed)
    return validate(reqs, where="generated stream", max_context_tokens=max_context)


def _cluster(name: str, llm: str | None, kv_path: str | None, gpu_batch: int | None) -> Any:
    from hwmodel.serving.cluster import load_cluster, resolve_cluster
    from hwmodel.serving.study import with_gpu_batch, with_kv_path

    spec = load_cluster(name)
    if kv_path:
        spec = with_kv_path(spec, kv_path)
    if gpu_batch:
        spec = with_gpu_batch(spec, gpu_batch)
    return resolve_cluster(spec, llm=llm)


def _cluster_options(f: Any) -> Any:
    from hwmodel.serving.cluster import KV_PATHS

    for opt in reversed(
        [
            click.option("--llm", default=None, help="Serve this LLM instead of the cluster's (spec name)."),
            click.option(
                "--kv-path",
                type=click.Choice(KV_PATHS),
                default=None,
                help="Override the cluster's GPU -> FPGA KV migration path.",
            ),
            click.option(
                "--gpu-batch", type=click.IntRange(min=1), default=None, help="Override every GPU's decode batch limit."
            ),
        ]
    ):
        f = opt(f)
    return f


def _register_scheduler_files(_ctx: Any, _param: Any, paths: tuple[Path, ...]) -> tuple[Path, ...]:
    from hwmodel.serving.schedulers import load_scheduler_file

    for p in paths:
        load_scheduler_file(p)
    return paths


def _scheduler_options(f: Any) -> Any:
    f = click.option(
        "--scheduler",
        default="fcfs",
        show_default=True,
        help="Scheduler name: fcfs, spf, memory-aware, slo-aware, or one a --scheduler-file adds.",
    )(f)
    return click.option(
        "--scheduler-file",
        "scheduler_files",
        multiple=True,
        is_eager=True,
        type=click.Path(dir_okay=False, path_type=Path),
        callback=_register_scheduler_files,
        expose_value=False,
        help="A Python file defining a scheduler (a Scheduler subclass decorated with "
        "@register_scheduler, hwmodel.serving.schedulers); repeatable.",
    )(f)


def _slo_options(f: Any) -> Any:
    f = click.option("--slo-tpot", type=float, default=0.05, show_default=True, help="Time-per-output-token SLO (s).")(
        f
    )
    return click.option("--slo-ttft", type=float, default=1.0, show_default=True, help="Time-to-first-token SLO (s).")(
        f
    )


@serve.command("run", context_settings=CONTEXT_SETTINGS)
@click.option(
    "--cluster",
    "cluster_name",
    default="a100+7xu280",
    show_default=True,
    help="Built-in cluster name (`hwmodel serve clusters`) or a cluster TOML path.",
)
@_cluster_options
@_scheduler_options
@_stream_options
@_slo_options
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

    cluster = _cluster(cluster_name, llm, kv_path, gpu_batch)
    if load_fraction is not None:
        if requests_file is not None or math.isfinite(rate):
            raise HwmodelError("--load sets the rate from the saturation rate: give it without --rate or --requests")
        sat = _load_stream(None, n_requests, math.inf, prompt, output, seed, cluster.llm.max_position)
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
    reqs = _load_stream(requests_file, n_requests, rate, prompt, output, seed, cluster.llm.max_position)
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
            lambda s: _load_stream(None, n_requests, rate, prompt, output, s, max_ctx),
            seeds,
            seed,
            scheduler,
            slo,
        )
    report_replicas(reps, HEADLINE, out_dir, plot_path, as_json)


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
@_scheduler_options
@_slo_options
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
            cluster = _cluster(name, None, None, None)
            for r in rate_list:
                reqs = _load_stream(None, n_requests, r, prompt, output, seed, cluster.llm.max_position)
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


# ================================================================================================ workload
workload = group("workload")


@workload.group("requests", context_settings=CONTEXT_SETTINGS)
def requests_group() -> None:
    """Serving request streams: generate (Poisson, fixed or distributed lengths) and validate."""


@requests_group.command("generate", context_settings=CONTEXT_SETTINGS)
@click.option(
    "--n", "n_requests", type=click.IntRange(min=1), default=1000, show_default=True, help="Requests to generate."
)
@click.option(
    "--rate",
    type=float,
    default=1.0,
    show_default=True,
    help="Poisson arrival rate (requests/s); inf puts every arrival at t=0.",
)
@click.option(
    "--prompt",
    default="1536",
    show_default=True,
    help="Prompt length law: N, fixed:N, uniform:LO:HI or lognormal:MEDIAN:SIGMA:MAX.",
)
@click.option("--output", default="512", show_default=True, help="Output length law (same forms).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the request generator.")
@click.option(
    "-o",
    "--out",
    "out_file",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="Output file (.csv or .jsonl).",
)
def requests_generate(n_requests: int, rate: float, prompt: str, output: str, seed: int, out_file: Path) -> None:
    """Write a request stream to a file."""
    from hwmodel.workload.requests import parse_length, poisson_stream, summary, write_requests

    reqs = poisson_stream(n_requests, rate, parse_length(prompt, "--prompt"), parse_length(output, "--output"), seed)
    write_requests(out_file, reqs)
    s = summary(reqs)
    click.echo(
        f"wrote {out_file}: {s['requests']} requests over {s['span_s']:.1f} s, "
        f"mean prompt {s['prompt_tokens_mean']:.0f}, mean output {s['output_tokens_mean']:.0f} tokens"
    )


@requests_group.command("validate", context_settings=CONTEXT_SETTINGS)
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--llm", default=None, help="Also check prompt + output against this LLM's context limit.")
@json_option
def requests_validate(path: Path, llm: str | None, as_json: bool) -> None:
    """Check a request file; print its summary or a one-line error naming the line and field."""
    from hwmodel.specs import library
    from hwmodel.workload.requests import load_requests, summary

    limit = library().llm(llm).max_position if llm else None
    s = summary(load_requests(path, max_context_tokens=limit))
    if as_json:
        echo_json(s)
        return
    click.echo(f"{path}: OK, " + ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}" for k, v in s.items()))


# ================================================================================================ reproduce
def _prefetch_note(head: dict) -> str:
    """The hybrid with prefetching (GLITCHES's optimization) and the U280 price it would need for 2.38x."""
    if "prefetch_ratio" not in head:
        return ""
    k = head["prefetch_ratio"]
    ratio = head["rows"][f"gpu+7xu280/k{k}"]["throughput_ratio"]
    return f"; with prefetch k={k}: {ratio:.2f}x, U280 at ${head['implied_fpga_price_usd_prefetch']:,.0f}"


@reproduce.command("glitches", context_settings=CONTEXT_SETTINGS)
@click.option("--gpu", "gpus", multiple=True, help="Also run the 8-card study with this GPU (spec name); repeatable.")
@click.option(
    "--requests",
    "n_requests",
    type=click.IntRange(min=10),
    default=1000,
    show_default=True,
    help="Requests per saturation run.",
)
@click.option("--quick", is_flag=True, help="Fewer requests and load points (a smoke run).")
@click.option(
    "--mix-requests",
    type=click.IntRange(min=10),
    default=200,
    show_default=True,
    help="Requests per point of the workload-mix grid and of the decoder comparison.",
)
@click.option(
    "--scale-nodes",
    type=click.IntRange(min=1),
    default=64,
    show_default=True,
    help="Nodes (A100 + 7 x U280 each) of the scale run.",
)
@click.option(
    "--scale-requests",
    type=click.IntRange(min=10),
    default=100_000,
    show_default=True,
    help="Requests of the scale run (the 64-node, 1,000,000-request run is benchmarks/bench_serving.py).",
)
@click.pass_context
def reproduce_glitches(
    ctx: click.Context,
    gpus: tuple[str, ...],
    n_requests: int,
    quick: bool,
    mix_requests: int,
    scale_nodes: int,
    scale_requests: int,
) -> None:
    """GLITCHES: 8 x A100 vs 8 x U280 vs A100 + 7 x U280 (LLaMA2-7B, 1536/512), and beyond: the comparison over a
    prompt x output grid and length distributions with averages and break-even prices, streaming and V80
    decoders, a scale run."""
    from rich.progress import Progress

    from hwmodel.serving import mix, scale
    from hwmodel.serving.cluster import load_cluster
    from hwmodel.serving.report import (
        beyond_table,
        glitches_markdown,
        headline_table,
        metrics_table,
        mix_markdown,
        perfetto_trace,
        plot_load,
        scale_markdown,
        write_json,
    )
    from hwmodel.serving.study import PUBLISHED, GlitchesStudy, StudyConfig
    from hwmodel.specs import library

    for g in gpus:
        library().gpu(g)  # unknown names fail here, listing the choices
    cfg = StudyConfig(requests=min(n_requests, 200) if quick else n_requests)
    if quick:
        cfg.load_points = (0.5, 1.0, 1.3)
        cfg.load_requests = 150
        cfg.gpu_batches = (1, 3)
    out_dir: Path = ctx.obj["out_dir"] / "glitches"
    con = console()
    with Progress(console=con, transient=True) as bar:
        runs = 5 * (1 + len(gpus)) + 12 + 2 * len(cfg.gpu_batches) + 3 * len(cfg.load_points) + 4 + 1
        task = bar.add_task("GLITCHES study", total=runs)
        study = GlitchesStudy(cfg, progress=lambda msg: bar.update(task, advance=1, description=msg))
        heads = [study.headline("a100-40gb")] + [study.headline(g) for g in gpus]
        beyond = study.beyond()
        batches = study.gpu_batch()
        capacity = heads[0]["rows"]["gpu+7xu280"]["metrics"].request_rate_per_s
        load = study.load(capacity)
        scheds = study.schedulers(capacity)
        _m, hybrid_run = study.run(load_cluster("a100+7xu280"), study.saturation[:40], record=True)
        mix_n = min(mix_requests, 100) if quick else mix_requests
        mpts = mix.points(requests=mix_n)
        dpts = [p for p in mix.decoder_points(requests=mix_n) if p["config"] not in mix.CONFIGS]
        bar.update(task, total=runs + len(mpts) + len(dpts) + 1)
        step = lambda _i, _n, p: bar.update(task, advance=1, description=f"{p['config']} {p['workload']}")  # noqa: E731
        out_dir.mkdir(parents=True, exist_ok=True)  # the mix points are journaled: a killed study resumes
        mix_res = mix.run(mpts, step, factory=study.factory, journal=out_dir / "mix_journal.jsonl")
        dec_res = mix.run(dpts, step, factory=study.factory, journal=out_dir / "decoders_journal.jsonl")
        study.factory.save()  # type: ignore[attr-defined]
        mix_sum = mix.summarize(mix_res)
        dec_sum = mix.summarize(dec_res + [r for r in mix_res if r["workload"] in {p["workload"] for p in dpts}])
        bar.update(task, description=f"scale run: {scale_nodes} nodes, {scale_requests:,} requests")
        sc = scale.run_scale(
            scale.scale_point(nodes=scale_nodes, requests=min(scale_requests, 2000) if quick else scale_requests),
            factory=study.factory,
            progress=lambda done, total: bar.update(task, description=f"scale run: {done:,}/{total:,} requests"),
        )
        bar.update(task, advance=1)
    result = {
        "published": PUBLISHED,
        "config": cfg,
        "headline": heads,
        "beyond": beyond,
        "gpu_batch": batches,
        "load": load,
        "schedulers": scheds,
        "mix": mix_sum,
        "mix_points": mix_res,
        "decoders": dec_sum,
        "scale": scale.model_figures(sc),
    }
    write_json(out_dir / "glitches.json", result)  # byte-identical from run to run; host figures: run.json
    write_json(out_dir / "run.json", {"scale_run": scale.host_figures(sc)})
    (out_dir / "summary.md").write_text(glitches_markdown(result))
    plot_load(load, out_dir / "throughput_vs_load.png", "LLaMA2-7B, 1536/512 tokens, FCFS, Poisson arrivals")
    perfetto_trace(hybrid_run, out_dir / "hybrid_trace.json")
    mix.heatmap(mix_sum, out_dir / "mix_heatmap.png")
    for h in heads:
        con.print(
            headline_table(
                h,
                f"8-card node, {h['gpu']} (saturation, {cfg.requests} requests of {cfg.prompt.spec}/{cfg.output.spec})",
            )
        )
        hyb = h["rows"]["gpu+7xu280"]
        p = h["prices_usd"]
        click.echo(
            f"  prices: {h['gpu']} ${p[h['gpu']]:,.0f}, U280 ${p['u280']:,.0f}; the published 2.38x cost "
            f"efficiency at this throughput ratio ({hyb['throughput_ratio']:.2f}x) would need a U280 at "
            f"${h['implied_fpga_price_usd']:,.0f}" + _prefetch_note(h)
        )
    con.print(beyond_table(beyond, "Beyond the published node: P2P KV path, a second node, prefill/decode nodes"))
    from rich.table import Table

    t = Table(
        title="GPU decode batching (HF, padded): hybrid vs 8 x A100, both batched alike, and vs the "
        f"batch-{cfg.gpu_batches[0]} baseline"
    )
    for col in (
        "GPU batch",
        "8xA100 tok/s",
        "A100+7xU280 tok/s",
        "throughput ratio",
        "cost eff. ratio",
        "vs baseline b=1: throughput",
        "cost eff.",
    ):
        t.add_column(col, justify="right")
    for r in batches:
        t.add_row(
            str(r["gpu_batch"]),
            f"{r['8xgpu'].throughput_tok_per_s:.1f}",
            f"{r['gpu+7xu280'].throughput_tok_per_s:.1f}",
            f"{r['throughput_ratio']:.2f}x",
            f"{r['cost_efficiency_ratio']:.2f}x",
            f"{r['throughput_ratio_vs_batch1']:.2f}x",
            f"{r['cost_efficiency_ratio_vs_batch1']:.2f}x",
        )
    con.print(t)
    con.print(
        metrics_table(
            [(r["scheduler"], r["metrics"]) for r in scheds],
            f"Schedulers on A100 + 7 x U280 (GPU batch <= {cfg.scheduler_gpu_batch}), log-normal "
            f"lengths, 90% load, SLO TTFT {cfg.slo.ttft_s:g} s / TPOT {cfg.slo.tpot_s * 1e3:g} ms",
        )
    )
    from rich.markdown import Markdown

    con.print(
        Markdown(
            mix_markdown(
                mix_sum,
                f"Workload mix ({mix_n} requests per point): throughput ratio vs 8 x A100 (cost-efficiency ratio)",
            )
        )
    )
    con.print(
        Markdown(
            mix_markdown(
                dec_sum,
                "Decoder styles and boards",
                ["gpu+7xfpga", "gpu+7xfpga/k4", "gpu+7xu280-streaming", "gpu+7xv80", "8xv80"],
            )
        )
    )
    con.print(Markdown(scale_markdown(sc, scale.host_figures(sc))))
    click.echo(
        f"wrote {out_dir / 'glitches.json'}, {out_dir / 'summary.md'}, {out_dir / 'run.json'}, {out_dir / 'throughput_vs_load.png'}, "
        f"{out_dir / 'mix_heatmap.png'}, {out_dir / 'hybrid_trace.json'}"
    )


reproduce_glitches.order = 90  # type: ignore[attr-defined]
