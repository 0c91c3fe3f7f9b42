"""Every compiled token program is byte-identical to a cold compile by the plain one-block-at-a-time lowering:
the streaming compiler's shortcuts (fpga/streaming/lowering.py ``_stream_blocks``, the one-pass dependency
arrays, the link blocks of multi-unit designs built in array passes, fpga/streaming/unit_links.py) and its
memoized parts (fpga/streaming/templates.py) change how fast a program is built, never a byte of it.
Every array of the Program is hashed, on generated single-unit, multi-unit and column designs, and on the DSE
bench's design family compiled one after another (warm caches) against each compiled alone from cleared caches."""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from fpga.streaming import lowering, templates, unit_links, units
from fpga.streaming.design import DesignError
from fpga.streaming.program import compile_token
from tests.streaming_gen import small_board, small_design, small_llm, small_unit_design, small_unit_llm


def program_digest(prog: Any) -> str:
    """sha256 over every field of a Program (arrays by dtype, shape and bytes; the rest by repr)."""
    h = hashlib.sha256()
    for f in dataclasses.fields(prog):
        v = getattr(prog, f.name)
        h.update(f.name.encode())
        if isinstance(v, np.ndarray):
            h.update(f"{v.dtype}{v.shape}".encode() + np.ascontiguousarray(v).tobytes())
        else:
            h.update(repr(v).encode())
    return h.hexdigest()


def _cold(design: Any, board: Any, llm: Any, ctx: int, lm_head: bool, per_port: bool, plain: bool) -> str:
    """Digest of the program compiled from cleared caches (``plain``: by the one-block-at-a-time lowering)."""
    templates.clear_caches()
    with pytest.MonkeyPatch.context() as mp:
        if plain:
            mp.setattr(lowering._Compiler, "_stream_blocks", lowering._Compiler._stream_blocks_ref)
            mp.setattr(units, "link_blocks", unit_links.link_blocks_ref)
        try:
            return program_digest(compile_token(design, board, llm, ctx, lm_head, per_port))
        except DesignError as exc:
            return f"error: {exc}"
        finally:
            templates.clear_caches()


def _same_both_ways(design: Any, board: Any, llm: Any, ctx: int, lm_head: bool) -> None:
    fast = _cold(design, board, llm, ctx, lm_head, True, plain=False)
    assert fast == _cold(design, board, llm, ctx, lm_head, True, plain=True)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_generated_designs_compile_to_the_plain_lowerings_bytes(data: st.DataObject) -> None:
    llm = data.draw(small_llm(max_layers=2))
    board = data.draw(small_board())
    design = data.draw(small_design(board, llm))
    _same_both_ways(design, board, llm, data.draw(st.integers(0, 40)), data.draw(st.booleans()))


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_generated_unit_designs_compile_to_the_plain_lowerings_bytes(data: st.DataObject) -> None:
    split = data.draw(st.sampled_from(["layers", "columns"]))
    n = data.draw(st.sampled_from([2, 3]))
    llm = data.draw(small_unit_llm(split, n))
    board = data.draw(small_board())
    design = data.draw(small_unit_design(board, llm, split, n))
    _same_both_ways(design, board, llm, data.draw(st.integers(0, 24)), True)


def _units_digest(design: Any, board: Any, llm: Any, ctx: int, lm_head: bool, per_port: bool, ref: bool) -> str:
    """Digest of a multi-unit program with its link blocks built by array passes or (``ref``) chunk by chunk."""
    with pytest.MonkeyPatch.context() as mp:
        if ref:
            mp.setattr(units, "link_blocks", unit_links.link_blocks_ref)
        try:
            return program_digest(units.compile_units(design, board, llm, ctx, lm_head, per_port))
        except DesignError as exc:
            return f"error: {exc}"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_unit_link_blocks_equal_the_chunk_by_chunk_loop(data: st.DataObject) -> None:
    """Every split, two to four units (three or four on a ring: chunks forwarded over several hops, and copies of one
    chunk to two or three destinations sharing the first hop's room), both heads, per-port requests on and off."""
    split = data.draw(st.sampled_from(["heads", "columns", "layers"]))
    n = data.draw(st.sampled_from([2, 3, 4]))
    llm = data.draw(small_unit_llm(split, n))
    board = data.draw(small_board())
    design = data.draw(small_unit_design(board, llm, split, n))
    args = (design, board, llm, data.draw(st.integers(0, 24)), data.draw(st.booleans()), data.draw(st.booleans()))
    fast = _units_digest(*args, ref=False)
    assume(not fast.startswith("error"))  # a design the structure checks refuse compares nothing
    assert fast == _units_digest(*args, ref=True)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_copies_of_one_chunk_over_one_hop_share_its_room_as_in_the_loop(data: st.DataObject) -> None:
    """Four units on a one-way ring, heads split, shallow link buffers: unit a's chunk goes to its three peers over
    one first hop, so a producer's room skips back over a run of copies (three units give runs of one only)."""
    import dataclasses

    llm = data.draw(small_unit_llm("heads", 4))
    board = data.draw(small_board())
    design = data.draw(small_unit_design(board, llm, "heads", 4))
    ring = dataclasses.replace(design.links[0], kind="ring", fifo_depth=data.draw(st.integers(1, 2)))
    design = dataclasses.replace(design, links=(ring,))
    args = (design, board, llm, data.draw(st.integers(0, 12)), True, False)
    fast = _units_digest(*args, ref=False)
    assume(not fast.startswith("error"))
    assert fast == _units_digest(*args, ref=True)


# the TeraFly unit designs (a second of reference compile each) are compared by bench_streaming.py's section 5
@pytest.mark.parametrize("name", ["two-unit-ring-u280.toml", "published/looplynx-x2-u50-units.toml"])
def test_example_unit_designs_link_blocks_equal_the_chunk_by_chunk_loop(name: str) -> None:
    from pathlib import Path

    from fpga.streaming.engine import load_design
    from hwmodel.specs import extra_spec_dirs, library, set_extra_spec_dirs

    root = Path(__file__).resolve().parents[1]
    before = extra_spec_dirs()
    set_extra_spec_dirs([*before, root / "examples" / "llms"])
    try:
        design = load_design(root / "examples" / "designs" / name)
        board, llm = library().board(design.board), library().llm(design.llm)
        for ctx, per_port in ((0, False), (300, True)):
            args = (design, board, llm, ctx, True, per_port)
            assert _units_digest(*args, ref=False) == _units_digest(*args, ref=True)
    finally:
        set_extra_spec_dirs(before)


def test_the_dse_bench_family_compiled_warm_equals_each_compiled_cold() -> None:
    """Designs differing in the bench sweep's fields, compiled one after another into warm caches, then each again
    alone from cleared caches (a memo keyed too loosely would hand one design's part to another)."""
    from hwmodel.dse.streaming_eval import build_design
    from hwmodel.specs import library

    lib = library()
    grid = itertools.product([4, 8], [2, 4], [1, 8], [1024, 4096], [16, 28])
    designs = [
        build_design(
            {"design": "draft-u280", "weight_bits": wb, "attn.ports": ap, "fifo_depth": fd}
            | {"linear.lanes": lanes, "linear.ports": lp}
        )
        for wb, ap, fd, lanes, lp in grid
    ][::3]
    board, llm = lib.board(designs[0].board), lib.llm(designs[0].llm)
    templates.clear_caches()
    warm = [program_digest(compile_token(d, board, llm, 64, True)) for d in designs]
    assert len(set(warm)) == len(designs)
    assert warm == [_cold(d, board, llm, 64, True, False, plain=False) for d in designs]


def test_a_tail_is_shared_exactly_by_designs_agreeing_on_what_it_reads() -> None:
    """The tail does not read the attention engine: two designs differing in its port count share one tail; a
    design differing in the LM head's lanes (which it reads) gets its own. Each program equals its cold compile."""
    from fpga.streaming import part_memo
    from hwmodel.dse.streaming_eval import build_design

    base = {"design": "draft-u280", "max_ctx": 64}
    designs = [build_design(base | ch) for ch in ({"attn.ports": 2}, {"attn.ports": 4}, {"linear.lanes": 1024})]
    board, llm = designs[0].board_spec(), designs[0].llm_spec()
    templates.clear_caches()
    warm = [program_digest(compile_token(d, board, llm, 16, True)) for d in designs]
    parts = {k[0]: len(v) for k, v in part_memo._MEMO.items()}  # part -> entries (one compiler state here)
    assert parts == {"tail": 2}  # tails: attention ports 2 = 4, lanes 1024
    assert warm == [_cold(d, board, llm, 16, True, False, plain=False) for d in designs]
