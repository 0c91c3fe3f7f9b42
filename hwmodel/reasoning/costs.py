"""Per-operation times of an engine, memoized for replaying thousands of problems (ARCHITECTURE.md: "FPGA engines
memoize per-token results by context length ... replaying 500 problems costs a few thousand cycle simulations").

:class:`TimedEngine` wraps any :class:`hwmodel.engine.Engine`. Decode times are kept as a cumulative table over
context lengths, so the time of ``n`` consecutive decode steps, and how many of them finish within a given time
(what an interrupted generation has produced), are O(1) and O(log n) lookups. Other operations are memoized by
their arguments. The wrapper never changes a number: every value is the engine's own.
"""
from __future__ import annotations

import bisect
from typing import Any

import numpy as np

from hwmodel.engine import Engine, Phase


class TimedEngine:
    """An engine with memoized operation times (module docstring)."""

    def __init__(self, engine: Engine, initial_ctx: int = 1024) -> None:
        self.engine = engine
        self.name = engine.name
        self._cum = np.zeros(1)  # _cum[c] = sum of decode_s(x) for x < c
        self._cum_list: list[float] = [0.0]
        self._prefill: dict[tuple[int, int], float] = {}
        self._ingest: dict[tuple[int, int], float] = {}
        self._score: dict[tuple[int, int, bool], float] = {}
        self._power: dict[Phase, float] = {}
        self._grow(initial_ctx)

    def _grow(self, ctx: int) -> None:
        """Extend the cumulative decode table to cover contexts [0, ctx]."""
        have = len(self._cum) - 1
        if ctx <= have:
            return
        new_top = max(ctx, 2 * have)
        steps = getattr(self.engine, "decode_steps_s", None)
        if steps is not None:
            times = np.asarray(steps(have, new_top - have), dtype=float)
        else:
            times = np.array([self.engine.decode_s(c) for c in range(have, new_top)], dtype=float)
        self._cum = np.concatenate([self._cum, self._cum[-1] + np.cumsum(times)])
        self._cum_list = self._cum.tolist()

    # ------------------------------------------------------------------------------------------------ decode
    def decode_span_s(self, ctx: int, n: int) -> float:
        """Time of ``n`` decode steps at contexts ``ctx, ctx + 1, ..., ctx + n - 1``."""
        if n <= 0:
            return 0.0
        if ctx + n >= len(self._cum_list):
            self._grow(ctx + n)
        return self._cum_list[ctx + n] - self._cum_list[ctx]

    def decode_done(self, ctx: int, elapsed_s: float, n_max: int) -> int:
        """How many of the decode steps starting at ``ctx`` have finished ``elapsed_s`` seconds in (at most n_max)."""
        if elapsed_s <= 0.0 or n_max <= 0:
            return 0
        if ctx + n_max >= len(self._cum_list):
            self._grow(ctx + n_max)
        goal = self._cum_list[ctx] + elapsed_s
        done = bisect.bisect_right(self._cum_list, goal * (1 + 1e-12), ctx, ctx + n_max + 1) - 1 - ctx
        return max(0, min(n_max, done))

    def decode_finish_times(self, ctx: int, n: int) -> list[float]:
        """Offsets (from the first step's start) at which each of ``n`` decode steps from ``ctx`` finishes."""
        if n <= 0:
            return []
        self.decode_span_s(ctx, n)
        base = self._cum_list[ctx]
        return [x - base for x in self._cum_list[ctx + 1: ctx + n + 1]]

    # ------------------------------------------------------------------------------------------------ others
    def prefill_s(self, n_tokens: int, ctx: int = 0) -> float:
        key = (n_tokens, ctx)
        t = self._prefill.get(key)
        if t is None:
            t = self._prefill[key] = float(self.engine.prefill_s(n_tokens, ctx))
        return t

    def ingest_s(self, n_tokens: int, ctx: int) -> float:
        key = (n_tokens, ctx)
        t = self._ingest.get(key)
        if t is None:
            t = self._ingest[key] = float(self.engine.ingest_s(n_tokens, ctx))
        return t

    def score_s(self, n_tokens: int, ctx: int, prefix_cache: bool) -> float:
        """A PRM pass (engines that score, i.e. GPU engines with ``score_s``)."""
        key = (n_tokens, ctx, prefix_cache)
        t = self._score.get(key)
        if t is None:
            fn: Any = getattr(self.engine, "score_s", None)
            if fn is None:
                raise TypeError(f"engine {self.name} cannot score (no score_s)")
            t = self._score[key] = float(fn(n_tokens, ctx, prefix_cache=prefix_cache))
        return t

    def power_w(self, phase: Phase) -> float:
        p = self._power.get(phase)
        if p is None:
            p = self._power[phase] = float(self.engine.power_w(phase))
        return p
