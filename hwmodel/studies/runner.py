"""One resumable runner for every study: a list of independent, JSON-serializable point specs and a pure function
per point, run on local processes (default), in this process (``workers=1``) or on a Dask cluster
(``scheduler=ADDRESS``), with one journal format and one resume rule (ARCHITECTURE.md, "Data flow of one study").

API::

    from hwmodel.studies.runner import run_points

    result = run_points("my.module:evaluate", [("p0", {"x": 1}), ("p1", {"x": 2})],
                        journal=out_dir / "journal.jsonl", fingerprint="inputs-hash", workers=4)
    result.results            # {"p0": ..., "p1": ...} in the order of the points given

* ``fn`` -- ``"module:function"`` (or a top-level function): called as ``fn(spec)`` in a worker, it returns a
  JSON-serializable result and must depend on nothing but ``spec`` (and files the fingerprint covers), so the
  result is the same in any process: results are bit-identical whatever the worker count.
* points -- ``(key, spec)`` pairs; keys are unique strings, specs JSON-serializable.
* The **journal** (JSON lines): a header ``{"journal": "hwmodel-study", "version": 1, "fingerprint": ...}``, then
  one line ``{"key": ..., "result": ...}`` per finished point, appended (and fsync'd) by the parent as each chunk
  of points finishes. A rerun with the same fingerprint skips the points already in the journal; a different
  fingerprint (other inputs, another model version) starts a fresh journal; a last line cut short by a kill is
  dropped. Results always come back as the journal holds them (parsed from the same JSON text, fresh or resumed),
  so outputs written from them are byte-identical whether a study ran at once or was killed and resumed. A run
  that finishes rewrites its journal in the order of its points (:meth:`Journal.rewrite`), so the journal too is
  the same bytes whatever the worker count or the finishing order.
* Worker processes exit when their parent dies: each worker asks the kernel for SIGKILL when its parent exits
  (Linux ``PR_SET_PDEATHSIG``) and, everywhere, a watchdog thread ends it once its parent is gone.
* A worker that dies (killed, out of memory) breaks a local pool: the unfinished chunks are queued again on a
  fresh pool, up to ``MAX_POOL_RESTARTS`` times. Dask reschedules a lost worker's tasks itself.

:func:`execute` is the executor underneath (chunks of items through a function, results handed to a callback in
the parent as they finish); the DSE sweep uses it with its own CSV store.
"""

from __future__ import annotations

import collections
import dataclasses
import importlib
import json
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from hwmodel.allocator import keep_freed_memory
from hwmodel.errors import HwmodelError
from hwmodel.io import note_damaged, open_locked
from hwmodel.studies.interrupt import Interrupts, deferred_sigint

JOURNAL_KIND = "hwmodel-study"
JOURNAL_VERSION = 1
MAX_POOL_RESTARTS = 3
DASK_CONNECT_TIMEOUT_S = 15.0
WATCHDOG_PERIOD_S = 0.25  # how often a worker's watchdog looks for its parent
START_METHODS = ("fork", "forkserver", "spawn")


class StudyError(HwmodelError):
    """A study could not run to its end (a point failed, workers kept dying, the scheduler is unreachable)."""


# ---------------------------------------------------------------------------------------------------- workers
def _resolve(fn: str | Callable[..., Any]) -> Callable[..., Any]:
    if callable(fn):
        return fn
    mod, _, name = str(fn).partition(":")
    if not name:
        raise StudyError(f"a point function is 'module:function', got {fn!r}")
    obj: Any = importlib.import_module(mod)
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def _set_pdeathsig() -> None:
    """Linux: the kernel sends this process SIGKILL when its parent exits."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):  # pragma: no cover - no prctl
        pass


def _watch_parent(parent_pid: int) -> None:
    """End this process once its parent is gone (re-parented, or the study's process no longer exists)."""
    ppid = os.getppid()
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(WATCHDOG_PERIOD_S):
            if os.getppid() != ppid:
                os._exit(70)
            try:
                os.kill(parent_pid, 0)
            except ProcessLookupError:
                os._exit(70)
            except PermissionError:  # pragma: no cover - exists, owned by someone else: not ours any more
                os._exit(70)

    threading.Thread(target=loop, name="hwmodel-parent-watchdog", daemon=True).start()


def worker_init(parent_pid: int, preload: Sequence[str] = ()) -> None:
    """Initializer of every local worker: die with the parent, leave Ctrl-C to the parent, one numeric thread,
    freed memory kept for reuse (:func:`keep_freed_memory`)."""
    _set_pdeathsig()
    keep_freed_memory()
    if os.getppid() == 1 or not _alive(parent_pid):  # the parent died before we could ask
        os._exit(70)
    _watch_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    for mod in preload:
        importlib.import_module(mod)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover
        return True
    return True


def evaluate_points(fn: str | Callable[..., Any], items: list[tuple[str, Any]]) -> list[str]:
    """Evaluate ``items`` (key, spec) in order; each result as its journal line (JSON text, no newline)."""
    f = _resolve(fn)
    out = []
    for key, spec in items:
        result = f(spec)
        try:
            out.append(json.dumps({"key": key, "result": result}, sort_keys=True, allow_nan=True))
        except (TypeError, ValueError) as exc:
            raise StudyError(f"point '{key}': the result of {fn} is not JSON-serializable ({exc})") from None
    return out


# ---------------------------------------------------------------------------------------------------- executor
#: modules that run threads of their own a forked child would inherit half-stopped (JAX warns on fork)
FORK_UNSAFE_MODULES = ("jax", "jaxlib", "torch", "tensorflow")


def pool_start_method() -> str:
    """``fork`` when this process can fork safely -- Linux (macOS system libraries do not survive a fork), no other
    Python thread running (Dask, a progress bar's refresh), no library known to run threads of its own loaded --
    else ``forkserver`` (workers from a clean interpreter, the evaluator's modules preloaded)."""
    if not sys.platform.startswith("linux") or threading.active_count() > 1:
        return "forkserver"
    if any(m in sys.modules for m in FORK_UNSAFE_MODULES):
        return "forkserver"
    return "fork"


def default_workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _mp_context(start_method: str, preload: Sequence[str]) -> multiprocessing.context.BaseContext:
    methods = multiprocessing.get_all_start_methods()
    if start_method not in START_METHODS:
        raise StudyError(f"start method must be one of {', '.join(START_METHODS)}, got {start_method!r}")
    if start_method not in methods:  # pragma: no cover - not Linux
        start_method = "spawn"
    ctx = multiprocessing.get_context(start_method)
    if start_method == "forkserver":
        ctx.set_forkserver_preload(["hwmodel.studies.runner", *preload])
    return ctx


def _terminate(pool: ProcessPoolExecutor) -> None:
    """Stop a pool now: cancel queued chunks and end running workers (their points are not finished)."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    manager = getattr(pool, "_executor_manager_thread", None)  # shutdown() forgets it
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(timeout=5)
    # the pool's manager thread ends once it has seen its workers die; joined here, it is not left to the
    # interpreter's exit, whose wakeup of it could race with its closing the wakeup pipe
    if manager is not None:
        manager.join(timeout=5)


def execute(
    task: Callable[..., Any],
    ref: Any,
    chunks: Sequence[Any],
    finished: Callable[[Any], None],
    *,
    workers: int = 1,
    scheduler: str | None = None,
    client: Any = None,
    start_method: str = "forkserver",
    preload: Sequence[str] = (),
    connect_timeout_s: float | None = None,
) -> int:
    """Run ``task(ref, chunk)`` for every chunk -- in this process (``workers == 1``), on ``workers`` local processes,
    or on Dask (``scheduler`` address or ``client``) -- and call ``finished(result)`` in this process as each one
    ends (in completion order). Returns the number of workers used. ``task`` must be a top-level function."""
    if not chunks:
        return workers
    if scheduler is not None or client is not None:
        return _run_dask(
            task,
            ref,
            list(chunks),
            finished,
            scheduler,
            client,
            DASK_CONNECT_TIMEOUT_S if connect_timeout_s is None else connect_timeout_s,
        )
    if workers <= 1:
        for ch in chunks:
            finished(task(ref, ch))
        return 1
    _run_local(task, ref, list(chunks), finished, workers, start_method, preload)
    return workers


def _run_local(
    task: Callable[..., Any],
    ref: Any,
    chunks: list[Any],
    finished: Callable[[Any], None],
    n_workers: int,
    start_method: str,
    preload: Sequence[str],
) -> None:
    with deferred_sigint() as ctrl_c:
        ctx = _mp_context(start_method, preload)
        _run_pools(task, ref, collections.deque(chunks), finished, n_workers, ctx, preload, ctrl_c)


def _run_pools(
    task: Callable[..., Any],
    ref: Any,
    queue: collections.deque[Any],
    finished: Callable[[Any], None],
    n_workers: int,
    ctx: multiprocessing.context.BaseContext,
    preload: Sequence[str],
    ctrl_c: Interrupts,
) -> None:
    """The chunks through a pool, and through a fresh one after a worker died; a Ctrl-C the loop noted is raised
    between waits (:mod:`hwmodel.studies.interrupt`)."""
    restarts = 0
    while queue:
        pool = ProcessPoolExecutor(
            max_workers=n_workers, mp_context=ctx, initializer=worker_init, initargs=(os.getpid(), tuple(preload))
        )
        inflight: dict[Future[Any], Any] = {}
        clean = False
        try:
            while queue or inflight:
                while queue and len(inflight) < 2 * n_workers:
                    fut = pool.submit(task, ref, queue[0])  # raises if the pool broke: the chunk stays queued
                    inflight[fut] = queue.popleft()
                done, _ = wait(inflight, timeout=ctrl_c.poll_s, return_when=FIRST_COMPLETED)
                ctrl_c.check()
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
                raise StudyError(
                    f"worker processes died {restarts} times (killed or out of memory); the finished "
                    "points are saved, rerun the same command to resume"
                ) from None
        finally:
            if clean:
                pool.shutdown(wait=True)
            else:
                _terminate(pool)


def _run_dask(
    task: Callable[..., Any],
    ref: Any,
    chunks: list[Any],
    finished: Callable[[Any], None],
    scheduler: str | None,
    client: Any,
    connect_timeout_s: float,
) -> int:
    """Evaluate the chunks on a Dask cluster; returns the number of workers it had when starting."""
    from distributed import Client, as_completed

    own = client is None
    if own:
        try:
            client = Client(scheduler, timeout=f"{connect_timeout_s}s")
        except (OSError, TimeoutError, ValueError, TypeError) as exc:
            raise StudyError(f"cannot reach the Dask scheduler at {scheduler}: {exc}") from None
    try:
        info = client.scheduler_info()
        n_workers = max(1, len(info.get("workers", {})))
        n_threads = max(n_workers, sum(w.get("nthreads", 1) for w in info.get("workers", {}).values()))
        queue = collections.deque(chunks)
        inflight: dict[Any, Any] = {}

        def submit() -> Any:
            ch = queue.popleft()
            fut = client.submit(task, ref, ch, pure=False, retries=2)
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
                    raise StudyError(
                        f"a Dask task failed ({type(exc).__name__}: {exc}); the finished points are "
                        "saved, rerun the same command to resume"
                    )
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


# ---------------------------------------------------------------------------------------------------- journal
class Journal:
    """The JSON-lines journal of a study (module docstring)."""

    def __init__(self, path: Path | str, fingerprint: str) -> None:
        self.path = Path(path)
        self.fingerprint = fingerprint
        self._fh: Any = None

    def header(self) -> str:
        return json.dumps(
            {"journal": JOURNAL_KIND, "version": JOURNAL_VERSION, "fingerprint": self.fingerprint}, sort_keys=True
        )

    def read(self, *, quiet: bool = False) -> tuple[dict[str, str], int]:
        """(finished points: key -> journal line, bytes of the file that are whole lines of this study); nothing
        when the file is absent or another study's (other fingerprint or format). A damaged part (bytes that are
        not a JSON line of this journal) ends what is kept: the points before it are resumed, the rest re-run,
        and one line on stderr says so (unless ``quiet``)."""
        if not self.path.is_file():
            return {}, 0
        done: dict[str, str] = {}
        good_bytes = pos = 0
        lines = self.path.read_bytes().split(b"\n")
        problem = ""
        if len(lines) == 1 and lines[0]:
            problem = "no complete header line"
        for i, raw in enumerate(lines[:-1]):  # the part after the last newline is cut short (or empty)
            pos += len(raw) + 1
            try:
                doc = json.loads(raw)
            except ValueError:
                problem = f"line {i + 1} is not JSON"
                break
            if i == 0:
                if not (
                    isinstance(doc, dict)
                    and doc.get("journal") == JOURNAL_KIND
                    and doc.get("version") == JOURNAL_VERSION
                    and doc.get("fingerprint") == self.fingerprint
                ):
                    if not quiet:
                        why = (
                            "another study's or model version's fingerprint"
                            if isinstance(doc, dict)
                            and doc.get("journal") == JOURNAL_KIND
                            and doc.get("version") == JOURNAL_VERSION
                            else "not a study journal header"
                        )
                        note_damaged(self.path, "or outdated study journal", why, "starting it afresh")
                    return {}, 0
            elif isinstance(doc, dict) and isinstance(doc.get("key"), str) and "result" in doc:
                done[doc["key"]] = raw.decode("utf-8")
            else:
                problem = f"line {i + 1} is not a finished point"
                break
            good_bytes = pos
        if problem and not quiet:
            note_damaged(
                self.path, "study journal", problem, f"keeping the {len(done)} points before it, the rest are re-run"
            )
        return done, good_bytes

    def open(self, fresh: bool = False) -> dict[str, str]:
        """Open for appending (an exclusive lock: a second run on the same journal is refused); returns the
        finished points already journaled (key -> journal line)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fh = open_locked(
            self.path,
            "a",
            StudyError(f"{self.path} is being written by another run; wait for it or use another output directory"),
            encoding="utf-8",
        )
        try:
            done, good_bytes = ({}, 0) if fresh else self.read()
            fh.truncate(good_bytes)  # drop a line cut short by a kill (or everything, for a fresh journal)
            if good_bytes == 0:
                done = {}
                fh.write(self.header() + "\n")
                fh.flush()
                os.fsync(fh.fileno())
        except BaseException:
            fh.close()
            raise
        self._fh = fh
        return done

    def append(self, lines: Iterable[str]) -> None:
        self._fh.write("".join(line + "\n" for line in lines))
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def rewrite(self, lines: Iterable[str]) -> None:
        """Replace the journal's points by ``lines`` (journal lines, in the order given) under the same header.
        Points finish in an order that depends on the workers' timing; a finished run rewrites its journal in the
        order of its points, so the file is the same bytes whatever the worker count or the finishing order.
        Atomic: a temporary file renamed over the journal, so a kill mid-way leaves it as it was. Called with the
        journal open (the lock held)."""
        assert self._fh is not None, "Journal.open() first"
        tmp = self.path.with_name(self.path.name + ".sorting")
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(self.header() + "\n" + "".join(line + "\n" for line in lines))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


# ---------------------------------------------------------------------------------------------------- run_points
@dataclasses.dataclass
class StudyRun:
    """What :func:`run_points` did and produced."""

    results: dict[str, Any]  # key -> result, in the order of the points given
    evaluated: int
    resumed: int
    workers: int
    backend: str
    elapsed_s: float


def auto_chunk_size(n_points: int, n_workers: int) -> int:
    """About 4 chunks per worker (balance vs. journal granularity), at least one point each."""
    return max(1, -(-n_points // (4 * max(1, n_workers))))


def run_points(
    fn: str | Callable[..., Any],
    points: Sequence[tuple[str, Any]],
    *,
    journal: Path | str | None = None,
    fingerprint: str = "",
    workers: int | None = None,
    scheduler: str | None = None,
    client: Any = None,
    chunk_size: int | None = None,
    start_method: str = "forkserver",
    preload: Sequence[str] = (),
    fresh: bool = False,
    on_result: Callable[[str, Any], None] | None = None,
) -> StudyRun:
    """Run ``fn(spec)`` for every ``(key, spec)`` of ``points`` not yet in ``journal`` (module docstring).

    ``workers``: local processes (default: the CPUs this process may use; 1 runs in this process). ``scheduler``
    or ``client`` selects Dask. ``start_method``: how local workers start ("fork" lets them inherit what the
    parent already built, e.g. memoized engines; "forkserver" starts them from a clean, pre-imported
    interpreter). ``on_result(key, result)`` is called in this process as each point finishes or is resumed.
    """
    t0 = time.perf_counter()
    keys = [k for k, _ in points]
    if len(set(keys)) != len(keys):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise StudyError(f"point keys must be unique; '{dup}' appears more than once")
    for k, spec in points:
        try:
            json.dumps(spec)
        except (TypeError, ValueError) as exc:
            raise StudyError(f"point '{k}': its spec is not JSON-serializable ({exc})") from None
    jr = Journal(journal, fingerprint) if journal is not None else None
    lines: dict[str, str] = jr.open(fresh) if jr is not None else {}
    others = len(lines)  # points of the journal this run does not ask for (kept: the rewrite below is skipped)
    lines = {k: v for k, v in lines.items() if k in set(keys)}
    others -= len(lines)
    resumed = len(lines)
    parsed: dict[str, Any] = {}

    def take(line: str) -> str:
        doc = json.loads(line)
        parsed[doc["key"]] = doc["result"]
        if on_result is not None:
            on_result(doc["key"], doc["result"])
        return str(doc["key"])

    for k in keys:
        if k in lines:
            take(lines[k])
    todo = [(k, s) for k, s in points if k not in lines]
    dask = scheduler is not None or client is not None
    n_workers = 1 if dask else (workers or default_workers())
    n_workers = min(n_workers, max(1, len(todo)))
    size = chunk_size or auto_chunk_size(len(todo), n_workers if not dask else 8)
    chunks = [todo[i : i + size] for i in range(0, len(todo), size)]

    def finished(chunk_lines: list[str]) -> None:
        if jr is not None:
            jr.append(chunk_lines)
        for line in chunk_lines:
            lines[take(line)] = line

    try:
        used = execute(
            evaluate_points,
            fn if isinstance(fn, str) else fn,
            chunks,
            finished,
            workers=n_workers,
            scheduler=scheduler,
            client=client,
            start_method=start_method,
            preload=preload,
        )
        if jr is not None and not others:
            jr.rewrite(lines[k] for k in keys)
    finally:
        if jr is not None:
            jr.close()
    backend = "dask" if dask else ("in-process" if n_workers == 1 else "local")
    return StudyRun(
        results={k: parsed[k] for k in keys},
        evaluated=len(todo),
        resumed=resumed,
        workers=used,
        backend=backend,
        elapsed_s=time.perf_counter() - t0,
    )


def journal_results(path: Path | str, fingerprint: str) -> Mapping[str, Any]:
    """The finished points of a journal written under ``fingerprint`` (empty if it is another study's); read only."""
    done, _ = Journal(path, fingerprint).read(quiet=True)
    return {k: json.loads(v)["result"] for k, v in done.items()}
