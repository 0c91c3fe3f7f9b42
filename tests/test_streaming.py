"""Streaming decode model: physical floors, frequency scaling, scaling toward the bandwidth floor, refusals of
impossible designs, memoization and the Engine interface."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from fpga.hbm import channel as hbm
from fpga.streaming.design import DesignError, load_design
from fpga.streaming.engine import DeadlockError, StreamingEngine, run_program, simulate_token, validate_design
from fpga.streaming.program import compile_token
from hwmodel.engine import Engine, Phase
from hwmodel.errors import HwmodelError
from hwmodel.specs import library
from tests.streaming_gen import small_board, small_design, small_llm


def _floors_hold(res, board, design=None, llm=None, ctx=0) -> None:  # type: ignore[no-untyped-def]
    assert res.seconds >= res.hbm_bytes / board.hbm.peak_bw_bytes_per_s
    if design is not None:  # the floor from the operator graph, not from the program's own counts
        from fpga.streaming.lowering import quant_of
        from hwmodel.graph import decode

        g = decode(llm, quant_of(design), ctx)
        b = g.bytes
        per_token = b.weights + b.metadata + b.bias + b.kv_read + b.kv_write  # norm gains stay on chip
        assert res.seconds >= per_token / board.hbm.peak_bw_bytes_per_s
        mac_ops = {"qkv", "o_proj", "gate_up", "down", "attention", "lm_head"}
        mac_lanes = sum(e.lanes for e in design.engines if set(e.ops) & mac_ops)  # every MAC engine busy
        assert res.seconds >= g.macs / (mac_lanes * design.clock_hz)
    ch_peak = hbm.channel_peak_bytes_per_s(board)
    for c in res.channels:
        assert res.seconds >= (c["read_bytes"] + c["write_bytes"]) / ch_peak
    assert res.seconds >= res.macs / (res.lanes_macs_per_cycle * res.clock_hz)


@settings(max_examples=80)
@given(st.data())
def test_no_token_beats_its_physical_floors(data: st.DataObject) -> None:
    """max(bytes / peak HBM bandwidth, MACs / (lanes x clock)) bounds every simulated token from below."""
    llm = data.draw(small_llm(max_layers=3))
    board = data.draw(small_board())
    design = data.draw(small_design(board, llm))
    ctx = data.draw(st.integers(0, 60))
    try:
        prog = compile_token(design, board, llm, ctx)
        res = run_program(design, board, llm, prog, ctx, True)
    except DesignError:
        assume(False)
        raise
    _floors_hold(res, board, design, llm, ctx)
    assert (
        sum(
            res.engine_cycles["mac0" if "mac0" in res.engine_cycles else next(iter(res.engine_cycles))][k]
            for k in ("busy", "drain", "stall_in", "stall_mem", "stall_out", "done")
        )
        == res.cycles
    )


def test_draft_u280_latency_and_utilization() -> None:
    res = simulate_token("draft-u280", 512)
    board = library().board("u280")
    d = load_design("draft-u280")
    _floors_hold(res, board, d, d.llm_spec(), 512)
    assert 1.1e-3 < res.seconds < 2.5e-3
    assert 0.5 < res.hbm_utilization < 0.95
    assert res.engine_cycles["linear"]["stall_mem"] > 0  # the projections wait on HBM: memory-bound
    assert res.hbm_read_bytes >= 494e6


def test_more_lanes_and_ports_approach_the_bandwidth_floor() -> None:
    base = load_design("draft-u280")
    prev = None
    for ports, lanes in ((8, 512), (16, 1024), (24, 1536), (28, 2048)):
        d = base.with_engine("linear", ports=ports, lanes=lanes)
        res = simulate_token(d, 256)
        floor = res.hbm_bytes / res.peak_bw_bytes_per_s
        assert res.seconds >= floor
        if prev is not None:
            assert res.seconds < prev.seconds
            assert floor / res.seconds > prev.hbm_bytes / prev.peak_bw_bytes_per_s / prev.seconds
        prev = res


def test_clock_scaling_knee_512_vs_256_bit_ports() -> None:
    """Decode time falls with the clock only until the channels saturate: ~210 MHz for 512-bit ports; 256-bit
    ports keep scaling toward 450 MHz."""
    d512 = load_design("draft-u280")
    d256 = d512.with_engine("linear", port_width_bits=256).with_engine("attn", port_width_bits=256)
    t512 = {f: simulate_token(d512, 256, clock_hz=f * 1e6).seconds for f in (150, 200, 300, 450)}
    t256 = {f: simulate_token(d256, 256, clock_hz=f * 1e6).seconds for f in (150, 300, 450)}
    assert t512[150] / t512[200] > 1.25  # port-bound: nearly linear
    assert t512[300] / t512[450] < 1.06  # channel-bound: only the latency-bound parts still scale
    assert t256[150] / t256[300] > 1.8
    assert t256[300] / t256[450] > 1.3
    assert t256[450] >= t512[450] * 0.99


def test_fifo_depth_one_back_pressures_and_is_never_faster() -> None:
    d = load_design("draft-u280")
    deep = simulate_token(d, 64)
    shallow = simulate_token(dataclasses.replace(d, fifo_depth=1), 64)
    assert shallow.cycles >= deep.cycles
    assert sum(e["stall_out"] for e in shallow.engine_cycles.values()) > sum(
        e["stall_out"] for e in deep.engine_cycles.values()
    )


def test_decode_time_grows_with_context() -> None:
    eng = StreamingEngine("draft-u280")
    times = [eng.decode_s(c) for c in range(0, 4097, 1024)]
    assert all(a < b for a, b in zip(times, times[1:]))


def test_engine_interface_and_memoization() -> None:
    eng = StreamingEngine("draft-u280")
    assert isinstance(eng, Engine)
    a = eng.decode_s(100)
    assert eng.decode_s(100) == a and eng.memo_size == 1
    assert eng.ingest_s(1, 100) < a  # LM head and sampler skipped
    assert eng.ingest_s(3, 100) == pytest.approx(sum(eng.token(100 + i, False).seconds for i in range(3)))
    assert eng.prefill_s(3, 100) == pytest.approx(eng.ingest_s(2, 100) + eng.decode_s(102))
    assert eng.token(100).ctx == 100
    assert eng.power_w(Phase.DECODE) > eng.power_w(Phase.IDLE)


def test_builtin_designs_validate_and_flexllm_matches_public_configuration() -> None:
    for name in ("draft-u280", "draft-v80", "flexllm-u280-mem-opt-new", "flexllm-u280-mem-opt", "flexllm-draft-u280"):
        validate_design(load_design(name))
    f = load_design("flexllm-u280-mem-opt-new")
    lin = f.engine_of("qkv")
    assert (lin.lanes, lin.ports, lin.port_width_bits, f.weight_bits, f.clock_hz) == (2048, 16, 512, 4, 300e6)
    assert f.engine_of("attention") is lin  # K and V caches share the 16 weight ports


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda d: d.with_engine("attn", ports=5), "uses 33 HBM ports but board 'u280' has 32"),
        (lambda d: d.with_engine("linear", lanes=0), "lanes must be > 0"),
        (lambda d: dataclasses.replace(d, fifo_depth=0), "fifo_depth must be >= 1"),
        (lambda d: d.with_engine("attn", buffer_depth=0), "buffer_depth"),
        (lambda d: dataclasses.replace(d, llm="llama2-7b", weight_bits=16, kv_bits=16), "does not fit HBM"),
        (lambda d: d.with_engine("linear", lanes=40000), "DSP"),
        (lambda d: dataclasses.replace(d, clock_hz=600e6), "expected a kernel clock of board 'u280' in"),
        (lambda d: d.with_engine("vec", ops=("rope", "attn_add", "ffn_add")), "not mapped to any engine: silu_mul"),
    ],
)
def test_impossible_designs_are_refused(change, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(HwmodelError) as exc:
        validate_design(change(load_design("draft-u280")))
    assert message in str(exc.value)
    assert "\n" not in str(exc.value)


def test_context_beyond_reservation_and_deadlock_are_errors() -> None:
    with pytest.raises(DesignError, match="exceeds its KV-cache reservation"):
        simulate_token("draft-u280", 5000)
    d = load_design("draft-u280")
    # down and final_norm on one temporal engine, the residual add between them on another, FIFOs of one block
    engines = []
    for e in d.engines:
        ops = tuple(o for o in e.ops if o not in ("final_norm", "ffn_add"))
        if e.name == "linear":
            ops += ("final_norm",)
        if e.name == "sampler":
            ops += ("ffn_add",)
        engines.append(dataclasses.replace(e, ops=ops))
    bad = dataclasses.replace(d, engines=tuple(engines), fifo_depth=1)
    with pytest.raises(DeadlockError, match="'linear' at down"):
        simulate_token(bad, 0)


def test_design_toml_errors_name_file_and_field(tmp_path: Path) -> None:
    src = (Path(__file__).resolve().parent.parent / "fpga" / "designs" / "draft-u280.toml").read_text()
    bad = tmp_path / "bad.toml"
    bad.write_text(src.replace("lanes = 2048", "lanse = 2048"))
    with pytest.raises(HwmodelError, match=r"bad.toml: field 'engines\[0\].lanse'"):
        load_design(bad)
    with pytest.raises(HwmodelError, match="unknown streaming design 'nope'"):
        load_design("nope")


def test_cli_decode_profile_and_errors(tmp_path: Path) -> None:
    import json

    from click.testing import CliRunner

    from hwmodel.cli import main

    run = CliRunner().invoke
    r = run(main, ["fpga", "decode", "--design", "draft-u280", "--ctx", "64", "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["ctx"] == 64 and data["seconds"] == pytest.approx(data["cycles"] / 300e6)
    assert 0 < data["hbm_utilization"] < 1
    r = run(
        main, ["fpga", "decode", "--design", "draft-u280", "--ctx-range", "0:256:128", "--freq-mhz", "200", "--json"]
    )
    rows = json.loads(r.stdout)
    assert [row["ctx"] for row in rows] == [0, 128, 256] and all(row["clock_mhz"] == 200 for row in rows)
    r = run(
        main,
        [
            "fpga",
            "profile-port",
            "--sizes",
            "64,4096",
            "--outstanding",
            "64",
            "--pattern",
            "random",
            "--total-bytes",
            "262144",
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    rnd = {row["req_bytes"]: row["bw_bytes_per_s"] for row in json.loads(r.stdout)}
    assert rnd[64] < 0.5 * rnd[4096]  # random small requests are activation-bound
    r = run(main, ["fpga", "decode", "--design", "draft-u280", "--ctx", "9999"])
    assert (
        r.exit_code == 2 and "Error: --ctx: expected a context of at most 4,096 tokens (design 'draft-u280'" in r.output
    )
    r = run(main, ["reproduce", "--out", str(tmp_path), "streaming"])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "streaming" / "clock_sweep.csv").exists()


def _same_program(a, b) -> bool:  # type: ignore[no-untyped-def]
    import numpy as np

    return all(
        np.array_equal(x, y) if isinstance(x, np.ndarray) else x == y
        for x, y in ((getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    )


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_a_token_compiled_on_its_contexts_memoized_layer_equals_one_compiled_alone(data: st.DataObject) -> None:
    """Tokens at one context share their layer (fpga/streaming/templates.py, _layer_for): an ingested token compiled right after
    the decoded one (and the other way round) is the program compiled from scratch."""
    from fpga.streaming.templates import _layer_for

    llm = data.draw(small_llm())
    board = data.draw(small_board())
    design = data.draw(small_design(board, llm))
    ctx = data.draw(st.integers(0, 60))
    first = data.draw(st.booleans())
    try:
        compile_token(design, board, llm, ctx, first)
    except DesignError as exc:
        assume("buffer_depth" not in str(exc))
        raise
    after = compile_token(design, board, llm, ctx, not first)
    _layer_for.cache_clear()
    assert _same_program(after, compile_token(design, board, llm, ctx, not first))
