"""System A on the project's real device models (the GPU model, PCIe, KVMU; the FPGA streaming model when this
checkout has it), and the `hwmodel workload` / `hwmodel reason` commands."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from hwmodel.cli import main
from hwmodel.errors import SpecError
from hwmodel.reasoning.metrics import summarize
from hwmodel.reasoning.runner import run_trace
from hwmodel.reasoning.system import ReasoningSystem, build_platform, load_system
from hwmodel.schema import build
from hwmodel.workload.generator import generate
from hwmodel.workload.trace import TraceHeader, replay_of
from hwmodel.workload.traceio import write_trace

HAS_FPGA = importlib.util.find_spec("fpga.streaming.engine") is not None


@pytest.fixture(scope="module")
def trace():  # noqa: ANN201
    return generate("math500", "qwen2.5-math-7b", True, limit=25)


@pytest.mark.parametrize(
    "policies",
    [
        ("baseline", "step-ahead", "edge-draft"),
        pytest.param(
            ("heteroreason", "heteroreason-reprefill"),
            marks=pytest.mark.skipif(not HAS_FPGA, reason="no fpga.streaming.engine"),
        ),
    ],
)
def test_real_device_models_commit_the_trace_and_keep_communication_small(trace, policies) -> None:  # noqa: ANN001
    base = summarize(run_trace(trace, "baseline", build_platform("config1", "baseline"), "config1"))
    for name in policies:
        rows = run_trace(trace, name, build_platform("config1", name), "config1")
        for p, r in zip(trace.problems, rows):
            assert r.committed_tokens == replay_of(p, trace.header).committed_tokens(p)
        s = summarize(rows)
        assert 0 < s.comm_share < 1e-3  # tokens, not KV caches, cross the links per step
        assert 0 <= s.stall_ratio < 1 and 0 < s.util_target <= 1
        if name != "edge-draft":
            assert s.latency_total_s <= base.latency_total_s * (1 + 1e-9)


def test_system_files_are_validated(tmp_path: Path) -> None:
    s = load_system("config2")
    assert s.target_llm == "qwen2.5-math-1.5b" and "enforce-eager" in s.sources["devices.server.framework"]
    bad = tmp_path / "bad.toml"
    bad.write_text(Path(s.origin).read_text().replace('"qwen2.5-math-1.5b"', '"gpt-9"'))
    with pytest.raises(SpecError, match="target_llm"):
        load_system(str(bad))
    with pytest.raises(SpecError, match="fpga_clok_hz"):
        build(ReasoningSystem, {"fpga_clok_hz": 1}, path="x.toml")
    bad.write_text(Path(s.origin).read_text().replace('prm = { value = "server"', 'prm = { value = "servr"'))
    with pytest.raises(SpecError, match=r"roles\.prm.*servr"):
        load_system(str(bad))


def test_workload_and_reason_commands(tmp_path: Path, trace) -> None:  # noqa: ANN001
    runner = CliRunner()
    path = tmp_path / "t.jsonl"
    r = runner.invoke(main, ["workload", "generate", "--dataset", "gsm8k", "--limit", "8", "--out", str(path)])
    assert r.exit_code == 0, r.output
    r = runner.invoke(main, ["workload", "validate", str(path)])
    assert r.exit_code == 0 and "valid, 8 problems" in r.output
    r = runner.invoke(main, ["workload", "stats", str(path), "--json"])
    assert json.loads(r.stdout)["problems"] == 8
    lines = path.read_text().splitlines()
    lines[3] = lines[3].replace('"prompt_tokens":', '"prompt_tokenz":')
    path.write_text("\n".join(lines))
    r = runner.invoke(main, ["workload", "validate", str(path)])
    assert r.exit_code == 2 and f"{path}:4: field 'prompt_tokenz'" in r.output
    good = write_trace(trace, tmp_path / "m.jsonl")
    r = runner.invoke(
        main,
        [
            "reason",
            "run",
            "--trace",
            str(good),
            "--policy",
            "step-ahead",
            "--json",
            "--csv",
            str(tmp_path / "rows.csv"),
        ],
    )
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["problems"] == len(trace.problems)
    assert len((tmp_path / "rows.csv").read_text().splitlines()) == len(trace.problems) + 1
    r = runner.invoke(
        main,
        [
            "reason",
            "timeline",
            "--trace",
            str(good),
            "--problem",
            trace.problems[0].id,
            "--policy",
            "baseline",
            "--out",
            str(tmp_path / "tl.json"),
        ],
    )
    assert r.exit_code == 0 and json.loads((tmp_path / "tl.json").read_text())["traceEvents"]
    r = runner.invoke(main, ["reason", "run", "--trace", str(good), "--system", "config9"])
    assert r.exit_code == 2 and "config1" in r.output


def test_cosimulation_with_the_functional_draft_model(tmp_path: Path) -> None:
    """The heteroreason replay drives the real functional W8A8 model (a tiny synthetic Qwen2-shaped LLM, so the
    test is quick): the committed draft steps' tokens are the model's own greedy tokens, at their positions."""
    functional = pytest.importorskip("fpga.functional.model")
    import dataclasses as dc

    from fpga.kvmu.model import Kvmu
    from fpga.kvmu.vcd import read_vcd
    from hwmodel.reasoning.cosim import cosimulate
    from hwmodel.specs import library

    try:  # the test doubles of test_reasoning.py (a module of the tests folder, a package or not)
        from test_reasoning import build_problem, platform_for
    except ImportError:
        from tests.test_reasoning import build_problem, platform_for

    tiny = dc.replace(
        library().llm("qwen2.5-0.5b"),
        name="tiny-qwen2",
        layers=1,
        hidden=64,
        heads=2,
        kv_heads=1,
        head_dim=32,
        intermediate=128,
        vocab=512,
    )
    problem = build_problem([(False, False), (True, False), (True, True), (False, False)], [6, 5, 7, 4, 3], True)
    header = TraceHeader(backtracking=True)
    model = functional.DraftModel.from_synthetic(tiny, seed=3, capacity=256, kvmu=Kvmu(256, record=True))
    result = cosimulate(
        problem, header, platform_for("heteroreason"), model, clock_hz=200e6, vcd_path=tmp_path / "kvmu.vcd"
    )
    rp = replay_of(problem, header)
    assert model.valid == problem.prompt_tokens + rp.committed_tokens(problem)
    # replay the committed context through a fresh model: each committed draft step is what the model drafts
    check = functional.DraftModel.from_synthetic(tiny, seed=3, capacity=256)
    kv = result.kv_tokens
    for i in rp.committed:
        c, n = rp.context_tokens[i], problem.attempts[i].tokens
        if problem.attempts[i].by == "draft":
            check.prefill(kv[:c])
            assert [check.decode() for _ in range(n)] == kv[c : c + n]
    assert read_vcd(tmp_path / "kvmu.vcd")
