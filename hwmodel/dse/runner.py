"""Run a sweep plan: on local processes (default), in this process (``workers=1``) or on a Dask cluster.

Points already in the results file are skipped (resume), the others are cut into chunks and evaluated in
parallel; each finished chunk is appended to the results file (fsync'd) by this process before anything else
happens, so Ctrl-C, a killed worker or a killed sweep loses at most the chunks being evaluated at that moment.
Rerunning the same command evaluates exactly the points not yet in the file, so an interrupted sweep, resumed,
ends with the same rows as an uninterrupted one (in a different order in the file; reports sort by point).

* Local processes: a ``concurrent.futures.ProcessPoolExecutor`` (fork server where available, so workers start
  from a clean, pre-imported interpreter), at most two chunks in flight per worker. A worker that dies (killed,
  out of memory) breaks the pool: the unfinished chunks are queued again on a fresh pool, up to
  ``MAX_POOL_RESTARTS`` times per run.
* Dask: the same chunks are submitted to a ``distributed.Client`` connected to ``--scheduler ADDRESS`` (or to a
  client passed in, e.g. a LocalCluster in tests); Dask reschedules the tasks of a lost worker itself.
"""
from __future__ import annotations

import collections
import dataclasses
import math
import multiprocessing
import os
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hwmodel.dse.spec import Point, SweepPlan
from hwmodel.dse.store import ResultStore, Row
from hwmodel.dse.worker import ChunkResult, evaluate_chunk
from hwmodel.lifeline import worker_initializer
from hwmodel.errors import HwmodelError

MAX_POOL_RESTARTS = 3
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


def default_workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


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


def chunks_of(points: Sequence[Point], size: int) -> Iterator[Chunk]:
    for i in range(0, len(points), size):
        yield [(p.id, p.params) for p in points[i:i + size]]


def auto_chunk_size(n_points: int, n_workers: int) -> int:
    """About 16 chunks per worker (for balance and a fine-grained resume), at most 64 points each."""
    return max(1, min(64, math.ceil(n_points / (16 * max(1, n_workers)))))


def run_sweep(plan: SweepPlan, out_dir: Path, *, workers: int | None = None, scheduler: str | None = None,
              client: Any = None, chunk_size: int | None = None, fresh: bool = False,
              progress: bool = True) -> RunStats:
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
        size = chunk_size or auto_chunk_size(len(pending), n_workers if not dask else 8)
        chunks = list(chunks_of(pending, size))
        start = time.perf_counter()
        if progress:
            import sys

            where = f"Dask at {scheduler}" if scheduler else ("Dask" if dask else
                                                             f"{n_workers} local worker(s)" if n_workers > 1 else
                                                             "this process")
            print(f"{plan.name}: {len(pending):,} points to evaluate on {where}, {done:,} already done, "
                  f"{len(screened_rows):,} screened out now -> {store.path}", file=sys.stderr, flush=True)
        with _progress_bar(progress, plan.name, len(pending)) as advance:

            def finished(result: ChunkResult) -> None:
                out = [Row(pid, status, params_of[pid], metrics, msg) for pid, status, metrics, msg in result]
                store.append(out)
                stats.evaluated += len(out)
                stats.invalid += sum(1 for r in out if r.status == "invalid")
                advance(len(out))

            try:
                if not chunks:
                    pass
                elif dask:
                    stats.workers = _run_dask(plan.evaluator_ref, chunks, finished, scheduler, client)
                elif n_workers == 1:
                    for ch in chunks:
                        finished(evaluate_chunk(plan.evaluator_ref, ch))
                else:
                    _run_local(plan.evaluator_ref, chunks, finished, n_workers)
            except KeyboardInterrupt:
                stats.interrupted = True
        stats.elapsed_s = time.perf_counter() - start
        return stats
    finally:
        store.close()


# ---------------------------------------------------------------------------------------------------- local
def _mp_context() -> multiprocessing.context.BaseContext:
    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["hwmodel.dse.worker"])
        return ctx
    return multiprocessing.get_context("spawn")  # pragma: no cover - Windows


def _terminate(pool: ProcessPoolExecutor) -> None:
    """Stop a pool now: cancel queued chunks and end running workers (their points are not finished)."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(timeout=5)


def _run_local(ref: str, chunks: list[Chunk], finished: Callable[[ChunkResult], None], n_workers: int) -> None:
    queue = collections.deque(chunks)
    restarts = 0
    ctx = _mp_context()
    while queue:
        pool = ProcessPoolExecutor(max_workers=n_workers, mp_context=ctx, initializer=worker_initializer,
                                   initargs=(os.getpid(),))
        inflight: dict[Future[ChunkResult], Chunk] = {}
        clean = False
        try:
            while queue or inflight:
                while queue and len(inflight) < 2 * n_workers:
                    fut = pool.submit(evaluate_chunk, ref, queue[0])  # raises if the pool broke: chunk stays queued
                    inflight[fut] = queue.popleft()
                done, _ = wait(inflight, return_when=FIRST_COMPLETED)
                for fut in done:
                    if isinstance(fut.exception(), BrokenProcessPool):
                        raise BrokenProcessPool(str(fut.exception()))
                    inflight.pop(fut)
                    finished(fut.result())
            clean = True
        except BrokenProcessPool:
            # a worker died: keep what finished, queue the rest again (in order) on a fresh pool
            for fut, ch in reversed(list(inflight.items())):
                if fut.done() and not fut.cancelled() and fut.exception() is None:
                    finished(fut.result())
                else:
                    queue.appendleft(ch)
            restarts += 1
            if restarts > MAX_POOL_RESTARTS:
                raise HwmodelError(f"worker processes died {restarts} times (killed or out of memory); the finished "
                                   "points are saved, rerun the same command to resume") from None
        finally:
            if clean:
                pool.shutdown(wait=True)
            else:
                _terminate(pool)


# ---------------------------------------------------------------------------------------------------- dask
def _run_dask(ref: str, chunks: list[Chunk], finished: Callable[[ChunkResult], None], scheduler: str | None,
              client: Any) -> int:
    """Evaluate the chunks on a Dask cluster; returns the number of workers it had when starting."""
    from distributed import Client, as_completed

    own = client is None
    if own:
        try:
            client = Client(scheduler, timeout=f"{DASK_CONNECT_TIMEOUT_S}s")
        except (OSError, TimeoutError, ValueError, TypeError) as exc:
            raise HwmodelError(f"cannot reach the Dask scheduler at {scheduler}: {exc}") from None
    try:
        n_workers = max(1, len(client.scheduler_info().get("workers", {})))
        n_threads = max(n_workers, sum(w.get("nthreads", 1) for w in client.scheduler_info()["workers"].values()))
        queue = collections.deque(chunks)
        inflight: dict[Any, Chunk] = {}

        def submit() -> Any:
            ch = queue.popleft()
            fut = client.submit(evaluate_chunk, ref, ch, pure=False, retries=2)
            inflight[fut] = ch
            return fut

        ac = as_completed([submit() for _ in range(min(len(queue), 2 * n_threads))])
        try:
            for fut in ac:
                inflight.pop(fut)
                if fut.status == "error":
                    exc = fut.exception()
                    if isinstance(exc, HwmodelError):
                        raise exc
                    raise HwmodelError(f"a Dask task failed ({type(exc).__name__}: {exc}); the finished points are "
                                       "saved, rerun the same command to resume")
                finished(fut.result())
                fut.release()
                if queue:
                    ac.add(submit())
        finally:
            for fut in inflight:
                fut.cancel()
        return n_workers
    finally:
        if own:
            client.close()


# ---------------------------------------------------------------------------------------------------- progress
@contextmanager
def _progress_bar(enabled: bool, name: str, total: int) -> Iterator[Callable[[int], None]]:
    """A rich progress bar on stderr (points done, rate, ETA); a no-op when disabled or nothing to do."""
    if not enabled or total == 0:
        yield lambda n: None
        return
    from rich.console import Console
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                               TimeRemainingColumn)

    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn())
    start = time.perf_counter()
    with Progress(*columns, console=Console(stderr=True)) as bar:
        task = bar.add_task(name, total=total, rate="")

        def advance(n: int) -> None:
            done = bar.tasks[0].completed + n
            dt = time.perf_counter() - start
            bar.update(task, advance=n, rate=f"{60 * done / dt:,.0f} pts/min" if dt > 0 else "")

        yield advance
