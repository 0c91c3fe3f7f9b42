"""Whole studies side by side: a few long jobs (each a call in its own forked process) on the machine's cores, with
their console output printed in a fixed order, as if they had run one after another.

``hwmodel reproduce`` (every study) uses it: its studies share nothing but the on-disk caches (Numba kernels,
engine tables, draft samples), so they can run at once, and the log must read the same whatever ran first.

* :class:`Job` -- a name, a zero-argument callable (run in a child forked from this process), the names of the
  jobs it must run after (``after``: one that reads a cache another fills starts when that one has finished, so
  it loads what the other computed instead of computing it too), and its expected cost (CPU-s; only the order in
  which jobs start depends on it).
* :func:`run_jobs` starts at most ``slots`` jobs at a time. A job becomes *ready* when every job it runs after has
  finished; of the ready jobs, the quick ones (cost below :data:`QUICK_S`) start first in the given order, so the
  log begins at once, then the rest, longest first (the longest-processing-time rule: the last job to finish is
  a short one).
* Each child writes its stdout and stderr to files of its own (file descriptors 1 and 2 too, so its own worker
  processes and compiled code write there); the parent copies the *head* job's files (the first in the given
  order not yet printed) to its own streams as they grow, so the head job's progress is live, and the others'
  output follows, complete, when their turn comes. The child's streams report the parent's ``isatty()`` (and
  the terminal's width, through ``COLUMNS``), so tables and colours are drawn as they would be in the parent.
* A job that raises: its exception is sent back (pickled; when it cannot be, a :class:`HwmodelError` with its
  text) and raised in the parent once every job before it in the order has been printed; jobs not started yet
  are not started and running ones are stopped (SIGTERM to their process, which ends its own workers).
  ``before_head(name)`` is called in the parent just before a job's output is printed (a header line).

Nothing here changes what a job computes: each child is a copy of the parent at the moment it starts.
"""

from __future__ import annotations

import dataclasses
import io
import multiprocessing
import os
import pickle
import shutil
import sys
import tempfile
import traceback
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, BinaryIO

from hwmodel.errors import HwmodelError

QUICK_S = 3.0
"""Jobs expected to take less than this (CPU-s) start first, in the given order."""
POLL_S = 0.1
"""How often the parent copies the head job's growing output (seconds)."""


@dataclasses.dataclass(frozen=True)
class Job:
    name: str
    fn: Callable[[], Any]
    after: tuple[str, ...] = ()
    cost_s: float = 0.0


class _TtyLike(io.TextIOWrapper):
    """A text stream on a file descriptor that answers ``isatty()`` as the parent's stream did."""

    def __init__(self, fd: int, tty: bool, encoding: str) -> None:
        super().__init__(io.FileIO(fd, "w", closefd=False), encoding=encoding, errors="replace", write_through=True)
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


def _is_tty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _sendable(exc: BaseException) -> BaseException:
    """``exc`` if it survives pickling, else a HwmodelError (for HwmodelError subclasses) or RuntimeError with its
    text."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001 - any exception type may fail to pickle in any way
        return (HwmodelError if isinstance(exc, HwmodelError) else RuntimeError)(str(exc))


def _child(job: Job, out: str, err: str, ttys: tuple[bool, bool], columns: int | None, conn: Connection) -> None:
    for fd, path in ((1, out), (2, err)):
        f = os.open(path, os.O_WRONLY | os.O_APPEND)
        os.dup2(f, fd)
        os.close(f)
    sys.stdout = _TtyLike(1, ttys[0], getattr(sys.__stdout__, "encoding", None) or "utf-8")
    sys.stderr = _TtyLike(2, ttys[1], getattr(sys.__stderr__, "encoding", None) or "utf-8")
    if columns:
        os.environ["COLUMNS"] = str(columns)
    try:
        job.fn()
        conn.send(None)
    except BaseException as exc:  # noqa: BLE001 - every outcome goes back to the parent, which raises it
        if not isinstance(exc, (HwmodelError, OSError, KeyboardInterrupt, SystemExit)) and type(exc).__module__ != (
            "click.exceptions"
        ):
            traceback.print_exc()  # an unexpected error: its traceback is in the job's log
        conn.send(_sendable(exc))
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        conn.close()


class _Running:
    def __init__(self, job: Job, folder: Path, ttys: tuple[bool, bool], columns: int | None) -> None:
        self.job = job
        self.paths = (folder / f"{job.name}.out", folder / f"{job.name}.err")
        for p in self.paths:
            p.touch()
        recv, send = multiprocessing.Pipe(duplex=False)
        self.conn = recv
        self.process = multiprocessing.get_context("fork").Process(
            target=_child, args=(job, str(self.paths[0]), str(self.paths[1]), ttys, columns, send), name=job.name
        )
        self.process.start()
        send.close()
        self.outcome: BaseException | None = None
        self.received = False
        self.done = False

    def poll(self) -> bool:
        """True once the child has exited (its outcome, if it sent one, is read as soon as it is there)."""
        if self.done:
            return True
        if not self.received:
            try:
                if self.conn.poll():
                    self.outcome, self.received = self.conn.recv(), True
            except (EOFError, OSError):
                self.received = True  # it ended without a word: its exit status says what happened
        if not self.process.is_alive():
            self.process.join()
            if self.outcome is None and self.process.exitcode != 0:
                self.outcome = HwmodelError(f"job {self.job.name} ended with exit status {self.process.exitcode}")
            self.done = True
        return self.done


def _order(jobs: Sequence[Job]) -> list[Job]:
    """The order in which ready jobs start: quick ones first (given order), then longest first (stable)."""
    quick = [j for j in jobs if j.cost_s < QUICK_S]
    rest = sorted((j for j in jobs if j.cost_s >= QUICK_S), key=lambda j: -j.cost_s)
    return quick + rest


def run_jobs(jobs: Sequence[Job], slots: int, before_head: Callable[[str], None] = lambda _n: None) -> None:
    """Run ``jobs`` (at most ``slots`` at a time), their output printed in the given order; see the module doc."""
    names = [j.name for j in jobs]
    unknown = sorted({a for j in jobs for a in j.after} - set(names))
    if unknown or len(set(names)) != len(names):
        raise HwmodelError(f"jobs: unknown 'after' names {unknown} or duplicate job names in {names}")
    _flush()
    ttys = (_is_tty(sys.stdout), _is_tty(sys.stderr))
    columns = shutil.get_terminal_size().columns if ttys[0] else None
    outs: tuple[BinaryIO, BinaryIO] = (_binary(sys.stdout), _binary(sys.stderr))
    pending = _order(jobs)
    started: dict[str, _Running] = {}
    with tempfile.TemporaryDirectory(prefix="hwmodel-jobs-") as tmp:
        try:
            for name in names:
                before_head(name)
                _flush()
                offsets = [0, 0]
                while True:
                    _start_ready(pending, started, slots, Path(tmp), ttys, columns)
                    h = started.get(name)
                    if h is None:
                        failed = [r.outcome for n in names if (r := started.get(n)) and r.outcome is not None]
                        if failed:  # nothing more starts: the first failure in the order is the run's
                            raise failed[0]
                        if all(r.done for r in started.values()):
                            raise HwmodelError(f"jobs: {name} can never start (its 'after' jobs wait for it)")
                        wait([r.process.sentinel for r in started.values() if not r.done], timeout=POLL_S)
                        continue
                    was_done = h.poll()
                    for k in (0, 1):
                        offsets[k] = _copy(h.paths[k], offsets[k], outs[k])
                    if was_done:
                        break
                    wait([r.process.sentinel for r in started.values() if not r.done], timeout=POLL_S)
                if h.outcome is not None:
                    raise h.outcome
        except KeyboardInterrupt:  # Ctrl-C reached the children too: each ends (and saves) as it would alone
            for r in started.values():
                r.process.join()
            raise
        finally:
            _stop(started)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        stream.flush()


def _start_ready(
    pending: list[Job],
    started: dict[str, _Running],
    slots: int,
    folder: Path,
    ttys: tuple[bool, bool],
    columns: int | None,
) -> None:
    """Start ready jobs (in ``pending``'s order) while a slot is free and no job has failed."""
    ok = {n for n, r in started.items() if r.poll() and r.outcome is None}
    if any(r.done and r.outcome is not None for r in started.values()):
        return
    running = sum(not r.done for r in started.values())
    while pending and running < slots:
        ready = next((j for j in pending if set(j.after) <= ok), None)
        if ready is None:
            return
        pending.remove(ready)
        _flush()
        started[ready.name] = _Running(ready, folder, ttys, columns)
        running += 1


def _binary(stream: Any) -> BinaryIO:
    buf = getattr(stream, "buffer", None)
    return buf if buf is not None else _TextSink(stream)  # type: ignore[return-value]


class _TextSink:
    """A text stream (no ``.buffer``, e.g. a test's capture) seen as a binary one."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, b: bytes) -> int:
        self._stream.write(b.decode("utf-8", errors="replace"))
        return len(b)

    def flush(self) -> None:
        self._stream.flush()


def _copy(path: Path, offset: int, out: BinaryIO) -> int:
    """Copy what ``path`` holds past ``offset`` to ``out``; the new offset."""
    with path.open("rb") as f:
        f.seek(offset)
        data = f.read()
    if data:
        out.write(data)
        out.flush()
    return offset + len(data)


def _stop(started: dict[str, _Running]) -> None:
    """Stop every job still running (SIGTERM, then wait for it)."""
    for r in started.values():
        if r.process.is_alive():
            r.process.terminate()
    for r in started.values():
        r.process.join()
