"""The serving CLI (`hwmodel serve`, `hwmodel workload requests`, `hwmodel reproduce glitches`) with stand-in engines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import hwmodel.serving.simulator as simulator_mod
import hwmodel.serving.study as study_mod
from hwmodel.cli import main
from tests.test_serving_fakes import FakeFactory


@pytest.fixture()
def fake_engines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(simulator_mod, "EngineFactory", FakeFactory)
    monkeypatch.setattr(study_mod, "EngineFactory", FakeFactory)


def test_serve_run_writes_metrics_requests_trace(tmp_path: Path, fake_engines: None) -> None:
    r = CliRunner().invoke(
        main, ["serve", "run", "--cluster", "a100+7xu280", "--n", "30", "--rate", "0.5", "--out", str(tmp_path)]
    )
    assert r.exit_code == 0, r.output
    assert "tok/s" in r.output and "node0/decode6" in r.output
    m = json.loads((tmp_path / "metrics.json").read_text())
    assert m["requests"] == 30 and m["throughput_tok_per_s"] > 0
    rows = (tmp_path / "requests.csv").read_text().splitlines()
    assert len(rows) == 31 and rows[0].startswith("id,arrival_s")
    trace = json.loads((tmp_path / "trace.json").read_text())
    kinds = {e.get("cat") for e in trace["traceEvents"]}
    assert {"prefill", "decode", "transfer"} <= kinds


def test_serve_run_json_and_request_file(tmp_path: Path, fake_engines: None) -> None:
    f = tmp_path / "r.jsonl"
    r = CliRunner().invoke(
        main,
        [
            "workload",
            "requests",
            "generate",
            "--n",
            "12",
            "--rate",
            "1",
            "--prompt",
            "uniform:100:900",
            "--output",
            "lognormal:100:0.5:400",
            "-o",
            str(f),
        ],
    )
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(
        main,
        [
            "serve",
            "run",
            "--cluster",
            "2x-a100+7xu280",
            "--kv-path",
            "p2p",
            "--requests",
            str(f),
            "--scheduler",
            "slo-aware",
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    m = json.loads(r.stdout)
    assert m["requests"] == 12 and m["scheduler"] == "slo-aware"
    assert set(m["kv_migrations"]) <= {"p2p", "network-p2p"}


@pytest.mark.parametrize(
    "args, msg",
    [
        (["serve", "run", "--cluster", "nope"], "unknown cluster 'nope'; valid choices: 2x-a100+7xu280"),
        (["serve", "run", "--prompt", "uniform:9:3"], "--prompt 'uniform:9:3': field 'HI'"),
        (["serve", "run", "--prompt", "4000", "--output", "200"], "prompt + output <= 4096"),
        (["serve", "run", "--llm", "gpt-9"], "field 'llm': expected a known LLM"),
        (["serve", "sweep", "--rates", "1,x"], "--rates: expected comma-separated numbers"),
        (["workload", "requests", "validate", "missing.csv"], "expected an existing request file"),
        (["reproduce", "glitches", "--gpu", "tpu9"], "unknown GPU 'tpu9'"),
    ],
)
def test_errors_are_one_line(args: list[str], msg: str, fake_engines: None) -> None:
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 2, r.output
    assert msg in r.output and "Traceback" not in r.output


def test_bad_cluster_file_names_field(tmp_path: Path, fake_engines: None) -> None:
    p = tmp_path / "c.toml"
    p.write_text(
        'name = "c"\ndisplay_name = "c"\nllm = "llama2-7b"\n[[nodes]]\nname = "a"\n'
        'prefill = [{ device = "a100-40gb", count = 0 }]\n[nodes.host]\n'
        'sampling_s_per_logit = { value = 1e-9, source = "x" }\n'
    )
    r = CliRunner().invoke(main, ["serve", "run", "--cluster", str(p)])
    assert r.exit_code == 2 and "c.toml: field 'nodes[0].prefill[0].count': expected a positive number" in r.output
    p.write_text(p.read_text().replace("count = 0", "count = 1").replace('"a100-40gb"', '"a100"'))
    r = CliRunner().invoke(main, ["serve", "run", "--cluster", str(p)])
    assert r.exit_code == 2 and "field 'nodes[0].prefill[0].device': expected a GPU spec or an FPGA design" in r.output
    p.write_text(
        p.read_text() + '[[nodes]]\nname = "b"\ndecode = [{ device = "x", count = 1 }]\n[nodes.host]\n'
        'sampling_s_per_logit = { value = 1e-9, source = "x" }\n'
    )
    r = CliRunner().invoke(main, ["serve", "run", "--cluster", str(p)])
    assert r.exit_code == 2 and "field 'network': expected a [network] table" in r.output


def test_serve_sweep_plot(tmp_path: Path, fake_engines: None) -> None:
    r = CliRunner().invoke(
        main, ["serve", "sweep", "--cluster", "a100+7xu280", "--rates", "0.2,0.6", "--n", "20", "--out", str(tmp_path)]
    )
    assert r.exit_code == 0, r.output
    assert (tmp_path / "throughput_vs_load.png").stat().st_size > 1000
    assert len(json.loads((tmp_path / "sweep.json").read_text())) == 2


def test_reproduce_glitches_quick(tmp_path: Path, fake_engines: None) -> None:
    r = CliRunner().invoke(
        main,
        [
            "reproduce",
            "--out",
            str(tmp_path),
            "glitches",
            "--quick",
            "--requests",
            "40",
            "--gpu",
            "h200",
            "--mix-requests",
            "16",
            "--scale-nodes",
            "3",
            "--scale-requests",
            "300",
        ],
    )
    assert r.exit_code == 0, r.output
    out = tmp_path / "glitches"
    data = json.loads((out / "glitches.json").read_text())
    a100, h200 = data["headline"]
    hyb = a100["rows"]["gpu+7xu280"]
    assert hyb["published_throughput_ratio"] == 1.28 and hyb["published_cost_efficiency_ratio"] == 2.38
    assert a100["rows"]["8xgpu"]["throughput_ratio"] == 1.0
    assert h200["gpu"] == "h200" and "published_throughput_ratio" not in h200["rows"]["gpu+7xu280"]
    assert {b["kv_path"] for b in data["beyond"]} == {"host-staged", "p2p"}
    assert [s["scheduler"] for s in data["schedulers"]] == ["fcfs", "spf", "memory-aware", "slo-aware"]
    assert (out / "throughput_vs_load.png").stat().st_size > 1000
    assert json.loads((out / "hybrid_trace.json").read_text())["traceEvents"]
    summary = (out / "summary.md").read_text()
    assert "(1.28x)" in summary and "(2.38x)" in summary and "| slo-aware |" in summary
    assert "published" in r.output and "would need a U280 at" in r.output
    # the workload mix: every grid point and distribution per config, averages, break-even prices, heat-map
    mix = data["mix"]
    assert {"8xgpu", "gpu+7xfpga", "gpu+7xfpga/k4"} <= set(mix["averages"])
    assert mix["averages"]["8xgpu"]["mean_throughput_ratio"] == 1.0 and mix["averages"]["8xgpu"]["points"] == 28
    assert {"1536+512", "lognormal-long", "lognormal-short"} <= {r["workload"] for r in mix["rows"]}
    assert all(b["break_even_fpga_to_gpu_price"] > -1 for b in mix["break_even"]) and mix["break_even"]
    assert (out / "mix_heatmap.png").stat().st_size > 1000
    assert {"gpu+7xu280-streaming", "gpu+7xv80", "8xv80"} <= {r["config"] for r in data["decoders"]["rows"]}
    assert data["scale"]["devices"] == 24 and data["scale"]["metrics"]["requests"] == 300
    assert "## Scale run" in summary and "grid mean" in summary
    # host measurements stay out of the files that must be byte-identical from run to run
    assert "host_s" not in data["scale"] and "Host time" not in summary and "Host time" in r.output
    assert json.loads((out / "run.json").read_text())["scale_run"]["host_s"]["total"] > 0
