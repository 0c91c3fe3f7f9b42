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
        self.max_ctx: int | None = getattr(engine, "max_ctx", None)  # contexts the engine can hold, if bounded
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
        if self.max_ctx is not None:
            new_top = max(ctx, min(new_top, self.max_ctx))
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


class ContextSampledEngine:
    """An adapter for *token-by-token* engines whose per-context simulation is expensive (the FPGA streaming draft:
    one cycle-level token simulation per context length, tens of milliseconds each).

    The per-token times -- decode (LM head and sampler included) and ingest (logits discarded) -- are simulated
    exactly at every ``grid``-th context and linearly interpolated in between (a token's time grows by about one
    KV row per context step; the error is measured in the tests and reported in docs/reasoning.md). Multi-token
    operations are composed token by token, as such an engine defines them: ``ingest_s(n, ctx)`` sums the tokens
    at ``ctx .. ctx + n - 1``; ``prefill_s(n, ctx)`` is ``n - 1`` ingested tokens and one decoded token (no
    batched prefill datapath). The constructor checks that contract against the wrapped engine once. ``grid=1``
    simulates every context (exact).
    """

    def __init__(self, engine: Any, grid: int = 64, max_ctx: int | None = None) -> None:
        if grid < 1:
            raise ValueError(f"grid must be >= 1, got {grid}")
        self.engine = engine
        self.grid = grid
        self.max_ctx = max_ctx if max_ctx is not None else getattr(getattr(engine, "design", None), "max_ctx", None)
        self.name = engine.name if grid == 1 else f"{engine.name} (sampled every {grid} contexts)"
        self._decode_pts: dict[int, float] = {}
        self._ingest_pts: dict[int, float] = {}
        self._check_contract()

    def _token_s(self, ctx: int, head: bool) -> float:
        token = getattr(self.engine, "token", None)
        if token is not None:
            return float(token(ctx, with_lm_head=head).seconds)
        return float(self.engine.decode_s(ctx) if head else self.engine.ingest_s(1, ctx))

    def _check_contract(self) -> None:
        c = 2 * self.grid
        want = self.engine.prefill_s(2, c)
        got = self._token_s(c, False) + self._token_s(c + 1, True)
        if abs(want - got) > 1e-12 * max(1.0, abs(want)):
            raise TypeError(f"{self.engine.name}: prefill_s is not token by token ({want} != {got}); "
                            "ContextSampledEngine does not apply")

    def _point(self, table: dict[int, float], ctx: int, head: bool) -> float:
        v = table.get(ctx)
        if v is None:
            v = table[ctx] = self._token_s(ctx, head)
        return v

    def _interp(self, table: dict[int, float], ctx: int, head: bool) -> float:
        if self.max_ctx is not None and ctx >= self.max_ctx:
            return self._point(table, ctx, head)  # the engine reports contexts beyond its capacity itself
        lo = (ctx // self.grid) * self.grid
        if lo == ctx:
            return self._point(table, ctx, head)
        hi = lo + self.grid
        if self.max_ctx is not None and hi > self.max_ctx - 1:
            hi = self.max_ctx - 1
            if hi <= lo:
                return self._point(table, ctx, head)
        a, b = self._point(table, lo, head), self._point(table, hi, head)
        return a + (b - a) * (ctx - lo) / (hi - lo)

    def decode_s(self, ctx: int) -> float:
        return self._interp(self._decode_pts, ctx, True)

    def ingest_s(self, n_tokens: int, ctx: int) -> float:
        return sum(self._interp(self._ingest_pts, ctx + i, False) for i in range(n_tokens))

    def prefill_s(self, n_tokens: int, ctx: int = 0) -> float:
        if n_tokens < 1:
            raise ValueError(f"prefill needs at least one token, got {n_tokens}")
        return self.ingest_s(n_tokens - 1, ctx) + self.decode_s(ctx + n_tokens - 1)

    def power_w(self, phase: Phase) -> float:
        return float(self.engine.power_w(phase))

    @property
    def simulated_contexts(self) -> int:
        return len(self._decode_pts) + len(self._ingest_pts)
