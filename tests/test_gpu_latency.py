"""GPU engine: physical properties (monotone, bandwidth floor, faster GPU never slower), API and errors."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu.frameworks import FRAMEWORKS
from gpu.kernels import Pass, build_program
from gpu.latency import DoesNotFitError, GpuEngine
from hwmodel.bounds import decode_bytes
from hwmodel.engine import Engine
from hwmodel.errors import HwmodelError, UnknownNameError
from hwmodel.specs import library

COMBOS = [  # (gpu, llm, framework) that fit
    ("a100-40gb", "llama2-7b", "hf"),
    ("a100-80gb", "qwen2.5-math-7b", "vllm"),
    ("rtx3090", "qwen2.5-0.5b", "vllm-eager"),
    ("rtx3090", "skywork-prm-7b", "vllm"),
    ("rtx3090", "qwen2.5-math-1.5b", "hf"),
    ("orin-nano", "qwen2.5-0.5b", "edge-w8a8"),
    ("h200", "llama-3.2-1b", "vllm"),
    ("v100s", "qwen2.5-0.5b", "hf"),
]


@functools.cache
def engine(gpu: str, llm: str, fw: str) -> GpuEngine:
    return GpuEngine(gpu, llm, fw)


combo = st.sampled_from(COMBOS)


@settings(max_examples=60)
@given(c=combo, n=st.integers(1, 3000), dn=st.integers(1, 500), ctx=st.integers(0, 2000))
def test_more_tokens_never_faster(c: tuple[str, str, str], n: int, dn: int, ctx: int) -> None:
    e = engine(*c)
    assert e.prefill_s(n + dn, ctx) >= e.prefill_s(n, ctx)
    assert e.ingest_s(n + dn, ctx) >= e.ingest_s(n, ctx)


@settings(max_examples=60)
@given(c=combo, n=st.integers(1, 2000), ctx=st.integers(0, 3000), dc=st.integers(1, 1000))
def test_more_context_never_faster(c: tuple[str, str, str], n: int, ctx: int, dc: int) -> None:
    e = engine(*c)
    assert e.decode_s(ctx + dc) >= e.decode_s(ctx)
    assert e.prefill_s(n, ctx + dc) >= e.prefill_s(n, ctx)
    assert e.score_s(n, ctx + dc) >= e.score_s(n, ctx)


@pytest.mark.parametrize("gpu, llm, fw", COMBOS)
def test_decode_never_beats_its_bandwidth_floor(gpu: str, llm: str, fw: str) -> None:
    e = engine(gpu, llm, fw)
    for ctx in (0, 1, 100, 1000, 3000):
        floor = decode_bytes(e.llm, e.weight_bits, e.kv_bits, ctx).total_bytes / e.gpu.mem_bw_bytes_per_s
        assert e.decode_s(ctx) >= floor
        prog = build_program(e.llm, e.framework.program, Pass.single(1, ctx), e.weight_bits, e.kv_bits)
        assert prog.total_bytes()[0] >= decode_bytes(e.llm, e.weight_bits, e.kv_bits, ctx).total_bytes


@pytest.mark.parametrize("gpu, llm, fw", COMBOS)
def test_prefill_never_beats_its_compute_floor(gpu: str, llm: str, fw: str) -> None:
    from hwmodel.bounds import prefill_ops

    e = engine(gpu, llm, fw)
    for n in (1, 64, 1024):
        assert e.prefill_s(n) >= prefill_ops(e.llm, n) / e.gpu.peak_ops_per_s(e.weight_bits) * 0.999


@settings(max_examples=40)
@given(c=combo, bw=st.floats(1.0, 4.0), flops=st.floats(1.0, 4.0), n=st.integers(1, 2000), ctx=st.integers(0, 2000))
def test_faster_gpu_never_slower(c: tuple[str, str, str], bw: float, flops: float, n: int, ctx: int) -> None:
    base = engine(*c)
    fast_spec = dataclasses.replace(
        base.gpu,
        mem_bw_bytes_per_s=base.gpu.mem_bw_bytes_per_s * bw,
        fp16_flops=base.gpu.fp16_flops * flops,
        int8_ops=base.gpu.int8_ops * flops,
    )
    fast = GpuEngine(fast_spec, base.llm, base.framework)
    assert fast.decode_s(ctx) <= base.decode_s(ctx)
    assert fast.prefill_s(n, ctx) <= base.prefill_s(n, ctx)


def test_named_faster_gpus_are_not_slower() -> None:
    """A100-80GB (more bandwidth, same tensor peak as the 40 GB) and H200 never lose to the A100-40GB."""
    for fw in ("hf", "vllm"):
        a40 = GpuEngine("a100-40gb", "qwen2.5-math-7b", fw)
        for name in ("a100-80gb", "h200"):
            other = GpuEngine(name, "qwen2.5-math-7b", fw)
            for ctx in (0, 1000):
                assert other.decode_s(ctx) <= a40.decode_s(ctx)
            assert other.prefill_s(1024) <= a40.prefill_s(1024)


def test_cuda_graphs_never_slower_than_eager() -> None:
    for gpu, llm in (("rtx3090", "qwen2.5-0.5b"), ("a100-80gb", "qwen2.5-math-7b")):
        g, e = GpuEngine(gpu, llm, "vllm"), GpuEngine(gpu, llm, "vllm-eager")
        for ctx in (0, 500, 4000):
            assert g.decode_s(ctx) <= e.decode_s(ctx)
        assert g.prefill_s(300) == e.prefill_s(300)  # vLLM prefills eagerly in both modes


def test_small_model_eager_decode_is_host_bound_large_prefill_compute_bound() -> None:
    e = GpuEngine("rtx3090", "qwen2.5-0.5b", "vllm-eager")
    assert e.decode_cost(100).bound == "host"
    big = GpuEngine("a100-80gb", "qwen2.5-math-7b", "vllm")
    assert big.prefill_cost(4096).bound == "compute"
    assert big.decode_cost(100).bound == "memory"


def test_engine_protocol_and_determinism() -> None:
    a = GpuEngine("rtx3090", "qwen2.5-0.5b", "vllm")
    b = GpuEngine(library().gpu("rtx3090"), library().llm("qwen2.5-0.5b"), "vllm")
    assert isinstance(a, Engine)
    assert a.name == "qwen2.5-0.5b@rtx3090/vllm"
    for ctx in (0, 257, 1999):
        assert a.decode_s(ctx) == b.decode_s(ctx) == a.decode_cost(ctx).time_s
    assert a.prefill_s(123, 45) == b.prefill_s(123, 45)


def test_decode_steps_and_generate_are_consistent() -> None:
    e = GpuEngine("a100-80gb", "qwen2.5-0.5b", "vllm")
    steps = e.decode_steps_s(100, 600)
    np.testing.assert_allclose(steps, [e.decode_s(c) for c in range(100, 700)], rtol=1e-12)
    assert e.generate_s(100, 601) == pytest.approx(e.prefill_s(100) + steps.sum(), rel=1e-12)


def test_prm_scoring_with_and_without_prefix_cache() -> None:
    prm = GpuEngine("rtx3090", "skywork-prm-7b", "vllm")
    assert prm.score_s(50, 500) == prm.prefill_s(550)  # whole context recomputed
    assert prm.score_s(50, 500, prefix_cache=True) == prm.prefill_s(50, 500)
    assert prm.score_s(50, 500, prefix_cache=True) < prm.score_s(50, 500)


def test_ingest_is_a_prefill_without_head() -> None:
    e = GpuEngine("rtx3090", "qwen2.5-math-1.5b", "vllm")
    assert e.ingest_s(0, 100) == 0.0
    for n in (1, 30, 300):
        assert 0 < e.ingest_s(n, 100) <= e.prefill_s(n, 100)


def test_batched_decode() -> None:
    v = GpuEngine("a100-80gb", "qwen2.5-math-7b", "vllm")
    h = GpuEngine("a100-80gb", "qwen2.5-math-7b", "hf")
    for e in (v, h):
        assert e.decode_batch_s([700]) == pytest.approx(e.decode_s(700), rel=1e-12)
        assert e.decode_batch_s([700] * 8) >= e.decode_s(700)
        assert e.decode_batch_s([700] * 8) < 8 * e.decode_s(700)  # weights are read once for the batch
    # HF pads a batch to its longest request; vLLM's paged cache reads each request's own length
    assert h.decode_batch_s([10, 3000]) == h.decode_batch_s([3000, 3000])
    assert v.decode_batch_s([10, 3000]) < v.decode_batch_s([3000, 3000])
    with pytest.raises(HwmodelError, match="at least one"):
        v.decode_batch_s([])


def test_refuses_models_that_do_not_fit() -> None:
    with pytest.raises(DoesNotFitError, match="llama2-7b does not fit orin-nano"):
        GpuEngine("orin-nano", "llama2-7b", "hf")
    e = GpuEngine("rtx3090", "qwen2.5-math-7b", "vllm")  # 15.2 GB of weights in 25.8 GB
    with pytest.raises(DoesNotFitError, match="KV cache of"):
        e.decode_s(400_000)
    with pytest.raises(DoesNotFitError):
        e.decode_batch_s([100_000] * 4)


def test_bad_arguments_are_clear_errors() -> None:
    with pytest.raises(UnknownNameError, match="valid choices: edge-w8a8, hf, mlc, vllm, vllm-eager"):
        GpuEngine("rtx3090", "qwen2.5-0.5b", "tgi")
    with pytest.raises(HwmodelError, match="framework hf runs weights at 16 bits"):
        GpuEngine("rtx3090", "qwen2.5-0.5b", "hf", weight_bits=8)
    with pytest.raises(HwmodelError, match="KV cache at 16 bits"):
        GpuEngine("rtx3090", "qwen2.5-0.5b", "hf", kv_bits=8)
    e = GpuEngine("rtx3090", "qwen2.5-0.5b", "vllm")
    with pytest.raises(HwmodelError, match="prefill tokens must be an integer >= 1"):
        e.prefill_s(0)
    with pytest.raises(HwmodelError, match="context length must be an integer >= 0"):
        e.decode_s(-1)


def test_quantized_weights_decode_faster_on_vllm() -> None:
    w16 = GpuEngine("rtx3090", "qwen2.5-math-7b", "vllm", weight_bits=16)
    w4 = GpuEngine("rtx3090", "qwen2.5-math-7b", "vllm", weight_bits=4)
    assert w4.decode_s(500) < w16.decode_s(500)


def test_every_framework_has_a_program() -> None:
    for fw in FRAMEWORKS.values():
        gpu = "orin-nano" if fw.name == "edge-w8a8" else "rtx3090"
        assert GpuEngine(gpu, "qwen2.5-0.5b", fw.name).decode_s(10) > 0
