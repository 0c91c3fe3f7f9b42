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
import functools
import math
from collections.abc import Hashable, Sequence
from typing import NamedTuple

import numba
import numpy as np

from hwmodel.specs import LinkSpec
from interconnect.pcie import DEFAULT_CHUNK_BYTES, Hop  # the staging buffer and the DMA stage of the PCIe model

PATH_KINDS = ("local", "host-staged", "p2p", "network-host-staged", "network-p2p")


@dataclasses.dataclass(frozen=True)
class Path:
    """How a KV cache travels from a prefill device to a decode device. ``host_started[i]`` marks stages the
    prefilling node's host must start (a host-staged copy out of its staging buffer)."""

    kind: str
    stages: tuple[Hop, ...]  # each with the link directions it holds (keys)
    host_started: tuple[bool, ...] = ()
    #: chunk plans of :func:`migrate` by (KV bytes, layers, chunk bytes): a path is reused by every migration
    #: between its two devices, which mostly move caches of a few sizes
    plans: dict[tuple[float, int, float], ChunkPlan] = dataclasses.field(
        default_factory=dict, compare=False, hash=False, repr=False
    )

    @functools.cached_property
    def keys(self) -> tuple[Hashable, ...]:
        """Every link direction the path holds."""
        return tuple(k for st in self.stages for k in st.keys)

    def uncontended_s(self, n_bytes: float) -> float:
        """One chunk of ``n_bytes`` through every stage in turn, links otherwise idle."""
        return sum(s.time_s(n_bytes) for s in self.stages)


@dataclasses.dataclass(frozen=True)
class ChunkPlan:
    """How one KV cache size crosses a path: ``dur_s[h][j]`` is chunk j's DMA time on stage h."""

    dur_s: list[list[float]]
    dur_array: np.ndarray
    host: np.ndarray
    keys: tuple[Hashable, ...]
    has_empty: bool  # some DMA takes no time (a zero-latency link, nothing to send): such DMAs are not booked
    link_busy_s: float
    dst_busy_s: float
    #: FIFO schedules on idle links by id of their memo key (see :func:`migrate`)
    fifo: dict[int, tuple[object, list[tuple[np.ndarray, np.ndarray, float]], float]] = dataclasses.field(
        default_factory=dict, compare=False, repr=False
    )


def chunk_plan(path: Path, kv_bytes: float, n_layers: int, chunk_bytes: float) -> ChunkPlan:
    """The chunking of ``kv_bytes`` (an equal share per layer) over ``path`` (memoized on the path)."""
    key = (kv_bytes, n_layers, chunk_bytes)
    plan = path.plans.get(key)
    if plan is None:
        stages = path.stages
        pieces = chunk_sizes(kv_bytes / n_layers, chunk_bytes, len(stages) > 1)
        dur = [[st.time_s(b) for b in pieces] for st in stages]
        plan = path.plans[key] = ChunkPlan(
            dur,
            np.array(dur, dtype=np.float64),
            np.array(path.host_started or (False,) * len(stages), dtype=np.bool_),
            tuple(k for st in stages for k in st.keys),
            min(min(d) for d in dur) <= 0.0,
            n_layers * sum(sum(d) for d in dur),
            n_layers * sum(dur[-1]),
        )
    return plan


def link_stage(keys: tuple[Hashable, ...], links: Sequence[LinkSpec]) -> Hop:
    """A stage over ``links`` at once: the slowest bandwidth, the largest latency (one DMA through a switch)."""
    return Hop.over(*links, keys=keys)


def build_path(
    kv_path: str,
    *,
    src: int,
    dst: int,
    src_node: int,
    dst_node: int,
    src_link: LinkSpec,
    dst_link: LinkSpec,
    network: LinkSpec | None,
) -> Path:
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
        stage = Hop(
            min(src_link.effective_bw_bytes_per_s, network.effective_bw_bytes_per_s, dst_link.effective_bw_bytes_per_s),
            src_link.latency_s + network.latency_s + dst_link.latency_s,
            (up, tx, rx, down),
        )
        return Path("network-p2p", (stage,), (False,))
    # the sending host posts the network transfer; the receiving host's DMA into the FPGA waits on nothing else
    return Path(
        "network-host-staged",
        (link_stage((up,), (src_link,)), link_stage((tx, rx), (network,)), link_stage((down,), (dst_link,))),
        (False, True, False),
    )


class LinkCalendar:
    """Busy intervals per link direction, sorted by start; intervals never overlap within one direction.

    Intervals the uncontended fast path adds (:meth:`extend`) stay as the array blocks it produced until a
    first-fit search (:meth:`book`) or a listing needs that direction's intervals one by one; most directions are
    only ever extended, checked for being free and pruned, which never needs them one by one."""

    def __init__(self) -> None:
        self._starts: dict[Hashable, list[float]] = {}
        self._ends: dict[Hashable, list[float]] = {}
        self._blocks: dict[Hashable, list[tuple[np.ndarray, np.ndarray, float, float]]] = {}  # after the lists

    def _flatten(self, key: Hashable) -> None:
        blocks = self._blocks.pop(key, None)
        if blocks:
            starts = self._starts.setdefault(key, [])
            ends = self._ends.setdefault(key, [])
            for s_arr, e_arr, shift_s, _end in blocks:
                starts.extend((shift_s + s_arr).tolist())
                ends.extend((shift_s + e_arr).tolist())

    def prune(self, now_s: float, keys: Sequence[Hashable] | None = None, min_kept: int = 0) -> None:
        """Forget intervals that ended before ``now_s`` (no later request can be ready before now), on ``keys``
        only when given (the directions a migration is about to use; the others keep theirs until they are used,
        which changes no booking), and only on directions with more than ``min_kept`` intervals (an interval that
        ended before every later ready time changes no booking either: pruning only bounds the lists). A block of
        the fast path goes once all of it has ended."""
        for key in list(self._ends.keys() | self._blocks.keys()) if keys is None else keys:
            blocks = self._blocks.get(key)
            if blocks and blocks[0][3] < now_s:
                k = 1
                while k < len(blocks) and blocks[k][3] < now_s:
                    k += 1
                del blocks[:k]
                if key in self._ends:  # the lists end before the first block did
                    self._ends[key].clear()
                    self._starts[key].clear()
                continue
            ends = self._ends.get(key)
            if ends and len(ends) > min_kept and ends[0] < now_s:
                # intervals are disjoint and sorted, so their ends are sorted too
                k = bisect.bisect_left(ends, now_s)
                del ends[:k]
                del self._starts[key][:k]

    def book(self, keys: tuple[Hashable, ...], ready_s: float, dur_s: float) -> float:
        """Reserve ``dur_s`` on every direction in ``keys`` at the earliest start >= ``ready_s``; returns it."""
        t = ready_s
        if dur_s <= 0.0:
            return t
        for key in keys:
            if key in self._blocks:
                self._flatten(key)
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
        self._flatten(key)
        return list(zip(self._starts.get(key, ()), self._ends.get(key, ())))

    def is_free_after(self, keys: tuple[Hashable, ...], t_s: float) -> bool:
        """No interval of any of ``keys`` ends after ``t_s``."""
        for key in keys:
            blocks = self._blocks.get(key)
            if blocks:
                if blocks[-1][3] > t_s:
                    return False
                continue
            ends = self._ends.get(key)
            if ends and ends[-1] > t_s:
                return False
        return True

    def extend(
        self, key: Hashable, starts: np.ndarray, ends: np.ndarray, shift_s: float = 0.0, last_end_s: float | None = None
    ) -> None:
        """Add the intervals ``[shift_s + starts[i], shift_s + ends[i])`` (sorted, disjoint, known to start after
        every interval of ``key``: the uncontended fast path) as one block; ``last_end_s`` is the last of them
        when the caller knows it."""
        if len(starts):
            last = float(shift_s + ends[-1]) if last_end_s is None else last_end_s
            self._blocks.setdefault(key, []).append((starts, ends, shift_s, last))


class Migration(NamedTuple):
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


def migrate(
    calendar: LinkCalendar,
    path: Path,
    kv_bytes: float,
    layer_ready_s: Sequence[float],
    *,
    chunk_bytes: float = DEFAULT_CHUNK_BYTES,
    host_free_s: float = 0.0,
    start_s: float = 0.0,
    memo_key: object | None = None,
    force_calendar: bool = False,
) -> Migration:
    """Send ``kv_bytes``, an equal share per layer; layer i's share is ready at ``start_s + layer_ready_s[i]``
    (its layer of the prefill done, quantized). On a multi-stage path each share goes as chunks of at most
    ``chunk_bytes`` (the staging buffer) that cross the stages store-and-forward; stages the host starts wait for
    ``start_s + host_free_s`` (a serving process whose one thread issues the prefill and drives the staging).
    Returns when the last chunk has crossed the last stage.

    When none of the path's links is booked beyond the first ready time, the chunks go FIFO without searching
    the calendars (for one migration alone, first fit and FIFO coincide), and that schedule is the same for every
    migration of these offsets up to its start time: it is worked out relative to ``start_s`` (once per
    ``memo_key``, an object that stands for these offsets, e.g. the prefill plan that produced them) and shifted.
    ``force_calendar`` always searches."""
    n_layers = len(layer_ready_s)
    if not path.stages:
        return Migration(start_s + layer_ready_s[-1] if n_layers else start_s, 0.0, 0.0)
    stages = path.stages
    plan = chunk_plan(path, kv_bytes, n_layers, chunk_bytes)
    if not force_calendar and calendar.is_free_after(plan.keys, start_s + layer_ready_s[0]):
        fifo = plan.fifo.get(id(memo_key)) if memo_key is not None else None
        if fifo is None:
            fifo = _fifo_schedule(plan, layer_ready_s, host_free_s, memo_key)
            if memo_key is not None:
                plan.fifo[id(memo_key)] = fifo
        blocks, done = fifo[1], fifo[2]
        for st, (rel_s, rel_e, rel_last) in zip(stages, blocks):
            for key in st.keys:
                calendar.extend(key, rel_s, rel_e, start_s, start_s + rel_last)
        return Migration(start_s + done, plan.link_busy_s, plan.dst_busy_s)
    host = path.host_started or (False,) * len(stages)
    durations = plan.dur_s
    host_at = start_s + host_free_s
    done = 0.0
    for off in layer_ready_s.tolist() if isinstance(layer_ready_s, np.ndarray) else layer_ready_s:
        ready = start_s + off
        for j in range(len(durations[0])):
            t = ready
            for h, st in enumerate(stages):
                if host[h] and t < host_at:
                    t = host_at
                t = calendar.book(st.keys, t, durations[h][j]) + durations[h][j]
            if t > done:
                done = t
    return Migration(done, plan.link_busy_s, plan.dst_busy_s)


def _fifo_schedule(
    plan: ChunkPlan, layer_ready_s: Sequence[float], host_free_s: float, memo_key: object
) -> tuple[object, list[tuple[np.ndarray, np.ndarray, float]], float]:
    """The FIFO chunk schedule on idle links, relative to the prefill's start: per stage its busy intervals and
    their last end; the last arrival. (``memo_key`` is kept with it, so the id it is filed under stays taken.)"""
    starts, ends, counts, done = _fifo_chunks(
        np.asarray(layer_ready_s, dtype=np.float64), float(host_free_s), plan.dur_array, plan.host, plan.has_empty
    )
    blocks = []
    for h in range(len(counts)):
        k = int(counts[h])
        blocks.append((starts[h, :k].copy(), ends[h, :k].copy(), float(ends[h, k - 1]) if k else -math.inf))
    return memo_key, blocks, float(done)


@numba.njit(cache=True)
def _fifo_chunks(
    ready_s: np.ndarray, host_free_s: float, dur_s: np.ndarray, host: np.ndarray, drop_empty: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:  # pragma: no cover
    """The uncontended migration: chunks go FIFO through the stages (store-and-forward), links idle before the
    first layer is ready. ``dur_s[h, j]`` is chunk j's DMA time on stage h; stages with ``host[h]`` start no
    earlier than ``host_free_s``. Returns each stage's busy intervals (``counts[h]`` of them, in time order;
    chunks that follow each other without a gap make one interval, which books exactly what the chunks would;
    with ``drop_empty``, DMAs that take no time are not booked) and the last chunk's arrival.

    A layer ready when every stage is idle and the host is free follows the chunk pattern of the first such layer,
    shifted to its ready time (so its times are ``ready + offset``: the float rounding of :func:`migrate`'s
    reference search differs by an ulp at most, which the tests allow); a layer that finds a backlog or a busy
    host is sent chunk by chunk."""
    n_stages, n_pieces = dur_s.shape
    n_layers = ready_s.shape[0]
    starts = np.empty((n_stages, n_layers * n_pieces))
    ends = np.empty((n_stages, n_layers * n_pieces))
    counts = np.zeros(n_stages, dtype=np.int64)
    free = np.zeros(n_stages)
    pat_s = np.empty((n_stages, n_pieces))
    pat_e = np.empty((n_stages, n_pieces))
    have_pattern = False
    done = 0.0
    for i in range(n_layers):
        r = ready_s[i]
        chunked = r < host_free_s
        if not chunked:
            for h in range(n_stages):
                if free[h] > r:
                    chunked = True
                    break
        if chunked or not have_pattern:
            scratch = free if chunked else free.copy()
            t = r
            for j in range(n_pieces):
                t = r
                for h in range(n_stages):
                    start = t if t > scratch[h] else scratch[h]
                    if host[h] and start < host_free_s:
                        start = host_free_s
                    t = start + dur_s[h, j]
                    scratch[h] = t
                    if chunked:
                        _book(starts, ends, counts, h, start, t, drop_empty)
                    else:
                        pat_s[h, j] = start - r
                        pat_e[h, j] = t - r
            if chunked:
                if t > done:
                    done = t
                continue
            have_pattern = True
        for h in range(n_stages):
            for j in range(n_pieces):
                _book(starts, ends, counts, h, r + pat_s[h, j], r + pat_e[h, j], drop_empty)
            free[h] = r + pat_e[h, n_pieces - 1]
        if free[n_stages - 1] > done:
            done = free[n_stages - 1]
    return starts, ends, counts, done


@numba.njit(cache=True, inline="always")
def _book(
    starts: np.ndarray, ends: np.ndarray, counts: np.ndarray, h: int, start: float, end: float, drop_empty: bool
) -> None:  # pragma: no cover - compiled
    """Append [start, end) to stage h's intervals, joined to the last one when it starts where that one ends."""
    k = counts[h]
    if drop_empty and not end > start:
        return
    if k > 0 and start == ends[h, k - 1]:
        if end > ends[h, k - 1]:
            ends[h, k - 1] = end
        return
    starts[h, k] = start
    ends[h, k] = end
    counts[h] = k + 1
