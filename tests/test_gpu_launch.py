"""The launch-queue model: the closed form over repeated layers equals the kernel-by-kernel reference."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpu import launch
from gpu.kernels import Pass, build_program
from gpu.latency import GpuEngine

times = st.lists(st.floats(min_value=0.0, max_value=1e-3, allow_nan=False), min_size=1, max_size=12)


@given(
    c_op=st.floats(min_value=0.0, max_value=1e-4),
    pro=times,
    lay=times,
    epi=times,
    layers=st.integers(min_value=1, max_value=9),
    start=st.floats(min_value=0.0, max_value=1e-2),
)
def test_eager_closed_form_equals_reference(
    c_op: float, pro: list[float], lay: list[float], epi: list[float], layers: int, start: float
) -> None:
    t = launch.PassTimes(np.array(pro)[:, None], np.array(lay)[:, None], np.array(epi)[:, None], layers)
    fast = launch.eager(c_op, t, start)
    ref = launch.eager_reference(c_op, t, start)
    np.testing.assert_allclose(fast.total_s, ref.total_s, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(fast.layer_end_s, ref.layer_end_s, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(fast.host_done_s, ref.host_done_s, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("framework", ["hf", "vllm-eager", "edge-w8a8"])
def test_eager_equals_reference_on_real_programs(framework: str) -> None:
    gpu = "orin-nano" if framework == "edge-w8a8" else "a100-40gb"
    eng = GpuEngine(gpu, "qwen2.5-0.5b", framework)
    for p in (Pass.single(1, np.array([0, 100, 3000])), Pass.single(np.array([7, 300, 2000]), 0)):
        prog = build_program(eng.llm, eng.framework.program, p, eng.weight_bits, eng.kv_bits)
        t = launch.PassTimes.of(prog, eng.roofline)
        fast, ref = launch.eager(eng.c_op_s, t, 1e-3), launch.eager_reference(eng.c_op_s, t, 1e-3)
        np.testing.assert_allclose(fast.total_s, ref.total_s, rtol=1e-12)
        np.testing.assert_allclose(fast.layer_end_s, ref.layer_end_s, rtol=1e-12)


@given(c_op=st.floats(min_value=0.0, max_value=1e-4), lay=times, layers=st.integers(min_value=1, max_value=9))
def test_eager_bounds(c_op: float, lay: list[float], layers: int) -> None:
    """Never faster than the GPU work or the host issue; never slower than both in series."""
    t = launch.PassTimes(np.zeros((0, 1)), np.array(lay)[:, None], np.zeros((0, 1)), layers)
    total = float(launch.eager(c_op, t).total_s[0])
    gpu = layers * sum(lay)
    host = layers * len(lay) * c_op
    assert total >= max(gpu, host + lay[-1]) - 1e-15
    assert total <= gpu + host + 1e-15


def test_graph_is_launch_plus_gpu_work() -> None:
    t = launch.PassTimes(np.array([[1e-5]]), np.array([[2e-5], [3e-5]]), np.array([[4e-5]]), 3)
    tl = launch.graph(7e-6, t, 1e-3)
    assert float(tl.total_s[0]) == pytest.approx(1e-3 + 7e-6 + 1e-5 + 3 * 5e-5 + 4e-5)
    np.testing.assert_allclose(tl.layer_end_s[:, 0], 1e-3 + 7e-6 + 1e-5 + 5e-5 * np.arange(1, 4))


def test_host_bound_and_gpu_bound_limits() -> None:
    lay = np.full((10, 1), 1e-6)
    t = launch.PassTimes(np.zeros((0, 1)), lay, np.zeros((0, 1)), 4)
    # slow host: time is the host issue of all 40 kernels plus the last kernel
    assert float(launch.eager(1e-4, t).total_s[0]) == pytest.approx(40 * 1e-4 + 1e-6)
    # free host: time is the GPU work
    assert float(launch.eager(0.0, t).total_s[0]) == pytest.approx(40 * 1e-6)


@given(
    n=st.lists(st.integers(1, 5000), min_size=1, max_size=4),
    ctx=st.integers(0, 5000),
    program=st.sampled_from(["hf", "vllm", "w8a8"]),
    llm=st.sampled_from(["qwen2.5-0.5b", "llama2-7b", "skywork-prm-7b"]),
    head=st.sampled_from(["auto", "none"]),
    kv_bits=st.sampled_from([8, 16]),
)
def test_affine_template_equals_direct_evaluation(
    n: list[int], ctx: int, program: str, llm: str, head: str, kv_bits: int
) -> None:
    from gpu.kernels import evaluate_program
    from hwmodel.specs import library

    spec = library().llm(llm)
    wb = 8 if program == "w8a8" else 16
    for p in (
        Pass.single(np.array(n), ctx, head_rows=np.array(n)),
        Pass.decode_batch(np.array(n) + ctx, True),
        Pass.decode_batch(np.array(n), False),
    ):
        fast = build_program(spec, program, p, wb, kv_bits, head)
        ref = evaluate_program(spec, program, p, wb, kv_bits, head)
        for block in ("prologue", "layer", "epilogue"):
            assert getattr(fast, block).names == getattr(ref, block).names
            np.testing.assert_allclose(getattr(fast, block).bytes, getattr(ref, block).bytes, rtol=1e-12)
            np.testing.assert_allclose(getattr(fast, block).ops, getattr(ref, block).ops, rtol=1e-12)


def test_kernel_counts_follow_the_frameworks_code_paths() -> None:
    from hwmodel.specs import library

    lib = library()
    one = Pass.single(1, 100)
    assert build_program(lib.llm("llama2-7b"), "hf", one, 16, 16).layer.n_kernels == 41  # MHA: no repeat_kv
    assert build_program(lib.llm("qwen2.5-0.5b"), "hf", one, 16, 16).layer.n_kernels == 43  # GQA: + repeat_kv
    assert build_program(lib.llm("qwen2.5-0.5b"), "vllm", one, 16, 16).layer.n_kernels == 10
    assert build_program(lib.llm("qwen2.5-0.5b"), "w8a8", one, 8, 16).layer.n_kernels == 63
