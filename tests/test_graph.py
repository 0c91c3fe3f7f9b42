"""The operator graph: what it counts for each phase and family feature (hand-checked shapes)."""

from __future__ import annotations

import pytest
from graph_gen import llm_shapes, quant_schemes
from hypothesis import given
from hypothesis import strategies as st

from hwmodel.errors import HwmodelError
from hwmodel.graph import (
    Bytes,
    QuantScheme,
    decode,
    ingest,
    params_of,
    per_channel,
    prefill,
    resident_param_bytes,
    score,
    uniform_routing,
)
from hwmodel.specs import library


def test_qwen_0p5b_decode_counts_by_hand() -> None:
    m = library().llm("qwen2.5-0.5b")
    g = decode(m, per_channel(8, 8), 1024)
    h, q, kv, i, L = 896, 896, 128, 4864, 24
    layer_w = h * q + 2 * h * kv + q * h + 3 * h * i
    assert g.bytes.weights == L * layer_w + 151936 * h + h  # layers + tied LM head + one embedding row
    assert g.bytes.metadata == 2 * (L * (q + 2 * kv + h + 2 * i + h) + 151936 + 1)  # fp16 per row (+ embed row)
    assert g.bytes.bias == 2 * L * (q + 2 * kv)
    assert g.bytes.norm == 2 * (2 * L + 1) * h
    assert g.bytes.kv_read == L * 2 * 1024 * kv and g.bytes.kv_write == L * 2 * kv
    assert g.macs == L * (layer_w + 2 * q * 1025) + 151936 * h


def test_phases_differ_where_they_should() -> None:
    m = library().llm("qwen2.5-0.5b")
    q = per_channel(8, 8)
    d, p, i = decode(m, q, 10), prefill(m, q, 1, 10), ingest(m, q, 1, 10)
    assert d.bytes == p.bytes and d.macs == p.macs
    head = m.vocab * m.hidden
    assert d.macs - i.macs == head  # ingest discards the logits: no head
    assert not i.epilogue
    with pytest.raises(HwmodelError, match="value head"):
        score(m, q, 4, 0)
    prm = library().llm("skywork-prm-7b")
    s = score(prm, q, 4, 100)
    assert s.find("value_head", "epilogue").out_features == 1 and s.find("value_head", "epilogue").bias
    # prefill: weights read once, MACs per token; attention pairs causal
    p8 = prefill(m, q, 8, 100)
    assert p8.bytes.weights == d.bytes.weights + 7 * m.hidden  # 7 more embedding rows
    assert p8.find("attention").macs == 2 * m.q_dim * (8 * 100 + 36)
    assert p8.bytes.kv_write == 8 * d.bytes.kv_write


def test_sliding_window_caps_the_cache_read() -> None:
    m = library().llm("qwen2.5-0.5b")
    import dataclasses

    w = dataclasses.replace(m, sliding_window=64)
    q = per_channel(8, 8)
    assert decode(w, q, 1000).bytes.kv_read == decode(m, q, 63).bytes.kv_read
    assert decode(w, q, 1000).find("attention").macs == decode(m, q, 63).find("attention").macs
    assert decode(w, q, 10).bytes == decode(m, q, 10).bytes
    half = dataclasses.replace(w, full_attention_layers=12)
    assert (
        decode(half, q, 1000).bytes.kv_read
        == (decode(m, q, 1000).bytes.kv_read + decode(w, q, 1000).bytes.kv_read) // 2
    )
    # prefill pairs with a window: closed form = direct sum
    for ctx, n in ((0, 100), (30, 70), (200, 90)):
        a = prefill(w, q, n, ctx).find("attention").macs
        assert a == 2 * w.q_dim * sum(min(ctx + i + 1, 64) for i in range(n))


def test_moe_reads_only_routed_experts() -> None:
    import dataclasses

    m = dataclasses.replace(library().llm("qwen2.5-0.5b"), experts=8, experts_per_token=2, moe_intermediate=128)
    q = per_channel(16, 16)
    g = decode(m, q, 0)
    experts = {op.expert for op in g.layers[0] if op.expert >= 0}
    assert experts == {0, 1}
    one_expert = 3 * m.hidden * 128 * 2
    router = m.hidden * 8 * 2
    dense_attn = decode(dataclasses.replace(m, experts=0, experts_per_token=0, moe_intermediate=0), q, 0)
    mlp_dense = 3 * m.hidden * m.intermediate * 2
    assert g.bytes.weights - dense_attn.bytes.weights == m.layers * (2 * one_expert + router - mlp_dense)
    # chosen experts as input
    routing = tuple((0, 0, 0, 1, 0, 0, 1, 0) for _ in range(m.layers))
    r = decode(m, q, 0, routing)
    assert {op.expert for op in r.layers[0] if op.expert >= 0} == {3, 6}
    assert r.bytes == g.bytes
    with pytest.raises(HwmodelError, match="routing"):
        decode(m, q, 0, tuple((2, 0, 0, 0, 0, 0, 0, 0) for _ in range(m.layers)))
    # prefill of many tokens touches every expert, MACs scale with tokens x k
    p = prefill(m, q, 64, 0)
    assert {op.expert for op in p.layers[0] if op.expert >= 0} == set(range(8))
    assert sum(op.macs for op in p.layers[0] if op.expert >= 0) == 64 * 2 * 3 * m.hidden * 128
    assert uniform_routing(m, 3) == (1, 1, 1, 1, 1, 1, 0, 0)
    # resident bytes hold all experts
    res = resident_param_bytes(m, q)
    assert res.weights // 2 == params_of(m).weights + m.vocab * m.hidden


def test_group_metadata_convention() -> None:
    m = library().llm("llama2-7b")
    q = QuantScheme(weight_bits=4, kv_bits=8, granularity="group", group_size=128, scale_bits=16, zero_bits=16)
    g = decode(m, q, 0)
    qp = g.find("q_proj")
    assert qp.bytes.weights == 4096 * 4096 // 2 and qp.bytes.metadata == 4096 * 32 * 4  # GLITCHES: 32 groups/row


@given(llm_shapes(), quant_schemes(), st.integers(0, 300))
def test_graph_totals_are_sums_of_operators(m, q, ctx) -> None:  # type: ignore[no-untyped-def]
    g = decode(m, q, ctx)
    total = Bytes()
    macs = 0
    for _layer, op in g.ops():
        total = total + op.bytes
        macs += op.macs
        assert op.macs >= 0 and min(op.bytes.as_dict().values()) >= 0
    assert total == g.bytes and macs == g.macs
    assert g is decode(m, q, ctx)  # memoized
    more = decode(m, q, ctx + 1)
    assert more.bytes.kv_read >= g.bytes.kv_read and more.macs >= g.macs


def test_functional_model_layer_structure_is_checked_against_the_graph() -> None:
    import dataclasses

    import numpy as np

    from fpga.functional.model import DraftModelError, check_layer_structure
    from fpga.functional.quantize import quantize_model
    from fpga.functional.weights import SyntheticWeights

    m = dataclasses.replace(
        library().llm("qwen2.5-0.5b"), layers=1, hidden=64, heads=2, kv_heads=1, head_dim=32, intermediate=96, vocab=128
    )
    params = quantize_model(m, SyntheticWeights(m, 0))
    check_layer_structure(m, params)  # the datapath's tensors are the graph's fused operators
    bad = dataclasses.replace(params, gu_q=params.gu_q[:, :96])  # the up projection's rows missing
    with pytest.raises(DraftModelError, match="gu_q"):
        check_layer_structure(m, bad)
    with pytest.raises(DraftModelError, match="q/k norms"):
        check_layer_structure(dataclasses.replace(m, qk_norm=True), params)
    assert isinstance(params.qkv_q, np.ndarray)
