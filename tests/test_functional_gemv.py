"""The Numba int8 kernel of a decode's products (fpga/functional/gemv.py) against plain numpy, called from numpy
and from inside a jitted XLA computation (its FFI handler); the FFI header check; and the draft model with the
Numba kernel against XLA's dot: the same int32 accumulators, the same tokens, the same KV cache."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fpga.functional import DraftModel, gemv, quantize_model
from fpga.functional.model import DraftModelError
from fpga.functional.weights import SyntheticWeights
from hwmodel.specs import library

needs_ffi = pytest.mark.skipif(not gemv.available(), reason="the Numba kernel needs JAX's CPU backend")
_ffi_matmul = jax.jit(gemv.matmul_i8_ffi)


def _operands(rows: int, n: int, k: int, seed: int, extreme: bool) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    if extreme:  # every product at its largest magnitude: the int32 sum must still be exact
        return rng.choice(np.array([-128, 127], np.int8), (rows, k)), np.full((n, k), -128, np.int8)
    return rng.integers(-128, 128, (rows, k), dtype=np.int8), rng.integers(-128, 128, (n, k), dtype=np.int8)


@settings(max_examples=30, deadline=None)
@given(
    rows=st.integers(1, 3), n=st.integers(1, 300), k=st.integers(1, 200), seed=st.integers(0, 2**16), ext=st.booleans()
)
def test_kernel_equals_the_numpy_product(rows: int, n: int, k: int, seed: int, ext: bool) -> None:
    x, w = _operands(rows, n, k, seed, ext)
    assert np.array_equal(gemv.matmul_i8_host(x, w), gemv.matmul_i8_reference(x, w))


HERE = ["loop", *(["avx2"] if gemv.KERNEL == "avx2" else [])]


@pytest.mark.parametrize("kernel", HERE)
@settings(max_examples=20, deadline=None)
@given(
    rows=st.integers(1, 2),
    n=st.integers(1, 300),
    k=st.sampled_from([1, 15, 16, 63, 64, 65, 127, 128, 200, 896]),
    seed=st.integers(0, 2**16),
    ext=st.booleans(),
)
def test_each_kernel_equals_the_numpy_product_across_vector_tails(
    kernel: str, rows: int, n: int, k: int, seed: int, ext: bool
) -> None:
    """Both kernels (the AVX2 one where the CPU has it), over inner sizes around the 64-element vector step."""
    x, w = _operands(rows, n, k, seed, ext)
    out = np.full((rows, n), 7, np.int32)
    gemv.KERNELS[kernel](x, w, out)
    assert np.array_equal(out, gemv.matmul_i8_reference(x, w))


@needs_ffi
@settings(max_examples=12, deadline=None)
@given(
    rows=st.integers(1, 2), n=st.integers(1, 120), k=st.integers(1, 90), seed=st.integers(0, 2**16), ext=st.booleans()
)
def test_kernel_inside_xla_equals_the_numpy_product(rows: int, n: int, k: int, seed: int, ext: bool) -> None:
    x, w = _operands(rows, n, k, seed, ext)
    got = np.asarray(_ffi_matmul(jnp.asarray(x), jnp.asarray(w)))
    assert got.dtype == np.int32 and np.array_equal(got, gemv.matmul_i8_reference(x, w))


@needs_ffi
@pytest.mark.parametrize("rows", [1, 2])
def test_kernel_split_over_xlas_thread_pool_equals_the_numpy_product(rows: int) -> None:
    """Products of at least 2 x MIN_PART_CHANNELS channels are split over XLA's pool (completing through a future);
    every part's columns, and the ragged last part, are the reference's."""
    n = 4 * gemv.MIN_PART_CHANNELS + 37
    x, w = _operands(rows, n, 896, 11, False)
    out, scratch = jax.jit(gemv.matmul_i8_ffi_scratch)(jnp.asarray(x), jnp.asarray(w))
    assert np.array_equal(np.asarray(out), gemv.matmul_i8_reference(x, w))
    parts = int(np.asarray(scratch)[gemv._S_PARTS])
    one_thread = "intra_op_parallelism_threads=1" in os.environ.get("XLA_FLAGS", "")
    assert 1 <= parts <= 4 and (parts >= 2 or one_thread or (os.cpu_count() or 1) < 2)


@needs_ffi
def test_kernel_at_the_largest_inner_dimension_fused_with_other_ops_and_bad_operands() -> None:
    k = 4864  # Qwen2.5-0.5B's intermediate size, the widest inner dimension of the model
    x = np.full((2, k), -128, np.int8)
    w = np.full((3, k), -128, np.int8)
    assert gemv.matmul_i8_host(x, w).tolist() == [[k * 128 * 128] * 3] * 2

    @jax.jit
    def f(x: jax.Array, w: jax.Array) -> jax.Array:  # operands computed in the graph, result consumed by it
        return gemv.matmul_i8_ffi((x[:, ::-1] // 2).astype(jnp.int8), w.T[1:].astype(jnp.int8)) + 1

    xs = np.random.default_rng(3).integers(-128, 128, (1, 77), dtype=np.int8)
    ws = np.random.default_rng(4).integers(-128, 128, (77, 41), dtype=np.int8)
    want = gemv.matmul_i8_reference((xs[:, ::-1] // 2).astype(np.int8), ws.T[1:]) + 1
    assert np.array_equal(np.asarray(f(jnp.asarray(xs), jnp.asarray(ws))), want)
    with pytest.raises(ValueError, match="int8"):
        gemv.matmul_i8_ffi(jnp.asarray(x, jnp.int16), jnp.asarray(w))
    with pytest.raises(ValueError, match=r"\(R, K\) and \(N, K\)"):
        gemv.matmul_i8_ffi(jnp.asarray(x[:, :-1]), jnp.asarray(w))


def test_the_ffi_header_check() -> None:
    text = (Path(jax.ffi.include_dir()) / "xla" / "ffi" / "api" / "c_api.h").read_text()
    assert gemv.header_matches(text) == gemv.available()  # the CPU backend: both hold
    assert not gemv.header_matches(text.replace("#define XLA_FFI_API_MINOR", "#define XLA_FFI_API_MINOR 9"))
    assert not gemv.header_matches(text.replace("  int64_t rank;\n", "  int64_t rank;\n  int64_t pad;\n"))
    assert not gemv.header_matches("")


LLM = dataclasses.replace(
    library().llm("qwen2.5-0.5b"),
    name="gemv-test",
    layers=2,
    hidden=64,
    heads=4,
    kv_heads=2,
    head_dim=16,
    intermediate=128,
    vocab=700,
)


@needs_ffi
def test_decode_with_the_numba_kernel_is_bit_identical_to_xla() -> None:
    params = quantize_model(LLM, SyntheticWeights(LLM, 4))
    a, b = (
        DraftModel(LLM, params, capacity=64, prefill_chunk=8, min_window=64, int8_kernel=k) for k in ("numba", "xla")
    )
    assert (a.decode_rows, b.decode_rows) == (1, 2)
    prompt = np.random.default_rng(1).integers(0, LLM.vocab, 11).tolist()
    for m in (a, b):
        m.prefill(prompt)
    assert a.next_token() == b.next_token()
    assert [a.decode() for _ in range(12)] == [b.decode() for _ in range(12)]
    sa, sb = a.kv_state(), b.kv_state()
    assert all(np.array_equal(sa[k], sb[k]) for k in sa)
    assert np.array_equal(a.logits([3, 9]), b.logits([3, 9]))  # the LM head's 2-row block: the kernel vs XLA
    b.int8_kernel = "numba"  # switched on a live model (b keeps its 2 decode rows: the kernel with two rows)
    assert a.next_token() == b.next_token()
    with pytest.raises(DraftModelError, match="int8_kernel"):
        DraftModel(LLM, params, capacity=64, int8_kernel="eigen")
    with pytest.raises(DraftModelError, match="int8_kernel"):
        a.int8_kernel = "eigen"
