"""A lean discrete-event loop with SimPy's semantics for the subset the system-A replay uses (its reference twin is
SimPy itself: :class:`~hwmodel.reasoning.sim.ProblemSimulation` runs on either; tests/test_reasoning_events.py).

The replay (:mod:`hwmodel.reasoning.sim`) uses ``env.now``, ``env.timeout(delay)``, ``env.process(generator)``,
``yield process`` and ``process.interrupt()`` (a :class:`simpy.Interrupt` thrown into the generator). A full
reproduction replays ~95,000 problems of a few dozen events each, and SimPy's general machinery (an event object
with checks per timeout, ``now`` as a property, an environment method per schedule, an event per interruption)
was a sixth of the replay's CPU. This loop keeps SimPy 4's event order exactly -- the same ``(time, priority,
event id)`` heap, ``URGENT`` for a process's first step and an interruption, ``NORMAL`` for a timeout and a
process's end, callbacks in the order they were added, a stale timeout of an interrupted wait popped like any
other -- so every replay is bit-identical (``simpy.events`` 4.x, which the dependency pins).

Differences on error paths only: an exception raised inside a process propagates at once out of :meth:`run` (SimPy
fails the process and re-raises a copy when its event is handled), with the same type and message.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from heapq import heappop, heappush
from itertools import count
from typing import Any

from simpy import Interrupt
from simpy.events import NORMAL, URGENT

_PENDING = object()


class Event:
    """A scheduled event: callbacks run when it is popped (``None`` once handled), and its outcome."""

    __slots__ = ("callbacks", "_ok", "_value")

    def __init__(self, callbacks: list[Callable[[Any], None]], ok: bool = True, value: Any = None) -> None:
        self.callbacks: list[Callable[[Any], None]] | None = callbacks
        self._ok = ok
        self._value = value


class Process(Event):
    """A generator driven by the events it yields (SimPy's ``Process``); an event itself, handled when it ends."""

    __slots__ = ("env", "_gen", "_target", "_res")

    def __init__(self, env: Environment, gen: Generator[Any, Any, Any]) -> None:
        self.callbacks = []
        self._ok = True
        self._value = _PENDING
        self.env = env
        self._gen = gen
        self._res = self._resume  # one bound method, added to and removed from the events' callbacks
        init = Event([self._res])
        heappush(env._queue, (env.now, URGENT, next(env._eid), init))  # SimPy's Initialize
        self._target: Event | None = init

    @property
    def is_alive(self) -> bool:
        return self._value is _PENDING

    def interrupt(self, cause: Any = None) -> None:
        """Throw ``simpy.Interrupt(cause)`` into the generator now, as an urgent event (SimPy's Interruption)."""
        if self._value is not _PENDING:
            raise RuntimeError(f"{self!r} has terminated and cannot be interrupted.")
        env = self.env
        heappush(env._queue, (env.now, URGENT, next(env._eid), Event([self._interrupted], False, cause)))

    def _interrupted(self, event: Event) -> None:
        if self._value is not _PENDING:
            return
        target = self._target
        if target is not None and target.callbacks is not None:
            target.callbacks.remove(self._res)
        self._resume(event)

    def _resume(self, event: Event) -> None:
        gen = self._gen
        while True:
            try:
                if event._ok:
                    event = gen.send(event._value)
                else:
                    event = gen.throw(Interrupt(event._value))
            except StopIteration as stop:
                self._ok = True
                self._value = stop.value
                self._target = None
                env = self.env
                heappush(env._queue, (env.now, NORMAL, next(env._eid), self))
                return
            if event.callbacks is not None:
                event.callbacks.append(self._res)
                self._target = event
                return


class Environment:
    """The loop (module docstring): ``now`` is a plain attribute, 0 (an int, as SimPy's) until the first event."""

    __slots__ = ("now", "_queue", "_eid")

    def __init__(self) -> None:
        self.now: float = 0
        self._queue: list[tuple[float, int, int, Event]] = []
        self._eid = count()

    def timeout(self, delay: float, value: Any = None) -> Event:
        if delay < 0:
            raise ValueError(f"Negative delay {delay}")
        ev = Event([], True, value)
        heappush(self._queue, (self.now + delay, NORMAL, next(self._eid), ev))
        return ev

    def process(self, gen: Generator[Any, Any, Any]) -> Process:
        return Process(self, gen)

    def run(self) -> None:
        """Handle every event in order until none is left (SimPy's ``env.run()`` without a stop time)."""
        queue = self._queue
        while queue:
            self.now, _, _, event = heappop(queue)
            callbacks, event.callbacks = event.callbacks, None
            for callback in callbacks:  # type: ignore[union-attr]
                callback(event)
