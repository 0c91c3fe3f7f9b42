"""Hypothesis strategies for small streaming designs (LLM shapes, boards, engine mappings), shared by the tests."""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import strategies as st

from fpga.streaming.design import ALL_OPS, HBM_OPS, EngineSpec, StreamingDesign
from hwmodel.specs import BoardSpec, HbmSpec, LlmSpec, library

VECTOR_OPS = tuple(op for op in ALL_OPS if op not in HBM_OPS)


@st.composite
def small_llm(draw: Any, max_layers: int = 2) -> LlmSpec:
    base = library().llm("qwen2.5-0.5b")
    kv = draw(st.sampled_from([1, 2]))
    group = draw(st.sampled_from([1, 2, 3]))
    return dataclasses.replace(
        base,
        layers=draw(st.integers(1, max_layers)),
        hidden=draw(st.sampled_from([16, 24, 32, 64])),
        heads=kv * group,
        kv_heads=kv,
        head_dim=draw(st.sampled_from([4, 8, 16])),
        intermediate=draw(st.sampled_from([16, 40, 96])),
        vocab=draw(st.integers(8, 160)),
        qkv_bias=draw(st.booleans()),
        tied_embeddings=True,
    )


@st.composite
def small_board(draw: Any) -> BoardSpec:
    b = library().board(draw(st.sampled_from(["u280", "v80"])))
    return dataclasses.replace(b, hbm=small_hbm(draw, b))


SMALL_MAPS = (
    "RBC",
    "RCB",
    "BRC",
    "BRGCG",
    "RGBCG",
    "RA,BG1,BA1,BA0,CA1,BG0",
    "RA,BG1,BG0,BA1,BA0,CA2,CA1",
    "BA1,BA0,RA,BG1,BG0,CA1",
)


def small_hbm(draw: Any, b: BoardSpec) -> HbmSpec:
    """The board's HBM with drawn JEDEC timings (in AXI cycles), address map, controller policy and short refresh
    intervals, so a small token meets many refresh windows, row misses and bank conflicts."""
    axi = b.hbm.axi_clock_hz

    def cyc(lo: int, hi: int) -> float:
        return draw(st.integers(lo, hi)) / axi

    trcd, trp, tras = cyc(1, 8), cyc(1, 8), cyc(1, 14)
    tras = max(tras, trcd)
    trc = tras + trp + cyc(0, 3)
    tccds = cyc(1, 2)
    tccdl = tccds + cyc(0, 2)
    trrds = cyc(1, 3)
    trrdl = trrds + cyc(0, 2)
    tfaw = trrds + cyc(0, 10)
    twtrs = cyc(1, 4)
    rfc = max(trc, tfaw) + cyc(0, 40)
    return dataclasses.replace(
        b.hbm,
        refresh_interval_s=rfc + cyc(100, 2000),
        refresh_cycle_s=rfc,
        address_map=draw(st.sampled_from(SMALL_MAPS)),
        controller_policy=draw(st.sampled_from(["in-order", "lookahead"])),
        tcl_s=cyc(1, 12),
        trcd_s=trcd,
        trp_s=trp,
        tras_s=tras,
        trc_s=trc,
        tccds_s=tccds,
        tccdl_s=tccdl,
        trrds_s=trrds,
        trrdl_s=trrdl,
        tfaw_s=tfaw,
        twtrs_s=twtrs,
        twtrl_s=twtrs + cyc(0, 4),
        trtw_s=cyc(1, 10),
        twr_s=cyc(1, 8),
        trtp_s=cyc(1, 4),
        min_efficient_burst_bytes=b.hbm.granule_bytes * draw(st.integers(1, 4)),
        switch_latency_cycles=draw(st.integers(0, 6)),
        cdc_sync_cycles=draw(st.integers(0, 3)),
    )


@st.composite
def small_design(draw: Any, board: BoardSpec, llm: LlmSpec) -> StreamingDesign:
    n_mac = draw(st.integers(1, 3))
    n_vec = draw(st.integers(1, 3))
    mac_ops: list[list[str]] = [[] for _ in range(n_mac)]
    vec_ops: list[list[str]] = [[] for _ in range(n_vec)]
    for op in ALL_OPS:
        if op in HBM_OPS:
            mac_ops[draw(st.integers(0, n_mac - 1))].append(op)
        elif draw(st.integers(0, 5)) == 0:
            mac_ops[draw(st.integers(0, n_mac - 1))].append(op)
        else:
            vec_ops[draw(st.integers(0, n_vec - 1))].append(op)
    engines = []
    for i, ops in enumerate(mac_ops):
        if not ops:
            continue
        engines.append(
            EngineSpec(
                name=f"mac{i}",
                ops=tuple(o for o in ALL_OPS if o in ops),
                lanes=draw(st.sampled_from([4, 16, 64, 256])),
                ports=draw(st.integers(1, 3)),
                port_width_bits=draw(st.sampled_from([64, 128, 256, 512])),
                burst_bytes=draw(st.sampled_from([32, 64, 128, 256, 512])),
                buffer_depth=draw(st.integers(1, 6)),
                max_outstanding=draw(st.integers(1, 4)),
                pipeline_latency_cycles=draw(st.integers(0, 10)),
                order=draw(st.sampled_from(["output", "input"])),
                tile_rows=draw(st.sampled_from([0, 0, 1, 3, 8])),
                tile_overhead_cycles=draw(st.integers(0, 12)),
                slr=draw(st.integers(0, 2)),
                scale_rows_per_cycle=draw(st.sampled_from([0, 0, 1, 2])),
            )
        )
    for i, ops in enumerate(vec_ops):
        if not ops:
            continue
        engines.append(
            EngineSpec(
                name=f"vec{i}",
                ops=tuple(o for o in ALL_OPS if o in ops),
                lanes=draw(st.sampled_from([1, 2, 4, 16])),
                pipeline_latency_cycles=draw(st.integers(0, 10)),
                slr=draw(st.integers(0, 2)),
            )
        )
    elementwise = ("rope", "attn_add", "silu_mul", "ffn_add")
    buffered = draw(st.sets(st.sampled_from(elementwise)))
    rest = [o for o in elementwise if o not in buffered]
    rotated = draw(st.sets(st.sampled_from(rest))) if rest else set()
    return StreamingDesign(
        name="gen",
        board=board.name,
        llm=llm.name,
        clock_hz=float(draw(st.integers(50, 500)) * 1_000_000),
        weight_bits=draw(st.sampled_from([4, 8, 16])),
        act_bits=8,
        kv_bits=draw(st.sampled_from([4, 8, 16])),
        act_quant=draw(st.sampled_from(["dynamic", "static"])),
        softmax=draw(st.sampled_from(["two-pass", "online"])),
        vector_chunk=draw(st.sampled_from([4, 8, 16, 64])),
        fifo_depth=draw(st.integers(1, 4)),
        fifo_latency_cycles=draw(st.integers(1, 3)),
        max_ctx=64,
        engines=tuple(engines),
        # the mechanisms that keep HLS dataflow designs below their ceilings (docs/streaming.md)
        operand_passes=draw(st.integers(1, 3)),
        buffered_ops=tuple(o for o in elementwise if o in buffered),
        rotation_ops=tuple(o for o in elementwise if o in rotated),
        softmax_passes=draw(st.integers(1, 3)),
        softmax_lanes=draw(st.sampled_from([0, 1, 4])),
        attn_head_parallel=draw(st.sampled_from([1, llm.kv_heads])),
        attn_q_serial=draw(st.booleans()),
        layer_io_cycles=draw(st.sampled_from([0, 0, 1, 17])),
        slr_crossing_cycles=draw(st.integers(0, 3)),
    )
