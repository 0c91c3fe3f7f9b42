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
import math
from collections.abc import Hashable, Sequence

from hwmodel.specs import LinkSpec
from interconnect.pcie import DEFAULT_CHUNK_BYTES  # the staging buffer of the PCIe model

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
    """How a KV cache travels from a prefill device to a decode device. ``host_started[i]`` marks stages the
    prefilling node's host must start (a host-staged copy out of its staging buffer)."""

    kind: str
    stages: tuple[Stage, ...]
    host_started: tuple[bool, ...] = ()

    @property
    def keys(self) -> tuple[Hashable, ...]:
        """Every link direction the path holds."""
        return tuple(k for st in self.stages for k in st.keys)

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
            return Path("p2p", (link_stage((up, down), (src_link, dst_link)),), (False,))
        return Path("host-staged", (link_stage((up,), (src_link,)), link_stage((down,), (dst_link,))), (False, True))
    if network is None:
        raise ValueError("a cross-node path needs the cluster's network link")
    tx, rx = ("nic-tx", src_node), ("nic-rx", dst_node)
    if kv_path == "p2p":
        stage = Stage((up, tx, rx, down),
                      min(src_link.effective_bw_bytes_per_s, network.effective_bw_bytes_per_s,
                          dst_link.effective_bw_bytes_per_s),
                      src_link.latency_s + network.latency_s + dst_link.latency_s)
        return Path("network-p2p", (stage,), (False,))
    # the sending host posts the network transfer; the receiving host's DMA into the FPGA waits on nothing else
    return Path("network-host-staged", (link_stage((up,), (src_link,)), link_stage((tx, rx), (network,)),
                                        link_stage((down,), (dst_link,))), (False, True, False))


class LinkCalendar:
    """Busy intervals per link direction, sorted by start; intervals never overlap within one direction."""

    def __init__(self) -> None:
        self._starts: dict[Hashable, list[float]] = {}
        self._ends: dict[Hashable, list[float]] = {}

    def prune(self, now_s: float, keys: Sequence[Hashable] | None = None) -> None:
        """Forget intervals that ended before ``now_s`` (no later request can be ready before now), on ``keys``
        only when given (the directions a migration is about to use; the others keep theirs until they are used,
        which changes no booking)."""
        for key in (self._ends if keys is None else keys):
            ends = self._ends.get(key)
            if ends and ends[0] < now_s:
                # intervals are disjoint and sorted, so their ends are sorted too
                k = bisect.bisect_left(ends, now_s)
                del ends[:k]
                del self._starts[key][:k]

    def book(self, keys: tuple[Hashable, ...], ready_s: float, dur_s: float) -> float:
        """Reserve ``dur_s`` on every direction in ``keys`` at the earliest start >= ``ready_s``; returns it."""
        t = ready_s
        if dur_s <= 0.0:
            return t
        moved = True
        while moved:  # walk every key past the intervals that overlap [t, t + dur) until all agree
            moved = False
            for key in keys:
                starts = self._starts.get(key)
                if not starts:
                    continue
                ends = self._ends[key]
                i = bisect.bisect_right(ends, t)  # the first interval that ends after t
                while i < len(starts) and starts[i] < t + dur_s:
                    t = ends[i]
                    i += 1
                    moved = True
            if len(keys) == 1:
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


    def is_free_after(self, keys: tuple[Hashable, ...], t_s: float) -> bool:
        """No interval of any of ``keys`` ends after ``t_s``."""
        for key in keys:
            ends = self._ends.get(key)
            if ends and ends[-1] > t_s:
                return False
        return True

    def extend(self, key: Hashable, starts: Sequence[float], ends: Sequence[float]) -> None:
        """Add sorted, disjoint, non-empty intervals known to start after every interval of ``key`` (the
        uncontended fast path)."""
        self._starts.setdefault(key, []).extend(starts)
        self._ends.setdefault(key, []).extend(ends)


@dataclasses.dataclass(frozen=True)
class Migration:
    """Outcome of one KV migration: when the whole cache sits in the decoder's memory, and link busy time."""

    kv_ready_s: float
    link_busy_s: float  # sum over chunks and stages of DMA time
    dst_busy_s: float  # time the destination's link received (the last stage's DMA time)


def chunk_sizes(layer_bytes: float, chunk_bytes: float, multi_stage: bool) -> list[float]:
    """A layer's KV split into staging-buffer chunks (one DMA per layer on a single-stage path)."""
    if not multi_stage or layer_bytes <= chunk_bytes:
        return [layer_bytes]
    n = math.ceil(layer_bytes / chunk_bytes)
    return [chunk_bytes] * (n - 1) + [layer_bytes - chunk_bytes * (n - 1)]


def migrate(calendar: LinkCalendar, path: Path, kv_bytes: float, layer_ready_s: Sequence[float], *,
            chunk_bytes: float = DEFAULT_CHUNK_BYTES, host_free_s: float = 0.0,
            force_calendar: bool = False) -> Migration:
    """Send ``kv_bytes``, an equal share per layer; layer i's share is ready at ``layer_ready_s[i]`` (its layer of
    the prefill done, quantized). On a multi-stage path each share goes as chunks of at most ``chunk_bytes``
    (the staging buffer) that cross the stages store-and-forward; stages the host starts wait for
    ``host_free_s`` (a serving process whose one thread issues the prefill and drives the staging). Returns when
    the last chunk has crossed the last stage.

    When none of the path's links is booked beyond the first ready time, the chunks go FIFO without searching
    the calendars (for one migration alone, first fit and FIFO coincide); ``force_calendar`` always searches."""
    if not path.stages:
        return Migration(layer_ready_s[-1] if layer_ready_s else 0.0, 0.0, 0.0)
    stages = path.stages
    host = path.host_started or (False,) * len(stages)
    pieces = chunk_sizes(kv_bytes / len(layer_ready_s), chunk_bytes, len(stages) > 1)
    durations = [[st.time_s(b) for b in pieces] for st in stages]
    all_keys = tuple(k for st in stages for k in st.keys)
    done = 0.0
    if not force_calendar and calendar.is_free_after(all_keys, layer_ready_s[0]):
        n_stages = range(len(stages))
        free = [0.0] * len(stages)
        booked: list[tuple[list[float], list[float]]] = [([], []) for _ in stages]

        def send_layer(ready: float) -> float:
            t = ready
            for j in range(len(pieces)):
                t = ready
                for h in n_stages:
                    start = t if t > free[h] else free[h]
                    if host[h] and start < host_free_s:
                        start = host_free_s
                    t = start + durations[h][j]
                    free[h] = t
                    booked[h][0].append(start)
                    booked[h][1].append(t)
            return t

        pattern: list[tuple[list[float], list[float]]] | None = None
        for ready in layer_ready_s:
            if ready < host_free_s or any(f > ready for f in free):
                done = max(done, send_layer(ready))  # a backlog or the host: chunk by chunk
                continue
            # links idle when the layer is ready: its chunks follow one pattern, shifted to ``ready``
            if pattern is None:
                marks = [len(b[0]) for b in booked]
                saved = free[:]
                send_layer(ready)
                pattern = [([x - ready for x in b[0][m:]], [x - ready for x in b[1][m:]])
                           for b, m in zip(booked, marks)]
                free[:] = saved
                for b, m in zip(booked, marks):
                    del b[0][m:], b[1][m:]
            for h in n_stages:
                booked[h][0].extend([ready + x for x in pattern[h][0]])
                booked[h][1].extend([ready + x for x in pattern[h][1]])
                free[h] = booked[h][1][-1]
            done = max(done, free[-1])
        for st, (starts, ends) in zip(stages, booked):
            if min(min(d) for d in durations) <= 0.0:  # drop empty DMAs (a zero-latency link, nothing to send)
                keep = [(s, e) for s, e in zip(starts, ends) if e > s]
                starts, ends = [s for s, _e in keep], [e for _s, e in keep]
            for key in st.keys:
                calendar.extend(key, starts, ends)
    else:
        for ready in layer_ready_s:
            for j in range(len(pieces)):
                t = ready
                for h, st in enumerate(stages):
                    if host[h] and t < host_free_s:
                        t = host_free_s
                    t = calendar.book(st.keys, t, durations[h][j]) + durations[h][j]
                if t > done:
                    done = t
    n = len(layer_ready_s)
    return Migration(done, n * sum(sum(d) for d in durations), n * sum(durations[-1]))
