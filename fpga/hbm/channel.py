"""HBM pseudo-channel model (Numba) at bank level: one fabric port's channel in its own AXI clock domain, every
column access (32-B granule) and every activation resolved to the AXI cycle.

Reusable by any accelerator model (the streaming dataflow model, the instruction-driven datamover): the functions
below are ``@njit`` over plain int64 arrays — a parameter vector made by :func:`hbm_params` and a channel state
vector made by :func:`new_channel_state`, both laid out in :mod:`fpga.hbm.layout` and re-exported here — so another Numba kernel can call them directly.

The channel (docs/hbm.md; times in memory-side AXI cycles, JEDEC timings rounded up to whole cycles):

* **Organisation.** 16 banks in 4 bank groups, one open row per bank. A granule address (byte address / 32) is
  split into row, bank, bank group and column by the board's address map, the HBM IP's ``ADDR_BIT`` list
  (PG276; :mod:`hwmodel.hbm_map`).
* **Requests.** A request reaches the controller ``switch_latency`` cycles after the clock-domain synchroniser.
  It is cut into 32-B granules (PG276: fixed AxSIZE = 32 B; a partial granule costs a whole one, so an 8-B write
  costs a 32-B one) and AXI3 bursts of at most 16 beats. The controller accepts one AXI burst per
  ``command_cycles`` (PG276: a 64-B burst is the smallest at full linear rate); a request not 32-B aligned needs
  ``1 / misaligned_efficiency`` times as long per burst (PG276: two commands, <= 50 %).
* **Column commands** (one per granule, the granules of a request in order; which request comes next is the
  controller's pick, :mod:`fpga.hbm.scheduler`): at least
  ``front = latency_page_hit - tCL`` after the request arrived, tCCD_S after the previous column command, tCCD_L
  after the previous one to the same bank group, a read tWTR_S / tWTR_L (other / same bank group) after the end
  of write data, a write tRTW after a read. Data moves tCL after its command, one granule per cycle.
* **Activation.** A granule whose bank has another row open needs PRE (>= ACT + tRAS, last read + tRTP, write
  data end + tWR) then ACT (>= PRE + tRP); a closed bank only ACT. Every ACT obeys tRC (same bank), tRRD_S /
  tRRD_L (other / same bank group), tFAW (four ACTs). The column command follows ACT by tRCD. With the
  ``lookahead`` policy (PG276 look-ahead precharge / activate) PRE and ACT may issue as soon as the request is at
  the controller, ahead of earlier column commands; ``in-order`` issues them after the previous column command.
  ACTs issue in order; a PRE waits for every earlier column command to its bank.
* **Refresh** (PG276 tREFI, JEDEC tRFC, all-bank): windows ``[off + k tREFI, off + k tREFI + tRFC)`` with a
  per-channel offset (the channel state's refresh phase), during which no command issues; a window closes every
  bank. An access whose column command would fall at or after the start of the next window is re-planned after
  it (``refresh_defers`` counts windows that began while a request was waiting at the controller).

Clock domains: times are integer cycles of their own domain; both map onto a common tick (``tk`` ticks per kernel
cycle, ``ta`` per AXI cycle, from the exact ratio of the two clocks), so cycle-stepped and event-driven models
agree exactly. A value registered at the end of cycle n of one domain is seen in the other at its first edge at or
after that instant, plus ``cdc_sync`` synchroniser cycles.

The kernel side of a read port moves ``port_bytes`` (port width / 8) per kernel cycle from the clock converter
into the kernel's buffer, one request after another; a request has *landed* (usable) when its last byte is in.

Developers: kernels that inline these functions (fpga/streaming/kernel.py, fpga/instruction/simulator.py) are
recompiled after any edit here, because the project's Numba cache is keyed on every source file
(:mod:`hwmodel.numba_cache`); there is nothing to delete by hand.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from fpga.hbm.layout import (  # noqa: F401  (re-exported: the vectors are part of the channel's interface)
    _COUNTER_SLOTS,
    CHANNEL_COUNTERS,
    CS_ACTS,
    CS_B_ACT,
    CS_B_RD,
    CS_B_ROW,
    CS_B_WR,
    CS_BG_ACT,
    CS_BG_COL,
    CS_BG_WR_END,
    CS_BURST_COL,
    CS_BURSTS,
    CS_BUS_BYTES,
    CS_BUS_FREE,
    CS_BUSY,
    CS_CLOSED_AT,
    CS_FAW,
    CS_FAW_PTR,
    CS_LAST_ACT,
    CS_LAST_COL,
    CS_LAST_DIR,
    CS_LAST_END,
    CS_LAST_RD_COL,
    CS_LAST_WR_END,
    CS_N,
    CS_RD_BYTES,
    CS_REF_OFF,
    CS_REFRESH_DEFERS,
    CS_REQS,
    CS_ROW_MISSES,
    CS_WE,
    CS_WR_BYTES,
    CS_WS,
    HP_BA_BITS,
    HP_BB_SHIFT,
    HP_BURST_BEATS,
    HP_CCDL,
    HP_CCDS,
    HP_CL,
    HP_CMD,
    HP_FAW,
    HP_FRONT,
    HP_G_SHIFT,
    HP_GRANULE,
    HP_HI_MASK,
    HP_HI_SHIFT,
    HP_LAT_HIT,
    HP_LOOKAHEAD,
    HP_LUT_HI,
    HP_LUT_LO,
    HP_MISALIGN,
    HP_N,
    HP_RAS,
    HP_RC,
    HP_RCD,
    HP_REF_PHASE,
    HP_REFI,
    HP_RFC,
    HP_ROW_MASK,
    HP_ROW_SHIFT,
    HP_RP,
    HP_RRDL,
    HP_RRDS,
    HP_RTP,
    HP_RTW,
    HP_RUN_BITS,
    HP_RUN_P,
    HP_SWITCH,
    HP_SYNC,
    HP_TA,
    HP_TA_SHIFT,
    HP_TK,
    HP_TK_SHIFT,
    HP_WR,
    HP_WTRL,
    HP_WTRS,
    NB,
    NEG,
    NG,
    TRAFFIC_SLOTS,
    _log2,
    _static_params,
    channel_counters,
    channel_peak_bytes_per_s,
    clock_ticks,
    hbm_params,
    new_channel_state,
    refresh_offset,
    set_refresh_phase,
    to_cycles,
    token_refresh_phase,
)

# Indices computed at run time (a bank, a bank group, a LUT entry; all >= 0) are cast to np.uint64 in the hot
# functions: Numba wraps a signed index (i < 0 -> i + len) with a compare and select on every access, an unsigned one
# not (same element, so results are unchanged; the channel alone ran 25-29 % faster on the LLaMA2-7B token).


# ------------------------------------------------------------------------------------------ clock crossing
@njit(cache=True, inline="always")
def ceil_div(a: int, b: int) -> int:
    return -((-a) // b)


@njit(cache=True, inline="always")
def div_by(a: int, b: int, shift: int) -> int:
    """a // b for a >= 0, by a shift when b == 2**shift."""
    return a >> shift if shift >= 0 else a // b


@njit(cache=True, inline="always")
def ceil_div_by(a: int, b: int, shift: int) -> int:
    """ceil(a / b), by an arithmetic shift when b == 2**shift."""
    return -((-a) >> shift) if shift >= 0 else -((-a) // b)


@njit(cache=True, inline="always")
def kernel_to_axi(p: np.ndarray, kernel_cycle: int) -> int:
    """AXI cycle at which a request issued (registered) in ``kernel_cycle`` is at the memory controller."""
    return ceil_div_by((kernel_cycle + 1) * p[HP_TK], p[HP_TA], p[HP_TA_SHIFT]) + p[HP_SYNC] + p[HP_SWITCH]


@njit(cache=True, inline="always")
def axi_to_kernel(p: np.ndarray, axi_end: int) -> int:
    """First kernel cycle that sees data whose last AXI cycle ended at (exclusive) ``axi_end``."""
    return ceil_div_by(axi_end * p[HP_TA], p[HP_TK], p[HP_TK_SHIFT]) + p[HP_SYNC]


# ------------------------------------------------------------------------------------------ address map
@njit(cache=True, inline="always")
def granule_bank(p: np.ndarray, ga: int) -> int:
    """Bank index (bank group << ba_bits | bank) of granule address ``ga``."""
    lo = ga & ((1 << p[HP_ROW_SHIFT]) - 1)
    hi = (ga >> p[HP_HI_SHIFT]) & p[HP_HI_MASK]
    return p[np.uint64(p[HP_LUT_LO] + lo)] | p[np.uint64(p[HP_LUT_HI] + hi)]


@njit(cache=True, inline="always")
def granule_row(p: np.ndarray, ga: int) -> int:
    return (ga >> p[HP_ROW_SHIFT]) & p[HP_ROW_MASK]


@njit(cache=True, inline="always")
def refresh_window(p: np.ndarray, off: int, t: int) -> tuple[int, int]:
    """(start, end) of the first refresh window of a channel (window 0 at ``off``) that ends after cycle ``t``."""
    refi, rfc = p[HP_REFI], p[HP_RFC]
    if t < off + rfc:
        return off, off + rfc
    k = (t - off - rfc) // refi + 1
    return off + k * refi, off + k * refi + rfc


@njit(cache=True, inline="always")
def _close_all(s: np.ndarray, we: int) -> None:
    for b in range(NB):
        s[CS_B_ROW + b] = -1
    s[CS_CLOSED_AT] = we


@njit(cache=True, inline="always")
def _run_delta(p: np.ndarray, per: int, c1: int, c2: int) -> int:
    """Steady column-command increment of a row-hit run cycling through ``per`` bank groups."""
    if per == 1:
        return max(p[HP_CCDS], p[HP_CCDL])
    return c1 - c2


@njit(cache=True, inline="always")
def _plan_granule(
    p: np.ndarray,
    s: np.ndarray,
    bank: int,
    row: int,
    bg: int,
    lo: int,
    ready: int,
    look: int,
    is_write: int,
) -> tuple[int, int]:
    """(column command, ACT or -1) of the next granule (bank, row, bank group) of a request that is at the
    controller from ``ready`` on, its column command no earlier than ``lo``: every rule of the module docstring
    but refresh, which the caller checks against the next window."""
    # the callers run without the Numba runtime (channel_request_at: _nrt=False), so a branch that reads an array
    # counts no references: the activation's bounds are read only for a granule that needs one
    col = max(lo, s[CS_LAST_COL] + p[HP_CCDS], s[np.uint64(CS_BG_COL + bg)] + p[HP_CCDL])
    if is_write:
        col = max(col, s[CS_LAST_RD_COL] + p[HP_RTW])
    else:
        col = max(col, s[CS_LAST_WR_END] + p[HP_WTRS], s[np.uint64(CS_BG_WR_END + bg)] + p[HP_WTRL])
    open_row = s[np.uint64(CS_B_ROW + bank)]
    if open_row == row:
        return col, -1
    b_act = s[np.uint64(CS_B_ACT + bank)]
    a = max(
        b_act + p[HP_RC],
        s[CS_LAST_ACT] + p[HP_RRDS],
        s[np.uint64(CS_BG_ACT + bg)] + p[HP_RRDL],
        s[np.uint64(CS_FAW + s[CS_FAW_PTR])] + p[HP_FAW],
    )
    t = max(ready, s[CS_LAST_COL]) if look == 0 else ready
    if open_row >= 0:
        pre = max(
            t, b_act + p[HP_RAS], s[np.uint64(CS_B_RD + bank)] + p[HP_RTP], s[np.uint64(CS_B_WR + bank)] + p[HP_WR]
        )
        act = max(a, pre + p[HP_RP])
    else:
        act = max(a, t, s[CS_CLOSED_AT])
    return max(col, act + p[HP_RCD]), act


@njit(cache=True, inline="always")
def _commit_granule(
    p: np.ndarray,
    s: np.ndarray,
    bank: int,
    row: int,
    bg: int,
    col: int,
    act: int,
    is_write: int,
    burst_start: bool,
) -> int:
    """Record a granule's ACT (if ``act`` >= 0) and column command in the channel state; returns its first data
    cycle."""
    if act >= 0:
        if s[np.uint64(CS_B_ROW + bank)] >= 0:
            s[CS_ROW_MISSES] += 1
        s[CS_ACTS] += 1
        s[np.uint64(CS_B_ROW + bank)] = row
        s[np.uint64(CS_B_ACT + bank)] = act
        s[CS_LAST_ACT] = act
        s[np.uint64(CS_BG_ACT + bg)] = act
        k = s[CS_FAW_PTR]
        s[np.uint64(CS_FAW + k)] = act
        s[CS_FAW_PTR] = (k + 1) & 3
    s[CS_LAST_COL] = col
    s[np.uint64(CS_BG_COL + bg)] = col
    d = col + p[HP_CL]
    if is_write:
        s[CS_LAST_WR_END] = d + 1
        s[np.uint64(CS_BG_WR_END + bg)] = d + 1
        s[np.uint64(CS_B_WR + bank)] = d + 1
    else:
        s[CS_LAST_RD_COL] = col
        s[np.uint64(CS_B_RD + bank)] = col
    if burst_start:
        s[CS_BURST_COL] = col
        s[CS_BURSTS] += 1
    s[CS_BUS_FREE] = d + 1
    return d


@njit(cache=True, inline="always")  # inlined into channel_request_at (a call per request cost ~8 %)
def _stream_run(
    p: np.ndarray,
    s: np.ndarray,
    ga: int,
    ga0: int,
    ga1: int,
    bmask: int,
    per: int,
    c1: int,
    c2: int,
    c3: int,
    c4: int,
    ready: int,
    cmd_gap: int,
    ws: int,
    is_write: int,
    run_len: int,
) -> tuple[int, int]:
    """Commit in closed form the row-hit granules ``ga ..`` of a streaming run (see channel_request_at) when the
    last ``per`` increments are the steady one and no other bound (arrival, burst command rate, read/write
    turnaround, refresh) can bind. At the end of a block the run goes on into the next one: the first ``per``
    granules there (which open the block's banks) are planned and committed exactly as the general path does
    (:func:`_plan_granule`, :func:`_commit_granule`), and while each lands on the steady increment the rest of
    that block is closed form again. Returns (next granule, granules committed in a row in its block), or
    (-ga, run_len) when the run does not apply (the caller then takes the general path for ``ga``)."""
    s_, l_ = p[HP_CCDS], p[HP_CCDL]
    if per > 4:
        return -ga, run_len
    if per == 1:
        dl = max(s_, l_)
    else:
        dl = c1 - c2
        if per >= 3 and c2 - c3 != dl:
            return -ga, run_len
        if per >= 4 and c3 - c4 != dl:
            return -ga, run_len
        if dl != max(s_, l_ - (per - 1) * dl):
            return -ga, run_len
    nxt = c1 + dl
    bb = p[HP_BURST_BEATS]
    if ready > nxt or cmd_gap > (bb - 1) * s_ + dl:
        return -ga, run_len
    bab = p[HP_BA_BITS]
    # every bank group of the block: turnaround bounds are fixed during a one-direction run
    base = ga & ~bmask
    for j in range(per):
        bg = granule_bank(p, base + j) >> bab
        if is_write:
            if s[CS_LAST_RD_COL] + p[HP_RTW] > nxt:
                return -ga, run_len
        else:
            if s[CS_LAST_WR_END] + p[HP_WTRS] > nxt or s[np.uint64(CS_BG_WR_END + bg)] + p[HP_WTRL] > nxt:
                return -ga, run_len
    cl = p[HP_CL]
    bsh = p[HP_BB_SHIFT]
    look = p[HP_LOOKAHEAD]
    last = c1  # column command of granule ga - 1
    entry = True
    while True:
        k = min((ga | bmask) + 1 - ga, ga1 - ga)
        if last + k * dl > ws - 1:  # the next refresh window (a division only when it is near)
            k = (ws - 1 - last) // dl
        if entry and k < 2:
            return -ga, run_len
        entry = False
        if k > 0:
            for t in range(max(ga, ga + k - per), ga + k):
                colt = last + (t - ga + 1) * dl
                bank = granule_bank(p, t)
                bg = bank >> bab
                s[np.uint64(CS_BG_COL + bg)] = colt
                if is_write:
                    s[np.uint64(CS_BG_WR_END + bg)] = colt + cl + 1
                    s[np.uint64(CS_B_WR + bank)] = colt + cl + 1
                else:
                    s[np.uint64(CS_B_RD + bank)] = colt
            # AXI bursts that start inside the segment (counted from the request's first granule)
            r0 = div_by(ga - ga0 + bb - 1, bb, bsh)  # first burst index starting at or after ga
            r1 = div_by(ga + k - 1 - ga0, bb, bsh)  # last burst index starting before ga + k
            if r1 >= r0:
                s[CS_BURSTS] += r1 - r0 + 1
                s[CS_BURST_COL] = last + (ga0 + r1 * bb - ga + 1) * dl
            last += k * dl
            s[CS_LAST_COL] = last
            if is_write:
                s[CS_LAST_WR_END] = last + cl + 1
            else:
                s[CS_LAST_RD_COL] = last
            s[CS_BUS_FREE] = last + cl + 1
            ga += k
            run_len += k
        if k <= 0 or (ga & bmask) != 0 or ga >= ga1 or bb < per:
            return ga, run_len
        # the next block: its first granules open its banks; plan them as the general path does
        run_len = 0
        for _j in range(per):
            if ga >= ga1:
                return ga, run_len
            bank = granule_bank(p, ga)
            row = granule_row(p, ga)
            bg = bank >> bab
            burst_start = div_by(ga - ga0, bb, bsh) * bb == ga - ga0
            lo = ready
            if burst_start:
                lo = max(lo, s[CS_BURST_COL] + cmd_gap)
            col, act = _plan_granule(p, s, bank, row, bg, lo, ready, look, is_write)
            if col != last + dl or col >= ws:
                return ga, run_len
            _commit_granule(p, s, bank, row, bg, col, act, is_write, burst_start)
            last = col
            ga += 1
            run_len += 1


@njit(cache=True, inline="always")
def _fresh_delta(
    p: np.ndarray, s: np.ndarray, ga0: int, bmask: int, per: int, ready: int, cmd_gap: int, row: int
) -> tuple[int, int]:
    """(first column command c0, steady increment dl) of a request whose granules run as a row-hit stream from its
    first one, else (0, 0): every bank of its first granule's block has ``row`` open, c0 is its first granule's
    column command (at the controller, after the last burst's command gap, tCCD_S after the previous column
    command, tCCD_L after its bank group's) and no bank group's last command holds back granule j < per past
    ``c0 + j * dl``. Then granule i's command is ``c0 + i * dl`` (tCCD_S chains the first ``per``, and tCCD_L <=
    per * tCCD_S never binds after them; with one bank group, max(tCCD_S, tCCD_L)): :func:`_stream_run`'s closed
    form takes over from the first granule, on an idle channel (c0 = ready) or continuing the previous request's
    stream; the turnaround and refresh bounds it checks itself."""
    s_, l_ = p[HP_CCDS], p[HP_CCDL]
    if per > 4 or (per > 1 and l_ > per * s_):
        return 0, 0
    dl = s_ if per > 1 else max(s_, l_)
    bab = p[HP_BA_BITS]
    c0 = max(ready, s[CS_LAST_COL] + s_, s[CS_BURST_COL] + cmd_gap)
    base = ga0 & ~bmask
    for j in range(per):
        if s[np.uint64(CS_B_ROW + granule_bank(p, base + j))] != row:
            return 0, 0
        if s[np.uint64(CS_BG_COL + (granule_bank(p, ga0 + j) >> bab))] + l_ > c0 + j * dl:
            return 0, 0
    return c0, dl


# ------------------------------------------------------------------------------------------ one request
# Without the Numba runtime (_nrt=False): the function allocates nothing, and a call with the runtime counts
# references on its array arguments with atomic operations on entry and exit, which cost more than a short request.
@njit(cache=True, _nrt=False)
def channel_request_at(
    p: np.ndarray, st: np.ndarray, c: int, arrival: int, addr: int, nbytes: int, is_write: int
) -> tuple[int, int]:
    """Serve one request on channel ``c`` (a row of the state table ``st``) that reached the controller at AXI
    cycle ``arrival`` after every earlier one (rules in the module docstring).

    Returns (first data cycle, end cycle exclusive of its last beat) and updates the channel state and counters.
    """
    s = st[c]  # the channel's state row (one index, not two, in every access below)
    g = p[HP_GRANULE]
    bb = p[HP_BURST_BEATS]
    gsh = p[HP_G_SHIFT]
    ga0 = div_by(addr, g, gsh)
    ga1 = div_by(addr + nbytes + g - 1, g, gsh)
    cmd_gap = p[HP_CMD] * (p[HP_MISALIGN] if addr - div_by(addr, g, gsh) * g != 0 else 1)
    ready = arrival + p[HP_FRONT]
    bab = p[HP_BA_BITS]
    look = p[HP_LOOKAHEAD]
    if s[CS_REF_OFF] == 0:
        s[CS_REF_OFF] = refresh_offset(p, p[HP_REF_PHASE])
    off = s[CS_REF_OFF]
    ws = s[CS_WS]
    we = s[CS_WE]
    if we == 0 or s[CS_LAST_COL] >= we:
        ws, we = refresh_window(p, off, max(0, s[CS_LAST_COL]))
    first = -1
    ga = ga0
    nb_in_burst = 0
    run_bits = p[HP_RUN_BITS]
    bmask = (1 << run_bits) - 1
    per = p[HP_RUN_P]
    run_len = 0  # granules of this request committed in a row inside the current block (no refresh between)
    c1 = c2 = c3 = c4 = 0  # column commands of the last four granules of this request
    if run_bits > 0 and ga1 - ga0 > 1:
        # a request that finds its block open streams from its first granule (channel idle, or its stream goes on)
        c0, dl = _fresh_delta(p, s, ga0, bmask, per, ready, cmd_gap, granule_row(p, ga0))
        if dl > 0:
            gn, rl = _stream_run(
                p, s, ga0, ga0, ga1, bmask, per, c0 - dl, c0 - 2 * dl, c0 - 3 * dl, c0 - 4 * dl,
                ready, cmd_gap, ws, is_write, per,
            )  # fmt: skip
            if gn > ga0:
                first = c0 + p[HP_CL]
                ga, run_len = gn, rl
                d_last = s[CS_LAST_COL]
                c4, c3, c2, c1 = d_last - 3 * dl, d_last - 2 * dl, d_last - dl, d_last
                nb_in_burst = ga - ga0 - div_by(ga - ga0, bb, p[HP_BB_SHIFT]) * bb
    while ga < ga1:
        if nb_in_burst == bb:
            nb_in_burst = 0
        if run_bits > 0 and run_len >= per and (ga & bmask) != 0 and ga1 - ga > 1:
            # streaming fast path: the last `per` granules opened every bank of this block (same row), so the
            # rest of the block are row hits whose column commands follow col_i = max(col_{i-1} + tCCD_S,
            # col_{i-per} + tCCD_L); once the increments are constant and no other bound can bind, they stay so
            ga, run_len = _stream_run(
                p, s, ga, ga0, ga1, bmask, per, c1, c2, c3, c4, ready, cmd_gap, ws, is_write, run_len
            )
            if ga > 0:
                d_last = s[CS_LAST_COL]
                # rebuild the history from the constant increment (the run only happens with one)
                step_ = _run_delta(p, per, c1, c2)
                c4 = d_last - 3 * step_
                c3 = d_last - 2 * step_
                c2 = d_last - step_
                c1 = d_last
                nb_in_burst = ga - ga0 - div_by(ga - ga0, bb, p[HP_BB_SHIFT]) * bb
                continue
            ga = -ga
        bank = granule_bank(p, ga)
        row = granule_row(p, ga)
        bg = bank >> bab
        lo = ready
        if nb_in_burst == 0:
            lo = max(lo, s[CS_BURST_COL] + cmd_gap)
        refreshed = False
        while True:
            col, act = _plan_granule(p, s, bank, row, bg, lo, ready, look, is_write)
            if col < ws:
                break
            # the access would meet the next refresh window: every bank closes at its start; re-plan after it
            # (counted when the request was already waiting at the controller as the window began)
            if arrival <= ws:
                s[CS_REFRESH_DEFERS] += 1
            _close_all(s, we)
            refreshed = True
            lo = max(lo, we)
            ws, we = refresh_window(p, off, we)
        d = _commit_granule(p, s, bank, row, bg, col, act, is_write, nb_in_burst == 0)
        if first < 0:
            first = d
        nb_in_burst += 1
        c4, c3, c2, c1 = c3, c2, c1, col
        if (ga & bmask) == 0 or refreshed:
            run_len = 1 if not refreshed else 0
        else:
            run_len += 1
        ga += 1
    s[CS_WS] = ws
    s[CS_WE] = we
    n_g = ga1 - ga0
    s[CS_BUSY] += n_g
    s[CS_BUS_BYTES] += n_g * g
    s[CS_LAST_DIR] = is_write
    s[CS_REQS] += 1
    if is_write:
        s[CS_WR_BYTES] += nbytes
    else:
        s[CS_RD_BYTES] += nbytes
    end = s[CS_BUS_FREE]
    s[CS_LAST_END] = end
    return first, end


def channel_request(
    p: np.ndarray, st: np.ndarray, arrival: int, addr: int, nbytes: int, is_write: int
) -> tuple[int, int]:
    """:func:`channel_request_at` on a single channel state vector (made by :func:`new_channel_state`), for Python
    callers (the cycle-stepped references, the tests). Plain Python on purpose: compiled, its constant channel
    index made Numba compile a second specialization of :func:`channel_request_at` for the literal 0 (5.9 CPU-s
    in every process that called it); from Python the index is an int64 like the kernels', whose compiled
    specialization (cached) it reuses."""
    return channel_request_at(p, st.reshape(1, CS_N), 0, arrival, addr, nbytes, is_write)


@njit(cache=True, inline="always")
def read_landing(
    p: np.ndarray, first: int, end: int, nbytes: int, port_bytes: int, prev_land: int, port_shift: int = -1
) -> int:
    """Kernel cycle from which a read's data is usable: the port copies ``port_bytes`` per kernel cycle once the
    first beat has crossed and the previous request has landed, and cannot finish before the last beat crossed.
    (``port_shift`` = log2(port_bytes) when known, to avoid a division.)"""
    copy_start = max(axi_to_kernel(p, first + 1), prev_land)
    return max(axi_to_kernel(p, end), copy_start + div_by(nbytes + port_bytes - 1, port_bytes, port_shift))
