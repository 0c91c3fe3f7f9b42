"""The HBM channel model beside a simulator peer, Ramulator 2 (CMU-SAFARI/ramulator2), on the same request traces.

The peer is a simulator, not a measurement: its rows in `hwmodel validate` (area ``HBM peer``) show where two
independent bank-level models of the same HBM2 pseudo-channel agree, and every difference over 15 % is explained
by mechanism in docs/hbm.md. Ramulator is not part of this project (it cannot be fetched in CI): its results on
the trace sets below are stored with their provenance in ``fpga/data/hbm_peer_ramulator.json``; this module
regenerates the traces and hwmodel's side (deterministic) and pairs them.

A trace is a list of requests (pseudo-channel, byte address inside it, read/write) from one master with
``in_flight`` requests outstanding. hwmodel's side runs :func:`fpga.hbm.scheduler.port_profile` on the U280 board with
the port never limiting (a memory-clock port as wide as a request) and 64 AXI IDs (the peer has no AXI switch, so
the switch's per-ID ordering is taken out); bandwidth is bytes over the last data beat. The peer runs the same
requests, each cut into 32-B transactions addressed by the board's own address map (Ramulator's ``ReadWriteTrace``
takes the address vector as given), on its HBM2 standard with the U280's timings (the provenance lists the
overrides and what could not be matched).
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from fpga.hbm import channel as hbm
from fpga.hbm import profile as hbm_profile
from hwmodel.errors import HwmodelError
from hwmodel.specs import BoardSpec, library

DATA = Path(__file__).resolve().parents[2] / "fpga" / "data" / "hbm_peer_ramulator.json"

#: (name, pattern, request bytes, requests, write fraction, pseudo-channels, requests in flight)
FULL: tuple[tuple[str, str, int, int, float, int, int], ...] = (
    ("seq-4K-rd", "sequential", 4096, 256, 0.0, 1, 16),
    ("seq-64B-rd", "sequential", 64, 8192, 0.0, 1, 64),
    ("seq-256B-rw50", "sequential", 256, 2048, 0.5, 1, 64),
    ("rand-32B-rd", "random", 32, 8192, 0.0, 1, 64),
    ("rand-64B-rd", "random", 64, 8192, 0.0, 1, 64),
    ("rand-128B-rd", "random", 128, 4096, 0.0, 1, 64),
    ("rand-128B-rd-if1", "random", 128, 1024, 0.0, 1, 1),
    ("rand-128B-rd-if4", "random", 128, 2048, 0.0, 1, 4),
    ("rand-128B-rd-if16", "random", 128, 4096, 0.0, 1, 16),
    ("rand-256B-rd", "random", 256, 2048, 0.0, 1, 64),
    ("rand-1K-rd", "random", 1024, 512, 0.0, 1, 64),
    ("rand-4K-rd", "random", 4096, 256, 0.0, 1, 64),
    ("rand-128B-rw30", "random", 128, 4096, 0.3, 1, 64),
    ("stride-4K-64B-rd", "strided:4096", 64, 4096, 0.0, 1, 64),
    ("stride-2K-64B-rd", "strided:2048", 64, 4096, 0.0, 1, 64),
    ("scatter4-64B-rd", "random", 64, 8192, 0.0, 4, 64),
    ("scatter32-64B-rd", "random", 64, 16384, 0.0, 32, 64),
    ("scatter4-4K-rd", "random", 4096, 512, 0.0, 4, 64),
)
#: the CI subset (fast on both sides)
SMALL = ("seq-4K-rd", "rand-32B-rd", "rand-128B-rd", "rand-128B-rd-if4", "seq-256B-rw50", "scatter4-64B-rd")
BOARD = "u280"
#: cases whose difference exceeds 15 %, and the mechanism (docs/hbm.md, "Beside a simulator peer")
EXPLAINED = {
    "rand-128B-rd-if1": "in flight: the peer bounds accesses queued in its controller, hwmodel requests issued and "
    "not yet returned (front pipeline + tCL + return ~ 60 AXI cycles each)",
    "rand-128B-rd-if4": "in flight, as rand-128B-rd-if1",
    "rand-128B-rd-if16": "in flight, as rand-128B-rd-if1",
    "scatter32-64B-rd": "in flight, as rand-128B-rd-if1 (the peer's queues are per controller, 16 of them)",
    "scatter4-4K-rd": "the peer's trace frontend issues in order and stalls on a full controller queue "
    "(head-of-line blocking), hwmodel's 64-ID port does not",
}


def cases(which: str = "full") -> list[tuple[str, str, int, int, float, int, int]]:
    if which not in ("small", "full"):
        raise HwmodelError(f"trace set '{which}': expected small or full")
    return [c for c in FULL if which == "full" or c[0] in SMALL]


def trace(board: BoardSpec, case: tuple[str, str, int, int, float, int, int]) -> tuple[np.ndarray, ...]:
    """(pseudo-channel, byte address inside it, is-write) per request of ``case`` (seeded by its name)."""
    name, pattern, size, n, wf, n_pc, _inflight = case
    seed = zlib.crc32(name.encode())
    rng = np.random.default_rng(seed)
    pc_bytes = board.hbm.pc_capacity_bytes // board.hbm.ports_per_pc
    if pattern == "random":
        ch = rng.integers(0, n_pc, n).astype(np.int64)
    else:
        ch = (np.arange(n) % n_pc).astype(np.int64)
    per = -(-n // n_pc)
    addrs = hbm_profile.pattern_addresses(pattern, per if pattern != "random" else n, size, pc_bytes, seed)
    if pattern != "random":
        addrs = addrs[np.arange(n) // n_pc]
    writes = (rng.random(n) < wf).astype(np.int64) if wf > 0 else np.zeros(n, dtype=np.int64)
    return ch, addrs.astype(np.int64), writes


def model_gbps(board: BoardSpec, case: tuple[str, str, int, int, float, int, int]) -> float:
    """hwmodel's bandwidth on ``case`` (GB/s over the pseudo-channels it uses, bytes / last data beat)."""
    from fpga.hbm.scheduler import controller_window, port_profile

    h = board.hbm
    ch, addrs, writes = trace(board, case)
    size, inflight = case[2], case[6]
    n_pc = h.pseudo_channels * h.ports_per_pc
    p = hbm.hbm_params(board, h.axi_clock_hz)
    st = np.zeros((n_pc, hbm.CS_N), dtype=np.int64)
    for c in range(n_pc):
        st[c] = hbm.new_channel_state()
        hbm.set_refresh_phase(p, st[c], c * int(p[hbm.HP_REFI]) // n_pc)
    _k, last_axi, _l = port_profile(
        p,
        st,
        addrs,
        ch,
        size,
        writes,
        inflight,
        inflight,
        64,
        controller_window(h),
        max(size, h.granule_bytes),
        np.zeros(n_pc, dtype=np.int64),
        0,
    )
    return len(addrs) * size / (last_axi / h.axi_clock_hz) / 1e9


def granule_lines(board: BoardSpec, case: tuple[str, str, int, int, float, int, int]) -> list[str]:
    """The peer's trace: one ``R|W channel,pseudochannel,bankgroup,bank,row,column`` line per 32-B transaction,
    the bank, bank group and row from the board's address map (two pseudo-channels per Ramulator channel)."""
    h = board.hbm
    p = hbm.hbm_params(board, h.axi_clock_hz)
    ch, addrs, writes = trace(board, case)
    ba_bits = int(p[hbm.HP_BA_BITS])
    g = h.granule_bytes
    out = []
    for c, a, w in zip(ch.tolist(), addrs.tolist(), writes.tolist()):
        for ga in range(a // g, -(-(a + case[2]) // g)):
            bank = int(hbm.granule_bank(p, ga))
            row = int(hbm.granule_row(p, ga))
            out.append(
                f"{'W' if w else 'R'} {c // 2},{c % 2},{bank >> ba_bits},{bank & ((1 << ba_bits) - 1)},{row},{ga % 32}"
            )
    return out


def stored() -> dict[str, Any]:
    """The stored peer results and their provenance."""
    try:
        return json.loads(DATA.read_text())
    except (OSError, ValueError) as exc:
        raise HwmodelError(f"{DATA}: cannot read the stored Ramulator results ({exc})") from None


def comparison(which: str = "full", board: BoardSpec | None = None) -> list[dict[str, Any]]:
    """Per comparable case of the set: hwmodel's and the peer's GB/s and the difference (``board``: the U280 as
    given, e.g. with a field moved for a band; default the library's)."""
    b = board if board is not None else library().board(BOARD)
    data = stored()
    res = data["results"]
    out = []
    for case in cases(which):
        if case[0] not in res:
            raise HwmodelError(f"{DATA}: no Ramulator result for trace '{case[0]}'")
        if not res[case[0]].get("comparable", True):
            continue  # the stored result says why (a peer run that is not a sustained rate)
        m, peer = model_gbps(b, case), float(res[case[0]]["gbps"])
        out.append(
            {
                "case": case[0],
                "pattern": case[1],
                "req_bytes": case[2],
                "write_fraction": case[4],
                "channels": case[5],
                "in_flight": case[6],
                "model_gbps": m,
                "peer_gbps": peer,
                "diff": m / peer - 1.0,
            }
        )
    return out


def rows(which: str = "full", board: BoardSpec | None = None) -> list[dict[str, Any]]:
    """`hwmodel validate` rows: the peer's figure in the ``published`` column, labelled a simulator."""
    prov = stored()["provenance"]
    src = f"Ramulator 2 simulator peer, {prov['repository']} @ {prov['commit'][:7]} (fpga/data/hbm_peer_ramulator.json)"
    out = []
    for r in comparison(which, board):
        out.append(
            {
                "area": "HBM peer",
                "name": f"Ramulator 2 peer (simulator, not a measurement): {r['case']}",
                "model": r["model_gbps"],
                "published": r["peer_gbps"],
                "band": None,
                "unit": "GB/s",
                "role": "predicted",
                "free_params": 0,
                "workload": f"{r['pattern']}, {r['req_bytes']} B, {int(100 * r['write_fraction'])} % writes, "
                f"{r['channels']} PC(s), {r['in_flight']} in flight",
                "source": src,
                "note": "two simulators of the same U280 pseudo-channel on one trace"
                + (f"; over 15 %: {EXPLAINED[r['case']]}" if r["case"] in EXPLAINED else ""),
            }
        )
    return out
