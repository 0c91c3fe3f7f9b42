"""Cycle-stepped reference of the streaming decode model (plain Python, small shapes only).

It visits every kernel-clock cycle and every AXI-clock cycle of the token, in time order on the common tick
base, and advances explicit state machines: per engine (issuing a block, waiting on a barrier, an input, a port or
output space), per port (issue logic, the kernel-side copy of landed data, the channel queue) and per channel
(data bus, open row, refresh windows). Every port is simulated on its own: nothing is shared between identical
ports; a pseudo-channel that several ports share keeps a queue per port and arbitrates among their heads. Its results must equal the fast engine's (:mod:`fpga.streaming.engine`) exactly; tests/test_streaming_equivalence.py
checks that over hundreds of generated designs.
"""

from __future__ import annotations

import collections
import dataclasses

import numpy as np

from fpga.hbm import channel as hbm
from fpga.streaming.design import StreamingDesign
from fpga.streaming.program import compile_token
from fpga.streaming.program_format import Program
from hwmodel.specs import BoardSpec, LlmSpec

EC_BUSY, EC_DRAIN, EC_IN, EC_MEM, EC_OUT, EC_DONE = range(6)


@dataclasses.dataclass
class RefResult:
    status: int  # 0 finished, 1 deadlock
    cycles: int
    start: np.ndarray
    counters: np.ndarray  # (engines, 6)
    issue: list[np.ndarray]  # per port, per request
    land: list[np.ndarray]
    first: list[np.ndarray]
    end: list[np.ndarray]
    channel: np.ndarray  # (ports, CS_N)
    kernel_cycles_stepped: int
    axi_cycles_stepped: int


class _Channel:
    """One pseudo-channel, stepped one AXI cycle at a time (bank-level rules of :mod:`fpga.hbm.channel`).

    The head column access is planned by testing every timing rule as a predicate cycle after cycle (PRE, ACT,
    column command), from the committed state of the earlier accesses; the column command issues when the stepped
    AXI clock reaches it, unless a refresh window starts first (then every bank closes and the access is
    re-planned after the window)."""

    def __init__(self, p: list[int]) -> None:
        self.p = p
        self.s = [int(x) for x in hbm.new_channel_state()]
        self.s[hbm.CS_REF_OFF] = p[hbm.HP_REFI] - p[hbm.HP_REF_PHASE] % p[hbm.HP_REFI]
        self.queue: collections.deque[list[int]] = collections.deque()  # [request, arrival, addr, bytes, write, i]
        self.plan: tuple[int, int, int] | None = None  # (act or -1, column command, first command)
        self.lo = 0  # re-plan bound after a refresh window
        self.deferred_req = -1
        self.counters = self.s  # counters live in the state list (same slots as the fast model)

    # -- the address map and timing rules, one predicate each
    def _where(self, ga: int) -> tuple[int, int, int]:
        p = self.p
        lo = ga & ((1 << p[hbm.HP_ROW_SHIFT]) - 1)
        hi = (ga >> p[hbm.HP_HI_SHIFT]) & p[hbm.HP_HI_MASK]
        bank = p[p[hbm.HP_LUT_LO] + lo] | p[p[hbm.HP_LUT_HI] + hi]
        return bank, (ga >> p[hbm.HP_ROW_SHIFT]) & p[hbm.HP_ROW_MASK], bank >> p[hbm.HP_BA_BITS]

    def _window(self, t: int) -> tuple[int, int]:
        p, off = self.p, self.s[hbm.CS_REF_OFF]
        k = 0
        while off + k * p[hbm.HP_REFI] + p[hbm.HP_RFC] <= t:
            k += 1
        return off + k * p[hbm.HP_REFI], off + k * p[hbm.HP_REFI] + p[hbm.HP_RFC]

    def _plan(self) -> tuple[int, int, int]:
        p, s = self.p, self.s
        req, arrival, addr, nbytes, write, i = self.queue[0]
        g = p[hbm.HP_GRANULE]
        ga = addr // g + i
        bank, row, bg = self._where(ga)
        ready = arrival + p[hbm.HP_FRONT]
        lo = max(ready, self.lo)
        if i % p[hbm.HP_BURST_BEATS] == 0:
            gap = p[hbm.HP_CMD] * (p[hbm.HP_MISALIGN] if addr % g else 1)
            lo = max(lo, s[hbm.CS_BURST_COL] + gap)
        act = -1
        first_cmd = -1
        col_from = lo
        if s[hbm.CS_B_ROW + bank] != row:
            t = ready if p[hbm.HP_LOOKAHEAD] else max(ready, s[hbm.CS_LAST_COL])
            if s[hbm.CS_B_ROW + bank] >= 0:  # precharge first
                while not (
                    t >= s[hbm.CS_B_ACT + bank] + p[hbm.HP_RAS]
                    and t >= s[hbm.CS_B_RD + bank] + p[hbm.HP_RTP]
                    and t >= s[hbm.CS_B_WR + bank] + p[hbm.HP_WR]
                ):
                    t += 1
                first_cmd = t
                t += p[hbm.HP_RP]
            else:
                t = max(t, s[hbm.CS_CLOSED_AT])
            faw = s[hbm.CS_FAW + s[hbm.CS_FAW_PTR]]
            while not (
                t >= s[hbm.CS_B_ACT + bank] + p[hbm.HP_RC]
                and t >= s[hbm.CS_LAST_ACT] + p[hbm.HP_RRDS]
                and t >= s[hbm.CS_BG_ACT + bg] + p[hbm.HP_RRDL]
                and t >= faw + p[hbm.HP_FAW]
            ):
                t += 1
            act = t
            if first_cmd < 0:
                first_cmd = act
            col_from = max(col_from, act + p[hbm.HP_RCD])
        t = col_from
        while True:
            ok = t >= s[hbm.CS_LAST_COL] + p[hbm.HP_CCDS] and t >= s[hbm.CS_BG_COL + bg] + p[hbm.HP_CCDL]
            if write:
                ok = ok and t >= s[hbm.CS_LAST_RD_COL] + p[hbm.HP_RTW]
            else:
                ok = (
                    ok
                    and t >= s[hbm.CS_LAST_WR_END] + p[hbm.HP_WTRS]
                    and t >= s[hbm.CS_BG_WR_END + bg] + p[hbm.HP_WTRL]
                )
            if ok:
                break
            t += 1
        return act, t, (t if first_cmd < 0 else first_cmd)

    def step(self, m: int, on_first: callable, on_end: callable) -> None:  # type: ignore[valid-type]
        p, s = self.p, self.s
        off, refi, rfc = s[hbm.CS_REF_OFF], p[hbm.HP_REFI], p[hbm.HP_RFC]
        if m >= off and (m - off) % refi == 0:  # a refresh window starts: every bank closes, plans are void
            if self.queue and self.queue[0][1] <= m:
                s[hbm.CS_REFRESH_DEFERS] += 1
            for b in range(hbm.NB):
                s[hbm.CS_B_ROW + b] = -1
            s[hbm.CS_CLOSED_AT] = m + rfc
            self.lo = m + rfc
            self.plan = None
        if not self.queue:
            return
        if self.plan is None:
            self.plan = self._plan()
        act, col, _first_cmd = self.plan
        if m < col:
            return
        req, arrival, addr, nbytes, write, i = self.queue[0]
        g = p[hbm.HP_GRANULE]
        bank, row, bg = self._where(addr // g + i)
        if act >= 0:
            if s[hbm.CS_B_ROW + bank] >= 0:
                s[hbm.CS_ROW_MISSES] += 1
            s[hbm.CS_ACTS] += 1
            s[hbm.CS_B_ROW + bank] = row
            s[hbm.CS_B_ACT + bank] = act
            s[hbm.CS_LAST_ACT] = act
            s[hbm.CS_BG_ACT + bg] = act
            k = s[hbm.CS_FAW_PTR]
            s[hbm.CS_FAW + k] = act
            s[hbm.CS_FAW_PTR] = (k + 1) & 3
        s[hbm.CS_LAST_COL] = col
        s[hbm.CS_BG_COL + bg] = col
        d = col + p[hbm.HP_CL]
        if write:
            s[hbm.CS_LAST_WR_END] = d + 1
            s[hbm.CS_BG_WR_END + bg] = d + 1
            s[hbm.CS_B_WR + bank] = d + 1
        else:
            s[hbm.CS_LAST_RD_COL] = col
            s[hbm.CS_B_RD + bank] = col
        if i % p[hbm.HP_BURST_BEATS] == 0:
            s[hbm.CS_BURST_COL] = col
            s[hbm.CS_BURSTS] += 1
        if i == 0:
            on_first(req, d)
        s[hbm.CS_BUS_FREE] = d + 1
        self.plan = None
        self.lo = 0
        n_g = -(-(addr + nbytes) // g) - addr // g
        if i + 1 == n_g:  # last granule of the request
            self.queue.popleft()
            s[hbm.CS_BUSY] += n_g
            s[hbm.CS_BUS_BYTES] += n_g * g
            s[hbm.CS_LAST_DIR] = write
            s[hbm.CS_REQS] += 1
            s[hbm.CS_WR_BYTES if write else hbm.CS_RD_BYTES] += nbytes
            s[hbm.CS_LAST_END] = d + 1
            on_end(req, d + 1)
        else:
            self.queue[0][5] = i + 1

    def state(self) -> np.ndarray:
        return np.array(self.s, dtype=np.int64)

    def push(self, port: int, entry: list[int]) -> None:
        self.queue.append(entry)

    def pending(self) -> bool:
        return bool(self.queue)


class _SharedChannel(_Channel):
    """A pseudo-channel shared by several ports (fpga/streaming/ports.py): each port queues its requests in order; while no
    granule of the head has been served, the head is re-chosen every AXI cycle among the ports' first requests:
    earliest arrival, then round-robin after the last granted port or fixed priority by port order."""

    def __init__(self, p: list[int], ports: list[int], arbitration: int) -> None:
        super().__init__(p)
        self.ports = ports
        self.arb = arbitration
        self.waiting: dict[int, collections.deque[list[int]]] = {q: collections.deque() for q in ports}
        self.owner = -1  # port of the request in self.queue
        self.last = len(ports) - 1  # position of the port granted last

    def push(self, port: int, entry: list[int]) -> None:
        self.waiting[port].append(entry)

    def pending(self) -> bool:
        return bool(self.queue) or any(self.waiting.values())

    def _rank(self, k: int) -> int:
        n = len(self.ports)
        return k if self.arb == 1 else (k - self.last - 1) % n

    def step(self, m: int, on_first: callable, on_end: callable) -> None:  # type: ignore[valid-type]
        if not self.queue or self.queue[0][5] == 0:  # the head has not started: arbitrate again
            if self.queue:
                self.waiting[self.owner].appendleft(self.queue.popleft())
            heads = [(w[0][1], self._rank(k), k) for k, q in enumerate(self.ports) if (w := self.waiting[q])]
            if heads:
                _arr, _rank, k = min(heads)
                q = self.ports[k]
                if q != self.owner:
                    self.plan = None
                self.owner = q
                self.queue.append(self.waiting[q].popleft())
        n_before = len(self.queue)
        super().step(m, on_first, on_end)
        if n_before and not self.queue:  # the head finished: its port was granted
            self.last = self.ports.index(self.owner)
            self.owner = -1


def simulate_reference(
    design: StreamingDesign,
    board: BoardSpec,
    llm: LlmSpec,
    ctx: int,
    with_lm_head: bool = True,
    max_kernel_cycles: int = 5_000_000,
) -> RefResult:
    prog = compile_token(design, board, llm, ctx, with_lm_head, per_port=True)
    p = [int(x) for x in hbm.hbm_params(board, design.clock_hz, hbm.token_refresh_phase(board, ctx))]
    return run_reference(p, prog, max_kernel_cycles)


def run_reference(p: list[int], prog: Program, max_kernel_cycles: int = 5_000_000) -> RefResult:
    tk, ta, sync = p[hbm.HP_TK], p[hbm.HP_TA], p[hbm.HP_SYNC]
    n_blocks = prog.n_blocks
    t_cyc = prog.t_cyc.tolist()
    t_drain = prog.t_drain.tolist()
    t_dep = prog.t_dep.tolist()
    t_off = prog.t_off.tolist()
    # slots 0, 1 are inputs and 2 output space; multi-unit programs add inputs (odd) and output space (even)
    width = prog.t_dep.shape[1]
    in_slots = [s for s in range(width) if s < 2 or (s > 2 and s % 2 == 1)]
    out_slots = [s for s in range(width) if s not in in_slots]
    e_lat = prog.e_lat.tolist()
    n_e = len(e_lat)
    programs = [prog.e_list[prog.e_ptr[e] : prog.e_ptr[e + 1]].tolist() for e in range(n_e)]
    n_ports = prog.n_ports
    need = prog.t_need_port.tolist()
    reqs = []
    for q in range(n_ports):
        sl = slice(prog.p_ptr[q], prog.p_ptr[q + 1])
        reqs.append(
            {
                k: getattr(prog, "pr_" + k)[sl].tolist()
                for k in ("bytes", "addr", "write", "dep", "dep_off", "slot", "slot_off", "outprev")
            }
        )
    port_bytes = prog.port_bytes.tolist()

    start = [-1] * n_blocks
    counters = [[0] * 6 for _ in range(n_e)]
    e_pos = [0] * n_e
    e_issue_end = [0] * n_e
    e_done_at = [0] * n_e
    n_req = [len(r["bytes"]) for r in reqs]
    issue = [[-1] * n for n in n_req]
    land = [[-1] * n for n in n_req]
    first = [[-1] * n for n in n_req]
    end = [[-1] * n for n in n_req]
    next_req = [0] * n_ports
    last_issue = [-1] * n_ports
    reads = [[r for r in range(n_req[q]) if not reqs[q]["write"][r]] for q in range(n_ports)]
    copy_pos = [0] * n_ports  # index into reads[q] of the read being copied into the kernel buffer
    copy_start = [-1] * n_ports
    prev_land = [0] * n_ports
    port_chan = prog.port_chan.tolist() if len(prog.port_chan) else list(range(n_ports))
    sharers: dict[int, list[int]] = {}
    for q, c in enumerate(port_chan):
        sharers.setdefault(c, []).append(q)
    chans = [
        _SharedChannel(p, sharers[c], prog.arbitration) if len(sharers[c]) > 1 else _Channel(p)
        for c in range(len(sharers))
    ]

    def a2k(m: int) -> int:
        return -(-(m * ta) // tk) + sync

    total = -1
    kc = 0  # next kernel cycle
    ac = 0  # next AXI cycle
    # no state change for longer than any legitimate wait (a block's issue, a pipeline, a refresh, a memory round
    # trip) means nothing ever will: the design deadlocks
    patience = 2 * (max(t_cyc) + max(e_lat) + -(-p[hbm.HP_REFI] * ta // tk) + 10_000)
    last_change = 0
    signature = None
    while True:
        if (
            total >= 0
            and kc >= total
            and all(next_req[q] == n_req[q] for q in range(n_ports))
            and all(not ch.pending() for ch in chans)
            and all(copy_pos[q] == len(reads[q]) for q in range(n_ports))
        ):
            break
        if ac * ta > kc * tk:  # at each kernel cycle: has anything moved?
            sig = (sum(e_pos), sum(next_req), sum(copy_pos), sum(ch.counters[hbm.CS_BURSTS] for ch in chans))
            if sig != signature:
                signature = sig
                last_change = kc
            elif kc - last_change > patience:
                kc = max_kernel_cycles + 1
        if kc > max_kernel_cycles:
            return RefResult(
                1, -1, np.array(start), np.array(counters), [], [], [], [], np.zeros((0, hbm.CS_N)), kc, ac
            )
        if ac * ta <= kc * tk:
            m = ac
            for ch in chans:

                def on_first(rq: tuple[int, int], mm: int) -> None:
                    first[rq[0]][rq[1]] = mm

                def on_end(rq: tuple[int, int], mm: int) -> None:
                    q, r = rq
                    end[q][r] = mm
                    if reqs[q]["write"][r]:
                        land[q][r] = a2k(mm)

                ch.step(m, on_first, on_end)
            ac += 1
            continue
        n = kc
        # 1. kernel side of read ports: copy landed data into the buffer, one request after another
        for q in range(n_ports):
            while copy_pos[q] < len(reads[q]):
                r = reads[q][copy_pos[q]]
                if copy_start[q] < 0:
                    f = first[q][r]
                    if f < 0 or n < a2k(f + 1) or n < prev_land[q]:
                        break
                    copy_start[q] = n
                e = end[q][r]
                nb = reqs[q]["bytes"][r]
                if n < copy_start[q] + -(-nb // port_bytes[q]) or e < 0 or n < a2k(e):
                    break
                land[q][r] = n
                prev_land[q] = n
                copy_pos[q] += 1
                copy_start[q] = -1
        # 2. engines
        for e in range(n_e):
            if total >= 0 and n >= total:
                break
            c = counters[e]
            if n < e_issue_end[e]:
                c[EC_BUSY] += 1
                continue
            if e_pos[e] >= len(programs[e]):
                c[EC_DONE] += 1
                continue
            t = programs[e][e_pos[e]]
            drain_ok = not t_drain[t] or n >= e_done_at[e]
            in_ok = True
            for s in in_slots:
                d = t_dep[t][s]
                if d >= 0 and (start[d] < 0 or n < start[d] + t_off[t][s]):
                    in_ok = False
            mem_ok = True
            for q in range(n_ports):
                r = need[t][q]
                if r >= 0 and (land[q][r] < 0 or n < land[q][r]):
                    mem_ok = False
            out_ok = True
            for s in out_slots:
                d = t_dep[t][s]
                if d >= 0 and (start[d] < 0 or n < start[d] + t_off[t][s]):
                    out_ok = False
            if drain_ok and in_ok and mem_ok and out_ok:
                start[t] = n
                e_issue_end[e] = n + t_cyc[t]
                e_done_at[e] = n + t_cyc[t] + e_lat[e]
                e_pos[e] += 1
                c[EC_BUSY] += 1
                if t == prog.final_block:
                    total = n + t_cyc[t] + e_lat[e]
            elif not drain_ok:
                c[EC_DRAIN] += 1
            elif not in_ok:
                c[EC_IN] += 1
            elif not mem_ok:
                c[EC_MEM] += 1
            else:
                c[EC_OUT] += 1
        # 3. ports issue requests
        for q in range(n_ports):
            r = next_req[q]
            if r >= n_req[q] or n < last_issue[q] + 1:
                continue
            rq = reqs[q]
            b = rq["slot"][r]
            if b >= 0 and (start[b] < 0 or n < start[b] + rq["slot_off"][r]):
                continue
            b = rq["dep"][r]
            if b >= 0 and (start[b] < 0 or n < start[b] + rq["dep_off"][r]):
                continue
            o = rq["outprev"][r]
            if o >= 0 and (land[q][o] < 0 or n < land[q][o]):
                continue
            issue[q][r] = n
            last_issue[q] = n
            next_req[q] += 1
            arrival = -(-((n + 1) * tk) // ta) + sync + p[hbm.HP_SWITCH]
            chans[port_chan[q]].push(q, [(q, r), arrival, rq["addr"][r], rq["bytes"][r], rq["write"][r], 0])
        kc += 1
    return RefResult(
        0,
        total,
        np.array(start, dtype=np.int64),
        np.array(counters, dtype=np.int64),
        [np.array(x, dtype=np.int64) for x in issue],
        [np.array(x, dtype=np.int64) for x in land],
        [np.array(x, dtype=np.int64) for x in first],
        [np.array(x, dtype=np.int64) for x in end],
        np.array([chans[port_chan[q]].state() for q in range(n_ports)]).reshape(n_ports, hbm.CS_N),
        kc,
        ac,
    )
