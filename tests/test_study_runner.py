"""The one study runner (hwmodel.studies.runner): journal and resume, bit-identical results whatever the worker
count or back-end, and worker processes that exit when their parent dies."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures.process import _ExecutorManagerThread
from pathlib import Path

import pytest

from hwmodel.studies.runner import JOURNAL_KIND, Journal, StudyError, journal_results, run_points

ROOT = Path(__file__).resolve().parents[1]
POINTS = [(f"p{i:02d}", {"x": i * 0.37 - 2.0, "tag": f"t{i % 3}"}) for i in range(24)]
DEADLINE_S = 120.0


def _wait_for(cond, what: str, deadline_s: float = DEADLINE_S):  # noqa: ANN001, ANN202
    """Poll ``cond`` until it is true or the deadline passes (no fixed sleep stands for synchronization)."""
    end = time.monotonic() + deadline_s
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_results_are_bit_identical_whatever_the_workers_and_in_point_order(tmp_path: Path) -> None:
    one = run_points("hwmodel.studies.probes:mix", POINTS, journal=tmp_path / "a.jsonl", workers=1)
    two = run_points("hwmodel.studies.probes:mix", POINTS, journal=tmp_path / "b.jsonl", workers=2, chunk_size=3)
    assert list(one.results) == [k for k, _ in POINTS] == list(two.results)
    assert json.dumps(one.results) == json.dumps(two.results)
    assert one.backend == "in-process" and two.backend == "local" and two.evaluated == len(POINTS)
    head = json.loads((tmp_path / "b.jsonl").read_text().splitlines()[0])
    assert head["journal"] == JOURNAL_KIND
    # a finished run's journal is rewritten in point order: the same bytes whatever the workers or finishing order
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()


def test_dask_agrees_with_local(tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    local = run_points("hwmodel.studies.probes:mix", POINTS, workers=1)
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster,
        distributed.Client(cluster) as client,
    ):
        dask = run_points("hwmodel.studies.probes:mix", POINTS, client=client, journal=tmp_path / "d.jsonl")
    assert dask.backend == "dask" and json.dumps(dask.results) == json.dumps(local.results)


def test_resume_skips_journaled_points_and_drops_a_cut_line(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    full = run_points("hwmodel.studies.probes:mix", POINTS, journal=path, fingerprint="f1", workers=1)
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:8]) + lines[8][: len(lines[8]) // 2])  # killed while writing line 8
    again = run_points("hwmodel.studies.probes:mix", POINTS, journal=path, fingerprint="f1", workers=2)
    assert again.resumed == 7 and again.evaluated == len(POINTS) - 7
    assert json.dumps(again.results) == json.dumps(full.results)
    assert journal_results(path, "f1") == full.results
    other = run_points("hwmodel.studies.probes:mix", POINTS[:3], journal=path, fingerprint="f2", workers=1)
    assert other.resumed == 0 and Journal(path, "f1").read() == ({}, 0)  # other inputs: a fresh journal


def test_bad_points_are_refused_with_one_line(tmp_path: Path) -> None:
    with pytest.raises(StudyError, match="unique"):
        run_points("hwmodel.studies.probes:mix", [("a", {"x": 1}), ("a", {"x": 2})], workers=1)
    with pytest.raises(StudyError, match="not JSON-serializable"):
        run_points("hwmodel.studies.probes:mix", [("a", {"x": object()})], workers=1)


_PARENT = """
import sys
from hwmodel.studies.runner import run_points
run_points("hwmodel.studies.probes:park", [(f"w{i}", {"pid_dir": sys.argv[1], "i": i}) for i in range(2)],
           workers=2, chunk_size=1, start_method=sys.argv[2])
"""


def _gone(pid: int) -> bool:
    """Process ``pid`` has exited (a zombie waits for its parent to reap it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


@pytest.mark.parametrize("start_method", ["forkserver", "fork"])
def test_workers_exit_when_the_parent_is_killed(tmp_path: Path, start_method: str) -> None:
    pid_dir = tmp_path / "pids"
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    parent = subprocess.Popen([sys.executable, "-c", _PARENT, str(pid_dir), start_method], cwd=ROOT, env=env)
    try:
        pids = _wait_for(
            lambda: [int(p.stem) for p in pid_dir.glob("*.pid")] if len(list(pid_dir.glob("*.pid"))) == 2 else None,
            "two parked workers",
        )
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=DEADLINE_S)
        _wait_for(lambda: all(_gone(p) for p in pids), "the workers to exit after their parent was killed")
    finally:
        if parent.poll() is None:
            parent.kill()
        for p in pid_dir.glob("*.pid"):
            try:
                os.kill(int(p.stem), signal.SIGKILL)
            except ProcessLookupError:
                pass


# The fork case forks from the xdist worker, which an earlier test may have left with JAX loaded (JAX warns on every
# fork). Safe here: the probe's children run only Python (a pid file, a signal, a sleep), never XLA, whose threads are
# what a fork cannot copy.
@pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")
@pytest.mark.parametrize("start_method", ["forkserver", "fork"])
@pytest.mark.usefixtures("sigint_deliverable")
def test_ctrl_c_is_raised_by_the_runner_between_waits_and_leaves_no_pool_behind(
    tmp_path: Path, start_method: str
) -> None:
    """Ctrl-C while the workers run: KeyboardInterrupt comes out of the runner's own loop, never from inside
    ``concurrent.futures.wait`` (where it can leave a future's lock held, so that the pool's manager thread blocks and
    the process hangs at exit: seen once as `hwmodel sweep` not exiting after Ctrl-C), and when it propagates the
    pool's manager thread and its workers are gone."""
    pid_dir = tmp_path / "pids"
    points = [("ctrl-c", {"pid_dir": str(pid_dir), "signal_pid": os.getpid()}), ("other", {"pid_dir": str(pid_dir)})]
    with pytest.raises(KeyboardInterrupt) as info:
        run_points(
            "hwmodel.studies.probes:interrupt",
            points,
            journal=tmp_path / "j.jsonl",
            workers=2,
            chunk_size=1,
            start_method=start_method,
        )
    assert Path(str(info.traceback[-1].path)).name == "interrupt.py", info.traceback[-1]
    assert not [t for t in threading.enumerate() if isinstance(t, _ExecutorManagerThread)]
    pids = [int(p.stem) for p in pid_dir.glob("*.pid")]
    _wait_for(lambda: all(_gone(p) for p in pids), "the workers to end after Ctrl-C")


def test_the_ctrl_c_tests_pass_in_a_run_started_with_sigint_ignored() -> None:
    """A test run started as a background job of a non-interactive shell inherits SIGINT ignored (the cause of the
    rounds 9-10 hang, tests/conftest.py ``sigint_deliverable``): the Ctrl-C test above must still end, and pass.
    Without the fixture this child run waits forever and fails here at the deadline."""
    ctrl_c_test = test_ctrl_c_is_raised_by_the_runner_between_waits_and_leaves_no_pool_behind.__name__
    test = f"{Path(__file__).relative_to(ROOT)}::{ctrl_c_test}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HWMODEL_TEST_TIMES", "PYTEST_XDIST"))}
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)  # an ignored signal stays ignored across exec
    try:
        child = subprocess.Popen(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
    finally:
        signal.signal(signal.SIGINT, before)
    try:
        out, _ = child.communicate(timeout=DEADLINE_S)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        out, _ = child.communicate()
        pytest.fail(f"the Ctrl-C test did not end in {DEADLINE_S:.0f} s with SIGINT inherited ignored:\n{out[-2000:]}")
    assert child.returncode == 0, out[-2000:]
    assert "2 passed" in out, out[-2000:]


def test_a_journal_with_points_this_run_does_not_ask_for_keeps_them(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    run_points("hwmodel.studies.probes:mix", POINTS, journal=path, fingerprint="f", workers=1)
    before = path.read_text().splitlines()
    fewer = run_points("hwmodel.studies.probes:mix", POINTS[:3], journal=path, fingerprint="f", workers=1)
    assert fewer.resumed == 3 and fewer.evaluated == 0
    assert path.read_text().splitlines() == before  # nothing dropped: a later full run resumes every point
