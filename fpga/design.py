"""Streaming decode-accelerator designs: TOML -> a frozen, validated :class:`StreamingDesign`.

A design maps every operator of a decoder token onto an *engine*. An engine with one operator kind is spatial;
one shared by several is temporal (it runs them one after another, in token order). Each engine has MAC/element
lanes, HBM ports (count, width, request size, buffer depth, outstanding limit) and a pipeline latency. Engines
exchange activations through FIFOs of ``fifo_depth`` blocks. Designs are ``dataclasses.replace``-able, so a sweep
can vary lanes, ports, width, clock, bits and FIFO depths; :func:`validate_design` checks one against its board.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hwmodel.errors import HwmodelError, SpecError, UnknownNameError
from hwmodel.schema import build, one_of, plain, positive, read_toml
from hwmodel.specs import KIND_WORDS, BoardSpec, LlmSpec, library

DESIGN_DIR = Path(__file__).resolve().parent / "designs"

#: Operators of a decoder token, in token order. Per layer: ``LAYER_OPS``; around the layers: embed / tail.
LAYER_OPS = ("attn_norm", "qkv", "rope", "attention", "o_proj", "attn_add", "ffn_norm", "gate_up", "silu_mul",
             "down", "ffn_add")
HEAD_OPS = ("embed",)
TAIL_OPS = ("final_norm", "lm_head", "argmax")
ALL_OPS = HEAD_OPS + LAYER_OPS + TAIL_OPS
#: Operators that stream weights (or the KV cache) from HBM and so need an engine with ports.
HBM_OPS = ("embed", "qkv", "attention", "o_proj", "gate_up", "down", "lm_head")
MATVEC_OPS = ("qkv", "o_proj", "gate_up", "down", "lm_head")
VALID_BITS = (4, 8, 16)


class DesignError(HwmodelError):
    """A design that cannot be built or does not fit its board; the message names the design, field and numbers."""


def _non_negative(v: Any) -> str | None:
    return None if v >= 0 else "a number >= 0"


def _bits(v: Any) -> str | None:
    return None if v in VALID_BITS else f"one of {VALID_BITS}"


def _width(v: Any) -> str | None:
    return None if v in (32, 64, 128, 256, 512, 1024) else "a port width of 32, 64, 128, 256, 512 or 1024 bits"


@dataclasses.dataclass(frozen=True, kw_only=True)
class EngineSpec:
    """One engine: the operators it runs (in token order), its lanes and its HBM ports."""

    name: str = plain(doc="engine name")
    ops: tuple[str, ...] = plain(doc=f"operators mapped to it, from {', '.join(ALL_OPS)}")
    lanes: int = plain(doc="MACs per cycle (matrix-vector, attention) or elements per cycle (vector operators)")
    ports: int = plain(default=0, doc="HBM ports, each bound to its own pseudo-channel")
    port_width_bits: int = plain(default=512, check=_width, unit="bit", doc="kernel-side AXI data width")
    burst_bytes: int = plain(default=4096, unit="B",
                             doc="bytes of one read request: an HLS m_axi burst (<= 64 KB), which the adapter and "
                                 "the controller split into AXI4 (4 KB) and AXI3 (16-beat) bursts")
    buffer_depth: int = plain(default=4, doc="read buffer of each port, in requests (prefetch depth)")
    max_outstanding: int = plain(default=4, doc="read requests in flight per port")
    pipeline_latency_cycles: int = plain(default=16, check=_non_negative, unit="cycles",
                                         doc="cycles from a block's last issue cycle to its result")
    order: str = plain(default="output", check=one_of("output", "input"),
                       doc="matrix-vector loop order: output-stationary or input-stationary")

    @property
    def port_bytes(self) -> int:
        return self.port_width_bits // 8


@dataclasses.dataclass(frozen=True, kw_only=True)
class StreamingDesign:
    """A fully-streaming batch-1 decode accelerator: weights and KV cache stream from HBM, activations stay on
    chip."""

    name: str = plain(doc="design name")
    display_name: str = plain(default="", doc="human-readable name")
    notes: str = plain(default="", doc="free text: where the design comes from")
    board: str = plain(doc="FPGA board spec name")
    llm: str = plain(doc="LLM spec name")
    clock_hz: float = plain(check=positive, unit="Hz", doc="kernel clock")
    weight_bits: int = plain(check=_bits, doc="weight precision (int4, int8, fp16)")
    act_bits: int = plain(check=_bits, doc="activation precision")
    kv_bits: int = plain(check=_bits, doc="KV-cache precision")
    act_quant: str = plain(default="dynamic", check=one_of("dynamic", "static"),
                           doc="per-token dynamic activation scales need the whole input vector before a "
                               "matrix-vector product starts; static ones let input-stationary engines stream")
    softmax: str = plain(default="two-pass", check=one_of("two-pass", "online"),
                         doc="attention softmax: scores of all tokens, then V; or online (K and V blocks interleaved)")
    vector_chunk: int = plain(default=64, doc="elements per activation block emitted by vector operators")
    fifo_depth: int = plain(default=8, doc="blocks each inter-engine activation FIFO holds")
    fifo_latency_cycles: int = plain(default=2, doc="cycles an activation block takes through an inter-engine FIFO")
    max_ctx: int = plain(default=4096, doc="KV-cache capacity the design reserves in HBM, tokens")
    engines: tuple[EngineSpec, ...] = plain(doc="the engines")
    origin: str = dataclasses.field(default="", compare=False, metadata={"toml": False})

    # ---- lookups
    def engine_of(self, op: str) -> EngineSpec:
        for e in self.engines:
            if op in e.ops:
                return e
        raise DesignError(f"design '{self.name}': operator '{op}' is not mapped to any engine")

    def engine_index(self, name: str) -> int:
        for i, e in enumerate(self.engines):
            if e.name == name:
                return i
        raise UnknownNameError("engine", name, [e.name for e in self.engines])

    def with_engine(self, name: str, **changes: Any) -> StreamingDesign:
        """A copy with one engine's fields replaced (for sweeps)."""
        engines = tuple(dataclasses.replace(e, **changes) if e.name == name else e for e in self.engines)
        if engines == self.engines and changes:
            self.engine_index(name)
        return dataclasses.replace(self, engines=engines)

    @property
    def total_ports(self) -> int:
        return sum(e.ports for e in self.engines)

    def board_spec(self) -> BoardSpec:
        return library().board(self.board)

    def llm_spec(self) -> LlmSpec:
        return library().llm(self.llm)


def design_names() -> list[str]:
    return sorted(p.stem for p in DESIGN_DIR.glob("*.toml"))


def load_design(name_or_path: str | Path) -> StreamingDesign:
    """A built-in design by name (``draft-u280``, ``draft-v80``, ``flexllm-u280``) or a TOML file path; checked for
    structure (every operator mapped once, positive sizes). Use :func:`validate_design` for the board checks."""
    path = Path(name_or_path)
    if not (path.suffix == ".toml" or path.exists()):
        path = DESIGN_DIR / f"{name_or_path}.toml"
        if not path.exists():
            raise UnknownNameError("streaming design", str(name_or_path), design_names())
    table = read_toml(path)
    design = build(StreamingDesign, table, path=path)
    design = dataclasses.replace(design, origin=str(path))
    check_structure(design, where=str(path))
    lib = library()
    for field, kind in (("board", "fpga-board"), ("llm", "llm")):
        if getattr(design, field) not in lib.names(kind):
            raise SpecError(path, field, f"a {KIND_WORDS[kind]} spec name ({', '.join(lib.names(kind))})",
                            getattr(design, field))
    return design


def _problems(d: StreamingDesign) -> Iterator[str]:
    seen: dict[str, str] = {}
    names = [e.name for e in d.engines]
    if len(set(names)) != len(names):
        yield f"engine names must be unique, got {names}"
    for e in d.engines:
        for op in e.ops:
            if op not in ALL_OPS:
                yield f"engine '{e.name}': unknown operator '{op}' (known: {', '.join(ALL_OPS)})"
            elif op in seen:
                yield f"operator '{op}' is mapped to two engines ('{seen[op]}' and '{e.name}')"
            seen[op] = e.name
        if e.lanes <= 0:
            yield f"engine '{e.name}': lanes must be > 0, got {e.lanes}"
        if e.ports < 0:
            yield f"engine '{e.name}': ports must be >= 0, got {e.ports}"
        if any(op in HBM_OPS for op in e.ops) and e.ports == 0:
            yield (f"engine '{e.name}' runs {', '.join(op for op in e.ops if op in HBM_OPS)}, which stream from HBM,"
                   f" but has 0 ports")
        if e.ports:
            if e.buffer_depth < 1:
                yield f"engine '{e.name}': buffer_depth (port FIFO depth) must be >= 1, got {e.buffer_depth}"
            if e.max_outstanding < 1:
                yield f"engine '{e.name}': max_outstanding must be >= 1, got {e.max_outstanding}"
            if not 32 <= e.burst_bytes <= 65536 or e.burst_bytes % 32:
                yield f"engine '{e.name}': burst_bytes must be a multiple of 32 in [32, 65536], got {e.burst_bytes}"
    missing = [op for op in ALL_OPS if op not in seen]
    if missing:
        yield f"operators not mapped to any engine: {', '.join(missing)}"
    if d.fifo_depth < 1:
        yield f"fifo_depth must be >= 1 (a FIFO of depth 0 cannot pass data), got {d.fifo_depth}"
    if d.fifo_latency_cycles < 1:
        yield f"fifo_latency_cycles must be >= 1, got {d.fifo_latency_cycles}"
    if d.vector_chunk < 1:
        yield f"vector_chunk must be >= 1, got {d.vector_chunk}"
    if d.max_ctx < 0:
        yield f"max_ctx must be >= 0, got {d.max_ctx}"
    if d.act_bits not in (4, 8, 16):
        yield f"act_bits must be 4, 8 or 16, got {d.act_bits}"


def check_structure(design: StreamingDesign, where: str | None = None) -> None:
    """Raise DesignError on the first structural problem (unmapped operator, zero lanes, FIFO depth 0...)."""
    for problem in _problems(design):
        raise DesignError(f"{where or 'design ' + repr(design.name)}: {problem}")
