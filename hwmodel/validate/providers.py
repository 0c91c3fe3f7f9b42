"""Providers of validation rows: the calibration families (GPU, edge GPU, FPGA instruction), the HBM channel fit,
system A and system B, and the ``rows()`` functions other areas contribute (imported when present).

Every provider computes its model values from the code and the committed parameters; the published values come
from the measurement files (``calibration/measurements/*.csv``) or the published constants of each study module, and
never enter a model computation.
"""
from __future__ import annotations

import importlib
import math
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hwmodel.validate.rows import check, row

#: modules of other areas that contribute rows (a ``rows() -> list[dict]`` function each)
CONTRIBUTED = ("hwmodel.reasoning.validation", "hwmodel.serving.validation", "fpga.hbm_validation",
               "fpga.streaming_validation", "hwmodel.validate.gpu_external")
EDGE_PREFIXES = ("orin", "jetson")
SYSTEM_A_POLICIES = ("baseline", "step-ahead", "heteroreason", "edge-draft")


# ------------------------------------------------------------------------------------------------ calibration
def _gpu_bound(pt: Any) -> tuple[float | None, str]:
    """Physical limit of a GPU point from :mod:`hwmodel.bounds`: a floor for a time, a ceiling for a rate."""
    from calibration.gpu import resolve_llm
    from hwmodel.bounds import bounds
    from hwmodel.specs import library

    gpu = library().gpu(pt.subject)
    llm = resolve_llm(pt.text("llm"))
    wb, kb = pt.integer("weight_bits", 16), pt.integer("kv_bits", 16)
    n_in = pt.integer("input_tokens")
    q = pt.quantity
    if q == "decode_tokens_per_s_per_w":
        return None, ""

    def decode_floor(ctx: int) -> float:
        return bounds(llm, gpu, wb, kb, ctx).decode_floor_peak_s

    def prefill_floor(n: int) -> float:
        b = bounds(llm, gpu, wb, kb, 0, prefill_tokens=n)
        return max(b.prefill_compute_floor_s, b.decode_floor_peak_s)

    if q == "prefill_s":
        return prefill_floor(n_in), "floor"
    n_out = pt.integer("output_tokens")
    if q in ("decode_s_per_token", "decode_tokens_per_s"):
        mean = 0.5 * (decode_floor(n_in) + decode_floor(n_in + n_out - 1))  # bytes are affine in the context
        return (mean, "floor") if q == "decode_s_per_token" else (1.0 / mean, "ceiling")
    steps = n_out - 1
    decode = steps * 0.5 * (decode_floor(n_in) + decode_floor(n_in + max(steps - 1, 0))) if steps else 0.0
    return n_out / (prefill_floor(n_in) + decode), "ceiling"


def _workload(pt: Any, columns: tuple[str, ...]) -> str:
    return ", ".join(f"{c}={pt.conditions[c]}" for c in columns if pt.conditions.get(c))


def family_rows(name: str, *, cv: bool = True, area_of: Callable[[Any], str] | None = None,
                bound_of: Callable[[Any], tuple[float | None, str]] | None = None,
                params_file: Path | None = None) -> list[dict[str, Any]]:
    """Every point of calibration family ``name`` (fitted, fitted-derived, predicted) and, with ``cv``, a
    leave-one-out row for every fitted point that can be left out; against ``params_file`` (default: the
    committed parameters)."""
    from calibration.cv import leave_one_out
    from calibration.family import get_family, report_family
    from calibration.measurements import load_measurements

    fam = get_family(name)
    pts = load_measurements(fam.measurements_path)
    by_id = {p.id: p for p in pts}
    report = report_family(fam, pts, params_file)
    out = []
    area_fn = area_of or (lambda p: fam.name)
    source_file = f"calibration/measurements/{fam.measurements_path.name}"
    for r in report:
        pt = by_id[r.id]
        bound, kind = bound_of(pt) if bound_of else (None, "")
        out.append(row(area_fn(pt), r.id, r.model, r.unit, r.role, f"{r.source} ({source_file})",
                       published=r.measured, free_params=fam.free_params, workload=f"{r.subject}: "
                       + _workload(pt, fam.conditions) + f" [{r.quantity}]", note=pt.notes, bound=bound,
                       bound_kind=kind, family=fam.name))
    if cv:
        for lr in leave_one_out(fam, pts, str(params_file) if params_file else None):
            if lr.model is None:
                continue
            pt = by_id[lr.id]
            bound, kind = bound_of(pt) if bound_of else (None, "")
            out.append(row(area_fn(pt), lr.id, lr.model, pt.unit, "leave-one-out", f"{pt.source} ({source_file})",
                           published=pt.value, free_params=fam.free_params,
                           workload=f"{pt.subject}: " + _workload(pt, fam.conditions) + f" [{pt.quantity}]",
                           note=lr.reason, bound=bound, bound_kind=kind, family=fam.name))
    return out


def gpu_rows(cv: bool = True, params_file: Path | None = None) -> list[dict[str, Any]]:
    """The GPU family's points; Jetson-class boards are the ``edge`` area."""
    return family_rows("gpu", cv=cv, bound_of=_gpu_bound, params_file=params_file,
                       area_of=lambda p: "edge" if p.subject.startswith(EDGE_PREFIXES) else "GPU")


def fpga_instruction_rows(cv: bool = True) -> list[dict[str, Any]]:
    """The instruction-driven U280 family's points (GLITCHES single-device figures)."""
    return family_rows("fpga-instruction", cv=cv, area_of=lambda p: "FPGA instruction")


def accounting_rows() -> list[dict[str, Any]]:
    """Per calibration family: points fitted, free parameters, degrees of freedom (for the report's header)."""
    from calibration.family import FAMILIES, accounting, get_family

    return [accounting(get_family(n)).as_dict() for n in FAMILIES]


# ------------------------------------------------------------------------------------------------ HBM
def hbm_rows() -> list[dict[str, Any]]:
    """The U280 pseudo-channel's sequential stream bandwidth against Shuhai's per-channel figure (the one free
    channel parameter, the exposed row-switch bubble, is fitted to it)."""
    from fpga import hbm
    from hwmodel.specs import library

    b = library().board("u280")
    measured = b.hbm.pc_measured_bw_bytes_per_s / b.hbm.ports_per_pc
    return [row("HBM", "u280-pc-sequential-4k", hbm.sustained_channel_bw(b) / 1e9, "GB/s", "fitted",
                b.source_of("hbm.pc_measured_bw_bytes_per_s") + " (fpga/boards/u280.toml)",
                published=measured / 1e9, free_params=1,
                workload="U280, one pseudo-channel, sequential 4 KB requests, enough outstanding",
                note="row_switch_cycles fitted to this figure (`hwmodel fpga profile-port --fit`)",
                bound=hbm.channel_peak_bytes_per_s(b) / 1e9, bound_kind="ceiling", family="hbm")]


# ------------------------------------------------------------------------------------------------ system B
def system_b_rows() -> list[dict[str, Any]]:
    """GLITCHES 8-card node: A100 + 7 x U280 vs 8 x A100 at saturation, from the serving simulator driven by the
    calibrated device models (nothing fitted on these figures)."""
    from hwmodel.serving.study import PUBLISHED, GlitchesStudy

    study = GlitchesStudy()
    h = study.headline()
    k = study.cfg.fpga_prefetch_ratio
    note = ("published ratios are averages over several workloads (lengths not stated); the model runs the "
            "single-device workload 1536 + 512 (research/measurements.md s4)")
    composed = "composes the gpu (8) and fpga-instruction (4) families; nothing fitted on this figure"
    out = []
    for key, label in ((f"gpu+7xu280/k{k}", f"prefetch k={k}"), ("gpu+7xu280", "no prefetch")):
        r = h["rows"][key]
        out.append(row("system B", f"throughput A100+7xU280 vs 8xA100 ({label})", r["throughput_ratio"], "x",
                       "predicted", PUBLISHED["source"], published=PUBLISHED["throughput_ratio"], free_params=None,
                       workload="LLaMA2-7B, 1000 requests 1536 + 512, saturation, fcfs", note=f"{note}; {composed}"))
        out.append(row("system B", f"cost efficiency A100+7xU280 vs 8xA100 ({label})", r["cost_efficiency_ratio"],
                       "x", "predicted", PUBLISHED["source"], published=PUBLISHED["cost_efficiency_ratio"],
                       free_params=None, workload="LLaMA2-7B, 1000 requests 1536 + 512, saturation, fcfs",
                       note=f"{note}; prices from the specs (the published prices are not stated); {composed}"))
    return out


# ------------------------------------------------------------------------------------------------ system A
def system_a_rows(limit: int | None = 40, jobs: int = 1, work_dir: Path | None = None) -> list[dict[str, Any]]:
    """HeteroReason (config 1): T2 speedup per dataset against the published band, communication share against
    the published maximum, the Jetson draft's slowdown against the published ~5-6x; from trace replays of the
    first ``limit`` problems of each dataset (all with ``None``)."""
    from hwmodel.reasoning.study import (PUBLISHED_COMM_SHARE_MAX, PUBLISHED_EDGE_SLOWDOWN,
                                         PUBLISHED_T2_SPEEDUP_CONFIG1, run_study, speedup, summary_index)
    from hwmodel.workload.datasets import DATASET_TITLES, DATASETS

    with tempfile.TemporaryDirectory() as tmp:
        res = run_study(Path(work_dir or tmp), datasets=DATASETS, configs=("config1",), policies=SYSTEM_A_POLICIES,
                        limit=limit, jobs=jobs, resume=work_dir is not None)
    idx = summary_index(res.summaries)
    src = "HeteroReason (shared/MISSION.md section A)"
    scope = f"config 1, first {limit} problems per dataset" if limit else "config 1, every problem"
    composed = "composes the gpu (8) and streaming/edge families; nothing fitted on this figure"
    out = []
    for d in DATASETS:
        title = DATASET_TITLES.get(d, d)
        t2 = speedup(idx, d, "config1", "step-ahead", True)
        if math.isfinite(t2):
            out.append(row("system A", f"T2 speedup over the 3-GPU baseline, {title}", t2, "x", "predicted",
                           f"{src}: T2 alone on config 1", band=list(PUBLISHED_T2_SPEEDUP_CONFIG1),
                           workload=f"{title}, {scope}, with backtracking", note=composed))
        hr = idx.get((d, "config1", "heteroreason", True))
        if hr is not None:
            out.append(row("system A", f"communication share T1+T2, {title}", 100 * hr.comm_share, "%", "predicted",
                           f"{src}: communication at most 0.0123 % of end-to-end latency",
                           band=[0.0, 100 * PUBLISHED_COMM_SHARE_MAX], workload=f"{title}, {scope}",
                           note=composed))
        ed = idx.get((d, "config1", "edge-draft", True))
        if hr is not None and ed is not None:
            out.append(row("system A", f"Jetson draft / FPGA draft latency, {title}",
                           ed.latency_total_s / hr.latency_total_s, "x", "predicted",
                           f"{src}: a Jetson Orin Nano draft (~17 tokens/s) is about 5-6x slower",
                           band=list(PUBLISHED_EDGE_SLOWDOWN), workload=f"{title}, {scope}", note=composed))
    return out


# ------------------------------------------------------------------------------------------------ contributed
def contributed_rows(system_a_limit: int | None = 40, jobs: int = 1,
                     system_b_requests: int = 200) -> tuple[list[dict[str, Any]], list[str]]:
    """Rows of the other areas' ``rows()`` functions (each module imported when present); the modules found.
    System A's replays are limited to the first ``system_a_limit`` problems per dataset, on ``jobs`` workers."""
    out: list[dict[str, Any]] = []
    found = []
    kwargs = {"hwmodel.reasoning.validation": {"limit": system_a_limit, "workers": jobs},
              "hwmodel.serving.validation": {"requests": system_b_requests}}
    for mod in CONTRIBUTED:
        try:
            m = importlib.import_module(mod)
        except ModuleNotFoundError as exc:
            if exc.name and mod.startswith(exc.name):
                continue
            raise
        found.append(mod)
        out += [check(r, f"{mod}.rows()") for r in m.rows(**kwargs.get(mod, {}))]
    return out, found
