"""Hypothesis strategies for the graph conservation tests: LLM shapes of every family feature, quantization
schemes, contexts."""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import strategies as st

from hwmodel.graph import QuantScheme
from hwmodel.specs import LlmSpec, library


@st.composite
def llm_shapes(draw: Any, max_layers: int = 2, moe: bool | None = None, max_vocab: int = 300) -> LlmSpec:
    """Small LLMs covering MHA/GQA/MQA, biases, q/k norms, LayerNorm, ungated MLPs, sliding windows and MoE."""
    base = library().llm("qwen2.5-0.5b")
    kv = draw(st.sampled_from([1, 2, 4]))
    group = draw(st.sampled_from([1, 2, 3]))
    is_moe = draw(st.booleans()) if moe is None else moe
    experts = draw(st.integers(2, 9)) if is_moe else 0
    shared = draw(st.sampled_from([0, 0, 24, 40])) if is_moe else 0
    head = draw(st.sampled_from(["lm", "lm", "value"]))
    layers = draw(st.integers(1, max_layers))
    return dataclasses.replace(
        base,
        name="hypo",
        layers=layers,
        hidden=draw(st.sampled_from([16, 24, 32, 64, 72])),
        heads=kv * group,
        kv_heads=kv,
        head_dim=draw(st.sampled_from([4, 8, 16, 34])),
        intermediate=draw(st.sampled_from([16, 40, 96, 100])),
        vocab=draw(st.integers(8, max_vocab)),
        qkv_bias=draw(st.booleans()),
        o_bias=draw(st.booleans()),
        mlp_bias=draw(st.booleans()),
        tied_embeddings=(head == "lm" and draw(st.booleans())),
        output_head=head,
        norm=draw(st.sampled_from(["rms", "layer"])),
        mlp=draw(st.sampled_from(["gated", "plain"])),
        qk_norm=draw(st.booleans()),
        sliding_window=draw(st.sampled_from([0, 0, 1, 5, 64])),
        experts=experts,
        experts_per_token=draw(st.integers(1, experts)) if is_moe else 0,
        moe_intermediate=draw(st.sampled_from([8, 24, 36])) if is_moe else 0,
        shared_expert_intermediate=shared,
        shared_expert_gate=bool(shared) and draw(st.booleans()),
    )


@st.composite
def quant_schemes(draw: Any, zero_points: bool = True) -> QuantScheme:
    wb = draw(st.sampled_from([4, 8, 16]))
    kb = draw(st.sampled_from([4, 8, 16]))
    if draw(st.booleans()):
        return QuantScheme(weight_bits=wb, kv_bits=kb)
    return QuantScheme(
        weight_bits=wb,
        kv_bits=kb,
        granularity="group",
        group_size=draw(st.sampled_from([8, 32, 128])),
        scale_bits=16,
        zero_bits=draw(st.sampled_from([0, 4, 8, 16])) if zero_points else 0,
    )
