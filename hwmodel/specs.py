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

from hwmodel.errors import SpecError, UnknownNameError
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
    """A decoder-only transformer (Qwen2 / LLaMA family): shapes, and parameter counts derived from them."""

    KIND: ClassVar[str] = "llm"
    hf_id: str = sourced(doc="Hugging Face repository the shapes come from")
    architecture: str = sourced(check=one_of("qwen2", "llama"), doc="model family")
    layers: int = sourced(check=positive)
    hidden: int = sourced(check=positive, doc="model width")
    heads: int = sourced(check=positive, doc="query heads")
    kv_heads: int = sourced(check=positive, doc="key/value heads (GQA)")
    head_dim: int = sourced(check=positive)
    intermediate: int = sourced(check=positive, doc="SwiGLU intermediate width")
    vocab: int = sourced(check=positive)
    tied_embeddings: bool = sourced(doc="LM head shares the embedding matrix")
    qkv_bias: bool = sourced(doc="q/k/v projections carry a bias (Qwen2)")
    output_head: str = sourced(check=one_of("lm", "value"), doc="'lm' (vocab logits) or 'value' (PRM scalar)")
    rms_norm_eps: float = sourced(check=positive)
    rope_theta: float = sourced(check=positive)
    max_position: int = sourced(check=positive, unit="tokens")

    def _validate(self) -> Iterator[tuple[str, str, object]]:
        if self.kv_heads > self.heads:
            yield "kv_heads", f"at most heads ({self.heads})", self.kv_heads
        if self.heads % self.kv_heads:
            yield "kv_heads", f"a divisor of heads ({self.heads})", self.kv_heads
        if self.output_head == "value" and self.tied_embeddings:
            yield "tied_embeddings", "false for a value-head model (no LM head to tie)", True
        if self.head_dim % 2:
            yield "head_dim", "an even number (RoPE rotates pairs of dimensions)", self.head_dim

    # ---- derived shapes
    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def linear_shapes(self) -> dict[str, tuple[int, int]]:
        """Per decoder layer: projection name -> (in_features, out_features)."""
        h, q, kv, i = self.hidden, self.q_dim, self.kv_dim, self.intermediate
        return {"q_proj": (h, q), "k_proj": (h, kv), "v_proj": (h, kv), "o_proj": (q, h),
                "gate_proj": (h, i), "up_proj": (h, i), "down_proj": (i, h)}

    @property
    def linear_params_per_layer(self) -> int:
        return sum(a * b for a, b in self.linear_shapes.values())

    @property
    def linear_params(self) -> int:
        """Weights of all decoder-layer projections (what streams from memory every token)."""
        return self.layers * self.linear_params_per_layer

    @property
    def out_channels_per_layer(self) -> int:
        return sum(b for _a, b in self.linear_shapes.values())

    @property
    def bias_params(self) -> int:
        return self.layers * (self.q_dim + 2 * self.kv_dim) if self.qkv_bias else 0

    @property
    def norm_params(self) -> int:
        """RMSNorm gains: two per layer plus the final norm."""
        return (2 * self.layers + 1) * self.hidden

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden

    @property
    def head_params(self) -> int:
        """Output head: vocab x hidden LM head (shared with the embedding if tied), or a hidden->1 value head."""
        return self.vocab * self.hidden if self.output_head == "lm" else self.hidden + 1

    @property
    def head_out_channels(self) -> int:
        return self.vocab if self.output_head == "lm" else 1

    @property
    def total_params(self) -> int:
        """All parameters, a tied LM head counted once."""
        head = 0 if (self.output_head == "lm" and self.tied_embeddings) else self.head_params
        return self.linear_params + self.bias_params + self.norm_params + self.embedding_params + head

    @property
    def kv_elements_per_token(self) -> int:
        """K and V elements one token adds to the cache, over all layers."""
        return 2 * self.layers * self.kv_dim

    def kv_bytes(self, ctx_tokens: int, kv_bits: int) -> int:
        return ctx_tokens * self.kv_elements_per_token * kv_bits // 8


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
    """High-bandwidth memory of an FPGA board, seen from the fabric (AXI / NoC ports into pseudo-channels)."""

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
    granule_bytes: int = sourced(check=positive, unit="B", doc="smallest access (AxSIZE)")
    min_efficient_burst_bytes: int = sourced(check=positive, unit="B", doc="burst size that reaches sustained BW")
    latency_page_hit_cycles: int = sourced(check=positive, unit="axi cycles")
    latency_page_closed_cycles: int = sourced(check=positive, unit="axi cycles")
    latency_page_miss_cycles: int = sourced(check=positive, unit="axi cycles")
    row_bytes: int = sourced(check=positive, unit="B", doc="DRAM page (row buffer) size per pseudo-channel")
    misaligned_efficiency: float = sourced(check=fraction, doc="efficiency of a non-granule-aligned access")
    # ---- cycle-level channel timing (fpga/hbm.py)
    axi3_burst_beats: int = sourced(check=positive, doc="longest AXI3 burst the controller takes (AxLEN + 1)")
    command_cycles: int = sourced(check=positive, unit="axi cycles",
                                  doc="fewest data-bus cycles one AXI3 burst occupies (command rate limit)")
    refresh_interval_s: float = sourced(check=positive, unit="s", doc="tREFI: one refresh every this long")
    refresh_cycle_s: float = sourced(check=positive, unit="s", doc="tRFC: the channel is blocked this long")
    row_switch_cycles: int = sourced(check=non_negative, unit="axi cycles",
                                     doc="data-bus bubble a row change costs in a busy stream (fitted)")
    rw_turnaround_cycles: int = sourced(check=non_negative, unit="axi cycles", doc="bubble on read<->write switch")
    switch_latency_cycles: int = sourced(check=non_negative, unit="axi cycles",
                                         doc="AXI switch / interconnect pipeline from the fabric port to the controller")
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
    """Board DDR (slow, large)."""

    capacity_bytes: int = sourced(check=non_negative, unit="B")
    bw_bytes_per_s: float = sourced(check=non_negative, unit="B/s")


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


@dataclasses.dataclass(frozen=True, kw_only=True)
class BoardSpec(Spec):
    """An FPGA accelerator card."""

    KIND: ClassVar[str] = "fpga-board"
    part: str = sourced(doc="FPGA device part number")
    slrs: int = sourced(check=positive, doc="super logic regions (dies)")
    hbm: HbmSpec
    ddr: DdrSpec
    resources: FpgaResources
    dsp_packing: DspPacking
    typical_kernel_clock_hz: float = sourced(check=positive, unit="Hz")
    max_kernel_clock_hz: float = sourced(check=positive, unit="Hz", doc="fabric clock ceiling for the studies")
    host_link: str = sourced(doc="name of the link spec of the host interface")
    max_power_w: float = sourced(check=positive, unit="W")
    price_usd: float = sourced(check=positive, unit="USD")

    def _validate(self) -> Iterator[tuple[str, str, object]]:
        if self.typical_kernel_clock_hz > self.max_kernel_clock_hz:
            yield "typical_kernel_clock_hz", f"at most max_kernel_clock_hz ({self.max_kernel_clock_hz:g})", \
                self.typical_kernel_clock_hz

    @property
    def memory_bytes(self) -> int:
        """Fast memory that holds weights and KV cache for decode (HBM)."""
        return self.hbm.capacity_bytes

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
