"""The published designs of examples/designs/published/ load and decode (issue 33 item 7).

Each is a public open-source FPGA LLM decoder written in the streaming design language, every field sourced to a
file and commit of its repository (examples/designs/published/README.md). These tests keep them loading and
running in CI, and check properties a decode must have whatever its numbers: a token streams at least the
weights of its layers, is no faster than its ports' bandwidth allows, and the two-unit LoopLynx fold (16 ports)
beats the one-unit build (8 ports) on the same bytes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fpga.streaming.design import load_design
from fpga.streaming.engine import simulate_token
from hwmodel import specs
from hwmodel.graph import params_of

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = ROOT / "examples" / "designs" / "published"
DESIGNS = {  # file -> with_lm_head (LoopLynx runs its LM head on the host: predicted as an ingested token)
    "hlstransform-u50.toml": True,
    "looplynx-x1-u50.toml": False,
    "looplynx-x2-u50.toml": False,
    "terafly-opt-1.3b-u50.toml": False,
    # the same designs as two units on a ring (their head is on the host through host_ops)
    "looplynx-x2-u50-units.toml": True,
    "terafly-opt-1.3b-u50-units.toml": True,
    # spatial: one decoder layer per host call, head on the host through host_ops
    "spatial-llama-7b-u280.toml": True,
    # HLSTransform and TeraFly's two units with their phases said (execution = "temporal", fpga/streaming/temporal.py)
    "hlstransform-u50-temporal.toml": True,
    "terafly-opt-1.3b-u50-units-temporal.toml": True,
    "terafly-opt-1.3b-u50-columns.toml": True,  # split by output columns (the routers all-gather output halves)
}


@pytest.fixture(scope="module", autouse=True)
def _example_llms():
    specs.set_extra_spec_dirs([ROOT / "examples" / "llms"])
    yield
    specs.set_extra_spec_dirs([])


def test_every_published_design_is_listed():
    assert sorted(p.name for p in PUBLISHED.glob("*.toml") if p.name != "measured.toml") == sorted(DESIGNS)


@pytest.fixture(scope="module")
def tokens():
    return {name: simulate_token(PUBLISHED / name, ctx=16, with_lm_head=lm) for name, lm in DESIGNS.items()}


@pytest.mark.parametrize("name", sorted(DESIGNS))
def test_published_design_decodes(name, tokens):
    design = load_design(PUBLISHED / name)
    r = tokens[name]
    llm = design.llm_spec()
    weight_bytes = params_of(llm).weights * design.weight_bits // 8  # every layer's projections, once per token
    assert r.cycles > 0
    assert r.hbm_read_bytes >= weight_bytes
    # no faster than the design's ports can deliver what it read
    assert r.seconds >= r.hbm_read_bytes / r.ports_peak_bw_bytes_per_s


def test_looplynx_two_unit_fold_beats_one_unit(tokens):
    one, two = tokens["looplynx-x1-u50.toml"], tokens["looplynx-x2-u50.toml"]
    # same model and bytes, up to each port's last partial request (8 vs 16 shares of every matrix)
    assert two.hbm_read_bytes == pytest.approx(one.hbm_read_bytes, rel=1e-3)
    assert two.seconds < one.seconds


@pytest.mark.parametrize("name", ["looplynx-x2-u50", "terafly-opt-1.3b-u50"])
def test_two_unit_files_move_the_folds_weights_and_exchange_over_the_ring(name, tokens):
    fold, units = tokens[f"{name}.toml"], tokens[f"{name}-units.toml"]
    llm = load_design(PUBLISHED / f"{name}.toml").llm_spec()
    assert [u["unit"] for u in units.units] == ["u0", "u1"]
    # partial sums of the hidden vector, fp32, after the O and down projections of every layer, both ways
    assert units.exchange_bytes == {"o_proj": 2 * llm.layers * llm.hidden * 4, "down": 2 * llm.layers * llm.hidden * 4}
    assert sum(x["bytes"] for x in units.links) == sum(units.exchange_bytes.values())
    # the same MACs (bytes differ by what the units language places: scales and biases of the input-split O and
    # down projections are each unit's own; TeraFly's units keep biases and scales on chip, the fold streams them)
    assert units.macs == fold.macs


def test_spatial_design_streams_each_matrix_over_its_own_regions_ports(tokens):
    # Crazy-James26/LLM_FPGA kernel.cfg: O on HBM[7..8], up on HBM[9..12], down on HBM[13..16], each port a
    # contiguous share of its matrix's rows (int8, scales compiled in: no metadata from HBM)
    r = tokens["spatial-llama-7b-u280.toml"]
    llm = load_design(PUBLISHED / "spatial-llama-7b-u280.toml").llm_spec()
    read: dict[str, int] = {}
    ports: dict[str, int] = {}
    for c in r.channels:
        read[c["engine"]] = read.get(c["engine"], 0) + c["read_bytes"]
        ports[c["engine"]] = ports.get(c["engine"], 0) + 1
    assert ports == {"qkv": 6, "attn": 8, "o": 2, "up": 4, "down": 4}
    assert read["o"] == llm.hidden * llm.hidden
    assert read["up"] == read["down"] == llm.hidden * llm.intermediate
    # the three projections folded onto six ports: each 4,096-byte row cut in six 32-byte-granule shares
    qkv = 3 * llm.hidden * llm.hidden
    assert qkv <= read["qkv"] <= qkv * 6 * 704 // 4096
    # one layer per call: the MACs of one layer's projections plus attention over ctx + 1 cached tokens
    assert r.macs == qkv + llm.hidden * llm.hidden + 2 * llm.hidden * llm.intermediate + 2 * 17 * llm.hidden


def test_terafly_column_file_all_gathers_the_halves(tokens):
    heads, cols = tokens["terafly-opt-1.3b-u50-units.toml"], tokens["terafly-opt-1.3b-u50-columns.toml"]
    llm = load_design(PUBLISHED / "terafly-opt-1.3b-u50-columns.toml").llm_spec()
    # each unit's half to the other, fp32: its heads' attention output, O's and fc2's hidden halves, ReLU's half
    half = {"attention": llm.heads * llm.head_dim // 2, "o_proj": llm.hidden // 2}
    half.update(silu_mul=llm.intermediate // 2, down=llm.hidden // 2)
    assert cols.exchange_bytes == {k: 2 * llm.layers * v * 4 for k, v in half.items()}
    assert sum(x["bytes"] for x in cols.links) == sum(cols.exchange_bytes.values())
    assert cols.macs == heads.macs  # the same work, split the other way
