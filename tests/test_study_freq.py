"""Frequency-scaling study: linear projection vs the cycle model (HBM in its own clock domain)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

pytest.importorskip("fpga.streaming.engine")

from hwmodel.cli import main  # noqa: E402
from hwmodel.dse.freq import run_freq_study  # noqa: E402


@pytest.fixture(scope="module")
def study():  # type: ignore[no-untyped-def]
    return run_freq_study("draft-u280", 200e6, 300e6, 512, steps=4)


def test_hbm_keeps_the_token_from_scaling_linearly(study) -> None:  # type: ignore[no-untyped-def]
    tok = study.token
    assert tok.linear_s == pytest.approx(tok.measured_s * 200 / 300)
    # the memory does not speed up with the kernel clock: slower than projected, faster than at 200 MHz,
    # never below the bandwidth floor
    assert tok.linear_s < tok.model_s < tok.measured_s
    assert study.bandwidth_floor_s <= tok.model_s
    assert 0 < tok.efficiency < 1 and tok.verdict == "HBM-bound"
    assert tok.bw_gain < 1.5  # bytes/s grew less than the clock


def test_operators_are_classified(study) -> None:  # type: ignore[no-untyped-def]
    by_op = {o.op: o for o in study.operators}
    assert set(by_op) >= {"qkv", "attention", "gate_up", "down", "lm_head", "silu_mul"}
    for o in study.operators:
        assert o.linear_s == pytest.approx(o.measured_s * 2 / 3)
        assert (o.efficiency >= 0.9) == (o.verdict == "scales with the clock")
        if o.verdict == "HBM-bound":
            assert o.bw_gain - 1 < 0.8 * 0.5
    # the weight-streaming projections saturate their channels
    assert by_op["gate_up"].verdict == "HBM-bound"


def test_curve_starts_at_the_measured_clock(study) -> None:  # type: ignore[no-untyped-def]
    assert study.curve_hz[0] == 200e6 and study.curve_hz[-1] == pytest.approx(450e6)
    assert study.curve_model_s[0] == pytest.approx(study.token.measured_s)
    assert min(study.curve_model_s) >= study.bandwidth_floor_s


def test_cli_study_freq(tmp_path: Path) -> None:
    r = CliRunner().invoke(
        main,
        [
            "study",
            "freq",
            "--design",
            "draft-u280",
            "--measured-mhz",
            "200",
            "--target-mhz",
            "300",
            "--steps",
            "3",
            "--out",
            str(tmp_path),
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["token"]["verdict"] == "HBM-bound" and len(d["files"]) == 3
    assert (tmp_path / "freq_draft-u280_200_to_300mhz.png").stat().st_size > 1000
    r = CliRunner().invoke(main, ["study", "freq", "--design", "nope", "--measured-mhz", "200", "--target-mhz", "300"])
    assert r.exit_code == 2 and "unknown streaming design 'nope'" in r.output and "Traceback" not in r.output
