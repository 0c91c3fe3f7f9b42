"""Cycle-level model of the instruction-driven accelerator (Numba): scheduler, scoreboard, datamover, MPE, SFU.

The machine (kernel clock; the HBM pseudo-channels run in their own AXI clock domain, :mod:`fpga.hbm.channel`):

* **Scheduler.** Fetches, decodes and issues instructions in program order, one every ``issue_cycles`` (any
  number per cycle when it is 0). An
  instruction is dispatched into its unit's queue (``unit_queue_depth`` entries); a full queue stalls issue.
  ``SYNC`` stalls issue until every issued instruction has retired.
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
:func:`run_program` is exact and fast for two reasons:

* it evaluates only cycles in which something can change: after a cycle in which nothing happened, the next
  possible change is the earliest pending timer (a request landing, a unit finishing, the scheduler ready);
* it simulates one representative channel per class of channels that receive identical request streams
  (:func:`channel_classes`): the HBM channels are independent, so identical inputs give identical trajectories.
  Weight tiles are dealt evenly over all channels, so a decode token typically has 2-3 classes, not 32.

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
from hwmodel.errors import HwmodelError

# ---------------------------------------------------------------------------------------------- engine parameters
EP_T, EP_R, EP_C = 0, 1, 2  # MPE token / row / column lanes
EP_MPE_PIPE, EP_MV_OVH, EP_MM_EFF_PPB = 3, 4, 5
EP_SFU_LANES, EP_SFU_PIPE = 6, 7
EP_CH, EP_PORT_BYTES, EP_RQ_DEPTH, EP_OUTSTANDING, EP_REQ_LAT = 8, 9, 10, 11, 12
EP_ISSUE, EP_UQ_DEPTH = 13, 14
EP_N = 15

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


@njit(cache=True)
def _needs_met(need: np.ndarray, retired: np.ndarray) -> bool:
    for v in range(3):
        if retired[v] < need[v]:
            return False
    return True


@njit(cache=True)
def run_program(
    prog: np.ndarray,
    seg_start: np.ndarray,
    seg_reps: np.ndarray,
    ep: np.ndarray,
    hp: np.ndarray,
    ch_cls: np.ndarray,
    cls_rep: np.ndarray,
    cls_size: np.ndarray,
    hst: np.ndarray,
    counters: np.ndarray,
    trace: np.ndarray,
) -> int:
    """Execute a program (segments of instructions, each repeated ``seg_reps`` times) to completion.

    Channels are simulated per *class*: channels that receive identical request streams (``ch_cls[c]``, see
    :func:`channel_classes`) follow identical trajectories, so only the representative ``cls_rep[k]`` of each class
    is simulated and its traffic counted ``cls_size[k]`` times. ``hst`` holds one HBM channel state row per class
    (:func:`fpga.hbm.channel.new_channel_state`), updated in place; ``counters`` (``CT_N`` int64) receives the totals.
    ``trace`` (int64, shape (3, n, 4)) receives, for the first ``n`` instructions of each unit, (flat row, repetition,
    start cycle, end cycle); pass shape (3, 0, 4) for no trace. Returns 0, or -1 on a deadlock (a program bug).
    """
    n_trace = trace.shape[1]
    NCH_ALL = ep[EP_CH]
    C = cls_rep.shape[0]
    RQ = ep[EP_RQ_DEPTH]
    OUT = ep[EP_OUTSTANDING]
    UQ = ep[EP_UQ_DEPTH]
    n_seg = seg_reps.shape[0]

    # per-unit instruction records, indexed by unit sequence number & _MASK
    u_row = np.zeros((3, RING), dtype=np.int64)
    u_rep = np.zeros((3, RING), dtype=np.int64)
    u_need = np.zeros((3, RING, 3), dtype=np.int64)
    u_done = np.zeros((3, RING), dtype=np.int64)  # MPE/SFU: completion cycle
    dm_pend = np.zeros(RING, dtype=np.int64)  # DM: requests not landed yet
    issued = np.zeros(3, dtype=np.int64)
    started = np.zeros(3, dtype=np.int64)
    retired = np.zeros(3, dtype=np.int64)

    # per-channel request queues and in-flight requests
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
    last_land = np.zeros(C, dtype=np.int64)

    mpe_free = 0
    mm_carry = 0  # fractional MM cycles (x EFF_SCALE) carried to the next MM instruction
    sfu_free = 0
    sched_ready = 0
    seg = 0
    rep = 0
    idx = 0
    done_issuing = n_seg == 0
    now = 0
    while not done_issuing and seg_reps[seg] == 0:
        seg += 1
        done_issuing = seg >= n_seg

    while True:
        progress = False
        # ---- 1. requests land; instructions complete and retire in order
        for c in range(C):
            k = 0
            while k < fl_count[c]:
                if fl_land[c, k] <= now:
                    q = fl_seq[c, k]
                    dm_pend[q & _MASK] -= 1
                    if q < n_trace and dm_pend[q & _MASK] == 0:
                        trace[0, q, 3] = now
                    last = fl_count[c] - 1
                    fl_seq[c, k] = fl_seq[c, last]
                    fl_land[c, k] = fl_land[c, last]
                    fl_count[c] = last
                    progress = True
                else:
                    k += 1
        while retired[0] < started[0] and dm_pend[retired[0] & _MASK] == 0:
            retired[0] += 1
            progress = True
        for u in range(1, 3):
            while retired[u] < started[u] and u_done[u, retired[u] & _MASK] <= now:
                retired[u] += 1
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
                fl_count[c] += 1
                rq_head[c] = (h + 1) % RQ
                rq_count[c] -= 1
                counters[CT_REQUESTS] += cls_size[c]
                if is_w:
                    counters[CT_WR_BYTES] += rq_bytes[c, h] * cls_size[c]
                else:
                    counters[CT_RD_BYTES] += rq_bytes[c, h] * cls_size[c]
                progress = True

        # ---- 3. datamover front-end: one LD/ST per cycle
        if started[0] < issued[0]:
            sl = started[0] & _MASK
            if _needs_met(u_need[0, sl], retired):
                r = u_row[0, sl]
                nch = prog[r, isa.F_NCH]
                ch0 = prog[r, isa.F_CH0]
                room = True
                for j in range(nch):
                    phys = (ch0 + j) % NCH_ALL
                    k = ch_cls[phys]
                    if cls_rep[k] == phys and rq_count[k] >= RQ:
                        room = False
                        break
                if room:
                    rows = prog[r, isa.F_ROWS]
                    rb = prog[r, isa.F_ROW_BYTES]
                    stride = prog[r, isa.F_STRIDE]
                    base = prog[r, isa.F_ADDR] + u_rep[0, sl] * prog[r, isa.F_ASTRIDE]
                    is_w = 1 if prog[r, isa.F_OP] == isa.OP_ST else 0
                    npend = 0
                    for j in range(nch):
                        nrows = (rows - j + nch - 1) // nch
                        phys = (ch0 + j) % NCH_ALL
                        c = ch_cls[phys]
                        if nrows <= 0 or cls_rep[c] != phys:
                            continue  # nothing to move, or a channel that mirrors its class representative
                        t = (rq_head[c] + rq_count[c]) % RQ
                        rq_seq[c, t] = started[0]
                        rq_addr[c, t] = base + ((ch0 + j) // NCH_ALL) * stride
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
                    dm_pend[sl] = npend
                    if started[0] < n_trace:
                        trace[0, started[0], 0] = r
                        trace[0, started[0], 1] = u_rep[0, sl]
                        trace[0, started[0], 2] = now
                        trace[0, started[0], 3] = now
                    started[0] += 1
                    progress = True

        # ---- 4. MPE
        if started[1] < issued[1] and mpe_free <= now:
            sl = started[1] & _MASK
            if _needs_met(u_need[1, sl], retired):
                r = u_row[1, sl]
                dur = mac_cycles(ep, prog[r, isa.F_ROWS], prog[r, isa.F_COLS], prog[r, isa.F_TOKENS])
                if prog[r, isa.F_OP] == isa.OP_MM:
                    num = dur * EFF_SCALE + mm_carry
                    dur = num // ep[EP_MM_EFF_PPB]
                    mm_carry = num - dur * ep[EP_MM_EFF_PPB]
                dur += ep[EP_MV_OVH]
                mpe_free = now + dur
                u_done[1, sl] = now + dur + ep[EP_MPE_PIPE]
                counters[CT_MPE_BUSY] += dur
                counters[CT_MACS] += prog[r, isa.F_ROWS] * prog[r, isa.F_COLS] * prog[r, isa.F_TOKENS]
                if started[1] < n_trace:
                    trace[1, started[1], 0] = r
                    trace[1, started[1], 1] = u_rep[1, sl]
                    trace[1, started[1], 2] = now
                    trace[1, started[1], 3] = now + dur
                started[1] += 1
                progress = True

        # ---- 5. SFU
        if started[2] < issued[2] and sfu_free <= now:
            sl = started[2] & _MASK
            if _needs_met(u_need[2, sl], retired):
                r = u_row[2, sl]
                dur = sfu_cycles(ep, prog[r, isa.F_ROWS], prog[r, isa.F_PASSES])
                sfu_free = now + dur
                u_done[2, sl] = now + dur + ep[EP_SFU_PIPE]
                counters[CT_SFU_BUSY] += dur
                if started[2] < n_trace:
                    trace[2, started[2], 0] = r
                    trace[2, started[2], 1] = u_rep[2, sl]
                    trace[2, started[2], 2] = now
                    trace[2, started[2], 3] = now + dur
                started[2] += 1
                progress = True

        # ---- 6. scheduler: fetch / decode / issue (one instruction per issue_cycles; any number when it is 0)
        while not done_issuing and sched_ready <= now:
            r = seg_start[seg] + idx
            op = prog[r, isa.F_OP]
            go = False
            if op == isa.OP_SYNC:
                go = retired[0] == issued[0] and retired[1] == issued[1] and retired[2] == issued[2]
            else:
                u = prog[r, isa.F_UNIT]
                if issued[u] - started[u] < UQ:
                    sl = issued[u] & _MASK
                    u_row[u, sl] = r
                    u_rep[u, sl] = rep
                    for v in range(3):
                        lag = prog[r, isa.F_WAIT_DM + v]
                        u_need[u, sl, v] = issued[v] - lag if lag >= 0 else 0
                    issued[u] += 1
                    counters[CT_DM_INSTR + u] += 1
                    go = True
            if not go:
                break
            counters[CT_INSTR] += 1
            sched_ready = now + ep[EP_ISSUE]
            progress = True
            idx += 1
            if idx == seg_start[seg + 1] - seg_start[seg]:
                idx = 0
                rep += 1
                if rep == seg_reps[seg]:
                    rep = 0
                    seg += 1
                    while seg < n_seg and seg_reps[seg] == 0:
                        seg += 1
                    done_issuing = seg >= n_seg

        counters[CT_STEPS] += 1
        if done_issuing and retired[0] == issued[0] and retired[1] == issued[1] and retired[2] == issued[2]:
            break
        # ---- advance time
        if progress:
            now += 1
            continue
        nxt = _NO_EVENT
        for c in range(C):
            for k in range(fl_count[c]):
                if now < fl_land[c, k] < nxt:
                    nxt = fl_land[c, k]
        for u in range(1, 3):
            if retired[u] < started[u]:
                t = u_done[u, retired[u] & _MASK]
                if now < t < nxt:
                    nxt = t
        if now < mpe_free < nxt:
            nxt = mpe_free
        if now < sfu_free < nxt:
            nxt = sfu_free
        if not done_issuing and now < sched_ready < nxt:
            nxt = sched_ready
        if nxt == _NO_EVENT:
            counters[CT_CYCLES] = now
            return -1
        now = nxt
    counters[CT_CYCLES] = now + 1
    return 0


# ---------------------------------------------------------------------------------------------- Python face
def engine_params(design) -> np.ndarray:  # noqa: ANN001 (InstructionDesign)
    """The int64 parameter vector of a design for :func:`run_program`."""
    d = design
    ep = np.zeros(EP_N, dtype=np.int64)
    ep[EP_T], ep[EP_R], ep[EP_C] = d.mpe.token_lanes, d.mpe.row_lanes, d.mpe.col_lanes
    ep[EP_MPE_PIPE], ep[EP_MV_OVH] = d.mpe.pipeline_cycles, d.mpe.mv_overhead_cycles
    ep[EP_MM_EFF_PPB] = mm_efficiency_ppb(d.mpe.mm_efficiency)
    ep[EP_SFU_LANES], ep[EP_SFU_PIPE] = d.sfu.lanes, d.sfu.pipeline_cycles
    dm = d.datamover
    ep[EP_CH], ep[EP_PORT_BYTES] = dm.channels, dm.port_width_bits // 8
    ep[EP_RQ_DEPTH], ep[EP_OUTSTANDING], ep[EP_REQ_LAT] = (
        dm.request_queue_depth,
        dm.outstanding,
        dm.request_latency_cycles,
    )
    ep[EP_ISSUE], ep[EP_UQ_DEPTH] = d.scheduler.issue_cycles, d.scheduler.unit_queue_depth
    return ep


def mm_efficiency_ppb(efficiency: float) -> int:
    return max(1, int(round(efficiency * EFF_SCALE)))


def new_hbm_state(n_classes: int) -> np.ndarray:
    return np.stack([hbm.new_channel_state() for _ in range(n_classes)])


def _unique_rows(triples: np.ndarray) -> np.ndarray:
    """``np.unique(triples, axis=0)`` for non-negative int64 (rows, ch0, nch) triples: each packed into one integer
    that sorts like the row, so numpy deduplicates a flat array (a row-wise unique sorts a structured view, several
    times slower on a program's thousands of LD/ST instructions)."""
    if triples.shape[0] == 0 or triples.min() < 0:
        return np.unique(triples, axis=0)
    k = int(triples[:, 1:].max()) + 1
    if int(triples[:, 0].max()) >= (2**62) // (k * k):
        return np.unique(triples, axis=0)
    codes = np.unique((triples[:, 0] * k + triples[:, 1]) * k + triples[:, 2])
    return np.stack([codes // (k * k), (codes // k) % k, codes % k], axis=1)


def channel_classes(prog: np.ndarray, channels: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Group the datamover channels by the request stream the program sends them.

    Request ``j`` of an LD/ST goes to channel ``(CH0 + j) mod C`` with ``ceil((ROWS - j) / NCH)`` rows at
    ``ADDR + ((CH0 + j) div C) * STRIDE`` (addresses advance identically for every channel between repetitions).
    Channels whose (rows, address) pairs agree for every instruction are interchangeable. Returns (class of each
    channel, representative channel of each class, class sizes)."""
    dm = prog[(prog[:, isa.F_OP] == isa.OP_LD) | (prog[:, isa.F_OP] == isa.OP_ST)]
    if dm.shape[0] == 0:
        return np.zeros(channels, dtype=np.int64), np.zeros(1, dtype=np.int64), np.array([channels], dtype=np.int64)
    dm = _unique_rows(dm[:, [isa.F_ROWS, isa.F_CH0, isa.F_NCH]])
    rows, ch0, nch = dm[:, 0:1], dm[:, 1:2], dm[:, 2:3]
    c = np.arange(channels, dtype=np.int64)[None, :]
    j = (c - ch0) % channels
    touched = j < nch
    nrows = np.where(touched, np.maximum((rows - j + nch - 1) // nch, 0), 0)
    wrap = np.where(touched, (ch0 + j) // channels, 0)
    keys = (nrows * 2 + wrap).T  # one row per channel
    _u, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    order = np.argsort(first)  # number the classes by their lowest channel
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    cls = rank[inverse].astype(np.int64)
    rep = first[order].astype(np.int64)
    size = np.bincount(cls, minlength=rep.size).astype(np.int64)
    return cls, rep, size


def simulate_program(design, program, trace_instructions: int = 0):  # noqa: ANN001, ANN201
    """Run ``program`` on ``design`` from an idle machine; the counters of :data:`COUNTER_NAMES` plus HBM totals.

    With ``trace_instructions`` > 0, also returns the trace array of :func:`run_program` (``(counters, trace)``).
    """
    flat, starts, reps = program.flat()
    C = design.datamover.channels
    cls, rep, size = channel_classes(flat, C)
    hp = hbm.hbm_params(design.board_spec, design.clock_hz)
    hst = new_hbm_state(rep.size)
    ct = np.zeros(CT_N, dtype=np.int64)
    trace = np.full((3, trace_instructions, 4), -1, dtype=np.int64)
    status = run_program(flat, starts, reps, engine_params(design), hp, cls, rep, size, hst, ct, trace)
    if status != 0:
        raise HwmodelError(
            f"instruction engine deadlock at cycle {int(ct[CT_CYCLES])}: an instruction waits on "
            "one that can never run (a compiler bug; please report the design and context)"
        )
    out = dict(zip(COUNTER_NAMES, (int(x) for x in ct)))
    out["channel_classes"] = int(rep.size)
    for name, slot in zip(hbm.CHANNEL_COUNTERS, hbm._COUNTER_SLOTS):  # noqa: SLF001
        out["hbm_" + name] = int(np.sum(hst[:, slot] * size))
    return (out, trace) if trace_instructions else out
