"""The fast event-driven engine equals the cycle-stepped reference exactly: cycles, every block's start cycle, every
request's issue / first-data / end / landing cycle, every engine counter and every channel counter, on 200+
generated small designs (engine mappings, lanes, ports, widths, bursts, buffers, FIFOs, precisions, clocks, boards
with short refresh intervals and small rows, contexts)."""

from __future__ import annotations

import numpy as np
from hypothesis import assume, event, given, settings
from hypothesis import strategies as st

from fpga.hbm import channel as hbm
from fpga.streaming.design import DesignError
from fpga.streaming.engine import class_channels, run_kernel
from fpga.streaming.program import compile_token
from fpga.streaming.reference import run_reference
from tests.streaming_gen import small_board, small_design, small_llm

# the open rows, the closed-at cycle and the refresh-window cache describe the channel after its last access; the
# reference keeps stepping past it (refresh closes its banks), so the traffic counters, bus and bank / bank-group
# timers are compared
CHANNEL_SLOTS = [i for i in hbm.TRAFFIC_SLOTS if not hbm.CS_B_ROW <= i < hbm.CS_B_ROW + hbm.NB]


def assert_equivalent(
    design,
    board,
    llm,
    ctx: int,
    with_lm_head: bool = True,  # type: ignore[no-untyped-def]
    refresh_phase: int = 0,
) -> int:
    prog = compile_token(design, board, llm, ctx, with_lm_head, per_port=True)
    p = hbm.hbm_params(board, design.clock_hz, refresh_phase)
    status, total, start, cnt, issue, land, first, end, st_g, _sweeps = run_kernel(p, prog)
    ref = run_reference([int(x) for x in p], prog)
    assert status == ref.status  # both finish, or both find the design deadlocks
    event("deadlock (both agree)" if status else "finished")
    if status:
        return -1
    event("ports collapsed into classes" if prog.n_groups < prog.n_ports else "no identical ports")
    event("refresh deferred a burst" if st_g[:, hbm.CS_REFRESH_DEFERS].sum() else "no refresh deferral")
    assert total == ref.cycles
    g_chan = class_channels(prog)[0]
    assert np.array_equal(start, ref.start)
    assert np.array_equal(cnt, ref.counters)
    assert (cnt.sum(axis=1) == total).all()  # busy + drain + stalls + done = the token's cycles, per engine
    for q in range(prog.n_ports):
        g = prog.port_group[q]
        sl = slice(prog.g_ptr[g], prog.g_ptr[g + 1])
        for fast, slow in ((issue, ref.issue), (land, ref.land), (first, ref.first), (end, ref.end)):
            assert np.array_equal(fast[sl], slow[q])
        assert np.array_equal(st_g[g_chan[g]][CHANNEL_SLOTS], ref.channel[q][CHANNEL_SLOTS])
    return int(total)


def assert_drawn_equivalent(data: st.DataObject, design, board, llm, max_ctx: int = 40) -> None:  # type: ignore[no-untyped-def]
    """Draw a context, a head and a refresh phase for a drawn design and check both engines agree (designs whose
    port buffer cannot hold one block are refused at compile time: not a case)."""
    ctx = data.draw(st.integers(0, max_ctx))
    try:
        compile_token(design, board, llm, ctx)
    except DesignError as exc:
        assume("buffer_depth" not in str(exc))
        raise
    assert_equivalent(
        design, board, llm, ctx, with_lm_head=data.draw(st.booleans()), refresh_phase=data.draw(st.integers(0, 4000))
    )


@settings(max_examples=200)
@given(st.data())
def test_fast_engine_equals_cycle_stepped_reference(data: st.DataObject) -> None:
    llm = data.draw(small_llm())
    board = data.draw(small_board())
    assert_drawn_equivalent(data, data.draw(small_design(board, llm)), board, llm)
