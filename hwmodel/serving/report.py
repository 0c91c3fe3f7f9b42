"""Reports of serving runs and of the GLITCHES study: rich tables, JSON/CSV, a Markdown summary, a
throughput-vs-load PNG and a Perfetto (Chrome trace JSON) timeline of device activity. CSV, Markdown tables and the
trace format come from the shared :mod:`hwmodel.report`; what is specific to serving (which columns, which
tracks, the load plot) lives here.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hwmodel.io import atomic_write_text, jsonable
from hwmodel.serving.metrics import Metrics, request_arrays
from hwmodel.serving.state import SimResult


def write_json(path: Path, obj: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(jsonable(obj), indent=2))  # whole or not at all
    return path


def write_request_csv(path: Path, result: SimResult) -> Path:
    """One row per request: arrival, lengths, devices, path, milestone times, decode steps per pool."""
    from hwmodel.report.tables import write_csv

    cols = request_arrays(result)
    names = list(cols)
    rows = ({n: cols[n][i].item() for n in names} for i in range(len(cols["id"])))
    return write_csv(path, rows, names)


# ------------------------------------------------------------------------------------------------ tables
def _ms(x: float) -> str:
    return "-" if not math.isfinite(x) else f"{x * 1e3:.1f}"


def metrics_table(rows: Sequence[tuple[str, Metrics]], title: str) -> Any:
    """One line per run: throughput, latency percentiles, goodput, energy, cost efficiency, utilization."""
    from rich.table import Table

    t = Table(title=title)
    for col in (
        "run",
        "tok/s",
        "req/s",
        "TTFT p50/p99 (ms)",
        "TPOT p50/p99 (ms)",
        "SLO ok",
        "goodput req/s",
        "J/token",
        "cost k$",
        "tok/s per k$",
        "util prefill/decode pool",
        "decoded by prefill pool",
    ):
        t.add_column(col, justify="left" if col == "run" else "right")
    for label, m in rows:
        u = m.mean_utilization
        dec = m.decode_tokens_prefill_pool + m.decode_tokens_decode_pool
        t.add_row(
            label,
            f"{m.throughput_tok_per_s:.1f}",
            f"{m.request_rate_per_s:.3f}",
            f"{_ms(m.ttft_s.p50)} / {_ms(m.ttft_s.p99)}",
            f"{_ms(m.tpot_s.p50)} / {_ms(m.tpot_s.p99)}",
            f"{m.slo_attainment:.0%}",
            f"{m.goodput_req_per_s:.3f}",
            f"{m.energy_per_token_j:.2f}",
            f"{m.cost_usd / 1e3:.1f}",
            f"{m.tok_per_s_per_usd * 1e3:.2f}",
            " / ".join(f"{u[k]:.0%}" if k in u else "-" for k in ("prefill", "decode")),
            f"{m.decode_tokens_prefill_pool / dec:.0%}" if dec else "-",
        )
    return t


def device_table(m: Metrics, title: str) -> Any:
    from rich.table import Table

    t = Table(title=title)
    for col in ("device", "model", "util", "prefill s", "decode s", "KV in s", "energy kJ", "peak mem GB", "mem GB"):
        t.add_column(col, justify="left" if col in ("device", "model") else "right")
    for d in m.devices:
        t.add_row(
            d.name,
            d.model,
            f"{d.utilization:.1%}",
            f"{d.prefill_s:.1f}",
            f"{d.decode_s:.1f}",
            f"{d.transfer_s:.2f}",
            f"{d.energy_j / 1e3:.1f}",
            f"{d.peak_memory_bytes / 1e9:.2f}",
            f"{d.memory_bytes / 1e9:.2f}",
        )
    return t


def headline_table(study: dict[str, Any], title: str) -> Any:
    from rich.table import Table

    t = Table(title=title)
    for col in (
        "node",
        "tok/s",
        "cost k$",
        "tok/s per k$",
        "J/token",
        "throughput vs 8xGPU",
        "published",
        "cost eff. vs 8xGPU",
        "published",
    ):
        t.add_column(col, justify="left" if col == "node" else "right")
    for _key, row in study["rows"].items():
        m = row["metrics"]
        pub_t = row.get("published_throughput_ratio")
        pub_c = row.get("published_cost_efficiency_ratio")
        t.add_row(
            m.cluster,
            f"{m.throughput_tok_per_s:.1f}",
            f"{m.cost_usd / 1e3:.1f}",
            f"{m.tok_per_s_per_usd * 1e3:.2f}",
            f"{m.energy_per_token_j:.2f}",
            f"{row['throughput_ratio']:.2f}x",
            f"{pub_t:.2f}x" if pub_t else "-",
            f"{row['cost_efficiency_ratio']:.2f}x",
            f"{pub_c:.2f}x" if pub_c else "-",
        )
    return t


def beyond_table(rows: Sequence[dict[str, Any]], title: str) -> Any:
    from rich.table import Table

    t = Table(title=title)
    for col in (
        "cluster",
        "KV path",
        "sat. tok/s",
        "tok/s per k$",
        "util prefill/decode pool",
        "load req/s",
        "TTFT p50/p90 (ms)",
        "KV exposed p50/max (ms)",
        "migrations at load",
    ):
        t.add_column(col, justify="left" if col in ("cluster", "KV path", "migrations at load") else "right")
    for r in rows:
        m, a = r["metrics"], r["at_load"]
        u = m.mean_utilization
        t.add_row(
            r["cluster"],
            r["kv_path"],
            f"{m.throughput_tok_per_s:.1f}",
            f"{m.tok_per_s_per_usd * 1e3:.2f}",
            " / ".join(f"{u[k]:.0%}" if k in u else "-" for k in ("prefill", "decode")),
            f"{r['offered_req_per_s']:.3f}",
            f"{_ms(a.ttft_s.p50)} / {_ms(a.ttft_s.p90)}",
            f"{_ms(a.kv_exposed_s.p50)} / {_ms(a.kv_exposed_s.max)}",
            ", ".join(f"{k} {v}" for k, v in a.kv_migrations.items()),
        )
    return t


# ------------------------------------------------------------------------------------------------ plot
def plot_load(rows: Sequence[dict[str, Any]], path: Path, title: str) -> Path:
    """Throughput and TTFT p90 against offered load, one line per node configuration."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for cfg in dict.fromkeys(r["config"] for r in rows):
        pts = sorted((r["offered_req_per_s"], r["metrics"]) for r in rows if r["config"] == cfg)
        label = pts[0][1].cluster
        x = [p[0] for p in pts]
        ax1.plot(x, [p[1].throughput_tok_per_s for p in pts], marker="o", label=label)
        ax2.plot(x, [p[1].ttft_s.p90 for p in pts], marker="o", label=label)
    ax1.set_xlabel("offered load (requests/s)")
    ax1.set_ylabel("throughput (output tokens/s)")
    ax2.set_xlabel("offered load (requests/s)")
    ax2.set_ylabel("TTFT p90 (s)")
    ax2.set_yscale("log")
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


# ------------------------------------------------------------------------------------------------ trace
def perfetto_trace(result: SimResult, path: Path, max_requests: int | None = None) -> Path:
    """Chrome trace JSON (opens in ui.perfetto.dev): one track per device with its prefill and decode runs, and
    one track per FPGA for incoming KV caches (prefill start to KV ready). Needs a run with recorded segments."""
    from hwmodel.report.perfetto import Slice, write_chrome_trace

    keep = None
    if max_requests is not None:
        keep = {rs.id for rs in sorted(result.requests, key=lambda r: r.arrival_s)[:max_requests]}
    tracks: dict[str, list[Slice]] = {}
    kv_track: dict[int, str] = {}
    for d in result.devices:
        name = f"{d.name} ({d.model.label})"
        tracks[name] = [
            Slice(
                start,
                end,
                f"{kind} r{ids[0]}" + (f" +{len(ids) - 1}" if len(ids) > 1 else ""),
                kind,
                {"requests": list(ids)},
            )
            for start, end, kind, ids in d.segments
            if keep is None or keep.intersection(ids)
        ]
        if d.role == "decode":
            kv_track[d.index] = f"{d.name} KV in"
            tracks[kv_track[d.index]] = []
    for rs in result.requests:
        if rs.path_kind in ("", "local") or (keep is not None and rs.id not in keep):
            continue
        tracks[kv_track[rs.decode_dev]].append(
            Slice(
                rs.t_prefill_start,
                rs.t_kv_ready,
                f"KV r{rs.id} ({rs.path_kind})",
                "transfer",
                {"bytes": rs.kv_bytes_moved},
            )
        )
    return write_chrome_trace(path, tracks, process_name=f"serving: {result.cluster} ({result.scheduler})")


def glitches_markdown(result: dict[str, Any]) -> str:
    """The study as Markdown: headline per GPU (with the published ratios), beyond, batching, schedulers."""
    from hwmodel.report.tables import markdown_table

    out = [f"# GLITCHES study\n\nPublished: {result['published']['source']}.\n"]
    for h in result["headline"]:
        rows = []
        for row in h["rows"].values():
            m = row["metrics"]
            pub_t, pub_c = row.get("published_throughput_ratio"), row.get("published_cost_efficiency_ratio")
            rows.append(
                [
                    m.cluster,
                    f"{m.throughput_tok_per_s:.1f}",
                    f"{m.cost_usd / 1e3:.1f}",
                    f"{m.tok_per_s_per_usd * 1e3:.2f}",
                    f"{m.energy_per_token_j:.2f}",
                    f"{row['throughput_ratio']:.2f}x" + (f" ({pub_t:.2f}x)" if pub_t else ""),
                    f"{row['cost_efficiency_ratio']:.2f}x" + (f" ({pub_c:.2f}x)" if pub_c else ""),
                ]
            )
        out.append(f"## 8-card node, {h['gpu']}\n")
        out.append(
            markdown_table(
                [
                    "node",
                    "tok/s",
                    "cost k$",
                    "tok/s per k$",
                    "J/token",
                    "throughput vs 8xGPU (published)",
                    "cost eff. vs 8xGPU (published)",
                ],
                rows,
            )
        )
        out.append(
            f"\nA U280 at ${h['implied_fpga_price_usd']:,.0f} would give the published 2.38x cost efficiency at "
            "the ratio-1 throughput ratio"
            + (
                f" (${h['implied_fpga_price_usd_prefetch']:,.0f} at the prefetch k={h['prefetch_ratio']} one)"
                if "prefetch_ratio" in h
                else ""
            )
            + ". Rows `/k4` run the U280s with GLITCHES's prefetching "
            "(its measured 21.50 ms/token is without it).\n"
        )
    rows = []
    for r in result["beyond"]:
        m, a = r["metrics"], r["at_load"]
        rows.append(
            [
                r["cluster"],
                r["kv_path"],
                f"{m.throughput_tok_per_s:.1f}",
                f"{r['offered_req_per_s']:.3f}",
                f"{_ms(a.ttft_s.p50)} / {_ms(a.ttft_s.p90)}",
                f"{_ms(a.kv_exposed_s.p50)} / {_ms(a.kv_exposed_s.max)}",
                ", ".join(f"{k} {v}" for k, v in a.kv_migrations.items()),
            ]
        )
    out.append("## P2P, a second node, prefill/decode nodes\n")
    out.append(
        markdown_table(
            [
                "cluster",
                "KV path",
                "saturation tok/s",
                "load req/s",
                "TTFT p50/p90 (ms)",
                "KV exposed p50/max (ms)",
                "migrations at load",
            ],
            rows,
            "llrrrrl",
        )
    )
    rows = [
        [
            r["gpu_batch"],
            f"{r['8xgpu'].throughput_tok_per_s:.1f}",
            f"{r['gpu+7xu280'].throughput_tok_per_s:.1f}",
            f"{r['throughput_ratio']:.2f}x",
            f"{r['throughput_ratio_vs_batch1']:.2f}x",
            f"{r['cost_efficiency_ratio_vs_batch1']:.2f}x",
        ]
        for r in result["gpu_batch"]
    ]
    out.append("\n## GPU decode batching\n")
    out.append(
        markdown_table(
            [
                "GPU batch",
                "8xA100 tok/s",
                "A100+7xU280 tok/s",
                "ratio (both batched)",
                "ratio vs batch-1 baseline",
                "cost eff. vs batch-1 baseline",
            ],
            rows,
            "rrrrrr",
        )
    )
    rows = [
        [
            r["scheduler"],
            f"{_ms(r['metrics'].ttft_s.p50)} / {_ms(r['metrics'].ttft_s.p99)}",
            f"{_ms(r['metrics'].tpot_s.p50)} / {_ms(r['metrics'].tpot_s.p99)}",
            f"{r['metrics'].slo_attainment:.0%}",
            f"{r['metrics'].goodput_req_per_s:.3f}",
        ]
        for r in result["schedulers"]
    ]
    out.append("\n## Schedulers\n")
    out.append(markdown_table(["scheduler", "TTFT p50/p99 (ms)", "TPOT p50/p99 (ms)", "SLO ok", "goodput req/s"], rows))
    if result.get("mix"):
        out.append("\n" + mix_markdown(result["mix"]))
    if result.get("decoders"):
        out.append(
            "\n"
            + mix_markdown(
                result["decoders"],
                "Decoder styles and boards (same A100 prefill; streaming U280s at glitches-u280's resources; V80)",
                [c for c in ("gpu+7xfpga", "gpu+7xfpga/k4", "gpu+7xu280-streaming", "gpu+7xv80", "8xv80")],
            )
        )
    if result.get("scale"):
        out.append("\n" + scale_markdown(result["scale"]))
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------------- mix study
MIX_COLUMNS = ("8xfpga", "gpu+7xfpga", "8xfpga/k4", "gpu+7xfpga/k4")


def mix_markdown(
    summary: dict[str, Any],
    title: str = "Workload mix: throughput ratio vs 8 x A100",
    configs: Sequence[str] = MIX_COLUMNS,
) -> str:
    """Per-workload throughput ratios (cost-efficiency ratios in brackets), the grid averages, prices and the
    break-even FPGA/GPU price ratios, as Markdown."""
    from hwmodel.report.tables import markdown_table

    by = {(r["workload"], r["config"]): r for r in summary["rows"]}
    configs = [c for c in configs if any(r["config"] == c for r in summary["rows"])]
    workloads = list(dict.fromkeys(r["workload"] for r in summary["rows"]))
    rows = [
        [w, f"{by[(w, '8xgpu')]['throughput_tok_per_s']:.1f}" if (w, "8xgpu") in by else "-"]
        + [
            f"{by[(w, c)]['throughput_ratio']:.2f}x ({by[(w, c)]['cost_efficiency_ratio']:.2f}x)"
            if (w, c) in by
            else "-"
            for c in configs
        ]
        for w in workloads
    ]
    av = summary["averages"]
    rows.append(
        ["**grid mean**", ""]
        + [
            f"**{av[c]['mean_throughput_ratio']:.2f}x** ({av[c]['mean_cost_efficiency_ratio']:.2f}x)"
            if c in av
            else "-"
            for c in configs
        ]
    )
    out = [
        f"## {title}\n",
        markdown_table(["workload (prompt+output)", "8xA100 tok/s"] + list(configs), rows, "lr" + "r" * len(configs)),
    ]
    pr = summary["prices"]
    out.append(
        f"\nPrices (assumptions, [M] in the specs): {pr['gpu']} ${pr['gpu_usd']:,.0f} ({pr['gpu_source']}); "
        f"{pr['fpga']} ${pr['fpga_usd']:,.0f} ({pr['fpga_source']}); FPGA/GPU = {pr['fpga_to_gpu']:.2f}.\n"
    )
    be = [
        [
            b["config"],
            b["workload"],
            f"{b['throughput_ratio']:.2f}x",
            f"{b['break_even_fpga_to_gpu_price']:.2f}",
            f"{b['spec_fpga_to_gpu_price']:.2f}",
        ]
        for b in summary["break_even"]
    ]
    out.append(
        markdown_table(
            [
                "config",
                "workload",
                "throughput ratio",
                "U280/A100 price at which the published 2.38x holds",
                "spec price ratio",
            ],
            be,
            "llrrr",
        )
    )
    out.append(
        "\nDistributions (assumed log-normal laws, not trace fits): "
        + "; ".join(f"{k}: {v['prompt']} / {v['output']} ({v['what']})" for k, v in summary["distributions"].items())
        + ".\n"
    )
    return "\n".join(out)


def scale_markdown(res: dict[str, Any], host: dict[str, Any] | None = None) -> str:
    """The scale run's simulated results; with ``host`` (:func:`hwmodel.serving.scale.host_figures`), also what
    it cost on this machine (kept out of the files that must be byte-identical from run to run)."""
    p, m = res["point"], res["metrics"]
    text = (
        f"## Scale run\n\n{p['nodes']} nodes x ({p['node_cluster']}), {res['devices']} devices, "
        f"{p['requests']:,} requests ({p['prompt']} / {p['output']}, Poisson {p['rate_per_node_per_s']:g}/s per "
        f"node): {m.throughput_tok_per_s:,.0f} tok/s simulated, TTFT p50 {m.ttft_s.p50 * 1e3:,.0f} ms, "
        f"{m.kv_migrations.get('network-host-staged', 0):,} KV caches sent across nodes."
    )
    if host is None:
        return text + " (What the run cost this machine: run.json.)\n"
    h = host["host_s"]
    return (
        text + f" Host time {h['total']:.1f} s (simulation {h['simulate']:.1f} s, set-up {h['setup']:.1f} s), "
        f"{host['host_s_per_request'] * 1e6:.0f} us per request, peak memory "
        f"{host['peak_rss_bytes'] / 2**30:.2f} GiB.\n"
    )
