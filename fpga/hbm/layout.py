"""The HBM pseudo-channel model's two vectors (:mod:`fpga.hbm.channel`): the int64 *parameter vector* of a board's
channels seen from a kernel clock (slot names ``HP_*``, built by :func:`hbm_params` from the board spec: JEDEC timings
in AXI cycles, the address map's bank look-up tables, the clock ratio) and the *channel state* vector (slots
``CS_*``, :func:`new_channel_state`: bus, per-bank-group and per-bank timers, open rows, refresh phase, traffic
counters). Kernels index both with these constants; :func:`channel_counters` reads the counters back.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from numba import njit

from hwmodel.derive import ceil_cycles, hbm_cycles
from hwmodel.errors import HwmodelError
from hwmodel.hbm_map import parse_address_map
from hwmodel.specs import BoardSpec

# ------------------------------------------------------------------------------------------ parameter vector
HP_TK = 0  # ticks per kernel cycle
HP_TA = 1  # ticks per AXI cycle
HP_SYNC = 2  # synchroniser stages (destination cycles)
HP_SWITCH = 3  # AXI cycles from the synchroniser to the controller
HP_LAT_HIT = 4  # AXI cycles, request at controller -> first data, row open
HP_FRONT = 5  # request at controller -> earliest command (lat_hit - tCL)
HP_CL = 6  # column command -> data
HP_RCD, HP_RP, HP_RAS, HP_RC = 7, 8, 9, 10
HP_CCDS, HP_CCDL, HP_RRDS, HP_RRDL, HP_FAW = 11, 12, 13, 14, 15
HP_WTRS, HP_WTRL, HP_RTW, HP_WR, HP_RTP = 16, 17, 18, 19, 20
HP_REFI, HP_RFC = 21, 22
HP_CMD = 23  # fewest cycles between the first column commands of two AXI bursts
HP_MISALIGN = 24  # command-time multiplier of a request that is not granule aligned
HP_LOOKAHEAD = 25  # 1: PRE/ACT may run ahead of earlier column commands
HP_GRANULE, HP_BURST_BEATS, HP_G_SHIFT, HP_BB_SHIFT = 26, 27, 28, 29
HP_ROW_SHIFT, HP_ROW_MASK, HP_HI_SHIFT, HP_HI_MASK = 30, 31, 32, 33  # address map: row field, bits above it
HP_BA_BITS = 34  # bank = bg << ba_bits | ba
HP_REF_PHASE = 35  # refresh phase of channel 0 (AXI cycles into its tREFI period at t = 0)
HP_LUT_LO = 36  # offset of the bank LUT of the bits below the row field
HP_LUT_HI = 37  # offset of the bank LUT of the bits above the row field
HP_RUN_BITS = 38  # low address bits that are bank-group bits then column bits (0: no streaming fast path)
HP_RUN_P = 39  # bank groups those low bits cycle through (2^bank-group bits among them)
HP_TK_SHIFT, HP_TA_SHIFT = 40, 41  # log2 of HP_TK / HP_TA, -1 when not a power of two (a shift, not a division)
HP_N = 42

# ------------------------------------------------------------------------------------------ channel state
NB = 16  # banks (JEDEC HBM2 / HBM2E)
NG = 4  # bank groups
NEG = -(1 << 40)  # "long ago"
CS_BUS_FREE = 0  # first AXI cycle after the last data beat
CS_LAST_COL = 1  # AXI cycle of the last column command
CS_LAST_DIR = 2  # -1 none yet, 0 read, 1 write
CS_LAST_RD_COL = 3  # last read column command (tRTW)
CS_LAST_WR_END = 4  # end of the last write data (tWTR_S)
CS_LAST_ACT = 5  # last ACT (tRRD_S)
CS_FAW = 6  # 6..9: ring of the last four ACTs (tFAW)
CS_FAW_PTR = 10
CS_CLOSED_AT = 11  # end of the last refresh window (banks closed then)
CS_REF_OFF = 12  # start of refresh window 0 (1 .. tREFI)
CS_WS = 13  # cached refresh window (start, end) ending after the last column command (0, 0 = unknown)
CS_WE = 14
CS_BURST_COL = 15  # first column command of the last AXI burst
CS_BUSY = 16  # data-bus cycles used
CS_BUS_BYTES = 17  # bytes moved on the bus (whole granules)
CS_RD_BYTES = 18  # bytes the kernel asked to read
CS_WR_BYTES = 19  # bytes the kernel asked to write
CS_REQS = 20
CS_BURSTS = 21
CS_ROW_MISSES = 22  # activations that found another row open (PRE + ACT)
CS_ACTS = 23  # activations
CS_REFRESH_DEFERS = 24  # accesses re-planned behind a refresh window
CS_LAST_END = 25  # AXI cycle the last request's data ended
CS_BG_COL = 26  # 26..29 last column command per bank group (tCCD_L)
CS_BG_ACT = 30  # 30..33 last ACT per bank group (tRRD_L)
CS_BG_WR_END = 34  # 34..37 end of the last write data per bank group (tWTR_L)
CS_B_ROW = 38  # 38..53 open row per bank, -1 closed
CS_B_ACT = 54  # 54..69 last ACT per bank (tRAS, tRC)
CS_B_RD = 70  # 70..85 last read column command per bank (tRTP)
CS_B_WR = 86  # 86..101 end of the last write data per bank (tWR)
CS_N = 102

CHANNEL_COUNTERS = (
    "busy_axi_cycles",
    "bus_bytes",
    "read_bytes",
    "write_bytes",
    "requests",
    "bursts",
    "row_misses",
    "activations",
    "refresh_defers",
)
_COUNTER_SLOTS = (
    CS_BUSY,
    CS_BUS_BYTES,
    CS_RD_BYTES,
    CS_WR_BYTES,
    CS_REQS,
    CS_BURSTS,
    CS_ROW_MISSES,
    CS_ACTS,
    CS_REFRESH_DEFERS,
)
#: slots that describe the traffic and timing history (equal between the fast model and the stepped reference)
TRAFFIC_SLOTS = (
    (CS_BUS_FREE, CS_LAST_COL, CS_LAST_DIR, CS_LAST_RD_COL, CS_LAST_WR_END, CS_LAST_ACT, CS_BURST_COL)
    + _COUNTER_SLOTS
    + (CS_LAST_END,)
    + tuple(range(CS_BG_COL, CS_N))
)


def clock_ticks(kernel_clock_hz: float, axi_clock_hz: float) -> tuple[int, int]:
    """(ticks per kernel cycle, ticks per AXI cycle) of the common time base: the exact ratio of the two clocks
    rounded to 1 Hz, reduced by their gcd (300 MHz / 450 MHz -> 3 and 2 ticks)."""
    fk, fa = int(round(kernel_clock_hz)), int(round(axi_clock_hz))
    if fk <= 0 or fa <= 0:
        raise HwmodelError(f"clocks must be positive, got kernel {kernel_clock_hz} Hz, AXI {axi_clock_hz} Hz")
    g = math.gcd(fk, fa)
    return fa // g, fk // g


def to_cycles(seconds: float, clock_hz: float) -> int:
    """JEDEC rounding: a time in whole clock cycles, rounded up (a 1e-6 cycle tolerance absorbs float noise).
    Board timings go through the checked form, :func:`hwmodel.derive.hbm_cycles`, which reports the rounding."""
    return ceil_cycles(seconds, clock_hz)


def hbm_params(board: BoardSpec, kernel_clock_hz: float, refresh_phase_cycles: int = 0) -> np.ndarray:
    """The int64 parameter vector of ``board``'s channels seen from a kernel clocked at ``kernel_clock_hz``;
    ``refresh_phase_cycles``: how far into its tREFI period channel 0 is at t = 0.

    Everything but the refresh phase is built once per (board, clock) and copied (a token simulation asks for it
    at every context; building the bank look-up tables cost ~0.7 ms a call)."""
    p = _static_params(board, float(kernel_clock_hz)).copy()
    p[HP_REF_PHASE] = refresh_phase_cycles % int(p[HP_REFI])
    return p


@functools.lru_cache(maxsize=64)
def _static_params(board: BoardSpec, kernel_clock_hz: float) -> np.ndarray:
    """:func:`hbm_params` at refresh phase 0 (memoized; callers copy it)."""
    h = board.hbm
    f = h.axi_clock_hz
    tk, ta = clock_ticks(kernel_clock_hz, f)
    m = parse_address_map(h.address_map)
    lo_bits, hi_bits = len(m.low), len(m.high)
    p = np.zeros(HP_N + (1 << lo_bits) + (1 << hi_bits), dtype=np.int64)
    p[HP_TK], p[HP_TA] = tk, ta
    p[HP_TK_SHIFT], p[HP_TA_SHIFT] = _log2(tk), _log2(ta)
    p[HP_SYNC] = h.cdc_sync_cycles
    p[HP_SWITCH] = h.switch_latency_cycles
    p[HP_LAT_HIT] = h.latency_page_hit_cycles
    cyc = hbm_cycles(board)  # checked: near-whole roundings warn, impossible timings are refused (issue 26)
    cl = cyc["tcl_s"].cycles
    p[HP_CL] = cl
    p[HP_FRONT] = h.latency_page_hit_cycles - cl
    for slot, t in (
        (HP_RCD, "trcd_s"),
        (HP_RP, "trp_s"),
        (HP_RAS, "tras_s"),
        (HP_RC, "trc_s"),
        (HP_CCDS, "tccds_s"),
        (HP_CCDL, "tccdl_s"),
        (HP_RRDS, "trrds_s"),
        (HP_RRDL, "trrdl_s"),
        (HP_FAW, "tfaw_s"),
        (HP_WTRS, "twtrs_s"),
        (HP_WTRL, "twtrl_s"),
        (HP_RTW, "trtw_s"),
        (HP_WR, "twr_s"),
        (HP_RTP, "trtp_s"),
        (HP_REFI, "refresh_interval_s"),
        (HP_RFC, "refresh_cycle_s"),
    ):
        p[slot] = cyc[t].cycles
    p[HP_CMD] = h.command_cycles
    p[HP_MISALIGN] = max(1, int(round(1.0 / h.misaligned_efficiency)))
    p[HP_LOOKAHEAD] = 1 if h.controller_policy == "lookahead" else 0
    p[HP_GRANULE] = h.granule_bytes
    p[HP_BURST_BEATS] = h.axi3_burst_beats
    p[HP_G_SHIFT] = _log2(h.granule_bytes)
    p[HP_BB_SHIFT] = _log2(h.axi3_burst_beats)
    pc_granules = h.capacity_bytes // h.pseudo_channels // h.ports_per_pc // h.granule_bytes
    addr_bits = max(lo_bits + hi_bits + 1, int(pc_granules).bit_length() - 1)
    row_bits = addr_bits - lo_bits - hi_bits
    p[HP_ROW_SHIFT] = lo_bits
    p[HP_ROW_MASK] = (1 << row_bits) - 1
    p[HP_HI_SHIFT] = lo_bits + row_bits
    p[HP_HI_MASK] = (1 << hi_bits) - 1
    p[HP_BA_BITS] = m.bank_bits
    p[HP_REF_PHASE] = 0
    p[HP_LUT_LO] = HP_N
    p[HP_LUT_HI] = HP_N + (1 << lo_bits)
    nbg = 0
    while nbg < len(m.low) and m.low[nbg][0] == "BG":
        nbg += 1
    ncol = 0
    while nbg + ncol < len(m.low) and m.low[nbg + ncol][0] == "CA":
        ncol += 1
    p[HP_RUN_BITS] = nbg + ncol if ncol else 0
    p[HP_RUN_P] = 1 << nbg
    for v in range(1 << lo_bits):
        p[HP_N + v] = m.bank_of(m.low, v)
    for v in range(1 << hi_bits):
        p[HP_N + (1 << lo_bits) + v] = m.bank_of(m.high, v)
    p.setflags(write=False)  # shared by every caller: they get copies
    return p


def token_refresh_phase(board: BoardSpec, ctx: int) -> int:
    """Refresh phase (AXI cycles into tREFI) at the start of the token after ``ctx`` cached tokens.

    A one-token simulation cannot know where the previous tokens left the refresh timers, so the phase is spread
    over the period by a low-discrepancy sequence (golden ratio) of ``ctx``: tokens do not all start right after
    a refresh, and the same ``ctx`` always gives the same phase (deterministic)."""
    refi = max(1, to_cycles(board.hbm.refresh_interval_s, board.hbm.axi_clock_hz))
    return int(((int(ctx) * 0.6180339887498949) % 1.0) * refi)


def _log2(v: int) -> int:
    return v.bit_length() - 1 if v > 0 and v & (v - 1) == 0 else -1


def channel_peak_bytes_per_s(board: BoardSpec) -> float:
    """Data-bus peak of one port's channel: one granule per AXI cycle, capped by the port (14.4 GB/s on U280,
    12.8 GB/s per V80 NMU port, i.e. half a V80 pseudo-channel)."""
    return min(board.hbm.granule_bytes * board.hbm.axi_clock_hz, board.hbm.port_bw_cap_bytes_per_s)


@njit(cache=True)
def new_channel_state() -> np.ndarray:
    """A channel after reset: bus free, all banks closed at cycle 0, no traffic, refresh phase 0 (window 0 starts
    at tREFI; :func:`set_refresh_phase` moves it)."""
    st = np.zeros(CS_N, dtype=np.int64)
    for i in (CS_LAST_COL, CS_LAST_RD_COL, CS_LAST_WR_END, CS_LAST_ACT, CS_BURST_COL):
        st[i] = NEG
    for i in range(4):
        st[CS_FAW + i] = NEG
    for i in range(NG):
        st[CS_BG_COL + i] = NEG
        st[CS_BG_ACT + i] = NEG
        st[CS_BG_WR_END + i] = NEG
    for i in range(NB):
        st[CS_B_ROW + i] = -1
        st[CS_B_ACT + i] = NEG
        st[CS_B_RD + i] = NEG
        st[CS_B_WR + i] = NEG
    st[CS_LAST_DIR] = -1
    st[CS_REF_OFF] = 0  # 0 = not set: taken from the parameter vector on first use
    return st


@njit(cache=True, inline="always")
def refresh_offset(p: np.ndarray, phase: int) -> int:
    """Start of refresh window 0 for a channel ``phase`` cycles into its tREFI period at t = 0 (1 .. tREFI)."""
    return p[HP_REFI] - (phase % p[HP_REFI])


@njit(cache=True)
def set_refresh_phase(p: np.ndarray, st: np.ndarray, phase: int) -> None:
    """Put a fresh channel state ``phase`` AXI cycles into its refresh period at t = 0."""
    st[CS_REF_OFF] = refresh_offset(p, phase)
    st[CS_WS] = 0
    st[CS_WE] = 0


def channel_counters(st: np.ndarray) -> dict[str, int]:
    return {name: int(st[slot]) for name, slot in zip(CHANNEL_COUNTERS, _COUNTER_SLOTS)}
