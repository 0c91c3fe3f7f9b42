"""The streaming-decode evaluator: same numbers as the streaming model, honest screen bounds, clear refusals."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hwmodel.dse import load_plan, read_report, run_sweep
from hwmodel.errors import SpecError

pytest.importorskip("fpga.streaming.engine")

from fpga.streaming.engine import load_design, simulate_token  # noqa: E402
from hwmodel.dse.streaming_eval import EVALUATOR, build_design, simulate  # noqa: E402


def test_program_reuse_across_clocks_equals_simulate_token() -> None:
    d = load_design("draft-u280").with_engine("linear", lanes=1024, ports=16)
    for mhz in (200.0, 300.0, 450.0):
        at = dataclasses.replace(d, clock_hz=mhz * 1e6)
        a, b = simulate(at, 512), simulate_token(d, 512, clock_hz=mhz * 1e6)
        assert (a.cycles, a.seconds, a.hbm_read_bytes) == (b.cycles, b.seconds, b.hbm_read_bytes)
        assert a.op_span_cycles == b.op_span_cycles


def test_parameters_map_onto_the_design() -> None:
    p = EVALUATOR.complete(
        {
            "clock_mhz": 250.0,
            "weight_bits": 4,
            "port_width_bits": 256,
            "attn.port_width_bits": 512,
            "linear.lanes": 1024,
            "fifo_depth": 4,
        }
    )
    d = build_design(p)
    assert d.clock_hz == 250e6 and d.weight_bits == 4 and d.fifo_depth == 4
    engines = {e.name: e for e in d.engines}
    assert engines["linear"].lanes == 1024 and engines["linear"].port_width_bits == 256
    assert engines["attn"].port_width_bits == 512  # the engine's own field beats the all-ports one
    assert all(
        e.port_width_bits == load_design("draft-u280").engine_of(e.ops[0]).port_width_bits
        for e in d.engines
        if not e.ports
    )


def test_metrics_are_consistent() -> None:
    p = EVALUATOR.complete({"clock_mhz": 300.0})
    m = EVALUATOR.run(p)
    assert m["tokens_per_s"] == pytest.approx(1 / m["latency_s"])
    assert m["energy_per_token_j"] == pytest.approx(m["power_w"] * m["latency_s"])
    assert m["run_clock_mhz"] == 300.0 and m["fits_hbm"] == 1.0
    assert m["latency_s"] == simulate_token("draft-u280", 512, clock_hz=300e6).seconds
    assert 0 < m["dsp_util"] < 1 and m["timing_slack"] == pytest.approx(m["reachable_clock_mhz"] / 300 - 1)


def test_clamp_policy_runs_at_the_reachable_clock() -> None:
    big = {"linear.lanes": 16384, "weight_bits": 8, "clock_mhz": 450.0}
    strict = EVALUATOR.run(EVALUATOR.complete(big))
    assert strict["timing_slack"] < 0  # over-packed: the heuristic expects less than 450 MHz
    clamped = EVALUATOR.run(EVALUATOR.complete({**big, "clock_policy": "clamp"}))
    assert clamped["run_clock_mhz"] == pytest.approx(strict["reachable_clock_mhz"])
    assert clamped["timing_slack"] == pytest.approx(0.0, abs=1e-12)
    assert clamped["latency_s"] >= strict["latency_s"]


@settings(max_examples=8)
@given(
    lanes=st.sampled_from([256, 1024, 4096]),
    ports=st.sampled_from([8, 16, 28]),
    bits=st.sampled_from([4, 8]),
    mhz=st.sampled_from([150.0, 300.0, 450.0]),
    ctx=st.sampled_from([0, 512, 2048]),
)
def test_screen_bounds_hold(lanes: int, ports: int, bits: int, mhz: float, ctx: int) -> None:
    """What the screen claims before simulating (exact metrics, the latency floor) holds after simulating."""
    p = EVALUATOR.complete(
        {"linear.lanes": lanes, "linear.ports": ports, "weight_bits": bits, "clock_mhz": mhz, "ctx": ctx}
    )
    assert EVALUATOR.screen is not None
    scr = EVALUATOR.screen(p)
    m = EVALUATOR.run(p)
    for k, v in scr.exact.items():
        assert m[k] == v
    lo, hi = scr.bounds["latency_s"]
    assert lo <= m["latency_s"] <= hi
    assert scr.bounds["tokens_per_s"][0] <= m["tokens_per_s"] <= scr.bounds["tokens_per_s"][1]


def _spec(tmp_path: Path, params: str, constraints: str = "") -> Path:
    path = tmp_path / "s.toml"
    path.write_text(
        f'[sweep]\nevaluator = "streaming-decode"\n[parameters]\n{params}\n'
        '[objectives]\nlatency_s = "min"\nenergy_per_token_j = "min"\n'
        f"[constraints]\n{constraints}\n"
    )
    return path


@pytest.mark.parametrize(
    "params, field, message",
    [
        ('"linaer.lanes" = [1024]', "parameters.linaer.lanes", "an engine of design 'draft-u280' (linear, attn"),
        ("[parameters.linear]\nlane = [1024]", "parameters.linear.lane", "a parameter of evaluator 'streaming-decode'"),
        (
            'design = "draft-u281"',
            "parameters.design",
            "a built-in design (draft-u280, draft-v80, flexllm-draft-u280, flexllm-u280-mem-opt",
        ),
        ('board = ["u280", "u55"]', "parameters.board", "a fpga-board spec name"),
        ("weight_bits = [6]", "parameters.weight_bits", "expected one of 4, 8, 16, got 6"),
        ("port_width_bits = [384]", "parameters.port_width_bits", "expected one of 32, 64, 128, 256, 512, 1024"),
    ],
)
def test_bad_streaming_specs_are_refused(tmp_path: Path, params: str, field: str, message: str) -> None:
    with pytest.raises(SpecError) as exc:
        load_plan(_spec(tmp_path, params))
    assert f"field '{field}'" in str(exc.value) and message in str(exc.value), str(exc.value)


def test_infeasible_constraints_on_the_real_evaluator(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="dsp_util <= 0.01 fails at all 3 points"):
        load_plan(_spec(tmp_path, '"linear.lanes" = [1024, 2048, 4096]', "dsp_util = { max = 0.01 }"))
    with pytest.raises(SpecError, match=r"latency_s <= 1e-05 fails at all 2 points .* before any simulation"):
        load_plan(_spec(tmp_path, "weight_bits = [4, 8]", "latency_s = { max = 1e-5 }"))


def test_small_sweep_end_to_end(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "clock_mhz = [200, 300]\nweight_bits = [4, 8]\n[parameters.linear]\nlanes = [1024, 16384]\n")
    plan = load_plan(spec)
    assert [a.name for a in plan.axes][-1] == "clock_mhz"  # innermost: consecutive points share a program
    stats = run_sweep(plan, tmp_path / "out", workers=1, progress=False)
    assert stats.remaining == 0 and stats.invalid == 0
    rep = read_report(plan, tmp_path / "out")
    assert rep.counts()["finished"] == 8
    infeasible = [r for r in rep.rows if not r.feasible]
    assert infeasible and all(r.row.params["linear.lanes"] == 16384 for r in infeasible)  # DSPs beyond the board
    assert all(not math.isnan(r.row.metrics["latency_s"]) for r in rep.rows if r.row.status == "ok")
    front = rep.fronts[("latency_s", "energy_per_token_j")]
    assert front and all(rep.rows[i].feasible for i in front)
