"""Load-time quantization of a float Qwen2 checkpoint into the W8A8 datapath's integers (docs/w8a8.md, section 2).

The float tensors come from a :class:`TensorSource` (the synthetic generator or a safetensors checkpoint), one at a
time, so a 0.5B model never holds more than one float tensor at once. Everything here is float64 numpy with
round-half-to-even; the result, :class:`QuantizedParams`, holds integers only.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields

import numpy as np

from fpga.functional.formats import F_A
from hwmodel.errors import HwmodelError
from hwmodel.specs import LlmSpec

#: Returns the float tensor with a Hugging Face Qwen2 name (any float dtype; converted to float64 here).
TensorSource = Callable[[str], np.ndarray]


class CheckpointError(HwmodelError):
    """A checkpoint is missing a tensor, has one of the wrong shape or dtype, or holds non-finite values."""


def layer_names(i: int) -> dict[str, str]:
    p = f"model.layers.{i}."
    return {
        "ln1": p + "input_layernorm.weight",
        "q_w": p + "self_attn.q_proj.weight",
        "q_b": p + "self_attn.q_proj.bias",
        "k_w": p + "self_attn.k_proj.weight",
        "k_b": p + "self_attn.k_proj.bias",
        "v_w": p + "self_attn.v_proj.weight",
        "v_b": p + "self_attn.v_proj.bias",
        "o_w": p + "self_attn.o_proj.weight",
        "ln2": p + "post_attention_layernorm.weight",
        "gate_w": p + "mlp.gate_proj.weight",
        "up_w": p + "mlp.up_proj.weight",
        "down_w": p + "mlp.down_proj.weight",
    }


def expected_shapes(llm: LlmSpec) -> dict[str, tuple[int, ...]]:
    """Every tensor a Hugging Face Qwen2 checkpoint of ``llm`` must hold, with its shape."""
    h, q, kv, inter = llm.hidden, llm.q_dim, llm.kv_dim, llm.intermediate
    out: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (llm.vocab, h), "model.norm.weight": (h,)}
    if not llm.tied_embeddings:
        out["lm_head.weight"] = (llm.vocab, h)
    for i in range(llm.layers):
        n = layer_names(i)
        out.update(
            {
                n["ln1"]: (h,),
                n["q_w"]: (q, h),
                n["k_w"]: (kv, h),
                n["v_w"]: (kv, h),
                n["o_w"]: (h, q),
                n["ln2"]: (h,),
                n["gate_w"]: (inter, h),
                n["up_w"]: (inter, h),
                n["down_w"]: (h, inter),
            }
        )
        if llm.qkv_bias:
            out.update({n["q_b"]: (q,), n["k_b"]: (kv,), n["v_b"]: (kv,)})
    return out


_CHUNK_ELEMENTS = 1 << 18  # rows per chunk chosen so a float64 chunk (2 MB) stays in cache


def _f64(name: str, t: np.ndarray) -> np.ndarray:
    a = np.asarray(t).astype(np.float64)
    if not np.all(np.isfinite(a)):
        raise CheckpointError(f"tensor '{name}' holds non-finite values (NaN or inf)")
    return a


def quantize_linear(w: np.ndarray, name: str = "weight") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-output-channel symmetric int8: ``(w_q int8, m_w int32, e_w int32)`` (docs/w8a8.md section 2).

    Rows are processed in chunks, so a float32 vocab x hidden embedding never exists as float64 all at once."""
    rows = w.shape[0]
    w_q = np.empty(w.shape, np.int8)
    m_w = np.empty(rows, np.int32)
    e_w = np.empty(rows, np.int32)
    step = max(1, _CHUNK_ELEMENTS // max(1, w.shape[1]))
    for r0 in range(0, rows, step):
        c = _f64(name, w[r0 : r0 + step])
        wamax = np.max(np.abs(c), axis=1)
        nz = wamax > 0
        s_w = np.where(nz, wamax / 127.0, 1.0)
        np.divide(c, s_w[:, None], out=c)
        np.rint(c, out=c)
        np.clip(c, -127, 127, out=c)
        c[~nz] = 0
        w_q[r0 : r0 + step] = c
        f, e = np.frexp(wamax / 16129.0)
        m_w[r0 : r0 + step] = np.where(nz, np.rint(f * 2.0**15), 0)
        e_w[r0 : r0 + step] = np.where(nz, e - 15, 0)
    return w_q, m_w, e_w


def quantize_gamma(g: np.ndarray) -> tuple[np.ndarray, int]:
    """RMSNorm gain as ``g_q = rint(gamma * 2**F_g)`` with ``F_g = 14 - E`` (``max|gamma| = f * 2**E``)."""
    g = np.asarray(g, dtype=np.float64)
    gmax = float(np.max(np.abs(g))) if g.size else 0.0
    f_g = 14 if gmax == 0.0 else 14 - math.frexp(gmax)[1]
    return np.rint(g * 2.0**f_g).astype(np.int32), f_g


def quantize_bias(b: np.ndarray, frac_bits: int = F_A) -> np.ndarray:
    return np.clip(np.rint(np.asarray(b, dtype=np.float64) * 2.0**frac_bits), -(2**31), 2**31 - 1).astype(np.int32)


@dataclass(frozen=True, eq=False)
class QuantizedParams:
    """All integers of a quantized draft model, per-layer tensors stacked on a leading layer axis.

    Linear weights are int8 (out x in) with per-output-channel ``(m, e)`` multipliers; ``qkv`` is q, k, v rows
    concatenated, ``gu`` gate then up. ``lm_*`` is the LM head (the same arrays as ``emb_*`` when tied).
    """

    emb_q: np.ndarray
    emb_m: np.ndarray
    emb_e: np.ndarray
    lm_q: np.ndarray
    lm_m: np.ndarray
    lm_e: np.ndarray
    ln1_g: np.ndarray  # (L, hidden) int32
    ln1_f: np.ndarray  # (L,) int32 fractional bits
    ln2_g: np.ndarray
    ln2_f: np.ndarray
    norm_g: np.ndarray  # (hidden,)
    norm_f: np.ndarray  # () int32
    qkv_q: np.ndarray  # (L, q+2kv, hidden) int8
    qkv_m: np.ndarray
    qkv_e: np.ndarray
    qkv_b: np.ndarray  # (L, q+2kv) int32, F_A
    o_q: np.ndarray  # (L, hidden, q)
    o_m: np.ndarray
    o_e: np.ndarray
    gu_q: np.ndarray  # (L, 2*inter, hidden)
    gu_m: np.ndarray
    gu_e: np.ndarray
    down_q: np.ndarray  # (L, hidden, inter)
    down_m: np.ndarray
    down_e: np.ndarray

    def arrays(self) -> Iterator[tuple[str, np.ndarray]]:
        for f in fields(self):
            yield f.name, getattr(self, f.name)

    def digest(self) -> str:
        """SHA-256 over every array (name, dtype, shape, bytes): a fingerprint of the quantized model."""
        h = hashlib.sha256()
        for name, a in self.arrays():
            a = np.ascontiguousarray(a)
            h.update(f"{name}:{a.dtype.str}:{a.shape};".encode())
            h.update(a.tobytes())
        return h.hexdigest()

    @property
    def nbytes(self) -> int:
        seen: set[int] = set()
        total = 0
        for _n, a in self.arrays():
            if id(a) not in seen:
                seen.add(id(a))
                total += a.nbytes
        return total


def quantize_model(llm: LlmSpec, source: TensorSource) -> QuantizedParams:
    """Quantize every tensor of ``llm`` pulled from ``source`` (docs/w8a8.md section 2)."""
    if llm.output_head != "lm":
        raise CheckpointError(f"LLM '{llm.name}' has a value head; the draft model needs an LM head")
    shapes = expected_shapes(llm)

    def raw(name: str) -> np.ndarray:
        t = source(name)
        if tuple(t.shape) != shapes[name]:
            raise CheckpointError(f"tensor '{name}' has shape {tuple(t.shape)}, expected {shapes[name]}")
        return t

    def lin(name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return quantize_linear(raw(name), name)

    def get(name: str) -> np.ndarray:
        return _f64(name, raw(name))

    L, h, q, kv, inter = llm.layers, llm.hidden, llm.q_dim, llm.kv_dim, llm.intermediate
    nqkv = q + 2 * kv
    qkv_q = np.empty((L, nqkv, h), np.int8)
    qkv_m = np.empty((L, nqkv), np.int32)
    qkv_e = np.empty((L, nqkv), np.int32)
    qkv_b = np.zeros((L, nqkv), np.int32)
    o_q = np.empty((L, h, q), np.int8)
    o_m = np.empty((L, h), np.int32)
    o_e = np.empty((L, h), np.int32)
    gu_q = np.empty((L, 2 * inter, h), np.int8)
    gu_m = np.empty((L, 2 * inter), np.int32)
    gu_e = np.empty((L, 2 * inter), np.int32)
    down_q = np.empty((L, h, inter), np.int8)
    down_m = np.empty((L, h), np.int32)
    down_e = np.empty((L, h), np.int32)
    ln1_g = np.empty((L, h), np.int32)
    ln2_g = np.empty((L, h), np.int32)
    ln1_f = np.empty((L,), np.int32)
    ln2_f = np.empty((L,), np.int32)
    for i in range(L):
        n = layer_names(i)
        for rows, key in ((slice(0, q), "q"), (slice(q, q + kv), "k"), (slice(q + kv, nqkv), "v")):
            qkv_q[i, rows], qkv_m[i, rows], qkv_e[i, rows] = lin(n[key + "_w"])
            if llm.qkv_bias:
                qkv_b[i, rows] = quantize_bias(get(n[key + "_b"]))
        o_q[i], o_m[i], o_e[i] = lin(n["o_w"])
        gu_q[i, :inter], gu_m[i, :inter], gu_e[i, :inter] = lin(n["gate_w"])
        gu_q[i, inter:], gu_m[i, inter:], gu_e[i, inter:] = lin(n["up_w"])
        down_q[i], down_m[i], down_e[i] = lin(n["down_w"])
        ln1_g[i], ln1_f[i] = quantize_gamma(get(n["ln1"]))
        ln2_g[i], ln2_f[i] = quantize_gamma(get(n["ln2"]))
    norm_g, norm_f = quantize_gamma(get("model.norm.weight"))
    emb_q, emb_m, emb_e = lin("model.embed_tokens.weight")
    if llm.tied_embeddings:
        lm_q, lm_m, lm_e = emb_q, emb_m, emb_e
    else:
        lm_q, lm_m, lm_e = lin("lm_head.weight")
    return QuantizedParams(
        emb_q=emb_q,
        emb_m=emb_m,
        emb_e=emb_e,
        lm_q=lm_q,
        lm_m=lm_m,
        lm_e=lm_e,
        ln1_g=ln1_g,
        ln1_f=ln1_f,
        ln2_g=ln2_g,
        ln2_f=ln2_f,
        norm_g=norm_g,
        norm_f=np.asarray(norm_f, np.int32),
        qkv_q=qkv_q,
        qkv_m=qkv_m,
        qkv_e=qkv_e,
        qkv_b=qkv_b,
        o_q=o_q,
        o_m=o_m,
        o_e=o_e,
        gu_q=gu_q,
        gu_m=gu_m,
        gu_e=gu_e,
        down_q=down_q,
        down_m=down_m,
        down_e=down_e,
    )
