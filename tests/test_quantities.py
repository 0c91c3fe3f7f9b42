"""One number per quantity: the API, the CLI's ``--json`` and the validation row of the same point agree, for
power, energy per token, tokens/s/W, latency and throughput, over GPU, streaming and instruction-driven engines
(all computed by :mod:`hwmodel.quantities`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import hwmodel as hw
from hwmodel.cli import main

ROOT = Path(__file__).resolve().parent.parent


def _cli(*args: str) -> dict:
    res = CliRunner().invoke(main, [*args, "--json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def _row_value(family: str, point_id: str) -> float:
    """The model value the validation table prints for one calibration point (the provider's ``r.model``)."""
    from calibration.family import get_family, report_family
    from calibration.measurements import load_measurements

    fam = get_family(family)
    pts = [p for p in load_measurements(fam.measurements_path) if p.id == point_id]
    assert len(pts) == 1, point_id
    return report_family(fam, pts)[0].model


def _same_point(api: hw.OpTiming, cli: dict) -> None:
    for k in ("seconds", "power_w", "energy_j", "tokens_per_s", "tokens_per_s_per_w"):
        key = {"seconds": "seconds_per_token", "energy_j": "energy_per_token_j"}.get(k, k)
        assert getattr(api, k) == cli[key], k


def test_gpu_point_window_and_validation_rows_agree() -> None:
    g = hw.gpu_engine("a100-40gb", "llama2-7b", framework="hf")
    api = hw.decode(g, ctx=1536)
    out = _cli(
        "gpu",
        "decode",
        "--gpu",
        "a100-40gb",
        "--llm",
        "llama2-7b",
        "--framework",
        "hf",
        "--ctx",
        "1536",
        "--output-tokens",
        "512",
    )
    _same_point(api, out["decode"])
    assert out["power_w"] == api.power_w and out["time_s"] == api.seconds  # the cost table's figures too
    assert api.power_w == g.decode_power_w(1536)  # power at the context asked for, not the reference context
    w = hw.decode_window(g, 1536, 512)
    assert out["window"] == w.to_dict()
    assert _row_value("gpu", "glitches-a100-hf-llama2-energy") == w.tokens_per_s_per_w
    assert _row_value("gpu", "glitches-a100-hf-llama2-decode") == w.seconds_per_token


def test_instruction_point_window_and_validation_row_agree() -> None:
    i = hw.instruction_engine("glitches-u280", prefetch_ratio=1)
    api = hw.decode(i, ctx=1536)
    out = _cli(
        "fpga",
        "instruction",
        "run",
        "--design",
        "glitches-u280",
        "--ratio",
        "1",
        "--ctx",
        "1536",
        "--output-tokens",
        "512",
    )
    _same_point(api, out["decode"])
    assert out["power_w"] == api.power_w
    w = hw.decode_window(i, 1536, 512)
    assert out["window"] == w.to_dict()
    assert _row_value("fpga-instruction", "glitches-u280-energy") == w.tokens_per_s_per_w
    assert _row_value("fpga-instruction", "glitches-u280-decode") == w.seconds_per_token
    doc = (ROOT / "docs/instruction.md").read_text()
    assert f"| glitches-u280, ratio 1 | {w.seconds_per_token * 1e3:.1f} ms/token |" in doc
    assert f"| {w.power_w:.1f} W | {w.tokens_per_s_per_w:.2f} |" in doc, "docs/instruction.md predictions are stale"


def test_streaming_point_and_validation_row_agree() -> None:
    from hwmodel.validate import streaming as sv

    s = hw.streaming_engine("draft-u280")
    api = hw.decode(s, ctx=256)
    _same_point(api, _cli("fpga", "decode", "--design", "draft-u280", "--ctx", "256")["decode"])
    from fpga.streaming.power import token_power_w

    assert api.power_w == token_power_w(s.design, s.token(256))  # the power at ctx 256, not the phase figure
    row = next(r for r in sv.rows() if r["unit"] == "x")
    gpu_w = hw.decode_window(hw.gpu_engine(sv.A100, "llama-3.2-1b", framework="hf"), sv.PROMPT_TOKENS, sv.NEW_TOKENS)
    fpga_w = hw.decode_window(hw.streaming_engine(sv.DESIGN), sv.PROMPT_TOKENS, sv.NEW_TOKENS, stride=sv.SAMPLE_STRIDE)
    assert row["model"] == pytest.approx(gpu_w.seconds_per_token / fpga_w.seconds_per_token, rel=1e-12)
    assert fpga_w.tokens_per_s == pytest.approx(1 / fpga_w.seconds_per_token)
