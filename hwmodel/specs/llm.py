"""LLM specs: the shapes and architectural choices of a decoder-only transformer (:class:`LlmSpec`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import ClassVar

from hwmodel.schema import non_negative, one_of, positive, sourced
from hwmodel.specs.base import Spec

ARCHITECTURES = (
    "llama",
    "mistral",
    "qwen2",
    "qwen3",
    "mixtral",
    "qwen2_moe",
    "qwen3_moe",
    "opt",
    "gpt2",
    "gptj",
    "gpt_neox",
    "phi3",
    "gemma2",
    "gemma3_text",
    "deepseek_v2",
)


def kv_cache_bytes(llm: LlmSpec, kv_bits: int, tokens: int | float, layers: int | None = None) -> int | float:
    """Bytes of the K and V of ``tokens`` tokens in ``layers`` decoder layers (default: all) at ``kv_bits`` (the
    cache reservation; the graph's attention operators read the part inside their window)."""
    n_layers = llm.layers if layers is None else layers
    elems = tokens * n_layers * llm.kv_cache_dim * kv_bits
    return elems // 8 if isinstance(elems, int) else elems / 8


@dataclasses.dataclass(frozen=True, kw_only=True)
class LlmSpec(Spec):
    """A decoder-only transformer: shapes and the architectural choices the operator graph needs.

    Families: LLaMA / Mistral / Qwen2 / Qwen3 (dense), Mixtral / Qwen2-MoE / Qwen3-MoE (mixture of experts). The
    fields added for the newer families all have defaults that describe the original Qwen2 / LLaMA layer
    (RMSNorm, gated SiLU MLP, no q/k norm, full attention, dense), so older spec files load unchanged. Bytes and
    MACs are never counted here: :mod:`hwmodel.graph` counts them from these shapes (parameter counts:
    :func:`hwmodel.graph.params_of`); the one size kept here is the KV-cache reservation (:meth:`kv_bytes`).
    """

    KIND: ClassVar[str] = "llm"
    hf_id: str = sourced(doc="Hugging Face repository the shapes come from")
    architecture: str = sourced(check=one_of(*ARCHITECTURES), doc="model family (HF model_type)")
    layers: int = sourced(check=positive)
    hidden: int = sourced(check=positive, doc="model width")
    heads: int = sourced(check=positive, doc="query heads")
    kv_heads: int = sourced(check=positive, doc="key/value heads (GQA; 1 = MQA; heads = MHA)")
    head_dim: int = sourced(check=positive)
    intermediate: int = sourced(check=positive, doc="MLP intermediate width (dense layers)")
    vocab: int = sourced(check=positive)
    tied_embeddings: bool = sourced(doc="LM head shares the embedding matrix")
    qkv_bias: bool = sourced(doc="q/k/v projections carry a bias (Qwen2)")
    output_head: str = sourced(check=one_of("lm", "value"), doc="'lm' (vocab logits) or 'value' (PRM scalar)")
    rms_norm_eps: float | None = sourced(
        default=None, check=positive, doc="epsilon of the norms (RMSNorm or LayerNorm); numerics only"
    )
    rope_theta: float | None = sourced(
        default=None, check=positive, doc="RoPE base; required with positions = 'rope', absent otherwise"
    )
    max_position: int = sourced(check=positive, unit="tokens")
    positions: str = sourced(
        default="rope",
        check=one_of("rope", "learned", "none"),
        doc="rope (rotary, no parameters), learned (a position table added to the embedding: OPT, GPT-2) or none",
    )
    position_offset: int = sourced(default=0, check=non_negative, doc="extra rows of a learned position table (OPT: 2)")
    rotary_dim: int = sourced(
        default=0,
        check=non_negative,
        doc="dimensions of each head RoPE rotates; 0 = all of head_dim (GPT-J rotary_dim, "
        "GPT-NeoX rotary_pct x head_dim)",
    )
    block: str = sourced(
        default="sequential",
        check=one_of("sequential", "parallel", "parallel-one-norm"),
        doc="sequential (x + attn, then + MLP), parallel (attention and MLP read the same input, "
        "each its own norm: GPT-NeoX) or parallel-one-norm (one shared norm: GPT-J)",
    )
    post_norms: bool = sourced(
        default=False,
        doc="a norm on the attention output and on the MLP output before each residual add (Gemma 2/3 sandwich norms)",
    )
    embed_scale: bool = sourced(default=False, doc="embeddings multiplied by sqrt(hidden) (Gemma)")
    attn_softcap: float = sourced(
        default=0.0, check=non_negative, doc="attention logits soft-capped as cap x tanh(s / cap); 0 = none (Gemma 2)"
    )
    final_softcap: float = sourced(
        default=0.0, check=non_negative, doc="output logits soft-capped as cap x tanh(z / cap); 0 = none (Gemma 2)"
    )
    full_attention_every: int = sourced(
        default=0,
        check=non_negative,
        doc="with a sliding window, layer i attends fully when (i + 1) is a "
        "multiple of this (Gemma 2: 2, Gemma 3: 6); 0 = no interleave",
    )
    lm_head_bias: bool = sourced(default=False, doc="the LM head carries a bias (GPT-J)")
    dense_layers: int = sourced(
        default=0,
        check=non_negative,
        doc="the first N layers of an MoE model use a dense MLP of width intermediate (DeepSeek first_k_dense_replace)",
    )
    kv_lora_rank: int = sourced(
        default=0,
        check=non_negative,
        doc="multi-head latent attention (DeepSeek-V2): width of the cached KV latent; 0 = ordinary attention",
    )
    q_lora_rank: int = sourced(default=0, check=non_negative, doc="MLA query latent width; 0 = a direct q_proj")
    qk_rope_head_dim: int = sourced(
        default=0, check=non_negative, doc="MLA: rotary part of head_dim, shared by all heads in the cache"
    )
    v_head_dim: int = sourced(default=0, check=non_negative, doc="MLA: value head width; 0 = head_dim")
    # ---- newer families (defaults: the Qwen2 / LLaMA layer)
    norm: str = sourced(default="rms", check=one_of("rms", "layer"), doc="RMSNorm or LayerNorm (gain + bias)")
    mlp: str = sourced(
        default="gated",
        check=one_of("gated", "plain"),
        doc="gated (gate, up, act x up, down) or plain (up, act, down) MLP",
    )
    hidden_act: str = sourced(
        default="silu", check=one_of("silu", "gelu", "gelu_pytorch_tanh", "relu"), doc="MLP activation function"
    )
    o_bias: bool = sourced(default=False, doc="o projection carries a bias")
    mlp_bias: bool = sourced(default=False, doc="MLP projections carry biases")
    qk_norm: bool = sourced(default=False, doc="per-head RMSNorm on q and k before RoPE (Qwen3)")
    sliding_window: int = sourced(
        default=0,
        check=non_negative,
        unit="tokens",
        doc="keys a query attends to (itself included); 0 = full causal attention",
    )
    full_attention_layers: int = sourced(
        default=0,
        check=non_negative,
        doc="the first N layers use full attention even with a sliding window (HF Qwen2 max_window_layers)",
    )
    experts: int = sourced(default=0, check=non_negative, doc="routed experts per MoE layer; 0 = dense MLP")
    experts_per_token: int = sourced(default=0, check=non_negative, doc="top-k experts each token is routed to")
    moe_intermediate: int = sourced(default=0, check=non_negative, doc="intermediate width of one expert")
    shared_expert_intermediate: int = sourced(
        default=0, check=non_negative, doc="intermediate width of the always-on shared expert; 0 = none"
    )
    shared_expert_gate: bool = sourced(default=False, doc="sigmoid gate Linear(hidden, 1) on the shared expert")

    _DEFAULTED: ClassVar[tuple[str, ...]] = (
        "norm",
        "mlp",
        "hidden_act",
        "o_bias",
        "mlp_bias",
        "qk_norm",
        "sliding_window",
        "full_attention_layers",
        "experts",
        "experts_per_token",
        "moe_intermediate",
        "shared_expert_intermediate",
        "shared_expert_gate",
        "positions",
        "position_offset",
        "rotary_dim",
        "block",
        "post_norms",
        "embed_scale",
        "attn_softcap",
        "final_softcap",
        "full_attention_every",
        "lm_head_bias",
        "dense_layers",
        "kv_lora_rank",
        "q_lora_rank",
        "qk_rope_head_dim",
        "v_head_dim",
    )

    def source_of(self, field: str) -> str:
        src = super().source_of(field)
        if not src and field in self._DEFAULTED:
            return "default: the Qwen2/LLaMA decoder layer (not set in the spec file)"
        return src

    def _validate(self) -> Iterator[tuple[str, str, object]]:
        if self.kv_heads > self.heads:
            yield "kv_heads", f"at most heads ({self.heads})", self.kv_heads
        if self.heads % self.kv_heads:
            yield "kv_heads", f"a divisor of heads ({self.heads})", self.kv_heads
        if self.output_head == "value" and self.tied_embeddings:
            yield "tied_embeddings", "false for a value-head model (no LM head to tie)", True
        if self.experts:
            if not 1 <= self.experts_per_token <= self.experts:
                yield "experts_per_token", f"between 1 and experts ({self.experts})", self.experts_per_token
            if self.moe_intermediate < 1:
                yield "moe_intermediate", "a positive expert width when experts > 0", self.moe_intermediate
        else:
            for f in ("experts_per_token", "moe_intermediate", "shared_expert_intermediate"):
                if getattr(self, f):
                    yield f, "0 for a dense model (experts = 0)", getattr(self, f)
            if self.shared_expert_gate:
                yield "shared_expert_gate", "false for a dense model (experts = 0)", True
        if self.shared_expert_gate and not self.shared_expert_intermediate:
            yield "shared_expert_gate", "false without a shared expert (shared_expert_intermediate = 0)", True
        if self.full_attention_layers > self.layers:
            yield "full_attention_layers", f"at most layers ({self.layers})", self.full_attention_layers
        if self.positions == "rope":
            if self.rope_theta is None:
                yield "rope_theta", "this field to be present when positions = 'rope' (the RoPE base)", None
            if self.rotary_dim % 2 or self.rotary_dim > self.head_dim:
                yield (
                    "rotary_dim",
                    f"an even number at most head_dim ({self.head_dim}) (RoPE rotates pairs)",
                    self.rotary_dim,
                )
            if (self.rotary_dim or self.head_dim) % 2:
                yield "head_dim", "an even number (RoPE rotates pairs of dimensions)", self.head_dim
        elif self.rope_theta is not None or self.rotary_dim:
            yield (
                "rope_theta" if self.rope_theta is not None else "rotary_dim",
                f"absent with positions = {self.positions!r} (no rotary embedding)",
                self.rope_theta if self.rope_theta is not None else self.rotary_dim,
            )
        if self.position_offset and self.positions != "learned":
            yield "position_offset", "0 unless positions = 'learned'", self.position_offset
        if self.full_attention_every and not self.sliding_window:
            yield "full_attention_every", "0 without a sliding window", self.full_attention_every
        if self.dense_layers and not self.experts:
            yield "dense_layers", "0 for a dense model (experts = 0)", self.dense_layers
        if self.dense_layers > self.layers:
            yield "dense_layers", f"at most layers ({self.layers})", self.dense_layers
        if self.kv_lora_rank:
            if not 0 < self.qk_rope_head_dim < self.head_dim or self.qk_rope_head_dim % 2:
                yield (
                    "qk_rope_head_dim",
                    f"an even number in (0, head_dim = {self.head_dim}) for MLA",
                    self.qk_rope_head_dim,
                )
            if self.kv_heads != self.heads:
                yield "kv_heads", f"heads ({self.heads}) for MLA (every head reads the shared latent)", self.kv_heads
        else:
            for f in ("q_lora_rank", "qk_rope_head_dim", "v_head_dim"):
                if getattr(self, f):
                    yield f, "0 without multi-head latent attention (kv_lora_rank = 0)", getattr(self, f)

    # ---- derived shapes
    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def v_dim(self) -> int:
        """Width of one head's value (MLA may differ from the q/k head_dim)."""
        return self.v_head_dim or self.head_dim

    @property
    def attn_out_dim(self) -> int:
        """Width of the attention output the o projection reads: heads x value head width."""
        return self.heads * self.v_dim

    @property
    def kv_cache_dim(self) -> int:
        """Cache elements one token adds per layer: K and V of every KV head, or MLA's shared latent and rotary
        key (DeepSeek-V2 caches kv_lora_rank + qk_rope_head_dim)."""
        return self.kv_lora_rank + self.qk_rope_head_dim if self.is_mla else 2 * self.kv_dim

    def window_of(self, layer: int) -> int:
        """Keys a query of decoder layer ``layer`` attends to (0: all; full causal attention)."""
        if self.sliding_window == 0 or layer < self.full_attention_layers:
            return 0
        if self.full_attention_every and (layer + 1) % self.full_attention_every == 0:
            return 0
        return self.sliding_window

    @property
    def lowering_gaps(self) -> tuple[str, ...]:
        """Features (issue 26) that change a layer's parameters or structure beyond the Llama/Qwen layer the
        FPGA and GPU lowerings replicate; a back-end that lowers only that layer refuses a model with any of
        them, naming them (the graph and bounds handle all)."""
        gaps = [
            ("a learned position table", self.positions == "learned"),
            ("Gemma post-norms", self.post_norms),
            ("one shared norm for attention and MLP", self.block == "parallel-one-norm"),
            ("an LM-head bias", self.lm_head_bias),
            ("multi-head latent attention", self.is_mla),
            ("dense first layers in an MoE", self.dense_layers > 0),
        ]
        return tuple(name for name, on in gaps if on)

    def is_dense_layer(self, layer: int) -> bool:
        """Layer ``layer`` runs the dense MLP (every layer of a dense model; the first dense_layers of an MoE)."""
        return not self.experts or layer < self.dense_layers

    @property
    def head_out_channels(self) -> int:
        return self.vocab if self.output_head == "lm" else 1

    @property
    def position_rows(self) -> int:
        """Rows of a learned position table: max_position + position_offset (OPT keeps 2 extra)."""
        return self.max_position + self.position_offset if self.positions == "learned" else 0

    @property
    def embedding_params(self) -> int:
        """The token embedding table and a learned position table."""
        return (self.vocab + self.position_rows) * self.hidden

    @property
    def head_params(self) -> int:
        """Output head weights: vocab x hidden (LM head, tied or not), or hidden for a value head."""
        return self.head_out_channels * self.hidden

    @property
    def kv_elements_per_token(self) -> int:
        """K and V elements (or MLA latents) one token adds to the cache, over all layers."""
        return self.layers * self.kv_cache_dim

    def kv_bytes(self, ctx_tokens: int, kv_bits: int) -> int:
        """Bytes of the KV cache of ``ctx_tokens`` tokens (all layers; a sliding window does not shrink the
        reservation here: the back-ends reserve the full context)."""
        return kv_cache_bytes(self, kv_bits, ctx_tokens)
