"""Physical lower bounds of LLM inference on one device: bytes per decoded token, bandwidth and compute floors.

Batch-1 decode must read every decoder weight, the output head and the whole KV cache once per token, so
``decode time >= bytes / memory bandwidth`` (shared/research/hardware.md s5). Prefill of N tokens must execute
``2 x params x N`` multiply-add operations plus attention, so ``prefill time >= ops / peak ops``. Every model in the
project (cycle-level FPGA, calibrated GPU) is tested never to beat these floors.

Bytes counted per decoded token:
* decoder projections (q, k, v, o, gate, up, down) at ``weight_bits``;
* the output head (LM head, tied or not, or a PRM value head) at ``weight_bits``;
* per-output-channel scales (fp16) when weights are quantized (< 16 bit);
* biases and RMSNorm gains at 16 bit;
* the KV cache of ``ctx`` earlier tokens at ``kv_bits`` (K and V, all layers).
The embedding lookup reads one row (negligible) and is left out.
"""
from __future__ import annotations

import dataclasses

from hwmodel.errors import HwmodelError
from hwmodel.specs import BoardSpec, GpuSpec, LlmSpec

SCALE_BYTES = 2  # fp16 per-output-channel scale
VECTOR_BYTES = 2  # fp16 biases and norm gains
VALID_WEIGHT_BITS = (4, 8, 16)
VALID_KV_BITS = (4, 8, 16)


@dataclasses.dataclass(frozen=True)
class DecodeBytes:
    """Bytes one decoded token reads from device memory."""

    weights_bytes: int
    head_bytes: int
    scales_bytes: int
    vectors_bytes: int
    kv_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.head_bytes + self.scales_bytes + self.vectors_bytes + self.kv_bytes


def _check_bits(weight_bits: int, kv_bits: int) -> None:
    if weight_bits not in VALID_WEIGHT_BITS:
        raise HwmodelError(f"weight bits must be one of {VALID_WEIGHT_BITS}, got {weight_bits}")
    if kv_bits not in VALID_KV_BITS:
        raise HwmodelError(f"KV bits must be one of {VALID_KV_BITS}, got {kv_bits}")


def decode_bytes(llm: LlmSpec, weight_bits: int, kv_bits: int, ctx_tokens: int) -> DecodeBytes:
    """Bytes read from memory to decode one token after ``ctx_tokens`` cached tokens."""
    _check_bits(weight_bits, kv_bits)
    if ctx_tokens < 0:
        raise HwmodelError(f"context length must be >= 0, got {ctx_tokens}")
    quantized = weight_bits < 16
    channels = llm.layers * llm.out_channels_per_layer + llm.head_out_channels
    return DecodeBytes(
        weights_bytes=llm.linear_params * weight_bits // 8,
        head_bytes=llm.head_params * weight_bits // 8,
        scales_bytes=channels * SCALE_BYTES if quantized else 0,
        vectors_bytes=(llm.bias_params + llm.norm_params) * VECTOR_BYTES,
        kv_bytes=llm.kv_bytes(ctx_tokens, kv_bits),
    )


def resident_bytes(llm: LlmSpec, weight_bits: int, kv_bits: int, ctx_tokens: int) -> int:
    """Bytes that must sit in device memory: all weights (embedding table included) + KV cache of ctx tokens."""
    _check_bits(weight_bits, kv_bits)
    return llm.total_params * weight_bits // 8 + llm.kv_bytes(ctx_tokens, kv_bits)


def prefill_ops(llm: LlmSpec, n_tokens: int, ctx_tokens: int = 0) -> float:
    """Operations (2 per multiply-add) to prefill ``n_tokens`` new tokens after ``ctx_tokens`` cached ones.

    Projections: 2 x linear params per token. Attention (causal): token i of the chunk attends to ctx + i keys,
    for QK^T and for PV: 2 x 2 x q_dim x (n x ctx + n (n + 1) / 2) per layer. The output head runs on the last
    token only (the next-token logits or the PRM score of the step).
    """
    if n_tokens < 1:
        raise HwmodelError(f"prefill needs at least one token, got {n_tokens}")
    pairs = n_tokens * ctx_tokens + n_tokens * (n_tokens + 1) / 2
    attn = 4.0 * llm.layers * llm.q_dim * pairs
    return 2.0 * llm.linear_params * n_tokens + attn + 2.0 * llm.head_params


@dataclasses.dataclass(frozen=True)
class Bounds:
    """Floors of one (LLM, device, precision, context) point. Times in seconds."""

    llm: str
    device: str
    weight_bits: int
    kv_bits: int
    ctx_tokens: int
    prefill_tokens: int
    bytes: DecodeBytes
    peak_bw_bytes_per_s: float
    measured_bw_bytes_per_s: float
    decode_floor_peak_s: float
    decode_floor_measured_s: float
    prefill_ops: float
    peak_ops_per_s: float
    prefill_compute_floor_s: float
    resident_bytes: int
    memory_bytes: int

    @property
    def fits(self) -> bool:
        return self.resident_bytes <= self.memory_bytes

    def as_dict(self) -> dict[str, object]:
        d = dataclasses.asdict(self)
        d["bytes"]["total_bytes"] = self.bytes.total_bytes
        d["fits"] = self.fits
        d["decode_floor_peak_tokens_per_s"] = 1.0 / self.decode_floor_peak_s
        d["decode_floor_measured_tokens_per_s"] = 1.0 / self.decode_floor_measured_s
        return d


def device_bandwidths(device: BoardSpec | GpuSpec) -> tuple[float, float, int]:
    """(peak B/s, measured B/s, capacity B) of the memory that serves decode (HBM on FPGA boards, DRAM on GPUs)."""
    if isinstance(device, BoardSpec):
        return device.hbm.peak_bw_bytes_per_s, device.hbm.measured_bw_bytes_per_s, device.hbm.capacity_bytes
    return device.mem_bw_bytes_per_s, device.mem_bw_measured_bytes_per_s, device.memory_bytes


def default_bits(device: BoardSpec | GpuSpec) -> tuple[int, int]:
    """Default (weight bits, KV bits): W8/KV8 on FPGAs (the draft accelerator), FP16 on GPUs."""
    return (8, 8) if isinstance(device, BoardSpec) else (16, 16)


def bounds(llm: LlmSpec, device: BoardSpec | GpuSpec, weight_bits: int, kv_bits: int, ctx_tokens: int,
           prefill_tokens: int = 1024) -> Bounds:
    """Compute the decode bandwidth floors, the prefill compute floor and the memory fit of one point."""
    db = decode_bytes(llm, weight_bits, kv_bits, ctx_tokens)
    peak_bw, meas_bw, mem = device_bandwidths(device)
    ops = prefill_ops(llm, prefill_tokens)
    peak_ops = device.peak_ops_per_s(weight_bits)
    return Bounds(
        llm=llm.name, device=device.name, weight_bits=weight_bits, kv_bits=kv_bits, ctx_tokens=ctx_tokens,
        prefill_tokens=prefill_tokens, bytes=db, peak_bw_bytes_per_s=peak_bw, measured_bw_bytes_per_s=meas_bw,
        decode_floor_peak_s=db.total_bytes / peak_bw, decode_floor_measured_s=db.total_bytes / meas_bw,
        prefill_ops=ops, peak_ops_per_s=peak_ops, prefill_compute_floor_s=ops / peak_ops,
        resident_bytes=resident_bytes(llm, weight_bits, kv_bits, ctx_tokens), memory_bytes=mem,
    )
