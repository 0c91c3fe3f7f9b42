"""The port-through-the-switch model (fpga.hbm.port_profile) equals its cycle-stepped twin (fpga.hbm_ref): several
pseudo-channels with their own refresh phases, destination changes under one AXI ID, lateral hops, read/write
mixes, drawn JEDEC timings and address maps."""
from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fpga import hbm
from fpga.hbm_ref import port_profile_stepped
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
    n = data.draw(st.integers(1, 12))
    req = data.draw(st.sampled_from([32, 64, 96, 256]))
    addrs = [data.draw(st.integers(0, 1 << 16)) // 32 * 32 + data.draw(st.sampled_from([0, 0, 16])) for _ in range(n)]
    chans = [data.draw(st.integers(0, n_pc - 1)) for _ in range(n)]
    writes = [int(data.draw(st.integers(0, 3)) == 0) for _ in range(n)]
    hops = [data.draw(st.integers(0, 3)) for _ in range(n_pc)]
    lateral = data.draw(st.integers(0, 6))
    outstanding = data.draw(st.integers(1, 6))
    port_bytes = data.draw(st.sampled_from([32, 64]))
    st_ = np.zeros((n_pc, hbm.CS_N), dtype=np.int64)
    for c in range(n_pc):
        st_[c] = hbm.new_channel_state()
        hbm.set_refresh_phase(p, st_[c], phases[c])
    last_k, _last_axi = hbm.port_profile(p, st_, np.array(addrs, dtype=np.int64), np.array(chans, dtype=np.int64),
                                         req, np.array(writes, dtype=np.int64), outstanding, port_bytes,
                                         np.array(hops, dtype=np.int64), lateral)
    land, _first, states = port_profile_stepped(p, phases, addrs, chans, req, writes, outstanding, port_bytes, hops,
                                                lateral)
    assert last_k == max(land)
    # the twin keeps stepping until the last request lands, so a refresh may have closed rows after the last access
    slots = [i for i in hbm.TRAFFIC_SLOTS if not hbm.CS_B_ROW <= i < hbm.CS_B_ROW + hbm.NB]
    for c in range(n_pc):
        for slot in slots:
            assert st_[c][slot] == states[c][slot], (c, slot)
