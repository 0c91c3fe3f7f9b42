"""The GLITCHES 8-card comparison over a workload mix (issue 18): a grid of prompt x output lengths within
LLaMA2-7B's context and request-length distributions, each point and the average; card prices and the price
ratio at which each published cost-efficiency figure holds.

The published 8-card ratios (1.28x throughput, 2.38x cost efficiency of A100 + 7 x U280 over 8 x A100) are
*averages over several workloads* whose lengths are not stated (shared/research/measurements.md s4); the
single-device table is one workload (1,536 + 512). So the model is run at every point of a grid and on length
distributions, and the published figures are set against the grid average (and the 1,536 + 512 point, kept).

Structure (for a resumable study runner): :func:`points` lists independent JSON-serializable points, :func:`run_point`
is a pure function of one point (same point -> bit-identical result, whatever process runs it), :func:`summarize`
turns the list of results into ratios, averages and break-even prices. Engine set-up is shared within a process
(one factory) and on disk between processes (the decode/prefill table cache of :mod:`.devices`).

Distributions: no public serving trace's length statistics were found with a primary source we could cite here,
so the distributions are log-normal laws whose medians and spreads are **assumptions** (stated in
:data:`DISTRIBUTIONS`), not fits to a trace.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hwmodel.serving.cluster import load_cluster, resolve_cluster
from hwmodel.serving.devices import DeviceFactory, EngineFactory
from hwmodel.serving.metrics import compute_metrics
from hwmodel.serving.simulator import simulate
from hwmodel.serving.study import PUBLISHED, with_prefetch
from hwmodel.specs import library
from hwmodel.workload.requests import parse_length, poisson_stream

PUBLISHED_SOURCE = (
    "GLITCHES (IEEE HPEC 2024): A100 + 7 x U280 vs 8 x A100, LLaMA2-7B, 'average system throughput' "
    "over unstated workloads (shared/MISSION.md B; shared/research/measurements.md s4)"
)

# config key -> (cluster, FPGA prefetch ratio or None for the design's own)
CONFIGS: dict[str, tuple[str, int | None]] = {
    "8xgpu": ("8xa100", None),
    "8xfpga": ("8xu280", None),
    "gpu+7xfpga": ("a100+7xu280", None),
    "8xfpga/k4": ("8xu280", 4),
    "gpu+7xfpga/k4": ("a100+7xu280", 4),
}
# decoder styles and boards beside the published ones (issue 14): the same hybrid node with streaming-design U280s
# at glitches-u280's resources, a V80 decode pool, an FPGA-only V80 node
DECODER_CONFIGS: dict[str, tuple[str, int | None]] = {
    "8xgpu": ("8xa100", None),
    "gpu+7xfpga": ("a100+7xu280", None),
    "gpu+7xfpga/k4": ("a100+7xu280", 4),
    "gpu+7xu280-streaming": ("a100+7xu280-streaming", None),
    "gpu+7xv80": ("a100+7xv80", None),
    "8xv80": ("8xv80", None),
}
ALL_CONFIGS = CONFIGS | DECODER_CONFIGS
BASELINE = "8xgpu"
PROMPTS = (128, 256, 512, 1024, 1536, 2048, 3072)
OUTPUTS = (128, 256, 512, 1024)
DISTRIBUTIONS: dict[str, tuple[str, str, str]] = {
    # label -> (prompt law, output law, what it stands for); medians and sigmas are assumptions, not trace fits
    "lognormal-long": (
        "lognormal:1024:0.6:3072",
        "lognormal:256:0.8:1024",
        "long prompts, medium outputs (median 1,024 + 256; assumed)",
    ),
    "lognormal-short": (
        "lognormal:256:1.0:3072",
        "lognormal:128:0.8:1024",
        "short chat-like prompts and outputs (median 256 + 128; assumed)",
    ),
}
PUBLISHED_POINT = (1536, 512)


def grid(
    prompts: Sequence[int] = PROMPTS, outputs: Sequence[int] = OUTPUTS, max_context: int = 4096
) -> list[tuple[int, int]]:
    """(prompt, output) pairs whose final context (prompt + output - 1) fits the model."""
    return [(p, o) for p in prompts for o in outputs if p + o - 1 <= max_context - 1]


def points(
    requests: int = 400,
    seed: int = 0,
    configs: Sequence[str] = tuple(CONFIGS),
    prompts: Sequence[int] = PROMPTS,
    outputs: Sequence[int] = OUTPUTS,
    distributions: Sequence[str] = tuple(DISTRIBUTIONS),
) -> list[dict[str, Any]]:
    """Every (config, workload) point of the study, as plain JSON-serializable dicts."""
    llm = library().llm(load_cluster(ALL_CONFIGS[configs[0]][0]).llm)
    work = [
        {"workload": f"{p}+{o}", "prompt": f"fixed:{p}", "output": f"fixed:{o}", "kind": "grid"}
        for p, o in grid(prompts, outputs, llm.max_position)
    ]
    if PUBLISHED_POINT not in grid(prompts, outputs, llm.max_position):
        p, o = PUBLISHED_POINT
        work.append({"workload": f"{p}+{o}", "prompt": f"fixed:{p}", "output": f"fixed:{o}", "kind": "published"})
    work += [
        {"workload": d, "prompt": DISTRIBUTIONS[d][0], "output": DISTRIBUTIONS[d][1], "kind": "distribution"}
        for d in distributions
    ]
    return [
        {
            "config": c,
            "cluster": ALL_CONFIGS[c][0],
            "prefetch": ALL_CONFIGS[c][1],
            "requests": requests,
            "seed": seed,
            **w,
        }
        for w in work
        for c in configs
    ]


def decoder_points(requests: int = 400, seed: int = 0) -> list[dict[str, Any]]:
    """The decoder-style comparison: the published workload and the long log-normal mix, for every config of
    :data:`DECODER_CONFIGS`."""
    return points(
        requests,
        seed,
        tuple(DECODER_CONFIGS),
        prompts=(PUBLISHED_POINT[0],),
        outputs=(PUBLISHED_POINT[1],),
        distributions=("lognormal-long",),
    )


_FACTORY: EngineFactory | None = None


def shared_factory() -> EngineFactory:
    """One factory per process: identical devices share their engines and tables across points."""
    global _FACTORY
    if _FACTORY is None:
        _FACTORY = EngineFactory()
    return _FACTORY


def run_point(point: dict[str, Any], factory: DeviceFactory | None = None) -> dict[str, Any]:
    """Simulate one point at saturation (every request queued at t = 0, FCFS, the published setting): its
    throughput, cost efficiency and energy per token."""
    spec = load_cluster(point["cluster"])
    if point.get("prefetch"):
        spec = with_prefetch(spec, int(point["prefetch"]))
    cluster = resolve_cluster(spec)
    reqs = poisson_stream(
        int(point["requests"]),
        math.inf,
        parse_length(point["prompt"], "prompt"),
        parse_length(point["output"], "output"),
        int(point["seed"]),
    )
    fac = factory or shared_factory()
    m = compute_metrics(simulate(cluster, reqs, "fcfs", factory=fac))
    if factory is None:
        fac.save()  # type: ignore[attr-defined]
    return {
        "config": point["config"],
        "workload": point["workload"],
        "kind": point["kind"],
        "cluster": m.cluster,
        "throughput_tok_per_s": m.throughput_tok_per_s,
        "cost_usd": m.cost_usd,
        "tok_per_s_per_usd": m.tok_per_s_per_usd,
        "energy_per_token_j": m.energy_per_token_j,
        "request_rate_per_s": m.request_rate_per_s,
        "mean_prompt_tokens": m.prompt_tokens / m.requests,
        "mean_output_tokens": m.output_tokens / m.requests,
    }


def use_factory(factory: EngineFactory) -> None:
    """Make ``factory`` this process's shared factory (a study that already built the devices lends them)."""
    global _FACTORY
    _FACTORY = factory


def run(
    pts: Sequence[dict[str, Any]],
    progress: Callable[[int, int, dict[str, Any]], None] | None = None,
    factory: DeviceFactory | None = None,
    *,
    journal: Path | None = None,
    workers: int = 1,
    scheduler: str | None = None,
) -> list[dict[str, Any]]:
    """Every point in order; the results do not depend on the order or on who runs them. With a ``journal`` (or
    several ``workers``, or a Dask ``scheduler``) the points run on the project's study runner
    (:mod:`hwmodel.studies.runner`): each finished point is journaled, a killed run resumes where it stopped and
    gives the same results, local processes and Dask agree. Without, a plain loop (``factory`` lends engines)."""
    if journal is not None or workers != 1 or scheduler is not None:
        import hashlib
        import json

        from hwmodel.studies.runner import run_points

        if factory is not None:
            use_factory(factory)  # type: ignore[arg-type]
        keys = [f"{i:04d}:{p['config']}:{p['workload']}" for i, p in enumerate(pts)]
        fp = hashlib.sha256(json.dumps(list(pts), sort_keys=True).encode()).hexdigest()[:16]
        done = [0]

        def tick(_key: str, _res: Any) -> None:
            if progress:
                progress(done[0], len(pts), pts[min(done[0], len(pts) - 1)])
            done[0] += 1

        res = run_points(
            "hwmodel.serving.mix:run_point",
            list(zip(keys, pts)),
            journal=journal,
            fingerprint=fp,
            workers=workers,
            scheduler=scheduler,
            start_method="fork",
            on_result=tick,
        )
        return [res.results[k] for k in keys]
    out = []
    for i, p in enumerate(pts):
        if progress:
            progress(i, len(pts), p)
        out.append(run_point(p, factory))
    return out


# ---------------------------------------------------------------------------------------------------- summary
def prices(gpu: str = "a100-40gb", board: str = "u280") -> dict[str, Any]:
    """Card prices from the specs, with their sources (all street/list prices flagged [M]: assumptions)."""
    lib = library()
    g, b = lib.gpu(gpu), lib.board(board)
    return {
        "gpu": gpu,
        "fpga": board,
        "gpu_usd": g.price_usd,
        "fpga_usd": b.price_usd,
        "gpu_source": g.source_of("price_usd"),
        "fpga_source": b.source_of("price_usd"),
        "fpga_to_gpu": b.price_usd / g.price_usd,
    }


def break_even_price_ratio(
    throughput_ratio: float, cost_efficiency_ratio: float, n_fpga: int = 7, n_gpu_hybrid: int = 1, n_gpu_base: int = 8
) -> float:
    """The FPGA/GPU price ratio r at which a hybrid with ``throughput_ratio`` the baseline's throughput has
    ``cost_efficiency_ratio`` its cost efficiency: T x n_base / (n_hybrid + n_fpga r) = CE, so
    r = (T n_base / CE - n_hybrid) / n_fpga (accelerator prices only, as the published comparison)."""
    return (throughput_ratio * n_gpu_base / cost_efficiency_ratio - n_gpu_hybrid) / n_fpga


def summarize(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Ratios against 8 x GPU per workload, their averages over the grid, and the break-even price ratios."""
    by = {(r["config"], r["workload"]): r for r in results}
    configs = list(dict.fromkeys(r["config"] for r in results))
    workloads = list(dict.fromkeys(r["workload"] for r in results))
    kinds = {r["workload"]: r["kind"] for r in results}
    rows = []
    for w in workloads:
        base = by.get((BASELINE, w))
        if base is None:
            continue
        for c in configs:
            r = by.get((c, w))
            if r is None:
                continue
            rows.append(
                {
                    "workload": w,
                    "kind": kinds[w],
                    "config": c,
                    "throughput_tok_per_s": r["throughput_tok_per_s"],
                    "throughput_ratio": r["throughput_tok_per_s"] / base["throughput_tok_per_s"],
                    "cost_efficiency_ratio": r["tok_per_s_per_usd"] / base["tok_per_s_per_usd"],
                    "energy_per_token_ratio": r["energy_per_token_j"] / base["energy_per_token_j"],
                }
            )
    pr = prices()
    averages = {}
    grid_w = [w for w in workloads if kinds[w] == "grid"]
    for c in configs:
        sel = [x for x in rows if x["config"] == c and x["kind"] == "grid"]
        if not sel:
            continue
        t_mean = sum(x["throughput_ratio"] for x in sel) / len(sel)
        ce_mean = sum(x["cost_efficiency_ratio"] for x in sel) / len(sel)
        tot = sum(by[(c, w)]["throughput_tok_per_s"] for w in grid_w if (c, w) in by)
        tot_base = sum(by[(BASELINE, w)]["throughput_tok_per_s"] for w in grid_w if (c, w) in by)
        averages[c] = {
            "points": len(sel),
            "mean_throughput_ratio": t_mean,
            "mean_cost_efficiency_ratio": ce_mean,
            "ratio_of_mean_throughputs": tot / tot_base,
            "geomean_throughput_ratio": math.exp(sum(math.log(x["throughput_ratio"]) for x in sel) / len(sel)),
        }
    hybrid = [c for c in configs if c.startswith("gpu+7xfpga")]
    break_even = []
    for c in hybrid:
        cases = (
            [(f"grid mean ({averages[c]['points']} points)", averages[c]["mean_throughput_ratio"])]
            if c in averages
            else []
        )
        cases += [
            (x["workload"], x["throughput_ratio"])
            for x in rows
            if x["config"] == c
            and x["kind"] in ("distribution", "published")
            or (x["config"] == c and x["workload"] == f"{PUBLISHED_POINT[0]}+{PUBLISHED_POINT[1]}")
        ]
        for label, t in dict.fromkeys(cases):
            break_even.append(
                {
                    "config": c,
                    "workload": label,
                    "throughput_ratio": t,
                    "published_cost_efficiency_ratio": PUBLISHED["cost_efficiency_ratio"],
                    "break_even_fpga_to_gpu_price": break_even_price_ratio(t, PUBLISHED["cost_efficiency_ratio"]),
                    "spec_fpga_to_gpu_price": pr["fpga_to_gpu"],
                }
            )
    return {
        "rows": rows,
        "averages": averages,
        "prices": pr,
        "break_even": break_even,
        "published": {
            "throughput_ratio": PUBLISHED["throughput_ratio"],
            "cost_efficiency_ratio": PUBLISHED["cost_efficiency_ratio"],
            "source": PUBLISHED_SOURCE,
        },
        "distributions": {k: {"prompt": v[0], "output": v[1], "what": v[2]} for k, v in DISTRIBUTIONS.items()},
    }


def heatmap(
    summary: dict[str, Any], path: Path, configs: Sequence[str] = ("8xfpga", "gpu+7xfpga", "8xfpga/k4", "gpu+7xfpga/k4")
) -> Path:
    """Throughput ratio vs 8 x GPU over the prompt x output grid, one panel per config (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    grid_rows = [r for r in summary["rows"] if r["kind"] == "grid"]
    ps = sorted({int(r["workload"].split("+")[0]) for r in grid_rows})
    os_ = sorted({int(r["workload"].split("+")[1]) for r in grid_rows})
    configs = [c for c in configs if any(r["config"] == c for r in grid_rows)]
    fig, axes = plt.subplots(1, len(configs), figsize=(3.6 * len(configs), 3.6), squeeze=False)
    for ax, c in zip(axes[0], configs):
        z = np.full((len(os_), len(ps)), np.nan)
        for r in grid_rows:
            if r["config"] == c:
                p, o = (int(x) for x in r["workload"].split("+"))
                z[os_.index(o), ps.index(p)] = r["throughput_ratio"]
        im = ax.imshow(z, origin="lower", cmap="RdBu", vmin=0.0, vmax=2.0, aspect="auto")
        for i in range(len(os_)):
            for j in range(len(ps)):
                if not math.isnan(z[i, j]):
                    ax.text(j, i, f"{z[i, j]:.2f}", ha="center", va="center", fontsize=7)
        ax.set_xticks(range(len(ps)), [str(p) for p in ps], rotation=45, fontsize=7)
        ax.set_yticks(range(len(os_)), [str(o) for o in os_], fontsize=7)
        ax.set_xlabel("prompt tokens")
        ax.set_title(f"{c} / 8xgpu", fontsize=9)
    axes[0][0].set_ylabel("output tokens")
    fig.colorbar(im, ax=axes[0].tolist(), shrink=0.8, label="throughput ratio")
    fig.suptitle("LLaMA2-7B, saturation, FCFS: throughput vs 8 x A100", fontsize=10)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path
