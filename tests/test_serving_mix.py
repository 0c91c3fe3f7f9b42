"""The workload-mix study (points, pure per-point runs, summary, break-even prices) and the system-B validation
rows, on stand-in engines (fast); determinism across repeated runs and process splits."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hwmodel.serving import devices as devices_mod
from hwmodel.serving import mix
from tests.test_serving_fakes import FakeFactory


def test_grid_stays_within_the_context() -> None:
    g = mix.grid()
    assert (3072, 1024) in g and (1536, 512) in g and len(g) == 28
    assert all(p + o - 1 <= 4095 for p, o in g)
    assert mix.grid((3072,), (1025,)) == []


def test_points_are_json_and_run_point_is_pure() -> None:
    pts = mix.points(requests=12, configs=("8xgpu", "gpu+7xfpga"), prompts=(256, 1536), outputs=(64, 512))
    assert json.loads(json.dumps(pts)) == pts
    assert {p["workload"] for p in pts} == {
        "256+64",
        "256+512",
        "1536+64",
        "1536+512",
        "lognormal-long",
        "lognormal-short",
    }
    a = [mix.run_point(p, FakeFactory()) for p in pts]
    b = [mix.run_point(p, FakeFactory()) for p in reversed(pts)][::-1]  # other order, fresh engines
    assert json.dumps(a) == json.dumps(b)  # bit-identical


def test_break_even_price_ratio_inverts_cost_efficiency() -> None:
    r = mix.break_even_price_ratio(1.28, 2.38)
    assert 1.28 * 8 / (1 + 7 * r) == pytest.approx(2.38, rel=1e-12)
    assert mix.break_even_price_ratio(1.0, 8.0) == 0.0


def test_summary_ratios_and_averages() -> None:
    pts = mix.points(
        requests=12,
        configs=("8xgpu", "8xfpga", "gpu+7xfpga"),
        prompts=(256, 1536),
        outputs=(64, 512),
        distributions=("lognormal-long",),
    )
    s = mix.summarize(mix.run(pts, factory=FakeFactory()))
    base = [r for r in s["rows"] if r["config"] == "8xgpu"]
    assert all(r["throughput_ratio"] == 1.0 for r in base)
    sel = [r["throughput_ratio"] for r in s["rows"] if r["config"] == "gpu+7xfpga" and r["kind"] == "grid"]
    assert s["averages"]["gpu+7xfpga"]["mean_throughput_ratio"] == pytest.approx(sum(sel) / len(sel))
    assert s["averages"]["gpu+7xfpga"]["points"] == 4
    be = {b["workload"] for b in s["break_even"]}
    assert "1536+512" in be and "lognormal-long" in be and any(w.startswith("grid mean") for w in be)
    assert s["prices"]["gpu_source"] and s["prices"]["fpga_source"]


def test_validation_rows_format(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(devices_mod, "EngineFactory", lambda *a, **k: FakeFactory())
    monkeypatch.setattr(mix, "shared_factory", FakeFactory)
    from hwmodel.serving.validation import rows

    out = rows(requests=8)
    names = [r["name"] for r in out]
    assert len(names) == len(set(zip(names, [r["workload"] for r in out])))
    keys = {"area", "name", "model", "published", "band", "unit", "role", "families", "workload", "source", "note"}
    for r in out:
        assert keys <= set(r) and r["role"] in ("fitted", "predicted", "leave-one-out") and r["workload"]
        assert isinstance(r["model"], float) and r["published"] is not None
    pub = {r["published"] for r in out}
    assert {175.85, 24.26, 0.246, 5001.20, 21.50, 1.01, 28.44, 1.20, 1.28, 2.38} <= pub
    assert any("grid" in r["workload"] or "mean over" in r["workload"] for r in out if r["published"] == 1.28)


def _throughputs(pts: list[dict[str, Any]]) -> list[float]:
    return [r["throughput_tok_per_s"] for r in mix.run(pts, factory=FakeFactory())]


def test_split_across_workers_is_bit_identical() -> None:
    """Points are independent: any split over workers (here: halves, run apart) gives the same bytes."""
    pts = mix.points(requests=10, configs=("8xgpu", "gpu+7xfpga"), prompts=(128, 512), outputs=(128,), distributions=())
    whole = _throughputs(pts)
    halves = _throughputs(pts[1::2]), _throughputs(pts[0::2])
    merged = [0.0] * len(pts)
    merged[1::2], merged[0::2] = halves
    assert merged == whole


def test_mix_on_the_study_runner_resumes_to_the_same_results(tmp_path) -> None:  # noqa: ANN001
    """The mix runs on hwmodel.studies.runner: a journal that holds only some points (a killed run) resumes to the
    uninterrupted results (the runner's own tests show local processes and Dask agree; forking here, after JAX
    started threads in this test process, could deadlock)."""
    pts = mix.points(requests=8, configs=("8xgpu", "gpu+7xfpga"), prompts=(128, 512), outputs=(128,), distributions=())
    mix.use_factory(FakeFactory())
    ref = mix.run(pts, journal=tmp_path / "full.jsonl")
    lines = (tmp_path / "full.jsonl").read_text().splitlines()
    part = tmp_path / "part.jsonl"
    part.write_text("\n".join(lines[: len(lines) // 2]) + "\n")  # header and the first points only
    assert json.dumps(mix.run(pts, journal=part)) == json.dumps(ref)
    mix.use_factory(None)  # type: ignore[arg-type]
