"""Memo of the linked parts of a token program across context lengths.

A context's program equals its neighbours' except in a few small parts: the KV tiling of attention (how many
tokens each port streams, in how many requests) changes only when a port's token count crosses a request or
striping boundary, while which ports form a class, the MAC count and the byte ledger change every token. The
linker (:mod:`fpga.streaming.linking`) therefore keys what it builds on what decides it, never on ``ctx``:

* the replicated blocks (types, cycles, dependencies, engine order) on the layer's block arrays;
* the expanded requests of the port classes on those blocks plus, per class in order, the key of its ports'
  requests (their static class and their attention requests) and, where engines share a channel, its base there;
* a class's bytes by kind on that same class key.

Keys are compared exactly (arrays with ``np.array_equal``, request keys as bytes), so a hit returns what a cold
build would: tests/test_ctx_memo.py checks every array of warm programs against cold ones. Entries hold the
design object and its static parts (:class:`fpga.streaming.templates._Static`) they were built for and match only
those objects, so a program is never linked from parts of another design or of a cleared cache.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

import numpy as np

V = TypeVar("V")


class ExactMemo:
    """A bounded least-recently-used memo whose keys are a tuple of owner objects (compared by identity: the
    entry holds them, so their ids stay theirs), a hashable part (compared by ``==``) and a tuple of arrays
    (compared element by element)."""

    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self._d: OrderedDict[Hashable, tuple[tuple[Any, ...], tuple[np.ndarray, ...], Any]] = OrderedDict()

    def get(self, owners: tuple[Any, ...], key: Hashable, arrays: tuple[np.ndarray, ...], build: Callable[[], V]) -> V:
        """The value memoized for (``owners``, ``key``, ``arrays``), built by ``build`` on a miss."""
        k = (tuple(map(id, owners)), key, tuple(a.shape for a in arrays))
        hit = self._d.get(k)
        if (
            hit is not None
            and all(a is b for a, b in zip(hit[0], owners))
            and all(np.array_equal(a, b) for a, b in zip(hit[1], arrays))
        ):
            self._d.move_to_end(k)
            return hit[2]  # type: ignore[no-any-return]
        value = build()
        self._d[k] = (owners, arrays, value)
        while len(self._d) > self.maxsize:
            self._d.popitem(last=False)
        return value

    def clear(self) -> None:
        self._d.clear()


# a LLaMA2-7B layer's blocks are ~2,500 rows and its class requests ~85,000 (5.5 MB): a few of each
BLOCKS = ExactMemo(4)
REQUESTS = ExactMemo(6)
TALLIES = ExactMemo(64)


def clear() -> None:
    """Forget every memoized linked part."""
    for m in (BLOCKS, REQUESTS, TALLIES):
        m.clear()
