"""Out-of-source GPU validation: public benchmarks independent of the points the GPU family is calibrated and its
mechanisms were chosen on, predicted by the committed GPU parameters (calibration/measurements/gpu_out_of_source.csv).

Nothing here feeds back: no mechanism, parameter or default is chosen by looking at these rows; they are reported
as their own area (``GPU out-of-source``) so their mean and largest error stand apart from the in-source ones. A
row's model value is the GPU engine's decode step for a batch of ``batch`` sequences at the middle of the 128
generated tokens (time is affine in the context), with the band of :mod:`hwmodel.validate.bands`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hwmodel.validate.providers import Provider, register
from hwmodel.validate.rows import row

MEASUREMENTS = Path(__file__).resolve().parent.parent.parent / "calibration" / "measurements" / "gpu_out_of_source.csv"
AREA = "GPU out-of-source"
OUTPUT_TOKENS = 128


def predict(values: Mapping[str, float], pt: Any) -> float:
    """Seconds per output token of ``pt``'s decode batch under GPU parameter ``values``."""
    from calibration.gpu import resolve_llm
    from gpu.latency import GpuEngine
    from gpu.params import GpuParams

    eng = GpuEngine(
        pt.subject,
        resolve_llm(pt.text("llm")),
        framework=pt.text("framework"),
        weight_bits=16,
        kv_bits=16,
        params=GpuParams.of(dict(values)),
    )
    ctx = pt.integer("input_tokens") + OUTPUT_TOKENS // 2
    return eng.decode_batch_s([ctx] * pt.integer("batch"))


def rows() -> list[dict[str, Any]]:
    """One predicted row per out-of-source point, each with its band."""
    from calibration.measurements import load_measurements
    from hwmodel.validate.bands import band, committed_covariance

    fam, values, cov = committed_covariance("gpu")
    out = []
    for pt in load_measurements(MEASUREMENTS):
        model = predict(values, pt)
        r = row(
            AREA,
            pt.id,
            model,
            pt.unit,
            "predicted",
            pt.source,
            published=pt.value,
            workload=f"{pt.subject}: {pt.text('llm')}, {pt.text('framework')}, batch {pt.integer('batch')}, "
            f"~{pt.integer('input_tokens')}-token prompt [{pt.quantity}]",
            note=pt.notes,
            families=["gpu"],
            family="gpu",
        )
        r["model_band"], r["band_sources"] = band(lambda v, p=pt: predict(v, p), fam.params, values, cov)
        out.append(r)
    return out


register(Provider("GPU out-of-source", lambda s: rows(), rank=3))  # a built-in row provider of `hwmodel validate`
