"""Transfers over PCIe (and other links): one DMA, host-staged two-hop paths, peer-to-peer, and KV-cache migration
overlapped with the prefill that produces it.

* One DMA over one link: ``latency + bytes / effective bandwidth`` (the link spec's typical achieved DMA rate and
  one-way latency including descriptor fetch).
* **Host-staged** GPU -> host -> FPGA (GLITCHES): data goes in chunks through a pinned host buffer; chunk k crosses
  hop 2 (host -> FPGA) while chunk k+1 crosses hop 1 (GPU -> host), so a long transfer runs at the slower hop's
  rate and pays the faster hop only once. Each hop is one DMA per chunk. Starting the hop-2 DMA of a chunk needs the
  host (it learns that the GPU copy finished, then posts the FPGA DMA).
* **Peer-to-peer** GPU -> FPGA through a PCIe switch: one DMA that holds both ports at once, so it runs at the
  slower link's bandwidth and pays the larger latency once; no host involved.
* **KV migration overlapped with prefill**: layer l's KV cache (quantized on the GPU to the FPGA's KV precision
  first) leaves as soon as layer l is done; chunks queue on the hops in layer order; what finishes after the prefill
  is *exposed*. With ``host_thread="shared"`` (the default: a Python serving process whose one thread both issues
  the prefill's kernels and drives the staging) hop 2 can only start once the host has issued the whole prefill:
  a host-bound (short) prefill leaves no host time to hide the transfer, a GPU-bound (long) one does. With
  ``"dedicated"`` a separate thread services the staging at once.

Sizes are bytes; times seconds. The chunk size of the staging buffer is a design choice, not a hardware fact.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from hwmodel.errors import HwmodelError
from hwmodel.graph import kv_cache_bytes
from hwmodel.specs import BoardSpec, LinkSpec, library

if TYPE_CHECKING:
    from gpu.latency import GpuEngine

DEFAULT_CHUNK_BYTES = 4 * 1024 * 1024  # pinned staging buffer per DMA (design choice)
PATHS = ("direct", "host", "p2p")
HOST_THREADS = ("shared", "dedicated")


def _check_bytes(n_bytes: float) -> float:
    if not isinstance(n_bytes, (int, float)) or isinstance(n_bytes, bool) or not math.isfinite(n_bytes) or n_bytes < 0:
        raise HwmodelError(f"transfer size must be a finite number of bytes >= 0, got {n_bytes!r}")
    return float(n_bytes)


def _check_chunk(chunk_bytes: float) -> float:
    if not isinstance(chunk_bytes, (int, float)) or not math.isfinite(chunk_bytes) or chunk_bytes <= 0:
        raise HwmodelError(f"chunk size must be a positive number of bytes, got {chunk_bytes!r}")
    return float(chunk_bytes)


def transfer_s(n_bytes: float, link: LinkSpec) -> float:
    """One DMA of ``n_bytes`` over ``link``: setup latency + bytes / effective bandwidth (0 for nothing to send)."""
    b = _check_bytes(n_bytes)
    return 0.0 if b == 0 else link.latency_s + b / link.effective_bw_bytes_per_s


@dataclasses.dataclass(frozen=True)
class Hop:
    """One DMA stage of a path: a bandwidth and a per-DMA latency (one link, or several held at once); ``keys``
    names the link directions it holds, for the serving simulator's contention calendars
    (:mod:`hwmodel.serving.transfer`)."""

    bw_bytes_per_s: float
    latency_s: float
    keys: tuple[Hashable, ...] = ()

    def time_s(self, n_bytes: float) -> float:
        return self.latency_s + n_bytes / self.bw_bytes_per_s

    @staticmethod
    def over(*links: LinkSpec, keys: tuple[Hashable, ...] = ()) -> Hop:
        """A DMA through ``links`` at once (through a switch): the slowest bandwidth, the largest latency."""
        return Hop(min(lk.effective_bw_bytes_per_s for lk in links), max(lk.latency_s for lk in links), keys)


@dataclasses.dataclass(frozen=True)
class TransferPath:
    """How bytes get from a source device to a destination: hops crossed in order, chunk by chunk."""

    kind: str  # "direct", "host" or "p2p"
    hops: tuple[Hop, ...]
    needs_host: bool  # hop 2 is started by the host (host-staged)
    description: str

    def time_s(self, n_bytes: float, chunk_bytes: float = DEFAULT_CHUNK_BYTES) -> float:
        """All of ``n_bytes``, ready now, links idle."""
        b = _check_bytes(n_bytes)
        if b == 0:
            return 0.0
        return self.schedule([(0.0, b)], chunk_bytes)[-1]

    def schedule(
        self, items: Sequence[tuple[float, float]], chunk_bytes: float = DEFAULT_CHUNK_BYTES, host_free_s: float = 0.0
    ) -> list[float]:
        """Send ``items`` = [(ready time, bytes), ...] in order; returns when each item has fully arrived.

        Multi-hop paths split every item into chunks of at most ``chunk_bytes`` that cross the hops store-and-
        forward (a chunk starts hop h+1 when it finished hop h and hop h+1 is free); hops after the first that the
        host starts wait for ``host_free_s``. A single-hop path sends each item as one DMA.
        """
        chunk = _check_chunk(chunk_bytes)
        free = [0.0] * len(self.hops)
        done: list[float] = []
        for ready, n_bytes in items:
            b = _check_bytes(n_bytes)
            if b == 0:
                done.append(max(ready, done[-1] if done else ready))
                continue
            if len(self.hops) == 1:
                pieces = np.array([b])
            else:
                count = math.ceil(b / chunk)
                pieces = np.full(count, chunk)
                pieces[-1] = b - (count - 1) * chunk
            arrive = np.full(len(pieces), float(ready))
            for h, hop in enumerate(self.hops):
                floor = max(free[h], host_free_s) if (h > 0 and self.needs_host) else free[h]
                t = hop.latency_s + pieces / hop.bw_bytes_per_s
                cum = np.cumsum(t)
                # chunk j ends at t_j + max(its arrival, the previous chunk's end): a max-plus scan
                arrive = cum + np.maximum.accumulate(np.maximum(arrive, floor) - (cum - t))
                free[h] = float(arrive[-1])
            done.append(free[-1])
        return done


def direct_path(link: LinkSpec) -> TransferPath:
    return TransferPath("direct", (Hop.over(link),), False, f"one DMA over {link.name}")


def host_staged_path(src_link: LinkSpec, dst_link: LinkSpec) -> TransferPath:
    """GPU -> host memory over ``src_link``, then host -> FPGA over ``dst_link`` (chunks pipelined)."""
    return TransferPath(
        "host",
        (Hop.over(src_link), Hop.over(dst_link)),
        True,
        f"host-staged: {src_link.name} to host memory, then {dst_link.name}",
    )


def p2p_path(src_link: LinkSpec, dst_link: LinkSpec) -> TransferPath:
    """GPU -> FPGA peer-to-peer through a PCIe switch (one DMA over both ports)."""
    return TransferPath(
        "p2p", (Hop.over(src_link, dst_link),), False, f"peer-to-peer over {src_link.name} and {dst_link.name} at once"
    )


def host_staged_s(
    n_bytes: float, src_link: LinkSpec, dst_link: LinkSpec, chunk_bytes: float = DEFAULT_CHUNK_BYTES
) -> float:
    """``n_bytes`` GPU -> host -> FPGA, chunks pipelined over the two hops."""
    return host_staged_path(src_link, dst_link).time_s(n_bytes, chunk_bytes)


def p2p_s(n_bytes: float, src_link: LinkSpec, dst_link: LinkSpec) -> float:
    """``n_bytes`` GPU -> FPGA peer-to-peer: the larger latency, the smaller bandwidth."""
    return p2p_path(src_link, dst_link).time_s(n_bytes)


def path_between(kind: str, src_link: LinkSpec, dst_link: LinkSpec | None = None) -> TransferPath:
    """The path of ``kind`` ("direct" uses ``src_link`` only)."""
    if kind == "direct":
        return direct_path(src_link)
    if dst_link is None:
        raise HwmodelError(f"a {kind} path needs a destination link")
    if kind == "host":
        return host_staged_path(src_link, dst_link)
    if kind == "p2p":
        return p2p_path(src_link, dst_link)
    raise HwmodelError(f"unknown transfer path {kind!r}; valid choices: {', '.join(PATHS)}")


# ================================================================================================ KV migration
@dataclasses.dataclass(frozen=True)
class KvMigration:
    """A prompt's KV cache moved GPU -> FPGA layer by layer while the GPU prefills it.

    ``prefill_s``: the GPU prefill (with the per-layer KV quantization kernels); ``transfer_s``: the same bytes over
    the path with nothing to wait for (what the overlap has to hide); ``exposed_s``: how long after the prefill
    the last byte arrives (>= 0). ``total_s = prefill_s + exposed_s`` is when the FPGA can start decoding.
    """

    llm: str
    gpu: str
    fpga: str
    path: str
    prompt_tokens: int
    layers: int
    kv_bits: int
    kv_bytes: int
    prefill_s: float
    transfer_s: float
    exposed_s: float
    host_done_s: float
    host_thread: str

    @property
    def total_s(self) -> float:
        return self.prefill_s + self.exposed_s

    @property
    def hidden_fraction(self) -> float:
        """Share of the transfer time hidden behind the prefill (1 = fully hidden)."""
        return 1.0 - self.exposed_s / self.transfer_s if self.transfer_s > 0 else 1.0

    def as_dict(self) -> dict[str, object]:
        d = dataclasses.asdict(self)
        d.update(total_s=self.total_s, hidden_fraction=self.hidden_fraction)
        return d


def check_migration_fits(llm: Any, board: BoardSpec, prompt_tokens: int, kv_bits: int) -> None:
    """The prompt must fit the LLM's positions, and the FPGA must hold what it decodes with: the migrated KV cache
    plus the weights at 8 bits (the FPGA draft precision, :func:`hwmodel.bounds.default_bits`) in its HBM."""
    from hwmodel.bounds import resident_bytes
    from hwmodel.domains import DomainError, check_context

    check_context(0, llm, "--prompt", new_tokens=prompt_tokens)
    kv = llm.kv_bytes(prompt_tokens, kv_bits)
    need = resident_bytes(llm, 8, kv_bits, prompt_tokens)
    cap = board.hbm.capacity_bytes
    if need > cap:
        raise DomainError(
            "--prompt",
            f"a KV cache that fits board '{board.name}': KV {kv / 1e9:.2f} GB + W8 weights "
            f"{(need - kv) / 1e9:.2f} GB within its {cap / 1e9:.2f} GB of HBM",
            f"{prompt_tokens:,} tokens ({need / 1e9:.2f} GB)",
        )


def kv_migration(
    engine: GpuEngine,
    fpga: BoardSpec | str,
    prompt_tokens: int,
    path: str = "host",
    kv_bits: int = 8,
    chunk_bytes: float = DEFAULT_CHUNK_BYTES,
    host_thread: str = "shared",
    src_link: LinkSpec | None = None,
    dst_link: LinkSpec | None = None,
) -> KvMigration:
    """Migrate the KV cache of a ``prompt_tokens`` prompt from ``engine``'s GPU to ``fpga`` during the prefill.

    Layer l's KV (K and V of every token, ``kv_bits`` per element after quantization on the GPU) is ready when the
    GPU finished layer l and its quantization kernel (which runs on the GPU's stream, so it also delays the later
    layers); the chunks then go through the path in layer order.
    """
    lib = library()
    board = lib.board(fpga) if isinstance(fpga, str) else fpga
    if path not in ("host", "p2p"):
        raise HwmodelError(f"a KV migration path must be 'host' or 'p2p', got {path!r}")
    if host_thread not in HOST_THREADS:
        raise HwmodelError(f"host_thread must be one of {', '.join(HOST_THREADS)}, got {host_thread!r}")
    if kv_bits not in (4, 8, 16) or kv_bits > engine.kv_bits:
        raise HwmodelError(
            f"migrated KV bits must be 4, 8 or 16 and at most the GPU's KV precision ({engine.kv_bits}), got {kv_bits}"
        )
    src = src_link or lib.link(engine.gpu.host_link)
    dst = dst_link or lib.link(board.host_link)
    route = path_between(path, src, dst)
    llm = engine.llm
    check_migration_fits(llm, board, prompt_tokens, kv_bits)
    timeline = engine.prefill_timeline(prompt_tokens)
    layer_bytes = kv_cache_bytes(llm, kv_bits, float(prompt_tokens), layers=1)
    if kv_bits < engine.kv_bits:  # quantization kernel per layer: read the layer's KV, write the quantized copy
        rf = engine.roofline
        read = kv_cache_bytes(llm, engine.kv_bits, float(prompt_tokens), layers=1)
        t_quant = rf.t_kernel_s + (read + layer_bytes) / (rf.eta_bw * rf.bw_bytes_per_s)
    else:
        t_quant = 0.0
    ready = [end + (k + 1) * t_quant for k, end in enumerate(timeline.layer_end_s)]
    prefill = timeline.total_s + llm.layers * t_quant
    host_free = timeline.host_done_s if host_thread == "shared" else 0.0
    arrived = route.schedule([(r, layer_bytes) for r in ready], chunk_bytes, host_free_s=host_free)
    total_bytes = int(round(layer_bytes * llm.layers))
    alone = route.schedule([(0.0, layer_bytes)] * llm.layers, chunk_bytes)[-1]
    return KvMigration(
        llm=llm.name,
        gpu=engine.gpu.name,
        fpga=board.name,
        path=path,
        prompt_tokens=prompt_tokens,
        layers=llm.layers,
        kv_bits=kv_bits,
        kv_bytes=total_bytes,
        prefill_s=prefill,
        transfer_s=alone,
        exposed_s=max(0.0, arrived[-1] - prefill),
        host_done_s=timeline.host_done_s,
        host_thread=host_thread,
    )
