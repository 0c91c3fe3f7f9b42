"""The host-speed shortcuts of the streaming compiler and engine give what the plain formulas give: the per-operator
tables in one Numba pass and the KV-head copies of attention's requests."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fpga.hbm import channel as hbm
from fpga.streaming.design import ALL_OPS, DesignError
from fpga.streaming.engine import _op_tables, run_kernel
from fpga.streaming.program import compile_token
from fpga.streaming.templates import _copy_head
from tests.streaming_gen import small_board, small_design, small_llm


def _op_tables_numpy(prog, start):  # type: ignore[no-untyped-def]
    """The formula _op_sums replaces: issue cycles per operator; per instance (a run of one operator in one layer)
    its last result minus its first start."""
    busy = np.bincount(prog.t_op, weights=prog.t_cyc, minlength=len(ALL_OPS))
    done = start + prog.t_cyc + prog.e_lat[prog.t_eng]
    cut = np.ones(prog.n_blocks, dtype=bool)
    cut[1:] = (prog.t_op[1:] != prog.t_op[:-1]) | (prog.t_layer[1:] != prog.t_layer[:-1])
    firsts = np.nonzero(cut)[0]
    spans = np.maximum.reduceat(done, firsts) - np.minimum.reduceat(start, firsts)
    span = np.bincount(prog.t_op[firsts], weights=spans, minlength=len(ALL_OPS))
    ops = [op for i, op in enumerate(ALL_OPS) if busy[i] > 0]
    return ({op: int(busy[ALL_OPS.index(op)]) for op in ops}, {op: int(span[ALL_OPS.index(op)]) for op in ops})


@settings(max_examples=15, deadline=None)
@given(st.data())
def test_operator_tables_in_one_pass_equal_the_numpy_formula(data: st.DataObject) -> None:
    llm = data.draw(small_llm(max_layers=2))
    board = data.draw(small_board())
    design = data.draw(small_design(board, llm))
    ctx = data.draw(st.integers(0, 40))
    try:
        prog = compile_token(design, board, llm, ctx)
    except DesignError:  # a drawn design the compiler refuses says nothing about the tables
        return
    out = run_kernel(hbm.hbm_params(board, design.clock_hz, hbm.token_refresh_phase(board, ctx)), prog)
    if out[0]:  # deadlock: no start times to sum
        return
    assert _op_tables(prog, out[2]) == _op_tables_numpy(prog, out[2])


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(0, 12),
    lo=st.integers(0, 12),
    m=st.integers(0, 6),
    extra=st.integers(1, 5),
    blocks=st.integers(1, 1000),
    stride=st.integers(1, 1 << 20),
    seed=st.integers(0, 1000),
)
def test_kv_head_copies_equal_the_tile_formula(
    n: int, lo: int, m: int, extra: int, blocks: int, stride: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    rows = max(n, lo + m)
    reqs = rng.integers(0, 1 << 30, size=(rows, 6)).astype(np.int64)
    reqs[:, 2] = rng.integers(0, 2, size=rows)  # reads and writes
    r0, r1 = lo, lo + m
    one = reqs[r0:r1]
    rep = np.tile(one, (extra, 1))
    kk = np.repeat(np.arange(1, extra + 1), len(one))
    rep[:, 3] += np.where(rep[:, 2] == 0, kk * blocks, 0)
    rep[:, 1] += kk * stride
    assert np.array_equal(_copy_head(reqs, r0, r1, extra, blocks, stride), np.concatenate([reqs, rep]))
