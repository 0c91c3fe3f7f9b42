"""The calibrated parameters of the GPU models (what ``calibration/params/gpu.json`` holds).

Fitted (``hwmodel calibrate --fit``, least squares on the points marked ``fitted`` in
``calibration/measurements/gpu.csv``):

* ``eta_bw`` -- fraction of peak DRAM bandwidth a streaming kernel sustains (all frameworks, all GPUs);
* ``t_kernel_s`` -- GPU-side cost of one kernel (launch latency, ramp-up, tail);
* ``c_op_host_s`` -- host time to issue one eager kernel from Python/PyTorch on an x86 server;
* ``c_op_edge_s`` -- the same on a Jetson-class ARM host (one measurement behind it);
* ``c_op_host_qwen_s`` -- the same on the host of the Qwen2.5 speed benchmark (a measured host of its own; engines
  use it only when asked, ``GpuEngine(..., host_op_param="c_op_host_qwen_s")``);
* ``t_step_vllm_s`` -- vLLM engine overhead per step (scheduler, input preparation, sampler, output processing);
* ``eta_compute_hf`` / ``eta_compute_vllm`` -- tensor-core efficiency of large prefill GEMMs and attention;
* ``power_gamma`` -- exponent of board power versus utilisation (:mod:`gpu.power`);
* ``eta_copy_hf`` -- fraction of peak DRAM bandwidth the eager KV-cache copies of transformers sustain
  (``torch.cat`` of DynamicCache, ``repeat_kv``; :data:`gpu.launch.COPY_KERNELS`).

Fixed: ``n_half_tokens`` -- GEMM rows at which tensor-core efficiency is half its maximum (the ``mma.m16n8k16``
M-tile of Ampere tensor cores; no measurement below 1,536 prompt tokens constrains it); ``c_seq_vllm_s`` -- vLLM's
host time per extra sequence of a step (scheduler, block tables, input preparation, sampling tensors, output
processing; :mod:`gpu.vllm_sampler`), 100 us [estimate]: vLLM issue #6801 (2024-08-08, a profile of vLLM 0.5.x)
reports sampling + input preparation + output processing + scheduling "can be 20ms" at a batch of 200 sequences;
no measured point of the calibration set runs more than one sequence, so it is not fitted.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from pathlib import Path

from hwmodel.params import ParamsFileError, load_values, params_path

FITTED_NAMES = (
    "eta_bw",
    "t_kernel_s",
    "c_op_host_s",
    "c_op_edge_s",
    "t_step_vllm_s",
    "eta_compute_hf",
    "eta_compute_vllm",
    "power_gamma",
    "eta_copy_hf",
    "c_op_host_qwen_s",
)
FIXED_VALUES: dict[str, float] = {"n_half_tokens": 16.0, "c_seq_vllm_s": 100e-6}


@dataclasses.dataclass(frozen=True)
class GpuParams:
    """Parameter values by name (fitted + fixed)."""

    values: Mapping[str, float]

    def __getitem__(self, name: str) -> float:
        try:
            return self.values[name]
        except KeyError:
            raise ParamsFileError(
                f"GPU parameter '{name}' is missing (known: {', '.join(sorted(self.values))}); "
                "re-run `hwmodel calibrate --fit`"
            ) from None

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
