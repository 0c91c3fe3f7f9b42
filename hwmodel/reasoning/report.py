"""Outputs of the system-A study: per-problem CSV, summary table, ablation plot, Perfetto timelines, and the
Markdown report that puts each result beside its published reference value."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from hwmodel.reasoning.metrics import CSV_FIELDS, Summary
from hwmodel.reasoning.platform import Platform
from hwmodel.reasoning.runner import simulate_problem
from hwmodel.reasoning.study import (
    PUBLISHED_COMM_SHARE_MAX,
    PUBLISHED_EDGE_SLOWDOWN,
    PUBLISHED_REJECT_RATE_MAX,
    PUBLISHED_T2_SPEEDUP_CONFIG1,
    StudyResult,
    policy_label,
    speedup,
    study_traces,
    summary_index,
)
from hwmodel.reasoning.system import load_system
from hwmodel.report.perfetto import Counter, Slice, write_chrome_trace
from hwmodel.report.plots import grouped_bars
from hwmodel.report.tables import fmt, markdown_table, write_csv, write_csv_text
from hwmodel.workload.datasets import DATASET_TITLES
from hwmodel.workload.generator import trace_stats
from hwmodel.workload.trace import Problem, Trace, replay_of
from hwmodel.workload.traceio import write_trace

SUMMARY_FIELDS = list(Summary.__dataclass_fields__) + ["speedup_vs_baseline"]


def _pct(x: float, digits: int = 2) -> str:
    return "-" if not math.isfinite(x) else f"{100 * x:.{digits}f} %"


def _x(x: float) -> str:
    return "-" if not math.isfinite(x) else f"{x:.3f}x"


def write_tables(out_dir: Path, result: StudyResult) -> dict[str, Path]:
    idx = summary_index(result.summaries)
    rows = []
    for s in result.summaries:
        row = s.as_row()
        row["speedup_vs_baseline"] = speedup(idx, s.dataset, s.config, s.policy, s.backtracking)
        rows.append(row)
    problems = out_dir / "problems.csv"
    if result.unit_csv or not result.rows:  # the units' rows, already formatted, in the same order
        write_csv_text(problems, CSV_FIELDS, result.unit_csv)
    else:
        write_csv(problems, (r.as_row() for r in result.rows), CSV_FIELDS)
    return {"problems": problems, "summary": write_csv(out_dir / "summary.csv", rows, SUMMARY_FIELDS)}


def write_ablation_plot(out_dir: Path, result: StudyResult, datasets: Sequence[str], configs: Sequence[str]) -> Path:
    """Baseline -> +T2 -> +T2+T1, each with and without backtracking: speedup over the 3-GPU baseline with
    backtracking on the same dataset and configuration (so the bars without backtracking also show what
    backtracking costs)."""
    idx = summary_index(result.summaries)
    series = {
        "Baseline": ("baseline", True),
        "+T2": ("step-ahead", True),
        "+T2+T1": ("heteroreason", True),
        "Baseline, no backtracking": ("baseline", False),
        "+T2, no backtracking": ("step-ahead", False),
        "+T2+T1, no backtracking": ("heteroreason", False),
    }
    panels = {}
    for c in configs:
        system = load_system(c)
        cats = {}
        for d in datasets:
            ref = idx.get((d, c, "baseline", True))
            cats[DATASET_TITLES.get(d, d)] = {
                name: (
                    ref.latency_total_s / idx[(d, c, pol, bt)].latency_total_s
                    if ref is not None and (d, c, pol, bt) in idx
                    else math.nan
                )
                for name, (pol, bt) in series.items()
            }
        panels[f"{c}: target {system.target_llm}"] = cats
    band = (*PUBLISHED_T2_SPEEDUP_CONFIG1, "published +T2 (config 1)")
    colors = {"Baseline": "#9E9E9E", "+T2": "#4C72B0", "+T2+T1": "#DD8452"}
    colors.update({f"{k}, no backtracking": v for k, v in list(colors.items())})
    return grouped_bars(
        out_dir / "ablation.png",
        panels,
        list(series),
        ylabel="speedup over the baseline with backtracking",
        title="System A ablation: baseline -> +T2 -> +T2+T1, with and without backtracking",
        hatched=[s for s in series if "no backtracking" in s],
        colors=colors,
        reference_band=band,
        band_panels=[p for p in panels if p.startswith(f"{configs[0]}:")] if configs[0] == "config1" else [],
    )


def pick_timeline_problem(trace: Trace) -> Problem:
    """A short problem showing every scenario: an accepted step, a rejected one, and a backtrack if any."""
    best = None
    for p in trace.problems:
        r = replay_of(p, trace.header)
        score = (r.backtracks > 0) * 2 + (r.rejects > 0)
        key = (-score, len(p.attempts))
        if best is None or key < best[0]:
            best = (key, p)
    assert best is not None
    return best[1]


def write_timeline(path: Path, problem: Problem, trace: Trace, policy: str, platform: Platform) -> Path:
    """Perfetto timeline of the three devices (and the links) for one problem under one policy."""
    outcome, sim = simulate_problem(problem, trace.header, policy, platform, keep_log=True)
    tracks: dict[str, list[Slice]] = {}
    for role, dev in outcome.devices.items():
        tracks[f"{role}: {dev.name}"] = [
            Slice(
                a.start_s,
                a.end_s,
                a.label,
                a.phase.value,
                {"power_w": round(a.power_w, 3), "energy_j": round(a.energy_j, 6)},
            )
            for a in dev.activities()
        ]
    tracks["links (through the host)"] = [
        Slice(t.start_s, t.end_s, t.label, "transfer", {"path": t.path, "bytes": t.n_bytes}) for t in outcome.transfers
    ]
    meta = {
        "dataset": problem.dataset,
        "problem": problem.id,
        "policy": policy,
        "latency_s": outcome.latency_s,
        "committed_tokens": outcome.committed_tokens,
        "backtracking": trace.header.backtracking,
    }
    counters = (
        {"KVMU pointers (tokens)": [Counter(t, {"valid": v, "curr": c, "ahead": a}) for t, v, c, a in sim.kvmu_log]}
        if sim.kvmu_log
        else None
    )
    return write_chrome_trace(
        path, tracks, process_name=f"{policy}: {problem.dataset}/{problem.id}", metadata=meta, counters=counters
    )


def write_traces(
    out_dir: Path, datasets: Sequence[str], configs: Sequence[str], seed: int, limit: int | None
) -> list[Path]:
    paths = []
    for d in datasets:
        for c in configs:
            for t in study_traces(d, c, seed, limit):
                tag = "bt" if t.header.backtracking else "nobt"
                paths.append(write_trace(t, out_dir / "traces" / f"{d}_{c}_{tag}.jsonl.gz"))
    return paths


# ------------------------------------------------------------------------------------------------ Markdown
def render_report(
    result: StudyResult,
    datasets: Sequence[str],
    configs: Sequence[str],
    seed: int,
    limit: int | None,
    platforms: dict[str, dict[str, str]],
    timeline_files: Sequence[str],
) -> str:
    idx = summary_index(result.summaries)
    out: list[str] = ["# System A: step-wise speculative reasoning on FPGA + GPUs — reproduction", ""]
    n_problems = sum(len(study_traces(d, configs[0], seed, limit)[0].problems) for d in datasets)
    out += [
        f"Built-in traces (seed {seed}{', first ' + str(limit) + ' problems each' if limit else ''}): "
        f"{n_problems} problems over {len(datasets)} datasets, {len(configs)} configurations, "
        f"{len({s.policy for s in result.summaries})} policies and draft placements (the ablation's with and "
        f"without backtracking, the others with it); {len(result.rows)} problem replays. Run time, workers and "
        "resumed units are in `run.json` (this report is byte-identical however the study was run).",
        "",
    ]
    out += [
        "Every number below is an output of the device models replaying the traces; the published values are "
        "shown beside them and are not read by the model.",
        "",
    ]
    if result.skipped:
        out += ["**Not run in this checkout** (a device model is missing; their columns show '-'):", ""]
        out += [f"- `{p}`: {why}" for p, why in result.skipped.items()] + [""]

    # ---- platforms
    out += ["## Platforms", ""]
    rows = [
        [pol, ", ".join(f"{r}: {desc[r]}" for r in ("draft", "prm", "target") if r in desc)]
        for pol, desc in platforms.items()
    ]
    out += [markdown_table(["policy", "devices"], rows, "ll"), ""]
    for c in configs:
        s = load_system(c)
        devices = "; ".join(f"{n}: {d.describe()}" for n, d in s.devices.items())
        out += [
            f"- **{c}**: {s.display_name}; PRM prefix caching {'on' if s.prm_prefix_cache else 'off'}; "
            f"devices -- {devices}."
        ]
    out.append("")

    # ---- traces
    out += [
        "## Traces",
        "",
        f"Published: rejection probability typically below {PUBLISHED_REJECT_RATE_MAX:.0%} of steps.",
        "",
    ]
    rows = []
    for c in configs:
        for d in datasets:
            nobt, bt = study_traces(d, c, seed, limit)
            s0, s1 = trace_stats(nobt), trace_stats(bt)
            rows.append(
                [
                    c,
                    DATASET_TITLES.get(d, d),
                    s0["problems"],
                    fmt(s0["prompt_tokens_mean"], 4),
                    fmt(s0["steps_per_problem"], 3),
                    fmt(s0["committed_tokens_per_problem"], 4),
                    _pct(s0["step_reject_rate"], 1),
                    _pct(s1["step_reject_rate"], 1),
                    _pct(s0["token_acceptance_rate"], 1),
                    fmt(s1["backtracks_per_problem"], 3),
                    _pct(s0["accuracy"], 1),
                    _pct(s1["accuracy"], 1),
                ]
            )
    out += [
        markdown_table(
            [
                "config",
                "dataset",
                "problems",
                "prompt tok",
                "steps",
                "answer tok",
                "step reject (no bt)",
                "step reject (bt)",
                "token accept (no bt)",
                "backtracks/problem",
                "accuracy (no bt)",
                "accuracy (bt)",
            ],
            rows,
            "llrrrrrrrrrr",
        ),
        "",
    ]

    # ---- ablation
    out += [
        "## Ablation: latency speedup over the 3-GPU baseline on the same trace",
        "",
        f"Published: T2 alone on config 1, **{PUBLISHED_T2_SPEEDUP_CONFIG1[0]}–{PUBLISHED_T2_SPEEDUP_CONFIG1[1]}x** "
        "across the four datasets; T1+T2 slightly below T2 alone but with less energy.",
        "",
        "![ablation](ablation.png)",
        "",
    ]
    for c in configs:
        rows = []
        for d in datasets:
            b1 = idx.get((d, c, "baseline", True))
            b0 = idx.get((d, c, "baseline", False))
            t2 = speedup(idx, d, c, "step-ahead", True)
            in_band = ""
            if c == "config1" and math.isfinite(t2):
                lo, hi = PUBLISHED_T2_SPEEDUP_CONFIG1
                in_band = "inside" if lo <= t2 <= hi else ("below" if t2 < lo else "above")
            rows.append(
                [
                    DATASET_TITLES.get(d, d),
                    fmt(b1.latency_mean_s if b1 else math.nan, 4),
                    _x(t2),
                    in_band or "n/a",
                    _x(speedup(idx, d, c, "heteroreason", True)),
                    fmt(b0.latency_mean_s if b0 else math.nan, 4),
                    _x(speedup(idx, d, c, "step-ahead", False)),
                    _x(speedup(idx, d, c, "heteroreason", False)),
                    _x(speedup(idx, d, c, "step-ahead-submit", True)),
                ]
            )
        out += [
            f"### {c}: {load_system(c).display_name}",
            "",
            markdown_table(
                [
                    "dataset",
                    "baseline s/problem (bt)",
                    "+T2 (bt)",
                    "vs published band",
                    "+T2+T1 (bt)",
                    "baseline s/problem (no bt)",
                    "+T2 (no bt)",
                    "+T2+T1 (no bt)",
                    "+T2, target starts at submission (bt)",
                ],
                rows,
                "lrrcrrrrr",
            ),
            "",
        ]
    out += [
        "The last column is a sensitivity run (first configuration only) of the other reading of T2's "
        "asynchronous prefetch: the target starts regenerating a step only when the draft submits it, instead "
        'of as soon as the previous step is committed (docs/reasoning.md, "T2").',
        "",
    ]

    # ---- energy, communication, stalls
    out += [
        "## Energy, communication, stalls (with backtracking)",
        "",
        f"Published: communication at most **{PUBLISHED_COMM_SHARE_MAX * 100:.4f} %** of end-to-end latency "
        "(tokens, not KV caches, cross PCIe per step); T1+T2 uses less energy than T2 alone.",
        "",
    ]
    rows = []
    for c in configs:
        for d in datasets:
            get = {p: idx.get((d, c, p, True)) for p in ("baseline", "step-ahead", "heteroreason")}
            if any(v is None for v in get.values()):
                continue
            e = {p: v.energy_per_token_j for p, v in get.items()}
            hr = get["heteroreason"]
            rows.append(
                [
                    c,
                    DATASET_TITLES.get(d, d),
                    fmt(e["baseline"]),
                    fmt(e["step-ahead"]),
                    fmt(e["heteroreason"]),
                    _x(e["heteroreason"] / e["step-ahead"]),
                    f"{hr.comm_share * 100:.4f} %",
                    _x(hr.comm_share / PUBLISHED_COMM_SHARE_MAX),
                    _pct(get["baseline"].stall_ratio, 1),
                    _pct(get["step-ahead"].stall_ratio, 1),
                    _pct(hr.stall_ratio, 1),
                    _pct(get["step-ahead"].discarded_energy_share, 1),
                    _pct(hr.discarded_energy_share, 1),
                ]
            )
    out += [
        markdown_table(
            [
                "config",
                "dataset",
                "J/token base",
                "J/token +T2",
                "J/token +T2+T1",
                "energy +T2+T1 / +T2",
                "comm share +T2+T1",
                "vs published max",
                "stall base",
                "stall +T2",
                "stall +T2+T1",
                "discarded energy +T2",
                "discarded energy +T2+T1",
            ],
            rows,
            "llrrrrrrrrrrr",
        ),
        "",
    ]
    rows = []
    for c in configs:
        for d in datasets:
            for p in ("baseline", "step-ahead", "heteroreason"):
                s = idx.get((d, c, p, True))
                if s is not None:
                    rows.append(
                        [
                            c,
                            DATASET_TITLES.get(d, d),
                            policy_label(p),
                            _pct(s.util_draft, 1),
                            _pct(s.util_prm, 1),
                            _pct(s.util_target, 1),
                            fmt(s.goodput_tokens_per_s, 4),
                            s.reused_target_tokens,
                        ]
                    )
    out += [
        "Per-device utilization and goodput (committed tokens per second), with backtracking:",
        "",
        markdown_table(
            ["config", "dataset", "policy", "draft", "PRM", "target", "goodput tok/s", "reused prefetch tokens"],
            rows,
            "lllrrrrr",
        ),
        "",
    ]

    # ---- extras: shadow sync, edge draft
    out += [
        "## Shadow synchronization and the edge draft (with backtracking)",
        "",
        f"Published: a Jetson Orin Nano draft (~17 tokens/s) makes the system about "
        f"{PUBLISHED_EDGE_SLOWDOWN[0]:.0f}–{PUBLISHED_EDGE_SLOWDOWN[1]:.0f}x slower than the FPGA draft.",
        "",
    ]
    rows = []
    for c in configs:
        for d in datasets:
            hr = idx.get((d, c, "heteroreason", True))
            rp = idx.get((d, c, "heteroreason-reprefill", True))
            ed = idx.get((d, c, "edge-draft", True))
            if hr is None:
                continue
            rows.append(
                [
                    c,
                    DATASET_TITLES.get(d, d),
                    _x(rp.latency_total_s / hr.latency_total_s) if rp else "-",
                    _x(ed.latency_total_s / hr.latency_total_s) if ed else "-",
                ]
            )
    out += [
        markdown_table(
            ["config", "dataset", "re-prefill / shadow latency", "edge draft / FPGA draft latency"], rows, "llrr"
        ),
        "",
    ]

    # ---- other draft devices
    placed = sorted({s.policy for s in result.summaries if "@" in s.policy})
    if placed:
        out += [
            "## Other draft devices (predictions, with backtracking)",
            "",
            "Any device of a configuration can take the draft role (hwmodel/reasoning/systems/*.toml, "
            "`[devices]`): the paper's policies replayed with the draft on an instruction-driven FPGA "
            "(Qwen2.5-0.5B W8A8 on the GLITCHES U280 microarchitecture), on the streaming draft design estimated "
            "on an Alveo V80, and on an H200 serving it like the baseline's GPUs. Nothing here is measured. "
            "Speedup over the 3-GPU baseline on the same trace; latency relative to the same policy with its "
            "own draft device.",
            "",
        ]
        rows = []
        for c in configs:
            for d in datasets:
                for p in placed:
                    s_ = idx.get((d, c, p, True))
                    own = idx.get((d, c, p.partition("@")[0], True))
                    if s_ is None:
                        continue
                    rows.append(
                        [
                            c,
                            DATASET_TITLES.get(d, d),
                            policy_label(p),
                            _x(speedup(idx, d, c, p, True)),
                            _x(s_.latency_total_s / own.latency_total_s) if own else "-",
                            fmt(s_.energy_per_token_j),
                            f"{s_.comm_share * 100:.4f} %",
                            _pct(s_.util_draft, 1),
                        ]
                    )
        out += [
            markdown_table(
                [
                    "config",
                    "dataset",
                    "policy and draft device",
                    "speedup vs baseline",
                    "latency vs own draft device",
                    "J/token",
                    "comm share",
                    "draft utilization",
                ],
                rows,
                "lllrrrrr",
            ),
            "",
        ]

    # ---- accuracy
    out += ["## Accuracy (from the traces)", ""]
    rows = []
    for c in configs:
        for d in datasets:
            s0, s1 = idx.get((d, c, "baseline", False)), idx.get((d, c, "baseline", True))
            if s0 and s1:
                rows.append([c, DATASET_TITLES.get(d, d), _pct(s0.accuracy, 1), _pct(s1.accuracy, 1)])
    out += [markdown_table(["config", "dataset", "without backtracking", "with backtracking"], rows, "llrr"), ""]

    out += [
        "## Files",
        "",
        "- `problems.csv`: one row per problem x policy x trace variant",
        "- `journal.jsonl`: the study runner's journal (one line per finished unit; `--resume` continues it)",
        "- `run.json`: run time, workers and resumed units of the last run",
        "- `summary.csv`: one row per dataset x configuration x policy x trace variant",
        "- `ablation.png`: the ablation plot",
        "- `traces/`: the replayed traces (JSONL, gzip)",
    ]
    out += [f"- `{f}`: Perfetto / Chrome trace timeline (open in https://ui.perfetto.dev)" for f in timeline_files]
    return "\n".join(out) + "\n"
