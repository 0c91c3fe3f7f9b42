"""The GPU model family: which quantities of ``calibration/measurements/gpu.csv`` the GPU engine predicts, and how.

Quantities (conditions: ``llm``, ``framework``, ``weight_bits``, ``kv_bits``, ``input_tokens``, ``output_tokens``,
``decoding`` -- ``greedy`` when empty, ``sample`` for ``generate(do_sample=True)`` (HF) or top-k/top-p sampling
with penalties (vLLM ``SamplingParams``); ``host`` -- empty for the
framework's default host, or a key of :data:`HOSTS`; the subject is a GPU spec name):

* ``prefill_s`` [s] -- prefill of ``input_tokens``;
* ``decode_s_per_token`` [s] -- mean decode step over ``output_tokens`` steps after an ``input_tokens`` prompt;
* ``decode_tokens_per_s`` [tokens/s] -- the inverse of that mean;
* ``decode_tokens_per_s_per_w`` [tokens/s/W] -- decode tokens per second per watt of board power (energy-weighted
  average power over the same steps);
* ``generate_tokens_per_s`` [tokens/s] -- ``output_tokens`` divided by the whole generation (prefill, which yields
  the first token, plus ``output_tokens - 1`` decode steps), as the Qwen2.5 speed benchmark reports.

LLM names resolve in the spec library first, then in ``calibration/llms/`` (models only measurements use).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path

from calibration.family import Family, register
from calibration.fit import Param
from calibration.measurements import Measurement, MeasurementError, expect_quantity
from gpu.latency import GpuEngine
from gpu.params import FIXED_VALUES, GpuParams, clear_cache
from hwmodel.errors import HwmodelError
from hwmodel.specs import LlmSpec, library, load_spec_file

CALIBRATION_LLMS = Path(__file__).resolve().parent / "llms"
CONDITIONS = ("llm", "framework", "weight_bits", "kv_bits", "input_tokens", "output_tokens", "decoding", "host")
#: measured hosts whose eager-issue cost is not the framework's default (the ``host`` condition column)
HOSTS = {"qwen-bench": "c_op_host_qwen_s"}
UNITS = {
    "prefill_s": "s",
    "decode_s_per_token": "s",
    "decode_tokens_per_s": "tokens/s",
    "decode_tokens_per_s_per_w": "tokens/s/W",
    "generate_tokens_per_s": "tokens/s",
}

PARAMS = (
    Param("eta_bw", 0.85, 0.30, 1.0, "", "fraction of peak DRAM bandwidth a streaming kernel sustains"),
    Param("t_kernel_s", 4e-6, 0.0, 50e-6, "s", "GPU-side cost of one kernel (launch latency, ramp-up, tail)"),
    Param("c_op_host_s", 18e-6, 1e-6, 200e-6, "s", "host time to issue one eager kernel (x86 server, Python/PyTorch)"),
    Param("c_op_edge_s", 40e-6, 1e-6, 1e-3, "s", "host time to issue one eager kernel on a Jetson-class ARM host"),
    Param(
        "t_step_vllm_s", 1e-3, 0.0, 20e-3, "s", "vLLM engine overhead per step (scheduler, inputs, sampler, outputs)"
    ),
    Param("eta_compute_hf", 0.45, 0.05, 1.0, "", "tensor-core efficiency of large GEMMs and attention in HF prefill"),
    Param(
        "eta_compute_vllm", 0.6, 0.05, 1.0, "", "tensor-core efficiency of large GEMMs and attention in vLLM prefill"
    ),
    Param("power_gamma", 0.5, 0.05, 3.0, "", "exponent of board power versus utilisation (gpu.power)"),
    Param(
        "c_op_host_qwen_s",
        18e-6,
        1e-6,
        200e-6,
        "s",
        "host time to issue one eager kernel on the Qwen2.5 speed-benchmark server (another x86 host)",
    ),
    Param(
        "eta_copy_hf",
        0.85,
        0.05,
        1.0,
        "",
        "fraction of peak DRAM bandwidth of transformers' eager KV-cache copies (torch.cat, repeat_kv)",
    ),
)
FIXED_DOCS = {
    "n_half_tokens": "GEMM rows at half tensor-core efficiency: the 16-row mma M-tile of Ampere (not fitted: "
    "no measurement below 1,536 prompt tokens constrains it)",
    "c_seq_vllm_s": "[estimate] vLLM host time per extra sequence of a step (scheduler, block tables, inputs, "
    "sampling tensors, outputs): ~20 ms at 200 sequences, vLLM issue #6801 (vLLM 0.5.x "
    "profile); not fitted: no calibration point runs more than one sequence",
}


@functools.lru_cache(maxsize=64)
def resolve_llm(name: str) -> LlmSpec:
    """An LLM by name: the spec library, else ``calibration/llms/<name>.toml``."""
    lib = library()
    if name in lib.names("llm"):
        return lib.llm(name)
    path = CALIBRATION_LLMS / f"{name}.toml"
    if path.exists():
        return load_spec_file(path, "llm")  # type: ignore[return-value]
    known = lib.names("llm") + sorted(p.stem for p in CALIBRATION_LLMS.glob("*.toml"))
    raise HwmodelError(f"unknown LLM '{name}'; valid choices: {', '.join(known)}")


def _engine(values: Mapping[str, float], pt: Measurement) -> GpuEngine:
    return _engine_cached(
        pt.subject,
        pt.text("llm"),
        pt.text("framework"),
        pt.integer("weight_bits", 16),
        pt.integer("kv_bits", 16),
        tuple(sorted(values.items())),
        pt.text("decoding", "greedy"),
        _host_param(pt),
    )


def _host_param(pt: Measurement) -> str:
    host = pt.text("host", "")
    if host and host not in HOSTS:
        raise MeasurementError(f"{pt.origin}: column 'host': expected empty or one of {', '.join(HOSTS)}, got {host!r}")
    return HOSTS.get(host, "")


@functools.lru_cache(maxsize=256)
def _engine_cached(
    gpu: str,
    llm: str,
    fw: str,
    wb: int,
    kb: int,
    values: tuple[tuple[str, float], ...],
    decoding: str = "greedy",
    host_param: str = "",
) -> GpuEngine:
    return GpuEngine(
        gpu,
        resolve_llm(llm),
        framework=fw,
        weight_bits=wb,
        kv_bits=kb,
        params=GpuParams.of(dict(values)),
        decoding=decoding,
        host_op_param=host_param or None,
    )


def predict(values: Mapping[str, float], pt: Measurement) -> float:
    """The GPU engine's value of ``pt.quantity`` for ``pt``'s conditions under parameter ``values``."""
    expect_quantity(pt, UNITS, "the GPU model")
    eng = _engine(values, pt)
    n_in = pt.integer("input_tokens")
    if pt.quantity == "prefill_s":
        return eng.prefill_s(n_in)
    if pt.quantity == "generate_tokens_per_s":
        n_out = pt.integer("output_tokens")
        return n_out / eng.generate_s(n_in, n_out)
    n_out = pt.integer("output_tokens")
    # the one implementation the API and the CLI also call
    from hwmodel.quantities import decode_window

    w = decode_window(eng, n_in, n_out)
    if pt.quantity == "decode_s_per_token":
        return w.seconds_per_token
    if pt.quantity == "decode_tokens_per_s":
        return w.tokens_per_s
    return w.tokens_per_s_per_w


def _reset() -> None:
    clear_cache()
    _engine_cached.cache_clear()


FAMILY = register(
    Family(
        name="gpu",
        rank=0,
        description="GPU latency and power per framework (gpu.latency, gpu.power): per-kernel roofline + launch queue",
        params=PARAMS,
        fixed=dict(FIXED_VALUES),
        fixed_docs=FIXED_DOCS,
        conditions=CONDITIONS,
        predict=predict,
        reset=_reset,
    )
)
