"""Placement (fpga/streaming/placement.py): operators on the host and parameters resident on chip. A placed design's program
moves exactly the graph's bytes less what the placement takes off HBM (integers, no tolerance, generated shapes),
the fast engine equals the cycle-stepped reference on placed designs, the simulated token never beats the design's
floor, and `hwmodel bounds --design` prints the floor `hwmodel fpga decode` prints."""

from __future__ import annotations

import dataclasses
import json

import pytest
from click.testing import CliRunner
from graph_gen import llm_shapes
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from fpga.streaming.design import DesignError, check_structure, load_design
from fpga.streaming.engine import simulate_token
from fpga.streaming.placement import (
    HOST_PLACEABLE,
    design_floor,
    device_bytes,
    onchip_param_bytes,
)
from fpga.streaming.program import compile_token
from fpga.streaming.resources import estimate
from tests.streaming_gen import small_board, small_design, small_llm
from tests.test_streaming_equivalence import assert_drawn_equivalent

#: host placements that are legal (each op with what it needs)
PLACEMENTS = [
    (),
    ("embed",),
    ("argmax",),
    ("lm_head", "argmax"),
    ("final_norm", "lm_head", "argmax"),
    ("embed", "final_norm", "lm_head", "argmax"),
]
ONCHIP = [(), ("bias",), ("metadata",), ("bias", "metadata")]


def placed(design, host_ops=(), onchip=()):  # type: ignore[no-untyped-def]
    """``design`` with ``host_ops`` taken off its engines and placed on the host, ``onchip`` classes resident."""
    engines = tuple(dataclasses.replace(e, ops=tuple(op for op in e.ops if op not in host_ops)) for e in design.engines)
    return dataclasses.replace(design, engines=engines, host_ops=tuple(host_ops), onchip_params=tuple(onchip))


def violations(prog, want: dict[str, int]) -> list[str]:  # type: ignore[no-untyped-def]
    out = []
    led = prog.param_bytes
    streamed = want["weights"] + want["metadata"] + want["bias"]
    if prog.req_bytes["param_read"] != streamed + led["padding"]:
        out.append(f"parameter reads {prog.req_bytes['param_read']} != placed graph {streamed} + padding")
    if led["onchip"] != want["onchip"]:
        out.append(f"on-chip ledger {led['onchip']} != graph {want['onchip']}")
    for cls in ("kv_read", "kv_write"):
        if prog.req_bytes[cls] != want[cls]:
            out.append(f"{cls}: requests {prog.req_bytes[cls]} != graph {want[cls]}")
    if prog.macs != want["macs"]:
        out.append(f"MACs {prog.macs} != device graph {want['macs']}")
    return out


@settings(max_examples=60, deadline=None)
@given(
    llm_shapes(),
    st.sampled_from(PLACEMENTS),
    st.sampled_from(ONCHIP),
    st.integers(0, 300),
    st.booleans(),
    st.sampled_from(["draft-u280", "flexllm-u280"]),
    st.sampled_from([0, 8]),
)
def test_placed_programs_conserve_the_placed_graph(m, host, onchip, ctx, head, name, group) -> None:  # type: ignore[no-untyped-def]
    d = placed(dataclasses.replace(load_design(name), quant_group_size=group), host, onchip)
    prog = compile_token(d, d.board_spec(), m, ctx, head)
    assert violations(prog, device_bytes(d, m, ctx, head)) == []


def test_placement_takes_bytes_off_hbm_and_puts_them_on_chip() -> None:
    d = load_design("draft-u280")
    m = d.llm_spec()
    base = compile_token(d, d.board_spec(), m, 64).req_bytes["param_read"]
    p = placed(d, ("embed", "final_norm", "lm_head", "argmax"), ("bias", "metadata"))
    got = compile_token(p, p.board_spec(), m, 64).req_bytes["param_read"]
    full, dev = device_bytes(d, m, 64), device_bytes(p, m, 64)
    assert dev["onchip"] > 0 and dev["weights"] < full["weights"]  # the LM head and the embedding row left
    assert got < base
    assert estimate(p).blocks["onchip_params"]["uram"] * 36_864 >= onchip_param_bytes(p, m) > 0
    assert "onchip_params" not in estimate(d).blocks


def test_head_on_the_host_ends_the_token_like_an_ingest() -> None:
    """With the final norm, LM head and sampling on the host, the FPGA's token is the ingest token, cycle for
    cycle; the final norm and the LM head on the device each add time (sampling on the host or on the device ends
    the token within a pipeline of the LM head's last block)."""
    d = load_design("draft-u280")
    ingest = simulate_token(d, 128, with_lm_head=False).cycles
    times = [
        simulate_token(placed(d, host), 128).cycles
        for host in (("final_norm", "lm_head", "argmax"), ("lm_head", "argmax"), ("argmax",), ())
    ]
    assert times[0] == ingest
    assert times[0] < times[1] < min(times[2:]) and abs(times[2] - times[3]) < 100


@settings(max_examples=25, deadline=None)
@given(st.data())
def test_fast_engine_equals_reference_on_placed_designs(data: st.DataObject) -> None:
    llm = data.draw(small_llm())
    board = data.draw(small_board())
    design = placed(
        data.draw(small_design(board, llm)), data.draw(st.sampled_from(PLACEMENTS)), data.draw(st.sampled_from(ONCHIP))
    )
    assume(all(e.ops for e in design.engines))
    assert_drawn_equivalent(data, design, board, llm, max_ctx=30)


@pytest.mark.parametrize("host", PLACEMENTS)
def test_a_token_never_beats_its_design_floor(host) -> None:  # type: ignore[no-untyped-def]
    d = placed(load_design("draft-u280"), host, ("bias",))
    for ctx in (0, 1000):
        assert simulate_token(d, ctx).seconds >= design_floor(d, ctx).floor_s


@pytest.mark.parametrize(
    "host, onchip, why",
    [
        (("qkv",), (), "cannot run on the host"),
        (("lm_head",), (), "needs 'argmax' on the host"),
        (("final_norm", "argmax"), (), "needs 'lm_head'"),
        ((), ("weights",), "not a parameter class"),
    ],
)
def test_bad_placement_is_one_clear_line(host, onchip, why) -> None:  # type: ignore[no-untyped-def]
    d = dataclasses.replace(load_design("draft-u280"), host_ops=host, onchip_params=onchip)
    with pytest.raises(DesignError, match=why):
        check_structure(d)


def test_a_host_op_still_mapped_to_an_engine_is_refused() -> None:
    d = dataclasses.replace(load_design("draft-u280"), host_ops=("embed",))
    with pytest.raises(DesignError, match="also mapped to engine 'linear'"):
        check_structure(d)
    assert set(HOST_PLACEABLE) == {"embed", "argmax", "lm_head", "final_norm"}


def test_bounds_design_floor_equals_the_floor_fpga_decode_prints() -> None:
    from hwmodel.cli import main

    r = CliRunner()
    for extra in ([], ["--no-lm-head"], ["--ingest"]):
        b = r.invoke(main, ["bounds", "--design", "draft-u280", "--ctx", "512", "--json", *extra])
        assert b.exit_code == 0, b.output
        f = r.invoke(main, ["fpga", "decode", "--design", "draft-u280", "--ctx", "512", "--json", *extra])
        assert f.exit_code == 0, f.output
        bj, fj = json.loads(b.stdout), json.loads(f.stdout)
        assert bj["design_floor"]["floor_s"] == fj["design_floor_s"] > 0
        assert fj["seconds"] >= fj["design_floor_s"]
    full = json.loads(r.invoke(main, ["bounds", "--design", "draft-u280", "--ctx", "512", "--json"]).stdout)
    ing = json.loads(r.invoke(main, ["bounds", "--design", "draft-u280", "--ctx", "512", "--json", "--ingest"]).stdout)
    assert ing["design_floor"]["floor_s"] < full["design_floor"]["floor_s"]
    text = r.invoke(main, ["bounds", "--design", "draft-u280", "--ctx", "512"])
    assert text.exit_code == 0 and "design floor" in text.output


def test_the_worked_example_design_loads_decodes_and_respects_its_floor() -> None:
    """examples/designs/placed-shared-u280.toml (docs/model-your-design.md): head on the host, biases and scales on
    chip, attention on four of the linear engine's channels. It validates against the board, decodes above its
    own floor, and giving attention four channels of its own (the design it was not) is no slower."""
    from pathlib import Path

    from fpga.streaming.engine import validate_design

    d = load_design(Path(__file__).resolve().parents[1] / "examples/designs/placed-shared-u280.toml")
    validate_design(d)
    tok = simulate_token(d, 256)
    assert tok.seconds >= design_floor(d, 256).floor_s
    from fpga.streaming.engine import StreamingEngine

    assert StreamingEngine(d).host_link_bytes == {"to_device_bytes": 896 * 2, "to_host_bytes": 896 * 2}
    own = simulate_token(d.with_engine("attn", channels=(28, 29, 30, 31)), 256)
    assert own.cycles <= tok.cycles and own.hbm_bytes == tok.hbm_bytes


def test_bounds_without_a_point_or_with_a_mismatched_design_is_one_line() -> None:
    from hwmodel.cli import main

    r = CliRunner()
    out = r.invoke(main, ["bounds"])
    assert out.exit_code != 0 and "give --llm and --device, or --design" in out.output
    out = r.invoke(main, ["bounds", "--design", "draft-u280", "--llm", "llama2-7b"])
    assert out.exit_code != 0 and "runs qwen2.5-0.5b on u280" in out.output
