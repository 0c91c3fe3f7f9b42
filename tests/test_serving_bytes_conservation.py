"""Conservation of serving's memory accounting: the KV bytes a GPU engine and the serving simulator's device models
reserve per request, and the parameter bytes they hold resident, equal the operator graph's (hwmodel.graph, the
single source of bytes), exactly and as integers."""

from __future__ import annotations

import pytest
from graph_gen import llm_shapes
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu.frameworks import FRAMEWORKS
from hwmodel.graph import decode, per_channel, prefill, resident_param_bytes
from hwmodel.serving.cluster import load_cluster
from hwmodel.serving.devices import EngineFactory
from hwmodel.serving.engines import resolve_builder
from hwmodel.specs import LlmSpec, library


def graph_kv_bytes(llm: LlmSpec, kv_bits: int, tokens: int) -> int:
    """The K and V the graph writes when ``tokens`` tokens are prefilled: what a request's cache must hold."""
    return prefill(llm, per_channel(16, kv_bits), tokens).bytes.kv_write


@settings(max_examples=60, deadline=None)
@given(llm_shapes(), st.sampled_from([4, 8, 16]), st.integers(1, 40))
def test_llm_kv_bytes_are_the_graphs_kv_writes(m: LlmSpec, kv_bits: int, n: int) -> None:
    assert m.kv_bytes(n, kv_bits) == graph_kv_bytes(m, kv_bits, n)
    # one decode step at context n writes one more token's K and V
    step = decode(m, per_channel(16, kv_bits), n).bytes.kv_write
    assert m.kv_bytes(n + 1, kv_bits) - m.kv_bytes(n, kv_bits) == step


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_gpu_engine_kv_and_weights_are_the_graphs(framework: str) -> None:
    from gpu.latency import GpuEngine

    lib = library()
    llm = lib.llm("llama2-7b")
    fw = FRAMEWORKS[framework]
    for wb in fw.allowed_weight_bits:
        for kb in fw.allowed_kv_bits:
            e = GpuEngine(lib.gpu("a100-80gb"), llm, framework=framework, weight_bits=wb, kv_bits=kb)
            for n in (1, 17, 1000):
                assert e.kv_bytes(n) == graph_kv_bytes(llm, kb, n)
            assert e.weights_bytes == resident_param_bytes(llm, per_channel(wb, kb)).params


@pytest.mark.parametrize("cluster", ["a100+7xu280", "a100+7xu280-streaming"])
def test_serving_device_models_hold_the_graphs_bytes(cluster: str) -> None:
    from fpga.streaming.lowering import quant_of

    lib = library()
    spec = load_cluster(cluster)
    llm = lib.llm(spec.llm)
    fac = EngineFactory(cache=False)
    checked = set()
    for i, role, j, g in spec.groups():
        m = fac.build(g, llm, lib, cluster, f"nodes[{i}].{role}[{j}]")
        for n in (1, 129, 2048):
            assert m.kv_bytes(n) == graph_kv_bytes(llm, m.kv_bits, n), (g.device, n)
        family = resolve_builder(g, lib, cluster, "group").name
        if family == "streaming":
            want = resident_param_bytes(llm, quant_of(m.engine.design)).params
        elif family == "gpu":
            want = resident_param_bytes(llm, per_channel(g.weight_bits or 16, m.kv_bits)).params
        else:  # the instruction layout stores the graph's parameters plus its channel padding
            want = m.weights_bytes
        checked.add(family)
        assert m.weights_bytes == want, (g.device, family)
    assert checked == {"gpu", "instruction" if cluster == "a100+7xu280" else "streaming"}
