"""GPU power: bounded by idle and TDP, monotone in utilisation, energy = power x time, the fitted A100 point."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpu.latency import GpuEngine
from gpu.power import board_power_w, utilisation
from hwmodel.engine import Phase
from hwmodel.specs import library


@given(u1=st.floats(0.0, 1.0), u2=st.floats(0.0, 1.0), gamma=st.floats(0.05, 3.0))
def test_power_is_bounded_and_monotone(u1: float, u2: float, gamma: float) -> None:
    gpu = library().gpu("a100-80gb")
    p1, p2 = float(board_power_w(gpu, u1, gamma)), float(board_power_w(gpu, u2, gamma))
    assert gpu.idle_power_w <= p1 <= gpu.tdp_w
    if u1 <= u2:
        assert p1 <= p2
    assert float(board_power_w(gpu, 0.0, gamma)) == gpu.idle_power_w
    assert float(board_power_w(gpu, 1.0, gamma)) == gpu.tdp_w


def test_utilisation_is_clipped() -> None:
    gpu = library().gpu("rtx3090")
    assert float(utilisation(gpu, 1e15, 0.0, 1e-3, 16)) == 1.0
    assert float(utilisation(gpu, 0.0, 0.0, 1.0, 16)) == 0.0


@pytest.mark.parametrize(
    "gpu, llm, fw",
    [("a100-40gb", "llama2-7b", "hf"), ("rtx3090", "qwen2.5-0.5b", "vllm"), ("orin-nano", "qwen2.5-0.5b", "edge-w8a8")],
)
def test_every_phase_between_idle_and_tdp(gpu: str, llm: str, fw: str) -> None:
    e = GpuEngine(gpu, llm, fw)
    assert e.power_w(Phase.IDLE) == e.gpu.idle_power_w
    for phase in Phase:
        assert e.gpu.idle_power_w <= e.power_w(phase) <= e.gpu.tdp_w
    assert e.power_w(Phase.DECODE) > e.power_w(Phase.IDLE)


def test_energy_is_power_times_time() -> None:
    e = GpuEngine("a100-80gb", "qwen2.5-math-7b", "vllm")
    steps = e.decode_steps_s(200, 50)
    power = np.array([e.decode_power_w(c) for c in range(200, 250)])
    assert e.decode_energy_j(200, 50) == pytest.approx(float(np.sum(steps * power)), rel=1e-12)
    cost = e.prefill_cost(512)
    assert cost.energy_j == pytest.approx(cost.power_w * cost.time_s)


def test_a100_hf_decode_power_matches_the_published_efficiency() -> None:
    """0.246 tokens/s/W at 24.26 ms/token is ~168 W: the point the power exponent is fitted on."""
    e = GpuEngine("a100-40gb", "llama2-7b", "hf")
    steps = e.decode_steps_s(1536, 512)
    watts = e.decode_energy_j(1536, 512) / steps.sum()
    assert watts == pytest.approx(1 / (0.02426 * 0.246), rel=0.02)
    assert 1 / (steps.mean() * watts) == pytest.approx(0.246, rel=0.02)
