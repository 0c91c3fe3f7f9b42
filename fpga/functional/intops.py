"""Integer primitives of the W8A8 datapath in JAX (docs/w8a8.md, section 1).

Every function here takes and returns integer arrays and is traced inside ``jax.enable_x64(True)`` (the callers in
:mod:`fpga.functional.datapath` and :mod:`fpga.functional.model` enter that context): intermediates are int64, so
the 64-bit products of requantization are exact. No float appears anywhere in this module, so XLA's fusion,
reassociation and FMA contraction cannot change a single bit.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

I64 = jnp.int64
I32_MIN = -(2**31)
I32_MAX = 2**31 - 1


def bitlen(x: jax.Array) -> jax.Array:
    """Number of bits of a non-negative int64 (0 for 0)."""
    x = x.astype(I64)
    return (64 - jax.lax.clz(x)).astype(I64)


def rshr(x: jax.Array, s: jax.Array | int) -> jax.Array:
    """Round-half-up arithmetic right shift by ``s >= 0`` (``rshr(x, 0) == x``)."""
    x = x.astype(I64)
    s = jnp.asarray(s, I64)
    return jnp.right_shift(x + jnp.right_shift(jnp.left_shift(jnp.int64(1), s), 1), s)


def shift(x: jax.Array, s: jax.Array | int) -> jax.Array:
    """``rshr(x, s)`` for ``s >= 0``, the exact left shift ``x * 2**-s`` for ``s < 0``."""
    x = x.astype(I64)
    s = jnp.asarray(s, I64)
    return jnp.where(s >= 0, rshr(x, jnp.maximum(s, 0)), jnp.left_shift(x, jnp.maximum(-s, 0)))


def sat32(x: jax.Array) -> jax.Array:
    return jnp.clip(x, I32_MIN, I32_MAX)


def requant32(x: jax.Array, s: jax.Array | int) -> jax.Array:
    """``sat32(round_half_up(x * 2**-s))`` for any integer shift ``s`` (negative = left shift, saturating)."""
    x = x.astype(I64)
    s = jnp.asarray(s, I64)
    right = sat32(rshr(x, jnp.clip(s, 0, 62)))
    left = sat32(sat32(x) * jnp.left_shift(jnp.int64(1), jnp.clip(-s, 0, 31)))
    return jnp.where(s >= 1, right, left)


def norm15(m: jax.Array, e: jax.Array) -> tuple[jax.Array, jax.Array]:
    """A scale ``m * 2**e`` (``m >= 0``) with its mantissa brought to at most 15 bits; ``(0, 0)`` for ``m == 0``."""
    m = m.astype(I64)
    e = jnp.asarray(e, I64)
    s = jnp.maximum(bitlen(m) - 15, 0)
    zero = m == 0
    return jnp.where(zero, 0, rshr(m, s)), jnp.where(zero, 0, e + s)


def quant8(v: jax.Array, exp_lsb: jax.Array | int) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Per-vector int8 quantization over the last axis (docs/w8a8.md 1.1).

    Returns ``(x_q int8, a, e)`` with ``a, e`` of shape ``v.shape[:-1]``: ``x_q * a * 2**e / 127`` approximates
    ``v * 2**exp_lsb``.
    """
    v = v.astype(I64)
    amax = jnp.max(jnp.abs(v), axis=-1)
    s = jnp.maximum(bitlen(amax) - 15, 0)
    v_n = rshr(v, s[..., None])
    a = jnp.max(jnp.abs(v_n), axis=-1)
    zero = a == 0
    r = jnp.floor_divide(jnp.int64(127 << 24), jnp.where(zero, 1, a))
    x_q = jnp.clip(rshr(v_n * r[..., None], 24), -127, 127).astype(jnp.int8)
    e = s + jnp.asarray(exp_lsb, I64)
    return x_q, jnp.where(zero, 0, a), jnp.where(zero, 0, e)


def isqrt(m: jax.Array) -> jax.Array:
    """Exact ``floor(sqrt(m))`` for ``0 <= m <= 2**32`` by integer Newton iterations from ``2**16``.

    From an upper bound the iteration ``x <- (x + m // x) // 2`` decreases monotonically to ``floor(sqrt(m))``;
    taking the minimum with the previous iterate holds it there. Eight steps suffice for ``m >= 2**30`` (the
    normalized range the RMSNorm feeds it); 20 cover every ``m`` down to 1.
    """
    m = m.astype(I64)
    x = jnp.full_like(m, 1 << 16)
    for _ in range(20):
        x = jnp.minimum(x, jnp.right_shift(x + jnp.floor_divide(m, jnp.maximum(x, 1)), 1))
    return x


def matmul_i8(x: jax.Array, w: jax.Array) -> jax.Array:
    """``x @ w.T`` for int8 ``x`` (..., K) and int8 ``w`` (N, K) with int32 accumulation (exact)."""
    return jax.lax.dot_general(x, w, (((x.ndim - 1,), (1,)), ((), ())), preferred_element_type=jnp.int32)
