"""A float64 Qwen2 forward pass on the same float weights the W8A8 model is quantized from (numpy).

It is the yardstick of the integer datapath's accuracy (:mod:`fpga.functional.accuracy`): the math of Hugging Face
``Qwen2ForCausalLM`` (RMSNorm ``x / sqrt(mean(x^2) + eps) * gamma``, half-rotation RoPE, GQA, softmax attention,
SwiGLU with SiLU, bias on q/k/v, tied or untied LM head) in IEEE float64 with exact functions, teacher-forced over
whole sequences (no KV cache). Weights are pulled from a tensor source one layer at a time, so memory stays at a
few hundred MB for a 0.5B model.
"""

from __future__ import annotations

import numpy as np

from fpga.functional.quantize import TensorSource, layer_names
from hwmodel.specs import LlmSpec


def _rmsnorm(x: np.ndarray, gamma: np.ndarray, eps: float) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * gamma


def _rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """x (..., T, heads, d); cos/sin (T, d/2)."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    c = cos[:, None, :]
    s = sin[:, None, :]
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)


def final_hidden(llm: LlmSpec, source: TensorSource, sequences: np.ndarray) -> np.ndarray:
    """The final-norm output (P, T, hidden) of every position of ``sequences`` (P, T) token ids, float64."""
    seqs = np.asarray(sequences, np.int64)
    P, T = seqs.shape
    H, G, hd = llm.heads, llm.kv_heads, llm.head_dim
    R = H // G
    q_dim = llm.q_dim

    def f64(name: str) -> np.ndarray:
        return np.asarray(source(name)).astype(np.float64)

    emb = source("model.embed_tokens.weight")
    h = np.asarray(emb[seqs.reshape(-1)]).astype(np.float64).reshape(P, T, llm.hidden)
    i = np.arange(hd // 2, dtype=np.float64)
    inv_freq = np.float64(llm.rope_theta) ** (-(2.0 * i) / hd)
    angle = np.arange(T, dtype=np.float64)[:, None] * inv_freq[None, :]
    cos, sin = np.cos(angle), np.sin(angle)
    causal = np.tril(np.ones((T, T), bool))
    for li in range(llm.layers):
        n = layer_names(li)
        x = _rmsnorm(h, f64(n["ln1"]), llm.rms_norm_eps)
        q = x @ f64(n["q_w"]).T
        k = x @ f64(n["k_w"]).T
        v = x @ f64(n["v_w"]).T
        if llm.qkv_bias:
            q, k, v = q + f64(n["q_b"]), k + f64(n["k_b"]), v + f64(n["v_b"])
        q = _rope(q.reshape(P, T, H, hd), cos, sin)
        k = _rope(k.reshape(P, T, G, hd), cos, sin)
        v = v.reshape(P, T, G, hd)
        qg = q.reshape(P, T, G, R, hd)
        scores = np.einsum("ptgrd,psgd->pgrts", qg, k) / np.sqrt(hd)
        scores = np.where(causal, scores, -np.inf)
        scores -= scores.max(axis=-1, keepdims=True)
        w = np.exp(scores)
        w /= w.sum(axis=-1, keepdims=True)
        o = np.einsum("pgrts,psgd->ptgrd", w, v).reshape(P, T, q_dim)
        h = h + o @ f64(n["o_w"]).T
        x = _rmsnorm(h, f64(n["ln2"]), llm.rms_norm_eps)
        gate = x @ f64(n["gate_w"]).T
        up = x @ f64(n["up_w"]).T
        h = h + (gate / (1.0 + np.exp(-gate)) * up) @ f64(n["down_w"]).T
    return _rmsnorm(h, f64("model.norm.weight"), llm.rms_norm_eps)


def lm_head_weight(llm: LlmSpec, source: TensorSource) -> np.ndarray:
    """The LM-head matrix (vocab x hidden) as stored (float32/bf16...), not yet converted."""
    return np.asarray(source("model.embed_tokens.weight" if llm.tied_embeddings else "lm_head.weight"))


def logits(hidden: np.ndarray, head: np.ndarray, rows: int = 16384) -> np.ndarray:
    """float64 logits (T, vocab) of final hidden states (T, hidden); the head is converted in row blocks."""
    out = np.empty((hidden.shape[0], head.shape[0]), np.float64)
    for r0 in range(0, head.shape[0], rows):
        out[:, r0 : r0 + rows] = hidden @ head[r0 : r0 + rows].astype(np.float64).T
    return out
