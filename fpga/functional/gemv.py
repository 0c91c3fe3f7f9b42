"""The int8 x int8 -> int32 matrix-vector product of the LM head on the host (Numba), docs/w8a8.md 4.2.

A decode's greedy token needs one row of LM-head accumulators: ``vocab x hidden`` int8 weights (136 MB for
Qwen2.5-0.5B, a quarter of the model's bytes) against one int8 vector. XLA's CPU int8 dot (two rows, as the
datapath pads them) spent 14.5 ms of CPU on it, this single-threaded loop 8.7 ms (its parallel variant 7.9 ms,
but with its own thread pool beside XLA's it lost wall time on a loaded machine); medians of 20 on the shared
2-core VM. Each output is an exact int32 sum of int8 x int8 products, the same bits as XLA's.

:func:`gemv_i8_reference` is the plain reference (numpy, int64 products, no Numba) the equivalence test compares
against; ``tests/test_functional_gemv.py`` also checks the int32 range for the largest inner dimension.
"""

from __future__ import annotations

import numba
import numpy as np

import fpga  # noqa: F401  (sets the project's Numba cache directory before the first compilation)


@numba.njit(cache=True, nogil=True)
def _gemv_i8(w: np.ndarray, x: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover - compiled
    n_out, k_in = w.shape
    for n in range(n_out):
        acc = np.int32(0)
        for k in range(k_in):
            acc += np.int32(w[n, k]) * np.int32(x[k])
        out[n] = acc


def gemv_i8(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``w @ x`` for C-contiguous int8 ``w`` (N, K) and int8 ``x`` (K,) with int32 accumulation (exact while
    ``K * 127 * 128 < 2**31``, i.e. K up to 132,104)."""
    if w.dtype != np.int8 or x.dtype != np.int8 or w.ndim != 2 or x.shape != (w.shape[1],):
        raise ValueError(f"gemv_i8 needs int8 (N, K) and (K,), got {w.dtype}{w.shape} and {x.dtype}{x.shape}")
    out = np.empty(w.shape[0], np.int32)
    _gemv_i8(np.ascontiguousarray(w), np.ascontiguousarray(x), out)
    return out


def gemv_i8_reference(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The same product in plain numpy (int64 products and sums, then checked to fit int32)."""
    acc = w.astype(np.int64) @ x.astype(np.int64)
    assert np.all((acc >= -(2**31)) & (acc < 2**31)), "accumulator overflows int32"
    return acc.astype(np.int32)
