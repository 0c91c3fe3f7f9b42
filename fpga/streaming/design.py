"""Streaming decode-accelerator designs: TOML -> a frozen, validated :class:`StreamingDesign`.

A design maps every operator of a decoder token onto an *engine*. An engine with one operator kind is spatial;
one shared by several is temporal (it runs them one after another, in token order). Each engine has MAC/element
lanes, HBM ports (count, width, request size, buffer depth, outstanding limit) and a pipeline latency. Engines
exchange activations through FIFOs of ``fifo_depth`` blocks. Designs are ``dataclasses.replace``-able, so a sweep
can vary lanes, ports, width, clock, bits and FIFO depths; :func:`validate_design` checks one against its board.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fpga.streaming.unit_spec import LinkSpec, UnitSpec
from hwmodel.errors import HwmodelError, SpecError, UnknownNameError
from hwmodel.schema import build, one_of, plain, positive, read_toml
from hwmodel.specs import KIND_WORDS, BoardSpec, LlmSpec, library

DESIGN_DIR = Path(__file__).resolve().parents[1] / "designs"

#: Operators of a decoder token, in token order. Per layer: ``LAYER_OPS``; around the layers: embed / tail.
LAYER_OPS = (
    "attn_norm",
    "qkv",
    "rope",
    "attention",
    "o_proj",
    "attn_add",
    "ffn_norm",
    "gate_up",
    "silu_mul",
    "down",
    "ffn_add",
)
HEAD_OPS = ("embed",)
TAIL_OPS = ("final_norm", "lm_head", "argmax")
ALL_OPS = HEAD_OPS + LAYER_OPS + TAIL_OPS
#: Operators that stream weights (or the KV cache) from HBM and so need an engine with ports.
HBM_OPS = ("embed", "qkv", "attention", "o_proj", "gate_up", "down", "lm_head")
MATVEC_OPS = ("qkv", "o_proj", "gate_up", "down", "lm_head")
VALID_BITS = (4, 8, 16)
#: how a design (or one of its [[units]]) runs the operators of a layer (fpga/streaming/temporal.py)
EXECUTION_STYLES = ("dataflow", "temporal")
#: [estimate] the barrier between two temporal phases: one cycle to leave an HLS loop's state, one to enter the next
PHASE_BARRIER_DEFAULT_CYCLES = 2
#: names that say what an operator is, accepted for the Llama-named ones above (issue 26): ``gate_up`` is the up
#: projection alone in a plain MLP (OPT, GPT-2) and ``silu_mul`` runs the model's ``hidden_act`` (ReLU, GELU)
OP_ALIASES = {"up": "gate_up", "up_gate": "gate_up", "act": "silu_mul", "act_mul": "silu_mul"}


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
    burst_bytes: int = plain(
        default=4096,
        unit="B",
        doc="bytes of one read request: an HLS m_axi burst (<= 64 KB), which the adapter and "
        "the controller split into AXI4 (4 KB) and AXI3 (16-beat) bursts",
    )
    buffer_depth: int = plain(default=4, doc="read buffer of each port, in requests (prefetch depth)")
    max_outstanding: int = plain(default=4, doc="read requests in flight per port")
    pipeline_latency_cycles: int = plain(
        default=16, check=_non_negative, unit="cycles", doc="cycles from a block's last issue cycle to its result"
    )
    order: str = plain(
        default="output",
        check=one_of("output", "input"),
        doc="matrix-vector loop order: output-stationary or input-stationary",
    )
    tile_rows: int = plain(
        default=0,
        check=_non_negative,
        doc="outputs (matrix-vector), or cached tokens of K and head dimensions of V "
        "(attention), per HLS dataflow iteration; 0 = one flattened pipeline, no per-tile "
        "fill/drain",
    )
    tile_overhead_cycles: int = plain(
        default=0,
        check=_non_negative,
        unit="cycles",
        doc="cycles a dataflow iteration of tile_rows outputs adds beyond its "
        "issue cycles (systolic-chain fill plus the serial drain of its "
        "outputs): the next tile starts only after they pass",
    )
    scale_rows_per_cycle: int = plain(
        default=0,
        check=_non_negative,
        doc="0: per-row weight scales ride inline with the weights; > 0: they come "
        "from a port of their own at this many output rows per cycle, which "
        "bounds a matrix-vector block's issue cycles",
    )
    channels: tuple[int, ...] = plain(
        default=(),
        doc="pseudo-channel of each port (one per port); empty = ports reach "
        "channels of their own in engine order. Ports of engines that name the "
        "same channel share it (fpga/streaming/ports.py)",
    )
    slr: int = plain(
        default=0,
        check=_non_negative,
        doc="super logic region (die) the engine is placed in; each crossing between engines adds "
        "the design's slr_crossing_cycles to their FIFO latency",
    )

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
    act_quant: str = plain(
        default="dynamic",
        check=one_of("dynamic", "static"),
        doc="per-token dynamic activation scales need the whole input vector before a "
        "matrix-vector product starts; static ones let input-stationary engines stream",
    )
    softmax: str = plain(
        default="two-pass",
        check=one_of("two-pass", "online"),
        doc="attention softmax: scores of all tokens, then V; or online (K and V blocks interleaved)",
    )
    vector_chunk: int = plain(default=64, doc="elements per activation block emitted by vector operators")
    fifo_depth: int = plain(default=8, doc="blocks each inter-engine activation FIFO holds")
    fifo_latency_cycles: int = plain(default=2, doc="cycles an activation block takes through an inter-engine FIFO")
    max_ctx: int = plain(default=4096, doc="KV-cache capacity the design reserves in HBM, tokens")
    kvmu: bool = plain(
        default=False,
        doc="the design holds the KVMU (the speculative draft's KV rollback unit, "
        "docs/kvmu.md); its LUTs/FFs are the yosys counts of fpga/kvmu/rtl/kvmu.v",
    )
    quant_group_size: int = plain(
        default=0,
        check=_non_negative,
        doc="quantization metadata convention: 0 = one fp16 scale per output channel; "
        "g = one fp16 scale per g input channels of each row (hwmodel.graph)",
    )
    operand_passes: int = plain(
        default=1,
        doc="whole-vector passes (vector_chunk elements per cycle) a matrix-vector or "
        "attention engine makes over its input before the first block: operand "
        "buffer fill, plus per-token quantisation scan and re-layout buffers",
    )
    buffered_ops: tuple[str, ...] = plain(
        default=(),
        doc="element-wise operators that take their whole input vector before "
        "emitting (HLS re-layout buffers): a barrier like RMSNorm's",
    )
    rotation_ops: tuple[str, ...] = plain(
        default=(),
        doc="element-wise operators followed by an on-chip fast Hadamard "
        "transform of their output (SpinQuant R4): log2(n) butterfly "
        "stages of 1.5 passes each at the engine's lanes, whole vector",
    )
    softmax_passes: int = plain(
        default=1,
        doc="passes over the scores the softmax makes (max, exp + sum, normalise), each vector_chunk scores per cycle",
    )
    softmax_lanes: int = plain(
        default=0, check=_non_negative, doc="scores the softmax handles per cycle; 0 = vector_chunk"
    )
    attn_head_parallel: int = plain(
        default=1,
        doc="KV heads attention processes side by side (each on its own lanes and "
        "ports); must divide the LLM's KV heads",
    )
    attn_q_serial: bool = plain(
        default=False,
        doc="the query heads of a GQA group run one after another, each re-streaming "
        "the group's K and V blocks from HBM (FlexLLM's attn_group_loop)",
    )
    layer_io_cycles: int = plain(
        default=0,
        check=_non_negative,
        unit="cycles",
        doc="0: the residual stream flows on chip from layer to layer; > 0: each layer's "
        "output is stored to HBM and read back before the next layer starts (a "
        "barrier costing this many cycles)",
    )
    slr_crossing_cycles: int = plain(
        default=0,
        check=_non_negative,
        unit="cycles",
        doc="pipeline registers an activation FIFO gains per SLR boundary it crosses",
    )
    arbitration: str = plain(
        default="round-robin",
        check=one_of("round-robin", "fixed-priority"),
        doc="how a pseudo-channel shared by ports of several engines picks among requests "
        "that arrive together: round-robin, or fixed priority by port order "
        "(fpga/streaming/ports.py)",
    )
    host_ops: tuple[str, ...] = plain(
        default=(),
        doc="operators placed on the host, not on the FPGA (fpga/streaming/placement.py): "
        "embed (the embedding row arrives over the host link), and from the "
        "end of the token argmax (sampling), lm_head (needs argmax) and "
        "final_norm (needs lm_head); they map to no engine and move no HBM "
        "bytes",
    )
    onchip_params: tuple[str, ...] = plain(
        default=(),
        doc="parameter classes resident on chip (BRAM/URAM, loaded with the "
        "bitstream's configuration, not read per token): bias, metadata "
        "(quantization scales); counted against on-chip memory. Norm gains "
        "are always on chip",
    )
    execution: str = plain(
        default="dataflow",
        check=one_of(*EXECUTION_STYLES),
        doc="dataflow: operators overlap through the FIFOs between engines (layer-pipelined); temporal: each "
        "phase (operator) of a layer starts only after the previous one has drained, handing over through "
        "whole on-chip buffers (fpga/streaming/temporal.py)",
    )
    phase_barrier_cycles: int = plain(
        default=PHASE_BARRIER_DEFAULT_CYCLES,
        check=_non_negative,
        unit="cycles",
        doc="temporal: cycles from a phase's last result to the next phase's first issue (the control "
        "hand-over between two sequential loops) [estimate: 2, one cycle to leave an HLS loop's state and "
        "one to enter the next]",
    )
    phase_prefetch_blocks: int = plain(
        default=0,
        check=_non_negative,
        doc="temporal: HBM-reading blocks of a phase whose reads may be issued while the previous phase "
        "still runs (prefetch into the port buffer); 0 = a phase's loads start at its barrier (no overlap "
        "of loads with the previous phase's compute), >= buffer_depth = as early as the port buffer allows",
    )
    engines: tuple[EngineSpec, ...] = plain(doc="the engines")
    split: str = plain(
        default="",
        doc="with [[units]]: how the token's work is divided among them, heads (tensor-parallel, partial "
        "sums exchanged), columns (every linear's output rows split, all-gathers) or layers (pipeline stages) "
        "(fpga/streaming/unit_spec.py)",
    )
    exchange_bits: int = plain(
        default=32, doc="bits per element the units exchange (partial sums, activations between stages)"
    )
    units: tuple[UnitSpec, ...] = plain(default=(), doc="compute units (fpga/streaming/unit_spec.py); empty = one")
    links: tuple[LinkSpec, ...] = plain(default=(), doc="links between units: ring, crossbar, inter-fpga")
    # set on one unit of a split = "columns" design (fpga/streaming/columns.py): its linears compute 1/N of their
    # output rows and their whole-vector inputs are all-gathered; never read from TOML
    column_units: int = dataclasses.field(default=1, metadata={"toml": False})
    origin: str = dataclasses.field(default="", compare=False, metadata={"toml": False})
    sources: Any = dataclasses.field(default=None, compare=False, metadata={"toml": False})

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


#: Old built-in names that still load (the design they now name).
ALIASES = {"flexllm-u280": "flexllm-u280-mem-opt-new"}


def design_names() -> list[str]:
    return sorted(p.stem for p in DESIGN_DIR.glob("*.toml"))


def load_design(name_or_path: str | Path) -> StreamingDesign:
    """A built-in design by name (:func:`design_names`; ``flexllm-u280`` is an alias of ``flexllm-u280-mem-opt-new``)
    or a TOML file path; checked for
    structure (every operator mapped once, positive sizes). Use :func:`validate_design` for the board checks."""
    path = Path(name_or_path)
    if not (path.suffix == ".toml" or path.exists()):
        path = DESIGN_DIR / f"{ALIASES.get(str(name_or_path), name_or_path)}.toml"
        if not path.exists():
            raise UnknownNameError("streaming design", str(name_or_path), design_names())
    sources: dict[str, str] = {}
    table = _alias_ops(_unsource(read_toml(path), "", sources))
    design = build(StreamingDesign, table, path=path)
    design = dataclasses.replace(design, origin=str(path), sources=types.MappingProxyType(sources))
    if design.units:  # the engines' channels and SLRs as their units give them (fpga/streaming/units.py)
        from fpga.streaming.units import resolve_units

        design = resolve_units(design, where=str(path))
    check_structure(design, where=str(path))
    lib = library()
    for field, kind in (("board", "fpga-board"), ("llm", "llm")):
        if getattr(design, field) not in lib.names(kind):
            raise SpecError(
                path, field, f"a {KIND_WORDS[kind]} spec name ({', '.join(lib.names(kind))})", getattr(design, field)
            )
    return design


def _alias_ops(table: Any) -> Any:
    """Operator names of :data:`OP_ALIASES` replaced by the ones the lowering uses."""

    def fix(ops: Any) -> Any:
        return [OP_ALIASES.get(o, o) for o in ops] if isinstance(ops, list) else ops

    if isinstance(table, dict):
        for e in table.get("engines", []) if isinstance(table.get("engines"), list) else []:
            if isinstance(e, dict) and "ops" in e:
                e["ops"] = fix(e["ops"])
        for key in ("buffered_ops", "rotation_ops"):
            if key in table:
                table[key] = fix(table[key])
    return table


def _unsource(raw: Any, key: str, sources: dict[str, str]) -> Any:
    """Any design value may be written ``{ value = ..., source = "..." }``: keep the value, record the source under
    its dotted key (``engines[0].lanes``)."""
    if isinstance(raw, dict):
        if set(raw) == {"value", "source"} and isinstance(raw["source"], str):
            sources[key] = raw["source"]
            return raw["value"]
        return {k: _unsource(v, f"{key}.{k}" if key else k, sources) for k, v in raw.items()}
    if isinstance(raw, list):
        return [_unsource(v, f"{key}[{i}]", sources) for i, v in enumerate(raw)]
    return raw


def _problems(d: StreamingDesign) -> Iterator[str]:
    if d.units:  # several compute units: each unit's own design is checked (fpga/streaming/units.py)
        from fpga.streaming.units import units_problems

        yield from units_problems(d)
        return
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
            yield (
                f"engine '{e.name}' runs {', '.join(op for op in e.ops if op in HBM_OPS)}, which stream from HBM,"
                f" but has 0 ports"
            )
        if e.ports:
            if e.buffer_depth < 1:
                yield f"engine '{e.name}': buffer_depth (port FIFO depth) must be >= 1, got {e.buffer_depth}"
            if e.max_outstanding < 1:
                yield f"engine '{e.name}': max_outstanding must be >= 1, got {e.max_outstanding}"
            if not 32 <= e.burst_bytes <= 65536 or e.burst_bytes % 32:
                yield f"engine '{e.name}': burst_bytes must be a multiple of 32 in [32, 65536], got {e.burst_bytes}"
    from fpga.streaming.placement import placement_problems
    from fpga.streaming.ports import port_problems

    yield from placement_problems(d, seen)
    yield from port_problems(d)
    missing = [op for op in ALL_OPS if op not in seen and op not in d.host_ops]
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
    for op in d.buffered_ops + d.rotation_ops:
        if op not in ("rope", "attn_add", "silu_mul", "ffn_add"):
            yield f"buffered_ops/rotation_ops: '{op}' is not an element-wise operator (rope, attn_add, silu_mul, ffn_add)"
    if d.operand_passes < 1:
        yield f"operand_passes must be >= 1, got {d.operand_passes}"
    if d.softmax_passes < 1:
        yield f"softmax_passes must be >= 1, got {d.softmax_passes}"
    if d.attn_head_parallel < 1:
        yield f"attn_head_parallel must be >= 1, got {d.attn_head_parallel}"
    if d.act_bits not in (4, 8, 16):
        yield f"act_bits must be 4, 8 or 16, got {d.act_bits}"


def check_structure(design: StreamingDesign, where: str | None = None) -> None:
    """Raise DesignError on the first structural problem (unmapped operator, zero lanes, FIFO depth 0...)."""
    for problem in _problems(design):
        raise DesignError(f"{where or 'design ' + repr(design.name)}: {problem}")
