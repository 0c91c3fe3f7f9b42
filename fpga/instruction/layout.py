"""HBM layout of an instruction-driven design: where every matrix, its metadata and the KV cache live.

Every weight matrix is row-interleaved over the datamover's ``C`` pseudo-channels (output row ``r`` in channel
``r mod C`` at per-channel row ``r // C``); group-wise scales and zero points live in their own regions with the
same interleave (a bias rides in the scale region after its row's scales). Each decoder layer owns one
per-channel block of ``layer_stride_bytes`` (weights, metadata, its K/V cache), so layer ``l + 1`` is layer ``l``
shifted by a constant. Shapes and bytes come from the operator graph (:mod:`hwmodel.graph`) under the design's
convention (:func:`quant_of`). See :mod:`fpga.instruction.compiler` for the whole lowering.
"""

from __future__ import annotations

import dataclasses
import math

from fpga.instruction.design import InstructionDesign
from hwmodel.errors import HwmodelError
from hwmodel.graph import Graph, Op, QuantScheme, build_graph, group_scheme, kv_cache_bytes, resident_param_bytes
from hwmodel.specs import LlmSpec

LINEARS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
_ALIGN_BYTES = 4096
_LAYER_ALIGN_BYTES = 1 << 20
_LOGIT_BYTES = 2  # fp16 logits to the host


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


@dataclasses.dataclass(frozen=True)
class MatrixRegion:
    """Where one weight matrix and its metadata live (per-channel byte offsets) and its shape."""

    in_features: int
    out_features: int
    weight_addr: int
    scale_addr: int
    zero_addr: int
    weight_row_bytes: int
    meta_row_bytes_scale: int
    meta_row_bytes_zero: int


@dataclasses.dataclass(frozen=True)
class Layout:
    """Per-pseudo-channel HBM address map of one design (identical in every channel)."""

    channels: int
    layer_base: int
    layer_stride_bytes: int
    linears: dict[str, MatrixRegion]  # offsets inside layer 0
    k_addr: tuple[int, ...]  # per kv head, inside layer 0
    v_addr: tuple[int, ...]
    kv_row_bytes: int
    kv_rows_per_channel: int
    embed_addr: int
    embed_row_bytes: int
    embed: MatrixRegion  # the embedding table and its per-row metadata
    head: MatrixRegion  # LM head / value head
    logits_addr: int
    channel_bytes_used: int
    weights_bytes: int  # data bytes (all channels) of weights, metadata, embedding, head
    kv_bytes_per_token: int


def quant_of(design: InstructionDesign) -> QuantScheme:
    """The instruction designs' quantization convention: group-wise scales and zero points (``[quant]``)."""
    q = design.quant
    return group_scheme(design.weight_bits, design.kv_bits, q.group_size, q.scale_bits, q.zero_bits)


def _matrix_bytes(design: InstructionDesign, op: Op) -> tuple[int, int, int]:
    """(weight, scale (+ bias), zero-point) bytes of one output row of graph operator ``op``."""
    q = quant_of(design)
    bias = q.vector_bytes if op.bias else 0
    return (
        q.weight_row_bytes(op.in_features),
        q.scale_row_bytes(op.in_features) + bias,
        q.zero_row_bytes(op.in_features),
    )


def layer_graph(design: InstructionDesign, llm: LlmSpec) -> Graph:
    """The decode graph the lowering reads its matrices from; refuses what it cannot lower."""
    if llm.experts:
        raise HwmodelError(
            f"design '{design.name}': {llm.name} is a mixture of experts; the instruction lowering "
            f"has no expert dispatch (use a streaming design)"
        )
    if llm.lowering_gaps:  # issue 26 families: refuse rather than drop their extra parameters
        raise HwmodelError(
            f"design '{design.name}': {llm.name} has {', '.join(llm.lowering_gaps)}, not lowered "
            f"here yet (bounds and the operator graph handle them)"
        )
    if llm.sliding_window:
        raise HwmodelError(
            f"design '{design.name}': {llm.name} uses sliding-window attention; the instruction "
            f"lowering walks the whole cache (use a streaming design)"
        )
    return build_graph(llm, quant_of(design), "decode", 1, 0)


def linear_ops(design: InstructionDesign, llm: LlmSpec) -> dict[str, Op]:
    """The decoder layer's matrices (graph order) and the output head, by name."""
    g = layer_graph(design, llm)
    out = {op.name: op for op in g.layers[0] if op.kind == "linear"}
    out["lm_head"] = next(op for op in g.epilogue if op.kind == "head")
    return out


def build_layout(design: InstructionDesign, llm: LlmSpec | None = None) -> Layout:
    """Place weights, metadata and the KV cache in every pseudo-channel; raise if they exceed its capacity."""
    llm = llm or design.llm_spec
    board = design.board_spec
    C = design.datamover.channels
    if C > board.hbm.axi_ports:
        raise HwmodelError(
            f"design '{design.name}': datamover.channels {C} exceeds the {board.hbm.axi_ports} "
            f"HBM ports of {board.name}"
        )
    cursor = 0
    quantized = design.weight_bits < 16

    ops = linear_ops(design, llm)
    q = quant_of(design)

    def region(op: Op) -> MatrixRegion:
        nonlocal cursor
        in_f, out_f = op.in_features, op.out_features
        wrow, srow, zrow = _matrix_bytes(design, op)
        rows_ch = math.ceil(out_f / C)
        w = cursor
        cursor = _align(cursor + rows_ch * wrow, _ALIGN_BYTES)
        s = cursor
        cursor = _align(cursor + rows_ch * srow, _ALIGN_BYTES) if (quantized or op.bias) else cursor
        z = cursor
        cursor = _align(cursor + rows_ch * zrow, _ALIGN_BYTES) if quantized else cursor
        return MatrixRegion(in_f, out_f, w, s, z, wrow, srow if (quantized or op.bias) else 0, zrow if quantized else 0)

    # globals: embedding table (with its per-row scales and zero points), output head, logits buffer
    embed_row = q.weight_row_bytes(llm.hidden)
    embed_addr = cursor
    cursor = _align(cursor + math.ceil(llm.vocab / C) * embed_row, _ALIGN_BYTES)
    e_srow, e_zrow = q.scale_row_bytes(llm.hidden), q.zero_row_bytes(llm.hidden)
    e_s = cursor
    cursor = _align(cursor + math.ceil(llm.vocab / C) * e_srow, _ALIGN_BYTES) if quantized else cursor
    e_z = cursor
    cursor = _align(cursor + math.ceil(llm.vocab / C) * e_zrow, _ALIGN_BYTES) if quantized else cursor
    embed = MatrixRegion(llm.hidden, llm.vocab, embed_addr, e_s, e_z, embed_row, e_srow, e_zrow)
    if llm.output_head == "lm" and llm.tied_embeddings:  # the head is the embedding table, metadata included
        head = embed
    else:
        head = region(ops["lm_head"])
    logits_addr = cursor
    cursor = _align(cursor + math.ceil(llm.head_out_channels / C) * _LOGIT_BYTES, _ALIGN_BYTES)
    layer_base = _align(cursor, _LAYER_ALIGN_BYTES)
    cursor = 0
    linears = {name: region(op) for name, op in ops.items() if name != "lm_head"}
    kv_row = llm.head_dim * design.kv_bits // 8
    kv_rows_ch = math.ceil(llm.max_position / C)
    k_addr, v_addr = [], []
    for _g in range(llm.kv_heads):
        k_addr.append(cursor)
        cursor = _align(cursor + kv_rows_ch * kv_row, _ALIGN_BYTES)
        v_addr.append(cursor)
        cursor = _align(cursor + kv_rows_ch * kv_row, _ALIGN_BYTES)
    stride = _align(cursor, _LAYER_ALIGN_BYTES)
    used = layer_base + llm.layers * stride
    cap = board.hbm.capacity_bytes // C  # each channel's share of the HBM (ports sharing a PC split it)
    if used > cap:
        raise HwmodelError(
            f"design '{design.name}': {llm.name} at W{design.weight_bits}/KV{design.kv_bits} with a "
            f"{llm.max_position}-token KV cache needs {used / 2**20:.0f} MiB per channel; "
            f"{board.name} gives each of its {C} channels {cap / 2**20:.0f} MiB"
        )

    res = resident_param_bytes(llm, q)
    weights = res.weights + res.metadata + res.bias  # norm gains live on chip
    return Layout(
        channels=C,
        layer_base=layer_base,
        layer_stride_bytes=stride,
        linears=linears,
        k_addr=tuple(k_addr),
        v_addr=tuple(v_addr),
        kv_row_bytes=kv_row,
        kv_rows_per_channel=kv_rows_ch,
        embed_addr=embed_addr,
        embed_row_bytes=embed_row,
        embed=embed,
        head=head,
        logits_addr=logits_addr,
        channel_bytes_used=used,
        weights_bytes=weights,
        kv_bytes_per_token=kv_cache_bytes(llm, design.kv_bits, 1),
    )
