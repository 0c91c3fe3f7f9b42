"""The instruction-decode evaluator: the instruction-driven model's numbers, prefetch limits, clear refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from hwmodel.dse import load_plan, read_report, run_sweep
from hwmodel.errors import SpecError

pytest.importorskip("fpga.instruction.engine")

from fpga.instruction.engine import InstructionEngine, load_design  # noqa: E402
from fpga.instruction.prefetch import max_prefetch_ratio  # noqa: E402
from hwmodel.dse.instruction_eval import EVALUATOR, build_design  # noqa: E402


def test_metrics_match_the_instruction_model() -> None:
    p = EVALUATOR.complete({"prefetch_ratio": 2, "clock_mhz": 225.0, "datamover.outstanding": 4})
    m = EVALUATOR.run(p)
    d = load_design("glitches-u280").with_params({"prefetch_ratio": 2, "datamover.outstanding": 4})
    ref = InstructionEngine(d, clock_hz=225e6).decode(512)
    assert m["latency_s"] == ref.seconds and m["cycles"] == ref.cycles
    assert m["energy_per_token_j"] == pytest.approx(m["power_w"] * m["latency_s"])
    assert m["prefetch_fits"] == 1.0 and m["fits_hbm"] == 1.0
    assert build_design(p).datamover.outstanding == 4
    assert EVALUATOR.screen is not None
    assert EVALUATOR.screen(p).bounds["latency_s"][0] <= m["latency_s"]


def _spec(tmp_path: Path, params: str) -> Path:
    path = tmp_path / "s.toml"
    path.write_text(
        f'[sweep]\nevaluator = "instruction-decode"\n[parameters]\n{params}\n'
        '[objectives]\nlatency_s = "min"\nenergy_per_token_j = "min"\n'
    )
    return path


def test_prefetch_beyond_the_buffers_is_screened_out(tmp_path: Path) -> None:
    kmax = max_prefetch_ratio(load_design("glitches-u280"))
    plan = load_plan(_spec(tmp_path, f"prefetch_ratio = [{kmax}, {kmax + 1}]\nclock_mhz = [225]"))
    assert len(plan.screened_out) == 1
    (why,) = [w for _m, w in plan.screened_out.values()]
    assert why.startswith("prefetch_fits >= 1")
    run_sweep(plan, tmp_path / "out", workers=1, progress=False)
    rep = read_report(plan, tmp_path / "out")
    assert [r.row.params["prefetch_ratio"] for r in rep.rows if r.feasible] == [kmax]


@pytest.mark.parametrize(
    "params, field, message",
    [
        (
            "[parameters.datamover]\nport_width_bits = [384]",
            "parameters.datamover.port_width_bits",
            "expected one of 64, 128, 256, 512, 1024, got 384",
        ),
        (
            "[parameters.mpe]\nrow_lane = [8]",
            "parameters.mpe.row_lane",
            "a parameter of evaluator 'instruction-decode'",
        ),
        (
            'design = "glitches-u281"',
            "parameters.design",
            "a built-in instruction design (draft-instr-u280, glitches-u280",
        ),
        ("prefetch_ratio = [0]", "parameters.prefetch_ratio", "at least 1"),
    ],
)
def test_bad_instruction_specs_are_refused(tmp_path: Path, params: str, field: str, message: str) -> None:
    with pytest.raises(SpecError) as exc:
        load_plan(_spec(tmp_path, params))
    assert f"field '{field}'" in str(exc.value) and message in str(exc.value), str(exc.value)
