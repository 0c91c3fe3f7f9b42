"""Discrete-event helpers on SimPy for the simulators' hot loops (hwmodel/serving, hwmodel/reasoning).

:func:`run_to_end` is ``env.run()`` without a stop time as one loop; :func:`call_after` and :func:`call_soon` put
a callback on SimPy's event queue exactly where a timeout, or a new process's first step, would go. They read
SimPy 4's event queue (``env._queue``, ``env._now``, ``env._eid``; the dependency is pinned below 5), so a
simulator that uses them books the same events in the same order as with SimPy's own calls, without a Python
method call and an event object's checks per event.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

import simpy
from simpy.events import NORMAL, URGENT


class _Call:
    """A triggered event whose only use is to run callbacks at its time (a timeout without SimPy's checks)."""

    __slots__ = ("callbacks", "_ok", "_value")

    def __init__(self, fn: Callable[[Any], None]) -> None:
        self.callbacks = [fn]
        self._ok = True
        self._value = None


def call_after(env: simpy.Environment, delay_s: float, fn: Callable[[Any], None]) -> None:
    """Run ``fn`` ``delay_s`` (>= 0) from now, ordered exactly as ``env.timeout(delay_s)`` with ``fn`` as its
    callback would be (same time, priority and place in SimPy's event order)."""
    heapq.heappush(env._queue, (env._now + delay_s, NORMAL, next(env._eid), _Call(fn)))


def call_soon(env: simpy.Environment, fn: Callable[[Any], None]) -> None:
    """Run ``fn`` now, as the first step of a process started now would run (an urgent event)."""
    heapq.heappush(env._queue, (env._now, URGENT, next(env._eid), _Call(fn)))


def run_to_end(env: simpy.Environment) -> None:
    """``env.run()`` without a stop time, as one loop: the same events in the same order, each handled as
    :meth:`simpy.Environment.step` does (callbacks in order, a failed event that nobody defused re-raised), with
    no method call per event."""
    queue = env._queue
    pop = heapq.heappop
    while queue:
        env._now, _, _, event = pop(queue)
        callbacks, event.callbacks = event.callbacks, None
        for callback in callbacks:
            callback(event)
        if not event._ok and not getattr(event, "_defused", False):  # simpy sets the attribute to defuse
            exc = type(event._value)(*event._value.args)
            exc.__cause__ = event._value
            raise exc
