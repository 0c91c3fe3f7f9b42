"""Compute units and the links between them: the ``[[units]]`` and ``[[links]]`` tables of a streaming design.

A design may declare several compute units (issue #33 item 1). Each unit owns some of the design's engines, a set
of HBM pseudo-channels and (optionally) an SLR; the design's ``split`` says how the token's work is divided among
the units (:mod:`fpga.streaming.units` derives each unit's share and the exchange traffic from the graph):

* ``heads``: tensor-parallel, Megatron style. Every unit runs its ``1/N`` of the query/KV heads (QKV rows,
  attention, the O projection over its heads' inputs) and its ``1/N`` of the MLP's intermediate columns (gate/up
  rows, the down projection over its inputs). The O and down projections then hold *partial sums* of the whole
  hidden vector; after each, every unit sends its partial to every other unit, which adds them (an all-reduce by
  direct exchange, ``exchange_bits`` per element). Norms and residual adds run on every unit over the whole
  vector; the embedding and the head run on the first unit, which broadcasts the embedding row.
* ``layers``: pipeline stages. Unit k runs a contiguous block of layers (``layers`` of the unit, or an even
  share); the residual stream goes from one stage to the next over the links; the first unit runs the embedding,
  the last the head.

* ``columns``: every unit computes ``1/N`` of every linear's output columns (``1/N`` of the rows of each ``W``);
  the attention heads follow QKV's column split (the KV head count must divide by N, else one clear line); the
  vectors the next operator needs whole are all-gathered over the links: the attention output before ``o_proj``,
  ``o_proj``'s and ``down``'s slices of the hidden vector after them, SiLU x up's slice of the intermediate vector
  before ``down`` (:mod:`fpga.streaming.columns`). Norms and residual adds run on every unit over the whole
  vector; the embedding and the head run on the first unit, as under ``heads``.

Links (item 2) join units: ``ring`` (one hop from each listed unit to the next, the last back to the first),
``crossbar`` (a hop between every ordered pair of its units) and ``inter-fpga`` (a full-duplex point-to-point link
between two units, e.g. two boards joined by a QSFP/Aurora cable). Each hop is simulated as a stage of the token
program: ``width_bits`` per ``clock_hz`` cycle, ``latency_cycles`` (link cycles) from a chunk's last word in to its
arrival, and ``fifo_depth`` chunks of buffer at each end, with back-pressure on the sender.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import TYPE_CHECKING

from hwmodel.schema import one_of, plain

if TYPE_CHECKING:
    from fpga.streaming.design import StreamingDesign

SPLITS = ("heads", "columns", "layers")
LINK_KINDS = ("ring", "crossbar", "inter-fpga")


@dataclasses.dataclass(frozen=True, kw_only=True)
class UnitSpec:
    """One compute unit: its engines, its pseudo-channels, its SLR and (layer split) its share of the layers."""

    name: str = plain(doc="unit name")
    engines: tuple[str, ...] = plain(doc="names of the design's [[engines]] this unit owns (each engine in one unit)")
    channels: tuple[int, ...] = plain(
        default=(),
        doc="HBM pseudo-channels of the unit: ports of its engines that name no channels take them in "
        "engine order; an engine's own channels must be among them. Empty = the engines' own channels",
    )
    slr: int = plain(default=-1, doc="SLR of every engine of the unit; -1 = each engine keeps its own slr")
    layers: int = plain(default=0, doc="split = layers: decoder layers this stage runs; 0 = an even share")
    execution: str = plain(
        default="",
        check=one_of("", "dataflow", "temporal"),
        doc="dataflow or temporal (fpga/streaming/temporal.py); empty = the design's execution",
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class LinkSpec:
    """A link between units (ring, crossbar or inter-FPGA), simulated hop by hop with back-pressure."""

    name: str = plain(doc="link name")
    kind: str = plain(check=one_of(*LINK_KINDS), doc="ring, crossbar or inter-fpga (point to point, full duplex)")
    units: tuple[str, ...] = plain(doc="the units it joins (a ring in this order)")
    width_bits: int = plain(default=256, unit="bit", doc="bits per link clock cycle and direction")
    clock_hz: float = plain(default=0.0, unit="Hz", doc="link clock; 0 = the design's kernel clock")
    fifo_depth: int = plain(default=16, doc="chunks each end of a hop buffers (back-pressure beyond)")
    latency_cycles: int = plain(
        default=4, unit="cycles", doc="link clock cycles from a chunk's last word sent to its arrival"
    )

    def hops(self) -> list[tuple[str, str]]:
        """Directed hops (from unit, to unit) of the link."""
        u = list(self.units)
        if self.kind == "ring":
            return [(u[i], u[(i + 1) % len(u)]) for i in range(len(u))]
        if self.kind == "crossbar":
            return [(a, b) for a in u for b in u if a != b]
        return [(u[0], u[1]), (u[1], u[0])]


def unit_problems(d: StreamingDesign) -> Iterator[str]:
    """What is wrong with a design's units, split and links (structure only; the LLM's shapes are checked when the
    split is applied, :func:`fpga.streaming.units.unit_llm`)."""
    if d.split not in SPLITS:
        yield f"split: expected one of {', '.join(SPLITS)} for a design with [[units]], got '{d.split}'"
    if d.exchange_bits not in (8, 16, 32):
        yield f"exchange_bits: expected 8, 16 or 32 (bits per exchanged element), got {d.exchange_bits}"
    names = [u.name for u in d.units]
    if len(set(names)) != len(names):
        yield f"unit names must be unique, got {names}"
    engines = {e.name for e in d.engines}
    if d.split == "columns" and "rx" in engines:
        yield "engine name 'rx' is reserved under split = 'columns' (each unit's receive engine): rename it"
    owner: dict[str, str] = {}
    for u in d.units:
        for en in u.engines:
            if en not in engines:
                yield f"unit '{u.name}': no engine named '{en}' (engines: {', '.join(sorted(engines))})"
            elif en in owner:
                yield f"engine '{en}' is in two units ('{owner[en]}' and '{u.name}')"
            owner[en] = u.name
        if not u.engines:
            yield f"unit '{u.name}': lists no engines"
        if len(set(u.channels)) != len(u.channels) or any(c < 0 for c in u.channels):
            yield f"unit '{u.name}': channels must be distinct pseudo-channels >= 0, got {list(u.channels)}"
        if u.layers < 0:
            yield f"unit '{u.name}': layers must be >= 0, got {u.layers}"
    for e in d.engines:
        if e.name not in owner:
            yield f"engine '{e.name}' belongs to no unit (every engine of a design with [[units]] is in one)"
    seen: dict[int, str] = {}
    for u in d.units:
        for c in u.channels:
            if c in seen and seen[c] != u.name:
                yield f"pseudo-channel {c} is in units '{seen[c]}' and '{u.name}' (a channel belongs to one unit)"
            seen[c] = u.name
    for lk in d.links:
        for un in lk.units:
            if un not in names:
                yield f"link '{lk.name}': no unit named '{un}' (units: {', '.join(names)})"
        if len(set(lk.units)) != len(lk.units) or len(lk.units) < 2:
            yield f"link '{lk.name}': joins at least two distinct units, got {list(lk.units)}"
        if lk.kind == "inter-fpga" and len(lk.units) != 2:
            yield f"link '{lk.name}': an inter-fpga link joins exactly two units, got {list(lk.units)}"
        if lk.width_bits < 1 or lk.fifo_depth < 1 or lk.latency_cycles < 0 or lk.clock_hz < 0:
            yield (
                f"link '{lk.name}': expected width_bits >= 1, fifo_depth >= 1, latency_cycles >= 0, clock_hz >= 0, "
                f"got {lk.width_bits}, {lk.fifo_depth}, {lk.latency_cycles}, {lk.clock_hz}"
            )
