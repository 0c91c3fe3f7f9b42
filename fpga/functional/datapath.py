"""The draft model's decoder as an integer datapath in JAX (docs/w8a8.md, section 4).

:func:`forward` runs a block of token rows (a prefill chunk, an ingest chunk, or one decode token padded to a few
rows) through the embedding, every layer and the final norm; rows are independent except through the KV cache,
which each layer writes before it reads. One jitted function, :func:`layer`, serves every layer (compiled once per
block shape and attention window) and is called once per layer with that layer's own weight and cache buffers:
a ``lax.scan`` over stacked weights would make XLA copy each layer's weights out of the stack on every token.

The KV cache is a fixed buffer indexed by position (the KVMU's ``ahead`` when a token is fed); a row marked
invalid writes nothing. Attention reads the first ``window`` positions of the buffer (a static size, bucketed by
the caller) and masks the positions after each row's own.

All functions must be traced and called inside ``jax.enable_x64(True)``: the integer datapath needs int64
intermediates (see :mod:`fpga.functional.intops`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from fpga.functional import formats as fmt
from fpga.functional import gemv
from fpga.functional.intops import I64, bitlen, isqrt, matmul_i8, norm15, quant8, requant32, rshr, sat32, shift
from fpga.functional.quantize import QuantizedParams
from hwmodel.specs import LlmSpec

#: the int8 x int8 -> int32 products: the Numba kernel inside the XLA computation (:mod:`fpga.functional.gemv`) for
#: blocks of up to ``gemv.MAX_ROWS`` rows, XLA's dot for larger blocks; or XLA's dot always. The same bits.
INT8_KERNELS = ("numba", "xla")
Params = dict[str, Any]
Cache = dict[str, Any]
I32_MIN = -(2**31)


@dataclass(frozen=True)
class Dims:
    """Static shapes and constants of one draft model (hashable: a static argument of the jitted functions)."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    capacity: int
    eps_fix: int
    cqk_m: int
    cqk_e: int
    cpv_m: int
    cpv_e: int
    int8_kernel: str = "xla"

    @classmethod
    def of(cls, llm: LlmSpec, capacity: int, int8_kernel: str = "xla") -> Dims:
        cqk = fmt.qk_constant(llm.head_dim)
        return cls(
            layers=llm.layers,
            hidden=llm.hidden,
            heads=llm.heads,
            kv_heads=llm.kv_heads,
            head_dim=llm.head_dim,
            intermediate=llm.intermediate,
            vocab=llm.vocab,
            capacity=capacity,
            eps_fix=fmt.eps_fix(llm.rms_norm_eps),
            cqk_m=cqk.m,
            cqk_e=cqk.e,
            cpv_m=fmt.PV_CONSTANT.m,
            cpv_e=fmt.PV_CONSTANT.e,
            int8_kernel=int8_kernel,
        )

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim


LAYER_KEYS = (
    "ln1_g",
    "ln1_f",
    "ln2_g",
    "ln2_f",
    "qkv_q",
    "qkv_m",
    "qkv_e",
    "qkv_b",
    "o_q",
    "o_m",
    "o_e",
    "gu_q",
    "gu_m",
    "gu_e",
    "down_q",
    "down_m",
    "down_e",
)
CACHE_KV_KEYS = ("k_q", "k_m", "k_e", "v_q", "v_m", "v_e")
STASH_KEYS = ("x_q", "x_m", "x_e")


@dataclass
class DeviceParams:
    """The quantized integers and the datapath's tables as JAX arrays: one dict per layer (each layer's weights are
    their own buffers, so no layer's weights are ever sliced or copied at run time), the embedding / LM head, the
    final norm, and the tables."""

    layers: list[Params]
    top: Params


def device_params(qp: QuantizedParams, llm: LlmSpec, capacity: int) -> DeviceParams:
    """Move a :class:`QuantizedParams` to JAX (call inside ``enable_x64``)."""
    cos, sin = fmt.rope_tables(llm.head_dim, llm.rope_theta, capacity)
    arrays = dict(qp.arrays())
    layers = [{k: jnp.asarray(arrays[k][i]) for k in LAYER_KEYS} for i in range(llm.layers)]
    emb = {k: jnp.asarray(arrays[k]) for k in ("emb_q", "emb_m", "emb_e")}
    lm = (
        {k: jnp.asarray(arrays[k]) for k in ("lm_q", "lm_m", "lm_e")}
        if qp.lm_q is not qp.emb_q
        else {"lm_q": emb["emb_q"], "lm_m": emb["emb_m"], "lm_e": emb["emb_e"]}
    )
    top = {
        **emb,
        **lm,
        "norm_g": jnp.asarray(arrays["norm_g"]),
        "norm_f": jnp.asarray(arrays["norm_f"]),
        "exp2": jnp.asarray(fmt.exp2_table()),
        "sig": jnp.asarray(fmt.sigmoid_table()),
        "cos": jnp.asarray(cos),
        "sin": jnp.asarray(sin),
    }
    return DeviceParams(layers=layers, top=top)


def empty_cache(d: Dims) -> tuple[list[Cache], Cache]:
    """A zeroed KV buffer, one dict per layer: int8 K and V per (position, KV head, dim) and one scale ``(m, e)``
    per (position, KV head); and the stash of LM-head inputs ``(x, m, e)`` of every position."""
    C, G, hd = d.capacity, d.kv_heads, d.head_dim
    layers = [
        {
            "k_q": jnp.zeros((C, G, hd), jnp.int8),
            "k_m": jnp.zeros((C, G), jnp.int32),
            "k_e": jnp.zeros((C, G), jnp.int32),
            "v_q": jnp.zeros((C, G, hd), jnp.int8),
            "v_m": jnp.zeros((C, G), jnp.int32),
            "v_e": jnp.zeros((C, G), jnp.int32),
        }
        for _ in range(d.layers)
    ]
    stash = {
        "x_q": jnp.zeros((C, d.hidden), jnp.int8),
        "x_m": jnp.zeros((C,), jnp.int32),
        "x_e": jnp.zeros((C,), jnp.int32),
    }
    return layers, stash


# ------------------------------------------------------------------------------------------------ operations
def matmul(x: jax.Array, w: jax.Array, kernel: str) -> jax.Array:
    """``x @ w.T`` for int8 ``x (rows, K)``, ``w (N, K)`` with exact int32 sums, by ``kernel`` (:data:`INT8_KERNELS`)."""
    if kernel == "numba" and x.ndim == 2 and x.shape[0] <= gemv.MAX_ROWS:
        return gemv.matmul_i8_ffi(x, w)
    return matmul_i8(x, w)


def linear(
    x_q: jax.Array,
    m_x: jax.Array,
    e_x: jax.Array,
    w_q: jax.Array,
    m_w: jax.Array,
    e_w: jax.Array,
    frac_out: int,
    bias: jax.Array | None = None,
    kernel: str = "xla",
) -> tuple[jax.Array, jax.Array]:
    """int8 x int8 -> int32 accumulators (by ``kernel``, :func:`matmul`), requantized per (row, channel) into
    int32 with ``frac_out`` bits (docs/w8a8.md 4.2). Returns ``(y, acc)``."""
    acc = matmul(x_q, w_q, kernel)
    return requant_acc(acc, m_x, e_x, m_w, e_w, frac_out, bias), acc


def requant_acc(
    acc: jax.Array,
    m_x: jax.Array,
    e_x: jax.Array,
    m_w: jax.Array,
    e_w: jax.Array,
    frac_out: int,
    bias: jax.Array | None = None,
) -> jax.Array:
    """A linear layer's int32 accumulators (rows, channels) requantized per (row, channel) into int32 with
    ``frac_out`` fractional bits, plus the bias (docs/w8a8.md 4.2)."""
    mult = m_x.astype(I64)[:, None] * m_w.astype(I64)[None, :]
    y = requant32(acc.astype(I64) * mult, -(e_x.astype(I64)[:, None] + e_w.astype(I64)[None, :] + frac_out))
    if bias is not None:
        y = sat32(y + bias.astype(I64)[None, :])
    return y


def rmsnorm_quant(h: jax.Array, g_q: jax.Array, f_g: jax.Array, eps_fix: int) -> tuple[jax.Array, jax.Array, jax.Array]:
    """RMSNorm fused with the per-token quantizer (docs/w8a8.md 4.3). ``h`` (rows, n) int32 in F_R."""
    h = h.astype(I64)
    n = h.shape[-1]
    amax = jnp.max(jnp.abs(h), axis=-1)
    s_h = bitlen(amax) - 15
    h_n = shift(h, s_h[:, None])
    ms = jnp.floor_divide(jnp.sum(h_n * h_n, axis=-1), n)
    ms = ms + shift(jnp.full_like(ms, eps_fix), 40 - 2 * fmt.F_R + 2 * s_h)
    ms = jnp.maximum(ms, 1)
    p = 2 * jnp.floor_divide(32 - bitlen(ms), 2)
    m_n = shift(ms, -p)
    r = jnp.floor_divide(jnp.int64(1 << 31), isqrt(m_n))
    f_g = jnp.asarray(f_g, I64)
    u = h * g_q.astype(I64)[None, :]
    x_q, a, e_u = quant8(u, -(fmt.F_R + f_g))
    m_x, e_x = norm15(a * r, e_u + fmt.F_R - s_h + jnp.right_shift(p, 1) - 31)
    return x_q, m_x, e_x


def rope(x: jax.Array, cos: jax.Array, sin: jax.Array) -> jax.Array:
    """Half-rotation RoPE of ``x`` (rows, heads, d) int32 with per-row tables (rows, d/2) in Q1.14 (4.4)."""
    half = x.shape[-1] // 2
    x = x.astype(I64)
    x1, x2 = x[..., :half], x[..., half:]
    c = cos.astype(I64)[:, None, :]
    s = sin.astype(I64)[:, None, :]
    return jnp.concatenate([sat32(rshr(x1 * c - x2 * s, fmt.F_T)), sat32(rshr(x2 * c + x1 * s, fmt.F_T))], axis=-1)


def silu(g: jax.Array, sig_table: jax.Array) -> jax.Array:
    """SiLU of ``g`` (int32, F_M) by the interpolated sigmoid table (4.7)."""
    g = g.astype(I64)
    lim = 1 << (fmt.F_M + 4)
    gc = jnp.clip(g, -lim, lim - 1)
    sh = fmt.F_M - fmt.SIG_STEP_BITS
    j = jnp.right_shift(gc, sh) + (fmt.SIG_RANGE << fmt.SIG_STEP_BITS)
    fr = jnp.bitwise_and(gc, (1 << sh) - 1)
    t = sig_table.astype(I64)
    lo = t[j]
    sig = lo + rshr((t[j + 1] - lo) * fr, sh)
    return requant32(g * sig, 15)


def attention(
    q: jax.Array,
    pos: jax.Array,
    k_q: jax.Array,
    k_m: jax.Array,
    k_e: jax.Array,
    v_q: jax.Array,
    v_m: jax.Array,
    v_e: jax.Array,
    exp2: jax.Array,
    d: Dims,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Causal GQA attention of query rows ``q`` (B, H, hd) int32 at positions ``pos`` (B,) over the cache window
    ``k_q``/``v_q`` (W, G, hd) int8 with scales (W, G) (docs/w8a8.md 4.6). Returns ``(out (B, H*hd), internals)``."""
    B = q.shape[0]
    G, hd = d.kv_heads, d.head_dim
    R = d.heads // G
    W = k_q.shape[0]
    q_q, a_q, e_q = quant8(q, -fmt.F_A)  # (B, H, hd), (B, H)
    m_q, ex_q = norm15(a_q * d.cqk_m, e_q + d.cqk_e)
    q_q = q_q.reshape(B, G, R, hd)
    m_q = m_q.reshape(B, G, R)
    ex_q = ex_q.reshape(B, G, R)
    acc_s = jnp.einsum("bgrd,tgd->bgrt", q_q, k_q, preferred_element_type=jnp.int32)
    km = jnp.transpose(k_m.astype(I64))[None, :, None, :]  # (1, G, 1, W)
    ke = jnp.transpose(k_e.astype(I64))[None, :, None, :]
    z = requant32(acc_s.astype(I64) * (m_q[..., None] * km), -(ex_q[..., None] + ke + fmt.F_S))
    mask = (jnp.arange(W)[None, :] <= pos[:, None])[:, None, None, :]  # (B, 1, 1, W)
    zmax = jnp.max(jnp.where(mask, z, I32_MIN), axis=-1, keepdims=True)
    delta = zmax - z
    y = rshr(delta * fmt.L2E, 15)
    n = jnp.right_shift(y, fmt.EXP2_BITS)
    f = jnp.bitwise_and(y, (1 << fmt.EXP2_BITS) - 1)
    e = jnp.where(mask, rshr(exp2.astype(I64)[f], jnp.minimum(n, 31)), 0)
    S = jnp.sum(e, axis=-1)
    vm = jnp.transpose(v_m.astype(I64))[None, :, None, :]
    ve = jnp.transpose(v_e.astype(I64))[None, :, None, :]
    wm, we = norm15(e * vm, ve + jnp.zeros_like(e))
    pos_w = wm > 0
    e_ref = jnp.max(jnp.where(pos_w, we, jnp.int64(-(2**40))), axis=-1)
    e_ref = jnp.where(jnp.any(pos_w, axis=-1), e_ref, 0)
    w = jnp.where(pos_w, rshr(wm, jnp.minimum(e_ref[..., None] - we, 62)), 0)
    w_q, a_w, e_w = quant8(w, 0)
    acc_o = jnp.einsum("bgrt,tgd->bgrd", w_q, v_q, preferred_element_type=jnp.int32)
    s_m, s_e = norm15(S, jnp.zeros_like(S))
    r_s = jnp.floor_divide(jnp.int64(1 << 30), jnp.maximum(s_m, 1))
    m1, e1 = norm15(a_w * r_s, e_w - 30 - s_e)
    m2, e2 = norm15(m1 * d.cpv_m, e1 + d.cpv_e)
    out = requant32(acc_o.astype(I64) * m2[..., None], -(e2 + e_ref + fmt.F_A)[..., None])
    internals = {
        "acc_s": acc_s.reshape(B, d.heads, W),
        "acc_pv": acc_o.reshape(B, d.heads, hd),
        "q_q": q_q.reshape(B, d.heads, hd),
        "w_q": w_q.reshape(B, d.heads, W),
    }
    return out.reshape(B, d.heads * hd), internals


def _embed(top: Params, tokens: jax.Array) -> jax.Array:
    """Embedding rows dequantized into the residual format (4.1)."""
    e_q = top["emb_q"][tokens].astype(I64)
    m = top["emb_m"][tokens].astype(I64)
    e = top["emb_e"][tokens].astype(I64)
    return requant32(e_q * (127 * m)[:, None], -(e + fmt.F_R)[:, None]).astype(jnp.int32)


embed = jax.jit(_embed)


def _layer(
    lp: Params,
    kv: Cache,
    top: Params,
    h: jax.Array,
    pos: jax.Array,
    valid: jax.Array,
    d: Dims,
    window: int,
    collect: bool,
) -> tuple[jax.Array, Cache, dict[str, jax.Array]]:
    """One decoder layer over a block of rows (docs/w8a8.md 4.8): writes every valid row's K and V at its
    position, then attends over the first ``window`` positions. Returns the new residual, the layer's cache (the
    input cache is donated) and, with ``collect``, the layer's internals."""
    B = h.shape[0]
    H, G, hd = d.heads, d.kv_heads, d.head_dim
    q_dim, kv_dim, inter = d.q_dim, d.kv_dim, d.intermediate
    k8 = d.int8_kernel
    write_pos = jnp.where(valid, pos, d.capacity)  # padding rows write out of bounds: dropped
    safe_pos = jnp.clip(pos, 0, d.capacity - 1)
    cos = top["cos"][safe_pos]
    sin = top["sin"][safe_pos]
    x, m_x, e_x = rmsnorm_quant(h, lp["ln1_g"], lp["ln1_f"], d.eps_fix)
    qkv, acc_qkv = linear(x, m_x, e_x, lp["qkv_q"], lp["qkv_m"], lp["qkv_e"], fmt.F_A, lp["qkv_b"], k8)
    q = rope(qkv[:, :q_dim].reshape(B, H, hd), cos, sin)
    k = rope(qkv[:, q_dim : q_dim + kv_dim].reshape(B, G, hd), cos, sin)
    v = qkv[:, q_dim + kv_dim :].reshape(B, G, hd)
    k_q, k_m, k_e = quant8(k, -fmt.F_A)
    v_q, v_m, v_e = quant8(v, -fmt.F_A)
    new = {"k_q": k_q, "k_m": k_m, "k_e": k_e, "v_q": v_q, "v_m": v_m, "v_e": v_e}
    kv = {name: kv[name].at[write_pos].set(new[name].astype(kv[name].dtype), mode="drop") for name in CACHE_KV_KEYS}
    o, att = attention(q, pos, *(kv[name][:window] for name in CACHE_KV_KEYS), top["exp2"], d)
    xo, m_o, e_o = quant8(o, -fmt.F_A)
    y, acc_o = linear(xo, m_o, e_o, lp["o_q"], lp["o_m"], lp["o_e"], fmt.F_R, kernel=k8)
    h = sat32(h.astype(I64) + y)
    x2, m_2, e_2 = rmsnorm_quant(h, lp["ln2_g"], lp["ln2_f"], d.eps_fix)
    gu, acc_gu = linear(x2, m_2, e_2, lp["gu_q"], lp["gu_m"], lp["gu_e"], fmt.F_M, kernel=k8)
    t = silu(gu[:, :inter], top["sig"]) * gu[:, inter:]
    xd, m_d, e_d = quant8(t, -2 * fmt.F_M)
    y, acc_down = linear(xd, m_d, e_d, lp["down_q"], lp["down_m"], lp["down_e"], fmt.F_R, kernel=k8)
    h = sat32(h + y).astype(jnp.int32)
    out: dict[str, jax.Array] = {}
    if collect:
        out = {
            "x": x,
            "x_m": m_x,
            "x_e": e_x,
            "acc_qkv": acc_qkv,
            "qkv": qkv,
            "k_q": k_q,
            "v_q": v_q,
            "k_m": k_m,
            "k_e": k_e,
            "v_m": v_m,
            "v_e": v_e,
            "attn_out": o,
            "xo": xo,
            "acc_o": acc_o,
            "x2": x2,
            "acc_gu": acc_gu,
            "xd": xd,
            "acc_down": acc_down,
            "h": h,
            **att,
        }
    return h, kv, out


layer = jax.jit(_layer, static_argnames=("d", "window", "collect"), donate_argnames=("kv",))


def _final(
    top: Params, stash: Cache, h: jax.Array, pos: jax.Array, valid: jax.Array, d: Dims
) -> tuple[Cache, tuple[jax.Array, jax.Array, jax.Array]]:
    """The final RMSNorm + quantizer; each valid row's LM-head input is stored at its position."""
    xf, m_f, e_f = rmsnorm_quant(h, top["norm_g"], top["norm_f"], d.eps_fix)
    write_pos = jnp.where(valid, pos, d.capacity)
    new = {"x_q": xf, "x_m": m_f.astype(jnp.int32), "x_e": e_f.astype(jnp.int32)}
    stash = {k: stash[k].at[write_pos].set(new[k], mode="drop") for k in STASH_KEYS}
    return stash, (xf, m_f, e_f)


final = jax.jit(_final, static_argnames=("d",), donate_argnames=("stash",))


def forward(
    params: DeviceParams,
    kv: list[Cache],
    stash: Cache,
    tokens: Any,
    pos: Any,
    valid: Any,
    d: Dims,
    window: int,
    collect: bool = False,
    h0: jax.Array | None = None,
) -> tuple[list[Cache], Cache, dict[str, Any]]:
    """Feed token rows ``tokens`` at positions ``pos`` (rows with ``valid`` False are padding and write nothing)
    through every layer; returns the new per-layer caches, the new stash and, with ``collect``, every layer's
    internals (stacked on a leading layer axis) plus the LM-head inputs. The input caches are donated. ``h0``, if
    given, is the already embedded block (see :func:`head_and_embed`)."""
    pos = jnp.asarray(pos)
    valid = jnp.asarray(valid)
    h = embed(params.top, tokens) if h0 is None else h0
    new_kv = []
    internals = []
    for lp, c in zip(params.layers, kv):
        h, c, out = layer(lp, c, params.top, h, pos, valid, d=d, window=window, collect=collect)
        new_kv.append(c)
        internals.append(out)
    stash, (xf, m_f, e_f) = final(params.top, stash, h, pos, valid, d=d)
    per_layer: dict[str, Any] = {}
    if collect:
        per_layer = {k: jnp.stack([o[k] for o in internals]) for k in internals[0]}
        per_layer.update(xf=xf, xf_m=m_f, xf_e=e_f, h0=embed(params.top, tokens))
    return new_kv, stash, per_layer


def _lm_head(
    top: Params, x_q: jax.Array, x_m: jax.Array, x_e: jax.Array, kernel: str = "xla"
) -> tuple[jax.Array, jax.Array]:
    logits, acc = linear(x_q, x_m, x_e, top["lm_q"], top["lm_m"], top["lm_e"], fmt.F_L, kernel=kernel)
    return logits, acc


lm_head = jax.jit(_lm_head, static_argnames=("kernel",))
"""Integer logits (rows, vocab) in F_L and their int32 accumulators from LM-head inputs."""


def greedy(logits: jax.Array) -> jax.Array:
    """argmax over the last axis, the lowest index winning ties (``jnp.argmax`` returns the first maximum)."""
    return jnp.argmax(logits, axis=-1).astype(jnp.int32)


def _greedy_at(top: Params, stash: Cache, prev: jax.Array, rows: int, kernel: str) -> jax.Array:
    """The greedy token predicted at position ``prev`` from its stored LM-head input. The single row is repeated to
    ``rows`` rows (XLA's int8 dot is several times faster for a few rows than for one vector)."""
    idx = jnp.full((rows,), prev)
    logits, _ = _lm_head(top, *(stash[k][idx] for k in STASH_KEYS), kernel=kernel)
    return greedy(logits[0])


greedy_at = jax.jit(_greedy_at, static_argnames=("rows", "kernel"))


def _head_and_embed(top: Params, stash: Cache, prev: jax.Array, rows: int, kernel: str) -> tuple[jax.Array, jax.Array]:
    """One decode's first stage: the greedy token at ``prev`` and its embedding as row 0 of a ``rows``-row block
    (the other rows are padding)."""
    tok = _greedy_at(top, stash, prev, rows, kernel)
    return tok, _embed(top, jnp.zeros((rows,), jnp.int32).at[0].set(tok))


head_and_embed = jax.jit(_head_and_embed, static_argnames=("rows", "kernel"))


def window_for(end: int, capacity: int, minimum: int = 64) -> int:
    """The attention window (a static size) for rows whose last position is ``end - 1``: the smallest power of
    two times ``minimum`` that covers ``end``, capped at the buffer capacity (one compilation per window size;
    ``minimum >= capacity`` gives a single window, the whole buffer)."""
    w = minimum
    while w < end:
        w *= 2
    return min(w, capacity)


def as_numpy(tree: dict[str, jax.Array]) -> dict[str, np.ndarray]:
    return {k: np.asarray(v) for k, v in tree.items()}
