"""Physical lower bounds of LLM inference on one device: bytes per decoded token, bandwidth and compute floors.

Batch-1 decode must read every decoder weight, the output head and the whole KV cache once per token, so
``decode time >= bytes / memory bandwidth`` (shared/research/hardware.md s5). Prefill of N tokens must execute
``2 x MACs`` operations, so ``prefill time >= ops / peak ops``. Every model in the project (cycle-level FPGA,
calibrated GPU) is tested never to beat these floors.

Bytes and MACs come from the operator graph (:mod:`hwmodel.graph`), the single source every back-end reads, under
the bounds' quantization convention: one fp16 scale per output channel when weights are quantized, fp16 biases and
norm gains (:func:`hwmodel.graph.per_channel`). Counted per decoded token: the decoder layers' weights (for an MoE
model, the router and the experts the token is routed to), the output head (tied or not, or a PRM value head),
the embedding row gathered, scales, biases and norm gains, the KV cache read (``ctx`` tokens, a sliding window
caps it) and the new token's K and V written.
"""

from __future__ import annotations

import dataclasses

from hwmodel.errors import HwmodelError
from hwmodel.graph import Graph, QuantScheme, build_graph, per_channel, resident_param_bytes
from hwmodel.specs import BoardSpec, GpuSpec, LlmSpec

VALID_WEIGHT_BITS = (4, 8, 16)
VALID_KV_BITS = (4, 8, 16)


@dataclasses.dataclass(frozen=True)
class DecodeBytes:
    """Bytes one decoded token reads from (and writes to) device memory, from the graph."""

    weights_bytes: int  # decoder layers + embedding row
    head_bytes: int
    scales_bytes: int
    vectors_bytes: int  # biases + norm gains
    kv_bytes: int  # KV cache read
    kv_write_bytes: int = 0  # the new token's K and V

    @property
    def total_bytes(self) -> int:
        return (
            self.weights_bytes
            + self.head_bytes
            + self.scales_bytes
            + self.vectors_bytes
            + self.kv_bytes
            + self.kv_write_bytes
        )


def _check_bits(weight_bits: int, kv_bits: int) -> None:
    if weight_bits not in VALID_WEIGHT_BITS:
        raise HwmodelError(f"weight bits must be one of {VALID_WEIGHT_BITS}, got {weight_bits}")
    if kv_bits not in VALID_KV_BITS:
        raise HwmodelError(f"KV bits must be one of {VALID_KV_BITS}, got {kv_bits}")


def scheme(weight_bits: int, kv_bits: int) -> QuantScheme:
    """The bounds' quantization convention (per-output-channel fp16 scales)."""
    _check_bits(weight_bits, kv_bits)
    return per_channel(weight_bits, kv_bits)


def bytes_of(g: Graph) -> DecodeBytes:
    """A graph's memory traffic in the bounds' breakdown."""
    b = g.bytes
    head = sum(op.bytes.weights for op in g.epilogue if op.kind == "head")
    return DecodeBytes(
        weights_bytes=b.weights - head,
        head_bytes=head,
        scales_bytes=b.metadata,
        vectors_bytes=b.bias + b.norm,
        kv_bytes=b.kv_read,
        kv_write_bytes=b.kv_write,
    )


def decode_bytes(
    llm: LlmSpec,
    weight_bits: int,
    kv_bits: int,
    ctx_tokens: int,
    quant: QuantScheme | None = None,
    with_lm_head: bool = True,
) -> DecodeBytes:
    """Bytes read from memory to decode one token after ``ctx_tokens`` cached tokens (``with_lm_head=False``: an
    ingested token, logits discarded: no final norm, no head)."""
    q = quant or scheme(weight_bits, kv_bits)
    if ctx_tokens < 0:
        raise HwmodelError(f"context length must be >= 0, got {ctx_tokens}")
    return bytes_of(build_graph(llm, q, "decode" if with_lm_head else "ingest", 1, ctx_tokens))


def resident_bytes(
    llm: LlmSpec, weight_bits: int, kv_bits: int, ctx_tokens: int, quant: QuantScheme | None = None
) -> int:
    """Bytes that must sit in device memory: every parameter (all experts, the embedding table, scales, biases,
    gains) + the KV cache of ``ctx`` tokens."""
    q = quant or scheme(weight_bits, kv_bits)
    return resident_param_bytes(llm, q).params + llm.kv_bytes(ctx_tokens, q.kv_bits)


def prefill_ops(llm: LlmSpec, n_tokens: int, ctx_tokens: int = 0) -> float:
    """Operations (2 per multiply-accumulate of the graph) to prefill ``n_tokens`` after ``ctx_tokens`` cached:
    projections (an MoE model: router + routed experts), causal attention, the output head on the last token."""
    if n_tokens < 1:
        raise HwmodelError(f"prefill needs at least one token, got {n_tokens}")
    phase = "score" if llm.output_head == "value" else "prefill"
    return 2.0 * build_graph(llm, per_channel(16, 16), phase, n_tokens, ctx_tokens).macs


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
        if not device.hbm:  # a DDR-only card (U200, U250, VCK5000): decode streams from DDR
            return device.ddr.bw_bytes_per_s, device.ddr.sustained_bw_bytes_per_s, device.ddr.capacity_bytes
        return device.hbm.peak_bw_bytes_per_s, device.hbm.measured_bw_bytes_per_s, device.hbm.capacity_bytes
    return device.mem_bw_bytes_per_s, device.mem_bw_measured_bytes_per_s, device.memory_bytes


def default_bits(device: BoardSpec | GpuSpec) -> tuple[int, int]:
    """Default (weight bits, KV bits): W8/KV8 on FPGAs (the draft accelerator), FP16 on GPUs."""
    return (8, 8) if isinstance(device, BoardSpec) else (16, 16)


def bounds(
    llm: LlmSpec,
    device: BoardSpec | GpuSpec,
    weight_bits: int,
    kv_bits: int,
    ctx_tokens: int,
    prefill_tokens: int = 1024,
    with_lm_head: bool = True,
) -> Bounds:
    """Compute the decode bandwidth floors, the prefill compute floor and the memory fit of one point
    (``with_lm_head=False``: the decode floors of an ingested token). A streaming design's own floor, on its
    ports, precision and placement, is :func:`fpga.streaming.placement.design_floor`."""
    db = decode_bytes(llm, weight_bits, kv_bits, ctx_tokens, with_lm_head=with_lm_head)
    peak_bw, meas_bw, mem = device_bandwidths(device)
    ops = prefill_ops(llm, prefill_tokens)
    peak_ops = device.peak_ops_per_s(weight_bits)
    return Bounds(
        llm=llm.name,
        device=device.name,
        weight_bits=weight_bits,
        kv_bits=kv_bits,
        ctx_tokens=ctx_tokens,
        prefill_tokens=prefill_tokens,
        bytes=db,
        peak_bw_bytes_per_s=peak_bw,
        measured_bw_bytes_per_s=meas_bw,
        decode_floor_peak_s=db.total_bytes / peak_bw,
        decode_floor_measured_s=db.total_bytes / meas_bw,
        prefill_ops=ops,
        peak_ops_per_s=peak_ops,
        prefill_compute_floor_s=ops / peak_ops,
        resident_bytes=resident_bytes(llm, weight_bits, kv_bits, ctx_tokens),
        memory_bytes=mem,
    )
