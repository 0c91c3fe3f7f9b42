"""HBM pseudo-channel model (Numba): one fabric port's channel in its own AXI clock domain, transaction by
transaction, with every timing rule resolved to the AXI cycle.

Reusable by any accelerator model (the streaming dataflow model here; an instruction-driven datamover later):
the functions below are ``@njit`` over plain int64 arrays — a parameter vector made by :func:`hbm_params` and a
channel state vector made by :func:`new_channel_state` — so another Numba kernel can call them directly.

The channel rules (one fabric port -> one pseudo-channel, in-order, AXI cycles):

* A request (address, bytes, read/write) reaches the controller ``switch_latency`` cycles after it crosses the
  clock-domain synchroniser. It is cut into 32-B granules (AMD PG276: fixed AxSIZE = 32 B; a partial granule
  costs a whole one, so an 8-B write costs a 32-B one) and into AXI3 bursts of at most 16 beats. A request whose
  address is not 32-B aligned needs two HBM commands per burst (PG276: "two commands, <= 50 % efficiency").
* A burst occupies the data bus for ``max(beats, commands x command_cycles)`` cycles: one 32-B beat per AXI cycle
  (256 bit x 450 MHz = 14.4 GB/s on U280), and at most one command per ``command_cycles`` (PG276: a 64-B burst
  is the smallest that reaches full linear throughput, so a 32-B burst gets half).
* Row state (Shuhai, FCCM 2020, idle latencies): data of a burst cannot start before ``arrival + lat_hit`` when
  its row is open, ``+ act`` (page closed, = lat_closed - lat_hit) when the bank is closed, ``+ pre_act``
  (page miss, = lat_miss - lat_hit) when another row is open; in a busy stream a row change exposes only
  ``row_switch_cycles`` of bubble after the previous burst (bank interleaving hides the rest; fitted).
* Refresh (PG276 tREFI, JEDEC tRFC): every channel is blocked during [k tREFI, k tREFI + tRFC), k >= 1, counted
  from the start of the simulated token; a burst never overlaps that window, and afterwards all rows are closed
  (the next burst pays an activation, counted from the window's end).
* A read <-> write switch costs ``rw_turnaround_cycles`` after the previous burst.

Clock domains: times are integer cycles of their own domain; both map onto a common tick (``tk`` ticks per kernel
cycle, ``ta`` per AXI cycle, from the exact ratio of the two clocks), so cycle-stepped and event-driven models
agree exactly. A value registered at the end of cycle n of one domain is seen in the other at its first edge at or
after that instant, plus ``cdc_sync`` synchroniser cycles.

The kernel side of a read port moves ``port_bytes`` (port width / 8) per kernel cycle from the clock converter
into the kernel's buffer, one request after another; a request has *landed* (usable) when its last byte is in.

Developers: Numba's on-disk cache does not notice when a function *called* by a cached kernel changes in another
module; after editing this file, delete ``fpga/__pycache__/*.nbi`` and ``*.nbc`` so kernels that inline these
functions (fpga/streaming.py) are recompiled.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from hwmodel.errors import HwmodelError
from hwmodel.specs import BoardSpec

# ------------------------------------------------------------------------------------------ parameter vector
HP_TK = 0  # ticks per kernel cycle
HP_TA = 1  # ticks per AXI cycle
HP_SYNC = 2  # synchroniser stages (destination cycles)
HP_SWITCH = 3  # AXI cycles from the synchroniser to the controller
HP_LAT_HIT = 4  # AXI cycles, request at controller -> first data, row open
HP_ACT = 5  # extra cycles when the bank is closed (activate)
HP_PREACT = 6  # extra cycles when another row is open (precharge + activate)
HP_ROWSW = 7  # exposed data-bus bubble of a row change in a busy stream
HP_CMD = 8  # fewest data-bus cycles per AXI3 burst
HP_TURN = 9  # read <-> write turnaround
HP_REFI = 10  # refresh interval, AXI cycles
HP_RFC = 11  # refresh duration, AXI cycles
HP_ROW_BYTES = 12
HP_GRANULE = 13
HP_BURST_BEATS = 14
HP_G_SHIFT = 15  # log2(granule) when a power of two, else -1 (divisions are the hot spot of a request)
HP_ROW_SHIFT = 16  # log2(row_bytes / granule) when a power of two, else -1
HP_BB_SHIFT = 17  # log2(burst beats) when a power of two, else -1
HP_N = 18

# ------------------------------------------------------------------------------------------ channel state
CS_BUS_FREE = 0  # first AXI cycle the data bus is free
CS_OPEN_ROW = 1  # open row id, -1 when closed
CS_CLOSED_AT = 2  # AXI cycle the rows were closed (reset or refresh end)
CS_LAST_DIR = 3  # -1 none yet, 0 read, 1 write
CS_BUSY = 4  # data-bus cycles used
CS_BUS_BYTES = 5  # bytes moved on the bus (whole granules)
CS_RD_BYTES = 6  # bytes the kernel asked to read
CS_WR_BYTES = 7  # bytes the kernel asked to write
CS_REQS = 8
CS_BURSTS = 9
CS_ROW_MISSES = 10  # bursts that found another row open
CS_REFRESH_DEFERS = 11  # bursts pushed behind a refresh window
CS_LAST_END = 12  # AXI cycle the last burst ended
CS_NEXT_WS = 13  # start of the first refresh window ending after the bus-free cycle (a cache; 0 = unknown)
CS_N = 14

CHANNEL_COUNTERS = ("busy_axi_cycles", "bus_bytes", "read_bytes", "write_bytes", "requests", "bursts",
                    "row_misses", "refresh_defers")
_COUNTER_SLOTS = (CS_BUSY, CS_BUS_BYTES, CS_RD_BYTES, CS_WR_BYTES, CS_REQS, CS_BURSTS, CS_ROW_MISSES,
                  CS_REFRESH_DEFERS)


def clock_ticks(kernel_clock_hz: float, axi_clock_hz: float) -> tuple[int, int]:
    """(ticks per kernel cycle, ticks per AXI cycle) of the common time base: the exact ratio of the two clocks
    rounded to 1 Hz, reduced by their gcd (300 MHz / 450 MHz -> 3 and 2 ticks)."""
    fk, fa = int(round(kernel_clock_hz)), int(round(axi_clock_hz))
    if fk <= 0 or fa <= 0:
        raise HwmodelError(f"clocks must be positive, got kernel {kernel_clock_hz} Hz, AXI {axi_clock_hz} Hz")
    g = math.gcd(fk, fa)
    return fa // g, fk // g


def hbm_params(board: BoardSpec, kernel_clock_hz: float) -> np.ndarray:
    """The int64 parameter vector of ``board``'s channels seen from a kernel clocked at ``kernel_clock_hz``."""
    h = board.hbm
    tk, ta = clock_ticks(kernel_clock_hz, h.axi_clock_hz)
    p = np.zeros(HP_N, dtype=np.int64)
    p[HP_TK], p[HP_TA] = tk, ta
    p[HP_SYNC] = h.cdc_sync_cycles
    p[HP_SWITCH] = h.switch_latency_cycles
    p[HP_LAT_HIT] = h.latency_page_hit_cycles
    p[HP_ACT] = h.latency_page_closed_cycles - h.latency_page_hit_cycles
    p[HP_PREACT] = h.latency_page_miss_cycles - h.latency_page_hit_cycles
    p[HP_ROWSW] = h.row_switch_cycles
    p[HP_CMD] = h.command_cycles
    p[HP_TURN] = h.rw_turnaround_cycles
    p[HP_REFI] = int(round(h.refresh_interval_s * h.axi_clock_hz))
    p[HP_RFC] = int(round(h.refresh_cycle_s * h.axi_clock_hz))
    p[HP_ROW_BYTES] = h.row_bytes
    p[HP_GRANULE] = h.granule_bytes
    p[HP_BURST_BEATS] = h.axi3_burst_beats
    p[HP_G_SHIFT] = _log2(h.granule_bytes)
    p[HP_ROW_SHIFT] = _log2(h.row_bytes // h.granule_bytes) if h.row_bytes % h.granule_bytes == 0 else -1
    p[HP_BB_SHIFT] = _log2(h.axi3_burst_beats)
    return p


def _log2(v: int) -> int:
    return v.bit_length() - 1 if v > 0 and v & (v - 1) == 0 else -1


def channel_peak_bytes_per_s(board: BoardSpec) -> float:
    """Data-bus peak of one port's channel: one granule per AXI cycle (14.4 GB/s on U280, 12.8 GB/s per V80 NMU
    port, i.e. half a V80 pseudo-channel)."""
    return board.hbm.granule_bytes * board.hbm.axi_clock_hz


@njit(cache=True)
def new_channel_state() -> np.ndarray:
    """A channel after reset: bus free, all banks closed at cycle 0, no traffic."""
    st = np.zeros(CS_N, dtype=np.int64)
    st[CS_OPEN_ROW] = -1
    st[CS_LAST_DIR] = -1
    return st


# ------------------------------------------------------------------------------------------ clock crossing
@njit(cache=True, inline="always")
def ceil_div(a: int, b: int) -> int:
    return -((-a) // b)


@njit(cache=True, inline="always")
def div_by(a: int, b: int, shift: int) -> int:
    """a // b for a >= 0, by a shift when b == 2**shift."""
    return a >> shift if shift >= 0 else a // b


@njit(cache=True, inline="always")
def kernel_to_axi(p: np.ndarray, kernel_cycle: int) -> int:
    """AXI cycle at which a request issued (registered) in ``kernel_cycle`` is at the memory controller."""
    return ceil_div((kernel_cycle + 1) * p[HP_TK], p[HP_TA]) + p[HP_SYNC] + p[HP_SWITCH]


@njit(cache=True, inline="always")
def axi_to_kernel(p: np.ndarray, axi_end: int) -> int:
    """First kernel cycle that sees data whose last AXI cycle ended at (exclusive) ``axi_end``."""
    return ceil_div(axi_end * p[HP_TA], p[HP_TK]) + p[HP_SYNC]


# ------------------------------------------------------------------------------------------ one burst
@njit(cache=True, inline="always")
def refresh_window(p: np.ndarray, lo: int) -> tuple[int, int]:
    """(start, end) of the first refresh window that ends after AXI cycle ``lo``."""
    refi, rfc = p[HP_REFI], p[HP_RFC]
    k = (lo - rfc) // refi + 1
    if k < 1:
        k = 1
    return k * refi, k * refi + rfc


@njit(cache=True)
def burst_start_at(p: np.ndarray, st: np.ndarray, c: int, arrival: int, row: int, dur: int,
                   is_write: int) -> int:
    """First AXI cycle the data phase of a burst on channel ``c`` (a row of the state table ``st``) can start
    (see the module docstring); updates the row/closed state for refresh windows passed on the way, not the bus."""
    bus_free = st[c, CS_BUS_FREE]
    lo = bus_free
    while True:
        ws, we = refresh_window(p, lo)
        if lo >= ws:  # inside a refresh window: rows close, nothing starts before its end
            lo = we
            st[c, CS_OPEN_ROW] = -1
            st[c, CS_CLOSED_AT] = we
            continue
        open_row = st[c, CS_OPEN_ROW]
        if open_row == -1:
            m = max(lo, arrival + p[HP_LAT_HIT] + p[HP_ACT], st[c, CS_CLOSED_AT] + p[HP_ACT])
        elif open_row == row:
            m = max(lo, arrival + p[HP_LAT_HIT])
        else:
            m = max(lo, arrival + p[HP_LAT_HIT] + p[HP_PREACT], bus_free + p[HP_ROWSW])
        if st[c, CS_LAST_DIR] >= 0 and st[c, CS_LAST_DIR] != is_write:
            m = max(m, bus_free + p[HP_TURN])
        if m + dur <= ws:
            return m
        if m < ws:  # ready before the window but too long to finish ahead of it
            st[c, CS_REFRESH_DEFERS] += 1
        lo = we
        st[c, CS_OPEN_ROW] = -1
        st[c, CS_CLOSED_AT] = we


@njit(cache=True)
def burst_start(p: np.ndarray, st: np.ndarray, arrival: int, row: int, dur: int, is_write: int) -> int:
    """:func:`burst_start_at` on a single channel state vector."""
    return burst_start_at(p, st.reshape(1, CS_N), 0, arrival, row, dur, is_write)


@njit(cache=True, inline="always")
def channel_request_at(p: np.ndarray, st: np.ndarray, c: int, arrival: int, addr: int, nbytes: int,
                       is_write: int) -> tuple[int, int]:
    """Serve one request on channel ``c`` (a row of the state table ``st``) that reached the controller at AXI
    cycle ``arrival`` after every earlier one.

    Returns (first data cycle, end cycle exclusive of its last beat) and updates the channel state and counters.
    Bursts that cannot meet a refresh window take :func:`burst_start`; the others are timed inline with the same
    rules (the common case of a streaming port, kept cheap).
    """
    g = p[HP_GRANULE]
    bb = p[HP_BURST_BEATS]
    gsh = p[HP_G_SHIFT]
    g0 = div_by(addr, g, gsh)
    g1 = div_by(addr + nbytes + g - 1, g, gsh)
    rpg = p[HP_ROW_BYTES] // g if p[HP_ROW_SHIFT] >= 0 else 0  # granules per row
    cmd_cycles = (2 if addr % g != 0 else 1) * p[HP_CMD]
    lat = arrival + p[HP_LAT_HIT]
    first = -1
    end = 0
    ws = st[c, CS_NEXT_WS]
    if ws == 0 or st[c, CS_BUS_FREE] >= ws:
        ws, _we = refresh_window(p, st[c, CS_BUS_FREE])
        st[c, CS_NEXT_WS] = ws
    b0 = g0
    while b0 < g1:
        beats = min(g1 - b0, bb)
        dur = max(beats, cmd_cycles)
        row = div_by(b0, rpg, p[HP_ROW_SHIFT]) if rpg else b0 * g // p[HP_ROW_BYTES]
        bus_free = st[c, CS_BUS_FREE]
        m = -1
        if bus_free < ws:  # the cached window is still the next one
            open_row = st[c, CS_OPEN_ROW]
            if open_row == row:
                m = max(bus_free, lat)
            elif open_row == -1:
                m = max(bus_free, lat + p[HP_ACT], st[c, CS_CLOSED_AT] + p[HP_ACT])
            else:
                m = max(bus_free, lat + p[HP_PREACT], bus_free + p[HP_ROWSW])
            if st[c, CS_LAST_DIR] >= 0 and st[c, CS_LAST_DIR] != is_write:
                m = max(m, bus_free + p[HP_TURN])
            if m + dur > ws:
                m = -1
        if m < 0:
            m = burst_start_at(p, st, c, arrival, row, dur, is_write)
            ws, _we = refresh_window(p, m + dur)
            st[c, CS_NEXT_WS] = ws
        if st[c, CS_OPEN_ROW] != -1 and st[c, CS_OPEN_ROW] != row:
            st[c, CS_ROW_MISSES] += 1
        if first < 0:
            first = m
        end = m + dur
        st[c, CS_BUS_FREE] = end
        st[c, CS_OPEN_ROW] = row
        st[c, CS_LAST_DIR] = is_write
        st[c, CS_BUSY] += dur
        st[c, CS_BUS_BYTES] += beats * g
        st[c, CS_BURSTS] += 1
        b0 += bb
        if b0 < g1 and b0 == g0 + bb and lat + p[HP_PREACT] <= end and end < ws:
            # streaming: the rest of the request follows back to back, in order, paying only the exposed row
            # bubbles, if it ends before the next refresh window (what the burst-by-burst rules give then)
            k = div_by(g1 - b0 + bb - 1, bb, p[HP_BB_SHIFT])
            last_beats = g1 - (b0 + (k - 1) * bb)
            durs = (k - 1) * max(bb, cmd_cycles) + max(last_beats, cmd_cycles)
            lb = b0 + (k - 1) * bb
            row_last = div_by(lb, rpg, p[HP_ROW_SHIFT]) if rpg else lb * g // p[HP_ROW_BYTES]
            if bb * g >= p[HP_ROW_BYTES]:
                changes = k
            else:
                changes = row_last - row
            fin = end + durs + changes * p[HP_ROWSW]
            if fin <= ws:
                st[c, CS_ROW_MISSES] += changes
                st[c, CS_BUSY] += durs
                st[c, CS_BUS_BYTES] += (g1 - b0) * g
                st[c, CS_BURSTS] += k
                st[c, CS_BUS_FREE] = fin
                st[c, CS_OPEN_ROW] = row_last
                end = fin
                break
    st[c, CS_REQS] += 1
    if is_write:
        st[c, CS_WR_BYTES] += nbytes
    else:
        st[c, CS_RD_BYTES] += nbytes
    st[c, CS_LAST_END] = end
    return first, end


@njit(cache=True)
def channel_request(p: np.ndarray, st: np.ndarray, arrival: int, addr: int, nbytes: int,
                    is_write: int) -> tuple[int, int]:
    """:func:`channel_request_at` on a single channel state vector (made by :func:`new_channel_state`)."""
    return channel_request_at(p, st.reshape(1, CS_N), 0, arrival, addr, nbytes, is_write)


@njit(cache=True, inline="always")
def read_landing(p: np.ndarray, first: int, end: int, nbytes: int, port_bytes: int, prev_land: int,
                 port_shift: int = -1) -> int:
    """Kernel cycle from which a read's data is usable: the port copies ``port_bytes`` per kernel cycle once the
    first beat has crossed and the previous request has landed, and cannot finish before the last beat crossed.
    (``port_shift`` = log2(port_bytes) when known, to avoid a division.)"""
    copy_start = max(axi_to_kernel(p, first + 1), prev_land)
    return max(axi_to_kernel(p, end), copy_start + div_by(nbytes + port_bytes - 1, port_bytes, port_shift))


# ------------------------------------------------------------------------------------------ profiling
@njit(cache=True)
def stream_profile(p: np.ndarray, n_requests: int, req_bytes: int, stride_bytes: int, offset_bytes: int,
                   outstanding: int, port_bytes: int, is_write: int) -> tuple[int, int, int]:
    """One port streaming ``n_requests`` requests of ``req_bytes`` at ``offset + k * stride`` with at most
    ``outstanding`` in flight and an always-ready consumer. Returns (kernel cycles until the last one landed,
    AXI cycle the channel finished, bytes requested)."""
    st = new_channel_state()
    lands = np.zeros(n_requests, dtype=np.int64)
    issue = -1
    prev_land = 0
    for r in range(n_requests):
        t = issue + 1
        if r >= outstanding and lands[r - outstanding] > t:
            t = lands[r - outstanding]
        issue = t
        arrival = kernel_to_axi(p, issue)
        first, end = channel_request(p, st, arrival, offset_bytes + r * stride_bytes, req_bytes, is_write)
        if is_write:
            lands[r] = axi_to_kernel(p, end)
        else:
            lands[r] = read_landing(p, first, end, req_bytes, port_bytes, prev_land)
            prev_land = lands[r]
    last = 0
    for r in range(n_requests):
        last = max(last, lands[r])
    return last, st[CS_LAST_END], n_requests * req_bytes


def profile_bandwidth(board: BoardSpec, kernel_clock_hz: float, req_bytes: int, *, outstanding: int = 16,
                      port_width_bits: int = 512, stride_bytes: int | None = None, offset_bytes: int = 0,
                      total_bytes: int = 8 << 20, write: bool = False) -> dict[str, float]:
    """Effective bandwidth of one port streaming ``req_bytes`` requests (sequential unless ``stride_bytes``)."""
    if req_bytes <= 0 or outstanding <= 0 or port_width_bits <= 0:
        raise HwmodelError("request bytes, outstanding requests and port width must be positive")
    p = hbm_params(board, kernel_clock_hz)
    n = max(1, total_bytes // req_bytes)
    stride = req_bytes if stride_bytes is None else stride_bytes
    last_k, last_axi, nbytes = stream_profile(p, n, req_bytes, stride, offset_bytes, outstanding,
                                              port_width_bits // 8, int(write))
    seconds = last_k / kernel_clock_hz
    peak = channel_peak_bytes_per_s(board)
    return {"req_bytes": req_bytes, "outstanding": outstanding, "port_width_bits": port_width_bits,
            "kernel_clock_hz": kernel_clock_hz, "bytes": nbytes, "seconds": seconds,
            "bw_bytes_per_s": nbytes / seconds, "channel_bw_bytes_per_s": nbytes / (last_axi / board.hbm.axi_clock_hz),
            "efficiency": nbytes / seconds / peak}


def sustained_channel_bw(board: BoardSpec, row_switch_cycles: int | None = None) -> float:
    """Bytes/s one channel sustains on a long sequential 4 KB-request read stream with enough outstanding requests
    and a port that never limits (the condition of Shuhai's per-channel figure)."""
    import dataclasses

    b = board
    if row_switch_cycles is not None:
        b = dataclasses.replace(board, hbm=dataclasses.replace(board.hbm, row_switch_cycles=row_switch_cycles))
    r = profile_bandwidth(b, b.hbm.axi_clock_hz, 4096, outstanding=64, port_width_bits=4096, total_bytes=64 << 20)
    return float(r["channel_bw_bytes_per_s"])


def fit_row_switch(board: BoardSpec) -> tuple[int, float, float]:
    """Fit the one free channel parameter, the exposed row-switch bubble, to the board's measured per-channel
    bandwidth. Returns (best cycles, modelled B/s, measured B/s)."""
    target = board.hbm.pc_measured_bw_bytes_per_s / board.hbm.ports_per_pc
    best = min(range(0, board.hbm.latency_page_miss_cycles - board.hbm.latency_page_hit_cycles + 1),
               key=lambda c: abs(sustained_channel_bw(board, c) - target))
    return best, sustained_channel_bw(board, best), target


def channel_counters(st: np.ndarray) -> dict[str, int]:
    return {name: int(st[slot]) for name, slot in zip(CHANNEL_COUNTERS, _COUNTER_SLOTS)}
