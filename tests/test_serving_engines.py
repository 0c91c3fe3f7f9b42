"""The serving simulator on the project's real device models (gpu.latency, fpga.instruction.engine): wiring, memory
facts, the step-table assumption, and clear errors for designs that do not match the cluster."""

from __future__ import annotations

import pytest

from hwmodel.errors import SpecError
from hwmodel.serving.cluster import load_cluster, resolve_cluster
from hwmodel.serving.devices import DecodeTable, EngineFactory
from hwmodel.serving.simulator import simulate
from hwmodel.specs import library
from hwmodel.workload.requests import Request
from tests.test_serving_sim import check_invariants, cluster_from


@pytest.fixture(scope="module")
def factory() -> EngineFactory:
    return EngineFactory(cache=False)


def test_hybrid_node_on_real_engines(factory: EngineFactory) -> None:
    c = resolve_cluster(load_cluster("a100+7xu280"))
    reqs = [Request(i, 0.01 * i, 64, 8) for i in range(10)]
    res = simulate(c, reqs, factory=factory, record_segments=True)
    check_invariants(res, reqs)
    gpu, fpga = res.devices[0], res.devices[1]
    from fpga.instruction.engine import InstructionEngine
    from gpu.latency import GpuEngine

    inner = [getattr(d.model.engine, "engine", d.model.engine) for d in (gpu, fpga)]  # unwrap serving declarations
    assert isinstance(inner[0], GpuEngine) and isinstance(inner[1], InstructionEngine)
    assert fpga.model.weights_bytes == fpga.model.engine.weights_bytes
    assert fpga.model.kv_bytes(100) == fpga.model.engine.kv_bytes(100)
    assert fpga.model.memory_bytes == library().board("u280").memory_bytes
    assert fpga.model.link.name == "pcie-gen3-x16" and gpu.model.link.name == "pcie-gen4-x16"
    assert gpu.model.padded_batch  # HF pads a batch to its longest request
    assert all(rs.path_kind == "host-staged" for rs in res.requests if rs.steps_decode_pool)


def test_fpga_decode_is_a_non_decreasing_step_function(factory: EngineFactory) -> None:
    """The 'steps' decode table is exact only for non-decreasing per-context times: check it on the design."""
    c = resolve_cluster(load_cluster("a100+7xu280"))
    engine = factory.build(c.spec.nodes[0].decode[0], c.llm, library(), "x", "y").engine
    values = [engine.decode_s(ctx) for ctx in range(20, 90)]
    assert all(a <= b for a, b in zip(values, values[1:]))
    table = DecodeTable(engine.decode_s, "steps", c.llm.max_position - 1)
    assert table.steps_s(20, 70) == pytest.approx(sum(values), rel=1e-12)
    assert table.calls < 40


def test_design_for_another_llm_is_refused(factory: EngineFactory) -> None:
    c = cluster_from(
        [{"gpus": [{"device": "a100-40gb", "count": 1}], "fpgas": [{"design": "glitches-u280", "count": 1}]}],
        llm="qwen2.5-0.5b",
    )
    with pytest.raises(
        SpecError, match="nodes\\[0\\].decode\\[0\\].device.*a design for the cluster's LLM 'qwen2.5-0.5b'"
    ):
        simulate(c, [Request(0, 0.0, 8, 2)], factory=factory)


def test_unknown_design_is_refused(factory: EngineFactory) -> None:
    with pytest.raises(SpecError, match="nodes\\[0\\].decode\\[0\\].device.*a GPU spec or an FPGA design"):
        cluster_from([{"fpgas": [{"design": "no-such-design", "count": 1}]}])
