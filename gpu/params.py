"""The calibrated parameters of the GPU models (what ``calibration/params/gpu.json`` holds).

Fitted (``hwmodel calibrate --fit``, least squares on the points marked ``fitted`` in
``calibration/measurements/gpu.csv``):

* ``eta_bw`` -- fraction of peak DRAM bandwidth a streaming kernel sustains (all frameworks, all GPUs);
* ``t_kernel_s`` -- GPU-side cost of one kernel (launch latency, ramp-up, tail);
* ``c_op_host_s`` -- host time to issue one eager kernel from Python/PyTorch on an x86 server;
* ``c_op_edge_s`` -- the same on a Jetson-class ARM host (one measurement behind it);
* ``t_step_vllm_s`` -- vLLM engine overhead per step (scheduler, input preparation, sampler, output processing);
* ``eta_compute_hf`` / ``eta_compute_vllm`` -- tensor-core efficiency of large prefill GEMMs and attention;
* ``power_gamma`` -- exponent of board power versus utilisation (:mod:`gpu.power`).

Fixed: ``n_half_tokens`` -- GEMM rows at which tensor-core efficiency is half its maximum (the ``mma.m16n8k16``
M-tile of Ampere tensor cores; no measurement below 1,536 prompt tokens constrains it).
"""
from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from pathlib import Path

from hwmodel.params import ParamsFileError, load_values, params_path

FITTED_NAMES = ("eta_bw", "t_kernel_s", "c_op_host_s", "c_op_edge_s", "t_step_vllm_s", "eta_compute_hf",
                "eta_compute_vllm", "power_gamma")
FIXED_VALUES: dict[str, float] = {"n_half_tokens": 16.0}


@dataclasses.dataclass(frozen=True)
class GpuParams:
    """Parameter values by name (fitted + fixed)."""

    values: Mapping[str, float]

    def __getitem__(self, name: str) -> float:
        try:
            return self.values[name]
        except KeyError:
            raise ParamsFileError(f"GPU parameter '{name}' is missing (known: {', '.join(sorted(self.values))}); "
                                  "re-run `hwmodel calibrate --fit`") from None

    def replace(self, **changes: float) -> GpuParams:
        return GpuParams({**self.values, **changes})

    @staticmethod
    def of(values: Mapping[str, float]) -> GpuParams:
        """Values for the fitted names plus the fixed constants (a fit passes trial values this way)."""
        return GpuParams({**FIXED_VALUES, **values})


@functools.lru_cache(maxsize=4)
def _load(path: str) -> GpuParams:
    values = load_values(path)
    missing = [n for n in (*FITTED_NAMES, *FIXED_VALUES) if n not in values]
    if missing:
        raise ParamsFileError(f"{path}: missing GPU parameters {', '.join(missing)}; re-run `hwmodel calibrate --fit`")
    return GpuParams(values)


def default_params(path: Path | str | None = None) -> GpuParams:
    """The committed GPU parameters (or those of ``path``)."""
    return _load(str(path if path is not None else params_path("gpu")))


def clear_cache() -> None:
    """Forget loaded parameter files (after ``hwmodel calibrate --fit`` rewrote one)."""
    _load.cache_clear()
