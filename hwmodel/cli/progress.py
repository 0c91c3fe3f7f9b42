"""No command is silent for long: a heartbeat on stderr for every command, and a clean Ctrl-C.

:func:`with_heartbeat` wraps each command's callback (applied to the whole tree by :mod:`hwmodel.cli.harden`).
If the command is still running after ``HEARTBEAT_FIRST_S`` (1.5 s: the first call of a cycle kernel compiles it
for several seconds), one line goes to stderr -- ``hwmodel fpga decode: working ... (Ctrl-C stops)`` -- and then
one line every ``HEARTBEAT_EVERY_S`` with the elapsed time. Commands with
their own progress bar keep it; the heartbeat only guarantees that something appears within 2 s. It is silent
with ``--json``, ``--quiet`` or ``HWMODEL_QUIET=1`` (so machine-read output stays clean), and plain text (no
terminal control codes). It runs when stderr is a terminal, or when ``HWMODEL_PROGRESS=1`` (e.g. a CI log); a
pipe read by a program gets no extra lines.

The ``HWMODEL_HEARTBEAT_S`` environment variable sets the first delay and turns the heartbeat on (the tests set it
small).
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

HEARTBEAT_FIRST_S = 1.5
HEARTBEAT_EVERY_S = 30.0
OWN_PROGRESS = frozenset({"sweep"})
"""Commands that print their plan and a live progress bar from their first second: no heartbeat over it."""


class Heartbeat:
    """A daemon thread printing "still working" lines to stderr until :meth:`stop`."""

    def __init__(self, label: str, first_s: float, every_s: float = HEARTBEAT_EVERY_S) -> None:
        self.label, self.first_s, self.every_s = label, first_s, every_s
        self.beats = 0
        self.fired = threading.Event()  # set after the first line is written (tests wait on it)
        self._stop = threading.Event()
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="hwmodel-heartbeat", daemon=True)

    def start(self) -> Heartbeat:
        self._thread.start()
        return self

    def _run(self) -> None:
        wait = self.first_s
        while not self._stop.wait(wait):
            elapsed = time.monotonic() - self._t0
            if self.beats == 0:
                line = f"hwmodel {self.label}: working ... (Ctrl-C stops)"
            else:
                line = f"hwmodel {self.label}: still working, {elapsed:.0f} s"
            try:
                sys.stderr.write(line + "\n")
                sys.stderr.flush()
            except (OSError, ValueError):  # stderr closed: nothing to tell
                return
            self.beats += 1
            self.fired.set()
            wait = self.every_s

    def stop(self) -> None:
        self._stop.set()


_QUIET = False


@contextlib.contextmanager
def quiet_scope() -> Iterator[None]:
    """While a command given ``--quiet`` (or ``hwmodel --quiet``) runs: no heartbeat and no progress bar. The
    command modules' rich progress bars are switched off here, in one place (every ``rich.progress.Progress``
    made inside is created disabled), and ``HWMODEL_QUIET`` is set for worker processes started from it; all of
    it is undone when the command ends (the CLI also runs in-process, e.g. under the tests)."""
    global _QUIET
    if _QUIET:
        yield
        return
    from rich import progress

    init = progress.Progress.__init__

    @functools.wraps(init)
    def disabled(self: Any, *args: Any, **kwargs: Any) -> None:
        kwargs["disable"] = True
        init(self, *args, **kwargs)

    saved_env = os.environ.get("HWMODEL_QUIET")
    _QUIET, progress.Progress.__init__ = True, disabled  # type: ignore[method-assign]
    os.environ["HWMODEL_QUIET"] = "1"
    try:
        yield
    finally:
        _QUIET, progress.Progress.__init__ = False, init  # type: ignore[method-assign]
        if saved_env is None:
            os.environ.pop("HWMODEL_QUIET", None)
        else:
            os.environ["HWMODEL_QUIET"] = saved_env


def quiet() -> bool:
    """Whether progress output is off (``--quiet`` or ``HWMODEL_QUIET``)."""
    return _QUIET or bool(os.environ.get("HWMODEL_QUIET"))


def quiet_requested(kwargs: dict[str, Any]) -> bool:
    if kwargs.get("as_json") or kwargs.get("quiet") or quiet():
        return True
    if os.environ.get("HWMODEL_PROGRESS") or os.environ.get("HWMODEL_HEARTBEAT_S"):
        return False
    try:
        return not sys.stderr.isatty()
    except (AttributeError, ValueError):
        return True


def with_heartbeat(label: str, callback: Callable[..., Any]) -> Callable[..., Any]:
    """``callback`` with a heartbeat while it runs (module docstring)."""
    if getattr(callback, "_hwmodel_heartbeat", False):
        return callback
    if label in OWN_PROGRESS:
        callback._hwmodel_heartbeat = True  # type: ignore[attr-defined]
        return callback

    @functools.wraps(callback)
    def run(*args: Any, **kwargs: Any) -> Any:
        if quiet_requested(kwargs):
            return callback(*args, **kwargs)
        first = float(os.environ.get("HWMODEL_HEARTBEAT_S", HEARTBEAT_FIRST_S))
        hb = Heartbeat(label, first).start()
        try:
            return callback(*args, **kwargs)
        finally:
            hb.stop()

    run._hwmodel_heartbeat = True  # type: ignore[attr-defined]
    return run
