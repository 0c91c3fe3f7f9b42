"""Prediction band of a streaming design: how far each guessed field moves the predicted token latency.

A design file mixes facts (a value with a ``source``) and guesses. Every field this module knows how to vary
(:data:`DESIGN_FIELDS`, :data:`ENGINE_FIELDS`, :data:`LINK_FIELDS`) is a guess unless its source is a document: a
field *left at its default*, written *without a source*, or whose source says ``[estimate]`` (or begins
``estimate``, as the published designs write it). Each guess is moved, one at a time, to
the low and the high end of its range (below) with every other field at its value, and the token is simulated
again; then all of them are moved together to the ends that made the token faster (the band's low end) and slower
(its high end). Sourced fields are never varied.

Ranges (documented in docs/model-your-design.md, section "Sensitivity"), ``x`` the field's value:

* halve / double: ``burst_bytes`` (within 32 B .. 64 KB), ``buffer_depth``, ``max_outstanding``,
  ``fifo_depth`` (each >= 1);
* pipeline latencies (``pipeline_latency_cycles``, ``tile_overhead_cycles``, ``fifo_latency_cycles``,
  ``slr_crossing_cycles``, ``layer_io_cycles``): ``x / 2 .. 2 x``, and ``0 .. 8`` cycles when ``x`` is 0 (1 .. 4 for
  the FIFO latency, which must stay >= 1) — a register stage or two an HLS schedule adds or removes; a
  ``layer_io_cycles`` of 0 is a mechanism (the residual stream stays on chip) and is not varied;
* passes (``operand_passes``, ``softmax_passes``): ``max(1, x - 1) .. x + 1``;
* an instruction design's execution style left at its default (``[buffers] overlap_loads``): off .. on;
* a temporal streaming design's (fpga/streaming/temporal.py) ``phase_barrier_cycles`` as a latency above, and its
  load/compute overlap ``phase_prefetch_blocks``: ``max(0, x - 1) .. x + 1`` (0 .. 1: no prefetch .. double
  buffering); both do nothing in a dataflow design and are not varied there.
* a multi-unit design's links (``[[links]]``, :data:`LINK_FIELDS`): ``width_bits`` and ``clock_hz`` halve / double
  (a ``clock_hz`` of 0, the kernel clock, is varied around the kernel clock), ``fifo_depth`` halve / double (>= 1),
  ``latency_cycles`` as a pipeline latency (``x / 2 .. 2 x``, ``0 .. 8`` when 0).

A variant the model refuses (a port buffer too small for a block, a deadlock) is reported with its reason and left
out of the band. The result is a plain dict (its JSON is documented in docs/model-your-design.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from fpga.streaming.design import StreamingDesign
from fpga.streaming.temporal import is_temporal
from hwmodel.errors import HwmodelError

DESIGN_FIELDS = (
    "fifo_depth",
    "fifo_latency_cycles",
    "operand_passes",
    "softmax_passes",
    "slr_crossing_cycles",
    "layer_io_cycles",
    "phase_barrier_cycles",
    "phase_prefetch_blocks",
)
#: fields that only a temporal design (or unit) reads
_TEMPORAL_FIELDS = ("phase_barrier_cycles", "phase_prefetch_blocks")
#: fields of a multi-unit design's [[links]] varied when guessed (keys ``links[NAME].FIELD``)
LINK_FIELDS = ("width_bits", "clock_hz", "fifo_depth", "latency_cycles")
ENGINE_FIELDS = ("burst_bytes", "buffer_depth", "max_outstanding", "pipeline_latency_cycles", "tile_overhead_cycles")
_PORT_FIELDS = ("burst_bytes", "buffer_depth", "max_outstanding")
_LATENCIES = (
    "pipeline_latency_cycles",
    "tile_overhead_cycles",
    "fifo_latency_cycles",
    "slr_crossing_cycles",
    "layer_io_cycles",
)


def field_range(name: str, x: int) -> tuple[int, int]:
    """(low, high) of a field whose value is ``x`` (module docstring)."""
    if name == "burst_bytes":
        return max(32, x // 2), min(65536, 2 * x)
    if name in ("buffer_depth", "max_outstanding", "fifo_depth"):
        return max(1, x // 2), 2 * x
    if name in ("operand_passes", "softmax_passes"):
        return max(1, x - 1), x + 1
    if name == "phase_prefetch_blocks":
        return max(0, x - 1), x + 1
    if name == "fifo_latency_cycles":
        return (1, 4) if x <= 1 else (max(1, x // 2), 2 * x)
    if name in _LATENCIES or name.endswith("_cycles"):
        return (0, 8) if x == 0 else (x // 2, 2 * x)
    if name == "port_width_bits":
        return max(64, x // 2), min(1024, 2 * x)
    return max(1, x // 2), 2 * x  # sizes, depths, lanes: halve / double


def check_fields(names: Iterable[str]) -> list[str]:
    """Field names a user asked to vary, each one this module knows (else one clear line)."""
    out = [n.strip() for n in names if n.strip()]
    known = DESIGN_FIELDS + ENGINE_FIELDS + tuple(f for f in LINK_FIELDS if f not in DESIGN_FIELDS)
    for n in out:
        if n not in known:
            raise HwmodelError(f"--vary: unknown field '{n}' (known: {', '.join(known)})")
    return out


def _raw_table(design: StreamingDesign) -> dict[str, Any]:
    if not design.origin or not Path(design.origin).exists():
        return {}
    from hwmodel.schema import read_toml

    return read_toml(Path(design.origin))


def _status(raw: Any, source: str | None) -> str:
    """How a field stands in the file: sourced (a document), estimate, unsourced, default."""
    if raw is None:
        return "default"
    if source is None:
        return "unsourced"
    return "estimate" if is_estimate(source) else "sourced"


def is_estimate(source: str) -> bool:
    """A source that says the value is guessed: tagged ``[estimate]``, or (the published designs' style) written
    ``estimate: why``."""
    return "[estimate]" in source or source.lstrip().lower().startswith("estimate")


@dataclasses.dataclass(frozen=True)
class Knob:
    """One guessed field: where it lives, its status in the file, its value and range."""

    key: str  # "fifo_depth", "engines[linear].burst_bytes", "datamover.request_queue_depth"
    engine: str | None
    field: str
    status: str
    value: int
    low: int
    high: int
    link: str | None = None  # a multi-unit design's link this field belongs to

    def apply(self, d: Any, value: int) -> Any:
        if self.link is not None:
            links = tuple(
                dataclasses.replace(lk, **{self.field: float(value) if self.field == "clock_hz" else value})
                if lk.name == self.link
                else lk
                for lk in d.links
            )
            return dataclasses.replace(d, links=links)
        if self.engine is not None:
            return d.with_engine(self.engine, **{self.field: value})
        if "." in self.key:  # an instruction design's dotted field
            section, _, name = self.key.partition(".")
            if isinstance(getattr(getattr(d, section), name), bool):
                return dataclasses.replace(
                    d, **{section: dataclasses.replace(getattr(d, section), **{name: bool(value)})}
                )
            return d.with_params({self.key: value})
        return dataclasses.replace(d, **{self.field: value})


#: sections of an instruction design whose [estimate] integers are varied (precision and clock are choices)
INSTRUCTION_SECTIONS = ("mpe", "sfu", "datamover", "scheduler", "buffers", "tiling")
#: execution-style switches of an instruction design varied (off .. on) when the file leaves them at their default
INSTRUCTION_STYLE = (("buffers", "overlap_loads"),)


def instruction_knobs(design: Any, fields: Iterable[str] | None = None) -> list[Knob]:
    """The guessed fields of an instruction design: integers of :data:`INSTRUCTION_SECTIONS` whose source says
    ``[estimate]`` (every field of such a design is sourced; calibrated ones come from a params file and are
    fitted, not guessed)."""
    want = set(fields) if fields is not None else None
    out = []
    for key, source in sorted(design.sources.items()):
        section, _, name = key.partition(".")
        if section not in INSTRUCTION_SECTIONS or not is_estimate(source) or (want and name not in want):
            continue
        v = getattr(getattr(design, section), name)
        if isinstance(v, bool) or not isinstance(v, int):
            continue
        out.append(Knob(key, None, name, "estimate", v, *field_range(name, v)))
    raw = _raw_table(design)
    for section, name in INSTRUCTION_STYLE:
        if name not in raw.get(section, {}) and (want is None or name in want):  # an execution style left at default
            out.append(
                Knob(f"{section}.{name}", None, name, "default", int(getattr(getattr(design, section), name)), 0, 1)
            )
    return [k for k in out if k.low != k.high]


def knobs(design: StreamingDesign, fields: Iterable[str] | None = None) -> list[Knob]:
    """The guessed fields of ``design`` (``fields``: only these names)."""
    raw = _raw_table(design)
    src = dict(design.sources or {})
    want = set(fields) if fields is not None else None
    out = []
    for f in DESIGN_FIELDS:
        if want is not None and f not in want:
            continue
        st = _status(raw.get(f), src.get(f))
        if f == "layer_io_cycles" and not design.layer_io_cycles:
            continue  # 0 is a mechanism (the residual stream stays on chip), not a guessed latency
        if f in _TEMPORAL_FIELDS and not is_temporal(design):
            continue  # a dataflow design has no phases
        if st != "sourced":
            v = getattr(design, f)
            out.append(Knob(f, None, f, st, v, *field_range(f, v)))
    raw_engines = raw.get("engines", [])
    for i, e in enumerate(design.engines):
        re_ = raw_engines[i] if i < len(raw_engines) else {}
        for f in ENGINE_FIELDS:
            if (want is not None and f not in want) or (f in _PORT_FIELDS and not e.ports):
                continue
            if f == "tile_overhead_cycles" and not e.tile_rows:
                continue  # no dataflow tiles: the field does nothing
            st = _status(re_.get(f), src.get(f"engines[{i}].{f}"))
            if st != "sourced":
                v = getattr(e, f)
                out.append(Knob(f"engines[{e.name}].{f}", e.name, f, st, v, *field_range(f, v)))
    out += link_knobs(design, raw, src, want)
    return [k for k in out if k.low != k.high]


def link_knobs(design: StreamingDesign, raw: dict[str, Any], src: dict[str, str], want: set[str] | None) -> list[Knob]:
    """The guessed fields of a multi-unit design's links (module docstring): a link clock of 0 (the kernel clock)
    is varied around the kernel clock."""
    out = []
    raw_links = raw.get("links", [])
    for i, lk in enumerate(design.links):
        rl = raw_links[i] if i < len(raw_links) else {}
        for f in LINK_FIELDS:
            if want is not None and f not in want:
                continue
            st = _status(rl.get(f), src.get(f"links[{i}].{f}"))
            if st == "sourced":
                continue
            v = round(getattr(lk, f) or design.clock_hz) if f == "clock_hz" else getattr(lk, f)
            out.append(Knob(f"links[{lk.name}].{f}", None, f, st, v, *field_range(f, v), link=lk.name))
    return out


def sensitivity(
    design: Any,
    latency_s: Callable[[Any], float],
    fields: Iterable[str] | None = None,
    guesses: list[Knob] | None = None,
) -> dict[str, Any]:
    """Per guessed field (``guesses``, default :func:`knobs` of a streaming design), the latency at the low and high
    end of its range, and the band of all ends together. ``latency_s(design)`` simulates one point (it may raise a
    HwmodelError: that end is reported infeasible)."""
    nominal = latency_s(design)
    rows = []
    fast, slow = design, design
    for k in guesses if guesses is not None else knobs(design, fields):
        row: dict[str, Any] = {"field": k.key, "status": k.status, "value": k.value, "low": k.low, "high": k.high}
        ends = {}
        for side, v in (("low", k.low), ("high", k.high)):
            try:
                ends[side] = latency_s(k.apply(design, v))
                row[f"{side}_s"] = ends[side]
            except HwmodelError as exc:
                row[f"{side}_s"] = None
                row[f"{side}_error"] = str(exc).splitlines()[0]
        ok = {s: t for s, t in ends.items() if t is not None}
        row["swing_s"] = (max(max(ok.values()), nominal) - min(min(ok.values()), nominal)) if ok else 0.0
        row["swing_fraction"] = row["swing_s"] / nominal
        if ok:
            lo_side = min(ok, key=ok.get)
            hi_side = max(ok, key=ok.get)
            if ok[lo_side] < nominal:
                fast = k.apply(fast, k.low if lo_side == "low" else k.high)
            if ok[hi_side] > nominal:
                slow = k.apply(slow, k.low if hi_side == "low" else k.high)
        rows.append(row)
    rows.sort(key=lambda r: -r["swing_s"])
    band: list[float | None] = []
    errors = {}
    for name, d in (("low", fast), ("high", slow)):
        try:
            band.append(min(latency_s(d), nominal) if name == "low" else max(latency_s(d), nominal))
        except HwmodelError as exc:
            band.append(None)
            errors[name] = str(exc).splitlines()[0]
    return {
        "nominal_s": nominal,
        "fields": rows,
        "band_s": band,
        "band_errors": errors,
        "varied": [r["field"] for r in rows],
    }
