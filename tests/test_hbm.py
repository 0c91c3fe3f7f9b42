"""HBM channel model: closed form == cycle-stepped channel, calibration, and the board's access rules."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fpga import hbm
from fpga.streaming_ref import _Channel
from hwmodel.specs import library


def _board(**hbm_changes):  # type: ignore[no-untyped-def]
    b = library().board("u280")
    return dataclasses.replace(b, hbm=dataclasses.replace(b.hbm, **hbm_changes)) if hbm_changes else b


def _replay_stepped(p: np.ndarray, reqs: list[tuple[int, int, int, int]]) -> tuple[list, list, list]:  # type: ignore[type-arg]
    ch = _Channel([int(x) for x in p])
    first: dict[int, int] = {}
    end: dict[int, int] = {}
    for r, (a, addr, n, w) in enumerate(reqs):
        ch.queue.append([r, a, addr, n, w, 0])
    m = 0
    while ch.queue:
        ch.step(m, lambda r, mm: first.__setitem__(r, mm), lambda r, mm: end.__setitem__(r, mm))
        m += 1
    return [first[r] for r in range(len(reqs))], [end[r] for r in range(len(reqs))], ch.counters


@settings(max_examples=150)
@given(st.data())
def test_closed_form_channel_equals_cycle_stepped(data: st.DataObject) -> None:
    """Every request's first/last data cycle and every counter agree with a channel stepped cycle by cycle,
    across refresh windows, row changes, misaligned and partial accesses and read/write switches."""
    board = _board(refresh_interval_s=data.draw(st.integers(60, 400)) / 450e6,
                   refresh_cycle_s=data.draw(st.integers(1, 40)) / 450e6,
                   row_bytes=data.draw(st.sampled_from([64, 256, 1024])),
                   row_switch_cycles=data.draw(st.integers(0, 6)),
                   rw_turnaround_cycles=data.draw(st.integers(0, 5)),
                   command_cycles=data.draw(st.integers(1, 3)),
                   axi3_burst_beats=data.draw(st.sampled_from([2, 4, 16])))
    p = hbm.hbm_params(board, data.draw(st.sampled_from([150e6, 300e6, 450e6])))
    n = data.draw(st.integers(1, 25))
    t = 0
    addr = data.draw(st.integers(0, 4096))
    reqs = []
    for _ in range(n):
        t += data.draw(st.integers(0, 120))
        nbytes = data.draw(st.integers(1, 1200))
        if data.draw(st.booleans()):
            addr = data.draw(st.integers(0, 1 << 16))
        reqs.append((t, addr, nbytes, int(data.draw(st.integers(0, 4)) == 0)))
        addr += nbytes
    state = hbm.new_channel_state()
    fast = [hbm.channel_request(p, state, a, ad, nb, w) for a, ad, nb, w in reqs]
    first, end, counters = _replay_stepped(p, reqs)
    assert [f for f, _e in fast] == first
    assert [e for _f, e in fast] == end
    for slot in (hbm.CS_BUSY, hbm.CS_BUS_BYTES, hbm.CS_RD_BYTES, hbm.CS_WR_BYTES, hbm.CS_REQS, hbm.CS_BURSTS,
                 hbm.CS_ROW_MISSES, hbm.CS_REFRESH_DEFERS):
        assert state[slot] == counters[slot], slot
    # no burst ever overlaps a refresh window, and the bus moves whole granules
    assert state[hbm.CS_BUS_BYTES] >= state[hbm.CS_RD_BYTES] + state[hbm.CS_WR_BYTES]


def test_sustained_bandwidth_reproduces_shuhai() -> None:
    """Refresh (PG276 tREFI, JEDEC tRFC) and the fitted row bubble give the measured 13.28 GB/s per channel."""
    b = library().board("u280")
    best, modelled, measured = hbm.fit_row_switch(b)
    assert best == b.hbm.row_switch_cycles
    assert modelled == pytest.approx(measured, rel=0.005)
    assert modelled < hbm.channel_peak_bytes_per_s(b)


def test_port_width_knee() -> None:
    """A 512-bit port saturates its channel near 208-225 MHz; a 256-bit port scales linearly to ~400 MHz."""
    b = library().board("u280")

    def bw(f: float, w: int) -> float:
        return hbm.profile_bandwidth(b, f, 4096, outstanding=8, port_width_bits=w)["bw_bytes_per_s"]

    sustained = hbm.sustained_channel_bw(b)
    assert bw(150e6, 512) == pytest.approx(150e6 * 64, rel=0.01)
    assert bw(200e6, 512) == pytest.approx(200e6 * 64, rel=0.01)
    assert bw(225e6, 512) == pytest.approx(sustained, rel=0.01)
    assert bw(450e6, 512) == pytest.approx(sustained, rel=0.01)
    for f in (150e6, 250e6, 350e6, 400e6):
        assert bw(f, 256) == pytest.approx(f * 32, rel=0.01)


def test_access_rules_of_pg276() -> None:
    b = library().board("u280")

    def eff(size: int, offset: int = 0) -> float:
        return hbm.profile_bandwidth(b, 450e6, size, outstanding=64, port_width_bits=1024,
                                     offset_bytes=offset, stride_bytes=size if offset == 0 else 4 * size,
                                     total_bytes=1 << 20)["efficiency"]

    # 32-B bursts reach at most half of 64-B ones (command rate); misaligned accesses need two commands (<= 50 %)
    assert eff(32) == pytest.approx(eff(64) / 2, rel=0.02)
    assert eff(64, offset=16) <= 0.5 * eff(64) * 1.02
    # an 8-B write costs a whole 32-B granule
    w8 = hbm.profile_bandwidth(b, 450e6, 8, outstanding=64, port_width_bits=1024, stride_bytes=32, write=True,
                               total_bytes=1 << 16)
    w32 = hbm.profile_bandwidth(b, 450e6, 32, outstanding=64, port_width_bits=1024, write=True, total_bytes=1 << 18)
    assert w8["efficiency"] == pytest.approx(w32["efficiency"] / 4, rel=0.05)


def test_latency_bound_small_requests_and_outstanding() -> None:
    """With one request in flight, efficiency grows with the request size (latency x bandwidth product); more
    outstanding requests hide the latency."""
    b = library().board("u280")
    sizes = [64, 256, 1024, 4096, 32768]
    one = [hbm.profile_bandwidth(b, 300e6, s, outstanding=1)["bw_bytes_per_s"] for s in sizes]
    assert all(x < y for x, y in zip(one, one[1:]))
    many = [hbm.profile_bandwidth(b, 300e6, 1024, outstanding=k)["bw_bytes_per_s"] for k in (1, 2, 4, 16)]
    assert all(x <= y * 1.0001 for x, y in zip(many, many[1:]))
    assert many[-1] > 2.5 * many[0]


def test_idle_latency_by_page_state() -> None:
    """An isolated read sees Shuhai's page-closed latency on a fresh channel, page-hit on an open row, page-miss on
    another row."""
    b = _board(refresh_interval_s=1e-3)
    p = hbm.hbm_params(b, 450e6)
    h = b.hbm
    s = hbm.new_channel_state()
    f0, e0 = hbm.channel_request(p, s, 100, 0, 32, 0)
    assert f0 - 100 == h.latency_page_closed_cycles
    f1, _ = hbm.channel_request(p, s, 1000, 32, 32, 0)
    assert f1 - 1000 == h.latency_page_hit_cycles
    f2, _ = hbm.channel_request(p, s, 2000, 10 * h.row_bytes, 32, 0)
    assert f2 - 2000 == h.latency_page_miss_cycles


def test_clock_ticks_are_exact() -> None:
    assert hbm.clock_ticks(300e6, 450e6) == (3, 2)
    assert hbm.clock_ticks(225e6, 450e6) == (2, 1)
    assert hbm.clock_ticks(217e6, 450e6) == (450, 217)
