"""Cycle-level model of the instruction-driven accelerator (Numba): scheduler, scoreboard, datamover, MPE, SFU.

The machine (kernel clock; the HBM pseudo-channels run in their own AXI clock domain, :mod:`fpga.hbm.channel`):

* **Scheduler.** Fetches, decodes and issues instructions in program order, one every ``issue_cycles`` (any
  number per cycle when it is 0). An
  instruction is dispatched into its unit's queue (``unit_queue_depth`` entries); a full queue stalls issue.
  ``SYNC`` stalls issue until every issued instruction has retired (and every SIGNAL has fired).
* **Engines.** A design of ``engines = N`` runs N such machines, each with its own instruction stream and its own
  ``C/N`` channels; they meet only at semaphores. ``SIGNAL`` goes into the engine's signal queue
  (``unit_queue_depth``) and fires, in order, once its scoreboard waits are met; the semaphore of (this engine,
  TAG) counts it ``sync_cycles`` later. ``WAIT`` stalls its scheduler until the semaphore of (TAG, this engine) is
  positive and takes one. Nothing left to happen with an engine still waiting is a deadlock (a clear error).
* **Scoreboard.** Each unit retires its instructions in order. An instruction starts only when every unit ``u`` has
  retired the instructions it depends on (the relative ``WAIT_u`` fields, :mod:`fpga.instruction.isa`).
* **Datamover (DM).** Takes one LD/ST per cycle from its queue (in order) once its dependencies are met and every
  pseudo-channel it touches has room in its request queue (``request_queue_depth``); it then pushes one request
  per channel. Each channel starts at most one request per cycle and keeps at most ``outstanding`` in flight; a
  request reaches the controller ``request_latency_cycles`` after it starts, is served by the HBM channel model,
  and a read has landed when the port has copied its last byte (``port_width_bits / 8`` bytes per kernel cycle).
  An LD/ST completes when all its requests have landed.
* **MPE.** One MV/MM at a time, in order: ``ceil(tokens/T) * ceil(rows/R) * ceil(cols/C)`` MAC cycles plus
  ``mv_overhead_cycles`` of occupancy; the result is ready ``pipeline_cycles`` later. In MM mode the MAC cycles are
  divided by ``mm_efficiency``, a sustained rate: the fractional cycles carry over to the next MM instruction
  (Bresenham), so time is continuous in the efficiency.
* **SFU.** One operation at a time: ``passes * ceil(elements / lanes)`` cycles, result ``pipeline_cycles`` later.

Every cycle is resolved in the same order (land requests, retire, start channel requests, DM, MPE, SFU, issue).
:func:`run_program` (driven from Python by :func:`fpga.instruction.run.simulate_program`) is exact and fast for two reasons:

* it evaluates only cycles in which something can change: after a cycle in which nothing happened, the next
  possible change is the earliest pending timer (a request landing, a unit finishing, the scheduler ready);
* it simulates one representative channel per class of channels that receive identical request streams
  (:func:`fpga.instruction.classes.channel_classes`): the HBM channels are independent, so identical inputs give identical trajectories.
  Weight tiles are dealt evenly over all channels, so a decode token typically has 2-3 classes, not 32. The
  datamover visits those classes' representatives, not every channel an LD/ST touches, and a landing scan runs
  only when its class's earliest landing is due (glitches-u280/v80 decode and prefill 1.9x faster than visiting
  all 32 channels every cycle, identical counters, HBM states and traces).

Repeated decoder layers are *not* skipped: the HBM refresh windows are periodic in absolute time (tREFI), not per
layer, so two layers never see the same refresh phase and skipping would not be exact. The repeated segments only
save compilation and memory. :mod:`fpga.instruction.reference` is the plain cycle-by-cycle Python reference (every
cycle, every channel, the unrolled program); tests prove both give identical cycle counts and counters.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from fpga.hbm import channel as hbm
from fpga.instruction import isa

# ---------------------------------------------------------------------------------------------- engine parameters
EP_T, EP_R, EP_C = 0, 1, 2  # MPE token / row / column lanes
EP_MPE_PIPE, EP_MV_OVH, EP_MM_EFF_PPB = 3, 4, 5
EP_SFU_LANES, EP_SFU_PIPE = 6, 7
EP_CH, EP_PORT_BYTES, EP_RQ_DEPTH, EP_OUTSTANDING, EP_REQ_LAT = 8, 9, 10, 11, 12
EP_ISSUE, EP_UQ_DEPTH, EP_SYNC = 13, 14, 15
EP_N = 16

# ---------------------------------------------------------------------------------------------- counters
CT_CYCLES, CT_INSTR = 0, 1
CT_DM_INSTR, CT_MPE_INSTR, CT_SFU_INSTR = 2, 3, 4
CT_MPE_BUSY, CT_SFU_BUSY = 5, 6
CT_RD_BYTES, CT_WR_BYTES, CT_REQUESTS = 7, 8, 9
CT_MACS = 10
CT_STEPS = 11  # cycles actually evaluated (the rest were jumped over)
CT_N = 12
COUNTER_NAMES = (
    "cycles",
    "instructions",
    "dm_instructions",
    "mpe_instructions",
    "sfu_instructions",
    "mpe_busy_cycles",
    "sfu_busy_cycles",
    "read_bytes",
    "write_bytes",
    "requests",
    "macs",
    "evaluated_cycles",
)

# per-engine counters (designs of several engines; one row per engine)
ECT_INSTR, ECT_MPE_BUSY, ECT_SFU_BUSY, ECT_RD_BYTES, ECT_WR_BYTES, ECT_MACS = 0, 1, 2, 3, 4, 5
ECT_SIGNALS, ECT_WAIT_CYCLES, ECT_FINISH = 6, 7, 8
ECT_N = 9
ENGINE_COUNTER_NAMES = (
    "instructions",
    "mpe_busy_cycles",
    "sfu_busy_cycles",
    "read_bytes",
    "write_bytes",
    "macs",
    "signals",
    "wait_cycles",
    "finish_cycle",
)

RING = 1 << 15  # in-flight instruction records per unit (power of two)
_MASK = RING - 1
_NO_EVENT = np.int64(2**62)


@njit(cache=True, inline="always")
def _cdiv(a: int, b: int) -> int:
    return -((-a) // b)


EFF_SCALE = 1_000_000_000  # MM efficiency in parts per billion


@njit(cache=True)
def mac_cycles(ep: np.ndarray, rows: int, cols: int, tokens: int) -> int:
    """MAC cycles of one MV/MM instruction at full rate."""
    return _cdiv(tokens, ep[EP_T]) * _cdiv(rows, ep[EP_R]) * _cdiv(cols, ep[EP_C])


@njit(cache=True)
def sfu_cycles(ep: np.ndarray, elements: int, passes: int) -> int:
    return passes * _cdiv(elements, ep[EP_SFU_LANES])


@njit(cache=True, inline="always")
def _needs_met(need: np.ndarray, e: int, u: int, sl: int, retired: np.ndarray) -> bool:
    """Whether engine ``e``'s units have retired what record ``sl`` of its unit ``u`` waits for."""
    for v in range(3):
        if retired[e, v] < need[e, u, sl, v]:
            return False
    return True


@njit(cache=True, inline="always")
def _empty(seg_start: np.ndarray, seg_reps: np.ndarray, s: int) -> bool:
    """A segment with no instructions or no repetitions (an engine with no prologue, say)."""
    return seg_reps[s] == 0 or seg_start[s + 1] == seg_start[s]


@njit(cache=True)
def run_program(
    prog: np.ndarray,
    seg_start: np.ndarray,
    seg_reps: np.ndarray,
    eng_seg: np.ndarray,
    ep: np.ndarray,
    hp: np.ndarray,
    ch_cls: np.ndarray,
    cls_rep: np.ndarray,
    cls_size: np.ndarray,
    hst: np.ndarray,
    counters: np.ndarray,
    eng_ct: np.ndarray,
    trace: np.ndarray,
) -> int:
    """Execute the programs of ``NE = eng_seg.size - 1`` engines (segments ``eng_seg[e] .. eng_seg[e+1]`` of the
    flat program are engine e's, each repeated ``seg_reps`` times) to completion.

    Engine e owns HBM channels ``e * CE .. (e+1) * CE - 1`` (``CE = ep[EP_CH]``, its datamover's channels) and meets
    the others only at semaphores (SIGNAL / WAIT, :mod:`fpga.instruction.isa`). Channels are simulated per *class*:
    channels that receive identical request streams (``ch_cls[c]``, see :func:`fpga.instruction.classes.channel_classes`) follow identical
    trajectories, so only the representative ``cls_rep[k]`` of each class is simulated and its traffic counted
    ``cls_size[k]`` times. ``hst`` holds one HBM channel state row per class (:func:`fpga.hbm.channel.new_channel_state`),
    updated in place; ``counters`` (``CT_N`` int64) receives the totals, ``eng_ct`` (NE, ``ECT_N``) each engine's.
    ``trace`` (int64, shape (NE, 3, n, 4)) receives, for the first ``n`` instructions of each unit, (flat row,
    repetition, start cycle, end cycle); pass shape (NE, 3, 0, 4) for no trace. Returns 0, or -1 on a deadlock.
    """
    NE = eng_seg.shape[0] - 1
    n_trace = trace.shape[2]
    CE = ep[EP_CH]
    C = cls_rep.shape[0]
    RQ = ep[EP_RQ_DEPTH]
    OUT = ep[EP_OUTSTANDING]
    UQ = ep[EP_UQ_DEPTH]
    SYNC_LAT = ep[EP_SYNC]

    # per-engine, per-unit instruction records, indexed by unit sequence number & _MASK
    u_row = np.zeros((NE, 3, RING), dtype=np.int64)
    u_rep = np.zeros((NE, 3, RING), dtype=np.int64)
    u_need = np.zeros((NE, 3, RING, 3), dtype=np.int64)
    u_done = np.zeros((NE, 3, RING), dtype=np.int64)  # MPE/SFU: completion cycle
    dm_pend = np.zeros((NE, RING), dtype=np.int64)  # DM: requests not landed yet
    issued = np.zeros((NE, 3), dtype=np.int64)
    started = np.zeros((NE, 3), dtype=np.int64)
    retired = np.zeros((NE, 3), dtype=np.int64)
    # signal queue per engine; semaphore per ordered pair (src, dst): fire times, fired, taken
    s_need = np.zeros((NE, 1, RING, 3), dtype=np.int64)
    s_dst = np.zeros((NE, RING), dtype=np.int64)
    s_issued = np.zeros(NE, dtype=np.int64)
    s_fired = np.zeros(NE, dtype=np.int64)
    sem_vis = np.zeros((NE, NE, RING), dtype=np.int64)
    sem_fired = np.zeros((NE, NE), dtype=np.int64)
    sem_taken = np.zeros((NE, NE), dtype=np.int64)
    blocked_at = np.full(NE, -1, dtype=np.int64)  # cycle a WAIT started blocking the scheduler

    # per-class request queues and in-flight requests (a class belongs to one engine)
    cls_eng = np.zeros(C, dtype=np.int64)
    for k in range(C):
        cls_eng[k] = cls_rep[k] // CE
    e_cls = np.zeros(NE + 1, dtype=np.int64)  # engine e's classes are e_cls[e] .. e_cls[e + 1] - 1 (numbered in order)
    for k in range(C):
        e_cls[cls_eng[k] + 1] = k + 1
    for e in range(NE):
        e_cls[e + 1] = max(e_cls[e + 1], e_cls[e])
    rq_seq = np.zeros((C, RQ), dtype=np.int64)
    rq_addr = np.zeros((C, RQ), dtype=np.int64)
    rq_bytes = np.zeros((C, RQ), dtype=np.int64)
    rq_nseg = np.zeros((C, RQ), dtype=np.int64)
    rq_stride = np.zeros((C, RQ), dtype=np.int64)
    rq_write = np.zeros((C, RQ), dtype=np.int64)
    rq_head = np.zeros(C, dtype=np.int64)
    rq_count = np.zeros(C, dtype=np.int64)
    fl_seq = np.zeros((C, OUT), dtype=np.int64)
    fl_land = np.zeros((C, OUT), dtype=np.int64)
    fl_count = np.zeros(C, dtype=np.int64)
    fl_min = np.full(C, _NO_EVENT, dtype=np.int64)  # earliest landing in flight (the scan below runs only when due)
    last_land = np.zeros(C, dtype=np.int64)

    mpe_free = np.zeros(NE, dtype=np.int64)
    mm_carry = np.zeros(NE, dtype=np.int64)  # fractional MM cycles (x EFF_SCALE) carried to the next MM
    sfu_free = np.zeros(NE, dtype=np.int64)
    sched_ready = np.zeros(NE, dtype=np.int64)
    seg = np.zeros(NE, dtype=np.int64)
    rep = np.zeros(NE, dtype=np.int64)
    idx = np.zeros(NE, dtype=np.int64)
    done_issuing = np.zeros(NE, dtype=np.bool_)
    finished = np.zeros(NE, dtype=np.bool_)
    for e in range(NE):
        seg[e] = eng_seg[e]
        while seg[e] < eng_seg[e + 1] and _empty(seg_start, seg_reps, seg[e]):
            seg[e] += 1
        done_issuing[e] = seg[e] >= eng_seg[e + 1]
    now = 0

    while True:
        progress = False
        # ---- 1. requests land; instructions complete and retire in order
        for c in range(C):
            if fl_min[c] > now:
                continue
            ce = cls_eng[c]
            k = 0
            m = _NO_EVENT
            while k < fl_count[c]:
                if fl_land[c, k] <= now:
                    q = fl_seq[c, k]
                    dm_pend[ce, q & _MASK] -= 1
                    if q < n_trace and dm_pend[ce, q & _MASK] == 0:
                        trace[ce, 0, q, 3] = now
                    last = fl_count[c] - 1
                    fl_seq[c, k] = fl_seq[c, last]
                    fl_land[c, k] = fl_land[c, last]
                    fl_count[c] = last
                    progress = True
                else:
                    m = min(m, fl_land[c, k])
                    k += 1
            fl_min[c] = m
        for e in range(NE):
            while retired[e, 0] < started[e, 0] and dm_pend[e, retired[e, 0] & _MASK] == 0:
                retired[e, 0] += 1
                progress = True
            for u in range(1, 3):
                while retired[e, u] < started[e, u] and u_done[e, u, retired[e, u] & _MASK] <= now:
                    retired[e, u] += 1
                    progress = True

        # ---- 2. channels start requests
        for c in range(C):
            if rq_count[c] > 0 and fl_count[c] < OUT:
                h = rq_head[c]
                arrival = hbm.kernel_to_axi(hp, now + ep[EP_REQ_LAT])
                is_w = rq_write[c, h]
                land = 0
                for s in range(rq_nseg[c, h]):
                    nb = rq_bytes[c, h] // rq_nseg[c, h]
                    # on row c of the class states, as the streaming engine calls it (one compiled variant)
                    first, end = hbm.channel_request_at(
                        hp, hst, c, arrival, rq_addr[c, h] + s * rq_stride[c, h], nb, is_w
                    )
                    if is_w:
                        land = hbm.axi_to_kernel(hp, end)
                    else:
                        land = hbm.read_landing(hp, first, end, nb, ep[EP_PORT_BYTES], last_land[c])
                        last_land[c] = land
                fl_seq[c, fl_count[c]] = rq_seq[c, h]
                fl_land[c, fl_count[c]] = land
                fl_min[c] = min(fl_min[c], land)
                fl_count[c] += 1
                rq_head[c] = (h + 1) % RQ
                rq_count[c] -= 1
                counters[CT_REQUESTS] += cls_size[c]
                if is_w:
                    counters[CT_WR_BYTES] += rq_bytes[c, h] * cls_size[c]
                    eng_ct[cls_eng[c], ECT_WR_BYTES] += rq_bytes[c, h] * cls_size[c]
                else:
                    counters[CT_RD_BYTES] += rq_bytes[c, h] * cls_size[c]
                    eng_ct[cls_eng[c], ECT_RD_BYTES] += rq_bytes[c, h] * cls_size[c]
                progress = True

        for e in range(NE):
            base_ch = e * CE
            # ---- 3. datamover front-end: one LD/ST per cycle
            if started[e, 0] < issued[e, 0]:
                sl = started[e, 0] & _MASK
                if _needs_met(u_need, e, 0, sl, retired):
                    r = u_row[e, 0, sl]
                    nch = prog[r, isa.F_NCH]
                    ch0 = prog[r, isa.F_CH0]
                    # only class representatives take requests: visit them (a few classes), not every channel
                    # the instruction touches (up to 32, most of the run's time before); channel ch0 + j (mod CE)
                    # is touched once for j < nch <= CE. (nch > CE: the channel-by-channel loop, in order.)
                    by_cls = nch <= CE
                    room = True
                    if by_cls:
                        for k in range(e_cls[e], e_cls[e + 1]):
                            if (cls_rep[k] - base_ch - ch0) % CE < nch and rq_count[k] >= RQ:
                                room = False
                                break
                    else:
                        for j in range(nch):
                            phys = base_ch + (ch0 + j) % CE
                            k = ch_cls[phys]
                            if cls_rep[k] == phys and rq_count[k] >= RQ:
                                room = False
                                break
                    if room:
                        rows = prog[r, isa.F_ROWS]
                        rb = prog[r, isa.F_ROW_BYTES]
                        stride = prog[r, isa.F_STRIDE]
                        base = prog[r, isa.F_ADDR] + u_rep[e, 0, sl] * prog[r, isa.F_ASTRIDE]
                        is_w = 1 if prog[r, isa.F_OP] == isa.OP_ST else 0
                        npend = 0
                        n_visit = e_cls[e + 1] - e_cls[e] if by_cls else nch
                        for v in range(n_visit):
                            if by_cls:
                                c = e_cls[e] + v
                                j = (cls_rep[c] - base_ch - ch0) % CE
                                if j >= nch:
                                    continue
                            else:
                                j = v
                                c = ch_cls[base_ch + (ch0 + j) % CE]
                                if cls_rep[c] != base_ch + (ch0 + j) % CE:
                                    continue  # a channel that mirrors its class representative
                            nrows = (rows - j + nch - 1) // nch
                            if nrows <= 0:
                                continue  # nothing to move
                            t = (rq_head[c] + rq_count[c]) % RQ
                            rq_seq[c, t] = started[e, 0]
                            rq_addr[c, t] = base + ((ch0 + j) // CE) * stride
                            rq_bytes[c, t] = nrows * rb
                            if stride == rb:
                                rq_nseg[c, t] = 1
                                rq_stride[c, t] = 0
                            else:
                                rq_nseg[c, t] = nrows
                                rq_stride[c, t] = stride
                            rq_write[c, t] = is_w
                            rq_count[c] += 1
                            npend += 1
                        dm_pend[e, sl] = npend
                        if started[e, 0] < n_trace:
                            trace[e, 0, started[e, 0], 0] = r
                            trace[e, 0, started[e, 0], 1] = u_rep[e, 0, sl]
                            trace[e, 0, started[e, 0], 2] = now
                            trace[e, 0, started[e, 0], 3] = now
                        started[e, 0] += 1
                        progress = True

            # ---- 4. MPE
            if started[e, 1] < issued[e, 1] and mpe_free[e] <= now:
                sl = started[e, 1] & _MASK
                if _needs_met(u_need, e, 1, sl, retired):
                    r = u_row[e, 1, sl]
                    dur = mac_cycles(ep, prog[r, isa.F_ROWS], prog[r, isa.F_COLS], prog[r, isa.F_TOKENS])
                    if prog[r, isa.F_OP] == isa.OP_MM:
                        num = dur * EFF_SCALE + mm_carry[e]
                        dur = num // ep[EP_MM_EFF_PPB]
                        mm_carry[e] = num - dur * ep[EP_MM_EFF_PPB]
                    dur += ep[EP_MV_OVH]
                    mpe_free[e] = now + dur
                    u_done[e, 1, sl] = now + dur + ep[EP_MPE_PIPE]
                    macs = prog[r, isa.F_ROWS] * prog[r, isa.F_COLS] * prog[r, isa.F_TOKENS]
                    counters[CT_MPE_BUSY] += dur
                    counters[CT_MACS] += macs
                    eng_ct[e, ECT_MPE_BUSY] += dur
                    eng_ct[e, ECT_MACS] += macs
                    if started[e, 1] < n_trace:
                        trace[e, 1, started[e, 1], 0] = r
                        trace[e, 1, started[e, 1], 1] = u_rep[e, 1, sl]
                        trace[e, 1, started[e, 1], 2] = now
                        trace[e, 1, started[e, 1], 3] = now + dur
                    started[e, 1] += 1
                    progress = True

            # ---- 5. SFU
            if started[e, 2] < issued[e, 2] and sfu_free[e] <= now:
                sl = started[e, 2] & _MASK
                if _needs_met(u_need, e, 2, sl, retired):
                    r = u_row[e, 2, sl]
                    dur = sfu_cycles(ep, prog[r, isa.F_ROWS], prog[r, isa.F_PASSES])
                    sfu_free[e] = now + dur
                    u_done[e, 2, sl] = now + dur + ep[EP_SFU_PIPE]
                    counters[CT_SFU_BUSY] += dur
                    eng_ct[e, ECT_SFU_BUSY] += dur
                    if started[e, 2] < n_trace:
                        trace[e, 2, started[e, 2], 0] = r
                        trace[e, 2, started[e, 2], 1] = u_rep[e, 2, sl]
                        trace[e, 2, started[e, 2], 2] = now
                        trace[e, 2, started[e, 2], 3] = now + dur
                    started[e, 2] += 1
                    progress = True

            # ---- 5b. signals fire in order once what they publish is computed
            if s_fired[e] < s_issued[e] and _needs_met(s_need, e, 0, s_fired[e] & _MASK, retired):
                dst = s_dst[e, s_fired[e] & _MASK]
                sem_vis[e, dst, sem_fired[e, dst] & _MASK] = now + SYNC_LAT
                sem_fired[e, dst] += 1
                s_fired[e] += 1
                eng_ct[e, ECT_SIGNALS] += 1
                progress = True

            # ---- 6. scheduler: fetch / decode / issue (one instruction per issue_cycles; any number when it is 0)
            while not done_issuing[e] and sched_ready[e] <= now:
                r = seg_start[seg[e]] + idx[e]
                op = prog[r, isa.F_OP]
                go = False
                if op == isa.OP_SYNC:
                    go = (
                        retired[e, 0] == issued[e, 0]
                        and retired[e, 1] == issued[e, 1]
                        and retired[e, 2] == issued[e, 2]
                        and s_fired[e] == s_issued[e]
                    )
                elif op == isa.OP_SIGNAL:
                    if s_issued[e] - s_fired[e] < UQ:
                        sl = s_issued[e] & _MASK
                        s_dst[e, sl] = prog[r, isa.F_TAG]
                        for v in range(3):
                            lag = prog[r, isa.F_WAIT_DM + v]
                            s_need[e, 0, sl, v] = issued[e, v] - lag if lag >= 0 else 0
                        s_issued[e] += 1
                        go = True
                elif op == isa.OP_WAIT:
                    src = prog[r, isa.F_TAG]
                    tk = sem_taken[src, e]
                    if tk < sem_fired[src, e] and sem_vis[src, e, tk & _MASK] <= now:
                        sem_taken[src, e] += 1
                        if blocked_at[e] >= 0:
                            eng_ct[e, ECT_WAIT_CYCLES] += now - blocked_at[e]
                            blocked_at[e] = -1
                        go = True
                    elif blocked_at[e] < 0:
                        blocked_at[e] = now
                else:
                    u = prog[r, isa.F_UNIT]
                    if issued[e, u] - started[e, u] < UQ:
                        sl = issued[e, u] & _MASK
                        u_row[e, u, sl] = r
                        u_rep[e, u, sl] = rep[e]
                        for v in range(3):
                            lag = prog[r, isa.F_WAIT_DM + v]
                            u_need[e, u, sl, v] = issued[e, v] - lag if lag >= 0 else 0
                        issued[e, u] += 1
                        counters[CT_DM_INSTR + u] += 1
                        go = True
                if not go:
                    break
                counters[CT_INSTR] += 1
                eng_ct[e, ECT_INSTR] += 1
                sched_ready[e] = now + ep[EP_ISSUE]
                progress = True
                idx[e] += 1
                if idx[e] == seg_start[seg[e] + 1] - seg_start[seg[e]]:
                    idx[e] = 0
                    rep[e] += 1
                    if rep[e] == seg_reps[seg[e]]:
                        rep[e] = 0
                        seg[e] += 1
                        while seg[e] < eng_seg[e + 1] and _empty(seg_start, seg_reps, seg[e]):
                            seg[e] += 1
                        done_issuing[e] = seg[e] >= eng_seg[e + 1]

        counters[CT_STEPS] += 1
        all_done = True
        for e in range(NE):
            if not finished[e]:
                if (
                    done_issuing[e]
                    and retired[e, 0] == issued[e, 0]
                    and retired[e, 1] == issued[e, 1]
                    and retired[e, 2] == issued[e, 2]
                    and s_fired[e] == s_issued[e]
                ):
                    finished[e] = True
                    eng_ct[e, ECT_FINISH] = now + 1
                else:
                    all_done = False
        if all_done:
            break
        # ---- advance time
        if progress:
            now += 1
            continue
        nxt = _NO_EVENT
        for c in range(C):  # every landing in flight is later than now (step 1 took the due ones)
            if fl_min[c] < nxt:
                nxt = fl_min[c]
        for e in range(NE):
            for u in range(1, 3):
                if retired[e, u] < started[e, u]:
                    t = u_done[e, u, retired[e, u] & _MASK]
                    if now < t < nxt:
                        nxt = t
            if now < mpe_free[e] < nxt:
                nxt = mpe_free[e]
            if now < sfu_free[e] < nxt:
                nxt = sfu_free[e]
            if not done_issuing[e] and now < sched_ready[e] < nxt:
                nxt = sched_ready[e]
            for a in range(NE):
                if sem_taken[a, e] < sem_fired[a, e]:
                    t = sem_vis[a, e, sem_taken[a, e] & _MASK]
                    if now < t < nxt:
                        nxt = t
        if nxt == _NO_EVENT:
            counters[CT_CYCLES] = now
            return -1
        now = nxt
    counters[CT_CYCLES] = now + 1
    return 0
