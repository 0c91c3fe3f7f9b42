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

**Where bytes and MACs come from.** Every GEMM's weights, scales and bias, every norm's gains and the embedding
rows gathered come from the operator graph (:mod:`hwmodel.graph`, per-channel fp16 convention); a framework's
fusion rules (:data:`FUSION`) say which graph operators each of its kernels computes (vLLM: q/k/v -> one
``qkv_proj``, gate/up -> ``gate_up_proj``; hf: one GEMM per graph linear). :attr:`Block.params` is the per-kernel
ledger of parameter bytes by class; tests/test_graph_conservation.py checks it and the MACs against the graph.
Not lowered here (refused): mixtures of experts. A sliding window bounds the attention's pairs and keys only when
the caller passes it (:class:`Window`: vLLM's xFormers and paged kernels apply it; eager HF SDPA masks it and still
computes every pair). Extra per-framework traffic (hf's cache ``torch.cat``, ``repeat_kv``, fp32 norms) is the
framework's, on top of the graph's minimum.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from gpu.kernel_types import (  # noqa: F401  (gpu.kernels is where callers find them)
    ACT_BYTES,
    ATTN,
    ELT,
    FEATURES,
    FP32_BYTES,
    GEMM,
    PARAM_CLASSES,
    Block,
    Pass,
    Program,
    ProgramTemplate,
    Window,
    _BlockTemplate,
    attention_counts,
    column_sum,
)
from hwmodel.errors import HwmodelError
from hwmodel.graph import Graph, Op, build_graph, per_channel
from hwmodel.specs import LlmSpec

#: framework -> GEMM kernel -> the graph linears it computes (rows concatenated)
FUSION: dict[str, dict[str, tuple[str, ...]]] = {
    "hf": {n: (n,) for n in ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")},
    "vllm": {
        "qkv_proj": ("q_proj", "k_proj", "v_proj"),
        "o_proj": ("o_proj",),
        "gate_up_proj": ("gate_proj", "up_proj"),
        "down_proj": ("down_proj",),
    },
}
FUSION["w8a8"] = FUSION["hf"]
#: vLLM 0.6's own paged decode kernel (the xFormers backend's decode path): the vllm program, attention as
#: ``paged_attention_v2`` (a partition kernel + a reduce kernel)
FUSION["vllm-paged"] = FUSION["vllm"]
PROGRAMS = ("hf", "vllm", "vllm-paged", "w8a8")
PAGED_PARTITION_TOKENS = 512  # vLLM csrc/attention: PARTITION_SIZE of paged_attention_v2


class _Builder:
    """Collects kernels of one block as rows of (bytes, ops) arrays."""

    def __init__(self, m: int) -> None:
        self.m = m
        self.names: list[str] = []
        self.kinds: list[int] = []
        self.bytes: list[np.ndarray] = []
        self.ops: list[np.ndarray] = []
        self.params: list[tuple[int, int, int, int]] = []
        self.per_token: list[tuple[int, int, int, int]] = []

    def add(
        self,
        name: str,
        kind: int,
        n_bytes: np.ndarray | float,
        ops: np.ndarray | float = 0.0,
        params: tuple[int, int, int, int] = (0, 0, 0, 0),
        per_token: tuple[int, int, int, int] = (0, 0, 0, 0),
    ) -> None:
        """A kernel; ``params``: the parameter bytes (weights, metadata, bias, norm) included in ``n_bytes``;
        ``per_token``: those it reads per token computed (the embedding rows gathered)."""
        self.names.append(name)
        self.kinds.append(kind)
        self.bytes.append(np.broadcast_to(np.asarray(n_bytes, dtype=np.float64), (self.m,)))
        self.ops.append(np.broadcast_to(np.asarray(ops, dtype=np.float64), (self.m,)))
        self.params.append(params)
        self.per_token.append(per_token)

    def elt(self, name: str, read: np.ndarray | float, write: np.ndarray | float, norm: int = 0) -> None:
        self.add(name, ELT, np.asarray(read) + np.asarray(write) + norm, params=(0, 0, 0, norm))

    def build(self) -> Block:
        if not self.names:
            return Block(
                (),
                np.zeros(0, dtype=np.int8),
                np.zeros((0, self.m)),
                np.zeros((0, self.m)),
                np.zeros((0, 4), np.int64),
                np.zeros((0, 4), np.int64),
            )
        return Block(
            tuple(self.names),
            np.array(self.kinds, dtype=np.int8),
            np.vstack(self.bytes),
            np.vstack(self.ops),
            np.array(self.params, dtype=np.int64).reshape(-1, 4),
            np.array(self.per_token, dtype=np.int64).reshape(-1, 4),
        )


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
    g: Graph  # the decode graph: matrices, biases, gains (per-channel fp16 convention)

    def linears(self, names: tuple[str, ...]) -> list[Op]:
        ops = [self.g.find(n) for n in names if self.g.has(n)]
        return ops

    def norm_bytes(self, name: str, part: str = "layer") -> int:
        return self.g.find(name, part).bytes.norm


def _gemm_ops(b: _Builder, name: str, ops: list[Op], rows: np.ndarray, act_in_bytes: float = ACT_BYTES) -> None:
    """One GEMM kernel computing the graph linears ``ops`` (outputs concatenated): their weights, scales and
    biases read once, activations in and out, 2 ops per MAC."""
    if not ops:
        return
    k_in = ops[0].in_features
    k_out = sum(o.out_features for o in ops)
    w, m, bb = (sum(o.bytes.weights for o in ops), sum(o.bytes.metadata for o in ops), sum(o.bytes.bias for o in ops))
    b.add(
        name,
        GEMM,
        w + m + bb + rows * (k_in * act_in_bytes + k_out * ACT_BYTES),
        2.0 * rows * k_in * k_out,
        params=(w, m, bb, 0),
    )


def _gemm(
    b: _Builder, s: _Shapes, name: str, rows: np.ndarray, act_in_bytes: float = ACT_BYTES, framework: str = "hf"
) -> None:
    """The GEMM kernel ``name`` of ``framework`` (its graph operators from :data:`FUSION`)."""
    _gemm_ops(b, name, s.linears(FUSION[framework][name]), rows, act_in_bytes)


def _hf_rmsnorm(b: _Builder, s: _Shapes, name: str, n: np.ndarray, gains: int, width: int | None = None) -> None:
    """transformers RMSNorm: to fp32, pow, mean, +eps, rsqrt, mul, to half, *gain (8 kernels); ``gains``: the
    graph's bytes of its gain vector (LayerNorm: gain and bias)."""
    w = s.h if width is None else width
    x16, x32, v32 = n * w * ACT_BYTES, n * w * FP32_BYTES, n * FP32_BYTES
    b.elt(f"{name}.to_fp32", x16, x32)
    b.elt(f"{name}.pow", x32, x32)
    b.elt(f"{name}.mean", x32, v32)
    b.elt(f"{name}.add_eps", v32, v32)
    b.elt(f"{name}.rsqrt", v32, v32)
    b.elt(f"{name}.mul", x32 + v32, x32)
    b.elt(f"{name}.to_half", x32, x16)
    b.elt(f"{name}.gain", x16, x16, norm=gains)


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
    _hf_rmsnorm(b, s, "input_norm", n, s.norm_bytes("attn_norm"))
    if w8a8:
        _act_quant(b, s, "qkv_in", n, s.h)
    for name in ("q_proj", "k_proj", "v_proj"):
        _gemm(b, s, name, n, act_in)
    if s.g.has("q_norm"):  # Qwen3: per-head RMSNorm of q and k
        _hf_rmsnorm(b, s, "q_norm", n, s.norm_bytes("q_norm"), s.q)
        _hf_rmsnorm(b, s, "k_norm", n, s.norm_bytes("k_norm"), s.kv)
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
    _gemm(b, s, "o_proj", n, act_in)
    b.elt("residual_1", 2 * n * s.h * ACT_BYTES, n * s.h * ACT_BYTES)
    _hf_rmsnorm(b, s, "post_norm", n, s.norm_bytes("ffn_norm"))
    if w8a8:
        _act_quant(b, s, "mlp_in", n, s.h)
    if s.g.has("gate_proj"):
        _gemm(b, s, "gate_proj", n, act_in)
        b.elt("silu", n * s.i * ACT_BYTES, n * s.i * ACT_BYTES)
        _gemm(b, s, "up_proj", n, act_in)
        b.elt("mul", 2 * n * s.i * ACT_BYTES, n * s.i * ACT_BYTES)
    else:  # ungated MLP: up, activation
        _gemm(b, s, "up_proj", n, act_in)
        b.elt("act", n * s.i * ACT_BYTES, n * s.i * ACT_BYTES)
    if w8a8:
        _act_quant(b, s, "down_in", n, s.i)
    _gemm(b, s, "down_proj", n, act_in)
    b.elt("residual_2", 2 * n * s.h * ACT_BYTES, n * s.h * ACT_BYTES)


def _vllm_layer(b: _Builder, s: _Shapes, p: Pass, paged_v2: bool = False) -> None:
    n = p.new_tokens
    x = (2 * n * s.h * ACT_BYTES, 2 * n * s.h * ACT_BYTES)
    b.elt("fused_add_rmsnorm_1", *x, norm=s.norm_bytes("attn_norm"))
    _gemm(b, s, "qkv_proj", n, framework="vllm")
    if s.g.has("q_norm"):
        b.elt(
            "qk_norm",
            n * (s.q + s.kv) * ACT_BYTES,
            n * (s.q + s.kv) * ACT_BYTES,
            norm=s.norm_bytes("q_norm") + s.norm_bytes("k_norm"),
        )
    b.elt("rotary", n * (s.q + s.kv) * ACT_BYTES, n * (s.q + s.kv) * ACT_BYTES)
    b.elt("reshape_and_cache", n * 2 * s.kv * ACT_BYTES, n * 2 * s.kv * s.kb)
    b.add("attention", ATTN, p.kv_tokens * 2 * s.kv * s.kb + 2 * n * s.q * ACT_BYTES, 4.0 * s.q * p.attn_pairs)
    if paged_v2:  # paged_attention_v2: partial results per 512-key partition, then a reduce kernel
        heads = s.q // s.head_dim
        parts = p.kv_tokens / PAGED_PARTITION_TOKENS
        b.elt("attention.reduce", parts * heads * (s.head_dim * ACT_BYTES + 2 * FP32_BYTES), n * s.q * ACT_BYTES)
    _gemm(b, s, "o_proj", n, framework="vllm")
    b.elt("fused_add_rmsnorm_2", *x, norm=s.norm_bytes("ffn_norm"))
    _gemm(b, s, "gate_up_proj", n, framework="vllm")
    if s.g.has("gate_proj"):
        b.elt("silu_and_mul", 2 * n * s.i * ACT_BYTES, n * s.i * ACT_BYTES)
    else:
        b.elt("act", n * s.i * ACT_BYTES, n * s.i * ACT_BYTES)
    _gemm(b, s, "down_proj", n, framework="vllm")


def build_program(llm: LlmSpec, program: str, p: Pass, weight_bits: int, kv_bits: int, head: str = "auto") -> Program:
    """The kernels of one forward pass of ``llm`` in ``program`` ("hf", "vllm" or "w8a8").

    ``head``: "auto" runs the model's own output head (an LM head on ``p.head_rows`` rows, or a PRM value head on
    every token), "none" skips the final norm and the head (an ingest pass whose logits are discarded).

    Every kernel's bytes and operations are affine in the pass's counts (:data:`FEATURES`), so the recipe is
    evaluated once per (LLM, program, precision, head) into coefficient tables (:func:`program_template`) and a
    pass costs a few array operations; :func:`evaluate_program` is the direct evaluation the tests compare with.
    """
    return program_template(llm, program, weight_bits, kv_bits, head).instantiate(p)


@functools.lru_cache(maxsize=256)
def program_template(llm: LlmSpec, program: str, weight_bits: int, kv_bits: int, head: str = "auto") -> ProgramTemplate:
    """Coefficient tables of :func:`evaluate_program` (evaluated at the origin and at each unit feature)."""
    k = len(FEATURES)
    basis = np.zeros((k, k + 1))
    basis[np.arange(k), np.arange(1, k + 1)] = 1.0
    probe = Pass(
        new_tokens=basis[0], seqs=1, attn_pairs=basis[1], kv_tokens=basis[2], cached_tokens=basis[3], head_rows=basis[4]
    )
    direct = evaluate_program(llm, program, probe, weight_bits, kv_bits, head)
    return ProgramTemplate(
        _BlockTemplate.of(direct.prologue),
        _BlockTemplate.of(direct.layer),
        _BlockTemplate.of(direct.epilogue),
        direct.layers,
    )


def evaluate_program(
    llm: LlmSpec, program: str, p: Pass, weight_bits: int, kv_bits: int, head: str = "auto"
) -> Program:
    """The kernel recipe evaluated directly on ``p`` (the reference of :func:`build_program`)."""
    if head not in ("auto", "none"):
        raise HwmodelError(f"head must be 'auto' or 'none', got {head!r}")
    if program not in PROGRAMS:
        raise HwmodelError(f"unknown kernel program {program!r}; expected {', '.join(PROGRAMS)}")
    if llm.experts:
        raise HwmodelError(
            f"GPU kernel lists: {llm.name} is a mixture of experts, which they do not lower yet "
            f"(bounds and the streaming FPGA back-end do)"
        )
    if llm.lowering_gaps:  # issue 26 families: refuse rather than drop their extra parameters
        raise HwmodelError(
            f"GPU kernel lists: {llm.name} has {', '.join(llm.lowering_gaps)}, not lowered "
            f"here yet (bounds and the operator graph handle them)"
        )
    g = build_graph(llm, per_channel(weight_bits, kv_bits), "decode", 1, 0)
    s = _Shapes(
        h=llm.hidden,
        q=llm.q_dim,
        kv=llm.kv_dim,
        i=llm.intermediate,
        head_dim=llm.head_dim,
        wb=weight_bits / 8,
        kb=kv_bits / 8,
        quantized=weight_bits < 16,
        qkv_bias=llm.qkv_bias,
        gqa=llm.kv_heads < llm.heads,
        g=g,
    )
    m = len(p.new_tokens)
    n = p.new_tokens
    eager_hf = program in ("hf", "w8a8")

    pro = _Builder(m)
    emb = g.find("embed", "prologue").bytes  # one row (+ its scale) per token, the graph's gather
    pro.add(
        "embedding",
        ELT,
        n * (8 + emb.weights + emb.metadata) + n * s.h * ACT_BYTES,
        per_token=(emb.weights, emb.metadata, 0, 0),
    )
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
        _vllm_layer(lay, s, p, paged_v2=(program == "vllm-paged"))

    epi = _Builder(m)
    if head != "none":
        # an LM head computes the rows it is asked for; a PRM value head scores every token (vLLM pooling ALL)
        rows = p.head_rows if llm.output_head == "lm" else p.new_tokens
        gains = s.norm_bytes("final_norm", "epilogue")
        if eager_hf:
            _hf_rmsnorm(epi, s, "final_norm", rows, gains)
        else:
            epi.elt("final_norm", 2 * rows * s.h * ACT_BYTES, rows * s.h * ACT_BYTES, norm=gains)
        head_op = next(o for o in g.epilogue if o.kind == "head")
        if llm.output_head == "lm":
            _gemm_ops(epi, "lm_head", [head_op], rows)
            if eager_hf:  # logits to fp32, greedy argmax, generate() bookkeeping (ids, mask, stopping criteria)
                logits = rows * llm.vocab
                epi.elt("logits_float", logits * ACT_BYTES, logits * FP32_BYTES)
                epi.elt("argmax", logits * FP32_BYTES, rows * 8)
                for k in ("cat_ids", "cat_mask", "isin_eos", "and", "unfinished", "max"):
                    epi.elt(f"generate.{k}", rows * 8 + 64, rows * 8)
        else:  # Linear(hidden, 1) value head (+ scales when quantized), sigmoid of the scores
            _gemm_ops(epi, "value_head", [head_op], rows)
            epi.elt("sigmoid", rows * ACT_BYTES, rows * ACT_BYTES)
    return Program(
        prologue=pro.build(),
        layer=lay.build(),
        epilogue=epi.build(),
        layers=llm.layers,
        rows=np.maximum(n, 1.0),
        rows_per_seq=np.maximum(n / p.seqs, 1.0),
    )
