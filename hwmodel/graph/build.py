"""Build the operator graph of one forward pass of an LLM under a quantization scheme.

Phases (``n`` new tokens after ``ctx`` cached ones, one sequence):

* ``decode(ctx)``: one token; the output head runs on it;
* ``prefill(n, ctx)``: ``n`` tokens; the output head runs on the last one (the next-token logits);
* ``ingest(n, ctx)``: ``n`` tokens whose logits are discarded: no final norm, no head, no sampling;
* ``score(n, ctx)``: a PRM pass: ``n`` tokens, the value head on the last one.

What is counted, per decoder layer (the HF modelling code of each family; shared/research/workload.md):
input norm; q/k/v projections (+ biases); optional per-head q/k norms; RoPE on q and k; attention over the
cached keys and the new ones (causal, optionally a sliding window of ``W`` keys: a query at position ``p`` sees
``min(p + 1, W)`` keys); o projection; residual add; post-attention norm; the MLP — gated (gate, up, act x up,
down), ungated (up, act, down) or a mixture of experts (router, the chosen experts' MLPs, optional shared expert
with its sigmoid gate, weighted combine); residual add. Around the layers: the embedding gather of ``n`` rows
and, when the phase has a head, the final norm, the LM head or value head, and (LM head) the arg-max. The family
variants (learned positions, partial RoPE, parallel blocks, Gemma post-norms and soft-capping, interleaved
windows, multi-head latent attention, dense-first MoE) are listed with their operators in docs/graph.md.

Minimum traffic (what any device must move, the floor): every weight, scale, bias and gain used is read once per
pass; attention reads each cached K/V entry inside the window once (the new tokens' K/V are produced on chip)
and writes the new tokens' K and V. MoE at batch 1 reads only the experts that receive tokens; the expert choice
is an input (``routing``: tokens per expert, per layer) and defaults to **uniform routing**: token ``t`` of the
pass picks experts ``(t k + j) mod E`` for ``j < k`` (balanced and deterministic).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator
from typing import Any

from hwmodel.errors import HwmodelError
from hwmodel.graph.ops import Bytes, Op
from hwmodel.graph.quant import QuantScheme
from hwmodel.specs import LlmSpec

PHASES = ("decode", "prefill", "ingest", "score")


@dataclasses.dataclass(frozen=True)
class Graph:
    """One forward pass: prologue ops, one op tuple per decoder layer, epilogue ops."""

    llm: str
    quant: QuantScheme
    phase: str
    tokens: int
    ctx: int
    prologue: tuple[Op, ...]
    layers: tuple[tuple[Op, ...], ...]
    epilogue: tuple[Op, ...]

    def ops(self) -> Iterator[tuple[int, Op]]:
        """Every operator with its layer (-1: prologue, ``L``: epilogue), in execution order."""
        for op in self.prologue:
            yield -1, op
        for i, layer in enumerate(self.layers):
            for op in layer:
                yield i, op
        for op in self.epilogue:
            yield len(self.layers), op

    def _layer_groups(self) -> list[tuple[tuple[Op, ...], int]]:
        groups: dict[int, list[Any]] = {}
        for layer in self.layers:
            groups.setdefault(id(layer), [layer, 0])[1] += 1
        return [(g[0], g[1]) for g in groups.values()]

    @functools.cached_property
    def bytes(self) -> Bytes:
        """All bytes of the pass, by class."""
        total = sum((op.bytes for op in self.prologue + self.epilogue), Bytes())
        for layer, count in self._layer_groups():
            total = total + sum((op.bytes for op in layer), Bytes()) * count
        return total

    @functools.cached_property
    def macs(self) -> int:
        total = sum(op.macs for op in self.prologue + self.epilogue)
        for layer, count in self._layer_groups():
            total += count * sum(op.macs for op in layer)
        return total

    @functools.cached_property
    def elementwise(self) -> int:
        total = sum(op.elementwise for op in self.prologue + self.epilogue)
        for layer, count in self._layer_groups():
            total += count * sum(op.elementwise for op in layer)
        return total

    def by_name(self, layer: int | None = None) -> dict[str, Op]:
        """Operators of one layer (``None``: layer 0), keyed by name."""
        src = self.layers[0 if layer is None else layer]
        return {op.name: op for op in src}

    def find(self, name: str, part: str = "layer") -> Op:
        """The operator ``name`` in layer 0 (``part='layer'``), the prologue or the epilogue."""
        src = {"layer": self.layers[0] if self.layers else (), "prologue": self.prologue, "epilogue": self.epilogue}[
            part
        ]
        for op in src:
            if op.name == name:
                return op
        raise KeyError(name)

    def has(self, name: str, part: str = "layer") -> bool:
        try:
            self.find(name, part)
        except KeyError:
            return False
        return True


# ============================================================================================== operators
def _linear(
    q: QuantScheme,
    name: str,
    tokens: int,
    in_f: int,
    out_f: int,
    bias: bool = False,
    expert: int = -1,
    kind: str = "linear",
) -> Op:
    return Op(
        name=name,
        kind=kind,
        tokens=tokens,
        in_features=in_f,
        out_features=out_f,
        macs=tokens * in_f * out_f,
        bias=bias,
        expert=expert,
        bytes=Bytes(
            weights=out_f * q.weight_row_bytes(in_f),
            metadata=out_f * q.meta_row_bytes(in_f),
            bias=out_f * q.vector_bytes if bias else 0,
            act_in=tokens * in_f * q.act_bytes,
            act_out=tokens * out_f * q.act_bytes,
        ),
    )


def _norm(m: LlmSpec, q: QuantScheme, name: str, tokens: int, width: int) -> Op:
    vecs = 2 if m.norm == "layer" else 1  # LayerNorm: gain and bias
    return Op(
        name=name,
        kind="norm",
        tokens=tokens,
        in_features=width,
        out_features=width,
        elementwise=tokens * width,
        bytes=Bytes(
            norm=vecs * width * q.vector_bytes,
            act_in=tokens * width * q.act_bytes,
            act_out=tokens * width * q.act_bytes,
        ),
    )


def _eltwise(q: QuantScheme, name: str, kind: str, tokens: int, width_in: int, width_out: int, work: int) -> Op:
    return Op(
        name=name,
        kind=kind,
        tokens=tokens,
        in_features=width_in,
        out_features=width_out,
        elementwise=work,
        bytes=Bytes(act_in=tokens * width_in * q.act_bytes, act_out=tokens * width_out * q.act_bytes),
    )


def attention_keys(m: LlmSpec, layer: int, n: int, ctx: int) -> tuple[int, int]:
    """(query-key pairs, cached tokens read) of one layer for ``n`` queries after ``ctx`` cached tokens."""
    w = m.window_of(layer)
    if w <= 0:
        return n * ctx + n * (n + 1) // 2, ctx
    pairs = sum(min(ctx + i + 1, w) for i in range(n)) if n <= 64 else _window_pairs(ctx, n, w)
    return pairs, min(ctx, w - 1)


def _window_pairs(ctx: int, n: int, w: int) -> int:
    """sum_{i<n} min(ctx + i + 1, w) in closed form."""
    # positions p = ctx+1 .. ctx+n; min(p, w)
    lo, hi = ctx + 1, ctx + n
    if hi <= w:
        return (lo + hi) * n // 2
    if lo >= w:
        return n * w
    below = w - lo  # p in [lo, w-1]
    return (lo + w - 1) * below // 2 + (n - below) * w


def _attention(m: LlmSpec, q: QuantScheme, layer: int, n: int, ctx: int) -> Op:
    pairs, cached = attention_keys(m, layer, n, ctx)
    return Op(
        name="attention",
        kind="attention",
        tokens=n,
        in_features=m.q_dim + 2 * m.kv_dim,
        out_features=m.q_dim,
        macs=2 * m.heads * m.head_dim * pairs,
        elementwise=m.heads * pairs,
        bytes=Bytes(
            kv_read=q.kv_bytes(2 * cached * m.kv_dim),
            kv_write=q.kv_bytes(2 * n * m.kv_dim),
            act_in=n * (m.q_dim + 2 * m.kv_dim) * q.act_bytes,
            act_out=n * m.q_dim * q.act_bytes,
        ),
    )


def uniform_routing(m: LlmSpec, n: int) -> tuple[int, ...]:
    """Tokens per expert when token ``t`` picks experts ``(t k + j) mod E``, ``j < k`` (balanced): the picks are
    the consecutive integers ``0 .. n k - 1`` taken mod ``E``."""
    e, picks = m.experts, n * m.experts_per_token
    return tuple(picks // e + (1 if i < picks % e else 0) for i in range(e))


def _mlp(m: LlmSpec, q: QuantScheme, n: int, width: int, prefix: str = "", expert: int = -1) -> list[Op]:
    h = m.hidden
    if m.mlp == "gated":
        return [
            _linear(q, prefix + "gate_proj", n, h, width, m.mlp_bias, expert),
            _linear(q, prefix + "up_proj", n, h, width, m.mlp_bias, expert),
            _eltwise(q, prefix + "act_mul", "act", n, 2 * width, width, 2 * n * width),
            _linear(q, prefix + "down_proj", n, width, h, m.mlp_bias, expert),
        ]
    return [
        _linear(q, prefix + "up_proj", n, h, width, m.mlp_bias, expert),
        _eltwise(q, prefix + "act", "act", n, width, width, n * width),
        _linear(q, prefix + "down_proj", n, width, h, m.mlp_bias, expert),
    ]


def _qk_norms(m: LlmSpec, q: QuantScheme, n: int) -> list[Op]:
    """Per-head RMSNorm on q and k before RoPE (Qwen3, Gemma 3): one gain vector of head_dim each."""
    return [
        Op(
            name=name,
            kind="qk_norm",
            tokens=n,
            in_features=w,
            out_features=w,
            elementwise=n * w,
            bytes=Bytes(norm=m.head_dim * q.vector_bytes, act_in=n * w * q.act_bytes, act_out=n * w * q.act_bytes),
        )
        for name, w in (("q_norm", m.q_dim), ("k_norm", m.kv_dim))
    ]


def _attention_ops(m: LlmSpec, q: QuantScheme, layer: int, n: int, ctx: int) -> list[Op]:
    """q/k/v projections, optional q/k norms, RoPE (over rotary_dim of each head) and attention."""
    h = m.hidden
    ops = [
        _linear(q, "q_proj", n, h, m.q_dim, m.qkv_bias),
        _linear(q, "k_proj", n, h, m.kv_dim, m.qkv_bias),
        _linear(q, "v_proj", n, h, m.kv_dim, m.qkv_bias),
    ]
    if m.qk_norm:
        ops += _qk_norms(m, q, n)
    if m.positions == "rope":  # over rotary_dim of each q and k head (all of it by default); the rest passes
        full, rw = m.q_dim + m.kv_dim, (m.heads + m.kv_heads) * (m.rotary_dim or m.head_dim)
        ops.append(_eltwise(q, "rope", "rope", n, full, full, n * rw))
    att = _attention(m, q, layer, n, ctx)
    if m.attn_softcap:  # cap x tanh(s / cap) on every score: divide, tanh, multiply
        att = dataclasses.replace(att, elementwise=att.elementwise + 3 * m.heads * attention_keys(m, layer, n, ctx)[0])
    return ops + [att]


def _mla_ops(m: LlmSpec, q: QuantScheme, layer: int, n: int, ctx: int) -> list[Op]:
    """Multi-head latent attention (DeepSeek-V2, arXiv 2405.04434 s2.1), in the absorbed form inference engines
    run: the cache holds one latent of kv_lora_rank and one rotary key of qk_rope_head_dim per token; W_UK is
    absorbed into the query and W_UV into the output (the paper's s2.1.3), so kv_b_proj's weights are read once per
    pass and applied to the n new tokens (same bytes and MACs as a linear of kv_lora_rank -> heads x (nope + v));
    attention scores each cached latent with heads x (kv_lora_rank + rope) MACs and mixes values with
    heads x kv_lora_rank."""
    h, r, c = m.hidden, m.qk_rope_head_dim, m.kv_lora_rank
    nope = m.head_dim - r
    ops: list[Op] = []
    if m.q_lora_rank:
        ops += [
            _linear(q, "q_a_proj", n, h, m.q_lora_rank),
            _norm(m, q, "q_a_norm", n, m.q_lora_rank),
            _linear(q, "q_b_proj", n, m.q_lora_rank, m.q_dim),
        ]
    else:
        ops.append(_linear(q, "q_proj", n, h, m.q_dim))
    ops += [_linear(q, "kv_a_proj", n, h, c + r), _norm(m, q, "kv_a_norm", n, c)]
    rw = m.heads * r + r
    ops.append(_eltwise(q, "rope", "rope", n, rw, rw, n * rw))
    ops.append(_linear(q, "kv_b_proj", n, c, m.heads * (nope + m.v_dim)))
    pairs, cached = attention_keys(m, layer, n, ctx)
    ops.append(
        Op(
            name="attention",
            kind="attention",
            tokens=n,
            in_features=m.heads * (c + r) + c + r,
            out_features=m.heads * c,
            macs=m.heads * (2 * c + r) * pairs,
            elementwise=m.heads * pairs,
            bytes=Bytes(
                kv_read=q.kv_bytes(cached * m.kv_cache_dim),
                kv_write=q.kv_bytes(n * m.kv_cache_dim),
                act_in=n * (m.heads * (c + r) + c + r) * q.act_bytes,
                act_out=n * m.heads * c * q.act_bytes,
            ),
        )
    )
    return ops


def _ffn_ops(m: LlmSpec, q: QuantScheme, layer: int, n: int, routing: tuple[int, ...] | None) -> list[Op]:
    h = m.hidden
    if m.is_dense_layer(layer):
        return _mlp(m, q, n, m.intermediate)
    counts = routing if routing is not None else uniform_routing(m, n)
    ops = [_linear(q, "router", n, h, m.experts, kind="router")]
    for e, t in enumerate(counts):
        if t:
            ops += _mlp(m, q, t, m.moe_intermediate, f"expert.{e}.", e)
    if m.shared_expert_intermediate:
        ops += _mlp(m, q, n, m.shared_expert_intermediate, "shared.")
        if m.shared_expert_gate:
            ops.append(_linear(q, "shared.gate", n, h, 1))
    ways = n * m.experts_per_token + (n if m.shared_expert_intermediate else 0)
    ops.append(_eltwise(q, "moe_combine", "moe_combine", n, h, h, ways * h))
    return ops


def _layer(m: LlmSpec, q: QuantScheme, layer: int, n: int, ctx: int, routing: tuple[int, ...] | None) -> tuple[Op, ...]:
    """One decoder layer: sequential (norm, attention, add, norm, MLP, add) or parallel (attention and MLP read
    one input: GPT-J with one shared norm, GPT-NeoX with two; a single add of both to the residual), with Gemma's
    post-norms on each branch output when ``post_norms``."""
    h = m.hidden
    ops = [_norm(m, q, "attn_norm", n, h)]
    ops += _mla_ops(m, q, layer, n, ctx) if m.is_mla else _attention_ops(m, q, layer, n, ctx)
    ops.append(_linear(q, "o_proj", n, m.attn_out_dim, h, m.o_bias))
    if m.post_norms:
        ops.append(_norm(m, q, "post_attn_norm", n, h))
    if m.block == "sequential":
        ops.append(_eltwise(q, "attn_add", "add", n, 2 * h, h, n * h))
    if m.block != "parallel-one-norm":
        ops.append(_norm(m, q, "ffn_norm", n, h))
    ops += _ffn_ops(m, q, layer, n, routing)
    if m.post_norms:
        ops.append(_norm(m, q, "post_ffn_norm", n, h))
    if m.block == "sequential":
        ops.append(_eltwise(q, "ffn_add", "add", n, 2 * h, h, n * h))
    else:  # x + attention(x') + mlp(x'')
        ops.append(_eltwise(q, "block_add", "add", n, 3 * h, h, 2 * n * h))
    return tuple(ops)


def _check(m: LlmSpec, phase: str, n: int, ctx: int, routing: tuple[tuple[int, ...], ...] | None) -> None:
    if phase not in PHASES:
        raise HwmodelError(f"graph phase must be one of {', '.join(PHASES)}, got {phase!r}")
    if n < 1:
        raise HwmodelError(f"a {phase} pass needs at least one token, got {n}")
    if phase == "decode" and n != 1:
        raise HwmodelError(f"a decode pass computes one token, got {n}")
    if ctx < 0:
        raise HwmodelError(f"context length must be >= 0, got {ctx}")
    if phase == "score" and m.output_head != "value":
        raise HwmodelError(f"'{m.name}' has no value head: score passes need a PRM (output_head = 'value')")
    if routing is not None:
        if not m.experts:
            raise HwmodelError(f"'{m.name}' is dense: an expert choice (routing) applies to MoE models only")
        if len(routing) != m.layers or any(len(r) != m.experts for r in routing):
            raise HwmodelError(f"routing must give {m.experts} token counts for each of {m.layers} layers")
        for r in routing:
            if sum(r) != n * m.experts_per_token or min(r) < 0 or max(r) > n:
                raise HwmodelError(
                    f"routing: each layer routes {n} token(s) to {m.experts_per_token} experts "
                    f"each (counts summing to {n * m.experts_per_token}, each at most {n}), got {r}"
                )


@functools.lru_cache(maxsize=4096)
def build_graph(
    llm: LlmSpec,
    quant: QuantScheme,
    phase: str,
    n: int = 1,
    ctx: int = 0,
    routing: tuple[tuple[int, ...], ...] | None = None,
) -> Graph:
    """The graph of one pass (memoized per arguments). See the module docstring for what is counted."""
    m, q = llm, quant
    _check(m, phase, n, ctx, routing)
    h = m.hidden
    prologue: tuple[Op, ...] = (
        Op(
            name="embed",
            kind="embed",
            tokens=n,
            in_features=m.vocab,
            out_features=h,
            bytes=Bytes(
                weights=n * q.weight_row_bytes(h), metadata=n * q.meta_row_bytes(h), act_out=n * h * q.act_bytes
            ),
        ),
    )
    if m.embed_scale:
        prologue += (_eltwise(q, "embed_scale", "scale", n, h, h, n * h),)
    if m.positions == "learned":  # the rows of the n positions, added to the token embeddings
        prologue += (
            Op(
                name="pos_embed",
                kind="embed",
                tokens=n,
                in_features=m.position_rows,
                out_features=h,
                bytes=Bytes(
                    weights=n * q.weight_row_bytes(h), metadata=n * q.meta_row_bytes(h), act_out=n * h * q.act_bytes
                ),
            ),
            _eltwise(q, "pos_add", "add", n, 2 * h, h, n * h),
        )
    layers: list[tuple[Op, ...]] = []
    memo: dict[tuple[Any, ...], tuple[Op, ...]] = {}
    for i in range(m.layers):
        r = routing[i] if routing is not None else None
        key = (m.window_of(i), m.is_dense_layer(i), r)
        if key not in memo:
            memo[key] = _layer(m, q, i, n, ctx, r)
        layers.append(memo[key])
    epilogue: tuple[Op, ...] = ()
    if phase != "ingest":
        head = _linear(
            q,
            "lm_head" if m.output_head == "lm" else "value_head",
            1,
            h,
            m.head_out_channels,
            bias=m.output_head == "value" or m.lm_head_bias,
            kind="head",
        )
        epilogue = (_norm(m, q, "final_norm", 1, h), head)
        if m.final_softcap and m.output_head == "lm":  # cap x tanh(z / cap) on every logit
            epilogue += (_eltwise(q, "logit_softcap", "softcap", 1, m.vocab, m.vocab, 3 * m.vocab),)
        if m.output_head == "lm":
            epilogue += (_eltwise(q, "argmax", "sample", 1, m.vocab, 1, m.vocab),)
    return Graph(
        llm=m.name, quant=q, phase=phase, tokens=n, ctx=ctx, prologue=prologue, layers=tuple(layers), epilogue=epilogue
    )


def decode(llm: LlmSpec, quant: QuantScheme, ctx: int, routing: tuple[tuple[int, ...], ...] | None = None) -> Graph:
    """One decoded token after ``ctx`` cached ones."""
    return build_graph(llm, quant, "decode", 1, ctx, routing)


def prefill(
    llm: LlmSpec, quant: QuantScheme, n: int, ctx: int = 0, routing: tuple[tuple[int, ...], ...] | None = None
) -> Graph:
    return build_graph(llm, quant, "prefill", n, ctx, routing)


def ingest(
    llm: LlmSpec, quant: QuantScheme, n: int, ctx: int = 0, routing: tuple[tuple[int, ...], ...] | None = None
) -> Graph:
    return build_graph(llm, quant, "ingest", n, ctx, routing)


def score(
    llm: LlmSpec, quant: QuantScheme, n: int, ctx: int = 0, routing: tuple[tuple[int, ...], ...] | None = None
) -> Graph:
    return build_graph(llm, quant, "score", n, ctx, routing)


# ============================================================================================== parameters
@functools.lru_cache(maxsize=256)
def resident_param_bytes(llm: LlmSpec, quant: QuantScheme) -> Bytes:
    """Bytes of every parameter the device must hold: all layers with *all* experts, the whole embedding table,
    the head (a tied LM head shares the embedding table: its metadata only)."""
    m, q = llm, quant
    h = m.hidden
    all_experts = tuple(1 for _ in range(m.experts)) if m.experts else None

    def params(i: int) -> Bytes:
        b = sum((op.bytes for op in _layer(m, q, i, 1, 0, None if m.is_dense_layer(i) else all_experts)), Bytes())
        return Bytes(weights=b.weights, metadata=b.metadata, bias=b.bias, norm=b.norm)

    dense = m.dense_layers if m.experts else 0
    layer = params(m.layers - 1) * (m.layers - dense) + (params(0) * dense if dense else Bytes())
    rows = m.vocab + (m.position_rows if m.positions == "learned" else 0)
    embed = Bytes(weights=rows * q.weight_row_bytes(h), metadata=rows * q.meta_row_bytes(h))
    head = _linear(q, "head", 1, h, m.head_out_channels, bias=m.output_head == "value" or m.lm_head_bias).bytes
    head = Bytes(
        weights=0 if (m.output_head == "lm" and m.tied_embeddings) else head.weights,
        metadata=0 if (m.output_head == "lm" and m.tied_embeddings) else head.metadata,
        bias=head.bias,
    )
    final = Bytes(norm=(2 if m.norm == "layer" else 1) * h * q.vector_bytes)
    return layer + embed + head + final
