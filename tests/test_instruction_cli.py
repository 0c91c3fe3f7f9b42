"""`hwmodel fpga prefetch-sweep | instruction ...`: JSON outputs, files written, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from hwmodel.cli import main


def _ok(args: list[str]) -> str:
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    return r.output


def _err(args: list[str]) -> str:
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output and "Error:" in r.output
    return r.output


@pytest.mark.slow  # --quick leaves it out (docs/testing.md)
def test_prefetch_sweep_json_and_csv(tmp_path: Path) -> None:
    out = tmp_path / "sweep.csv"
    data = json.loads(
        _ok(
            [
                "fpga",
                "prefetch-sweep",
                "--design",
                "glitches-u280",
                "--ratios",
                "1,2,99",
                "--seq",
                "64",
                "--json",
                "--csv",
                str(out),
            ]
        )
    )
    rows = {r["ratio"]: r for r in data["rows"]}
    assert rows[1]["speedup"] == 1.0 and rows[2]["speedup"] > 1.0
    assert rows[99]["fits"] is False and rows[99]["decode_s"] is None
    assert data["best_ratio"] == {"64": 2} and data["role"] == "calibrated"
    assert out.read_text().startswith("seq,ratio,fits")


def test_profile_hbm_json(tmp_path: Path) -> None:
    data = json.loads(
        _ok(
            [
                "fpga",
                "profile-hbm",
                "--board",
                "u280",
                "--sizes",
                "256,32K",
                "--json",
                "--plot",
                str(tmp_path / "p.png"),
            ]
        )
    )
    small, big = data["rows"]
    assert small["access_bytes"] == 256 and big["access_bytes"] == 32768
    assert small["scheduler_efficiency"] < big["scheduler_efficiency"] <= big["raw_efficiency"] <= 1.0
    assert (tmp_path / "p.png").stat().st_size > 0


def test_instruction_run_dump_trace(tmp_path: Path) -> None:
    run = json.loads(_ok(["fpga", "instruction", "run", "--ctx", "100", "--ratio", "2", "--json"]))
    assert run["prefetch_ratio"] == 2 and run["seconds"] > 0 and 0 < run["hbm_utilization"] < 1
    assert run["power_w"] > 30 and run["kv_bytes"] == 100 * 256 * 1024
    text = _ok(["fpga", "instruction", "dump", "--layer", "1", "--limit", "8", "--ratio", "4"])
    assert "32768 B/ch" in text and "layer 1" in text
    trace = tmp_path / "t.json"
    _ok(["fpga", "instruction", "trace", "--ctx", "16", "--max-instructions", "300", "--out", str(trace)])
    events = json.loads(trace.read_text())["traceEvents"]
    assert {e.get("args", {}).get("name") for e in events if e["ph"] == "M"} >= {"DM", "MPE", "SFU"}
    assert any(e["ph"] == "X" and e["name"].startswith("MV") for e in events)
    listed = json.loads(_ok(["fpga", "instruction", "designs", "--json"]))
    assert {d["name"] for d in listed} >= {"glitches-u280", "glitches-v80"}


def test_errors_are_one_line() -> None:
    assert "glitches-u280" in _err(["fpga", "prefetch-sweep", "--design", "nope"])
    assert "ratios" in _err(["fpga", "prefetch-sweep", "--ratios", "a:b"])
    assert "--seq" in _err(["fpga", "prefetch-sweep", "--seq", "x"])
    assert "layers 0..31" in _err(["fpga", "instruction", "dump", "--layer", "40"])
    assert "not 'v80'" in _err(["fpga", "profile-hbm", "--board", "v80", "--design", "glitches-u280"])
    assert "sizes" in _err(["fpga", "profile-hbm", "--sizes", "12Q"])
