"""The spec library: FPGA boards, GPUs, links and LLM architectures as validated, frozen dataclasses.

Built-in specs are TOML files inside the packages (``fpga/boards``, ``gpu/devices``, ``interconnect/links``,
``hwmodel/llms``). Users add their own with ``--spec-dir DIR`` (repeatable) or the ``HWMODEL_SPEC_PATH``
environment variable (directories separated by ``os.pathsep``); a user spec with the name of a built-in one
replaces it. Every numeric field carries its source (see :mod:`hwmodel.schema`); every file is validated when
the library is first used, so a broken spec fails at load with the file, the field and what was expected.
"""
from __future__ import annotations

import dataclasses
import functools
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

from hwmodel.errors import HwmodelError, SpecError, UnknownNameError
from hwmodel.schema import (
    fraction,
    internal,
    non_negative,
    one_of,
    plain,
    positive,
    read_toml,
    build,
    sourced,
)

ARCHITECTURES = ("llama", "mistral", "qwen2", "qwen3", "mixtral", "qwen2_moe", "qwen3_moe", "opt", "gpt2", "gptj",
                 "gpt_neox", "phi3", "gemma2", "gemma3_text", "deepseek_v2")
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


def _name_check(v: str) -> str | None:
    return None if _NAME_RE.match(v) else "a lower-case name of letters, digits, '.', '_' or '-'"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Spec:
    """Fields common to every spec: identity, where it was loaded from, and the source of each value."""

    KIND: ClassVar[str] = ""
    kind: str = plain(doc="spec kind: llm, fpga-board, gpu or link")
    name: str = plain(check=_name_check, doc="the name used on the command line")
    display_name: str = plain(doc="human-readable name")
    notes: str = plain(default="", doc="free text")
    origin: str = internal(default="")
    sources: Mapping[str, str] = internal(default_factory=dict)

    def source_of(self, field: str) -> str:
        """Where the value of dotted ``field`` comes from."""
        return self.sources.get(field, "")


# ================================================================================================ LLMs
@dataclasses.dataclass(frozen=True, kw_only=True)
class LlmSpec(Spec):
    """A decoder-only transformer: shapes and the architectural choices the operator graph needs.

    Families: LLaMA / Mistral / Qwen2 / Qwen3 (dense), Mixtral / Qwen2-MoE / Qwen3-MoE (mixture of experts). The
    fields added for the newer families all have defaults that describe the original Qwen2 / LLaMA layer
    (RMSNorm, gated SiLU MLP, no q/k norm, full attention, dense), so older spec files load unchanged. Bytes and
    MACs are never counted here: :mod:`hwmodel.graph` counts them from these shapes.
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
    rms_norm_eps: float | None = sourced(default=None, check=positive,
                                         doc="epsilon of the norms (RMSNorm or LayerNorm); numerics only")
    rope_theta: float | None = sourced(default=None, check=positive,
                                       doc="RoPE base; required with positions = 'rope', absent otherwise")
    max_position: int = sourced(check=positive, unit="tokens")
    positions: str = sourced(default="rope", check=one_of("rope", "learned", "none"),
                             doc="rope (rotary, no parameters), learned (a position table added to the embedding: "
                                 "OPT, GPT-2) or none")
    position_offset: int = sourced(default=0, check=non_negative,
                                   doc="extra rows of a learned position table (OPT: 2)")
    rotary_dim: int = sourced(default=0, check=non_negative,
                              doc="dimensions of each head RoPE rotates; 0 = all of head_dim (GPT-J rotary_dim, "
                                  "GPT-NeoX rotary_pct x head_dim)")
    block: str = sourced(default="sequential", check=one_of("sequential", "parallel", "parallel-one-norm"),
                         doc="sequential (x + attn, then + MLP), parallel (attention and MLP read the same input, "
                             "each its own norm: GPT-NeoX) or parallel-one-norm (one shared norm: GPT-J)")
    post_norms: bool = sourced(default=False, doc="a norm on the attention output and on the MLP output before "
                                                  "each residual add (Gemma 2/3 sandwich norms)")
    embed_scale: bool = sourced(default=False, doc="embeddings multiplied by sqrt(hidden) (Gemma)")
    attn_softcap: float = sourced(default=0.0, check=non_negative,
                                  doc="attention logits soft-capped as cap x tanh(s / cap); 0 = none (Gemma 2)")
    final_softcap: float = sourced(default=0.0, check=non_negative,
                                   doc="output logits soft-capped as cap x tanh(z / cap); 0 = none (Gemma 2)")
    full_attention_every: int = sourced(default=0, check=non_negative,
                                        doc="with a sliding window, layer i attends fully when (i + 1) is a "
                                            "multiple of this (Gemma 2: 2, Gemma 3: 6); 0 = no interleave")
    lm_head_bias: bool = sourced(default=False, doc="the LM head carries a bias (GPT-J)")
    dense_layers: int = sourced(default=0, check=non_negative,
                                doc="the first N layers of an MoE model use a dense MLP of width intermediate "
                                    "(DeepSeek first_k_dense_replace)")
    kv_lora_rank: int = sourced(default=0, check=non_negative,
                                doc="multi-head latent attention (DeepSeek-V2): width of the cached KV latent; "
                                    "0 = ordinary attention")
    q_lora_rank: int = sourced(default=0, check=non_negative, doc="MLA query latent width; 0 = a direct q_proj")
    qk_rope_head_dim: int = sourced(default=0, check=non_negative,
                                    doc="MLA: rotary part of head_dim, shared by all heads in the cache")
    v_head_dim: int = sourced(default=0, check=non_negative, doc="MLA: value head width; 0 = head_dim")
    # ---- newer families (defaults: the Qwen2 / LLaMA layer)
    norm: str = sourced(default="rms", check=one_of("rms", "layer"), doc="RMSNorm or LayerNorm (gain + bias)")
    mlp: str = sourced(default="gated", check=one_of("gated", "plain"),
                       doc="gated (gate, up, act x up, down) or plain (up, act, down) MLP")
    hidden_act: str = sourced(default="silu", check=one_of("silu", "gelu", "gelu_pytorch_tanh", "relu"),
                              doc="MLP activation function")
    o_bias: bool = sourced(default=False, doc="o projection carries a bias")
    mlp_bias: bool = sourced(default=False, doc="MLP projections carry biases")
    qk_norm: bool = sourced(default=False, doc="per-head RMSNorm on q and k before RoPE (Qwen3)")
    sliding_window: int = sourced(default=0, check=non_negative, unit="tokens",
                                  doc="keys a query attends to (itself included); 0 = full causal attention")
    full_attention_layers: int = sourced(default=0, check=non_negative,
                                         doc="the first N layers use full attention even with a sliding window "
                                             "(HF Qwen2 max_window_layers)")
    experts: int = sourced(default=0, check=non_negative, doc="routed experts per MoE layer; 0 = dense MLP")
    experts_per_token: int = sourced(default=0, check=non_negative, doc="top-k experts each token is routed to")
    moe_intermediate: int = sourced(default=0, check=non_negative, doc="intermediate width of one expert")
    shared_expert_intermediate: int = sourced(default=0, check=non_negative,
                                              doc="intermediate width of the always-on shared expert; 0 = none")
    shared_expert_gate: bool = sourced(default=False, doc="sigmoid gate Linear(hidden, 1) on the shared expert")

    _DEFAULTED: ClassVar[tuple[str, ...]] = (
        "norm", "mlp", "hidden_act", "o_bias", "mlp_bias", "qk_norm", "sliding_window", "full_attention_layers",
        "experts", "experts_per_token", "moe_intermediate", "shared_expert_intermediate", "shared_expert_gate",
        "positions", "position_offset", "rotary_dim", "block", "post_norms", "embed_scale", "attn_softcap",
        "final_softcap", "full_attention_every", "lm_head_bias", "dense_layers", "kv_lora_rank", "q_lora_rank",
        "qk_rope_head_dim", "v_head_dim")

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
                yield "rotary_dim", f"an even number at most head_dim ({self.head_dim}) (RoPE rotates pairs)", \
                    self.rotary_dim
            if (self.rotary_dim or self.head_dim) % 2:
                yield "head_dim", "an even number (RoPE rotates pairs of dimensions)", self.head_dim
        elif self.rope_theta is not None or self.rotary_dim:
            yield "rope_theta" if self.rope_theta is not None else "rotary_dim", \
                f"absent with positions = {self.positions!r} (no rotary embedding)", \
                self.rope_theta if self.rope_theta is not None else self.rotary_dim
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
                yield "qk_rope_head_dim", f"an even number in (0, head_dim = {self.head_dim}) for MLA", \
                    self.qk_rope_head_dim
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
        gaps = [("a learned position table", self.positions == "learned"), ("Gemma post-norms", self.post_norms),
                ("one shared norm for attention and MLP", self.block == "parallel-one-norm"),
                ("an LM-head bias", self.lm_head_bias), ("multi-head latent attention", self.is_mla),
                ("dense first layers in an MoE", self.dense_layers > 0)]
        return tuple(name for name, on in gaps if on)

    def is_dense_layer(self, layer: int) -> bool:
        """Layer ``layer`` runs the dense MLP (every layer of a dense model; the first dense_layers of an MoE)."""
        return not self.experts or layer < self.dense_layers

    @property
    def head_out_channels(self) -> int:
        return self.vocab if self.output_head == "lm" else 1

    def _params(self) -> Any:
        from hwmodel.graph import params_of

        return params_of(self)

    @property
    def linear_params(self) -> int:
        """Weights of all decoder-layer projections, every expert and router included (from the graph)."""
        return self._params().weights

    @property
    def bias_params(self) -> int:
        return self._params().bias

    @property
    def norm_params(self) -> int:
        """Norm gains (and LayerNorm biases), q/k norm gains, the final norm."""
        return self._params().norm

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
    def total_params(self) -> int:
        """All parameters, a tied LM head counted once."""
        p = self._params()
        return p.weights + p.bias + p.norm + p.embed + p.head

    @property
    def kv_elements_per_token(self) -> int:
        """K and V elements (or MLA latents) one token adds to the cache, over all layers."""
        return self.layers * self.kv_cache_dim

    def kv_bytes(self, ctx_tokens: int, kv_bits: int) -> int:
        """Bytes of the KV cache of ``ctx_tokens`` tokens (all layers; a sliding window does not shrink the
        reservation here: the back-ends reserve the full context)."""
        from hwmodel.graph import kv_cache_bytes

        return kv_cache_bytes(self, kv_bits, ctx_tokens)


# ================================================================================================ links
@dataclasses.dataclass(frozen=True, kw_only=True)
class LinkSpec(Spec):
    """A point-to-point link (PCIe generation x width, or a network link): bandwidth and latency, one direction."""

    KIND: ClassVar[str] = "link"
    raw_bw_bytes_per_s: float = sourced(check=positive, unit="B/s", doc="signalling rate after line coding")
    effective_bw_bytes_per_s: float = sourced(check=positive, unit="B/s", doc="typical achieved DMA bandwidth")
    latency_s: float = sourced(check=non_negative, unit="s", doc="one-way latency of a transfer")

    def _validate(self) -> Iterator[tuple[str, str, object]]:
        if self.effective_bw_bytes_per_s > self.raw_bw_bytes_per_s:
            yield "effective_bw_bytes_per_s", f"at most raw_bw_bytes_per_s ({self.raw_bw_bytes_per_s:g})", \
                self.effective_bw_bytes_per_s


# ================================================================================================ FPGA boards
@dataclasses.dataclass(frozen=True, kw_only=True)
class HbmSpec:
    """High-bandwidth memory of an FPGA board, seen from the fabric (AXI / NoC ports into pseudo-channels).

    The DRAM timing (``t*_s``) is JEDEC-style data in seconds, converted to memory-side AXI cycles by rounding up
    (fpga/hbm/channel.py); the address map is the HBM IP's ``ADDR_BIT`` list (PG276), most significant bit first."""

    stacks: int = sourced(check=positive)
    pseudo_channels: int = sourced(check=positive)
    capacity_bytes: int = sourced(check=positive, unit="B")
    pc_peak_bw_bytes_per_s: float = sourced(check=positive, unit="B/s", doc="theoretical, per pseudo-channel")
    pc_measured_bw_bytes_per_s: float = sourced(check=positive, unit="B/s", doc="sustained, per pseudo-channel")
    axi_ports: int = sourced(check=positive, doc="fabric-side ports into the memory")
    axi_port_width_bits: int = sourced(check=positive, unit="bit")
    axi_clock_hz: float = sourced(check=positive, unit="Hz", doc="the memory-side port clock domain")
    port_bw_cap_bytes_per_s: float = sourced(check=positive, unit="B/s",
                                            doc="most one port can move (AXI width x clock, or a NoC link cap)")
    granule_bytes: int = sourced(check=positive, unit="B", doc="smallest access (AxSIZE), one column access")
    min_efficient_burst_bytes: int = sourced(check=positive, unit="B",
                                             doc="smallest burst at full linear rate: the AXI command rate")
    latency_page_hit_cycles: int = sourced(check=positive, unit="axi cycles")
    latency_page_closed_cycles: int = sourced(check=positive, unit="axi cycles", doc="measured; validation only")
    latency_page_miss_cycles: int = sourced(check=positive, unit="axi cycles", doc="measured; validation only")
    misaligned_efficiency: float = sourced(check=fraction, doc="efficiency of a non-granule-aligned access")
    axi3_burst_beats: int = sourced(check=positive, doc="longest AXI3 burst the controller takes (AxLEN + 1)")
    # ---- DRAM organisation, address map and controller (fpga/hbm/channel.py)
    banks: int = sourced(check=positive, doc="banks per pseudo-channel")
    bank_groups: int = sourced(check=positive, doc="bank groups per pseudo-channel")
    address_map: str = sourced(doc="HBM IP ADDR_BIT list, MSB first: RA (all row bits), BGi, BAi, CAi")
    controller_policy: str = sourced(check=one_of("in-order", "lookahead"),
                                     doc="in-order: every command in arrival order; lookahead: PRE/ACT of queued "
                                         "accesses issue early (PG276 look-ahead precharge/activate); column "
                                         "commands in the order the controller picks (fpga/hbm/scheduler.py)")
    # controller scheduling (fpga/hbm/scheduler.py); defaults are the HBM IP's (PG276 "HBM Reordering Options")
    request_reordering: bool = sourced(default=True, doc="PG276 Enable Request Reordering: the AXI command queue "
                                                         "reorders requests (data returns in order per AXI ID)")
    reorder_queue_depth: int = sourced(default=64, check=positive,
                                       doc="PG276: 64-entry AXI command (reorder) queue per pseudo-channel")
    # ---- JEDEC timing (seconds)
    tcl_s: float = sourced(check=positive, unit="s", doc="column command -> data (read latency)")
    trcd_s: float = sourced(check=positive, unit="s", doc="ACT -> column command, same bank")
    trp_s: float = sourced(check=positive, unit="s", doc="PRE -> ACT, same bank")
    tras_s: float = sourced(check=positive, unit="s", doc="ACT -> PRE, same bank")
    trc_s: float = sourced(check=positive, unit="s", doc="ACT -> ACT, same bank (>= tRAS + tRP)")
    tccds_s: float = sourced(check=positive, unit="s", doc="column -> column, different bank group")
    tccdl_s: float = sourced(check=positive, unit="s", doc="column -> column, same bank group")
    trrds_s: float = sourced(check=positive, unit="s", doc="ACT -> ACT, different bank group")
    trrdl_s: float = sourced(check=positive, unit="s", doc="ACT -> ACT, same bank group")
    tfaw_s: float = sourced(check=positive, unit="s", doc="window holding at most four ACTs")
    twtrs_s: float = sourced(check=positive, unit="s", doc="write data end -> read, different bank group")
    twtrl_s: float = sourced(check=positive, unit="s", doc="write data end -> read, same bank group")
    trtw_s: float = sourced(check=positive, unit="s", doc="read column -> write column")
    twr_s: float = sourced(check=positive, unit="s", doc="write data end -> PRE, same bank")
    trtp_s: float = sourced(check=positive, unit="s", doc="read column -> PRE, same bank")
    refresh_interval_s: float = sourced(check=positive, unit="s", doc="tREFI: one refresh every this long")
    refresh_cycle_s: float = sourced(check=positive, unit="s", doc="tRFC: the channel is blocked this long")
    # ---- fabric side
    switch_latency_cycles: int = sourced(check=non_negative, unit="axi cycles",
                                         doc="AXI switch / interconnect pipeline from the fabric port to the controller")
    switch_segment_ports: int = sourced(check=positive,
                                        doc="ports (and pseudo-channels) of one switch segment: local access")
    lateral_hop_cycles: int = sourced(check=non_negative, unit="axi cycles",
                                      doc="extra latency per lateral switch segment crossed")
    cdc_sync_cycles: int = sourced(check=non_negative, unit="cycles",
                                   doc="synchroniser stages of the asynchronous FIFO between kernel and AXI clocks")
    ports_per_pc: int = sourced(check=positive, doc="fabric ports that share one pseudo-channel's data bus")

    def _validate(self) -> Iterator[tuple[str, str, object]]:
        if self.pc_measured_bw_bytes_per_s > self.pc_peak_bw_bytes_per_s:
            yield "pc_measured_bw_bytes_per_s", f"at most pc_peak_bw_bytes_per_s ({self.pc_peak_bw_bytes_per_s:g})", \
                self.pc_measured_bw_bytes_per_s
        if not (self.latency_page_hit_cycles <= self.latency_page_closed_cycles <= self.latency_page_miss_cycles):
            yield "latency_page_closed_cycles", "page hit <= page closed <= page miss latency", \
                self.latency_page_closed_cycles
        if self.capacity_bytes % self.pseudo_channels:
            yield "capacity_bytes", f"a multiple of pseudo_channels ({self.pseudo_channels})", self.capacity_bytes
        if self.refresh_cycle_s >= self.refresh_interval_s:
            yield "refresh_cycle_s", f"below refresh_interval_s ({self.refresh_interval_s:g})", self.refresh_cycle_s
        if self.axi_ports % self.ports_per_pc or self.axi_ports // self.ports_per_pc != self.pseudo_channels:
            yield "ports_per_pc", f"axi_ports / pseudo_channels ({self.axi_ports} / {self.pseudo_channels})", \
                self.ports_per_pc
        if not 6.25e6 <= self.axi_clock_hz <= 4e9:
            yield "axi_clock_hz", "a memory-port clock in [6.25 MHz, 4 GHz] (MMCM floor; HBM AXI/NoC clocks are " \
                                  "hundreds of MHz)", self.axi_clock_hz
        if self.min_efficient_burst_bytes % self.granule_bytes:
            yield "min_efficient_burst_bytes", f"a multiple of granule_bytes ({self.granule_bytes})", \
                self.min_efficient_burst_bytes
        if self.axi_port_width_bits != 8 * self.granule_bytes:
            yield "axi_port_width_bits", f"8 x granule_bytes ({8 * self.granule_bytes}): one granule per AXI beat", \
                self.axi_port_width_bits
        wire = self.axi_port_width_bits / 8 * self.axi_clock_hz
        if self.port_bw_cap_bytes_per_s > wire * 1.0001:
            yield "port_bw_cap_bytes_per_s", f"at most axi_port_width_bits / 8 x axi_clock_hz ({wire:g})", \
                self.port_bw_cap_bytes_per_s
        # JEDEC relations between declared timings (derived vs declared, as Ramulator 2 checks its presets)
        for big, small, why in (("trc_s", None, "tRAS + tRP"), ("tras_s", "trcd_s", "tRCD"),
                                ("tccdl_s", "tccds_s", "tCCD_S"), ("trrdl_s", "trrds_s", "tRRD_S"),
                                ("twtrl_s", "twtrs_s", "tWTR_S"), ("tfaw_s", "trrds_s", "tRRD_S"),
                                ("refresh_cycle_s", "trc_s", "tRC (a refresh outlasts every bank timer)")):
            lo = self.tras_s + self.trp_s if small is None else getattr(self, small)
            if getattr(self, big) < lo * (1 - 1e-9):
                yield big, f"at least {why} ({lo:g} s)", getattr(self, big)
        if self.refresh_cycle_s < self.tfaw_s:
            yield "refresh_cycle_s", f"at least tFAW ({self.tfaw_s:g} s)", self.refresh_cycle_s
        from hwmodel.hbm_map import parse_address_map

        try:
            m = parse_address_map(self.address_map)
        except ValueError as exc:
            yield "address_map", str(exc), self.address_map
            return
        if 2 ** (m.bank_bits + m.bg_bits) != self.banks:
            yield "banks", f"2^(bank + bank-group bits of address_map) = {2 ** (m.bank_bits + m.bg_bits)}", self.banks
        if 2 ** m.bg_bits != self.bank_groups:
            yield "bank_groups", f"2^(bank-group bits of address_map) = {2 ** m.bg_bits}", self.bank_groups
        pc = self.capacity_bytes // self.pseudo_channels // self.ports_per_pc
        rows = pc // (self.row_bytes * self.banks) if self.row_bytes * self.banks else 0
        if rows < 1 or rows & (rows - 1) or rows * self.row_bytes * self.banks != pc:
            yield "address_map", (f"column and bank bits that divide a port's {pc} B share of a pseudo-channel into "
                                  f"a power of two of rows"), self.address_map

    @property
    def row_bytes(self) -> int:
        """DRAM page per bank: 2^(column bits of the address map) granules."""
        from hwmodel.hbm_map import parse_address_map

        return self.granule_bytes << parse_address_map(self.address_map).col_bits

    @property
    def command_cycles(self) -> int:
        """Fewest AXI cycles between the first column commands of two AXI bursts (PG276 min efficient burst)."""
        return self.min_efficient_burst_bytes // self.granule_bytes

    @property
    def peak_bw_bytes_per_s(self) -> float:
        return self.pc_peak_bw_bytes_per_s * self.pseudo_channels

    @property
    def measured_bw_bytes_per_s(self) -> float:
        return self.pc_measured_bw_bytes_per_s * self.pseudo_channels

    @property
    def pc_capacity_bytes(self) -> int:
        return self.capacity_bytes // self.pseudo_channels

    @property
    def axi_clock_period_s(self) -> float:
        return 1.0 / self.axi_clock_hz


@dataclasses.dataclass(frozen=True, kw_only=True)
class DdrSpec:
    """Board DDR (slow, large; the device memory of a card without HBM)."""

    capacity_bytes: int = sourced(check=non_negative, unit="B")
    bw_bytes_per_s: float = sourced(check=non_negative, unit="B/s", doc="theoretical peak of all channels")
    channels: int = sourced(default=0, check=non_negative, doc="DDR channels (banks); 0 = not stated")
    measured_bw_bytes_per_s: float | None = sourced(default=None, check=non_negative, unit="B/s",
                                                    doc="sustained bandwidth of all channels; absent = not measured "
                                                        "(the bounds then use the peak for both floors)")

    def _validate(self) -> Iterator[tuple[str, str, object]]:
        if self.measured_bw_bytes_per_s is not None and self.measured_bw_bytes_per_s > self.bw_bytes_per_s:
            yield "measured_bw_bytes_per_s", f"at most bw_bytes_per_s ({self.bw_bytes_per_s:g})", \
                self.measured_bw_bytes_per_s

    @property
    def sustained_bw_bytes_per_s(self) -> float:
        """The measured bandwidth, or the peak where none is declared."""
        return self.bw_bytes_per_s if self.measured_bw_bytes_per_s is None else self.measured_bw_bytes_per_s


@dataclasses.dataclass(frozen=True, kw_only=True)
class FpgaResources:
    """Programmable resources available to user kernels (after the shell/platform)."""

    lut: int = sourced(check=positive)
    ff: int = sourced(check=positive)
    dsp: int = sourced(check=positive)
    bram18k: int = sourced(check=non_negative, doc="18 Kb block RAMs")
    uram: int = sourced(check=non_negative, doc="288 Kb UltraRAMs")


@dataclasses.dataclass(frozen=True, kw_only=True)
class DspPacking:
    """Multiply-accumulates one DSP slice does per cycle, per operand precision."""

    int4_macs: int = sourced(check=positive)
    int8_macs: int = sourced(check=positive)
    fp16_macs: float = sourced(check=positive)

    def macs(self, bits: int) -> float:
        """MACs per DSP per cycle for weights of ``bits`` bits (4 -> int4 packing, 8 -> int8, 16 -> fp16)."""
        return {4: self.int4_macs, 8: self.int8_macs, 16: self.fp16_macs}[bits]


class MissingMemory:
    """Stands in for a memory section a board does not have (``[hbm]`` on a DDR-only card, ``[ddr]`` on an
    HBM-only one): false in a test, and any use of it raises one line naming the board and the section."""

    def __init__(self, section: str, board: str, origin: str) -> None:
        self._section, self._board, self._origin = section, board, origin

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"(no [{self._section}])"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise HwmodelError(f"board '{self._board}' ({self._origin or 'no file'}) has no [{self._section}] section: "
                           f"this needs a board with {self._section.upper()} (it asked for {self._section}.{name})")

    def __reduce__(self) -> tuple[Any, ...]:
        return (MissingMemory, (self._section, self._board, self._origin))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MissingMemory) and other._section == self._section

    def __hash__(self) -> int:
        return hash(("MissingMemory", self._section))


@dataclasses.dataclass(frozen=True, kw_only=True)
class BoardSpec(Spec):
    """An FPGA accelerator card. ``[hbm]`` and ``[ddr]`` are each optional (at least one): a card without one
    leaves the section out, and a model that needs it stops with one line naming the board."""

    KIND: ClassVar[str] = "fpga-board"
    part: str = sourced(doc="FPGA device part number")
    slrs: int = sourced(check=positive, doc="super logic regions (dies)")
    hbm: HbmSpec | None = None
    ddr: DdrSpec | None = None
    resources: FpgaResources
    dsp_packing: DspPacking
    typical_kernel_clock_hz: float = sourced(check=positive, unit="Hz")
    max_kernel_clock_hz: float = sourced(check=positive, unit="Hz", doc="fabric clock ceiling for the studies")
    host_link: str = sourced(doc="name of the link spec of the host interface")
    max_power_w: float = sourced(check=positive, unit="W")
    static_power_w: float = sourced(check=positive, unit="W",
                                    doc="the card idle with a bitstream loaded (HBM refreshed, PHYs up, fans)")
    price_usd: float = sourced(check=positive, unit="USD")

    def __post_init__(self) -> None:
        for section in ("hbm", "ddr"):  # (again after dataclasses.replace: the loader sets origin last)
            if getattr(self, section) is None or isinstance(getattr(self, section), MissingMemory):
                object.__setattr__(self, section, MissingMemory(section, self.name, self.origin))

    def _validate(self) -> Iterator[tuple[str, str, object]]:
        if not self.hbm and not self.ddr:
            yield "hbm", "an [hbm] or a [ddr] section (the card's device memory)", None
        if self.typical_kernel_clock_hz > self.max_kernel_clock_hz:
            yield "typical_kernel_clock_hz", f"at most max_kernel_clock_hz ({self.max_kernel_clock_hz:g})", \
                self.typical_kernel_clock_hz

    @property
    def memory_bytes(self) -> int:
        """Fast memory that holds weights and KV cache for decode (HBM; DDR on a card without HBM)."""
        return self.hbm.capacity_bytes if self.hbm else self.ddr.capacity_bytes

    def peak_ops_per_s(self, weight_bits: int, clock_hz: float | None = None) -> float:
        """All DSPs busy: 2 ops per MAC x MACs per DSP x DSPs x clock (the compute roof of the board)."""
        clock = self.typical_kernel_clock_hz if clock_hz is None else clock_hz
        return 2.0 * self.dsp_packing.macs(weight_bits) * self.resources.dsp * clock


# ================================================================================================ GPUs
@dataclasses.dataclass(frozen=True, kw_only=True)
class GpuSpec(Spec):
    """A GPU: memory, tensor-core peaks, power and price."""

    KIND: ClassVar[str] = "gpu"
    memory_bytes: int = sourced(check=positive, unit="B")
    mem_bw_bytes_per_s: float = sourced(check=positive, unit="B/s", doc="peak DRAM bandwidth")
    mem_bw_measured_bytes_per_s: float = sourced(check=positive, unit="B/s", doc="sustained (stream-like) bandwidth")
    fp16_flops: float = sourced(check=positive, unit="FLOP/s", doc="dense FP16/BF16 tensor peak")
    int8_ops: float = sourced(check=positive, unit="OP/s", doc="dense INT8 peak")
    tdp_w: float = sourced(check=positive, unit="W")
    idle_power_w: float = sourced(check=positive, unit="W")
    host_link: str = sourced(doc="name of the link spec of the host interface")
    price_usd: float = sourced(check=positive, unit="USD")

    def _validate(self) -> Iterator[tuple[str, str, object]]:
        if self.mem_bw_measured_bytes_per_s > self.mem_bw_bytes_per_s:
            yield "mem_bw_measured_bytes_per_s", f"at most mem_bw_bytes_per_s ({self.mem_bw_bytes_per_s:g})", \
                self.mem_bw_measured_bytes_per_s
        if self.idle_power_w >= self.tdp_w:
            yield "idle_power_w", f"below tdp_w ({self.tdp_w:g})", self.idle_power_w

    def peak_ops_per_s(self, weight_bits: int) -> float:
        """Tensor peak for the precision the weights run at: FP16 for 16-bit weights, INT8 for 8/4-bit (A8)."""
        return self.fp16_flops if weight_bits >= 16 else self.int8_ops


SPEC_KINDS: dict[str, type[Spec]] = {c.KIND: c for c in (LlmSpec, LinkSpec, BoardSpec, GpuSpec)}
_PKG_ROOT = Path(__file__).resolve().parent.parent
BUILTIN_DIRS: dict[str, Path] = {
    "llm": _PKG_ROOT / "hwmodel" / "llms",
    "fpga-board": _PKG_ROOT / "fpga" / "boards",
    "gpu": _PKG_ROOT / "gpu" / "devices",
    "link": _PKG_ROOT / "interconnect" / "links",
}
KIND_WORDS = {"llm": "LLM", "fpga-board": "FPGA board", "gpu": "GPU", "link": "link", "device": "device"}


def load_spec_file(path: Path | str, expected_kind: str | None = None) -> Spec:
    """Load one spec file; its ``kind`` field picks the dataclass."""
    path = Path(path)
    table = read_toml(path)
    kind = table.get("kind")
    if not isinstance(kind, str) or kind not in SPEC_KINDS:
        raise SpecError(path, "kind", "one of " + ", ".join(repr(k) for k in SPEC_KINDS), kind)
    if expected_kind is not None and kind != expected_kind:
        raise SpecError(path, "kind", repr(expected_kind) + " in this directory", kind)
    return build(SPEC_KINDS[kind], table, path=path)


class SpecLibrary:
    """All specs known to a run: the built-ins plus any user directories (later directories win)."""

    def __init__(self, extra_dirs: tuple[Path, ...] = ()) -> None:
        self._specs: dict[str, dict[str, Spec]] = {k: {} for k in SPEC_KINDS}
        for kind, folder in BUILTIN_DIRS.items():
            for path in sorted(folder.glob("*.toml")):
                self._add(load_spec_file(path, kind), builtin=True)
        for folder in extra_dirs:
            folder = Path(folder)
            if not folder.is_dir():
                raise SpecError(folder, None, "an existing directory of spec TOML files")
            for path in sorted(folder.rglob("*.toml")):
                self._add(load_spec_file(path), builtin=False)
        self._check_references()

    def _add(self, spec: Spec, builtin: bool) -> None:
        table = self._specs[spec.KIND]
        if spec.name in table and builtin:
            raise SpecError(spec.origin, "name", f"a name not already used by {table[spec.name].origin}", spec.name)
        table[spec.name] = spec

    def _check_references(self) -> None:
        links = self._specs["link"]
        for kind in ("fpga-board", "gpu"):
            for spec in self._specs[kind].values():
                link = spec.host_link  # type: ignore[attr-defined]
                if link not in links:
                    raise SpecError(spec.origin, "host_link", "the name of a link spec (" + ", ".join(sorted(links)) + ")",
                                    link)

    # ---- lookups
    def names(self, kind: str) -> list[str]:
        if kind == "device":
            return sorted([*self._specs["fpga-board"], *self._specs["gpu"]])
        return sorted(self._specs[kind])

    def get(self, kind: str, name: str) -> Any:
        if kind == "device":
            for k in ("fpga-board", "gpu"):
                if name in self._specs[k]:
                    return self._specs[k][name]
        elif name in self._specs[kind]:
            return self._specs[kind][name]
        raise UnknownNameError(KIND_WORDS[kind], name, self.names(kind))

    def find(self, name: str) -> Spec:
        """Any spec by name (for `specs show`)."""
        for table in self._specs.values():
            if name in table:
                return table[name]
        raise UnknownNameError("spec", name, [n for t in self._specs.values() for n in t])

    def all(self) -> list[Spec]:
        return [s for kind in SPEC_KINDS for _n, s in sorted(self._specs[kind].items())]

    def llm(self, name: str) -> LlmSpec:
        return self.get("llm", name)

    def board(self, name: str) -> BoardSpec:
        return self.get("fpga-board", name)

    def gpu(self, name: str) -> GpuSpec:
        return self.get("gpu", name)

    def link(self, name: str) -> LinkSpec:
        return self.get("link", name)

    def device(self, name: str) -> BoardSpec | GpuSpec:
        return self.get("device", name)


_extra_dirs: tuple[Path, ...] = ()


def extra_spec_dirs() -> tuple[Path, ...]:
    """The directories :func:`set_extra_spec_dirs` set (the CLI's ``--spec-dir``)."""
    return _extra_dirs


def set_extra_spec_dirs(dirs: tuple[Path, ...] | list[Path]) -> None:
    """Directories of user specs for :func:`library` (the CLI's ``--spec-dir``)."""
    global _extra_dirs
    _extra_dirs = tuple(Path(d) for d in dirs)
    _cached_library.cache_clear()


def _env_dirs() -> tuple[Path, ...]:
    raw = os.environ.get("HWMODEL_SPEC_PATH", "")
    return tuple(Path(p) for p in raw.split(os.pathsep) if p)


@functools.lru_cache(maxsize=8)
def _cached_library(dirs: tuple[Path, ...]) -> SpecLibrary:
    return SpecLibrary(dirs)


def library() -> SpecLibrary:
    """The spec library of this process: built-ins + HWMODEL_SPEC_PATH + --spec-dir (loaded once, validated)."""
    return _cached_library(_env_dirs() + _extra_dirs)
