"""`[buffers] overlap_loads` of an instruction-driven design (fpga/instruction/compiler.py): with one buffer no load runs ahead
of the compute before it. The fast engine equals the cycle-stepped reference either way, the bytes do not change,
and a design without overlap is never faster."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from fpga.instruction.design import load_design
from fpga.instruction.reference import ReferenceMachine
from fpga.instruction.run import simulate_program
from tests.test_instruction_engine import COUNTERS, _program, small_machines


def single(design):  # type: ignore[no-untyped-def]
    return dataclasses.replace(design, buffers=dataclasses.replace(design.buffers, overlap_loads=False))


@settings(max_examples=10, deadline=None)
@given(small_machines())
def test_no_overlap_equals_reference_moves_the_same_bytes_and_is_never_faster(machine) -> None:
    llm, design, k, ctx, n = machine
    one = single(design)
    prog = _program(llm, one, k, ctx, n)
    fast = simulate_program(one, prog)
    ref = ReferenceMachine(one).run(prog)
    assert {c: fast[c] for c in COUNTERS} == {c: ref[c] for c in COUNTERS}
    both = simulate_program(design, _program(llm, design, k, ctx, n))
    assert (fast["read_bytes"], fast["write_bytes"], fast["macs"]) == (
        both["read_bytes"],
        both["write_bytes"],
        both["macs"],
    )
    assert fast["cycles"] >= both["cycles"]


def test_the_field_reads_from_toml(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from fpga.instruction.design import DESIGN_DIR

    text = (
        (DESIGN_DIR / "draft-instr-u280.toml").read_text().replace("[buffers]\n", "[buffers]\noverlap_loads = false\n")
    )
    p = tmp_path / "no-overlap.toml"
    p.write_text(text)
    d = load_design(p)
    assert d.buffers.overlap_loads is False and load_design("draft-instr-u280").buffers.overlap_loads is True


@settings(max_examples=3, deadline=None)
@given(small_machines(), st.integers(1, 3))
def test_prefetch_depth_equals_reference_and_moves_the_same_bytes(machine, depth: int) -> None:  # noqa: ANN001
    """`[buffers] prefetch_depth`: loads run at most ``depth`` load steps ahead; the engines agree, bytes unchanged."""
    llm, design, k, ctx, n = machine
    shallow = design.with_params({"buffers.prefetch_depth": depth})
    prog = _program(llm, shallow, k, ctx, n)
    fast = simulate_program(shallow, prog)
    assert {c: fast[c] for c in COUNTERS} == {c: ReferenceMachine(shallow).run(prog)[c] for c in COUNTERS}
    deep = simulate_program(design, _program(llm, design, k, ctx, n))
    assert (fast["read_bytes"], fast["write_bytes"], fast["macs"]) == (
        deep["read_bytes"],
        deep["write_bytes"],
        deep["macs"],
    )
