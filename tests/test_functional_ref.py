"""An independent numpy implementation of docs/w8a8.md (the W8A8 datapath spec), and tests of its nonlinear
functions against float64 (the error bounds of section 5).

Written from the spec text, not from the JAX code: it processes one token at a time (the JAX model runs blocks of
rows), loops over heads, computes bit lengths by comparison, square roots with ``math.isqrt``, shifts as floor
divisions, and int8 matmuls with numpy's integer einsum. Other test modules import :class:`RefModel` and the
primitives from here.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

I64 = np.int64
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
F_R = F_A = F_M = F_S = F_L = 12


# ============================================================================================ section 1: primitives
def bitlen(x: np.ndarray) -> np.ndarray:
    """Number of bits of non-negative ints: count the powers of two not above x."""
    x = np.asarray(x, I64)
    powers = np.left_shift(I64(1), np.arange(63, dtype=I64))
    return np.sum(x[..., None] >= powers, axis=-1).astype(I64)


def rshr(x: np.ndarray, s: np.ndarray | int) -> np.ndarray:
    """floor((x + 2**(s-1)) / 2**s), with rshr(x, 0) = x."""
    x = np.asarray(x, I64)
    s = np.asarray(s, I64)
    p = np.power(I64(2), s)
    half = np.where(s > 0, p // 2, 0)
    return np.floor_divide(x + half, p)


def shift(x: np.ndarray, s: int) -> np.ndarray:
    """rshr for s >= 0, exact multiplication by 2**-s for s < 0."""
    return rshr(x, s) if s >= 0 else np.asarray(x, I64) * I64(2 ** (-s))


def sat(x: np.ndarray, lo: int, hi: int) -> np.ndarray:
    return np.minimum(np.maximum(np.asarray(x, I64), lo), hi)


def sat32(x: np.ndarray) -> np.ndarray:
    return sat(x, INT32_MIN, INT32_MAX)


def requant32(x: np.ndarray, s: np.ndarray | int) -> np.ndarray:
    x = np.asarray(x, I64)
    s = np.broadcast_to(np.asarray(s, I64), x.shape)
    out = np.empty(x.shape, I64)
    r = s >= 1
    out[r] = sat32(rshr(x[r], np.minimum(s[r], 62)))
    left = ~r
    out[left] = sat32(sat32(x[left]) * np.power(I64(2), np.minimum(-s[left], 31)))
    return out


def norm15(m: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    m = np.asarray(m, I64)
    e = np.broadcast_to(np.asarray(e, I64), m.shape)
    s = np.maximum(bitlen(m) - 15, 0)
    return np.where(m == 0, 0, rshr(m, s)), np.where(m == 0, 0, e + s)


def quant8(v: np.ndarray, E: int | np.ndarray) -> tuple[np.ndarray, int, int]:
    """One vector -> (x_q int8, a, e) per docs/w8a8.md 1.1."""
    v = np.asarray(v, I64)
    A = int(np.max(np.abs(v)))
    if A == 0:
        return np.zeros(v.shape, np.int8), 0, 0
    s = max(0, int(bitlen(np.array(A))) - 15)
    v_n = rshr(v, s)
    a = int(np.max(np.abs(v_n)))
    r = (127 << 24) // a
    x_q = sat(rshr(v_n * r, 24), -127, 127).astype(np.int8)
    return x_q, a, s + int(E)


def isqrt_exact(m: int) -> int:
    return math.isqrt(int(m))


def imatmul(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Exact int8 x int8 -> int accumulators: x (K,) or (B, K), w (N, K). numpy's einsum sums the products in
    int32, which cannot overflow: |acc| <= K * 127 * 127 < 2**31 for K < 133152."""
    assert w.shape[1] * 127 * 127 < 2**31
    x = np.asarray(x).astype(np.int32)
    if x.ndim == 1:
        return np.einsum("nk,k->n", w, x).astype(I64)
    return np.stack([np.einsum("nk,k->n", w, row) for row in x]).astype(I64)


# ============================================================================================ section 2: load time
def frexp15(value: float) -> tuple[int, int]:
    if value == 0.0:
        return 0, 0
    f, E = math.frexp(value)
    return int(np.rint(f * 32768.0)), E - 15


def ref_quantize_linear(w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Section 2, "Linear weights", in blocks of rows."""
    rows = w.shape[0]
    w_q = np.zeros(w.shape, np.int8)
    m = np.zeros(rows, I64)
    e = np.zeros(rows, I64)
    step = 256
    for c0 in range(0, rows, step):
        blk = np.asarray(w[c0 : c0 + step]).astype(np.float64)
        wamax = np.abs(blk).max(axis=1)
        live = wamax > 0
        s_w = wamax[live] / 127.0
        w_q[c0 : c0 + step][live] = np.clip(np.rint(blk[live] / s_w[:, None]), -127, 127)
        f, E = np.frexp(wamax[live] / 16129.0)
        m[c0 : c0 + step][live] = np.rint(f * 32768.0)
        e[c0 : c0 + step][live] = E - 15
    return w_q, m, e


def ref_quantize_gamma(g: np.ndarray) -> tuple[np.ndarray, int]:
    g = np.asarray(g).astype(np.float64)
    G = float(np.abs(g).max())
    F_g = 14 if G == 0.0 else 14 - math.frexp(G)[1]
    return np.rint(g * 2.0**F_g).astype(I64), F_g


def ref_names(i: int) -> dict[str, str]:
    p = f"model.layers.{i}."
    a, m = p + "self_attn.", p + "mlp."
    return {
        "ln1": p + "input_layernorm.weight",
        "ln2": p + "post_attention_layernorm.weight",
        "q": a + "q_proj.",
        "k": a + "k_proj.",
        "v": a + "v_proj.",
        "o": a + "o_proj.weight",
        "gate": m + "gate_proj.weight",
        "up": m + "up_proj.weight",
        "down": m + "down_proj.weight",
    }


def ref_quantize(llm, source: Callable[[str], np.ndarray]) -> dict:
    """All integers of the model (per docs/w8a8.md section 2), as a dict of per-layer lists."""
    P: dict = {"layers": []}
    for i in range(llm.layers):
        n = ref_names(i)
        lay = {}
        parts = [ref_quantize_linear(source(n[k] + "weight")) for k in ("q", "k", "v")]
        lay["qkv"] = tuple(np.concatenate([p[j] for p in parts]) for j in range(3))
        if llm.qkv_bias:
            b = np.concatenate([np.asarray(source(n[k] + "bias")).astype(np.float64) for k in ("q", "k", "v")])
            lay["qkv_b"] = sat32(np.rint(b * 4096.0).astype(I64))
        else:
            lay["qkv_b"] = np.zeros(llm.q_dim + 2 * llm.kv_dim, I64)
        lay["o"] = ref_quantize_linear(source(n["o"]))
        g = ref_quantize_linear(source(n["gate"]))
        u = ref_quantize_linear(source(n["up"]))
        lay["gate"], lay["up"] = g, u
        lay["down"] = ref_quantize_linear(source(n["down"]))
        lay["ln1"] = ref_quantize_gamma(source(n["ln1"]))
        lay["ln2"] = ref_quantize_gamma(source(n["ln2"]))
        P["layers"].append(lay)
    P["norm"] = ref_quantize_gamma(source("model.norm.weight"))
    P["emb"] = ref_quantize_linear(source("model.embed_tokens.weight"))
    P["lm"] = P["emb"] if llm.tied_embeddings else ref_quantize_linear(source("lm_head.weight"))
    return P


def ref_tables(llm, positions: int) -> dict:
    f = np.arange(4096, dtype=np.float64)
    exp2 = np.rint(32768.0 * np.exp2(-f / 4096.0)).astype(I64)
    j = np.arange(2049, dtype=np.float64)
    sig = np.rint(32768.0 / (1.0 + np.exp(16.0 - j / 64.0))).astype(I64)
    i = np.arange(llm.head_dim // 2, dtype=np.float64)
    inv_freq = np.float64(llm.rope_theta) ** (-(2.0 * i) / llm.head_dim)
    angle = np.arange(positions, dtype=np.float64)[:, None] * inv_freq[None, :]
    return {
        "exp2": exp2,
        "sig": sig,
        "cos": np.rint(np.cos(angle) * 16384.0).astype(I64),
        "sin": np.rint(np.sin(angle) * 16384.0).astype(I64),
        "cqk": frexp15(1.0 / (16129.0 * math.sqrt(llm.head_dim))),
        "cpv": frexp15(1.0 / 16129.0),
        "eps_fix": int(np.rint(np.float64(llm.rms_norm_eps) * 2.0**40)),
        "l2e": int(np.rint(math.log2(math.e) * 32768.0)),
    }


# ============================================================================================ section 4: operations
def ref_linear(x_q, m_x, e_x, W, F_o, bias=None):
    w_q, m_w, e_w = W
    acc = imatmul(x_q, w_q)
    y = requant32(acc * (I64(m_x) * m_w), -(e_x + e_w + F_o))
    if bias is not None:
        y = sat32(y + bias)
    return y, acc


def ref_rmsnorm_quant(h, gamma, eps_fix):
    g_q, F_g = gamma
    h = np.asarray(h, I64)
    n = h.shape[0]
    s_h = int(bitlen(np.array(np.abs(h).max()))) - 15
    h_n = shift(h, s_h)
    ms = int(np.sum(h_n * h_n)) // n + int(shift(np.array(eps_fix), 40 - 2 * F_R + 2 * s_h))
    ms = max(ms, 1)
    b = int(ms).bit_length()
    p = 2 * ((32 - b) // 2)
    m_n = int(shift(np.array(ms), -p))
    r = 2**31 // isqrt_exact(m_n)
    u = h * g_q
    x_q, a, e_u = quant8(u, -(F_R + F_g))
    m_x, e_x = norm15(np.array(a * r), np.array(e_u + F_R - s_h + p // 2 - 31))
    return x_q, int(m_x), int(e_x)


def ref_rope(x, cos_p, sin_p):
    x = np.asarray(x, I64)
    half = x.shape[-1] // 2
    x1, x2 = x[:half], x[half:]
    return np.concatenate([sat32(rshr(x1 * cos_p - x2 * sin_p, 14)), sat32(rshr(x2 * cos_p + x1 * sin_p, 14))])


def ref_silu(g, sig):
    g = np.asarray(g, I64)
    g_c = sat(g, -(2**16), 2**16 - 1)
    j = np.floor_divide(g_c, 64) + 1024
    fr = g_c - np.floor_divide(g_c, 64) * 64
    s = sig[j] + rshr((sig[j + 1] - sig[j]) * fr, 6)
    return requant32(g * s, 15)


def ref_attention_head(q_h, p, kq, km, ke, vq, vm, ve, T):
    """One query head at position p over cache entries 0..p of its KV head (arrays indexed by position)."""
    q_q, a_q, e_q = quant8(q_h, -F_A)
    M_q, E_q = (int(v) for v in norm15(np.array(a_q * T["cqk"][0]), np.array(e_q + T["cqk"][1])))
    n_t = p + 1
    acc_s = imatmul(q_q, kq[:n_t])
    z = requant32(acc_s * (M_q * km[:n_t]), -(E_q + ke[:n_t] + F_S))
    delta = z.max() - z
    y = rshr(delta * T["l2e"], 15)
    n = np.floor_divide(y, 4096)
    f = y - n * 4096
    e = rshr(T["exp2"][f], np.minimum(n, 31))
    S = int(e.sum())
    wm, we = norm15(e * vm[:n_t], ve[:n_t])
    if np.any(wm > 0):
        E_ref = int(we[wm > 0].max())
    else:
        E_ref = 0
    w = np.where(wm > 0, rshr(wm, np.clip(E_ref - we, 0, 62)), 0)  # the clip only touches wm == 0
    w_q, a_w, e_w = quant8(w, 0)
    acc_o = imatmul(w_q.astype(np.int8), np.ascontiguousarray(vq[:n_t].T))
    S_m, S_e = (int(v) for v in norm15(np.array(S), np.array(0)))
    r_S = 2**30 // S_m
    M1, E1 = (int(v) for v in norm15(np.array(a_w * r_S), np.array(e_w - 30 - S_e)))
    M2, E2 = (int(v) for v in norm15(np.array(M1 * T["cpv"][0]), np.array(E1 + T["cpv"][1])))
    out = requant32(acc_o * M2, -(E2 + E_ref + F_A))
    return out, {"acc_s": acc_s, "acc_pv": acc_o, "q_q": q_q, "w_q": w_q}


class RefModel:
    """The draft model per docs/w8a8.md, one token at a time, with a KV buffer indexed by position."""

    def __init__(self, llm, source: Callable[[str], np.ndarray], capacity: int) -> None:
        self.llm = llm
        self.P = ref_quantize(llm, source)
        self.T = ref_tables(llm, capacity)
        L, G, hd = llm.layers, llm.kv_heads, llm.head_dim
        self.cap = capacity
        self.kq = np.zeros((L, capacity, G, hd), np.int8)
        self.vq = np.zeros((L, capacity, G, hd), np.int8)
        self.ks = np.zeros((L, capacity, G, 2), I64)
        self.vs = np.zeros((L, capacity, G, 2), I64)
        self.xf = np.zeros((capacity, llm.hidden), np.int8)
        self.xs = np.zeros((capacity, 2), I64)

    def feed(self, tok: int, p: int, collect: bool = False) -> dict:
        """Run token ``tok`` at position ``p``: writes its KV and LM-head input at ``p``."""
        llm, P, T = self.llm, self.P, self.T
        H, G, hd = llm.heads, llm.kv_heads, llm.head_dim
        R = H // G
        qd, kvd, _inter = llm.q_dim, llm.kv_dim, llm.intermediate
        E_q, m_e, e_e = P["emb"]
        h = requant32(E_q[tok].astype(I64) * 127 * m_e[tok], -(e_e[tok] + F_R))
        rec: dict = {"h0": h.copy(), "layers": []}
        for li, lay in enumerate(P["layers"]):
            x, mx, ex = ref_rmsnorm_quant(h, lay["ln1"], T["eps_fix"])
            qkv, acc_qkv = ref_linear(x, mx, ex, lay["qkv"], F_A, lay["qkv_b"])
            cos_p, sin_p = T["cos"][p], T["sin"][p]
            q = [ref_rope(qkv[i * hd : (i + 1) * hd], cos_p, sin_p) for i in range(H)]
            k = [ref_rope(qkv[qd + g * hd : qd + (g + 1) * hd], cos_p, sin_p) for g in range(G)]
            v = [qkv[qd + kvd + g * hd : qd + kvd + (g + 1) * hd] for g in range(G)]
            for g in range(G):
                kq, a, e = quant8(k[g], -F_A)
                self.kq[li, p, g], self.ks[li, p, g] = kq, (a, e)
                vq, a, e = quant8(v[g], -F_A)
                self.vq[li, p, g], self.vs[li, p, g] = vq, (a, e)
            outs, att = [], []
            for hh in range(H):
                g = hh // R
                o, info = ref_attention_head(
                    q[hh],
                    p,
                    self.kq[li, :, g],
                    self.ks[li, :, g, 0],
                    self.ks[li, :, g, 1],
                    self.vq[li, :, g],
                    self.vs[li, :, g, 0],
                    self.vs[li, :, g, 1],
                    T,
                )
                outs.append(o)
                att.append(info)
            o = np.concatenate(outs)
            xo, mo, eo = quant8(o, -F_A)
            y, acc_o = ref_linear(xo, mo, eo, lay["o"], F_R)
            h = sat32(h + y)
            x2, m2, e2 = ref_rmsnorm_quant(h, lay["ln2"], T["eps_fix"])
            gate, acc_g = ref_linear(x2, m2, e2, lay["gate"], F_M)
            up, acc_u = ref_linear(x2, m2, e2, lay["up"], F_M)
            t = ref_silu(gate, T["sig"]) * up
            xd, md, ed = quant8(t, -2 * F_M)
            y, acc_d = ref_linear(xd, md, ed, lay["down"], F_R)
            h = sat32(h + y)
            if collect:
                rec["layers"].append(
                    {
                        "x": x,
                        "x_m": mx,
                        "x_e": ex,
                        "acc_qkv": acc_qkv,
                        "qkv": qkv,
                        "k_q": self.kq[li, p].copy(),
                        "v_q": self.vq[li, p].copy(),
                        "k_m": self.ks[li, p, :, 0].copy(),
                        "k_e": self.ks[li, p, :, 1].copy(),
                        "v_m": self.vs[li, p, :, 0].copy(),
                        "v_e": self.vs[li, p, :, 1].copy(),
                        "attn_out": o,
                        "xo": xo,
                        "acc_o": acc_o,
                        "x2": x2,
                        "acc_gu": np.concatenate([acc_g, acc_u]),
                        "xd": xd,
                        "acc_down": acc_d,
                        "h": h.copy(),
                        "acc_s": [a["acc_s"] for a in att],
                        "acc_pv": np.stack([a["acc_pv"] for a in att]),
                        "q_q": np.stack([a["q_q"] for a in att]),
                        "w_q": [a["w_q"] for a in att],
                    }
                )
        xf, mf, ef = ref_rmsnorm_quant(h, P["norm"], T["eps_fix"])
        self.xf[p], self.xs[p] = xf, (mf, ef)
        rec.update(xf=xf, xf_m=mf, xf_e=ef)
        return rec

    def logits(self, p: int) -> tuple[np.ndarray, np.ndarray]:
        """Integer logits (and accumulators) predicted at position p."""
        return ref_linear(self.xf[p], self.xs[p, 0], self.xs[p, 1], self.P["lm"], F_L)

    def greedy(self, p: int) -> int:
        lg, _ = self.logits(p)
        return int(np.argmax(lg))  # numpy returns the first (lowest) index of the maximum

    def generate(self, prompt: list[int], steps: int) -> tuple[list[int], list[np.ndarray]]:
        """Prefill ``prompt`` at 0..n-1, then ``steps`` greedy tokens; returns the tokens and each step's logits."""
        for p, t in enumerate(prompt):
            self.feed(int(t), p)
        out, logits = [], []
        p = len(prompt)
        for _ in range(steps):
            lg, _acc = self.logits(p - 1)
            tok = int(np.argmax(lg))
            logits.append(lg)
            out.append(tok)
            self.feed(tok, p)
            p += 1
        return out, logits


# ============================================================================================ tests of the reference
def test_primitives_by_hand() -> None:
    assert rshr(np.array([3, -3, 5, -5, 7]), 1).tolist() == [2, -1, 3, -2, 4]
    assert rshr(np.array([6]), 0).tolist() == [6]
    assert bitlen(np.array([0, 1, 2, 3, 4, 2**40])).tolist() == [0, 1, 2, 2, 3, 41]
    assert requant32(np.array([5, -5, 2**40, 3]), np.array([1, 1, 0, -2])).tolist() == [3, -2, INT32_MAX, 12]
    assert norm15(np.array([0, 100, 2**20 + 2**5, 2**16 - 1]), np.array([3, 3, 0, 0]))[0].tolist() == [
        0,
        100,
        2**14 + 1,
        2**15,
    ]
    assert shift(np.array([3, -3]), -2).tolist() == [12, -12]


@given(st.lists(st.integers(-(2**50), 2**50), min_size=1, max_size=40), st.integers(-30, 0))
def test_quant8_error_bound(vals: list[int], E: int) -> None:
    v = np.array(vals, I64)
    x_q, a, e = quant8(v, E)
    if a == 0:
        assert not v.any()
        return
    real = v.astype(np.float64) * 2.0**E
    step = a * 2.0**e / 127
    err = np.abs(x_q * step - real)
    assert np.all(err <= step * (0.5 + 2**-8) + 1e-300)
    assert np.abs(x_q).max() == 127


def test_rsqrt_relative_error() -> None:
    rng = np.random.default_rng(1)
    eps_fix = int(np.rint(1e-6 * 2.0**40))
    worst = 0.0
    for _ in range(400):
        n = int(rng.integers(8, 200))
        scale = 2.0 ** rng.uniform(-10, 18)
        h = np.clip(np.rint(rng.standard_normal(n) * scale * 4096), INT32_MIN, INT32_MAX).astype(I64)
        g = (np.ones(n, I64) << 14, 14)  # gamma = 1: x_q * scale is the normalized vector
        x_q, m, e = ref_rmsnorm_quant(h, g, eps_fix)
        hr = h.astype(np.float64) / 4096
        y = hr / np.sqrt(np.mean(hr**2) + 1e-6)
        # the quantized vector's max element equals max|y| up to the scale's rounding
        got = m * 2.0**e  # a * 2**e / 127 * 127: the dequantized max
        want = np.abs(y).max()
        worst = max(worst, abs(got / want - 1))
    assert worst < 2**-12, worst


def test_exp_table_error() -> None:
    T = ref_tables(_tiny_llm(), 4)
    delta = np.arange(0, 40 * 4096, 7, dtype=I64)
    y = rshr(delta * T["l2e"], 15)
    n = y // 4096
    e = rshr(T["exp2"][y - n * 4096], np.minimum(n, 31))
    want = np.exp(-delta / 4096.0)
    err = np.abs(e / 32768.0 - want)
    assert err.max() <= 2**-13
    big = e >= 2**11
    assert np.max(err[big] / want[big]) <= 2**-11


def test_sigmoid_and_silu_error() -> None:
    T = ref_tables(_tiny_llm(), 4)
    g = np.concatenate([np.arange(-20 * 4096, 20 * 4096, 3), [INT32_MIN, INT32_MAX, -(2**20), 2**20]]).astype(I64)
    gc = sat(g, -(2**16), 2**16 - 1)
    j = gc // 64 + 1024
    fr = gc - (gc // 64) * 64
    s = T["sig"][j] + rshr((T["sig"][j + 1] - T["sig"][j]) * fr, 6)
    gr = g / 4096.0
    with np.errstate(over="ignore"):
        assert np.max(np.abs(s / 32768.0 - 1 / (1 + np.exp(-gr)))) <= 2**-14
    small = np.abs(g) < 2**24
    silu = ref_silu(g[small], T["sig"]) / 4096.0
    want = gr[small] / (1 + np.exp(-gr[small]))
    assert np.all(np.abs(silu - want) <= 2**-12 + np.abs(gr[small]) * 2**-14)


def test_rope_table_and_rotation_error() -> None:
    llm = _tiny_llm()
    T = ref_tables(llm, 512)
    i = np.arange(llm.head_dim // 2)
    inv = llm.rope_theta ** (-(2.0 * i) / llm.head_dim)
    ang = np.arange(512)[:, None] * inv[None, :]
    assert np.max(np.abs(T["cos"] / 16384 - np.cos(ang))) <= 2**-15
    assert np.max(np.abs(T["sin"] / 16384 - np.sin(ang))) <= 2**-15
    rng = np.random.default_rng(2)
    for p in (0, 7, 300, 511):
        x = np.rint(rng.standard_normal(llm.head_dim) * 3 * 4096).astype(I64)
        got = ref_rope(x, T["cos"][p], T["sin"][p]) / 4096
        xr = x / 4096
        half = llm.head_dim // 2
        c, s = np.cos(ang[p]), np.sin(ang[p])
        want = np.concatenate([xr[:half] * c - xr[half:] * s, xr[half:] * c + xr[:half] * s])
        assert np.all(np.abs(got - want) <= 2**-12 * (1 + np.abs(xr).max() * 2**-2))


def test_softmax_probability_error() -> None:
    T = ref_tables(_tiny_llm(), 4)
    rng = np.random.default_rng(3)
    for _ in range(50):
        z = np.rint(rng.standard_normal(int(rng.integers(1, 300))) * rng.uniform(0.1, 10) * 4096).astype(I64)
        delta = z.max() - z
        y = rshr(delta * T["l2e"], 15)
        n = y // 4096
        e = rshr(T["exp2"][y - n * 4096], np.minimum(n, 31))
        p = e / e.sum()
        zr = z / 4096.0
        want = np.exp(zr - zr.max())
        want /= want.sum()
        assert np.max(np.abs(p - want)) <= 2**-11


def test_imatmul_is_exact_at_the_extremes() -> None:
    x = np.full((2, 3000), -127, np.int8)
    w = np.full((3, 3000), 127, np.int8)
    w[1] = -127
    acc = imatmul(x, w)
    assert acc[0, 0] == -127 * 127 * 3000 and acc[0, 1] == 127 * 127 * 3000


def _tiny_llm():
    import dataclasses

    from hwmodel.specs import library

    return dataclasses.replace(
        library().llm("qwen2.5-0.5b"),
        name="tiny",
        layers=2,
        hidden=64,
        heads=4,
        kv_heads=2,
        head_dim=16,
        intermediate=128,
        vocab=512,
    )


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__, "-q"])
