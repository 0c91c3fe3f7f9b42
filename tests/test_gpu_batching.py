"""vLLM mechanisms of the GPU model: per-sequence host cost, sampler settings, the sliding-window attention backend,
and batched prefill packed to the scheduler's token budget (gpu.vllm_sampler, gpu.kernels.Window)."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu.kernels import Pass, Window, attention_counts
from gpu.latency import GpuEngine
from gpu.vllm_sampler import C_SEQ_PARAM, host_step_s, pack_prefills, sampler_block
from hwmodel.errors import HwmodelError
from hwmodel.specs import library

WINDOW = 256


@functools.cache
def engine(gpu: str, llm: str, fw: str, decoding: str = "greedy", window: int = 0) -> GpuEngine:
    spec = library().llm(llm)
    if window:
        spec = dataclasses.replace(spec, name=f"{llm}-sw{window}", sliding_window=window)
    return GpuEngine(gpu, spec, fw, decoding=decoding)


@settings(max_examples=15, deadline=None)
@given(b=st.integers(1, 48), ctx=st.integers(0, 2000))
def test_vllm_step_host_cost_grows_with_the_batch(b: int, ctx: int) -> None:
    e = engine("a100-80gb", "qwen2.5-0.5b", "vllm")
    t1, t2 = e.decode_batch_s([ctx] * b), e.decode_batch_s([ctx] * (b + 1))
    # one more sequence: at least the host's per-sequence work before the GPU starts (and never faster)
    assert t2 - t1 >= e.c_seq_s * (1 - 1e-9)
    assert host_step_s(e.t_step_s, e.c_seq_s, b + 1) - host_step_s(e.t_step_s, e.c_seq_s, b) == pytest.approx(
        e.params[C_SEQ_PARAM]
    )


def test_sampling_settings_cost_more_than_greedy() -> None:
    p = Pass.single(1, np.array([100.0, 5000.0]))
    greedy, sample = sampler_block(151936, p, "greedy"), sampler_block(151936, p, "sample")
    assert greedy.n_kernels == 9 and sample.n_kernels == 53  # counted from vLLM 0.6 sampler.py (module docstring)
    assert np.all(sample.bytes.sum(axis=0) > greedy.bytes.sum(axis=0))
    g, s = engine("a100-80gb", "qwen2.5-0.5b", "vllm"), engine("a100-80gb", "qwen2.5-0.5b", "vllm", "sample")
    for ctx in (10, 3000):
        assert s.decode_s(ctx) > g.decode_s(ctx)
        assert s.decode_cost(ctx).kernels == g.decode_cost(ctx).kernels + 44
    # vllm-eager: each extra kernel costs the GPU at least its fixed per-kernel time (the host issues them while the
    # GPU still reads the LM head, so the issue cost hides partly behind it)
    ge, se = engine("rtx3090", "qwen2.5-0.5b", "vllm-eager"), engine("rtx3090", "qwen2.5-0.5b", "vllm-eager", "sample")
    assert se.decode_s(500) - ge.decode_s(500) >= 44 * ge.roofline.t_kernel_s * (1 - 1e-9)
    # the HF path keeps its own sampling kernels (gpu.sampling), untouched by vLLM's sampler
    assert (
        engine("a100-80gb", "qwen2.5-0.5b", "hf").decode_cost(10).kernels
        < engine("a100-80gb", "qwen2.5-0.5b", "hf", "sample").decode_cost(10).kernels
    )


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 40), c=st.integers(0, 60), w=st.integers(1, 30), full=st.sampled_from([0.0, 0.25, 1.0]))
def test_window_counts_match_brute_force(n: int, c: int, w: int, full: float) -> None:
    pairs, kv = attention_counts(np.array([float(n)]), np.array([float(c)]), Window(w, full))
    pos = np.arange(c + 1, c + n + 1)  # 1-based positions of the new queries
    win_pairs = float(np.minimum(pos, w).sum())
    win_keys = len(set(k for p in pos for k in range(max(1, p - w + 1), p + 1)))
    full_pairs, full_keys = float(pos.sum()), c + n
    assert pairs[0] == pytest.approx((1 - full) * win_pairs + full * full_pairs)
    assert kv[0] == pytest.approx((1 - full) * win_keys + full * full_keys)


def test_sliding_window_model_on_vllm_uses_xformers_and_the_paged_kernel() -> None:
    sw = engine("a100-80gb", "qwen2.5-0.5b", "vllm", window=WINDOW)
    full = engine("a100-80gb", "qwen2.5-0.5b", "vllm")
    assert full.attention_backend == "flash-attn" and full.window is None
    assert sw.attention_backend == "xformers" and sw.window == Window(WINDOW, 0.0)
    # decode runs vLLM's paged_attention_v2 (partition + reduce kernels): one more kernel per layer
    assert sw.decode_cost(100).kernels == full.decode_cost(100).kernels + sw.llm.layers
    # past the window a step reads only the window's keys: decode time stops growing
    assert sw.decode_s(WINDOW + 10) == sw.decode_s(WINDOW * 8)
    assert full.decode_s(WINDOW * 8) > full.decode_s(WINDOW + 10)
    # prefill through xFormers' local mask: fewer attention pairs than full causal attention beyond the window
    assert sw.prefill_cost(4 * WINDOW).ops < full.prefill_cost(4 * WINDOW).ops
    assert sw.prefill_cost(WINDOW).ops == full.prefill_cost(WINDOW).ops  # exact below the window
    # HF (eager SDPA) masks the window but computes every pair and keeps the whole cache
    hf = engine("a100-80gb", "qwen2.5-0.5b", "hf", window=WINDOW)
    assert hf.attention_backend == "sdpa" and hf.decode_cost(WINDOW * 8).ops > hf.decode_cost(WINDOW + 10).ops


@settings(max_examples=40, deadline=None)
@given(
    prompts=st.lists(st.integers(1, 600), min_size=1, max_size=30),
    budget=st.integers(600, 2500),
    seqs=st.integers(1, 8),
)
def test_prefills_pack_whole_prompts_in_order_up_to_the_budget(prompts: list[int], budget: int, seqs: int) -> None:
    steps = pack_prefills(prompts, budget, seqs)
    assert [n for step in steps for n in step] == prompts  # first come first served, never split or skipped
    for k, step in enumerate(steps):
        assert sum(step) <= budget and 1 <= len(step) <= seqs
        if k + 1 < len(steps):  # the next step's first prompt did not fit this one
            assert sum(step) + steps[k + 1][0] > budget or len(step) == seqs


def test_batched_prefill_engine() -> None:
    e = engine("a100-80gb", "qwen2.5-math-7b", "vllm")
    assert e.prefill_batch_cost([700]).time_s == pytest.approx(e.prefill_s(700), rel=1e-12)
    packed = e.prefill_batch_cost([300] * 6).time_s
    assert packed < 6 * e.prefill_s(300)  # weights read once for the packed prompts
    assert packed > e.prefill_s(300)
    steps = e.prefill_steps([1500] * 5, max_num_batched_tokens=4096)
    assert [s for s, _ in steps] == [[1500, 1500], [1500, 1500], [1500]]
    assert all(t > 0 for _, t in steps)
    with pytest.raises(HwmodelError, match="exceeds the scheduler budget"):
        e.prefill_steps([5000], max_num_batched_tokens=4096)
    with pytest.raises(HwmodelError, match="at least one prompt"):
        e.prefill_batch_cost([])
