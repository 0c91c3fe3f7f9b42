"""HBM ports and the pseudo-channels they reach: which ports share a channel, and how a shared channel arbitrates.

By default every port of a streaming design is bound to its own pseudo-channel (port ``p`` of the design, counted
over its engines in file order, reaches channel ``p``). An engine may name its channels instead
(``channels = [0, 1, 2, 3]``, one per port); ports of different engines that name the same channel share it, so the
weights one engine streams and the K/V cache another reads contend for one pseudo-channel, as in a design whose
attention and linear engines sit behind one set of AXI masters.

A shared channel serves its ports' requests one after another (each whole, as every channel does,
:mod:`fpga.hbm.channel`). At each grant it takes, among the ports' next requests, those that reached the channel earliest
(AXI cycle of arrival) and breaks the tie by the design's ``arbitration``:

* ``round-robin``: the first port after the one granted last on this channel, in port order, cyclically (the
  AXI interconnect's default, Xilinx PG059 "round-robin arbitration");
* ``fixed-priority``: the lowest port index (engines earlier in the design file first).

A port's own requests keep their order. Engines that share a channel keep their data apart: each engine's
footprint on the channel (weights, and the K/V cache of the attention engine) starts at the MiB after the
previous sharer's (:func:`channel_bases`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fpga.streaming.design import StreamingDesign

ARBITRATION = ("round-robin", "fixed-priority")
ARB_RR, ARB_FIXED = 0, 1
MIB = 1 << 20


def port_channels(d: StreamingDesign) -> list[int]:
    """The pseudo-channel each port of the design reaches (ports in engine order)."""
    out: list[int] = []
    for e in d.engines:
        if e.channels:
            out.extend(e.channels)
        else:
            out.extend(range(len(out), len(out) + e.ports))
    return out


def channel_count(d: StreamingDesign) -> int:
    """Distinct pseudo-channels the design's ports reach."""
    if not any(e.channels for e in d.engines):
        return d.total_ports
    return len(set(port_channels(d)))


def shared(d: StreamingDesign) -> bool:
    if not any(e.channels for e in d.engines):
        return False
    ch = port_channels(d)
    return len(set(ch)) < len(ch)


def dense_channels(d: StreamingDesign) -> list[int]:
    """Per port, a channel index numbered 0.. in order of first use (the simulators' channel states)."""
    ids: dict[int, int] = {}
    return [ids.setdefault(c, len(ids)) for c in port_channels(d)]


def arbitration_code(d: StreamingDesign) -> int:
    return ARB_RR if d.arbitration == "round-robin" else ARB_FIXED


def port_problems(d: StreamingDesign, axi_ports: int | None = None) -> Iterator[str]:
    """Ill-formed channel lists (count, repeats within an engine, range)."""
    for e in d.engines:
        if not e.channels:
            continue
        if len(e.channels) != e.ports:
            yield f"engine '{e.name}': channels lists {len(e.channels)} pseudo-channels for its {e.ports} ports"
        if len(set(e.channels)) != len(e.channels):
            yield f"engine '{e.name}': channels {list(e.channels)} names a pseudo-channel twice (one port each)"
        if any(c < 0 for c in e.channels):
            yield f"engine '{e.name}': channels must be >= 0, got {list(e.channels)}"
        if axi_ports is not None and any(c >= axi_ports for c in e.channels):
            yield f"engine '{e.name}': channels {list(e.channels)} exceed the board's {axi_ports} pseudo-channels"


def channel_bases(d: StreamingDesign, footprint: Sequence[int]) -> list[int]:
    """Per port, the byte offset its engine's data starts at on its channel: 0 for the first engine on a channel,
    then the MiB after the footprints (bytes per port, per engine) of the engines before it on that channel."""
    used: dict[int, int] = {}
    out = []
    p = 0
    chans = port_channels(d)
    for i, e in enumerate(d.engines):
        for _ in range(e.ports):
            c = chans[p]
            out.append(used.get(c, 0))
            used[c] = out[-1] + -(-footprint[i] // MIB) * MIB
            p += 1
    return out
