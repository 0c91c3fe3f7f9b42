"""Validation-table rows for every published system-B (GLITCHES) figure (shared/MISSION.md section B,
shared/research/measurements.md s4), each computed by the serving simulator's device models on the workload
named in its row (the shared row format of ``hwmodel validate``).

Roles: the single-device figures are what the device models were calibrated on (``fitted``; the GPU family from
calibration/measurements/gpu.csv, the instruction-driven FPGA family from u280_glitches.csv), except those the
calibration holds out (``predicted``). The 8-card ratios are ``predicted``: nothing in the serving simulator is
fitted to them, and the published ratios are averages over workloads the paper does not state, so each is set
against both the published single-device workload (1,536 + 512) and the mean over the prompt x output grid of
:mod:`hwmodel.serving.mix`. Cost efficiency uses the card prices of the specs, which are street/list-price
assumptions ([M]), and the break-even FPGA/GPU price ratio is given in the note.

Each row names the calibration families its value depends on (the 8-card ratios compose the GPU and the
instruction-driven FPGA families; the U280 energy adds the FPGA power family); ``hwmodel validate`` counts their
free parameters. A run with fewer than :data:`FULL_REQUESTS` requests per point is marked ``quick`` in its setting,
and the table shows the full study's recorded value beside it.
"""

from __future__ import annotations

from typing import Any

from hwmodel.engine import Phase
from hwmodel.serving import mix
from hwmodel.serving.study import PUBLISHED

SRC = "GLITCHES (IEEE HPEC 2024), shared/MISSION.md section B"
PAIR = "LLaMA2-7B, 1,536-token prompt + 512 output tokens, batch 1"
FULL_REQUESTS = 1000  # requests per saturation run of the full study (hwmodel.serving.study.StudyConfig)
GPU, FPGA, FPGA_POWER = "gpu", "fpga-instruction", "fpga-power"


def setting(requests: int) -> str:
    """The setting field of the 8-card rows: empty for the full study, ``quick: ...`` below it."""
    return "" if requests >= FULL_REQUESTS else f"quick: {requests} requests per point (full study {FULL_REQUESTS})"


def _calibrated(family: str, point_id: str) -> float:
    """The calibration family's own model value of one of its points (what ``calibrate`` reports)."""
    from calibration.family import get_family, report_family

    (r,) = [r for r in report_family(get_family(family)) if r.id == point_id]
    return float(r.model)


def _published(csv_name: str, point_id: str, scale: float = 1.0) -> float:
    """A published single-device figure as the calibration's measurement file records it (one copy of each
    figure), in the row's unit (``scale``; rounded to 9 decimals so that 0.17585 s reads 175.85 ms)."""
    from calibration.measurements import MEASUREMENTS_DIR, load_measurements

    (pt,) = [p for p in load_measurements(MEASUREMENTS_DIR / csv_name) if p.id == point_id]
    return round(pt.value * scale, 9)


def _device_rows() -> list[dict[str, Any]]:
    from hwmodel.serving.cluster import load_cluster
    from hwmodel.specs import library

    lib = library()
    # the process's shared factory: the 8-card points of rows() then reuse these engines and tables (the U280's
    # decode steps from context 1,536 and its 1,536-token prefill: 100 of the 755 k=1 decodes, ~7 CPU-s cold), and
    # a table's values never depend on what it already held (DecodeTable), so every row is unchanged
    fac = mix.shared_factory()
    spec = load_cluster("a100+7xu280")
    llm = lib.llm(spec.llm)
    gpu = fac.build(spec.nodes[0].prefill[0], llm, lib, "validation", "gpu")
    fpga = fac.build(spec.nodes[0].decode[0], llm, lib, "validation", "fpga")
    from hwmodel.serving.study import with_prefetch

    k4 = fac.build(with_prefetch(spec, 4).nodes[0].decode[0], llm, lib, "validation", "fpga-k4")
    rows: list[dict[str, Any]] = []

    def row(
        name: str,
        model: float,
        published: float,
        unit: str,
        role: str,
        note: str,
        families: tuple[str, ...],
        workload: str = PAIR,
    ) -> None:
        rows.append(
            {
                "area": "system B",
                "name": name,
                "model": float(model),
                "published": published,
                "band": None,
                "unit": unit,
                "role": role,
                "families": list(families),
                "workload": workload,
                "source": SRC,
                "note": note,
            }
        )

    def gpu_pub(point: str, scale: float = 1.0) -> float:
        return _published("gpu.csv", f"glitches-a100-hf-llama2-{point}", scale)

    def u280_pub(point: str, scale: float = 1.0) -> float:
        return _published("u280_glitches.csv", f"glitches-u280-{point}", scale)

    g_pre = gpu.prefill_plan(1536).busy_s
    f_pre = fpga.prefill_s(1536)
    g_dec = gpu.table.steps_s(1536, 511) / 511
    f_dec = fpga.table.steps_s(1536, 511) / 511
    row(
        "A100 HF FP16 prefill, 1536 tokens",
        g_pre * 1e3,
        gpu_pub("prefill", 1e3),
        "ms",
        "fitted",
        "GPU latency family (calibration/measurements/gpu.csv); as the serving simulator times a prefill",
        (GPU,),
    )
    row(
        "A100 HF FP16 decode per token",
        g_dec * 1e3,
        gpu_pub("decode", 1e3),
        "ms",
        "fitted",
        "mean over the 511 decode steps from context 1,536; GPU latency family",
        (GPU,),
    )
    serving_eff = 1.0 / (g_dec * gpu.power_w(Phase.DECODE))
    row(
        "A100 decode energy efficiency",
        _calibrated(GPU, "glitches-a100-hf-llama2-energy"),
        gpu_pub("energy"),
        "tokens/s/W",
        "fitted",
        "the GPU family's value of its fitted point (energy over the 512 decode steps); the serving "
        f"simulator's phase power at its reference context gives {serving_eff:.4g}",
        (GPU,),
    )
    row(
        "U280 W4A8 prefill, 1536 tokens",
        f_pre * 1e3,
        u280_pub("prefill", 1e3),
        "ms",
        "fitted",
        "instruction-driven FPGA family (calibration/measurements/u280_glitches.csv)",
        (FPGA,),
    )
    row(
        "U280 W4A8 decode per token (no prefetch)",
        f_dec * 1e3,
        u280_pub("decode", 1e3),
        "ms",
        "fitted",
        "mean over the 511 decode steps from context 1,536, without the host sampling round trip",
        (FPGA,),
    )
    from fpga.streaming.power import static_w

    f_pow = fpga.power_w(Phase.DECODE)
    design = getattr(fpga.engine, "design", None)
    floor = (
        ""
        if design is None
        else (
            f"; of the {f_pow:.1f} W, the measured static floor is {static_w(design.board):.1f} W "
            f"({100 * static_w(design.board) / f_pow:.0f} %), the modelled dynamic power the rest"
        )
    )
    row(
        "U280 decode energy efficiency",
        1.0 / (f_dec * f_pow),
        u280_pub("energy"),
        "tokens/s/W",
        "predicted",
        "FPGA power family (fitted on FlexLLM's U280 log, not on this point)" + floor,
        (FPGA, FPGA_POWER),
    )
    row(
        "U280 / A100 prefill time",
        f_pre / g_pre,
        28.44,
        "x",
        "fitted",
        "ratio of the two fitted prefill rows",
        (GPU, FPGA),
    )
    row(
        "U280 decode speed-up from prefetch ratio 4",
        fpga.table.step_s(128) / k4.table.step_s(128),
        u280_pub("prefetch4"),
        "x",
        "fitted",
        "one decode step at 128 cached tokens, ratio 4 against 1",
        (FPGA,),
        workload="LLaMA2-7B decode at sequence length 128, batch 1",
    )
    return rows


def rows(requests: int = 200) -> list[dict[str, Any]]:
    """Every published system-B figure beside the model (see the module docstring). The 8-card points run
    ``requests`` requests each at saturation (engine tables are cached on disk, so a second call is quick)."""
    out = _device_rows()
    pts = mix.points(requests=requests, configs=("8xgpu", "gpu+7xfpga", "gpu+7xfpga/k4"), distributions=())
    summ = mix.summarize(mix.run(pts))
    pub = {r["config"]: r for r in summ["rows"] if r["workload"] == "1536+512"}
    avg = summ["averages"]
    ratio = summ["prices"]["fpga_to_gpu"]
    grid_label = (
        f"mean over {avg['gpu+7xfpga']['points']} prompt x output points (prompts "
        f"{min(mix.PROMPTS)}-{max(mix.PROMPTS)}, outputs {min(mix.OUTPUTS)}-{max(mix.OUTPUTS)}), "
        "each at saturation, FCFS, GPUs HF batch 1"
    )
    pair_label = f"{PAIR}; at saturation, FCFS, GPUs HF batch 1"
    common = {
        "area": "system B",
        "band": None,
        "unit": "x",
        "role": "predicted",
        "families": [GPU, FPGA],
        "setting": setting(requests),
        "source": mix.PUBLISHED_SOURCE,
    }
    why = (
        "published figure is an average over workloads the paper does not state (measurements.md s4); "
        "nothing in the serving simulator is fitted to it"
    )
    for cfg, tag in (
        ("gpu+7xfpga", "no prefetch (the measured single-device setting)"),
        ("gpu+7xfpga/k4", "prefetch ratio 4 (GLITCHES's best)"),
    ):
        for label, t, ce in (
            (pair_label, pub[cfg]["throughput_ratio"], pub[cfg]["cost_efficiency_ratio"]),
            (grid_label, avg[cfg]["mean_throughput_ratio"], avg[cfg]["mean_cost_efficiency_ratio"]),
        ):
            be = mix.break_even_price_ratio(t, PUBLISHED["cost_efficiency_ratio"])
            out.append(
                {
                    **common,
                    "name": f"A100 + 7 x U280 vs 8 x A100 throughput, {tag}",
                    "model": t,
                    "published": PUBLISHED["throughput_ratio"],
                    "workload": label,
                    "note": why,
                }
            )
            out.append(
                {
                    **common,
                    "name": f"A100 + 7 x U280 vs 8 x A100 cost efficiency, {tag}",
                    "model": ce,
                    "published": PUBLISHED["cost_efficiency_ratio"],
                    "workload": label,
                    "note": f"{why}; spec prices are assumptions (U280/A100 = {ratio:.2f}); the published 2.38x "
                    f"at this throughput ratio holds at U280/A100 = {be:.2f}",
                }
            )
    return out
