"""Out-of-source GPU validation: public, independent GPU benchmarks predicted with the committed GPU parameters.

The GPU family's mechanisms and parameters were chosen on one source set (``calibration/measurements/gpu.csv``:
GLITCHES, the Qwen2.5 speed benchmark, the Jetson points). The points here come from *other* publishers and were
read only after the mechanisms were committed; no mechanism, parameter or default was chosen on them, and
nothing is fitted to them. Every row is ``predicted`` and carries the GPU family's free-parameter count.

Points (``calibration/measurements/gpu_external.csv``, the schema of ``calibration/measurements.py``; condition
columns ``llm``, ``framework``, ``weight_bits``, ``kv_bits``, ``input_tokens``, ``output_tokens``, ``batch``,
``decoding``):

* ``batch_latency_s`` [s] -- one generation of ``batch`` prompts of ``input_tokens`` each, ``output_tokens`` new
  tokens each (vLLM ``benchmarks/benchmark_latency.py``): the batched prefill steps (packed to the scheduler's
  token budget) plus ``output_tokens - 1`` decode steps of the whole batch;
* ``batch_tokens_per_s`` [tokens/s] -- ``batch * output_tokens`` over that latency;
* ``batch_speedup`` [x] -- that output throughput over the same generation's with one request (a wave of ``batch``
  concurrent requests against one request at a time);
* ``seq_decode_tokens_per_s`` [tokens/s] -- one sequence's decode rate in a batch of ``batch``: the inverse of the
  mean decode step over the ``output_tokens - 1`` steps after the prompt.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from calibration.measurements import MEASUREMENTS_DIR, Measurement, MeasurementError, expect_quantity, load_measurements
from hwmodel.validate.providers import Provider, register
from hwmodel.validate.rows import row

AREA = "GPU out-of-source"
MEASUREMENTS = MEASUREMENTS_DIR / "gpu_external.csv"
UNITS = {
    "batch_latency_s": "s",
    "batch_tokens_per_s": "tokens/s",
    "batch_speedup": "x",
    "seq_decode_tokens_per_s": "tokens/s",
}
CONDITIONS = ("llm", "framework", "weight_bits", "kv_bits", "input_tokens", "output_tokens", "batch", "decoding")


@functools.lru_cache(maxsize=64)
def _engine(
    gpu: str, llm: str, fw: str, wb: int, kb: int, decoding: str, values: tuple[tuple[str, float], ...] = ()
) -> Any:
    from calibration.gpu import resolve_llm
    from gpu.latency import GpuEngine
    from gpu.params import GpuParams

    params = GpuParams.of(dict(values)) if values else None
    return GpuEngine(gpu, resolve_llm(llm), framework=fw, weight_bits=wb, kv_bits=kb, decoding=decoding, params=params)


def batch_generate_s(eng: Any, batch: int, n_in: int, n_out: int) -> float:
    """One ``generate`` call over ``batch`` equal prompts: prefill steps as the scheduler packs them, then
    ``n_out - 1`` decode steps of the batch (each sequence's context one longer every step)."""
    prefill = sum(t for _, t in eng.prefill_steps([n_in] * batch))
    return prefill + sum(decode_steps_s(eng, batch, n_in, n_out))


def decode_steps_s(eng: Any, batch: int, n_in: int, n_out: int) -> list[float]:
    """The ``n_out - 1`` decode steps of a batch after ``n_in``-token prompts (contexts growing by one a step)."""
    return [eng.decode_batch_s([n_in + j] * batch) for j in range(n_out - 1)]


def predict(pt: Measurement, values: Mapping[str, float] | None = None) -> float:
    """The GPU model's value of ``pt.quantity`` under ``pt``'s conditions (``values``: the GPU family's parameter
    values; default the committed ones)."""
    expect_quantity(pt, UNITS, "the out-of-source GPU set")
    eng = _engine(
        pt.subject,
        pt.text("llm"),
        pt.text("framework"),
        pt.integer("weight_bits", 16),
        pt.integer("kv_bits", 16),
        pt.text("decoding", "greedy"),
        tuple(sorted(values.items())) if values is not None else (),
    )
    b, n_in, n_out = pt.integer("batch"), pt.integer("input_tokens"), pt.integer("output_tokens")
    if pt.quantity == "seq_decode_tokens_per_s":
        steps = decode_steps_s(eng, b, n_in, n_out)
        return len(steps) / sum(steps)
    t = batch_generate_s(eng, b, n_in, n_out)
    if pt.quantity == "batch_latency_s":
        return t
    if pt.quantity == "batch_tokens_per_s":
        return b * n_out / t
    return b * batch_generate_s(eng, 1, n_in, n_out) / t


def rows(path: Path | str | None = None) -> list[dict[str, Any]]:
    """One ``predicted`` row per out-of-source point (area ``GPU out-of-source``), with the GPU family's free
    parameters (nothing here is fitted: the rows only test the committed model)."""
    from calibration.gpu import FAMILY
    from hwmodel.validate.bands import band, committed_covariance

    p = Path(path) if path is not None else MEASUREMENTS
    if not p.exists():
        return []
    out = []
    for pt in load_measurements(p):
        if pt.role != "predicted":
            raise MeasurementError(
                f"{pt.origin}: column 'role': out-of-source points are never fitted; "
                f"expected 'predicted', got {pt.role!r}"
            )
        workload = (
            f"{pt.subject}: "
            + ", ".join(f"{c}={pt.conditions[c]}" for c in CONDITIONS if pt.conditions.get(c))
            + f" [{pt.quantity}]"
        )
        out.append(
            row(
                AREA,
                pt.id,
                predict(pt),
                pt.unit,
                "predicted",
                f"{pt.source} ({p.name})",
                published=pt.value,
                free_params=FAMILY.free_params,
                workload=workload,
                note=pt.notes,
                family="gpu",
            )
        )
        fam, values, cov = committed_covariance("gpu")  # once per process
        out[-1]["model_band"], out[-1]["band_sources"] = band(lambda v, q=pt: predict(q, v), fam.params, values, cov)
    return out


register(Provider(__name__, lambda s: rows(), rank=14, area_module=True))  # a row provider of `hwmodel validate`
