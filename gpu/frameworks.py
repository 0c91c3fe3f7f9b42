"""Serving frameworks a GPU engine can model, and what distinguishes them physically.

A framework is not a fudge factor: it is a *program* (which kernels one forward pass launches, see
:mod:`gpu.kernels`) and an *execution mode* (how the host issues them, see :mod:`gpu.launch`):

* ``hf`` -- Hugging Face transformers, eager PyTorch (``model.generate``): about 40 kernels per decoder layer, each
  issued by the Python host thread (module call + PyTorch dispatch + launch), KV cache grown by ``torch.cat``
  (DynamicCache), GQA heads expanded by ``repeat_kv`` for SDPA, requests of a batch padded to the longest one.
  The host syncs once per token (stopping criteria), so a step is the launch queue drained.
* ``vllm`` -- vLLM 0.6 with CUDA graphs (the default ``enforce_eager=False``): fused kernels (10 per layer), paged
  KV cache; decode replays one captured graph per step (one host launch, kernels back to back on the GPU); prefill
  runs eagerly (vLLM captures graphs for decode batch sizes only); plus a per-step engine overhead on the host
  (scheduler, input preparation, sampler, output processing).
* ``vllm-eager`` -- the same vLLM program with ``--enforce-eager`` (what the RSD reference serve scripts use): every
  kernel of a decode step is issued by the host, like prefill.
* ``mlc`` -- a compiled runtime (MLC-LLM: TVM-generated fused kernels, decode replayed as a CUDA graph, a C++
  engine loop with no Python per-step overhead) running group-quantized INT4 weights: the ``vllm`` program (fused
  kernels) with graph decode, no engine-step overhead, issued by the board's host (ARM on a Jetson). No
  measurement is fitted on it: every point is predicted with the parameters of the other frameworks.
* ``edge-w8a8`` -- an eager PyTorch W8A8 (SmoothQuant-style) decoder on a Jetson-class board: the ``hf`` program
  with every linear replaced by an INT8 GEMM and a per-token activation quantization in front of each distinct
  linear input; issued by the board's ARM host. Calibrated on ONE measurement (the Orin Nano 17 tokens/s point).

Parameters (efficiencies, per-kernel and per-step overheads) come from ``calibration/params/gpu.json`` (written by
``hwmodel calibrate --fit``); which parameter a framework uses for each role is named here.
"""

from __future__ import annotations

import dataclasses

from hwmodel.errors import UnknownNameError


@dataclasses.dataclass(frozen=True)
class Framework:
    """How one serving framework runs a model on a GPU."""

    name: str
    display_name: str
    program: str  # kernel recipe in gpu.kernels: "hf", "vllm" or "w8a8"
    decode_graph: bool  # decode steps replay a CUDA graph (one host launch per step)
    kv_layout: str  # "paged" (each request's own length) or "padded" (a batch padded to its longest request)
    engine_step: bool  # a per-call engine overhead on the host (vLLM scheduler, input prep, sampler, outputs)
    host_op_param: str  # parameter: host time to issue one eager kernel
    compute_eff_param: str  # parameter: tensor-core efficiency of large GEMMs / attention
    weight_bits: int  # default weight precision
    allowed_weight_bits: tuple[int, ...]
    allowed_kv_bits: tuple[int, ...]
    doc: str


FRAMEWORKS: dict[str, Framework] = {
    f.name: f
    for f in (
        Framework(
            "hf",
            "Hugging Face transformers (eager PyTorch)",
            "hf",
            decode_graph=False,
            kv_layout="padded",
            engine_step=False,
            host_op_param="c_op_host_s",
            compute_eff_param="eta_compute_hf",
            weight_bits=16,
            allowed_weight_bits=(16,),
            allowed_kv_bits=(16,),
            doc="eager PyTorch, ~40 kernels per layer issued by the Python host thread, DynamicCache",
        ),
        Framework(
            "vllm",
            "vLLM 0.6 (CUDA graphs)",
            "vllm",
            decode_graph=True,
            kv_layout="paged",
            engine_step=True,
            host_op_param="c_op_host_s",
            compute_eff_param="eta_compute_vllm",
            weight_bits=16,
            allowed_weight_bits=(16, 8, 4),
            allowed_kv_bits=(16, 8),
            doc="fused kernels (10 per layer), paged KV, decode as one CUDA graph replay per step",
        ),
        Framework(
            "vllm-eager",
            "vLLM 0.6 --enforce-eager",
            "vllm",
            decode_graph=False,
            kv_layout="paged",
            engine_step=True,
            host_op_param="c_op_host_s",
            compute_eff_param="eta_compute_vllm",
            weight_bits=16,
            allowed_weight_bits=(16, 8, 4),
            allowed_kv_bits=(16, 8),
            doc="the vLLM program with every decode kernel issued by the host (RSD serve scripts)",
        ),
        Framework(
            "mlc",
            "MLC-LLM compiled runtime (fused kernels, CUDA graphs, C++ engine)",
            "vllm",
            decode_graph=True,
            kv_layout="paged",
            engine_step=False,
            host_op_param="c_op_edge_s",
            compute_eff_param="eta_compute_vllm",
            weight_bits=4,
            allowed_weight_bits=(4, 8, 16),
            allowed_kv_bits=(16, 8),
            doc="vllm program, graph decode, no per-step engine overhead; INT4 weights (predicted only)",
        ),
        Framework(
            "edge-w8a8",
            "eager PyTorch W8A8 on a Jetson-class board",
            "w8a8",
            decode_graph=False,
            kv_layout="padded",
            engine_step=False,
            host_op_param="c_op_edge_s",
            compute_eff_param="eta_compute_hf",
            weight_bits=8,
            allowed_weight_bits=(8,),
            allowed_kv_bits=(16, 8),
            doc="hf program with INT8 GEMMs and per-token activation quantization, ARM host (1 fitted point)",
        ),
    )
}


def framework(name: str | Framework) -> Framework:
    """The framework called ``name`` (a clear error listing the choices otherwise)."""
    if isinstance(name, Framework):
        return name
    try:
        return FRAMEWORKS[name]
    except KeyError:
        raise UnknownNameError("serving framework", name, list(FRAMEWORKS)) from None
