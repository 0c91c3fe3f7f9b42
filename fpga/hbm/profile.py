"""Bandwidth profiles of one AXI port's HBM channels (:func:`profile_bandwidth`): request patterns (sequential,
strided, random), read/write mixes, outstanding limits, AXI IDs, masters sharing channels through the switch, run on
the bank-level channel model (:mod:`fpga.hbm.channel`) and the controller's scheduler (:mod:`fpga.hbm.scheduler`).
Re-exported from :mod:`fpga.hbm.channel`, where it lived before the channel kernel outgrew one file."""

from __future__ import annotations

import dataclasses

import numpy as np

from fpga.hbm.channel import (
    CS_ACTS,
    CS_N,
    HP_REFI,
    channel_peak_bytes_per_s,
    hbm_params,
    new_channel_state,
    set_refresh_phase,
)
from hwmodel.errors import HwmodelError
from hwmodel.specs import BoardSpec

PATTERNS = ("sequential", "strided:BYTES", "random[:SPAN]")


def parse_pattern(text: str) -> tuple[str, int]:
    """'sequential' -> ('sequential', 0); 'strided:4096' -> ('strided', 4096); 'random[:SPAN]' -> ('random', SPAN
    bytes, 0 = the whole pseudo-channel). Sizes take K/M/G suffixes (powers of 1024)."""
    kind, _, arg = text.strip().lower().partition(":")
    mult = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}

    def size(v: str) -> int:
        v = v.strip().rstrip("b")
        k = mult.get(v[-1:], 1)
        try:
            n = int(float(v[:-1] if k > 1 else v) * k)
        except ValueError:
            raise HwmodelError(f"pattern '{text}': '{v}' is not a byte count") from None
        if n <= 0:
            raise HwmodelError(f"pattern '{text}': the size must be positive")
        return n

    if kind == "sequential" and not arg:
        return "sequential", 0
    if kind == "strided" and arg:
        return "strided", size(arg)
    if kind == "random":
        return "random", size(arg) if arg else 0
    raise HwmodelError(f"pattern '{text}': expected one of {', '.join(PATTERNS)}")


def pattern_addresses(
    pattern: str, n: int, req_bytes: int, pc_bytes: int, seed: int = 0, offset_bytes: int = 0
) -> np.ndarray:
    """Byte addresses of ``n`` requests of ``req_bytes`` inside one pseudo-channel share of ``pc_bytes``:
    sequential, strided (start to start), or uniformly random request-aligned over a span (seeded)."""
    kind, arg = parse_pattern(pattern)
    if kind == "sequential":
        a = offset_bytes + np.arange(n, dtype=np.int64) * req_bytes
    elif kind == "strided":
        a = offset_bytes + np.arange(n, dtype=np.int64) * arg
    else:
        span = min(arg or pc_bytes, pc_bytes)
        slots = max(1, span // req_bytes)
        a = offset_bytes + np.random.default_rng(seed).integers(0, slots, n, dtype=np.int64) * req_bytes
    return a % pc_bytes


def profile_bandwidth(
    board: BoardSpec,
    kernel_clock_hz: float,
    req_bytes: int,
    *,
    outstanding: int = 16,
    port_width_bits: int = 512,
    stride_bytes: int | None = None,
    offset_bytes: int = 0,
    total_bytes: int = 8 << 20,
    write: bool = False,
    pattern: str | None = None,
    write_fraction: float | None = None,
    channels: tuple[int, ...] | None = None,
    port: int | None = None,
    seed: int = 0,
    refresh_phase_cycles: int = 0,
    outstanding_writes: int | None = None,
    axi_ids: int = 1,
    reorder: bool | None = None,
    masters: int = 1,
) -> dict[str, float]:
    """Effective bandwidth of one port: ``req_bytes`` requests in ``pattern`` (default sequential, or strided by
    ``stride_bytes``), a fraction ``write_fraction`` of them writes (all writes if ``write``), spread round-robin
    (sequential / strided) or at random (random) over the pseudo-channels ``channels`` (default: the port's own),
    seen from AXI port ``port`` (default: the first channel's own port) through the HBM switch.

    ``outstanding`` / ``outstanding_writes`` (default the same): reads / writes in flight; ``axi_ids``: AXI IDs
    the port cycles through (1: an HLS ``m_axi`` port); ``reorder``: the controller's request reordering (default
    the board's ``request_reordering``; fpga/hbm/scheduler.py); ``masters``: that many such ports (AXI ports
    ``port``, ``port + 1``, ...; master m's stream seeded ``seed + m``) sharing the channels through the switch
    (``bw_bytes_per_s`` is then their sum)."""
    from fpga.hbm.scheduler import controller_window, masters_profile

    outstanding_writes = outstanding if outstanding_writes is None else outstanding_writes
    if min(req_bytes, outstanding, outstanding_writes, port_width_bits, axi_ids, masters) <= 0:
        raise HwmodelError("request bytes, outstanding requests, AXI IDs, masters and port width must be positive")
    h = board.hbm
    n_pc = h.pseudo_channels * h.ports_per_pc
    chans = tuple(channels) if channels else (0,)
    for c in chans:
        if not 0 <= c < n_pc:
            raise HwmodelError(f"pseudo-channel {c} is not on board '{board.name}' (0 .. {n_pc - 1})")
    port = chans[0] if port is None else port
    if not 0 <= port < h.axi_ports:
        raise HwmodelError(f"AXI port {port} is not on board '{board.name}' (0 .. {h.axi_ports - 1})")
    if pattern is None:
        pattern = "sequential" if stride_bytes is None or stride_bytes == req_bytes else f"strided:{stride_bytes}"
    kind, _arg = parse_pattern(pattern)
    p = hbm_params(board, kernel_clock_hz, refresh_phase_cycles)
    n = max(1, total_bytes // req_bytes)
    pc_bytes = h.pc_capacity_bytes // h.ports_per_pc
    wf = 1.0 if write else (write_fraction or 0.0)
    seg = h.switch_segment_ports
    parts = []
    for m in range(masters):  # master m: AXI port port + m, its own stream (seed + m)
        sd = seed + m
        rng = np.random.default_rng(sd + 1)
        if kind == "random":
            ch = (
                np.array(chans, dtype=np.int64)[rng.integers(0, len(chans), n)]
                if len(chans) > 1
                else np.full(n, chans[0], dtype=np.int64)
            )
            addrs = pattern_addresses(pattern, n, req_bytes, pc_bytes, sd, offset_bytes)
        else:  # consecutive requests go to consecutive channels of the map, each channel's stream in order
            ch = np.array([chans[r % len(chans)] for r in range(n)], dtype=np.int64)
            addrs = pattern_addresses(pattern, n, req_bytes, pc_bytes, sd, offset_bytes)
            if len(chans) > 1:
                addrs = pattern_addresses(pattern, -(-n // len(chans)), req_bytes, pc_bytes, sd, offset_bytes)[
                    np.arange(n) // len(chans)
                ]
        wr = (rng.random(n) < wf).astype(np.int64) if 0.0 < wf < 1.0 else np.full(n, int(wf >= 1.0), np.int64)
        mport = (port + m) % h.axi_ports
        parts.append((addrs, ch, wr, [abs(c // seg - mport // seg) for c in range(n_pc)]))
    addrs = np.concatenate([x[0] for x in parts])
    ch = np.concatenate([x[1] for x in parts])
    writes = np.concatenate([x[2] for x in parts])
    hops = np.array([x[3] for x in parts], dtype=np.int64)
    st = np.zeros((n_pc, CS_N), dtype=np.int64)
    for c in range(n_pc):
        st[c] = new_channel_state()
        set_refresh_phase(p, st[c], refresh_phase_cycles + c * int(p[HP_REFI]) // n_pc)
    if reorder is not None:
        h = dataclasses.replace(h, request_reordering=bool(reorder))
    window = controller_window(h)
    last_k, last_axi, _lands = masters_profile(
        p,
        st,
        addrs,
        ch,
        np.repeat(np.arange(masters), n),
        masters,
        req_bytes,
        writes,
        outstanding,
        outstanding_writes,
        axi_ids,
        window,
        port_width_bits // 8,
        hops,
        h.lateral_hop_cycles,
    )
    nbytes = masters * n * req_bytes
    seconds = last_k / kernel_clock_hz
    peak = channel_peak_bytes_per_s(board)
    used = sorted(set(int(c) for c in ch))
    acts = int(st[used, CS_ACTS].sum())
    return {
        "pattern": pattern,
        "req_bytes": req_bytes,
        "outstanding": outstanding,
        "outstanding_writes": outstanding_writes,
        "axi_ids": axi_ids,
        "reorder_window": window,
        "port_width_bits": port_width_bits,
        "kernel_clock_hz": kernel_clock_hz,
        "write_fraction": wf,
        "channels": len(used),
        "lateral_hops_max": int(hops[:, used].max()),
        "bytes": nbytes,
        "masters": masters,
        "seconds": seconds,
        "bw_bytes_per_s": nbytes / seconds,
        "bw_per_master_bytes_per_s": nbytes / seconds / masters,
        "channel_bw_bytes_per_s": nbytes / (last_axi / h.axi_clock_hz) / len(used),
        "efficiency": nbytes / seconds / (peak * len(used)),
        "activations": acts,
        "bytes_per_activation": nbytes / acts if acts else float("inf"),
    }


def sustained_channel_bw(board: BoardSpec) -> float:
    """Bytes/s one channel sustains on a long sequential 4 KB-request read stream with enough outstanding requests
    and a port that never limits (the condition of Shuhai's per-channel figure)."""
    r = profile_bandwidth(
        board,
        board.hbm.axi_clock_hz,
        4096,
        outstanding=64,
        port_width_bits=8 * board.hbm.granule_bytes * 16,
        total_bytes=64 << 20,
    )
    return float(r["channel_bw_bytes_per_s"])
