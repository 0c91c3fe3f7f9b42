"""`hwmodel reproduce glitches`: the GLITCHES 8-card study and beyond (workload mix, decoders, scale run)."""

from __future__ import annotations

from pathlib import Path

import click

from hwmodel.cli.base import CONTEXT_SETTINGS, console
from hwmodel.cli.cmd_reproduce import reproduce


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
