"""The reasoning-replay evaluator: FPGA draft designs judged inside the system-A replay."""

from __future__ import annotations

from pathlib import Path

import pytest

from hwmodel.dse import load_plan, read_report, run_sweep
from hwmodel.errors import SpecError

pytest.importorskip("hwmodel.reasoning.system")
pytest.importorskip("fpga.streaming.engine")

from fpga.streaming.engine import simulate_token  # noqa: E402
from hwmodel.dse.replay_eval import EVALUATOR  # noqa: E402


def _spec(tmp_path: Path, params: str) -> Path:
    path = tmp_path / "s.toml"
    path.write_text(
        f'[sweep]\nevaluator = "reasoning-replay"\n[parameters]\nproblems = 4\n{params}\n'
        '[objectives]\nlatency_per_problem_s = "min"\nenergy_per_token_j = "min"\n'
    )
    return path


def test_draft_designs_inside_the_replay(tmp_path: Path) -> None:
    plan = load_plan(_spec(tmp_path, "clock_mhz = [200, 300]\n"))
    stats = run_sweep(plan, tmp_path / "out", workers=1, progress=False)
    assert stats.remaining == 0 and stats.invalid == 0
    rows = {r.row.params["clock_mhz"]: r.row.metrics for r in read_report(plan, tmp_path / "out").rows}
    slow, fast = rows[200.0], rows[300.0]
    for m in (slow, fast):
        assert m["latency_total_s"] == pytest.approx(4 * m["latency_per_problem_s"])
        assert 0 < m["stall_ratio"] < 1 and 0 < m["util_draft"] <= 1 and m["comm_share"] < 0.01
        assert m["speedup_vs_baseline"] > 1  # the FPGA draft with T2 beats three GPUs on the same problems
    # the draft design is the configuration's (draft-u280), run at the point's clock
    assert fast["draft_token_s"] == simulate_token("draft-u280", 512, clock_hz=300e6).seconds
    assert fast["draft_token_s"] < slow["draft_token_s"] and fast["latency_total_s"] <= slow["latency_total_s"]


def test_a_draft_design_for_another_llm_is_refused(tmp_path: Path) -> None:
    with pytest.raises(
        SpecError,
        match=r"field 'parameters.design': expected a draft design for config1's draft "
        r"LLM qwen2.5-0.5b \(flexllm-u280 runs llama-3.2-1b\)",
    ):
        load_plan(_spec(tmp_path, 'design = "flexllm-u280"\n'))
    with pytest.raises(SpecError, match="field 'parameters.policy': expected one of 'heteroreason'"):
        load_plan(_spec(tmp_path, 'policy = "baseline"\n'))
    assert EVALUATOR.param("linear.lanes") is not None and EVALUATOR.param("ctx") is None
