"""The hardware-independent operator graph of one forward pass: the single source of bytes and MACs.

Built from an :class:`~hwmodel.specs.LlmSpec` and a :class:`~hwmodel.graph.quant.QuantScheme` for ``decode(ctx)``,
``prefill(n, ctx)``, ``ingest(n, ctx)`` and ``score(n, ctx)``. Every back-end (bounds, the streaming and
instruction FPGA lowerings, the GPU kernel lists) reads its bytes and MACs from here and is tested to conserve
them exactly (tests/test_graph_conservation.py). See docs/graph.md.
"""

from __future__ import annotations

import dataclasses
import functools

from hwmodel.graph.build import (
    PHASES,
    Graph,
    attention_keys,
    build_graph,
    decode,
    ingest,
    prefill,
    resident_param_bytes,
    score,
    uniform_routing,
)
from hwmodel.graph.ops import BYTE_CLASSES, MEMORY_CLASSES, PARAM_CLASSES, Bytes, Op
from hwmodel.graph.quant import QuantScheme, group_scheme, per_channel
from hwmodel.specs import LlmSpec, kv_cache_bytes

__all__ = [
    "BYTE_CLASSES",
    "MEMORY_CLASSES",
    "PARAM_CLASSES",
    "PHASES",
    "Bytes",
    "Graph",
    "Op",
    "Params",
    "QuantScheme",
    "attention_keys",
    "build_graph",
    "decode",
    "group_scheme",
    "ingest",
    "kv_cache_bytes",
    "params_of",
    "per_channel",
    "prefill",
    "resident_param_bytes",
    "score",
    "uniform_routing",
]


@dataclasses.dataclass(frozen=True)
class Params:
    """Parameter counts (elements) of a model, all experts included."""

    weights: int  # decoder-layer matrices (projections, experts, routers, shared-expert gates)
    bias: int
    norm: int  # norm gains (and LayerNorm biases), q/k norm gains, the final norm
    embed: int  # the token embedding table, and a learned position table
    head: int  # 0 when a tied LM head shares the embedding

    @property
    def total(self) -> int:
        """All parameters, a tied LM head counted once."""
        return self.weights + self.bias + self.norm + self.embed + self.head


@functools.lru_cache(maxsize=256)
def params_of(llm: LlmSpec) -> Params:
    """Element counts from the graph's resident bytes under 16-bit weights (2 bytes an element, exactly)."""
    fp16 = QuantScheme(weight_bits=16, kv_bits=16)
    b = resident_param_bytes(llm, fp16)
    embed = llm.embedding_params
    head = 0 if (llm.output_head == "lm" and llm.tied_embeddings) else llm.head_out_channels * llm.hidden
    return Params(weights=b.weights // 2 - embed - head, bias=b.bias // 2, norm=b.norm // 2, embed=embed, head=head)
