"""Studies side by side (hwmodel.studies.concurrent, `hwmodel reproduce` with every study): the output reads in
the given order whatever finishes first, `after` is respected, failures come back as they would in one process."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from hwmodel.errors import HwmodelError
from hwmodel.studies.concurrent import Job, _order, run_jobs

# The jobs here fork from the xdist worker, which an earlier test may have left with JAX loaded (JAX warns on every
# fork). Safe here: these children run only Python (print, a file, a pipe, os.system) and never call into XLA, whose
# threads are what a fork cannot copy. `hwmodel reproduce` itself runs one after another in such a process.
pytestmark = pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")


def _writer(name: str, log: Path, delay_s: float, needs: tuple[str, ...] = ()) -> Job:
    def fn() -> None:
        for n in needs:  # an `after` job has finished (its mark is on disk) before this one starts
            assert (log / n).exists(), f"{name} started before {n} finished"
        time.sleep(delay_s)
        print(f"{name} out")
        print(f"{name} err", file=sys.stderr)
        os.system(f"echo {name} fd1")  # a child process of the job writes to the job's stream too
        (log / name).write_text(str(os.getpid()))

    return Job(name, fn, needs, cost_s=delay_s * 100)


def test_output_in_given_order_and_after_respected(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    jobs = [
        _writer("a", tmp_path, 0.3),
        _writer("b", tmp_path, 0.0),
        _writer("c", tmp_path, 0.1, needs=("a", "b")),
    ]
    heads: list[str] = []
    run_jobs(jobs, 2, before_head=lambda n: (heads.append(n), print(f"== {n}")))
    out, err = capfd.readouterr()
    assert heads == ["a", "b", "c"]
    assert out.splitlines() == ["== a", "a out", "a fd1", "== b", "b out", "b fd1", "== c", "c out", "c fd1"]
    assert err.splitlines() == ["a err", "b err", "c err"]
    assert len({(tmp_path / n).read_text() for n in "abc"} | {str(os.getpid())}) == 4  # three other processes


def test_start_order_quick_first_then_longest() -> None:
    jobs = [Job(n, print, cost_s=c) for n, c in (("q1", 0.1), ("mid", 10), ("long", 100), ("q2", 1), ("x", 50))]
    assert [j.name for j in _order(jobs)] == ["q1", "q2", "long", "x", "mid"]


def _fail() -> None:
    raise HwmodelError("study broke: field 'x' expected a number")


def test_first_failure_in_order_is_raised_and_later_jobs_do_not_start(tmp_path: Path) -> None:
    jobs = [_writer("a", tmp_path, 0.2), Job("bad", _fail), _writer("late", tmp_path, 0.0, needs=("bad",))]
    with pytest.raises(HwmodelError, match="study broke"):
        run_jobs(jobs, 2)
    assert (tmp_path / "a").exists() and not (tmp_path / "late").exists()


def test_killed_job_and_bad_after_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(HwmodelError, match="exit status"):
        run_jobs([Job("dies", lambda: os._exit(3))], 2)
    with pytest.raises(HwmodelError, match="unknown 'after'"):
        run_jobs([Job("a", print, after=("nope",))], 2)


def test_tasks_run_warms_kernels_only_when_the_studies_run_one_after_another() -> None:
    import tasks

    assert tasks._all_studies(["--out", "o", "--jobs", "1"]) and tasks._all_studies(["--jobs=2"])
    assert not tasks._all_studies(["glitches"]) and not tasks._all_studies(["--help"])
    assert tasks._one_at_a_time(["--jobs", "1"]) and tasks._one_at_a_time(["--out", "o", "--jobs=1"])
    assert not tasks._one_at_a_time(["--jobs", "2"])


def test_reproduce_log_is_the_same_side_by_side_and_one_after_another(
    capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import click

    from hwmodel.cli.cmd_reproduce import _run_studies, reproduce
    from hwmodel.studies import runner

    monkeypatch.setattr(runner, "pool_start_method", lambda: "fork")  # side by side even in a worker with JAX

    @click.command("slow")
    @click.pass_context
    def slow(ctx: click.Context) -> None:
        time.sleep(0.3)
        click.echo(f"slow wrote {ctx.obj['out_dir']}")

    @click.command("quick")
    def quick() -> None:
        click.echo("quick done")
        click.echo("quick note", err=True)

    logs = []
    for jobs in (1, 2):
        with click.Context(reproduce, obj={"out_dir": Path("o")}) as ctx:
            _run_studies(ctx, [slow, quick], jobs)
        logs.append(capfd.readouterr())
    assert logs[0] == logs[1]
    assert logs[0].out.splitlines() == [
        "== hwmodel reproduce slow",
        "slow wrote o",
        "== hwmodel reproduce quick",
        "quick done",
    ]


def test_reproduce_runs_one_after_another_where_a_fork_is_unsafe(
    capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import click

    from hwmodel.cli.cmd_reproduce import _run_studies, reproduce
    from hwmodel.studies import concurrent, runner

    monkeypatch.setattr(runner, "pool_start_method", lambda: "forkserver")  # e.g. JAX loaded in this process
    monkeypatch.setattr(concurrent, "run_jobs", lambda *a, **k: pytest.fail("forked although a fork is unsafe"))

    @click.command("only")
    def only() -> None:
        click.echo(f"ran in {os.getpid()}")

    with click.Context(reproduce, obj={"out_dir": Path("o")}) as ctx:
        _run_studies(ctx, [only], 2)
    assert capfd.readouterr().out.splitlines() == ["== hwmodel reproduce only", f"ran in {os.getpid()}"]
