"""ISA encoding and the compiler: access sizes emerge from the lowering, buffers bound the prefetch ratio, the
scoreboard fields respect every producer/consumer pair, context patching equals a fresh compile, bytes add up."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fpga.instruction import isa
from fpga.instruction.compiler import Compiler, load_stream_program
from fpga.instruction.design import DESIGN_DIR, design_names, load_design
from fpga.instruction.layout import build_layout, linear_ops
from fpga.instruction.prefetch import PrefetchError, group_bytes, max_prefetch_ratio, prefetch_fits
from hwmodel.errors import HwmodelError, SpecError, UnknownNameError
from hwmodel.graph import params_of
from hwmodel.specs import library

LINEAR_OPS = {
    isa.OPID[n] for n in ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "lm_head")
}


def tiny_llm(**kw: int):  # noqa: ANN201
    base = dict(layers=3, hidden=256, heads=4, kv_heads=2, head_dim=64, intermediate=512, vocab=1000, max_position=512)
    base.update(kw)
    return dataclasses.replace(library().llm("llama2-7b"), **base)


def tiny_design(**kw: float):  # noqa: ANN201
    params = {
        "datamover.channels": 4,
        "tiling.mv_tile_rows": 16,
        "mpe.row_lanes": 4,
        "mpe.col_lanes": 16,
        "buffers.weight_bytes": 65536,
        "buffers.scale_bytes": 8192,
        "buffers.zero_bytes": 8192,
        "buffers.kv_bytes": 16384,
        "tiling.prefill_token_block": 16,
    }
    params.update(kw)
    return load_design("glitches-u280").with_params(params)


def layer0_loads(prog: np.ndarray, compiler: Compiler, name: str) -> dict[int, list[np.ndarray]]:
    """LDs of matrix ``name`` in layer 0, by buffer kind."""
    lay = compiler.layout
    m = lay.linears[name]
    base = lay.layer_base
    rows_ch = math.ceil(m.out_features / lay.channels)
    out: dict[int, list[np.ndarray]] = {isa.BUF_WEIGHT: [], isa.BUF_SCALE: [], isa.BUF_ZERO: []}
    for row in prog[prog[:, isa.F_OP] == isa.OP_LD]:
        for buf, addr, rb in (
            (isa.BUF_WEIGHT, m.weight_addr, m.weight_row_bytes),
            (isa.BUF_SCALE, m.scale_addr, m.meta_row_bytes_scale),
            (isa.BUF_ZERO, m.zero_addr, m.meta_row_bytes_zero),
        ):
            if row[isa.F_TAG] == buf and base + addr <= row[isa.F_ADDR] < base + addr + rows_ch * rb:
                out[buf].append(row)
    return out


# ---------------------------------------------------------------------------------------------- access sizes
@pytest.mark.parametrize("k, weight, meta", [(1, 8192, 256), (4, 32768, 1024)])
def test_q_proj_access_sizes_emerge_from_the_lowering(k: int, weight: int, meta: int) -> None:
    """GLITCHES: at ratio 4 a q_proj weight access grows from 8 KB to 32 KB, a metadata access from 256 B to 1 KB.
    Read from the instruction stream: every q_proj LD gives each of the 32 channels one access of that size."""
    d = load_design("glitches-u280")
    c = Compiler(d, k)
    prog = c.decode_program(128).unrolled()
    loads = layer0_loads(prog, c, "q_proj")
    assert len(loads[isa.BUF_WEIGHT]) == math.ceil(4096 / 128 / k)
    for buf, size in ((isa.BUF_WEIGHT, weight), (isa.BUF_SCALE, meta), (isa.BUF_ZERO, meta)):
        for row in loads[buf]:
            per_channel = isa.request_bytes(row)
            assert per_channel.shape == (32,) and set(per_channel.tolist()) == {size}
            assert row[isa.F_GROUP] == k


@pytest.mark.slow  # --quick leaves it out (docs/testing.md)
def test_coalescing_scales_every_access_and_keeps_bytes() -> None:
    """Ratio k multiplies each access by k (whole groups) and never changes the bytes moved."""
    d = load_design("glitches-u280")
    totals = {}
    for k in (1, 2, 3, 4):
        c = Compiler(d, k)
        prog = c.decode_program(64).unrolled()
        ld = prog[prog[:, isa.F_OP] == isa.OP_LD]
        totals[k] = sum(int(isa.request_bytes(r).sum()) for r in ld)
        down = layer0_loads(prog, c, "down_proj")[isa.BUF_WEIGHT]
        assert isa.request_bytes(down[0])[0] == k * 4 * 11008 // 2  # 4 rows per channel, full input width
    assert len(set(totals.values())) == 1


def test_buffer_capacity_bounds_the_ratio() -> None:
    d = load_design("glitches-u280")
    llm = d.llm_spec
    kmax = max_prefetch_ratio(d)
    assert prefetch_fits(d, llm, kmax) and not prefetch_fits(d, llm, kmax + 1)
    down_group = group_bytes(d, llm, kmax + 1)["down_proj"][0]
    assert down_group > d.buffers.weight_bytes  # the largest matrix's group is what stops it
    with pytest.raises(PrefetchError, match=f"largest ratio that fits: {kmax}"):
        Compiler(d, kmax + 1)
    dbl = max_prefetch_ratio(d, double_buffered=True)
    assert 2 * group_bytes(d, llm, dbl)["down_proj"][0] <= d.buffers.weight_bytes
    assert 2 * group_bytes(d, llm, dbl + 1)["down_proj"][0] > d.buffers.weight_bytes
    half = d.with_params({"buffers.weight_bytes": d.buffers.weight_bytes // 2})
    assert max_prefetch_ratio(half) < kmax


# ---------------------------------------------------------------------------------------------- conservation
@pytest.mark.parametrize("k", [1, 3])
def test_decode_reads_every_weight_and_the_kv_cache_once(k: int) -> None:
    d = load_design("glitches-u280")
    llm = d.llm_spec
    c = Compiler(d, k)
    ctx = 300
    prog = c.decode_program(ctx).unrolled()
    ld = prog[prog[:, isa.F_OP] == isa.OP_LD]
    by_buf = {b: sum(int(isa.request_bytes(r).sum()) for r in ld if r[isa.F_TAG] == b) for b in range(5)}
    weights = (params_of(llm).weights + llm.head_params) * d.weight_bits // 8
    assert by_buf[isa.BUF_WEIGHT] == weights
    shapes = [(op.in_features, op.out_features) for op in linear_ops(d, llm).values() if op.name != "lm_head"]
    per_row_groups = [math.ceil(i / 128) for i, _o in shapes]
    meta = llm.layers * sum(g * o for g, (_i, o) in zip(per_row_groups, shapes))
    meta += math.ceil(llm.hidden / 128) * llm.head_out_channels
    assert by_buf[isa.BUF_SCALE] == by_buf[isa.BUF_ZERO] == 2 * meta
    # the gathered embedding row: its weights and (fp16 scale + fp16 zero) per group
    assert by_buf[isa.BUF_ACT] == llm.hidden * d.weight_bits // 8 + 2 * 2 * math.ceil(llm.hidden / 128)
    assert by_buf[isa.BUF_KV] == llm.kv_bytes(ctx, d.kv_bits)
    st_ = prog[prog[:, isa.F_OP] == isa.OP_ST]
    kv_st = sum(int(isa.request_bytes(r).sum()) for r in st_ if r[isa.F_TAG] == isa.BUF_KV)
    assert kv_st == llm.kv_bytes(1, d.kv_bits)
    mv = prog[np.isin(prog[:, isa.F_OP], (isa.OP_MV, isa.OP_MM))]
    lin = mv[np.isin(mv[:, isa.F_TAG], list(LINEAR_OPS))]
    assert int((lin[:, isa.F_ROWS] * lin[:, isa.F_COLS]).sum()) == params_of(llm).weights + llm.head_params
    assert prog[-1, isa.F_OP] == isa.OP_SYNC


def test_layout_fits_the_board_and_reports_bytes() -> None:
    d = load_design("glitches-u280")
    lay = build_layout(d)
    assert lay.channel_bytes_used <= d.board_spec.hbm.capacity_bytes // 32
    llm = d.llm_spec
    assert lay.weights_bytes > (params_of(llm).weights + llm.head_params) * 4 // 8
    assert lay.kv_bytes_per_token == llm.kv_elements_per_token
    fp16 = d.with_params({"weight_bits": 16, "kv_bits": 16})
    with pytest.raises(HwmodelError, match="MiB per channel"):
        build_layout(fp16)


# ---------------------------------------------------------------------------------------------- scoreboard
def _need(prog: np.ndarray) -> list[tuple[int, list[int]]]:
    """(unit position, required retired count per unit) of every instruction, from the relative lags."""
    pos = [0, 0, 0]
    out = []
    for row in prog:
        u = int(row[isa.F_UNIT])
        need = [pos[v] - int(row[f]) if row[f] >= 0 else 0 for v, f in enumerate(isa.WAIT_FIELDS)]
        out.append((pos[u] if u < 3 else -1, need))
        if u < 3:
            pos[u] += 1
    return out


@pytest.mark.parametrize("k", [1, 2, 5])
@pytest.mark.parametrize("which", ["decode", "prefill"])
def test_every_matrix_instruction_waits_for_its_loads(k: int, which: str) -> None:
    """RAW through the buffers: each linear MV/MM waits for the weight, scale and zero LDs of its group; attention
    waits for its K/V chunk; nothing waits for a later instruction."""
    llm = tiny_llm()
    c = Compiler(tiny_design(), k, llm=llm)
    prog = (c.decode_program(37) if which == "decode" else c.prefill_program(40, 5)).unrolled()
    needs = _need(prog)
    groups: list[tuple[int, list[int]]] = []  # (MVs left, DM positions of its W, S, Z loads)
    kv: list[int] = []
    for row, (p, need) in zip(prog, needs):
        u = int(row[isa.F_UNIT])
        for v in range(3):
            assert need[v] <= (p if v == u else 10**9)  # never waits on itself or later work of its unit
        if row[isa.F_OP] == isa.OP_LD and row[isa.F_TAG] == isa.BUF_WEIGHT:
            groups.append((int(row[isa.F_GROUP]), [p]))
        elif row[isa.F_OP] == isa.OP_LD and row[isa.F_TAG] in (isa.BUF_SCALE, isa.BUF_ZERO):
            next(g for g in groups if len(g[1]) < 3)[1].append(p)
        elif row[isa.F_OP] == isa.OP_LD and row[isa.F_TAG] == isa.BUF_KV:
            kv.append(p)
        elif row[isa.F_OP] in (isa.OP_MV, isa.OP_MM) and row[isa.F_TAG] in LINEAR_OPS:
            left, loads = groups[0]
            assert need[isa.UNIT_DM] >= max(loads) + 1
            groups[0] = (left - 1, loads)
            if left == 1:
                groups.pop(0)
        elif (
            row[isa.F_OP] in (isa.OP_MV, isa.OP_MM)
            and kv
            and row[isa.F_COLS if row[isa.F_TAG] == isa.OPID["pv"] else isa.F_ROWS] > 1
        ):
            assert need[isa.UNIT_DM] >= kv.pop(0) + 1
    assert not groups


@settings(max_examples=25)
@given(ctx=st.integers(0, 500), k=st.sampled_from([1, 2, 3]), new=st.sampled_from([1, 7, 16]))
def test_context_patching_equals_a_fresh_compile(ctx: int, k: int, new: int) -> None:
    """Passes are compiled once per template and patched per context; the patch must equal a fresh compile."""
    llm = tiny_llm()
    c = Compiler(tiny_design(), k, llm=llm)
    if ctx + new > llm.max_position:
        return
    c.decode_program(max(0, 500 - ctx))  # warm the template cache with another context
    patched = c.prefill_program(new, ctx, logits=True).segments if new > 1 else c.decode_program(ctx).segments
    fresh = c.compile_fresh(ctx, new, True).segments
    assert len(patched) == len(fresh)
    for a, b in zip(patched, fresh):
        assert a.reps == b.reps and np.array_equal(a.instrs, b.instrs)


def test_repeated_layers_become_one_segment() -> None:
    d = load_design("glitches-u280")
    prog = Compiler(d, 4).decode_program(1000)
    assert max(s.reps for s in prog.segments) > 16
    assert prog.n_instructions == prog.unrolled().shape[0]
    flat, starts, reps = prog.flat()
    assert starts[-1] == flat.shape[0] and len(reps) == len(prog.segments)


def test_load_stream_program() -> None:
    d = load_design("glitches-u280")
    prog = load_stream_program(d, 4096, 5).unrolled()
    assert [isa.OP_NAMES[o] for o in prog[:, isa.F_OP]] == ["LD"] * 5 + ["SYNC"]
    assert all(set(isa.request_bytes(r).tolist()) == {4096} for r in prog[:5])
    with pytest.raises(HwmodelError):
        load_stream_program(d, 0, 5)


def test_disassembly_names_sizes_and_waits() -> None:
    c = Compiler(load_design("glitches-u280"), 4)
    text = "\n".join(isa.disassemble(c.decode_program(128).segments[1].instrs[:40]))
    assert "32768 B/ch" in text and "coalesced x4" in text and "wait[" in text and "q_proj" in text


# ---------------------------------------------------------------------------------------------- designs and errors
def test_builtin_designs_load() -> None:
    names = design_names()
    assert {"glitches-u280", "glitches-v80"} <= set(names)
    for n in names:
        d = load_design(n)
        assert d.kind == "instruction-design" and d.source_of("clock_hz")
        Compiler(d, 1)


def test_unknown_design_lists_choices() -> None:
    with pytest.raises(UnknownNameError, match="glitches-u280"):
        load_design("glitches-u999")


def test_bad_design_field_names_file_and_field(tmp_path: Path) -> None:
    text = (DESIGN_DIR / "glitches-u280.toml").read_text()
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace("channels = { value = 32", "channels = { value = -3"))
    with pytest.raises(SpecError, match=r"bad.toml: field 'datamover.channels': expected a positive number"):
        load_design(bad)
    bad.write_text(text.replace('board = "u280"', 'board = "u2800"'))
    with pytest.raises(SpecError, match="field 'board'"):
        load_design(bad)
    bad.write_text(text.replace("mv_tile_rows = { value = 128", "mv_tile_rows = { value = 100"))
    with pytest.raises(SpecError, match="multiple of datamover.channels"):
        load_design(bad)


def test_context_errors() -> None:
    c = Compiler(load_design("glitches-u280"), 1)
    with pytest.raises(HwmodelError, match="max_position"):
        c.decode_program(4096)
    with pytest.raises(HwmodelError, match=">= 0"):
        c.decode_program(-1)
    with pytest.raises(HwmodelError, match="at least one token"):
        c.prefill_program(0)
    with pytest.raises(HwmodelError, match="not numeric|no field"):
        load_design("glitches-u280").with_params({"datamover.nope": 1})
