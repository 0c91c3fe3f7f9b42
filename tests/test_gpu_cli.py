"""`hwmodel gpu ...`: JSON output equals the engine, errors are one line."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from gpu.latency import GpuEngine
from hwmodel.cli import main


def _json(*args: str) -> dict:
    r = CliRunner().invoke(main, [*args, "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_prefill_decode_prm_match_the_engine() -> None:
    e = GpuEngine("rtx3090", "qwen2.5-0.5b", "vllm-eager")
    d = _json(
        "gpu",
        "prefill",
        "--gpu",
        "rtx3090",
        "--llm",
        "qwen2.5-0.5b",
        "--framework",
        "vllm-eager",
        "--tokens",
        "300",
        "--ctx",
        "20",
    )
    assert d["time_s"] == e.prefill_s(300, 20)
    d = _json("gpu", "decode", "--gpu", "rtx3090", "--llm", "qwen2.5-0.5b", "--framework", "vllm-eager", "--ctx", "900")
    assert d["time_s"] == e.decode_s(900) and d["time_s"] >= d["bandwidth_floor_s"]
    d = _json(
        "gpu",
        "decode",
        "--gpu",
        "rtx3090",
        "--llm",
        "qwen2.5-0.5b",
        "--framework",
        "vllm-eager",
        "--ctx",
        "900",
        "--batch",
        "4",
    )
    assert d["step_s"] == e.decode_batch_s([900] * 4)
    prm = GpuEngine("rtx3090", "skywork-prm-7b", "vllm")
    d = _json(
        "gpu",
        "prm",
        "--gpu",
        "rtx3090",
        "--llm",
        "skywork-prm-7b",
        "--ctx",
        "400",
        "--step-tokens",
        "50",
        "--prefix-cache",
    )
    assert d["time_s"] == prm.score_s(50, 400, prefix_cache=True) and d["computed_tokens"] == 50


def test_frameworks_listing() -> None:
    rows = _json("gpu", "frameworks")
    assert {r["name"] for r in rows} == {"hf", "vllm", "vllm-eager", "edge-w8a8", "mlc"}
    assert all(0 < r["params"]["eta_bw"] <= 1 for r in rows)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--gpu", "orin-nano", "--llm", "llama2-7b", "--framework", "hf"], "Error: llama2-7b does not fit orin-nano"),
        (
            ["--gpu", "rtx3090", "--llm", "qwen2.5-0.5b", "--framework", "hf", "--weight-bits", "8"],
            "Error: framework hf runs weights at 16 bits",
        ),
    ],
)
def test_errors_are_one_line(args: list[str], message: str) -> None:
    r = CliRunner().invoke(main, ["gpu", "decode", *args])
    assert r.exit_code == 2 and message in r.output and "Traceback" not in r.output


def test_tables_print() -> None:
    r = CliRunner().invoke(main, ["gpu", "decode", "--gpu", "a100-40gb", "--llm", "llama2-7b", "--framework", "hf"])
    assert r.exit_code == 0 and "bandwidth floor" in r.output and "bound by" in r.output


def test_reproduce_gpu_writes_the_calibration_and_migration(tmp_path) -> None:
    r = CliRunner().invoke(main, ["reproduce", "--out", str(tmp_path), "gpu"])
    assert r.exit_code == 0, r.output
    cal = json.loads((tmp_path / "gpu" / "calibration.json").read_text())
    assert cal["summary"]["fitted_max_abs_error"] <= 0.05 and cal["summary"]["predicted_points"] >= 30
    mig = json.loads((tmp_path / "gpu" / "migration.json").read_text())
    by = {(m["prompt_tokens"], m["path"], m["host_thread"]): m for m in mig}
    assert by[(1536, "host", "shared")]["hidden_fraction"] >= 0.9
    assert by[(64, "host", "shared")]["hidden_fraction"] < 0.5
