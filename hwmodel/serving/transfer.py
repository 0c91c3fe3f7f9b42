"""KV-cache migration paths and link contention for the serving simulator.

A migration moves one request's quantized KV cache from the GPU that prefilled it to the FPGA that will decode it,
layer by layer while the prefill runs (GLITCHES): layer i's KV exists once the prefill has passed layer i, and is
sent as one chunk. A chunk crosses the *stages* of a path in order (store-and-forward between stages, e.g. through
a host-memory staging buffer); a stage is one DMA over one or more link directions at once (a peer-to-peer DMA
through a PCIe switch holds the GPU's upstream and the FPGA's downstream port together). Stage time is the link
model of the project: ``latency + bytes / effective bandwidth`` (ARCHITECTURE.md, "Link").

Paths (``kind``):

* ``host-staged``: GPU -> host memory -> FPGA (two stages; the GLITCHES design);
* ``p2p``: GPU -> FPGA through a PCIe switch (one stage at the slower link's bandwidth);
* ``network-host-staged``: GPU -> host A -> network -> host B -> FPGA (three stages);
* ``network-p2p``: GPUDirect-RDMA-style GPU -> NIC -> NIC -> FPGA (one stage across all links).

Contention: every link direction (a device's upstream or downstream PCIe port, a node's NIC transmit or receive
side) has a calendar of busy intervals; each chunk takes the earliest gap where all the directions of its stage
are free for its whole duration (first fit). Two migrations through one link therefore share it chunk by chunk
instead of one waiting for the other to finish. Small messages (logits, token ids, prompts) are timed on the
links but do not enter the calendars: they are a few KB against the tens of MB of a KV cache.
"""
from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Hashable, Sequence

from hwmodel.specs import LinkSpec

PATH_KINDS = ("local", "host-staged", "p2p", "network-host-staged", "network-p2p")


@dataclasses.dataclass(frozen=True)
class Stage:
    """One DMA hop of a path: the link directions it holds, its bandwidth and latency."""

    keys: tuple[Hashable, ...]
    bw_bytes_per_s: float
    latency_s: float

    def time_s(self, n_bytes: float) -> float:
        return self.latency_s + n_bytes / self.bw_bytes_per_s


@dataclasses.dataclass(frozen=True)
class Path:
    """How a KV cache travels from a prefill device to a decode device."""

    kind: str
    stages: tuple[Stage, ...]

    def uncontended_s(self, n_bytes: float) -> float:
        """One chunk of ``n_bytes`` through every stage in turn, links otherwise idle."""
        return sum(s.time_s(n_bytes) for s in self.stages)


def link_stage(keys: tuple[Hashable, ...], links: Sequence[LinkSpec]) -> Stage:
    """A stage over ``links`` at once: the slowest bandwidth, the largest latency (one DMA through a switch)."""
    return Stage(keys, min(lk.effective_bw_bytes_per_s for lk in links), max(lk.latency_s for lk in links))


def build_path(kv_path: str, *, src: int, dst: int, src_node: int, dst_node: int, src_link: LinkSpec,
               dst_link: LinkSpec, network: LinkSpec | None) -> Path:
    """The path from device ``src`` (GPU) to device ``dst`` (FPGA) for the cluster's ``kv_path`` setting."""
    up, down = ("up", src), ("down", dst)
    if src == dst:
        return Path("local", ())
    if src_node == dst_node:
        if kv_path == "p2p":
            return Path("p2p", (link_stage((up, down), (src_link, dst_link)),))
        return Path("host-staged", (link_stage((up,), (src_link,)), link_stage((down,), (dst_link,))))
    if network is None:
        raise ValueError("a cross-node path needs the cluster's network link")
    tx, rx = ("nic-tx", src_node), ("nic-rx", dst_node)
    if kv_path == "p2p":
        stage = Stage((up, tx, rx, down),
                      min(src_link.effective_bw_bytes_per_s, network.effective_bw_bytes_per_s,
                          dst_link.effective_bw_bytes_per_s),
                      src_link.latency_s + network.latency_s + dst_link.latency_s)
        return Path("network-p2p", (stage,))
    return Path("network-host-staged", (link_stage((up,), (src_link,)), link_stage((tx, rx), (network,)),
                                        link_stage((down,), (dst_link,))))


class LinkCalendar:
    """Busy intervals per link direction, sorted by start; intervals never overlap within one direction."""

    def __init__(self) -> None:
        self._starts: dict[Hashable, list[float]] = {}
        self._ends: dict[Hashable, list[float]] = {}

    def prune(self, now_s: float) -> None:
        """Forget intervals that ended before ``now_s`` (no later request can be ready before now)."""
        for key, ends in self._ends.items():
            if ends and ends[0] < now_s:
                # intervals are disjoint and sorted, so their ends are sorted too
                k = bisect.bisect_left(ends, now_s)
                del ends[:k]
                del self._starts[key][:k]

    def _conflict_end(self, key: Hashable, t: float, dur: float) -> float | None:
        """End of the first interval of ``key`` that overlaps [t, t + dur), or None."""
        starts = self._starts.get(key)
        if not starts:
            return None
        ends = self._ends[key]
        i = bisect.bisect_right(ends, t)  # first interval ending after t
        if i < len(starts) and starts[i] < t + dur:
            return ends[i]
        return None

    def book(self, keys: tuple[Hashable, ...], ready_s: float, dur_s: float) -> float:
        """Reserve ``dur_s`` on every direction in ``keys`` at the earliest start >= ``ready_s``; returns it."""
        t = ready_s
        while True:
            moved = False
            for key in keys:
                end = self._conflict_end(key, t, dur_s)
                if end is not None:
                    t = end
                    moved = True
            if not moved:
                break
        for key in keys:
            starts = self._starts.setdefault(key, [])
            ends = self._ends.setdefault(key, [])
            i = bisect.bisect_left(starts, t)
            starts.insert(i, t)
            ends.insert(i, t + dur_s)
        return t

    def intervals(self, key: Hashable) -> list[tuple[float, float]]:
        return list(zip(self._starts.get(key, ()), self._ends.get(key, ())))


@dataclasses.dataclass(frozen=True)
class Migration:
    """Outcome of one KV migration: when the whole cache sits in the decoder's memory, and link busy time."""

    kv_ready_s: float
    link_busy_s: float  # sum over chunks and stages of DMA time
    dst_busy_s: float  # time the destination's link received (the last stage's DMA time)


def migrate(calendar: LinkCalendar, path: Path, kv_bytes: int, layer_ready_s: Sequence[float]) -> Migration:
    """Send ``kv_bytes`` as one chunk per layer; chunk i is ready at ``layer_ready_s[i]`` (its layer of the prefill
    done). Returns when the last chunk has crossed the last stage."""
    if not path.stages:
        return Migration(layer_ready_s[-1] if layer_ready_s else 0.0, 0.0, 0.0)
    n = len(layer_ready_s)
    chunk = kv_bytes / n
    durations = [s.time_s(chunk) for s in path.stages]
    done = 0.0
    for ready in layer_ready_s:
        t = ready
        for stage, dur in zip(path.stages, durations):
            t = calendar.book(stage.keys, t, dur) + dur
        done = max(done, t)
    busy = n * sum(durations)
    return Migration(done, busy, n * durations[-1])
