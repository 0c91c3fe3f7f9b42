"""Compute units, splits and links (fpga/streaming/units.py, issue 33 items 1-2).

* the fast engine equals the cycle-stepped reference on generated multi-unit designs (every split, every link kind,
  link clocks, shallow link FIFOs, shared ports inside a unit, placements);
* every split conserves the graph's weight bytes, KV bytes and MACs across the units (against the one-unit fold),
  and the exchanged bytes equal the formula from the shapes;
* with an infinitely fast link two symmetric units decode exactly like one of them alone, and with a finite link
  exactly like one of them whose exchange consumers wait the link's serialisation + latency more;
* a design with one unit lowers to exactly the program of the same design without units (shipped designs);
* the worked example (two units on a ring, shared ports, head on the host) decodes and shows per-unit and per-link
  cycles, in text and JSON.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from fpga.hbm import channel as hbm
from fpga.streaming.design import DesignError, load_design
from fpga.streaming.engine import run_kernel, run_program
from fpga.streaming.program import compile_token
from fpga.streaming.unit_spec import LinkSpec, UnitSpec
from fpga.streaming.units import resolve_units, unit_design, unit_llm
from hwmodel.specs import library
from tests.streaming_gen import small_board, small_unit_design, small_unit_llm
from tests.test_streaming_equivalence import assert_drawn_equivalent

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "designs" / "two-unit-ring-u280.toml"


@st.composite
def unit_case(draw, splits=("heads", "columns", "layers")):  # type: ignore[no-untyped-def]
    split = draw(st.sampled_from(splits))
    n = draw(st.sampled_from([2, 2, 3]))
    llm = draw(small_unit_llm(split, n))
    board = draw(small_board())
    return draw(small_unit_design(board, llm, split, n)), board, llm


@pytest.mark.slow  # --quick leaves it out (docs/testing.md)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_fast_engine_equals_reference_on_multi_unit_designs(data: st.DataObject) -> None:
    # split = columns has its own equivalence test (tests/test_units_columns.py)
    design, board, llm = data.draw(unit_case(("heads", "layers")))
    event(f"split {design.split}, {len(design.units)} units, {design.links[0].kind}")
    assert_drawn_equivalent(data, design, board, llm, max_ctx=20)


def fold(design):  # type: ignore[no-untyped-def]
    """The one-unit fold of a generated design: its first unit's engines (which map every operator) alone."""
    first = set(design.units[0].engines)
    engines = tuple(dataclasses.replace(e, channels=()) for e in design.engines if e.name in first)
    return dataclasses.replace(design, engines=engines, units=(), links=(), split="")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(unit_case(), st.integers(0, 20))
def test_splits_conserve_bytes_and_macs_and_derive_the_exchange(case, ctx: int) -> None:  # type: ignore[no-untyped-def]
    design, board, llm = case
    try:  # a drawn port buffer too small for a block of the split design or of its fold: not a case
        prog = compile_token(design, board, llm, ctx)
        whole = compile_token(fold(design), board, llm, ctx)
    except DesignError as exc:
        assume("buffer_depth" not in str(exc))
        raise
    assert prog.macs == whole.macs
    assert prog.param_bytes["weights"] == whole.param_bytes["weights"]
    for k in ("kv_read", "kv_write"):
        assert prog.req_bytes[k] == whole.req_bytes[k]
    n, h, b = len(design.units), llm.hidden, design.exchange_bits // 8
    if design.split != "heads":  # every parameter class is split, none replicated (heads: O's and down's scales)
        for k in ("metadata", "bias", "onchip"):
            assert prog.param_bytes[k] == whole.param_bytes[k], k
    if design.split == "columns":
        # each unit sends its 1/n slice to the n - 1 others: the attention output, o_proj's and down's hidden
        # slices, SiLU x up's intermediate slice, per layer; the embedding row as under heads
        per = {"attention": llm.heads * llm.head_dim, "o_proj": h, "silu_mul": llm.intermediate, "down": h}
        expect = {k: llm.layers * (n - 1) * v * b for k, v in per.items()}
        if "embed" not in design.host_ops:
            expect["embed"] = (n - 1) * h * b
    elif design.split == "heads":
        expect = {"o_proj": llm.layers * n * (n - 1) * h * b, "down": llm.layers * n * (n - 1) * h * b}
        if "embed" not in design.host_ops:
            expect["embed"] = (n - 1) * h * b
    else:
        expect = {"stage": (n - 1) * h * b}
    assert prog.exchange_bytes == expect
    assert sum(x["bytes"] for x in prog.hop_info) >= sum(expect.values())  # a message crosses one hop or more


def two_symmetric_units(width_bits: int, latency_cycles: int):  # type: ignore[no-untyped-def]
    """Two identical units (split by heads, embedding row from the host) of a small draft-like design on a ring."""
    llm = dataclasses.replace(library().llm("qwen2.5-0.5b"), layers=2, vocab=512)
    base = load_design("draft-u280")
    engines, units = [], []
    for u in range(2):
        off = ("embed",) if u == 0 else ("embed", "lm_head", "final_norm", "argmax")
        own = [
            dataclasses.replace(
                e, name=f"{e.name}{u}", ports=min(e.ports, 4), ops=tuple(o for o in e.ops if o not in off)
            )
            for e in base.engines
        ]
        engines += own
        units.append(
            UnitSpec(name=f"u{u}", engines=tuple(e.name for e in own), channels=tuple(range(16 * u, 16 * u + 16)))
        )
    link = LinkSpec(
        name="ring",
        kind="ring",
        units=("u0", "u1"),
        width_bits=width_bits,
        fifo_depth=64,
        latency_cycles=latency_cycles,
    )
    d = dataclasses.replace(
        base,
        name="sym",
        engines=tuple(engines),
        host_ops=("embed",),
        split="heads",
        units=tuple(units),
        links=(link,),
        max_ctx=64,
    )
    return resolve_units(d), llm


def cycles(prog, design, board) -> int:  # type: ignore[no-untyped-def]
    out = run_kernel(hbm.hbm_params(board, design.clock_hz, hbm.token_refresh_phase(board, 16)), prog)
    assert out[0] == 0
    return int(out[1])


def test_two_units_differ_from_one_by_exactly_the_link() -> None:
    from fpga.streaming.units import _cums, _op_blocks

    board = library().board("u280")
    fast, llm = two_symmetric_units(width_bits=1 << 16, latency_cycles=0)
    alone, share = unit_design(fast, 0), unit_llm(fast, llm, 0)
    half = compile_token(alone, board, share, 16)
    # an infinitely fast link: each unit runs exactly as it would alone (its partner's partials arrive no later
    # than its own)
    assert cycles(compile_token(fast, board, llm, 16), fast, board) == cycles(half, alone, board)
    # a finite link: each residual add waits for its chunk's serialisation (fp32 partial sums, 512 bits per kernel
    # cycle) plus the link's latency after the partner's producer finished the chunk; predicted on the half alone.
    # 500 cycles puts the link on the critical path; at most 25 chunks per exchange keeps the 64-chunk FIFOs from
    # back-pressuring and the link idle between chunks (3 cycles of serialisation per 8-cycle producer block)
    slow, _ = two_symmetric_units(width_bits=512, latency_cycles=500)
    off = half.t_off.copy()
    cums = _cums(alone, board, share)
    for op, cons_op in (("o_proj", "attn_add"), ("down", "ffn_add")):
        c = cums[op]
        for layer in range(share.layers):
            prods = _op_blocks(half, op, layer)[-len(c) :]
            conss = _op_blocks(half, cons_op, layer)[: len(c)]
            for k, (p, q) in enumerate(zip(prods, conss)):
                ser = -(-(c[k] - (c[k - 1] if k else 0)) * 32 // 512)
                off[q, 0] = max(off[q, 0], half.t_cyc[p] + half.e_lat[half.t_eng[p]] + ser + 500)
    predicted = cycles(dataclasses.replace(half, t_off=off), alone, board)
    assert cycles(compile_token(slow, board, llm, 16), slow, board) == predicted > cycles(half, alone, board)


def test_one_unit_lowers_to_exactly_the_program_without_units() -> None:
    for name in ("draft-u280", "placed-shared-u280"):
        d = load_design(ROOT / "examples" / "designs" / f"{name}.toml" if name.startswith("placed") else name)
        chans = []
        for e in d.engines:
            chans.extend(e.channels or range(len(chans), len(chans) + e.ports))
        one = dataclasses.replace(
            d,
            split="heads",
            units=(UnitSpec(name="all", engines=tuple(e.name for e in d.engines), channels=tuple(sorted(set(chans)))),),
        )
        one = resolve_units(one)
        board, llm = d.board_spec(), d.llm_spec()
        a = compile_token(d, board, llm, 100)
        b = compile_token(one, board, llm, 100)
        for f in dataclasses.fields(a):
            x, y = getattr(a, f.name), getattr(b, f.name)
            if isinstance(x, np.ndarray):
                assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes(), f.name
            else:
                assert x == y, f.name


@pytest.fixture(scope="module")
def example_token():  # type: ignore[no-untyped-def]
    d = load_design(EXAMPLE)
    small = dataclasses.replace(d.llm_spec(), layers=2)
    board = d.board_spec()
    return d, run_program(d, board, small, compile_token(d, board, small, 64), 64, True)


def test_worked_example_shows_units_and_links(example_token) -> None:  # type: ignore[no-untyped-def]
    d, r = example_token
    assert [u["unit"] for u in r.units] == ["u0", "u1"]
    assert {x["hop"] for x in r.links} == {"ring:u0->u1", "ring:u1->u0"}
    for u in r.units:
        assert (
            sum(u[f"{k}_cycles"] for k in ("busy", "drain", "stall_in", "stall_mem", "stall_out", "done")) == r.cycles
        )
    for x in r.links:
        assert x["bytes"] == 2 * 2 * d.llm_spec().hidden * 4  # two partial sums per layer, fp32, two layers
        assert 0 < x["busy_cycles"] < r.cycles
    assert any(c.get("shared_with") for c in r.channels)  # attention shares its linear engine's channels


def test_decode_cli_prints_units_and_links() -> None:
    from hwmodel.cli import main

    runner = CliRunner()
    out = runner.invoke(main, ["fpga", "decode", "--design", str(EXAMPLE), "--ctx", "0", "--no-detail"])
    assert out.exit_code == 0, out.output
    assert "u0" in out.output and "ring:u0->u1" in out.output
    js = runner.invoke(main, ["fpga", "decode", "--design", str(EXAMPLE), "--ctx", "0", "--json"])
    assert js.exit_code == 0, js.output
    doc = json.loads(js.stdout)
    assert [u["unit"] for u in doc["units"]] == ["u0", "u1"] and len(doc["links"]) == 2
    assert doc["exchange_bytes"]["o_proj"] == 24 * 2 * 896 * 4


@pytest.mark.parametrize(
    "change, why",
    [
        ({"split": "rows"}, "split: expected one of heads, columns, layers"),
        ({"split": "columns", "engines": None}, "engine name 'rx' is reserved"),
        ({"links": ()}, "no link leads from one to the other"),
    ],
)
def test_bad_units_are_one_clear_line(change, why) -> None:  # type: ignore[no-untyped-def]
    from fpga.streaming.design import check_structure

    d = load_design(EXAMPLE)
    if change.get("engines", ()) is None:  # an engine named like a column unit's receive engine
        change = {**change, "engines": (dataclasses.replace(d.engines[0], name="rx"),) + d.engines[1:]}
    d = dataclasses.replace(d, **change)
    with pytest.raises(DesignError, match=why):
        check_structure(d)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(unit_case(splits=("heads",)), st.integers(0, 12))
def test_blocks_by_operator_and_layer_from_one_sort_equal_the_scan(case, ctx: int) -> None:  # type: ignore[no-untyped-def]
    """The index the heads split's exchanges read equals one scan of the program per operator and layer."""
    from fpga.streaming.program_format import OP_ID
    from fpga.streaming.units import _op_blocks, _op_layer_blocks

    design, board, llm = case
    ops = ("o_proj", "attn_add", "down", "ffn_add")
    for i in range(len(design.units)):
        prog = compile_token(unit_design(design, i), board, unit_llm(design, llm, i), ctx, i == 0)
        index = _op_layer_blocks(prog, ops)
        for op in ops:
            for layer in range(-1, llm.layers + 1):
                got = index.get((OP_ID[op], layer), np.zeros(0, np.int64))
                assert np.array_equal(got, _op_blocks(prog, op, layer)), (op, layer)
        assert sum(len(v) for v in index.values()) == int(np.isin(prog.t_op, [OP_ID[o] for o in ops]).sum())
