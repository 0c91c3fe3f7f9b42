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


@st.composite
def small_unit_llm(draw: Any, split: str, n_units: int) -> LlmSpec:
    """A small LLM the split can divide over ``n_units`` (heads: KV heads and intermediate; columns: those and the
    hidden size; layers: layers)."""
    llm = draw(small_llm(max_layers=3))
    if split in ("heads", "columns"):
        return dataclasses.replace(
            llm,
            kv_heads=n_units,
            heads=n_units * draw(st.sampled_from([1, 2])),
            intermediate=n_units * draw(st.sampled_from([8, 20, 32])),
            hidden=n_units * draw(st.sampled_from([8, 12, 32])) if split == "columns" else llm.hidden,
        )
    return dataclasses.replace(llm, layers=draw(st.integers(n_units, n_units + 1)))


@st.composite
def small_unit_design(draw: Any, board: BoardSpec, llm: LlmSpec, split: str, n_units: int) -> StreamingDesign:
    """Several units of small drawn engines (each unit's engines from :func:`small_design`, on pseudo-channels of its
    own, some shared inside a unit), a drawn placement, split and links (fpga/streaming/units.py)."""
    from fpga.streaming.unit_spec import LinkSpec, UnitSpec
    from fpga.streaming.units import resolve_units

    host = draw(st.sampled_from([(), ("embed",), ("embed", "final_norm", "lm_head", "argmax"), ("argmax",)]))
    base = draw(small_design(board, llm))
    engines: list[EngineSpec] = []
    units = []
    chan = 0
    for u in range(n_units):
        d = base if u == 0 else draw(small_design(board, llm))
        own = []
        for e in d.engines:
            ops = tuple(o for o in e.ops if o not in host)
            own.append(dataclasses.replace(e, name=f"u{u}.{e.name}", ops=ops))
        n_ports = sum(e.ports for e in own)
        channels = tuple(range(chan, chan + n_ports))
        chan += n_ports
        with_ports = [i for i, e in enumerate(own) if e.ports]
        if len(with_ports) >= 2 and draw(st.booleans()):  # one engine's ports onto others' channels of the unit
            i = draw(st.sampled_from(with_ports))
            own[i] = dataclasses.replace(own[i], channels=tuple(draw(st.permutations(channels))[: own[i].ports]))
        engines += own
        units.append(UnitSpec(name=f"u{u}", engines=tuple(e.name for e in own), channels=channels))
    names = tuple(u.name for u in units)
    kinds = ["ring", "crossbar"] + (["inter-fpga"] if n_units == 2 else [])
    links = (
        LinkSpec(
            name="l0",
            kind=draw(st.sampled_from(kinds)),
            units=names,
            width_bits=draw(st.sampled_from([8, 32, 64, 256])),
            clock_hz=float(draw(st.sampled_from([0, 100, 322])) * 1_000_000),
            fifo_depth=draw(st.integers(1, 4)),
            latency_cycles=draw(st.integers(0, 6)),
        ),
    )
    per_unit_kv = llm.kv_heads // n_units if split in ("heads", "columns") else llm.kv_heads
    design = dataclasses.replace(
        base,
        name="gen-units",
        attn_head_parallel=base.attn_head_parallel if per_unit_kv % base.attn_head_parallel == 0 else 1,
        engines=tuple(engines),
        host_ops=host,
        split=split,
        exchange_bits=draw(st.sampled_from([8, 16, 32])),
        units=tuple(units),
        links=links,
    )
    return resolve_units(design)
