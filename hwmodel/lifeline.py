"""Worker processes that exit with their parent.

A process pool's workers outlive a parent killed with SIGKILL (no ``finally`` runs there): a worker in the middle
of a long evaluation keeps computing, and one waiting for work may wait forever. :func:`watch_parent`, called in a
pool's initializer with the parent's pid, starts a daemon thread in the worker that checks about every
``period_s`` whether the parent still exists and ends the worker (``os._exit``) as soon as it does not. On Linux
the worker also asks the kernel to kill it when the process that forked it dies (``PR_SET_PDEATHSIG``), which
covers a fork server dying.

Both pools (the sweep runner's and any study runner) should use :func:`worker_initializer`.
"""
from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading

_PR_SET_PDEATHSIG = 1


def parent_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (signal 0 probes without sending anything)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else (cannot happen for our parent, but be safe)
        return True
    return True


def watch_parent(parent_pid: int, period_s: float = 0.5) -> threading.Thread:
    """Start the daemon thread that ends this process when ``parent_pid`` is gone (module docstring)."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):  # pragma: no cover - no prctl: the thread alone does it
            pass
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(period_s):
            if not parent_alive(parent_pid):
                os._exit(1)

    t = threading.Thread(target=run, name="hwmodel-lifeline", daemon=True)
    t.start()
    return t


def worker_initializer(parent_pid: int) -> None:
    """Pool initializer: Ctrl-C is left to the parent (which stops the workers itself) and the worker exits when
    the parent dies."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    watch_parent(parent_pid)
