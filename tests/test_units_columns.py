"""split = "columns" (fpga/streaming/columns.py, units.py; issue 33 item 1).

* the fast engine equals the cycle-stepped reference on generated column-split designs;
* a column unit's graph holds exactly 1/N of every linear's rows (bytes, MACs), and the units together the whole
  graph (the conservation test of every split kind is in tests/test_units.py);
* with an infinitely fast link two symmetric column units decode exactly like one of them alone (its partners' slices
  land when its own do), and with a finite link exactly like one of them whose receive blocks wait the link's
  serialisation + latency after the chunk they gather: the difference is the all-gather on the critical path;
* a head count the units cannot divide is one clear line.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from fpga.streaming.columns import RX, column_graph
from fpga.streaming.design import DesignError
from fpga.streaming.lowering import _graph0, quant_of
from fpga.streaming.program import compile_token
from fpga.streaming.units import _cums, unit_design, unit_llm
from hwmodel.graph import build_graph
from hwmodel.specs import library
from tests.streaming_gen import small_board, small_unit_design, small_unit_llm
from tests.test_streaming_equivalence import assert_drawn_equivalent
from tests.test_units import cycles, two_symmetric_units


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_fast_engine_equals_reference_on_column_designs(data: st.DataObject) -> None:
    n = data.draw(st.sampled_from([2, 2, 3]))
    llm = data.draw(small_unit_llm("columns", n))
    board = data.draw(small_board())
    design = data.draw(small_unit_design(board, llm, "columns", n))
    event(f"{n} units, {design.links[0].kind}")
    assert_drawn_equivalent(data, design, board, llm, max_ctx=20)


@settings(max_examples=20, deadline=None)
@given(st.sampled_from([2, 3, 4]), st.sampled_from([1, 2]), st.sampled_from([8, 24]), st.sampled_from([4, 8, 16]))
def test_a_column_unit_holds_one_nth_of_every_linear(n: int, group: int, width: int, wbits: int) -> None:
    base = library().llm("qwen2.5-0.5b")
    llm = dataclasses.replace(
        base, layers=1, hidden=n * width, heads=n * group, kv_heads=n, head_dim=8, intermediate=n * 12, vocab=64
    )
    d = dataclasses.replace(two_symmetric_units(512, 4)[0], split="columns", weight_bits=wbits)
    q = quant_of(d)
    whole = {o.name: o for o in build_graph(llm, q, "decode", 1, 0).layers[0] if o.kind == "linear"}
    share = dataclasses.replace(llm, heads=group, kv_heads=1, intermediate=12)
    unit = {o.name: o for o in column_graph(_graph0(share, q), n).layers[0] if o.kind == "linear"}
    assert set(unit) == set(whole)
    for name, o in whole.items():
        u = unit[name]
        assert (u.in_features, u.out_features * n) == (o.in_features, o.out_features), name  # 1/n of the rows
        assert u.macs * n == o.macs and u.bytes.weights * n == o.bytes.weights, name
        assert u.bytes.metadata * n == o.bytes.metadata and u.bytes.bias * n == o.bytes.bias, name


def column_pair(width_bits: int, latency_cycles: int):  # type: ignore[no-untyped-def]
    d, llm = two_symmetric_units(width_bits, latency_cycles)
    return dataclasses.replace(d, split="columns"), llm


def test_two_column_units_differ_from_one_by_exactly_the_all_gathers() -> None:
    board = library().board("u280")
    fast, llm = column_pair(width_bits=1 << 16, latency_cycles=0)
    alone, share = unit_design(fast, 0), unit_llm(fast, llm, 0)
    half = compile_token(alone, board, share, 16)
    base = cycles(half, alone, board)
    assert cycles(compile_token(fast, board, llm, 16), fast, board) == base  # an infinitely fast link: no extra
    # a finite link: each receive block waits for its chunk's serialisation (fp32, 1024 bits per kernel cycle)
    # plus the link's latency after the partner's producer (by symmetry: the unit's own) finished the chunk
    lat = 200
    slow, _ = column_pair(width_bits=1024, latency_cycles=lat)
    rx = [i for i, e in enumerate(alone.engines) if e.name == RX][0]
    recv = half.e_list[half.e_ptr[rx] : half.e_ptr[rx + 1]]
    sizes = []  # elements of each receive block's chunk, in rx order: per layer, per all-gather, its chunks
    for _layer in range(share.layers):
        for own in _cums(alone, board, share)["gathers"]:
            sizes += [c - (own[k - 1] if k else 0) for k, c in enumerate(own)]  # one remote slice (two units)
    assert len(sizes) == len(recv)
    off = half.t_off.copy()
    for q, elems in zip(recv, sizes):
        p = half.t_dep[q, 0]  # the unit's own chunk this receive keeps in step with
        ser = -(-elems * 32 // 1024)
        off[q, 0] = max(off[q, 0], half.t_cyc[p] + half.e_lat[half.t_eng[p]] + ser + lat)
    predicted = cycles(dataclasses.replace(half, t_off=off), alone, board)
    assert cycles(compile_token(slow, board, llm, 16), slow, board) == predicted > base


def test_heads_the_units_cannot_divide_are_one_clear_line() -> None:
    d, llm = column_pair(512, 4)
    with pytest.raises(DesignError, match=r"split = 'columns' over 2 units needs .*kv_heads \(3\) divisible by 2"):
        compile_token(d, library().board("u280"), dataclasses.replace(llm, kv_heads=3, heads=6), 4)
