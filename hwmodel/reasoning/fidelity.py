"""The system-A fidelity sections of the reproduction report (issue 17): backtracking fitted on accuracy and its
predicted costs, both discarded-energy metrics, both drafts, both baseline GPU modes, the T1 break-even study.

Each published value appears beside the model's, with its role (fitted / predicted) and free-parameter count.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hwmodel.reasoning.breakeven import X_CTX, BreakEven
from hwmodel.reasoning.study import (
    GPU_MODE_VARIANTS,
    PUBLISHED_LIKE_DRAFTS,
    PUBLISHED_T2_SPEEDUP_CONFIG1,
    speedup,
    study_traces,
    summary_index,
)
from hwmodel.reasoning.system import load_system
from hwmodel.report.tables import fmt, markdown_table, write_csv
from hwmodel.workload.acceptance import TARGET_HAZARD_RATIO
from hwmodel.workload.backtrack_fit import (
    FREE_PARAMS,
    PUBLISHED_GAIN_OPT_PTS,
    PUBLISHED_GAIN_PTS,
    SENSITIVITY_RATIO,
    expected_gain,
    fit_ratio,
)
from hwmodel.workload.datasets import DATASET_TITLES, DATASETS
from hwmodel.workload.generator import DEFAULT_SEED, trace_stats

ABLATION = ("baseline", "step-ahead", "heteroreason")


def _x(v: float) -> str:
    return "-" if v is None or not math.isfinite(v) else f"{v:.3f}x"


def _pct(v: float, d: int = 2) -> str:
    return "-" if v is None or not math.isfinite(v) else f"{100 * v:.{d}f} %"


@dataclasses.dataclass(frozen=True)
class AccuracyFit:
    config: str
    target: str
    ratio: float
    published_pts: float
    expected_pts: float  # the model's expected gain at the fitted ratio (the fitted quantity)
    realized_pts: float  # the traces' realized gain (one seeded draw per problem)
    per_dataset: tuple[tuple[str, float, float], ...]  # (dataset, expected, realized)
    opt_published_pts: float
    opt_ratio: float  # the ratio that the complete system's gain would need (sensitivity)


def accuracy_fits(
    datasets: Sequence[str], configs: Sequence[str], seed: int, limit: int | None, sensitivity: bool = True
) -> list[AccuracyFit]:
    """The fitted accuracy gains per configuration (hwmodel/workload/backtrack_fit.py); ``sensitivity`` also refits
    the ratio to the complete system's published gain."""
    out = []
    for c in configs:
        target = load_system(c).target_llm
        if target not in PUBLISHED_GAIN_PTS:
            continue
        per = []
        for d in datasets:
            g = expected_gain(d, target, TARGET_HAZARD_RATIO[target], seed=seed, limit=limit).gain_pts
            nobt, bt = study_traces(d, c, seed, limit)
            per.append((d, g, 100.0 * (trace_stats(bt)["accuracy"] - trace_stats(nobt)["accuracy"])))
        full = limit is None and tuple(datasets) == DATASETS and seed == DEFAULT_SEED
        if not sensitivity:
            opt = math.nan
        elif full:  # the stored sensitivity fit (tests check it reproduces the published gains)
            opt = SENSITIVITY_RATIO[target]
        else:
            opt = fit_ratio(target, PUBLISHED_GAIN_OPT_PTS[target], datasets=datasets, seed=seed, limit=limit).ratio
        out.append(
            AccuracyFit(
                c,
                target,
                TARGET_HAZARD_RATIO[target],
                PUBLISHED_GAIN_PTS[target],
                sum(p[1] for p in per) / len(per),
                sum(p[2] for p in per) / len(per),
                tuple(per),
                PUBLISHED_GAIN_OPT_PTS[target],
                opt,
            )
        )
    return out


def _total(idx: dict, datasets: Sequence[str], c: str, p: str, bt: bool) -> dict[str, float] | None:
    rows = [idx.get((d, c, p, bt)) for d in datasets]
    if any(r is None for r in rows):
        return None
    lat = math.fsum(r.latency_total_s for r in rows)
    en = math.fsum(r.energy_total_j for r in rows)
    tok = math.fsum(r.energy_total_j / r.energy_per_token_j for r in rows)
    return {
        "lat": lat,
        "en": en,
        "ept": en / tok,
        "problems": sum(r.problems for r in rows),
        "bts": sum(r.backtracks for r in rows),
        "inv": math.fsum(r.invalidated_energy_share * r.energy_total_j for r in rows) / en,
        "disc": math.fsum(r.discarded_energy_share * r.energy_total_j for r in rows) / en,
    }


def render(
    result: Any,
    datasets: Sequence[str],
    configs: Sequence[str],
    seed: int,
    limit: int | None,
    fits: Sequence[AccuracyFit],
    breakeven: BreakEven | None,
) -> list[str]:
    idx = summary_index(result.summaries)
    out: list[str] = []
    # ---- accuracy fit
    out += [
        "## Backtracking, fitted on accuracy (issue 17)",
        "",
        f"The target's per-token error hazard relative to the draft's (`target_hazard_ratio`) is **fitted** per "
        f"target to the published accuracy gain of backtracking over forward-only RSD (Table III of the paper, "
        f"mean of the four datasets): {FREE_PARAMS} free parameters, {FREE_PARAMS} fitting points "
        '(docs/traces.md, "Backtracking, fitted"); `flawed_step_penalty` stays at its 0.5 estimate. Nothing else '
        "was tuned. How often backtracking happens and what it costs are predictions (next table).",
        "",
    ]
    rows = []
    for f in fits:
        rows.append(
            [
                f.config,
                f.target,
                f"{f.ratio:.6f}",
                f"{f.published_pts:+.1f}",
                f"{f.expected_pts:+.2f}",
                f"{f.realized_pts:+.2f}",
                "fitted",
                f"{f.opt_published_pts:+.1f}",
                "-" if math.isnan(f.opt_ratio) else f"{f.opt_ratio:.6f}",
            ]
        )
    out += [
        markdown_table(
            [
                "config",
                "target",
                "fitted ratio",
                "published gain (pts)",
                "model, expected (pts)",
                "traces, realized (pts)",
                "role",
                "published with optimizations (pts)",
                "ratio that gain would need",
            ],
            rows,
            "llrrrrlrr",
        ),
        "",
    ]
    rows = [[f.config, DATASET_TITLES.get(d, d), f"{e:+.2f}", f"{r:+.2f}"] for f in fits for d, e, r in f.per_dataset]
    out += [
        "Per dataset (the paper publishes only the mean):",
        "",
        markdown_table(["config", "dataset", "expected gain (pts)", "realized gain (pts)"], rows, "llrr"),
        "",
        "The complete system (BRSD + T1 + T2) keeps +1.7 / +4.2 points in the paper. The model's policies replay "
        "the same trace, so every policy here has the baseline's accuracy: the model cannot predict that "
        "0.3 / 0.8-point loss (its cause -- e.g. the W8A8 draft's numerics, or prefetched tokens reused in a "
        "refinement -- is not modelled). The last column is what the fit would give if those gains were used "
        "instead (a sensitivity, not used by the traces).",
        "",
    ]

    # ---- backtracking costs
    out += [
        "## What backtracking costs (predicted)",
        "",
        "Totals over the four datasets, the same problems replayed without and with backtracking.",
        "",
    ]
    rows = []
    for c in list(configs) + [GPU_MODE_VARIANTS[c] for c in configs if c in GPU_MODE_VARIANTS]:
        for p in ABLATION:
            a, b = _total(idx, datasets, c, p, False), _total(idx, datasets, c, p, True)
            if b is None:
                continue
            rows.append(
                [
                    c,
                    p,
                    fmt(b["bts"] / b["problems"], 3),
                    "-" if a is None else fmt(a["lat"] / a["problems"], 4),
                    fmt(b["lat"] / b["problems"], 4),
                    "-" if a is None else _x(b["lat"] / a["lat"]),
                    "-" if a is None else _x(b["en"] / a["en"]),
                    "-" if a is None else _x(b["ept"] / a["ept"]),
                ]
            )
    out += [
        markdown_table(
            [
                "config",
                "policy",
                "backtracks/problem",
                "s/problem (no bt)",
                "s/problem (bt)",
                "latency bt / no bt",
                "energy bt / no bt",
                "J/token bt / no bt",
            ],
            rows,
            "llrrrrrr",
        ),
        "",
        "The other policies (re-prefill, edge draft, the T2 sensitivity run, the draft placements) replay only "
        "the trace with backtracking; the -graphs configurations likewise (their no-bt columns show '-').",
        "",
    ]

    # ---- discarded energy, both metrics
    out += [
        "## Discarded-token energy, both definitions (with backtracking)",
        "",
        "**Invalidated step-ahead energy** (the paper's metric, `invalidated_energy_share`): energy of step-ahead "
        "tokens generated from a state a PRM rejection invalidated, as a share of total energy; interrupted "
        "prefetch whose tokens are cached is not waste. Published on the 3-GPU platform, config 1 (T2 on GPUs): "
        '"consistently small" (no number). **Discarded energy** (the broader figure, `discarded_energy_share`): '
        "every generation whose tokens were never used, cached prefetch that was never reused included.",
        "",
    ]
    rows = []
    for c in configs:
        for d in datasets:
            for p in ("step-ahead", "heteroreason"):
                s = idx.get((d, c, p, True))
                if s is not None:
                    rows.append(
                        [
                            c,
                            DATASET_TITLES.get(d, d),
                            p,
                            _pct(s.invalidated_energy_share),
                            _pct(s.discarded_energy_share),
                            s.invalidated_draft_tokens,
                            s.invalidated_target_tokens,
                            s.discarded_draft_tokens,
                            s.discarded_target_tokens,
                        ]
                    )
    out += [
        markdown_table(
            [
                "config",
                "dataset",
                "policy",
                "invalidated (paper)",
                "discarded (broad)",
                "invalidated draft tok",
                "invalidated target tok",
                "discarded draft tok",
                "discarded target tok",
            ],
            rows,
            "lllrrrrrr",
        ),
        "",
    ]

    # ---- both drafts
    out += [
        "## Both drafts: published-like (FlexLLM-derived) and our optimized design (with backtracking)",
        "",
        "`heteroreason` with the draft on `draft-u280` (our own optimized streaming design, 200 MHz) and on the "
        "published-like draft `flexllm-draft-u280` (FlexLLM's deployed decode design adapted to Qwen2.5-0.5B "
        "W8A8, built from FlexLLM's repository without looking at a system-A result) at the measured 200 MHz and "
        "the projected 300 MHz. Published: T1+T2 slightly slower than T2 alone, with less energy. "
        "All predicted.",
        "",
    ]
    rows = []
    for c in configs:
        for d in datasets:
            t2 = idx.get((d, c, "step-ahead", True))
            if t2 is None:
                continue
            cells = [c, DATASET_TITLES.get(d, d), _x(speedup(idx, d, c, "step-ahead", True))]
            for p in ("heteroreason",) + tuple(f"heteroreason@{x}" for x in PUBLISHED_LIKE_DRAFTS):
                s = idx.get((d, c, p, True))
                cells += (
                    ["-", "-"]
                    if s is None
                    else [_x(t2.latency_total_s / s.latency_total_s), _x(s.energy_per_token_j / t2.energy_per_token_j)]
                )
            rows.append(cells)
    out += [
        markdown_table(
            [
                "config",
                "dataset",
                "+T2 vs baseline",
                "ours: T2 lat / T1+T2 lat",
                "ours: energy vs T2",
                "published-like 200 MHz: T2 / T1+T2",
                "energy vs T2",
                "published-like 300 MHz: T2 / T1+T2",
                "energy vs T2",
            ],
            rows,
            "llrrrrrrr",
        ),
        "",
    ]

    # ---- GPU modes
    out += [
        "## Baseline GPUs both ways: vLLM eager (RSD's scripts) and vLLM with CUDA graphs (vLLM 0.9.2's "
        "default), with backtracking",
        "",
        f"Published: T2 on config 1 {PUBLISHED_T2_SPEEDUP_CONFIG1[0]}–{PUBLISHED_T2_SPEEDUP_CONFIG1[1]}x; "
        "T1+T2 slightly below T2. How each ratio moves when every GPU server captures CUDA graphs "
        "(`configN-graphs`, the FPGA draft unchanged).",
        "",
    ]
    rows = []
    for c in configs:
        g = GPU_MODE_VARIANTS.get(c)
        for d in datasets:
            if g is None or idx.get((d, g, "baseline", True)) is None:
                continue
            cells = [c, DATASET_TITLES.get(d, d)]
            for cc in (c, g):
                t2, hr = idx.get((d, cc, "step-ahead", True)), idx.get((d, cc, "heteroreason", True))
                cells += [
                    _x(speedup(idx, d, cc, "step-ahead", True)),
                    _x(speedup(idx, d, cc, "heteroreason", True)),
                    _x(t2.latency_total_s / hr.latency_total_s) if t2 and hr else "-",
                    _x(hr.energy_per_token_j / t2.energy_per_token_j) if t2 and hr else "-",
                    f"{hr.comm_share * 100:.4f} %" if hr else "-",
                ]
            rows.append(cells)
    out += [
        markdown_table(
            [
                "config",
                "dataset",
                "eager: +T2",
                "eager: +T2+T1",
                "eager: T2 / T1+T2",
                "eager: energy T1+T2 / T2",
                "eager: comm",
                "graphs: +T2",
                "graphs: +T2+T1",
                "graphs: T2 / T1+T2",
                "graphs: energy T1+T2 / T2",
                "graphs: comm",
            ],
            rows,
            "llrrrrrrrrrr",
        ),
        "",
    ]

    # ---- break-even
    if breakeven is not None:
        b = breakeven
        out += [
            "## T1 break-even: how fast must the FPGA draft be?",
            "",
            f"T1+T2 speedup over T2 alone versus the draft's decode time per token (mean over contexts "
            f"0-{X_CTX - 1}), {b.config}, with backtracking, the first problems of each dataset ({b.problems} "
            "problems). Speed points scale `draft-u280`'s times (same power); design points are the "
            "FlexLLM-derived design with its MACs, ports, clock and board varied, simulated cycle by cycle "
            "(hwmodel/reasoning/breakeven.py). Predicted.",
            "",
            "![break-even](breakeven.png)",
            "",
            f"T2's draft (vLLM eager on the RTX 3090) decodes a token in **{b.t2_token_s * 1e3:.2f} ms**. "
            + (
                f"**Break-even: {b.breakeven_token_s * 1e3:.2f} ms/token** -- an FPGA draft slower than that makes "
                f"T1+T2 slower than T2 alone; at break-even T1+T2 uses {b.breakeven_energy_ratio:.3f}x T2's "
                "energy per token."
                if math.isfinite(b.breakeven_token_s)
                else "The speed sweep did not bracket the break-even."
            ),
            "",
        ]
        rows = [
            [p.series, p.label, f"{p.token_s * 1e3:.3f}", _x(p.speedup_over_t2), _x(p.energy_ratio_to_t2)]
            for p in sorted(b.points, key=lambda p: (p.series, p.token_s))
        ]
        out += [
            markdown_table(
                ["series", "draft", "ms/token", "T1+T2 speedup over T2", "energy/token vs T2"], rows, "llrrr"
            ),
            "",
        ]
        out += ["Files: `breakeven.png` (the plot), `breakeven.csv` (the points).", ""]
    return out


def write_breakeven(out_dir: Path, b: BreakEven) -> None:
    from hwmodel.reasoning.breakeven import write_plot

    write_csv(out_dir / "breakeven.csv", b.rows(), list(b.points[0].as_row()))
    write_plot(out_dir / "breakeven.png", b)
