"""Resource estimates and the power model (static + dynamic), against the board and the on-board power log."""

from __future__ import annotations

import pytest

from fpga.streaming import power
from fpga.streaming.design import load_design
from fpga.streaming.engine import StreamingEngine
from fpga.streaming.resources import check_fits, estimate
from hwmodel.engine import Phase


def test_dsp_packing_and_totals() -> None:
    d = load_design("draft-u280")
    use = estimate(d)
    assert use.per_engine["linear"]["dsp"] == 2048 // 2  # two int8 MACs per DSP48E2
    f = estimate(load_design("flexllm-u280-mem-opt-new"))
    assert f.per_engine["linear"]["dsp"] == 2048 // 4  # four int4 MACs per DSP48E2
    assert use.lut == sum(e["lut"] for e in use.per_engine.values()) + 10_000 + use.blocks["kvmu"]["lut"]
    assert all(0 < v < 1 for v in use.utilization(d.board_spec()).values())
    check_fits(d)


def test_more_lanes_and_ports_cost_more() -> None:
    d = load_design("draft-u280")
    small, big = estimate(d.with_engine("linear", lanes=1024, ports=16)), estimate(d)
    for k in ("lut", "ff", "dsp", "bram18k"):
        assert getattr(big, k) > getattr(small, k)


def test_fabric_scale_is_the_fit_to_the_power_log() -> None:
    assert power.fit_fabric_scale() == pytest.approx(power.k_fabric(), rel=0.01)


def test_power_consistent_with_on_board_log() -> None:
    """FlexLLM decode draws the log's active median by construction; the draft design is predicted inside the
    log's 37-60 W envelope on the same board; idle is the static floor."""
    samples = power.power_log_w()
    lo, hi = min(samples), max(samples)
    flex = StreamingEngine("flexllm-u280-mem-opt-new")
    assert flex.power_w(Phase.IDLE) == pytest.approx(lo, abs=0.1)
    assert flex.power_w(Phase.DECODE) == pytest.approx(power.active_median_w(), rel=0.01)
    draft = StreamingEngine("draft-u280")
    p = draft.power_w(Phase.DECODE)
    assert lo < p < hi
    assert draft.power_w(Phase.INGEST) <= p + 1.0
    e = draft.energy_per_token_j(512)
    assert e == pytest.approx(p * draft.decode_s(512))
