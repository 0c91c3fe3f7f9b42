"""Operators of the graph and the bytes they move, by class.

Every operator carries integers only: its shape, multiply-accumulates, element-wise work and the bytes it moves
per class. The classes are disjoint, so a back-end can be checked class by class:

* ``weights`` — weight matrix elements (packed at the scheme's weight bits), the embedding rows gathered included;
* ``metadata`` — quantization scales and zero points, per the scheme's one convention (:mod:`hwmodel.graph.quant`);
* ``bias`` — linear-layer biases (q/k/v, o, MLP, value head);
* ``norm`` — RMSNorm / LayerNorm gains (and LayerNorm biases), q/k norm gains;
* ``kv_read`` / ``kv_write`` — the KV cache read by attention and the new tokens' K and V written to it;
* ``act_in`` / ``act_out`` — the operator's input / output activations at the scheme's activation width (they
  cross device memory on a GPU; a streaming FPGA design keeps them on chip).
"""

from __future__ import annotations

import dataclasses

BYTE_CLASSES = ("weights", "metadata", "bias", "norm", "kv_read", "kv_write", "act_in", "act_out")
MEMORY_CLASSES = ("weights", "metadata", "bias", "norm", "kv_read", "kv_write")  # what a pass must read/write
PARAM_CLASSES = ("weights", "metadata", "bias", "norm")

OP_KINDS = (
    "embed",
    "norm",
    "linear",
    "qk_norm",
    "rope",
    "attention",
    "act",
    "add",
    "router",
    "moe_combine",
    "head",
    "sample",
    "scale",
    "softcap",
)


@dataclasses.dataclass(frozen=True)
class Bytes:
    """Bytes moved, one integer per class."""

    weights: int = 0
    metadata: int = 0
    bias: int = 0
    norm: int = 0
    kv_read: int = 0
    kv_write: int = 0
    act_in: int = 0
    act_out: int = 0

    def __add__(self, other: Bytes) -> Bytes:
        return Bytes(*(getattr(self, c) + getattr(other, c) for c in BYTE_CLASSES))

    def __mul__(self, k: int) -> Bytes:
        return Bytes(*(getattr(self, c) * k for c in BYTE_CLASSES))

    __rmul__ = __mul__

    @property
    def memory(self) -> int:
        """Bytes that must cross device memory on any back-end (parameters and KV cache)."""
        return sum(getattr(self, c) for c in MEMORY_CLASSES)

    @property
    def params(self) -> int:
        return sum(getattr(self, c) for c in PARAM_CLASSES)

    def as_dict(self) -> dict[str, int]:
        return {c: getattr(self, c) for c in BYTE_CLASSES}


@dataclasses.dataclass(frozen=True)
class Op:
    """One operator of a forward pass.

    ``name``: what it is ("q_proj", "attention", "expert.3.up_proj", ...); ``kind``: one of :data:`OP_KINDS`;
    ``tokens``: rows it processes; ``in_features`` / ``out_features``: widths (a linear's matrix is
    ``out x in``); ``macs``: multiply-accumulates; ``elementwise``: element-wise operations (norms, RoPE, softmax,
    activation functions, residual adds); ``bytes``: bytes moved by class; ``bias``: the linear carries a bias;
    ``expert``: MoE expert index (-1 for dense operators and shared experts).
    """

    name: str
    kind: str
    tokens: int
    in_features: int = 0
    out_features: int = 0
    macs: int = 0
    elementwise: int = 0
    bytes: Bytes = Bytes()
    bias: bool = False
    expert: int = -1
