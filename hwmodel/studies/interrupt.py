"""Ctrl-C while a local pool runs: noted by a signal handler, raised by the runner's loop at a point of its own.

Python raises ``KeyboardInterrupt`` wherever the main thread is when SIGINT arrives. Inside
``concurrent.futures.wait`` that can be between the lock acquisitions of its ``_AcquireFutures`` (the futures'
condition locks taken one by one): the exception leaves some of them held, the pool's manager thread then blocks
forever on the next result it hands to such a future, and the interpreter hangs at exit joining that thread.
With :func:`deferred_sigint` the handler only notes the signal; the runner waits in short slices and raises
``KeyboardInterrupt`` itself between them, outside every lock of the pool. A process started with SIGINT ignored
(a background job of a non-interactive shell, ``cmd &`` in a script) keeps ignoring it: the caller's choice.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

#: how long the runner waits for a result before it looks for a noted Ctrl-C (seconds): how late Ctrl-C may act
POLL_S = 0.1


class Interrupts:
    """Whether SIGINT arrived (``hit``), and the wait slice the loop must use to see it (None: wait unsliced)."""

    def __init__(self, poll_s: float | None) -> None:
        self.hit = False
        self.poll_s = poll_s

    def check(self) -> None:
        """Raise the noted Ctrl-C now, as Python would have when it arrived."""
        if self.hit:
            raise KeyboardInterrupt


@contextmanager
def deferred_sigint() -> Iterator[Interrupts]:
    """While inside: SIGINT is noted instead of raised (only where Python's own handler is installed and this is
    the main thread, which alone receives signals; elsewhere, e.g. under a handler of the caller's, nothing
    changes and the loop waits unsliced)."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield Interrupts(None)
        return
    state = Interrupts(POLL_S)

    def note(_signum: int, _frame: FrameType | None) -> None:
        state.hit = True

    signal.signal(signal.SIGINT, note)
    try:
        yield state
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    state.check()  # noted after the loop's last look
