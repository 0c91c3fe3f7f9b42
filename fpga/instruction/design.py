"""Designs of the instruction-driven FPGA accelerator (FlightLLM lineage, as used by GLITCHES), as TOML files.

A design names the board and the LLM it is built for and fixes the micro-architecture the compiler and the
cycle-level engine need: kernel clock, precisions and quantization-metadata layout, the matrix processing engine
(MPE) geometry, the special-function unit (SFU), the datamover (HBM ports, request queue, outstanding requests,
per-request latency), the instruction scheduler (issue cost, unit queues), on-chip buffer capacities and the tiling.
Every numeric value carries its source (``{ value = ..., source = "..." }``): a paper, a datasheet, an estimate
with its reasoning, or "fitted" with the calibration that produced it.

Built-in designs live in ``fpga/designs/instruction/*.toml`` (``fpga/designs/*.toml`` are the streaming
accelerator's); :func:`load_design` takes a built-in name or a path.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

from hwmodel.errors import HwmodelError, SpecError, UnknownNameError
from hwmodel.schema import (
    fraction,
    in_range,
    internal,
    load_toml_as,
    non_negative,
    one_of,
    plain,
    positive,
    read_toml,
    sourced,
)
from hwmodel.specs import BoardSpec, LlmSpec, library

DESIGN_DIR = Path(__file__).resolve().parents[1] / "designs" / "instruction"
KIND = "instruction-design"
#: The calibration family whose parameter file supplies the fields a design omits (see :func:`load_design`).
CALIBRATION_FAMILY = "fpga-instruction"
#: cycles a cross-engine semaphore takes when a design omits scheduler.sync_cycles [estimate]: a register pipeline
#: across the fabric (an SLR crossing is a few registered stages on UltraScale+, UG949 "SLR crossing"), the
#: scheduler's semaphore compare, and the activation slice it publishes (1-2 KB in decode) copied over a 512-bit
#: (64 B/cycle) on-chip path: about 30 cycles.
SYNC_CYCLES_DEFAULT = 32
#: Design fields that come from the calibration when a design TOML omits them (dotted paths).
CALIBRATED_FIELDS = (
    "datamover.request_latency_cycles",
    "datamover.outstanding",
    "scheduler.issue_cycles",
    "mpe.mv_overhead_cycles",
    "mpe.mm_efficiency",
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class QuantSpec:
    """Weight quantization: group-wise scales and zero points, each in its own HBM region and on-chip buffer."""

    group_size: int = sourced(check=positive, doc="input channels sharing one scale / zero point")
    scale_bits: int = sourced(check=one_of(8, 16, 32), unit="bit")
    zero_bits: int = sourced(
        check=one_of(0, 4, 8, 16, 32),
        unit="bit",
        doc="zero point (stored scaled: s*z, fp16); 0 for symmetric quantization (no zero point)",
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class MpeSpec:
    """Matrix processing engine: token x row x column MAC lanes; MV uses one token lane, MM all of them."""

    token_lanes: int = sourced(check=positive, doc="tokens processed in parallel in MM mode")
    row_lanes: int = sourced(check=positive, doc="output rows per cycle")
    col_lanes: int = sourced(check=positive, doc="input columns (dot-product length) per cycle")
    pipeline_cycles: int = sourced(
        check=non_negative, unit="cycles", doc="latency from the last MAC to the result in the output buffer"
    )
    mv_overhead_cycles: int = sourced(
        check=non_negative,
        unit="cycles",
        default=None,
        doc="occupancy per MV/MM instruction beyond its MAC cycles (setup, "
        "dequantization epilogue); omitted: the calibrated value",
    )
    mm_efficiency: float = sourced(
        check=fraction, default=None, doc="fraction of the MAC peak reached in MM (prefill) mode; omitted: calibrated"
    )

    @property
    def mv_lanes(self) -> int:
        return self.row_lanes * self.col_lanes

    @property
    def mm_lanes(self) -> int:
        return self.token_lanes * self.row_lanes * self.col_lanes


@dataclasses.dataclass(frozen=True, kw_only=True)
class SfuSpec:
    """Special-function unit (RMSNorm, RoPE, softmax, SiLU, residual add, activation quantization)."""

    lanes: int = sourced(check=positive, doc="elements per cycle per pass")
    pipeline_cycles: int = sourced(check=non_negative, unit="cycles")


@dataclasses.dataclass(frozen=True, kw_only=True)
class DatamoverSpec:
    """The LD/ST engine: one AXI master per HBM pseudo-channel, in the kernel clock domain."""

    channels: int = sourced(check=positive, doc="HBM pseudo-channels (ports) the datamover uses")
    port_width_bits: int = sourced(
        check=one_of(64, 128, 256, 512, 1024),
        unit="bit",
        doc="kernel-side data width per port (bytes per kernel cycle x 8)",
    )
    request_queue_depth: int = sourced(check=in_range(1, 1024), doc="requests waiting per channel")
    outstanding: int = sourced(
        check=in_range(1, 1024), default=None, doc="requests in flight per channel; omitted: the calibrated value"
    )
    request_latency_cycles: int = sourced(
        check=non_negative,
        unit="cycles",
        default=None,
        doc="datamover overhead per request before it reaches the HBM switch; omitted: the calibrated value",
    )

    @property
    def port_bytes_per_cycle(self) -> int:
        return self.port_width_bits // 8


@dataclasses.dataclass(frozen=True, kw_only=True)
class SchedulerSpec:
    """In-order instruction scheduler: fetch/decode/issue cost, per-unit instruction queues."""

    issue_cycles: int = sourced(
        check=non_negative,
        unit="cycles",
        default=None,
        doc="cycles the scheduler spends fetching, decoding and issuing one instruction of its stream (0: no "
        "issue limit); omitted: the calibration's fixed [estimate]",
    )
    unit_queue_depth: int = sourced(check=in_range(1, 4096), doc="instructions waiting per unit (DM, MPE, SFU)")
    sync_cycles: int = sourced(
        check=in_range(1, 1_000_000),
        unit="cycles",
        default=SYNC_CYCLES_DEFAULT,
        doc="cross-engine synchronisation: cycles from a SIGNAL firing on one engine to the WAIT of another "
        "seeing it, the activation slice it publishes included (designs of several engines only); omitted: "
        f"{SYNC_CYCLES_DEFAULT} [estimate]",
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class BufferSpec:
    """On-chip buffers (bytes, summed over all channels' banks). Their capacity bounds the prefetch ratio."""

    weight_bytes: int = sourced(check=positive, unit="B")
    scale_bytes: int = sourced(check=positive, unit="B")
    zero_bytes: int = sourced(check=positive, unit="B")
    kv_bytes: int = sourced(check=positive, unit="B", doc="K/V tiles of one head during attention")
    overlap_loads: bool = plain(
        default=True,
        doc="true: loads of later tiles run ahead of the current compute into free ring "
        "space (double buffering, software prefetch); false: one buffer, a load waits "
        "for the compute that reads what it overwrites (no load/compute overlap)",
    )
    prefetch_depth: int = sourced(
        check=in_range(0, 1 << 20),
        default=0,
        doc="with overlap_loads: how many compute steps with loads a load may run ahead of the compute (1: double "
        "buffering, the next group only); 0: as far as the buffer rings allow",
    )


def _placement_check(v: Any) -> str | None:
    if v == "rows" or (isinstance(v, str) and v.startswith("engine:") and v[7:].isdigit()):
        return None
    return "'rows' (every linear sharded by output rows over the engines) or 'engine:K' (all on engine K)"


@dataclasses.dataclass(frozen=True, kw_only=True)
class PlacementSpec:
    """Where the work of a design of several engines runs (:mod:`fpga.instruction.placement`)."""

    linears: str = plain(
        check=_placement_check,
        default="rows",
        doc="'rows': every linear (and the LM head) is sharded by output rows over all engines, each engine "
        "loading only its rows; 'engine:K': every linear runs on engine K",
    )
    attention: int = plain(
        check=non_negative,
        default=0,
        doc="the engine that runs attention (its HBM channels hold the KV cache), the embedding gather and the "
        "element-wise functions on the full hidden vector (norms, RoPE, residual adds)",
    )

    @property
    def linear_engine(self) -> int | None:
        """The one engine of every linear, or None when they are sharded over all engines."""
        return None if self.linears == "rows" else int(self.linears[7:])


@dataclasses.dataclass(frozen=True, kw_only=True)
class TilingSpec:
    """How the compiler cuts the work into instructions."""

    mv_tile_rows: int = sourced(check=positive, doc="output rows one MV/MM instruction produces (a weight tile)")
    prefill_token_block: int = sourced(check=positive, doc="tokens per MM instruction in prefill (act. buffer)")


@dataclasses.dataclass(frozen=True, kw_only=True)
class InstructionDesign:
    """An instruction-driven accelerator design for one LLM on one board."""

    KIND: ClassVar[str] = KIND
    kind: str = plain(check=one_of(KIND), doc="always 'instruction-design'")
    name: str = plain(doc="the name used on the command line")
    display_name: str = plain()
    notes: str = plain(default="")
    role: str = plain(
        check=one_of("calibrated", "predicted"),
        doc="'calibrated': its fitted values come from board measurements; 'predicted': no measurement",
    )
    board: str = plain(doc="FPGA board spec name")
    llm: str = plain(doc="LLM spec name")
    clock_hz: float = sourced(check=positive, unit="Hz", doc="kernel clock")
    weight_bits: int = sourced(check=one_of(4, 8, 16), unit="bit")
    act_bits: int = sourced(check=one_of(8, 16), unit="bit")
    kv_bits: int = sourced(check=one_of(4, 8, 16), unit="bit")
    prefetch_ratio: int = sourced(check=positive, doc="default prefetch/coalescing ratio k")
    engines: int = sourced(
        check=in_range(1, 64),
        default=1,
        doc="engines, each a scheduler with its own instruction stream, a datamover, an MPE and an SFU of the "
        "geometry below; the datamover channels are dealt evenly (engine e owns channels e*C/N ..), buffers are "
        "per engine; engines synchronise by semaphores ([placement], scheduler.sync_cycles)",
    )
    quant: QuantSpec
    mpe: MpeSpec
    sfu: SfuSpec
    datamover: DatamoverSpec
    scheduler: SchedulerSpec
    buffers: BufferSpec
    tiling: TilingSpec
    placement: PlacementSpec = plain(default=PlacementSpec(), doc="where work runs when engines > 1")
    origin: str = internal(default="")
    sources: Mapping[str, str] = internal(default_factory=dict)

    def _validate(self) -> Iterator[tuple[str, str, object]]:
        n = self.engines
        if self.datamover.channels % n:
            yield "engines", f"a divisor of datamover.channels ({self.datamover.channels})", n
            return
        if self.placement.attention >= n:
            yield "placement.attention", f"an engine index 0..{n - 1}", self.placement.attention
        k = self.placement.linear_engine
        if k is not None and k >= n:
            yield "placement.linears", f"'rows' or 'engine:K' with K in 0..{n - 1}", self.placement.linears
        if self.tiling.mv_tile_rows % self.channels_per_engine:
            yield (
                "tiling.mv_tile_rows",
                f"a multiple of datamover.channels / engines ({self.channels_per_engine})",
                self.tiling.mv_tile_rows,
            )
        if self.tiling.mv_tile_rows % self.mpe.row_lanes:
            yield "tiling.mv_tile_rows", f"a multiple of mpe.row_lanes ({self.mpe.row_lanes})", self.tiling.mv_tile_rows

    # ---- resolved specs
    @property
    def board_spec(self) -> BoardSpec:
        return library().board(self.board)

    @property
    def llm_spec(self) -> LlmSpec:
        return library().llm(self.llm)

    def source_of(self, field: str) -> str:
        return self.sources.get(field, "")

    @property
    def channels_per_engine(self) -> int:
        return self.datamover.channels // self.engines

    @property
    def rows_per_channel(self) -> int:
        """Output rows of one weight tile that each channel holds (the tile is row-interleaved over channels)."""
        return self.tiling.mv_tile_rows // self.datamover.channels

    def with_params(self, params: Mapping[str, float]) -> InstructionDesign:
        """A copy with dotted fields replaced (``{"datamover.outstanding": 2}``); integers are rounded."""
        design = self
        for dotted, value in params.items():
            design = _replace_dotted(design, dotted.split("."), value, dotted)
        return design


def _replace_dotted(obj: Any, parts: list[str], value: Any, dotted: str) -> Any:
    names = {f.name: f for f in dataclasses.fields(obj)}
    if parts[0] not in names:
        raise HwmodelError(f"design has no field '{dotted}'")
    current = getattr(obj, parts[0])
    if len(parts) > 1:
        if not dataclasses.is_dataclass(current):
            raise HwmodelError(f"design field '{dotted}' is not a table")
        return dataclasses.replace(obj, **{parts[0]: _replace_dotted(current, parts[1:], value, dotted)})
    hint = typing.get_type_hints(type(obj))[parts[0]]
    numeric = {int, float} & ({hint} | set(typing.get_args(hint)))
    if not numeric or hint is bool:
        raise HwmodelError(f"design field '{dotted}' is not numeric")
    new = int(round(value)) if int in numeric else float(value)
    check = names[parts[0]].metadata.get("check")
    problem = check(new) if check else None
    if problem:
        raise HwmodelError(f"design field '{dotted}': expected {problem}, got {new!r}")
    return dataclasses.replace(obj, **{parts[0]: new})


def _get_dotted(obj: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def calibrated_values() -> dict[str, float]:
    """The committed fitted and fixed values of the instruction-design calibration family."""
    from hwmodel.params import load_values, params_path

    return load_values(params_path(CALIBRATION_FAMILY))


def _fill_calibrated(
    design: InstructionDesign, fields: list[str], values: Mapping[str, float] | None = None
) -> InstructionDesign:
    from hwmodel.params import params_path

    values = calibrated_values() if values is None else values
    absent = [f for f in fields if f not in values]
    if absent:
        raise SpecError(design.origin, absent[0], f"a value, or one in {params_path(CALIBRATION_FAMILY)}")
    filled = design.with_params({f: values[f] for f in fields})
    src = f"calibrated: {params_path(CALIBRATION_FAMILY).name} (`hwmodel calibrate --family {CALIBRATION_FAMILY}`)"
    guessed = _fixed_estimates()
    return dataclasses.replace(
        filled,
        sources={
            **design.sources,
            **{f: src + (" [estimate]: fixed, not fitted" if f in guessed else "") for f in fields},
        },
    )


def _fixed_estimates() -> set[str]:
    """The calibration's fixed values that it marks ``[estimate]`` (not identifiable from its points: guesses,
    which the prediction band varies like any other)."""
    from hwmodel.params import params_path, read_params_file

    fixed = read_params_file(params_path(CALIBRATION_FAMILY)).get("fixed", {})
    return {k for k, v in fixed.items() if isinstance(v, dict) and "[estimate" in str(v.get("doc", ""))}


def _is_instruction_design(path: Path) -> bool:
    try:
        return read_toml(path).get("kind") == KIND
    except SpecError:
        return False


def design_names() -> list[str]:
    """Built-in instruction designs."""
    return sorted(p.stem for p in DESIGN_DIR.glob("*.toml") if _is_instruction_design(p))


def load_design(name_or_path: str | Path, calibrated: Mapping[str, float] | None = None) -> InstructionDesign:
    """A built-in design by name (``glitches-u280``) or a design TOML file by path; board and LLM must exist.

    Fields a design omits among :data:`CALIBRATED_FIELDS` take the committed calibration
    (``calibration/params/fpga-instruction.json``), or ``calibrated`` when given (the fit's trial values)."""
    path = Path(name_or_path)
    if not (path.suffix == ".toml" or path.exists()):
        path = DESIGN_DIR / f"{name_or_path}.toml"
        if not _is_instruction_design(path):
            raise UnknownNameError("instruction design", str(name_or_path), design_names())
    design = load_toml_as(InstructionDesign, path)
    missing = [f for f in CALIBRATED_FIELDS if _get_dotted(design, f) is None]
    if missing:
        design = _fill_calibrated(design, missing, calibrated)
    lib = library()
    if design.board not in lib.names("fpga-board"):
        raise SpecError(
            path, "board", "an FPGA board spec name (" + ", ".join(lib.names("fpga-board")) + ")", design.board
        )
    if design.llm not in lib.names("llm"):
        raise SpecError(path, "llm", "an LLM spec name (" + ", ".join(lib.names("llm")) + ")", design.llm)
    from hwmodel.domains import kernel_clock_problem

    problem = kernel_clock_problem(lib.board(design.board), design.clock_hz)
    if problem:
        raise SpecError(path, "clock_hz", problem, design.clock_hz)
    return design
