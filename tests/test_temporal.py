"""Temporal execution (fpga/streaming/temporal.py): the fast engine equals the cycle-stepped reference on generated
temporal designs (one unit and several), a temporal token is never faster than the same design's dataflow token,
the two are equal where the phases never overlap anyway, the style moves no byte and no MAC, and a bad value is
one clear line."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from fpga.hbm import channel as hbm
from fpga.streaming.design import ALL_OPS, DesignError, EngineSpec, StreamingDesign, load_design
from fpga.streaming.engine import run_kernel
from fpga.streaming.program import compile_token
from fpga.streaming.temporal import phases
from hwmodel.errors import SpecError
from tests.streaming_gen import small_board, small_design, small_llm, small_unit_design, small_unit_llm
from tests.test_streaming_equivalence import assert_drawn_equivalent

ROOT = Path(__file__).resolve().parents[1]


@st.composite
def temporal_fields(draw):  # type: ignore[no-untyped-def]
    return {"phase_barrier_cycles": draw(st.integers(0, 6)), "phase_prefetch_blocks": draw(st.integers(0, 3))}


def fast_cycles(design, board, llm, ctx: int, with_lm_head: bool = True):  # type: ignore[no-untyped-def]
    prog = compile_token(design, board, llm, ctx, with_lm_head)
    out = run_kernel(hbm.hbm_params(board, design.clock_hz, 0), prog)
    return prog, out


def both_styles(dataflow, temporal, board, llm, ctx: int):  # type: ignore[no-untyped-def]
    """(program, fast-engine output) of the dataflow design and of its temporal twin (designs whose port buffer
    cannot hold one block are refused at compile time: not a case)."""
    try:
        a = fast_cycles(dataflow, board, llm, ctx)
    except DesignError as exc:
        assume("buffer_depth" not in str(exc))
        raise
    return a, fast_cycles(temporal, board, llm, ctx)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_fast_engine_equals_reference_on_temporal_designs(data: st.DataObject) -> None:
    llm = data.draw(small_llm())
    board = data.draw(small_board())
    d = data.draw(small_design(board, llm))
    d = dataclasses.replace(d, execution="temporal", **data.draw(temporal_fields()))
    assert_drawn_equivalent(data, d, board, llm, max_ctx=12)
    assert fast_cycles(d, board, llm, data.draw(st.integers(0, 12)))[1][0] == 0  # never deadlocks


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_fast_engine_equals_reference_on_temporal_units(data: st.DataObject) -> None:
    split = data.draw(st.sampled_from(["heads", "layers"]))
    llm = data.draw(small_unit_llm(split, 2))
    board = data.draw(small_board())
    d = data.draw(small_unit_design(board, llm, split, 2))
    styles = data.draw(st.sampled_from([("temporal", ""), ("", "temporal"), ("temporal", "temporal")]))
    units = tuple(dataclasses.replace(u, execution=s) for u, s in zip(d.units, styles, strict=True))
    d = dataclasses.replace(d, units=units, **data.draw(temporal_fields()))
    event(f"units {styles}")
    assert_drawn_equivalent(data, d, board, llm, max_ctx=16)
    if "" not in styles:  # every dependency of a temporal unit's blocks points backwards: no deadlock
        prog, out = fast_cycles(d, board, llm, data.draw(st.integers(0, 16)))
        assert out[0] == 0


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_temporal_is_never_faster_and_moves_the_same_bytes_and_macs(data: st.DataObject) -> None:
    llm = data.draw(small_llm())
    board = data.draw(small_board())
    # FIFOs deep enough that dataflow never back-pressures: the temporal program then only adds waits to it (with
    # shallow FIFOs the dataflow token may wait for FIFO space that the temporal hand-over buffers never lack)
    d = dataclasses.replace(data.draw(small_design(board, llm)), fifo_depth=1 << 20)
    t = dataclasses.replace(d, execution="temporal", **data.draw(temporal_fields()))
    ctx = data.draw(st.integers(0, 24))
    (p_d, out_d), (p_t, out_t) = both_styles(d, t, board, llm, ctx)
    assert out_t[0] == 0  # a temporal design never deadlocks (its dependencies all point backwards)
    assume(out_d[0] == 0)
    assert out_t[1] >= out_d[1]
    assert p_t.macs == p_d.macs
    assert p_t.param_bytes == p_d.param_bytes and p_t.req_bytes == p_d.req_bytes
    assert np.array_equal(p_t.r_table[:, :3], p_d.r_table[:, :3])  # same requests: bytes, addresses, direction
    st_d, st_t = out_d[8], out_t[8]
    for slot in (hbm.CS_RD_BYTES, hbm.CS_WR_BYTES, hbm.CS_REQS):
        assert st_t[:, slot].sum() == st_d[:, slot].sum()
    # every phase starts after the previous one's last result plus the barrier
    start = out_t[2]
    done = start + p_t.t_cyc + p_t.e_lat[p_t.t_eng]
    ph = phases(t, p_t)
    for k in range(1, len(ph.first)):
        blocks = np.nonzero(ph.of_block == k)[0]
        prev = np.nonzero(ph.of_block == k - 1)[0]
        assert start[blocks].min() >= done[prev].max() + t.phase_barrier_cycles


def one_engine(board, llm, buffer_depth: int) -> StreamingDesign:  # type: ignore[no-untyped-def]
    """Every operator on one engine with no pipeline latency: each phase already waits for the previous one's
    last result, so temporal execution changes nothing."""
    e = EngineSpec(
        name="all", ops=ALL_OPS, lanes=16, ports=2, burst_bytes=128, buffer_depth=buffer_depth,
        pipeline_latency_cycles=0,
    )  # fmt: skip
    return StreamingDesign(
        name="one", board=board.name, llm=llm.name, clock_hz=200e6, weight_bits=8, act_bits=8, kv_bits=8,
        vector_chunk=8, max_ctx=64, engines=(e,),
    )  # fmt: skip


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_llm(), small_board(), st.integers(1, 4), st.integers(0, 20))
def test_temporal_equals_dataflow_where_phases_never_overlap(llm, board, depth: int, ctx: int) -> None:  # type: ignore[no-untyped-def]
    d = one_engine(board, llm, depth)
    t = dataclasses.replace(d, execution="temporal", phase_barrier_cycles=0, phase_prefetch_blocks=depth)
    (_p, out_d), (_q, out_t) = both_styles(d, t, board, llm, ctx)
    assert out_t[1] == out_d[1]
    assert np.array_equal(out_t[2], out_d[2])  # every block starts at the same cycle
    # a barrier cost does cost time
    slower = dataclasses.replace(t, phase_barrier_cycles=5)
    assert fast_cycles(slower, board, llm, ctx)[1][1] > out_d[1]


def test_dataflow_program_is_untouched() -> None:
    """The default style leaves the program as it was: no extra dependency columns, the same arrays."""
    d = load_design("flexllm-u280")
    assert d.execution == "dataflow"
    board, llm = d.board_spec(), d.llm_spec()
    a = compile_token(d, board, llm, 8)
    b = compile_token(dataclasses.replace(d, phase_barrier_cycles=99, phase_prefetch_blocks=7), board, llm, 8)
    assert a.t_dep.shape[1] == 3
    assert np.array_equal(a.t_dep, b.t_dep) and np.array_equal(a.r_table, b.r_table)


def _write(tmp_path: Path, text: str) -> Path:
    src = (ROOT / "fpga" / "designs" / "flexllm-u280-mem-opt-new.toml").read_text()
    p = tmp_path / "bad.toml"
    head, _sep, rest = src.partition("[[engines]]")
    p.write_text(head + text + "\n[[engines]]" + rest)
    return p


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('execution = "sequential"', "execution"),
        ("phase_barrier_cycles = -1", "phase_barrier_cycles"),
        ('phase_prefetch_blocks = "all"', "phase_prefetch_blocks"),
    ],
)
def test_bad_value_is_one_clear_line(tmp_path: Path, text: str, field: str) -> None:
    p = _write(tmp_path, text)
    with pytest.raises(SpecError) as exc:
        load_design(p)
    msg = str(exc.value)
    assert "\n" not in msg and str(p) in msg and field in msg


def test_bad_unit_execution_is_one_clear_line(tmp_path: Path) -> None:
    src = (ROOT / "examples" / "designs" / "two-unit-ring-u280.toml").read_text()
    head, sep, rest = src.partition("[[units]]")
    p = tmp_path / "bad-units.toml"
    p.write_text(head + sep + '\nexecution = "pipelined"' + rest)
    with pytest.raises(SpecError) as exc:
        load_design(p)
    msg = str(exc.value)
    assert "\n" not in msg and str(p) in msg and "execution" in msg


def test_sensitivity_varies_the_temporal_fields_of_a_temporal_design_only() -> None:
    from hwmodel.studies.sensitivity import knobs

    d = load_design("flexllm-u280")
    assert not {k.key for k in knobs(d)} & {"phase_barrier_cycles", "phase_prefetch_blocks"}
    ks = {k.key: k for k in knobs(dataclasses.replace(d, execution="temporal"))}
    assert (ks["phase_barrier_cycles"].low, ks["phase_barrier_cycles"].high) == (1, 4)
    assert (ks["phase_prefetch_blocks"].low, ks["phase_prefetch_blocks"].high) == (0, 1)
    assert ks["phase_prefetch_blocks"].status == "default"


def test_prefetching_more_of_a_phase_never_slows_it_and_its_buffer_bounds_it() -> None:
    """One engine, no pipeline latency, short operand passes: a phase's loads not prefetched show as waits; each
    prefetched block removes some, and prefetching a whole port buffer is the dataflow token."""
    from hwmodel.specs import library

    board = library().board("u280")
    base = library().llm("qwen2.5-0.5b")
    llm = dataclasses.replace(base, layers=2, hidden=64, heads=2, kv_heads=1, head_dim=16, intermediate=96, vocab=100)
    d = one_engine(board, llm, 4)
    dataflow = fast_cycles(d, board, llm, 10)[1][1]
    t = dataclasses.replace(d, execution="temporal", phase_barrier_cycles=0)
    by_depth = [fast_cycles(dataclasses.replace(t, phase_prefetch_blocks=n), board, llm, 10)[1][1] for n in range(6)]
    assert by_depth[0] > by_depth[1] > by_depth[2] >= by_depth[4] == by_depth[5] == dataflow


def test_a_sweep_point_can_choose_the_execution_style() -> None:
    from fpga.streaming.engine import simulate_token
    from hwmodel.dse.streaming_eval import EVALUATOR, build_design

    p = EVALUATOR.complete({"design": "flexllm-u280", "ctx": 16, "execution": "temporal", "phase_prefetch_blocks": 1})
    d = build_design(p)
    assert (d.execution, d.phase_prefetch_blocks) == ("temporal", 1)
    row = EVALUATOR.run(p)
    assert row["cycles"] == simulate_token(d, 16).cycles > simulate_token(load_design("flexllm-u280"), 16).cycles


def test_decode_cli_prints_the_phases_and_their_json(tmp_path: Path) -> None:
    import json

    from click.testing import CliRunner

    from hwmodel.cli import main

    design = str(_write(tmp_path, 'execution = "temporal"'))
    args = ["fpga", "decode", "--design", design, "--ctx", "4"]
    runner = CliRunner()
    out = runner.invoke(main, [*args, "--no-detail"])
    assert out.exit_code == 0, out.output
    assert "execution: temporal phases, barrier 2 cycles" in out.output
    js = runner.invoke(main, [*args, "--json"])
    assert js.exit_code == 0, js.output
    doc = json.loads(js.stdout)
    ex = doc["execution"]
    assert (ex["style"], ex["phase_barrier_cycles"], ex["phase_prefetch_blocks"]) == ("temporal", 2, 0)
    assert ex["phase_cycles"] == sum(doc["op_span_cycles"].values())
    assert ex["phase_cycles"] + ex["between_phases_cycles"] == doc["cycles"]
    n_phases = 1 + 11 * load_design(design).llm_spec().layers + 3  # embed, the layers' operators, the tail
    assert ex["between_phases_cycles"] >= (n_phases - 1) * 2  # a 2-cycle barrier between each two
