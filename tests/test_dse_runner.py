"""Sweep runner: resume after a kill, killed workers, Ctrl-C, torn files, constraint changes, reports."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hwmodel.dse import load_plan, read_report, run_sweep, write_report
from hwmodel.dse.pareto import dominates
from hwmodel.dse.runner import open_store
from hwmodel.dse.store import rows_equal
from hwmodel.errors import HwmodelError
from tests.test_dse_support import spec_file

ROOT = Path(__file__).resolve().parent.parent


GRID = "lanes = [8, 16, 32, 64, 128]\nports = [4, 8, 16, 32]\nclock_mhz = [200, 300, 400]\nbits = [4, 8]\n"


def _cli(spec: Path, out: Path, *args: str) -> subprocess.Popen:
    # PYTHONFAULTHANDLER: a sweep that hangs is sent SIGABRT by _communicate and prints every thread's stack
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONFAULTHANDLER": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "hwmodel", "sweep", str(spec), "--out", str(out), "--no-progress", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _communicate(proc: subprocess.Popen, timeout_s: float = 120) -> tuple[str, str]:
    """``proc.communicate``; if the sweep has not ended by then, its process group gets SIGABRT (the faulthandler
    prints each process's threads) and the test fails with that output, not a bare timeout."""
    try:
        return proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGABRT)
        stdout, stderr = proc.communicate()
        raise AssertionError(f"the sweep did not end within {timeout_s} s; its stacks:\n{stderr}\n{stdout}") from None


def _rows_on_disk(out: Path) -> int:
    p = out / "results.csv"
    return max(0, p.read_text().count("\n") - 1) if p.exists() else 0


def _wait_rows(proc: subprocess.Popen, out: Path, n: int, timeout_s: float = 60) -> None:
    end = time.monotonic() + timeout_s
    while _rows_on_disk(out) < n:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < end, "sweep made no progress"
        time.sleep(0.02)


def _reference(tmp_path: Path, spec: Path) -> tuple[dict, str, str]:
    """An uninterrupted run of ``spec`` in this process: rows, points.csv and summary.json."""
    out = tmp_path / "reference"
    plan = load_plan(spec)
    stats = run_sweep(plan, out, workers=2, progress=False)
    assert stats.remaining == 0 and not stats.interrupted
    write_report(read_report(plan, out), out)
    return open_store(plan, out).read(), (out / "points.csv").read_text(), (out / "summary.json").read_text()


def _results_bytes(out: Path) -> bytes:
    return (out / "results.csv").read_bytes()


def _assert_same_as_reference(plan_spec: Path, out: Path, reference: tuple[dict, str, str]) -> None:
    plan = load_plan(plan_spec)
    rows = open_store(plan, out).read()
    assert rows_equal(rows, reference[0])
    assert len(rows) == len(plan.points)
    assert (out / "points.csv").read_text() == reference[1]
    assert (out / "summary.json").read_text() == reference[2]
    # a finished sweep's journal is rewritten in the plan's order: the same bytes however it got there
    assert _results_bytes(out) == _results_bytes(out.parent / "reference")


def _gated_spec(tmp_path: Path, extra: str = "", constraints: str = "") -> tuple[Path, Path, int]:
    """A sweep whose last points (lanes = 128, the outermost axis) wait for a gate file: it cannot finish before
    the test interrupts it, whatever the load (events, not sleeps). Returns (spec, gate, points before the gate)."""
    gate = tmp_path / "gate"
    spec = spec_file(tmp_path, GRID + extra + f'gate_file = "{gate}"\ngate_lanes = 128\n', constraints)
    lanes = [p.params["lanes"] for p in load_plan(spec).points]
    first_gated = lanes.index(128)
    assert all(v == 128 for v in lanes[first_gated:])  # the gated points come last
    return spec, gate, first_gated


def test_sweep_killed_halfway_then_rerun_equals_uninterrupted(tmp_path: Path) -> None:
    spec, gate, ungated = _gated_spec(tmp_path, constraints="lut_util = { max = 0.35 }\n")
    total = len(load_plan(spec).points)
    out = tmp_path / "out"
    proc = _cli(spec, out, "-j", "2", "--chunk-size", "2")
    _wait_rows(proc, out, total // 3)
    os.killpg(proc.pid, signal.SIGKILL)  # the whole sweep (parent and workers), as a crash or `kill -9` would
    proc.wait()
    partial = _rows_on_disk(out)
    assert 0 < partial < total
    gate.write_text("open\n")
    proc = _cli(spec, out, "-j", "2")
    stdout, stderr = _communicate(proc)
    assert proc.returncode == 0, stderr
    assert f"{partial:,} were already done" in stdout, stdout
    _assert_same_as_reference(spec, out, _reference(tmp_path, spec))


@pytest.mark.usefixtures("sigint_deliverable")
def test_ctrl_c_saves_finished_points_and_rerun_completes(tmp_path: Path) -> None:
    spec, gate, ungated = _gated_spec(tmp_path)
    total = len(load_plan(spec).points)
    out = tmp_path / "out"
    proc = _cli(spec, out, "-j", "2", "--chunk-size", "2")
    _wait_rows(proc, out, total // 4)
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C in a terminal reaches the whole process group
    _stdout, stderr = _communicate(proc)
    assert proc.returncode == 130, stderr
    assert "interrupted:" in stderr and "rerun the same command to resume" in stderr and "Traceback" not in stderr
    saved = _rows_on_disk(out)
    assert total // 4 <= saved <= ungated < total  # the gated points cannot have finished
    gate.write_text("open\n")
    plan = load_plan(spec)
    stats = run_sweep(plan, out, workers=2, progress=False)
    assert stats.already_done == saved and stats.evaluated == total - saved
    write_report(read_report(plan, out), out)
    _assert_same_as_reference(spec, out, _reference(tmp_path, spec))


def test_killed_worker_loses_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "killed"
    spec = spec_file(tmp_path, GRID + f'kill_marker = "{marker}"\nkill_lanes = 32\n')
    plan = load_plan(spec)
    stats = run_sweep(plan, tmp_path / "out", workers=2, chunk_size=3, progress=False)
    assert marker.exists()  # a worker really was SIGKILLed
    assert stats.remaining == 0 and stats.evaluated == len(plan.points)
    ref = run_sweep(plan, tmp_path / "ref", workers=1, progress=False)
    assert ref.remaining == 0
    assert rows_equal(open_store(plan, tmp_path / "out").read(), open_store(plan, tmp_path / "ref").read())
    assert _results_bytes(tmp_path / "out") == _results_bytes(tmp_path / "ref")  # 2 workers + a kill vs 1 worker


def test_torn_last_line_is_cut_and_point_redone(tmp_path: Path) -> None:
    spec = spec_file(tmp_path, "lanes = [8, 16, 32]\nports = [4, 8]\nclock_mhz = [300]\n")
    plan = load_plan(spec)
    out = tmp_path / "out"
    run_sweep(plan, out, workers=1, progress=False)
    full = open_store(plan, out).read()
    path = out / "results.csv"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])  # killed in the middle of a write
    stats = run_sweep(plan, out, workers=1, progress=False)
    assert stats.evaluated == 1
    assert rows_equal(open_store(plan, out).read(), full)
    assert path.read_text().count("\n") == len(plan.points) + 1


def test_invalid_points_are_recorded_and_a_bug_stops_the_sweep_clearly(tmp_path: Path) -> None:
    spec = spec_file(tmp_path, "lanes = [8, 16, 32]\nports = [4, 8]\nclock_mhz = [300]\ninvalid_lanes = 16\n")
    plan = load_plan(spec)
    stats = run_sweep(plan, tmp_path / "a", workers=1, progress=False)
    assert stats.invalid == 2 and stats.remaining == 0
    rep = read_report(plan, tmp_path / "a")
    bad = [r for r in rep.rows if r.row.status == "invalid"]
    assert len(bad) == 2 and all("lanes = 16 is not a legal design" in r.why_not for r in bad)
    assert rep.counts()["invalid"] == 2 and rep.counts()["feasible"] == 4

    spec = spec_file(
        tmp_path, "lanes = [8, 16, 32]\nports = [4, 8]\nclock_mhz = [300]\ncrash_lanes = 32\n", name="b.toml"
    )
    plan = load_plan(spec)
    with pytest.raises(
        HwmodelError, match=r"evaluator 'toy' raised ValueError: toy evaluator bug at point \{'lanes': 32"
    ):
        run_sweep(plan, tmp_path / "b", workers=2, chunk_size=1, progress=False)
    rows = open_store(plan, tmp_path / "b").read()
    assert {r.params["lanes"] for r in rows.values()} <= {8, 16}  # what finished before the bug is kept


def test_constraint_changes_reuse_evaluations(tmp_path: Path) -> None:
    out = tmp_path / "out"
    tight = load_plan(spec_file(tmp_path, GRID, "lut_util = { max = 0.12 }\n"))
    s1 = run_sweep(tight, out, workers=1, progress=False)
    assert s1.screened == len(tight.screened_out) > 0 and s1.evaluated == len(tight.points) - s1.screened
    loose = load_plan(spec_file(tmp_path, GRID))
    s2 = run_sweep(loose, out, workers=1, progress=False)
    assert s2.evaluated == s1.screened and s2.already_done == s1.evaluated  # only the screened points are new
    s3 = run_sweep(tight, out, workers=1, progress=False)
    assert s3.evaluated == 0 and s3.already_done == len(tight.points)
    rep = read_report(tight, out)
    assert all(r.row.metrics["lut_util"] <= 0.12 for r in rep.feasible)


def test_results_file_is_locked_and_checked(tmp_path: Path) -> None:
    plan = load_plan(spec_file(tmp_path, "lanes = [8]\nports = [4]\nclock_mhz = [300]\n"))
    store = open_store(plan, tmp_path / "out")
    store.open()
    try:
        with pytest.raises(HwmodelError, match="being written by another sweep"):
            run_sweep(plan, tmp_path / "out", workers=1, progress=False)
    finally:
        store.close()
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "results.csv").write_text("point_id,status,x\n")
    with pytest.raises(HwmodelError, match="written by a different sweep .* --fresh"):
        run_sweep(plan, tmp_path / "other", workers=1, progress=False)
    assert run_sweep(plan, tmp_path / "other", workers=1, progress=False, fresh=True).evaluated == 1


@settings(max_examples=12)
@given(
    seed=st.integers(0, 10_000), lut_max=st.sampled_from([0.2, 0.4, 1.0]), sampling=st.sampled_from(["random", "lhs"])
)
def test_reported_fronts_are_not_dominated_by_any_evaluated_point(
    tmp_path_factory: pytest.TempPathFactory, seed: int, lut_max: float, sampling: str
) -> None:
    tmp = tmp_path_factory.mktemp("front")
    params = (
        "lanes = [8, 16, 32, 64, 128, 256]\nports = { min = 2, max = 32 }\n"
        "clock_mhz = { min = 150, max = 450 }\nbits = [4, 8, 16]\n"
    )
    plan = load_plan(
        spec_file(
            tmp,
            params,
            f"lut_util = {{ max = {lut_max} }}\n",
            extra=f'sampling = "{sampling}"\nsamples = 60\nseed = {seed}\n',
        )
    )
    run_sweep(plan, tmp / "out", workers=1, progress=False)
    rep = read_report(plan, tmp / "out")
    feasible = [r.row for r in rep.rows if r.feasible]
    for objs, idx in rep.fronts.items():
        senses = [plan.sense[m] for m in objs]
        assert idx, "a non-empty feasible set has a non-empty front"
        for i in idx:
            f = np.array([rep.rows[i].row.metrics[m] for m in objs])
            assert rep.rows[i].feasible
            for r in feasible:
                assert not dominates(np.array([r.metrics[m] for m in objs]), f, senses)


def test_cli_report_only_and_json(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from hwmodel.cli import main

    spec = spec_file(tmp_path, "lanes = [8, 16, 32]\nports = [4, 8]\nclock_mhz = [300]\n")
    out = tmp_path / "out"
    r = CliRunner().invoke(main, ["sweep", str(spec), "--out", str(out), "-j", "1", "--json", "--svg"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["counts"]["finished"] == 6 and d["run"]["evaluated"] == 6
    assert (out / "front_latency_s__energy_per_token_j.png").stat().st_size > 1000
    assert (out / "front_latency_s__energy_per_token_j.svg").exists()
    r = CliRunner().invoke(main, ["sweep", str(spec), "--out", str(out), "--report-only"])
    assert r.exit_code == 0 and "Top 6 by latency_s" in r.output and "Pareto front over" in r.output, r.output


def test_results_read_back_exactly_as_planned(tmp_path: Path) -> None:
    from tests.test_dse_support import ENGINES_REF

    spec = tmp_path / "e.toml"
    spec.write_text(
        f'[sweep]\nevaluator = "{ENGINES_REF}"\n[objectives]\nlatency_s = "min"\narea = "min"\n'
        '[parameters]\ndesign = ["a"]\n[parameters.x]\nlanes = [1, 2, 3]\n[parameters.y]\nports = [4]\n'
    )
    plan = load_plan(spec)
    run_sweep(plan, tmp_path / "out", workers=1, progress=False)
    rows = open_store(plan, tmp_path / "out").read()
    for pt in plan.points:
        assert rows[pt.id].params == pt.params
        assert [type(v) for v in rows[pt.id].params.values()] == [type(v) for v in pt.params.values()]


def test_workers_forked_or_from_the_fork_server_write_the_same_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    import hwmodel.dse.runner as runner

    plan = load_plan(spec_file(tmp_path, "lanes = [8, 16, 32]\nports = [4, 8]\nclock_mhz = [200, 300]\n"))
    run_sweep(plan, tmp_path / "one", workers=1, progress=False)
    ref = open_store(plan, tmp_path / "one").read()
    threads = threading.active_count()
    used: list[tuple[str, int]] = []
    real = runner.pool_start_method

    def recorded() -> str:
        used.append((real(), threading.active_count()))
        return used[-1][0]

    monkeypatch.setattr(runner, "pool_start_method", recorded)
    run_sweep(plan, tmp_path / "auto", workers=2, chunk_size=2, progress=True)
    assert used == [(used[0][0], threads)]  # the progress bar started no thread that would rule out fork
    assert rows_equal(open_store(plan, tmp_path / "auto").read(), ref)
    # fork is forced only where pool_start_method allows it: in an xdist worker that an earlier test left with JAX's
    # threads running, a forced fork could deadlock (the auto run above already took the allowed method)
    for method in ("fork", "forkserver") if real() == "fork" else ("forkserver",):
        monkeypatch.setattr(runner, "pool_start_method", lambda m=method: m)
        run_sweep(plan, tmp_path / method, workers=2, chunk_size=2, progress=False)
        assert rows_equal(open_store(plan, tmp_path / method).read(), ref), method


def test_fork_only_from_a_single_threaded_process_without_jax(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from hwmodel.dse.runner import FORK_UNSAFE_MODULES, pool_start_method

    monkeypatch.setattr(threading, "active_count", lambda: 1)
    for name in FORK_UNSAFE_MODULES:  # an earlier test in this worker may have loaded jaxlib (the W8A8 model)
        monkeypatch.delitem(sys.modules, name, raising=False)
    assert pool_start_method() == "fork"
    monkeypatch.setitem(sys.modules, "jax", sys)  # any module object: only its presence matters
    assert pool_start_method() == "forkserver"
    monkeypatch.delitem(sys.modules, "jax")
    monkeypatch.setattr(threading, "active_count", lambda: 2)  # e.g. a Dask client's or a progress bar's thread
    assert pool_start_method() == "forkserver"
