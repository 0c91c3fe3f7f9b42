"""Instruction overlays of several engines (fpga/instruction/placement.py) and the execution-style fields: the fast
engine equals the cycle-stepped reference on generated multi-engine programs, the engines together move exactly the
one-engine program's bytes and MACs, a WAIT nobody signals is one clear error, a one-engine design is today's, and
load/compute overlap moves the prediction the expected way."""

from __future__ import annotations

import dataclasses
import json

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from fpga.instruction import isa
from fpga.instruction.compiler import Compiler
from fpga.instruction.design import PlacementSpec, load_design
from fpga.instruction.engine import InstructionEngine
from fpga.instruction.placement import MultiCompiler
from fpga.instruction.program import MultiProgram, Program, Segment, program_traffic
from fpga.instruction.reference import ReferenceMachine
from fpga.instruction.run import simulate_program
from hwmodel.errors import HwmodelError
from tests.test_instruction_engine import COUNTERS, small_machines

EXAMPLE = "examples/designs/instruction/two-engine-overlay-u280.toml"


@st.composite
def multi_machines(draw: st.DrawFn):  # noqa: ANN201
    """A small machine of the one-engine tests cut into 2 or 4 engines, with a placement and a sync cost."""
    llm, design, k, ctx, n = draw(small_machines())
    engines = draw(st.sampled_from([2, 4]))
    channels = max(design.datamover.channels, engines)  # a multiple of engines: 1, 2, 4 -> 2 or 4
    linears = draw(st.sampled_from(["rows", "rows", "engine:0", "engine:1"]))
    placement = PlacementSpec(linears=linears, attention=draw(st.integers(0, engines - 1)))
    multi = dataclasses.replace(
        design.with_params(
            {
                "datamover.channels": channels,
                "scheduler.sync_cycles": draw(st.integers(1, 40)),
                "buffers.prefetch_depth": draw(st.integers(0, 2)),
            }
        ),
        engines=engines,
        placement=placement,
    )
    return llm, design.with_params({"datamover.channels": channels}), multi, k, ctx, n


def _programs(llm, one, multi, k, ctx, n):  # noqa: ANN001, ANN202
    c1, cn = Compiler(one, k, llm=llm), MultiCompiler(multi, k, llm=llm)
    if n > 1:
        return c1.prefill_program(n, ctx), cn.prefill_program(n, ctx)
    return c1.decode_program(ctx), cn.decode_program(ctx)


@pytest.mark.slow  # --quick leaves it out (docs/testing.md)
@settings(max_examples=6, deadline=None)
@given(multi_machines())
def test_engines_equal_the_reference_and_conserve_the_one_engine_bytes_and_macs(machine) -> None:  # noqa: ANN001
    llm, one, multi, k, ctx, n = machine
    p1, pn = _programs(llm, one, multi, k, ctx, n)
    fast = simulate_program(multi, pn)
    ref = ReferenceMachine(multi).run(pn)
    assert {c: fast[c] for c in COUNTERS} == {c: ref[c] for c in COUNTERS}
    assert fast["engines"] == ref["engines"] and len(fast["engines"]) == multi.engines
    assert program_traffic(pn) == program_traffic(p1)
    alone = simulate_program(one, p1)
    for c in ("read_bytes", "write_bytes", "macs"):
        assert fast[c] == alone[c] == sum(e[c] for e in fast["engines"])
    signals = sum(e["signals"] for e in fast["engines"])
    waits = sum(int((p.unrolled()[:, isa.F_OP] == isa.OP_WAIT).sum()) for p in pn.engines)
    assert signals == waits  # every semaphore signalled is taken
    assert max(e["finish_cycle"] for e in fast["engines"]) == fast["cycles"]


def test_a_wait_nobody_signals_is_a_clear_error() -> None:
    d = load_design("glitches-u280").with_params({"datamover.channels": 4, "tiling.mv_tile_rows": 16})
    d = dataclasses.replace(d, engines=2)
    wait, sync = isa.empty(1), isa.empty(1)
    wait[0, isa.F_OP], wait[0, isa.F_UNIT], wait[0, isa.F_TAG] = isa.OP_WAIT, isa.UNIT_CTRL, 1
    sync[0, isa.F_OP], sync[0, isa.F_UNIT] = isa.OP_SYNC, isa.UNIT_CTRL
    prog = MultiProgram((Program((Segment(wait, 1), Segment(sync, 1))), Program((Segment(sync, 1),))))
    for run in (lambda: simulate_program(d, prog), lambda: ReferenceMachine(d).run(prog)):
        with pytest.raises(HwmodelError, match="waits on a semaphore no engine will signal"):
            run()


def test_one_engine_is_todays_design_bit_for_bit(tmp_path) -> None:  # noqa: ANN001
    """Writing the defaults out changes nothing, and the draft's decode keeps the cycle count it had before
    engines existed (750,067 at ctx 0, recorded on the tree before this change)."""
    from fpga.instruction.design import DESIGN_DIR

    text = (DESIGN_DIR / "draft-instr-u280.toml").read_text()
    text = text.replace(
        "[quant]\n", 'engines = { value = 1, source = "one"}\n\n[placement]\nlinears = "rows"\n\n[quant]\n'
    )
    p = tmp_path / "one.toml"
    p.write_text(text)
    base = load_design("draft-instr-u280")
    assert dataclasses.replace(load_design(p), origin=base.origin) == base
    assert InstructionEngine(base).decode(0).cycles == 750_067


def test_overlap_prefetch_depth_and_issue_are_fields_that_move_the_prediction() -> None:
    d = load_design("draft-instr-u280")
    on = InstructionEngine(d).decode(0).cycles
    depth1 = InstructionEngine(d.with_params({"buffers.prefetch_depth": 1})).decode(0).cycles
    off = InstructionEngine(dataclasses.replace(d, buffers=dataclasses.replace(d.buffers, overlap_loads=False)))
    assert off.decode(0).cycles > 1.3 * on and off.decode(0).cycles > depth1  # no overlap: much slower
    slow_issue = InstructionEngine(d.with_params({"scheduler.issue_cycles": 200})).decode(0).cycles
    assert slow_issue > on
    assert "[estimate]" in d.source_of("scheduler.issue_cycles")  # the fixed guess is varied by --sensitivity


def test_example_two_engine_overlay_runs_and_conserves_its_fold() -> None:
    from hwmodel.cli import main

    args = ["fpga", "instruction", "run", "--design", EXAMPLE, "--ctx", "16", "--json"]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["overlay"]["engines"] == 2 and out["overlay"]["placement"] == {"linears": "rows", "attention": 0}
    assert len(out["engines"]) == 2 and all(e["signals"] > 0 for e in out["engines"])
    fold = InstructionEngine(load_design(EXAMPLE).with_params({"engines": 1})).decode(16)
    assert out["counters"]["macs"] == fold.counters["macs"] and out["hbm_bytes"] == fold.hbm_bytes
    bad = CliRunner().invoke(main, ["fpga", "instruction", "trace", "--design", EXAMPLE, "--out", "/dev/null"])
    assert bad.exit_code != 0 and "2 engines" in bad.output


def test_placement_errors_name_the_field(tmp_path) -> None:  # noqa: ANN001
    text = open(EXAMPLE).read()
    for old, new, field in (
        ("attention = 0", "attention = 2", "placement.attention"),
        ('linears = "rows"', 'linears = "cols"', "placement.linears"),
        ("engines = { value = 2,", "engines = { value = 3,", "engines"),
    ):
        p = tmp_path / "bad.toml"
        p.write_text(text.replace(old, new))
        with pytest.raises(HwmodelError, match=field.replace(".", r"\.")):
            load_design(p)


def test_sensitivity_covers_the_execution_style_fields() -> None:
    from hwmodel.cli import main
    from hwmodel.cli.cmd_fpga_instruction import overlay_knobs
    from hwmodel.studies.sensitivity import instruction_knobs

    draft = load_design("draft-instr-u280")  # leaves overlap, depth and sync at their defaults; one engine
    keys = {k.key: k for k in instruction_knobs(draft) + overlay_knobs(draft, None)}
    assert {"buffers.overlap_loads", "buffers.prefetch_depth", "scheduler.issue_cycles"} <= set(keys)
    assert "scheduler.sync_cycles" not in keys  # one engine: nothing to synchronise
    assert (keys["buffers.prefetch_depth"].low, keys["buffers.prefetch_depth"].high) == (1, 0)
    example = load_design(EXAMPLE)  # writes depth and sync cost as [estimate]s
    keys = {k.key: k.status for k in instruction_knobs(example) + overlay_knobs(example, None)}
    assert keys["scheduler.sync_cycles"] == keys["buffers.prefetch_depth"] == "estimate"
    args = ["fpga", "instruction", "run", "--design", EXAMPLE, "--ctx", "8", "--json", "--sensitivity"]
    r = CliRunner().invoke(main, [*args, "--vary", "sync_cycles"])
    assert r.exit_code == 0, r.output
    (row,) = json.loads(r.stdout)["sensitivity"]["fields"]
    assert row["field"] == "scheduler.sync_cycles" and (row["low"], row["high"]) == (16, 64)
    assert row["low_s"] <= row["high_s"]  # a dearer semaphore never speeds the step up
