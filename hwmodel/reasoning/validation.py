"""System A's rows of the validation table (`hwmodel validate`): every published HeteroReason figure the model can
be held against (MISSION.md section A; shared/research/measurements.md section 3), with the model's value, its
role and the free parameters behind it.

Roles, honestly: the GPU latency family's parameters are fitted to single-GPU measurements
(calibration/params/gpu.json), none of them to a system-A figure, so the speedups, communication share and the
energy comparison are *predicted*; each row names the families its value depends on (GPU, the traces' rejection
rates, the backtracking fit, the FPGA power family for energy) and ``hwmodel validate`` counts their parameters. The Jetson's per-kernel host cost is fitted to its one published decode rate
(17 tokens/s), so the Jetson-vs-FPGA slowdown is predicted from a fitted device rate. The traces' first-pass
rejection rates are set per dataset to stay under the published 30 % (hwmodel/workload/acceptance.py), so the
rejection rows are *fitted* (4 rates). Accuracy: the target's hazard ratio is fitted per target to the published
gain of backtracking (hwmodel/workload/backtrack_fit.py: 2 parameters, 2 points), so those rows are *fitted*; the
complete system's gains (+1.7 / +4.2) reuse that fitted value (the model's policies keep the baseline's accuracy),
so they are *fitted* too, held against another published figure.
The published-like draft (FlexLLM-derived), the CUDA-graph GPU variant and the paper's waste metric are predicted.

The figures come from the study's own units, run on the one study runner (:mod:`hwmodel.studies.runner`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from hwmodel.reasoning.metrics import summarize_all
from hwmodel.reasoning.study import (
    GPU_MODE_VARIANTS,
    POINT_FN,
    PUBLISHED_COMM_SHARE_MAX,
    PUBLISHED_EDGE_SLOWDOWN,
    PUBLISHED_REJECT_RATE_MAX,
    PUBLISHED_T2_SPEEDUP_CONFIG1,
    Unit,
    speedup,
    study_traces,
    summary_index,
    unit_metrics,
)
from hwmodel.studies.runner import run_points
from hwmodel.workload.datasets import DATASETS
from hwmodel.workload.generator import DEFAULT_SEED, trace_stats

AREA = "system A"
SOURCE = "MISSION.md section A (HeteroReason)"
#: families behind a replayed time (GPU latency, the traces' rejection rates, the backtracking fit) and an energy
TIMING = ("gpu", "acceptance", "backtrack")
ENERGY = TIMING + ("fpga-power",)
PUBLISHED_BT_ACCURACY_GAIN_PTS = {"config1": 2.0, "config2": 5.0}  # measurements.md s3, Table III of the paper
PUBLISHED_BT_ACCURACY_GAIN_OPT_PTS = {"config1": 1.7, "config2": 4.2}  # the same, BRSD + system optimizations
POLICIES_NEEDED = ("baseline", "step-ahead", "heteroreason", "edge-draft")
PUBLISHED_LIKE = ("fpga-flexllm", "fpga-flexllm-300")  # the FlexLLM-derived draft at 200 MHz / 300 MHz projection


def _row(
    name: str,
    model: float,
    unit: str,
    role: str,
    families: Sequence[str],
    workload: str,
    note: str,
    *,
    published: float | None = None,
    band: Sequence[float] | None = None,
    source: str = SOURCE,
    series: str = "",
    setting: str = "",
) -> dict[str, Any]:
    quantity = name[: -len(f" ({series})")] if series and name.endswith(f" ({series})") else name
    return {
        "area": AREA,
        "name": name,
        "quantity": quantity,
        "series": series,
        "setting": setting,
        "model": float(model),
        "published": published,
        "band": list(band) if band is not None else None,
        "unit": unit,
        "role": role,
        "families": list(families),
        "workload": workload,
        "source": source,
        "note": note,
    }


def _status(x: float, lo: float, hi: float) -> str:
    return "inside the band" if lo <= x <= hi else ("below the band" if x < lo else "above the band")


def rows(
    *,
    datasets: Sequence[str] = DATASETS,
    configs: Sequence[str] = ("config1", "config2"),
    seed: int = DEFAULT_SEED,
    limit: int | None = None,
    workers: int = 1,
    scheduler: str | None = None,
) -> list[dict[str, Any]]:
    """The validation rows (module docstring); ``limit`` replays only the first N problems of each dataset."""
    units = [Unit(d, c, p) for d in datasets for c in configs for p in POLICIES_NEEDED]
    if "config1" in configs:  # the published-like draft and the CUDA-graph GPUs, on config 1
        units += [Unit(d, "config1", "heteroreason", dev) for d in datasets for dev in PUBLISHED_LIKE]
        units += [Unit(d, GPU_MODE_VARIANTS["config1"], p) for d in datasets for p in ("baseline", "step-ahead")]
    run = run_points(
        POINT_FN,
        [(u.name, u.spec(seed, limit)) for u in units],
        workers=workers,
        scheduler=scheduler,
        chunk_size=1,
        start_method="fork",
    )
    metrics = [m for u in units for m in unit_metrics(run.results[u.name])]
    idx = summary_index(summarize_all(metrics))
    out: list[dict[str, Any]] = []
    lo, hi = PUBLISHED_T2_SPEEDUP_CONFIG1
    quick = f"quick: first {limit} problems per dataset" if limit else ""
    for d in datasets:
        if "config1" not in configs:
            break
        wl = f"config1, with backtracking, seed {seed}"

        def drow(*a: Any, _d: str = d, **k: Any) -> dict[str, Any]:
            return _row(*a, series=_d, setting=quick, **k)

        t2 = speedup(idx, d, "config1", "step-ahead", True)
        out.append(
            drow(
                f"T2 speedup over the 3-GPU baseline ({d})",
                t2,
                "x",
                "predicted",
                TIMING,
                wl,
                f"{_status(t2, lo, hi)}; GPU parameters fitted to single-GPU measurements only",
                band=PUBLISHED_T2_SPEEDUP_CONFIG1,
            )
        )
        hr = idx[(d, "config1", "heteroreason", True)]
        out.append(
            drow(
                f"communication share of latency, T1+T2 ({d})",
                hr.comm_share,
                "fraction",
                "predicted",
                TIMING,
                wl,
                (
                    "within the published maximum"
                    if hr.comm_share <= PUBLISHED_COMM_SHARE_MAX
                    else "above the published maximum: the model counts every per-token DMA of "
                    "shadow synchronization (two hops of ~2 us each), on the critical path "
                    "or not (docs/reasoning.md)"
                ),
                band=[0.0, PUBLISHED_COMM_SHARE_MAX],
            )
        )
        ed = idx[(d, "config1", "edge-draft", True)]
        slow = ed.latency_total_s / hr.latency_total_s
        elo, ehi = PUBLISHED_EDGE_SLOWDOWN
        out.append(
            drow(
                f"Jetson Orin Nano draft vs FPGA draft, system latency ({d})",
                slow,
                "x",
                "predicted",
                TIMING,
                wl,
                f"{_status(slow, elo, ehi)}; the Jetson's host cost per kernel is fitted to "
                "its published 17 tokens/s, the system slowdown is not",
                band=[elo, ehi],
            )
        )
        st = idx[(d, "config1", "step-ahead", True)]
        e = hr.energy_per_token_j / st.energy_per_token_j
        out.append(
            drow(
                f"energy per token, T1+T2 / T2 ({d})",
                e,
                "ratio",
                "predicted",
                ENERGY,
                wl,
                "published: T1+T2 uses less energy than T2 alone" + ("" if e < 1 else "; the model disagrees"),
                band=[0.0, 1.0],
            )
        )
        lat = st.latency_total_s / hr.latency_total_s
        out.append(
            drow(
                f"latency, T2 / T1+T2 ({d})",
                lat,
                "ratio",
                "predicted",
                TIMING,
                wl,
                "published only qualitatively: T1+T2 slightly slower than T2 alone, read here as a ratio "
                "in [0.9, 1.0] (an interpretation, not a published number); the model's streaming FPGA "
                "draft decodes near the HBM floor, 3-4x faster per token than the eager-vLLM GPU draft, so "
                "T1+T2 comes out faster (docs/reasoning.md)",
                band=[0.9, 1.0],
            )
        )
        for dev, clock in zip(PUBLISHED_LIKE, ("200 MHz", "300 MHz projection")):
            pl = idx.get((d, "config1", f"heteroreason@{dev}", True))
            if pl is None:
                continue
            r = st.latency_total_s / pl.latency_total_s
            out.append(
                drow(
                    f"latency, T2 / T1+T2, published-like draft at {clock} ({d})",
                    r,
                    "ratio",
                    "predicted",
                    TIMING,
                    wl,
                    "published only qualitatively: T1+T2 slightly slower than T2 (a ratio a "
                    "little below 1); the draft is FlexLLM's deployed design adapted to Qwen2.5-0.5B W8A8, "
                    "no parameter chosen from a system-A result"
                    + ("" if r < 1 else "; the model has it faster")
                    + "; read as a ratio in [0.9, 1.0] (an interpretation)",
                    band=[0.9, 1.0],
                )
            )
            e2 = pl.energy_per_token_j / st.energy_per_token_j
            out.append(
                drow(
                    f"energy per token, T1+T2 / T2, published-like draft at {clock} ({d})",
                    e2,
                    "ratio",
                    "predicted",
                    ENERGY,
                    wl,
                    "published: T1+T2 uses less energy than T2 alone" + ("" if e2 < 1 else "; the model disagrees"),
                    band=[0.0, 1.0],
                )
            )
        gr = speedup(idx, d, GPU_MODE_VARIANTS["config1"], "step-ahead", True)
        if math.isfinite(gr):
            out.append(
                drow(
                    f"T2 speedup over the 3-GPU baseline, GPUs with CUDA graphs ({d})",
                    gr,
                    "x",
                    "predicted",
                    TIMING,
                    wl.replace("config1", "config1-graphs"),
                    f"{_status(gr, lo, hi)}; vLLM 0.9.2's default mode (the paper names 0.9.2; RSD's scripts "
                    "run --enforce-eager, the row above)",
                    band=PUBLISHED_T2_SPEEDUP_CONFIG1,
                )
            )
        out.append(
            drow(
                f"invalidated step-ahead energy share, 3-GPU T2 ({d})",
                st.invalidated_energy_share,
                "fraction",
                "predicted",
                TIMING,
                wl,
                "the paper's discarded-token energy (hwmodel/reasoning/waste.py); published only as "
                "'consistently small' (no number); the broader discarded-energy figure is "
                f"{st.discarded_energy_share:.4f}; 'small' read as at most 5 % (an interpretation)",
                band=[0.0, 0.05],
            )
        )
    for c in configs:
        gains = []
        for d in datasets:
            nobt, bt = study_traces(d, c, seed, None)  # whole traces: generating them is cheap, replaying is not
            s0, s1 = trace_stats(nobt), trace_stats(bt)
            gains.append(100.0 * (s1["accuracy"] - s0["accuracy"]))
            if c == "config1":
                out.append(
                    _row(
                        f"step rejection rate of the trace ({d})",
                        s1["step_reject_rate"],
                        "fraction",
                        "fitted",
                        ("acceptance",),
                        f"config1, with backtracking, seed {seed}, every problem",
                        "first-pass rates set per dataset under the published bound (hwmodel/workload/acceptance.py)",
                        band=[0.0, PUBLISHED_REJECT_RATE_MAX],
                        series=d,
                    )
                )
        g = sum(gains) / len(gains)
        pub = PUBLISHED_BT_ACCURACY_GAIN_PTS.get(c)
        out.append(
            _row(
                f"accuracy gain of backtracking, mean of {len(datasets)} datasets ({c})",
                g,
                "points",
                "fitted",
                ("backtrack",),
                f"{', '.join(datasets)}, {c}, seed {seed}, every problem",
                "realized on the traces; the target's hazard ratio is fitted to this published gain "
                "(expected value, hwmodel/workload/backtrack_fit.py), a0 to the target-alone accuracy, the "
                "flawed-step penalty an estimate"
                + (
                    ""
                    if pub is None or math.isclose(g, pub, abs_tol=1.0)
                    else f"; differs from the published {pub:+.1f} points"
                ),
                published=pub,
                source="shared/research/measurements.md s3 (Table III of the paper)",
            )
        )
        popt = PUBLISHED_BT_ACCURACY_GAIN_OPT_PTS.get(c)
        if popt is not None:
            out.append(
                _row(
                    f"accuracy gain of backtracking with the system optimizations, mean of {len(datasets)} "
                    f"datasets ({c})",
                    g,
                    "points",
                    "fitted",
                    ("backtrack",),
                    f"{', '.join(datasets)}, {c}, seed {seed}",
                    "the model value is the fitted gain of the row above (every policy replays the same "
                    "trace, so T1+T2 keeps the baseline's accuracy), held against another figure; the "
                    "published 0.3 / 0.8-point loss (W8A8 draft numerics, reused prefetch) is not modelled",
                    published=popt,
                    source="shared/research/measurements.md s3 (Table III of the paper)",
                )
            )
    return out
