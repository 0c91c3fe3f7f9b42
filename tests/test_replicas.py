"""Replicas over seeds: Student-t intervals that are right, serving runs and system-A replays with ``seeds=N`` /
``--seeds N`` (means with intervals, per-seed records, error-bar plots), deterministic for the same seeds."""

from __future__ import annotations

import json
import math
import statistics

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import hwmodel as hw
from hwmodel.cli import main
from hwmodel.errors import HwmodelError
from hwmodel.replicas import Replicas, t_interval


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6), min_size=2, max_size=30))
def test_t_interval_is_centred_on_the_mean_and_uses_the_sample_std(xs: list[float]) -> None:
    from scipy import stats

    iv = t_interval(xs)
    assert iv.mean == pytest.approx(statistics.fmean(xs), rel=1e-9, abs=1e-6)
    assert iv.std == pytest.approx(statistics.stdev(xs), rel=1e-6, abs=1e-6)
    half = stats.t.ppf(0.975, len(xs) - 1) * iv.std / math.sqrt(len(xs))
    assert iv.high - iv.mean == pytest.approx(half, rel=1e-6, abs=1e-6)
    assert iv.low <= iv.mean <= iv.high


def test_one_seed_has_no_interval_and_zero_seeds_is_an_error() -> None:
    assert math.isnan(t_interval([3.0]).low) and t_interval([3.0]).mean == 3.0
    with pytest.raises(HwmodelError, match="at least one seed"):
        t_interval([])
    r = Replicas.of("x", [0, 1], [None, None], [{"a": {"b": 1.0}, "s": "txt"}, {"a": {"b": 3.0}, "s": "txt"}])
    assert r["a.b"].mean == 2.0 and "s" not in r.summary
    with pytest.raises(HwmodelError, match="no metric"):
        r["nope"]


def test_serve_with_seeds_gives_means_with_intervals_and_is_deterministic(tmp_path) -> None:
    a = hw.serve("a100+7xu280", n=12, rate_per_s=2.0, seeds=3)
    b = hw.serve("a100+7xu280", n=12, rate_per_s=2.0, seeds=3)
    assert a.seeds == (0, 1, 2) and a.to_dict() == b.to_dict()
    single = [hw.serve("a100+7xu280", n=12, rate_per_s=2.0, seed=s).metrics.ttft_s.p90 for s in a.seeds]
    iv = a["ttft_s.p90"]
    assert iv.mean == pytest.approx(statistics.fmean(single)) and iv.n == 3 and iv.low <= iv.mean <= iv.high
    assert [r["seed"] for r in a.records()] == [0, 1, 2]
    assert a.plot(tmp_path / "bars.png", ["ttft_s.p90", "throughput_tok_per_s"]).stat().st_size > 1000
    assert "over 3 seeds" in a.markdown(["ttft_s.p90"])


def test_cli_seeds_for_a_serving_run_and_a_system_a_replay(tmp_path) -> None:
    res = CliRunner().invoke(
        main,
        [
            "serve",
            "run",
            "--n",
            "10",
            "--rate",
            "2",
            "--seeds",
            "3",
            "--json",
            "--plot",
            str(tmp_path / "s.png"),
            "--out",
            str(tmp_path / "o"),
        ],
        catch_exceptions=False,
    )
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["n_seeds"] == 3 and set(d["metrics"]["ttft_s.p90"]) >= {"mean", "low", "high", "n"}
    assert (tmp_path / "s.png").exists() and (tmp_path / "o" / "seeds.csv").exists()
    res = CliRunner().invoke(
        main,
        ["reason", "run", "--seeds", "2", "--limit", "3", "--plot", str(tmp_path / "r.png")],
        catch_exceptions=False,
    )
    assert res.exit_code == 0, res.output
    assert "2 seeds" in res.output and "latency_mean_s" in res.output and (tmp_path / "r.png").exists()
    res = CliRunner().invoke(
        main, ["serve", "run", "--n", "10", "--load", "0.8", "--seeds", "2", "--json"], catch_exceptions=False
    )
    sat = hw.saturation("a100+7xu280", n=10)
    assert res.exit_code == 0 and json.loads(res.stdout)["n_seeds"] == 2
    assert hw.serve(n=10, rate_per_s=hw.load(0.8), seeds=2).to_dict()["metrics"] == json.loads(res.stdout)["metrics"]
    assert sat.request_rate_per_s > 0
    res = CliRunner().invoke(main, ["serve", "run", "--load", "0.8", "--rate", "1"])
    assert res.exit_code != 0 and "--load sets the rate" in res.output
    res = CliRunner().invoke(main, ["reason", "run"])
    assert res.exit_code != 0 and "--trace PATH (or --seeds N)" in res.output


def test_replay_with_seeds_matches_single_replays() -> None:
    reps = hw.replay("gsm8k", "step-ahead", seeds=2, limit=3)
    singles = [
        hw.replay(hw.generate_trace("gsm8k", limit=3, seed=s), "step-ahead").summary.latency_mean_s for s in reps.seeds
    ]
    assert reps["latency_mean_s"].mean == pytest.approx(statistics.fmean(singles))
