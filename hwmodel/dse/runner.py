"""Run a sweep plan: on local processes (default), in this process (``workers=1``) or on a Dask cluster.

Points already in the results file are skipped (resume), the others are cut into chunks and evaluated in
parallel; each finished chunk is appended to the results file (fsync'd) by this process before anything else
happens, so Ctrl-C, a killed worker or a killed sweep loses at most the chunks being evaluated at that moment.
Rerunning the same command evaluates exactly the points not yet in the file, so an interrupted sweep, resumed,
ends with the same rows as an uninterrupted one. While it runs, the file is in finishing order; a sweep that
finishes rewrites it in the plan's point order (:meth:`ResultStore.rewrite_in_order`), so the finished file is
the same bytes whatever the worker count, the finishing order or the interruptions on the way.

The chunks run on the project's one study executor (:func:`hwmodel.studies.runner.execute`):

* Local processes: a ``concurrent.futures.ProcessPoolExecutor``, at most two chunks in flight per worker; workers
  exit when this process dies. Workers are forked from this process when that is safe (:func:`pool_start_method`:
  one thread, no JAX), so they start at once with everything planning built -- the evaluator's modules imported,
  its compiled Numba kernels loaded, its memoized per-design facts -- instead of importing and loading them again
  each (measured on the 864-point streaming sweep: 1.3 s before a fork-server worker's first point and 0.9 s of
  CPU in its first chunk, against a few milliseconds). Otherwise they start from a fork server that has imported
  the evaluator's modules. A worker that dies (killed, out of memory) breaks the pool: the unfinished chunks are
  queued again on a fresh pool, up to ``MAX_POOL_RESTARTS`` times per run.
* Dask: the same chunks are submitted to a ``distributed.Client`` connected to ``--scheduler ADDRESS`` (or to a
  client passed in, e.g. a LocalCluster in tests); Dask reschedules the tasks of a lost worker itself.

The sweep's journal is its ``results.csv`` (one row per finished point, the rows users read), not the runner's
JSON-lines journal.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hwmodel.dse.spec import Point, SweepPlan
from hwmodel.dse.store import ResultStore, Row
from hwmodel.dse.worker import ChunkResult, evaluate_chunk
from hwmodel.studies.runner import (  # noqa: F401 - re-exported
    FORK_UNSAFE_MODULES,
    MAX_POOL_RESTARTS,
    default_workers,
    execute,
    pool_start_method,
)

DASK_CONNECT_TIMEOUT_S = 15.0

Chunk = list[tuple[str, dict[str, Any]]]


@dataclasses.dataclass
class RunStats:
    """What one invocation did. ``evaluated`` counts points evaluated now (ok or invalid)."""

    total: int
    already_done: int
    screened: int
    evaluated: int = 0
    invalid: int = 0
    elapsed_s: float = 0.0
    interrupted: bool = False
    workers: int = 1
    backend: str = "local"

    @property
    def remaining(self) -> int:
        return self.total - self.already_done - self.screened - self.evaluated

    @property
    def points_per_min(self) -> float:
        return 60.0 * self.evaluated / self.elapsed_s if self.elapsed_s > 0 else math.nan


def results_path(out_dir: Path) -> Path:
    return Path(out_dir) / "results.csv"


def open_store(plan: SweepPlan, out_dir: Path) -> ResultStore:
    return ResultStore(results_path(out_dir), plan.evaluator, plan.param_names)


def split_work(plan: SweepPlan, rows: dict[str, Row]) -> tuple[list[Row], list[Point], int]:
    """(screened rows still to write, points to evaluate, points already finished) given the rows on disk.

    A point is finished when it has an ``ok``/``invalid`` row, or when the screen excludes it now and its
    ``screened`` row is on disk. A point screened out by an earlier, tighter constraint set is evaluated now.
    """
    to_write: list[Row] = []
    pending: list[Point] = []
    done = 0
    for pt in plan.points:
        row = rows.get(pt.id)
        if row is not None and row.status in ("ok", "invalid"):
            done += 1
        elif pt.id in plan.screened_out:
            if row is not None and row.status == "screened":
                done += 1
            else:
                exact, why = plan.screened_out[pt.id]
                to_write.append(Row(pt.id, "screened", pt.params, exact, why))
        else:
            pending.append(pt)
    return to_write, pending, done


def chunks_of(points: Sequence[Point], size: int, *, taper: int = 0, run: int = 1) -> Iterator[Chunk]:
    """Consecutive chunks of ``size`` points; with ``taper`` (the chunks in flight at once), the last ones shrink
    to what is left divided by ``taper`` (in whole runs of ``run`` points when ``size`` is a multiple of it, down to
    one run), so the workers finish together: one full chunk left to a lone worker would keep the others idle."""
    step = run if run > 1 and size % run == 0 else 1
    i = 0
    while i < len(points):
        n = size
        if taper > 0:
            n = max(step, min(size, (len(points) - i) // taper // step * step))
        yield [(p.id, p.params) for p in points[i : i + n]]
        i += n


def auto_chunk_size(n_points: int, n_workers: int, run: int = 1) -> int:
    """About 16 chunks per worker (for balance and a fine-grained resume), at most 64 points each, rounded up to
    a multiple of ``run`` (:func:`shared_run`) when that stays within 64, so no chunk boundary splits the points
    that share an evaluator's cached work (which two workers would then both do)."""
    size = max(1, min(64, math.ceil(n_points / (16 * max(1, n_workers)))))
    if 1 < run <= 64:
        size = min(64 // run * run, math.ceil(size / run) * run)
    return size


def shared_run(points: Sequence[Point], innermost: Sequence[str]) -> int:
    """How many points from the first differ only in the evaluator's ``innermost`` parameters (a grid varies them
    fastest: e.g. the clocks of one design, which share its compiled program)."""
    if not innermost or not points:
        return 1

    def rest(p: Point) -> list[tuple[str, Any]]:
        return sorted((k, v) for k, v in p.params.items() if k not in innermost)

    first = rest(points[0])
    n = 1
    while n < len(points) and rest(points[n]) == first:
        n += 1
    return n


def with_affinity(points: Sequence[Point], evaluator: Any) -> tuple[list[Point], int]:
    """``points`` with those of equal ``evaluator.affinity`` key together (groups in the order they first appear,
    each in its own order), and how many points from the first no chunk boundary should split: the first group's
    size when it is a whole number of :func:`shared_run` runs, else that run."""
    run = shared_run(points, evaluator.innermost)
    key = getattr(evaluator, "affinity", None)
    if key is None or not points:
        return list(points), run
    groups: dict[Any, list[Point]] = {}
    for p in points:
        groups.setdefault(key(p.params), []).append(p)
    first = len(next(iter(groups.values())))
    return [p for g in groups.values() for p in g], first if first % run == 0 else run


def _preload(plan: SweepPlan) -> tuple[str, ...]:
    """Modules a fork server imports before it forks workers: the worker, the module defining the evaluator (not a
    plugin file's, which is not importable by name) and the modules the evaluator declares it needs."""
    ev = plan.evaluator
    module = getattr(ev.evaluate, "__module__", None) or ""
    own = (module,) if module and not module.startswith(("_", "hwmodel_plugin_")) else ()
    return ("hwmodel.dse.worker", *own, *ev.preload)


def run_sweep(
    plan: SweepPlan,
    out_dir: Path,
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    client: Any = None,
    chunk_size: int | None = None,
    fresh: bool = False,
    progress: bool = True,
) -> RunStats:
    """Evaluate every unfinished point of ``plan`` into ``out_dir/results.csv``; see the module docstring.

    ``scheduler`` (an address) or ``client`` (a distributed.Client) selects Dask; otherwise ``workers`` local
    processes (default: the CPUs this process may use; 1 runs in this process). Ctrl-C stops cleanly: the
    returned stats say ``interrupted`` and every finished point is on disk.
    """
    store = open_store(plan, out_dir)
    rows = store.open(fresh=fresh)
    try:
        screened_rows, pending, done = split_work(plan, rows)
        if screened_rows:
            store.append(screened_rows)
        stats = RunStats(total=len(plan.points), already_done=done, screened=len(screened_rows))
        params_of = {p.id: p.params for p in pending}
        dask = scheduler is not None or client is not None
        n_workers = 1 if dask else (workers or default_workers())
        stats.backend = "dask" if dask else ("in-process" if n_workers == 1 else "local")
        stats.workers = n_workers
        pending, run = with_affinity(pending, plan.evaluator)
        size = chunk_size or auto_chunk_size(len(pending), n_workers if not dask else 8, run)
        in_flight = 0 if chunk_size or dask else 2 * n_workers  # a chunk size given is kept as it is
        chunks = list(chunks_of(pending, size, taper=in_flight, run=run))
        start = time.perf_counter()
        if progress:
            where = (
                f"Dask at {scheduler}"
                if scheduler
                else ("Dask" if dask else f"{n_workers} local worker(s)" if n_workers > 1 else "this process")
            )
            print(
                f"{plan.name}: {len(pending):,} points to evaluate on {where}, {done:,} already done, "
                f"{len(screened_rows):,} screened out now -> {store.path}",
                file=sys.stderr,
                flush=True,
            )
        with _progress_bar(progress, plan.name, len(pending)) as advance:

            def finished(result: ChunkResult) -> None:
                out = [Row(pid, status, params_of[pid], metrics, msg) for pid, status, metrics, msg in result]
                store.append(out)
                stats.evaluated += len(out)
                stats.invalid += sum(1 for r in out if r.status == "invalid")
                advance(len(out))

            try:
                used = execute(
                    evaluate_chunk,
                    plan.evaluator_ref,
                    chunks,
                    finished,
                    workers=n_workers,
                    scheduler=scheduler,
                    client=client,
                    start_method=pool_start_method(),
                    preload=_preload(plan),
                    connect_timeout_s=DASK_CONNECT_TIMEOUT_S,
                )
                if dask:
                    stats.workers = used
            except KeyboardInterrupt:
                stats.interrupted = True
        if not stats.interrupted:
            store.rewrite_in_order([p.id for p in plan.points])
        stats.elapsed_s = time.perf_counter() - start
        return stats
    finally:
        store.close()


# ---------------------------------------------------------------------------------------------------- progress
@contextmanager
def _progress_bar(enabled: bool, name: str, total: int) -> Iterator[Callable[[int], None]]:
    """A rich progress bar on stderr (points done, rate, ETA); a no-op when disabled or nothing to do. It redraws
    when a chunk finishes, not from a refresh thread, so the process stays single-threaded and can fork its
    workers (:func:`pool_start_method`)."""
    if not enabled or total == 0:
        yield lambda n: None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
    )
    start = time.perf_counter()
    with Progress(*columns, console=Console(stderr=True), auto_refresh=False) as bar:
        task = bar.add_task(name, total=total, rate="")
        bar.refresh()  # drawn at once, then as chunks finish

        def advance(n: int) -> None:
            done = bar.tasks[0].completed + n
            dt = time.perf_counter() - start
            bar.update(task, advance=n, rate=f"{60 * done / dt:,.0f} pts/min" if dt > 0 else "", refresh=True)

        yield advance
