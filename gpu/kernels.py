"""The kernels one forward pass launches, per serving framework: bytes moved and operations, kernel by kernel.

A forward pass is a *prologue* (embedding, rotary tables...), one *decoder layer* repeated ``llm.layers`` times,
and an *epilogue* (final norm, output head, token selection). Each block is a list of kernels; each kernel has the
DRAM bytes it moves (weights, activations, KV cache) and the operations it executes (2 per multiply-add), counted
from the shapes of the LLM spec. :mod:`gpu.launch` turns them into time (per-kernel roofline + launch queue).

The kernel lists follow the frameworks' code paths (counted from the sources, not fitted):

* ``hf`` (transformers LlamaDecoderLayer / Qwen2DecoderLayer, eager, SDPA attention, DynamicCache): RMSNorm as 8
  elementwise kernels (to fp32, pow, mean, +eps, rsqrt, mul, to half, *gain); q/k/v projections as 3 GEMMs (bias
  fused in addmm); rotary embedding as 5 kernels for q and 5 for k (x*cos, neg, cat, *sin, add); the cache grown by
  ``torch.cat`` for K and V (reads the whole cache, writes it again); ``repeat_kv`` expanding K and V to all query
  heads when the model uses GQA; one SDPA kernel; a transpose copy; o_proj; residual add; RMSNorm; gate GEMM, SiLU,
  up GEMM, multiply, down GEMM; residual add: 41 kernels per layer (43 with GQA).
* ``vllm`` (vLLM 0.6 Qwen2/Llama): fused add+RMSNorm, merged QKV GEMM, rotary, reshape_and_cache, paged/flash
  attention, o_proj, fused add+RMSNorm, merged gate_up GEMM, SiLU-and-mul, down GEMM: 10 kernels per layer.
* ``w8a8``: the ``hf`` layer with INT8 GEMMs (dequantization fused in the epilogue) and a per-token activation
  quantization (abs, amax, scale, round, clamp to int8: 5 kernels) before each of the 4 distinct linear inputs.

Precision: weights at ``weight_bits`` (+ one fp16 scale per output channel when quantized), KV cache at ``kv_bits``,
activations in fp16/bf16 (fp32 inside the hf RMSNorm). Attention operations count the causal (query, key) pairs.
"""
from __future__ import annotations

import dataclasses
import functools

import numpy as np

from hwmodel.errors import HwmodelError
from hwmodel.specs import LlmSpec

ACT_BYTES = 2  # fp16 / bf16 activations
FP32_BYTES = 4
SCALE_BYTES = 2  # fp16 per-output-channel weight scale
VECTOR_BYTES = 2  # fp16 biases and norm gains

GEMM, ATTN, ELT = 0, 1, 2  # kernel classes: weight GEMM (weight-precision peak), attention (fp16 peak), elementwise


def column_sum(a: np.ndarray) -> np.ndarray:
    """Sum over kernels (axis 0) in kernel order, whatever the number of points: a sequential sum, so one point
    evaluated alone and the same point in a vector of contexts give bit-identical times."""
    if a.shape[0] == 0:
        return np.zeros(a.shape[1:])
    return np.cumsum(a, axis=0)[-1]


@dataclasses.dataclass(frozen=True)
class Pass:
    """What one forward pass computes, summed over the sequences of a batch (arrays: one entry per point).

    ``new_tokens``: tokens computed (rows of every GEMM); ``seqs``: sequences; ``attn_pairs``: causal (query, key)
    pairs; ``kv_tokens``: KV entries attention reads (after this pass appended its own); ``cached_tokens``: KV
    entries held before the pass; ``head_rows``: rows the output head computes.
    """

    new_tokens: np.ndarray
    seqs: int
    attn_pairs: np.ndarray
    kv_tokens: np.ndarray
    cached_tokens: np.ndarray
    head_rows: np.ndarray

    @staticmethod
    def single(n_tokens: int | np.ndarray, ctx: int | np.ndarray, head_rows: int | np.ndarray = 1) -> Pass:
        """One sequence: ``n_tokens`` new tokens on top of ``ctx`` cached ones (broadcast to arrays)."""
        n, c = np.broadcast_arrays(np.asarray(n_tokens, dtype=np.float64), np.asarray(ctx, dtype=np.float64))
        n, c = np.atleast_1d(n), np.atleast_1d(c)
        rows = np.broadcast_to(np.asarray(head_rows, dtype=np.float64), n.shape)
        return Pass(new_tokens=n, seqs=1, attn_pairs=n * c + n * (n + 1) / 2, kv_tokens=c + n, cached_tokens=c,
                    head_rows=rows)

    @staticmethod
    def decode_batch(ctxs: np.ndarray, padded: bool) -> Pass:
        """One decode step of ``len(ctxs)`` sequences; ``padded`` batches pad every one to the longest context."""
        c = np.asarray(ctxs, dtype=np.float64)
        b = len(c)
        if padded:
            c = np.full(b, c.max())
        one = np.ones(1)
        kv = one * float(np.sum(c + 1))
        return Pass(new_tokens=one * b, seqs=b, attn_pairs=kv, kv_tokens=kv, cached_tokens=one * float(np.sum(c)),
                    head_rows=one * b)


@dataclasses.dataclass(frozen=True)
class Block:
    """Kernels of one block: names, class (GEMM / ATTN / ELT), bytes and operations (kernels x points)."""

    names: tuple[str, ...]
    kinds: np.ndarray
    bytes: np.ndarray
    ops: np.ndarray

    @property
    def n_kernels(self) -> int:
        return len(self.names)


@dataclasses.dataclass(frozen=True)
class Program:
    """A whole forward pass: prologue, one decoder layer (repeated ``layers`` times), epilogue."""

    prologue: Block
    layer: Block
    epilogue: Block
    layers: int
    rows: np.ndarray  # GEMM rows (tokens) per point, for the token-count dependent compute efficiency
    rows_per_seq: np.ndarray  # attention query rows per sequence

    def total_bytes(self) -> np.ndarray:
        return (column_sum(self.prologue.bytes) + self.layers * column_sum(self.layer.bytes)
                + column_sum(self.epilogue.bytes))

    def total_ops(self) -> np.ndarray:
        return column_sum(self.prologue.ops) + self.layers * column_sum(self.layer.ops) + column_sum(self.epilogue.ops)

    @property
    def n_kernels(self) -> int:
        return self.prologue.n_kernels + self.layers * self.layer.n_kernels + self.epilogue.n_kernels


class _Builder:
    """Collects kernels of one block as rows of (bytes, ops) arrays."""

    def __init__(self, m: int) -> None:
        self.m = m
        self.names: list[str] = []
        self.kinds: list[int] = []
        self.bytes: list[np.ndarray] = []
        self.ops: list[np.ndarray] = []

    def add(self, name: str, kind: int, n_bytes: np.ndarray | float, ops: np.ndarray | float = 0.0) -> None:
        self.names.append(name)
        self.kinds.append(kind)
        self.bytes.append(np.broadcast_to(np.asarray(n_bytes, dtype=np.float64), (self.m,)))
        self.ops.append(np.broadcast_to(np.asarray(ops, dtype=np.float64), (self.m,)))

    def elt(self, name: str, read: np.ndarray | float, write: np.ndarray | float) -> None:
        self.add(name, ELT, np.asarray(read) + np.asarray(write))

    def build(self) -> Block:
        if not self.names:
            return Block((), np.zeros(0, dtype=np.int8), np.zeros((0, self.m)), np.zeros((0, self.m)))
        return Block(tuple(self.names), np.array(self.kinds, dtype=np.int8), np.vstack(self.bytes), np.vstack(self.ops))


@dataclasses.dataclass(frozen=True)
class _Shapes:
    h: int
    q: int
    kv: int
    i: int
    head_dim: int
    wb: float  # weight bytes per element
    kb: float  # KV bytes per element
    quantized: bool
    qkv_bias: bool
    gqa: bool


def _gemm(b: _Builder, s: _Shapes, name: str, k_in: int, k_out: int, rows: np.ndarray, bias: bool = False,
          act_in_bytes: float = ACT_BYTES) -> None:
    """A linear layer: weights (+ scales, + bias) read once, activations in and out, 2 ops per MAC."""
    weights = k_in * k_out * s.wb + (k_out * SCALE_BYTES if s.quantized else 0) + (k_out * VECTOR_BYTES if bias else 0)
    b.add(name, GEMM, weights + rows * (k_in * act_in_bytes + k_out * ACT_BYTES), 2.0 * rows * k_in * k_out)


def _hf_rmsnorm(b: _Builder, s: _Shapes, name: str, n: np.ndarray) -> None:
    """transformers RMSNorm: to fp32, pow, mean, +eps, rsqrt, mul, to half, *gain (8 kernels)."""
    x16, x32, v32 = n * s.h * ACT_BYTES, n * s.h * FP32_BYTES, n * FP32_BYTES
    b.elt(f"{name}.to_fp32", x16, x32)
    b.elt(f"{name}.pow", x32, x32)
    b.elt(f"{name}.mean", x32, v32)
    b.elt(f"{name}.add_eps", v32, v32)
    b.elt(f"{name}.rsqrt", v32, v32)
    b.elt(f"{name}.mul", x32 + v32, x32)
    b.elt(f"{name}.to_half", x32, x16)
    b.elt(f"{name}.gain", x16 + s.h * VECTOR_BYTES, x16)


def _hf_rotary(b: _Builder, s: _Shapes, name: str, n: np.ndarray, width: int) -> None:
    """transformers apply_rotary_pos_emb on one tensor: x*cos, neg, cat (rotate_half), *sin, add (5 kernels)."""
    x = n * width * ACT_BYTES
    table = n * s.head_dim * ACT_BYTES
    b.elt(f"{name}.mul_cos", x + table, x)
    b.elt(f"{name}.neg", x / 2, x / 2)
    b.elt(f"{name}.cat", x, x)
    b.elt(f"{name}.mul_sin", x + table, x)
    b.elt(f"{name}.add", 2 * x, x)


def _act_quant(b: _Builder, s: _Shapes, name: str, n: np.ndarray, width: int) -> None:
    """Per-token dynamic INT8 activation quantization: abs, amax, scale, round, clamp+cast (5 kernels)."""
    x, t = n * width * ACT_BYTES, n * FP32_BYTES
    b.elt(f"{name}.abs", x, x)
    b.elt(f"{name}.amax", x, t)
    b.elt(f"{name}.scale", t, t)
    b.elt(f"{name}.round", x + t, x)
    b.elt(f"{name}.clamp_int8", x, n * width)


def _hf_layer(b: _Builder, s: _Shapes, p: Pass, w8a8: bool) -> None:
    n = p.new_tokens
    act_in = 1.0 if w8a8 else ACT_BYTES  # INT8 activations into the INT8 GEMMs
    _hf_rmsnorm(b, s, "input_norm", n)
    if w8a8:
        _act_quant(b, s, "qkv_in", n, s.h)
    _gemm(b, s, "q_proj", s.h, s.q, n, s.qkv_bias, act_in)
    _gemm(b, s, "k_proj", s.h, s.kv, n, s.qkv_bias, act_in)
    _gemm(b, s, "v_proj", s.h, s.kv, n, s.qkv_bias, act_in)
    _hf_rotary(b, s, "rope_q", n, s.q)
    _hf_rotary(b, s, "rope_k", n, s.kv)
    for t in ("k", "v"):  # DynamicCache.update: torch.cat of the old cache and the new entries
        b.elt(f"cache_cat_{t}", p.cached_tokens * s.kv * s.kb + n * s.kv * ACT_BYTES, p.kv_tokens * s.kv * s.kb)
    width = s.kv
    if s.gqa:  # repeat_kv expands K and V to every query head before SDPA
        for t in ("k", "v"):
            b.elt(f"repeat_kv_{t}", p.kv_tokens * s.kv * s.kb, p.kv_tokens * s.q * s.kb)
        width = s.q
    b.add("sdpa", ATTN, p.kv_tokens * 2 * width * s.kb + 2 * n * s.q * ACT_BYTES, 4.0 * s.q * p.attn_pairs)
    b.elt("transpose", n * s.q * ACT_BYTES, n * s.q * ACT_BYTES)
    if w8a8:
        _act_quant(b, s, "o_in", n, s.q)
    _gemm(b, s, "o_proj", s.q, s.h, n, False, act_in)
    b.elt("residual_1", 2 * n * s.h * ACT_BYTES, n * s.h * ACT_BYTES)
    _hf_rmsnorm(b, s, "post_norm", n)
    if w8a8:
        _act_quant(b, s, "mlp_in", n, s.h)
    _gemm(b, s, "gate_proj", s.h, s.i, n, False, act_in)
    b.elt("silu", n * s.i * ACT_BYTES, n * s.i * ACT_BYTES)
    _gemm(b, s, "up_proj", s.h, s.i, n, False, act_in)
    b.elt("mul", 2 * n * s.i * ACT_BYTES, n * s.i * ACT_BYTES)
    if w8a8:
        _act_quant(b, s, "down_in", n, s.i)
    _gemm(b, s, "down_proj", s.i, s.h, n, False, act_in)
    b.elt("residual_2", 2 * n * s.h * ACT_BYTES, n * s.h * ACT_BYTES)


def _vllm_layer(b: _Builder, s: _Shapes, p: Pass) -> None:
    n = p.new_tokens
    norm = (2 * n * s.h * ACT_BYTES + s.h * VECTOR_BYTES, 2 * n * s.h * ACT_BYTES)
    b.elt("fused_add_rmsnorm_1", *norm)
    _gemm(b, s, "qkv_proj", s.h, s.q + 2 * s.kv, n, s.qkv_bias)
    b.elt("rotary", n * (s.q + s.kv) * ACT_BYTES, n * (s.q + s.kv) * ACT_BYTES)
    b.elt("reshape_and_cache", n * 2 * s.kv * ACT_BYTES, n * 2 * s.kv * s.kb)
    b.add("attention", ATTN, p.kv_tokens * 2 * s.kv * s.kb + 2 * n * s.q * ACT_BYTES, 4.0 * s.q * p.attn_pairs)
    _gemm(b, s, "o_proj", s.q, s.h, n)
    b.elt("fused_add_rmsnorm_2", *norm)
    _gemm(b, s, "gate_up_proj", s.h, 2 * s.i, n)
    b.elt("silu_and_mul", 2 * n * s.i * ACT_BYTES, n * s.i * ACT_BYTES)
    _gemm(b, s, "down_proj", s.i, s.h, n)


def build_program(llm: LlmSpec, program: str, p: Pass, weight_bits: int, kv_bits: int, head: str = "auto") -> Program:
    """The kernels of one forward pass of ``llm`` in ``program`` ("hf", "vllm" or "w8a8").

    ``head``: "auto" runs the model's own output head (an LM head on ``p.head_rows`` rows, or a PRM value head on
    every token), "none" skips the final norm and the head (an ingest pass whose logits are discarded).

    Every kernel's bytes and operations are affine in the pass's counts (:data:`FEATURES`), so the recipe is
    evaluated once per (LLM, program, precision, head) into coefficient tables (:func:`program_template`) and a
    pass costs a few array operations; :func:`evaluate_program` is the direct evaluation the tests compare with.
    """
    return program_template(llm, program, weight_bits, kv_bits, head).instantiate(p)


FEATURES = ("new_tokens", "attn_pairs", "kv_tokens", "cached_tokens", "head_rows")


@dataclasses.dataclass(frozen=True)
class _BlockTemplate:
    names: tuple[str, ...]
    kinds: np.ndarray
    bytes_coef: np.ndarray  # (1 + features) x kernels: constant term, then one row per feature
    ops_coef: np.ndarray

    @staticmethod
    def of(block: Block) -> _BlockTemplate:
        # block was evaluated at the origin (column 0) and at each unit feature vector (column 1 + f)
        def coef(a: np.ndarray) -> np.ndarray:
            return np.vstack([a[:, 0], *(a[:, 1 + f] - a[:, 0] for f in range(len(FEATURES)))])

        return _BlockTemplate(block.names, block.kinds, coef(block.bytes), coef(block.ops))

    def at(self, feats: tuple[np.ndarray, ...]) -> Block:
        def value(c: np.ndarray) -> np.ndarray:
            out = np.repeat(c[0][:, None], len(feats[0]), axis=1)
            for f, x in enumerate(feats):  # fixed order: bit-identical whatever the number of points
                out = out + c[1 + f][:, None] * x[None, :]
            return out

        return Block(self.names, self.kinds, value(self.bytes_coef), value(self.ops_coef))


@dataclasses.dataclass(frozen=True)
class ProgramTemplate:
    """The kernels of a forward pass as affine functions of the pass's counts."""

    prologue: _BlockTemplate
    layer: _BlockTemplate
    epilogue: _BlockTemplate
    layers: int

    def instantiate(self, p: Pass) -> Program:
        feats = tuple(np.asarray(getattr(p, f), dtype=np.float64) for f in FEATURES)
        return Program(prologue=self.prologue.at(feats), layer=self.layer.at(feats), epilogue=self.epilogue.at(feats),
                       layers=self.layers, rows=np.maximum(p.new_tokens, 1.0),
                       rows_per_seq=np.maximum(p.new_tokens / p.seqs, 1.0))


@functools.lru_cache(maxsize=256)
def program_template(llm: LlmSpec, program: str, weight_bits: int, kv_bits: int, head: str = "auto") -> ProgramTemplate:
    """Coefficient tables of :func:`evaluate_program` (evaluated at the origin and at each unit feature)."""
    k = len(FEATURES)
    basis = np.zeros((k, k + 1))
    basis[np.arange(k), np.arange(1, k + 1)] = 1.0
    probe = Pass(new_tokens=basis[0], seqs=1, attn_pairs=basis[1], kv_tokens=basis[2], cached_tokens=basis[3],
                 head_rows=basis[4])
    direct = evaluate_program(llm, program, probe, weight_bits, kv_bits, head)
    return ProgramTemplate(_BlockTemplate.of(direct.prologue), _BlockTemplate.of(direct.layer),
                           _BlockTemplate.of(direct.epilogue), direct.layers)


def evaluate_program(llm: LlmSpec, program: str, p: Pass, weight_bits: int, kv_bits: int,
                     head: str = "auto") -> Program:
    """The kernel recipe evaluated directly on ``p`` (the reference of :func:`build_program`)."""
    if head not in ("auto", "none"):
        raise HwmodelError(f"head must be 'auto' or 'none', got {head!r}")
    if program not in ("hf", "vllm", "w8a8"):
        raise HwmodelError(f"unknown kernel program {program!r}; expected hf, vllm or w8a8")
    s = _Shapes(h=llm.hidden, q=llm.q_dim, kv=llm.kv_dim, i=llm.intermediate, head_dim=llm.head_dim,
                wb=weight_bits / 8, kb=kv_bits / 8, quantized=weight_bits < 16, qkv_bias=llm.qkv_bias,
                gqa=llm.kv_heads < llm.heads)
    m = len(p.new_tokens)
    n = p.new_tokens
    eager_hf = program in ("hf", "w8a8")

    pro = _Builder(m)
    pro.elt("embedding", n * 8, n * s.h * ACT_BYTES)  # gather one row per token
    if eager_hf:  # LlamaRotaryEmbedding.forward (cos/sin tables) and position / mask bookkeeping
        table = n * s.head_dim * FP32_BYTES
        for k in ("inv_freq", "matmul", "cat", "cos", "sin", "to_half"):
            pro.elt(f"rotary_table.{k}", table, table)
        for k in ("positions", "mask_a", "mask_b", "mask_c"):
            pro.elt(f"bookkeeping.{k}", n * 8, n * 8)

    lay = _Builder(m)
    if eager_hf:
        _hf_layer(lay, s, p, w8a8=(program == "w8a8"))
    else:
        _vllm_layer(lay, s, p)

    epi = _Builder(m)
    if head != "none":
        # an LM head computes the rows it is asked for; a PRM value head scores every token (vLLM pooling ALL)
        rows = p.head_rows if llm.output_head == "lm" else p.new_tokens
        if eager_hf:
            _hf_rmsnorm(epi, s, "final_norm", rows)
        else:
            epi.elt("final_norm", 2 * rows * s.h * ACT_BYTES + s.h * VECTOR_BYTES, rows * s.h * ACT_BYTES)
        if llm.output_head == "lm":
            _gemm(epi, s, "lm_head", s.h, llm.vocab, rows)
            if eager_hf:  # logits to fp32, greedy argmax, generate() bookkeeping (ids, mask, stopping criteria)
                logits = rows * llm.vocab
                epi.elt("logits_float", logits * ACT_BYTES, logits * FP32_BYTES)
                epi.elt("argmax", logits * FP32_BYTES, rows * 8)
                for k in ("cat_ids", "cat_mask", "isin_eos", "and", "unfinished", "max"):
                    epi.elt(f"generate.{k}", rows * 8 + 64, rows * 8)
        else:  # Linear(hidden, 1) value head (+ scales when quantized), sigmoid of the scores
            _gemm(epi, s, "value_head", s.h, 1, rows, bias=True)
            epi.elt("sigmoid", rows * ACT_BYTES, rows * ACT_BYTES)
    return Program(prologue=pro.build(), layer=lay.build(), epilogue=epi.build(), layers=llm.layers,
                   rows=np.maximum(n, 1.0), rows_per_seq=np.maximum(n / p.seqs, 1.0))
