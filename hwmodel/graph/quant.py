"""Quantization schemes: weight / KV precision and the one metadata convention each scheme declares.

A scheme says how many bytes a weight matrix of ``out x in`` and its quantization metadata take, and how many
bytes one cached K or V element takes. The metadata convention is explicit (never implied by a back-end):

* ``granularity = "channel"``: one scale (and optional zero point) per output channel (row);
* ``granularity = "group"``: one per ``group_size`` consecutive input channels of each row.

Per row: ``groups x scale_bits / 8`` bytes of scales plus ``ceil(groups x zero_bits / 8)`` bytes of zero points,
where ``groups = 1`` (channel) or ``ceil(in / group_size)`` (group). Unquantized (16-bit) weights carry none.
Biases and norm gains are stored at ``vector_bits``; activations cross device memory at ``act_bits``.

Conventions in use (the designs and engines declare theirs):
* per-channel fp16 scale, no zero point (:data:`PER_CHANNEL_FP16`): the bounds, the streaming designs (one fp16
  scale per row, W8A8 as in FlexLLM) and the GPU kernel lists (one fp16 scale per output channel);
* group-wise 128, fp16 scale + fp16 scaled zero point: the instruction-driven designs (GLITCHES / FlightLLM),
  built from each design's ``[quant]`` table by :func:`group_scheme`.
"""

from __future__ import annotations

import dataclasses

from hwmodel.errors import HwmodelError

VALID_BITS = (4, 8, 16)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclasses.dataclass(frozen=True)
class QuantScheme:
    """Precisions and the metadata convention of one quantized model."""

    weight_bits: int
    kv_bits: int
    granularity: str = "channel"  # "channel" or "group"
    group_size: int = 0  # input channels per group (granularity "group")
    scale_bits: int = 16
    zero_bits: int = 0
    vector_bits: int = 16  # biases, norm gains
    act_bits: int = 16  # activations that cross device memory

    def __post_init__(self) -> None:
        if self.weight_bits not in VALID_BITS:
            raise HwmodelError(f"weight bits must be one of {VALID_BITS}, got {self.weight_bits}")
        if self.kv_bits not in VALID_BITS:
            raise HwmodelError(f"KV bits must be one of {VALID_BITS}, got {self.kv_bits}")
        if self.granularity not in ("channel", "group"):
            raise HwmodelError(f"quantization granularity must be 'channel' or 'group', got {self.granularity!r}")
        if self.granularity == "group" and self.group_size < 1:
            raise HwmodelError(f"group-wise quantization needs group_size >= 1, got {self.group_size}")

    @property
    def quantized(self) -> bool:
        return self.weight_bits < 16

    @property
    def label(self) -> str:
        meta = (
            ""
            if not self.quantized
            else (
                f" per-channel s{self.scale_bits}"
                if self.granularity == "channel"
                else f" g{self.group_size} s{self.scale_bits}"
            )
            + (f" z{self.zero_bits}" if self.zero_bits else "")
        )
        return f"W{self.weight_bits} KV{self.kv_bits}{meta}"

    # ---- bytes of one row of a matrix
    def weight_row_bytes(self, in_features: int) -> int:
        """Bytes of one output row's weights (packed)."""
        return _cdiv(in_features * self.weight_bits, 8)

    def groups(self, in_features: int) -> int:
        return 1 if self.granularity == "channel" else _cdiv(in_features, self.group_size)

    def scale_row_bytes(self, in_features: int) -> int:
        return 0 if not self.quantized else self.groups(in_features) * self.scale_bits // 8

    def zero_row_bytes(self, in_features: int) -> int:
        return 0 if not self.quantized else _cdiv(self.groups(in_features) * self.zero_bits, 8)

    def meta_row_bytes(self, in_features: int) -> int:
        """Bytes of one output row's quantization metadata (scales + zero points)."""
        return self.scale_row_bytes(in_features) + self.zero_row_bytes(in_features)

    @property
    def vector_bytes(self) -> int:
        return self.vector_bits // 8

    @property
    def act_bytes(self) -> int:
        return self.act_bits // 8

    def kv_bytes(self, elements: int) -> int:
        return _cdiv(elements * self.kv_bits, 8)


def per_channel(weight_bits: int, kv_bits: int, act_bits: int = 16) -> QuantScheme:
    """Per-output-channel fp16 scales, no zero point (bounds, streaming designs, GPU kernels)."""
    return QuantScheme(weight_bits=weight_bits, kv_bits=kv_bits, act_bits=act_bits)


PER_CHANNEL_FP16 = "per-channel fp16 scale"


def group_scheme(
    weight_bits: int, kv_bits: int, group_size: int, scale_bits: int, zero_bits: int, act_bits: int = 16
) -> QuantScheme:
    """Group-wise scales and zero points (instruction-driven designs)."""
    return QuantScheme(
        weight_bits=weight_bits,
        kv_bits=kv_bits,
        granularity="group",
        group_size=group_size,
        scale_bits=scale_bits,
        zero_bits=zero_bits,
        act_bits=act_bits,
    )
