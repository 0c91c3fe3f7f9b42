"""The port-through-the-switch model with the controller's request scheduling (fpga.hbm.scheduler.port_profile) equals
its cycle-stepped twin (fpga.hbm.reference): several pseudo-channels with their own refresh phases, one or several AXI IDs
changing destination, read and write in-flight limits, reorder windows from 1 to 64, lateral hops, read/write
mixes, drawn JEDEC timings and address maps."""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fpga.hbm import channel as hbm
from fpga.hbm.reference import masters_profile_stepped, port_profile_stepped
from fpga.hbm.scheduler import masters_profile, port_profile
from hwmodel.specs import library
from tests.streaming_gen import small_hbm


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_port_profile_equals_cycle_stepped(data: st.DataObject) -> None:
    base = library().board("u280")
    board = dataclasses.replace(base, hbm=small_hbm(data.draw, base))
    p = hbm.hbm_params(board, data.draw(st.sampled_from([150e6, 300e6, 450e6])))
    n_pc = data.draw(st.integers(1, 4))
    phases = [data.draw(st.integers(0, 3000)) for _ in range(n_pc)]
    n = data.draw(st.integers(1, 14))
    req = data.draw(st.sampled_from([32, 64, 96, 256]))
    addrs = [data.draw(st.integers(0, 1 << 16)) // 32 * 32 + data.draw(st.sampled_from([0, 0, 16])) for _ in range(n)]
    chans = [data.draw(st.integers(0, n_pc - 1)) for _ in range(n)]
    writes = [int(data.draw(st.integers(0, 3)) == 0) for _ in range(n)]
    hops = [data.draw(st.integers(0, 3)) for _ in range(n_pc)]
    lateral = data.draw(st.integers(0, 6))
    out_rd, out_wr = data.draw(st.integers(1, 6)), data.draw(st.integers(1, 6))
    n_ids = data.draw(st.sampled_from([1, 1, 2, 4]))
    window = data.draw(st.sampled_from([1, 2, 12, 64]))
    port_bytes = data.draw(st.sampled_from([32, 64]))
    st_ = np.zeros((n_pc, hbm.CS_N), dtype=np.int64)
    for c in range(n_pc):
        st_[c] = hbm.new_channel_state()
        hbm.set_refresh_phase(p, st_[c], phases[c])
    last_k, _last_axi, lands = port_profile(
        p,
        st_,
        np.array(addrs, dtype=np.int64),
        np.array(chans, dtype=np.int64),
        req,
        np.array(writes, dtype=np.int64),
        out_rd,
        out_wr,
        n_ids,
        window,
        port_bytes,
        np.array(hops, dtype=np.int64),
        lateral,
    )
    land, _first, states = port_profile_stepped(
        p, phases, addrs, chans, req, writes, out_rd, out_wr, n_ids, window, port_bytes, hops, lateral
    )
    assert last_k == max(land)
    assert list(lands) == land
    # the twin keeps stepping until the last request lands, so a refresh may have closed rows after the last access
    slots = [i for i in hbm.TRAFFIC_SLOTS if not hbm.CS_B_ROW <= i < hbm.CS_B_ROW + hbm.NB]
    for c in range(n_pc):
        for slot in slots:
            assert st_[c][slot] == states[c][slot], (c, slot)


def test_reordering_passes_bank_conflicts_and_matches_twin() -> None:
    """On the U280 channel, random 128-B reads under the 64-entry reorder queue leave arrival order (data of later
    requests first), move more bytes than in arrival order, and the twin agrees request by request."""
    board = library().board("u280")
    p = hbm.hbm_params(board, 450e6)
    rng = np.random.default_rng(3)
    n = 48
    addrs = (rng.integers(0, (1 << 28) // 128, n) * 128).tolist()
    out = {}
    for window in (1, 64):
        st_ = np.zeros((1, hbm.CS_N), dtype=np.int64)
        st_[0] = hbm.new_channel_state()
        args = (
            np.array(addrs, dtype=np.int64),
            np.zeros(n, dtype=np.int64),
            128,
            np.zeros(n, dtype=np.int64),
            16,
            16,
            1,
            window,
            128,
            np.zeros(1, dtype=np.int64),
            0,
        )
        _last_k, last_axi, lands = port_profile(p, st_, *args)
        land, first, _states = port_profile_stepped(
            p, [0], addrs, [0] * n, 128, [0] * n, 16, 16, 1, window, 128, [0], 0
        )
        assert list(lands) == land
        out[window] = (last_axi, first)
    assert out[1][1] == sorted(out[1][1])
    assert out[64][1] != sorted(out[64][1])
    assert out[64][0] < out[1][0]


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_masters_sharing_channels_equal_cycle_stepped(data: st.DataObject) -> None:
    """Several masters sharing pseudo-channels through the switch (round-robin at each channel's input, one
    command per AXI cycle, each master's commands in its order) equal the cycle-stepped twin request by request."""
    base = library().board("u280")
    board = dataclasses.replace(base, hbm=small_hbm(data.draw, base))
    p = hbm.hbm_params(board, data.draw(st.sampled_from([150e6, 225e6, 450e6, 900e6])))
    n_pc = data.draw(st.integers(1, 2))
    n_m = data.draw(st.integers(2, 4))
    phases = [data.draw(st.integers(0, 3000)) for _ in range(n_pc)]
    n = data.draw(st.integers(2, 14))
    req = data.draw(st.sampled_from([32, 64, 128]))
    addrs = [data.draw(st.integers(0, 1 << 14)) // 32 * 32 for _ in range(n)]
    chans = [data.draw(st.integers(0, n_pc - 1)) for _ in range(n)]
    masters = [data.draw(st.integers(0, n_m - 1)) for _ in range(n)]
    writes = [int(data.draw(st.integers(0, 3)) == 0) for _ in range(n)]
    hops = [[data.draw(st.sampled_from([0, 0, 0, 1, 2])) for _ in range(n_pc)] for _ in range(n_m)]
    lateral = data.draw(st.integers(0, 4))
    out_rd, out_wr = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))
    n_ids = data.draw(st.sampled_from([1, 2]))
    window = data.draw(st.sampled_from([1, 64]))
    st_ = np.zeros((n_pc, hbm.CS_N), dtype=np.int64)
    for c in range(n_pc):
        st_[c] = hbm.new_channel_state()
        hbm.set_refresh_phase(p, st_[c], phases[c])
    _last_k, _last_axi, lands = masters_profile(
        p,
        st_,
        np.array(addrs, dtype=np.int64),
        np.array(chans, dtype=np.int64),
        np.array(masters, dtype=np.int64),
        n_m,
        req,
        np.array(writes, dtype=np.int64),
        out_rd,
        out_wr,
        n_ids,
        window,
        32,
        np.array(hops, dtype=np.int64),
        lateral,
    )
    land, _first, _states = masters_profile_stepped(
        p, phases, addrs, chans, masters, req, writes, out_rd, out_wr, n_ids, window, 32, hops, lateral
    )
    assert list(lands) == land


def test_masters_contend_for_one_channel() -> None:
    """Two masters streaming into one pseudo-channel share it: each gets about half of what it gets alone, and
    the two together move no more than one channel's bus allows."""
    board = library().board("u280")
    p = hbm.hbm_params(board, 450e6)
    n = 64
    addrs = np.arange(n, dtype=np.int64) * 256

    def run(n_m: int) -> int:
        st_ = np.zeros((1, hbm.CS_N), dtype=np.int64)
        st_[0] = hbm.new_channel_state()
        last_k, _a, _l = masters_profile(
            p,
            st_,
            np.tile(addrs, n_m),
            np.zeros(n * n_m, dtype=np.int64),
            np.repeat(np.arange(n_m, dtype=np.int64), n),
            n_m,
            256,
            np.zeros(n * n_m, dtype=np.int64),
            16,
            16,
            1,
            64,
            256,
            np.zeros((n_m, 1), dtype=np.int64),
            0,
        )
        return last_k

    alone, shared = run(1), run(2)
    assert 1.7 * alone <= shared <= 2.3 * alone
