"""Per-operation times and energies of an engine, memoized for replaying thousands of problems (ARCHITECTURE.md:
"FPGA engines memoize per-token results by context length ... replaying 500 problems costs a few thousand cycle
simulations").

:class:`TimedEngine` wraps any :class:`hwmodel.engine.Engine`:

* decode times (and energies) are cumulative tables over context lengths, so ``n`` consecutive decode steps, and
  how many of them finish within a given time (what a stopped generation has produced), are O(1) / O(log n);
* per-token ingest times likewise (shadow synchronization ingests one token at a time);
* prefill and PRM-scoring times are memoized by their arguments. For an engine with the ``vector-prefiller``
  capability a miss computes a whole block of neighbouring points in one vectorized pass (the engine's own
  ``prefill_many``, equal to its ``prefill_cost`` point by point: tests/test_reasoning_engines.py), because a full
  reproduction asks for tens of thousands of distinct (tokens, context) pairs (measured: ~30 % of its CPU time
  saved). An engine with ``prefill-scorer`` scores through that prefill memo (its ``score_pass``).

What the wrapper does with an engine is decided by the capabilities the engine declares (:mod:`hwmodel.engine`),
never by probing its attributes. Power: an ``op-costed`` engine (per-operation power: ``prefill_cost(...).power_w``,
``decode_power_w(ctx)``) is charged per operation; otherwise at its per-phase ``power_w``. The wrapper never changes
a time.
"""

from __future__ import annotations

import bisect

import numpy as np

from hwmodel.engine import Capability, Engine, Phase, capabilities
from hwmodel.sampled import ContextSampledEngine  # noqa: F401 - re-exported (it used to live here)

_PREFILL_BLOCK = 256  # contexts per vectorized prefill block
_PLAN_PASS = 1 << 15  # points per vectorized pass of a prefill plan (bounds the pass's temporaries)
_FIRST_CHUNK = 1024  # contexts in the first block of a cumulative table; later blocks double it


class TimedEngine:
    """An engine with memoized operation times and energies (module docstring)."""

    def __init__(self, engine: Engine, initial_ctx: int = 1024, vector_blocks: bool = True) -> None:
        self.engine = engine
        self.vector_blocks = vector_blocks  # False: one engine call per (tokens, context) pair (the reference)
        self.name = engine.name
        caps = self.capabilities = capabilities(engine)
        # contexts the engine can hold, if bounded (the memory-facts capability; None: bounded only by memory)
        bounded = Capability.MEMORY_FACTS in caps or Capability.CONTEXT_BOUND in caps
        self.max_ctx: int | None = engine.max_ctx if bounded else None
        self._steps = Capability.DECODER in caps  # decode_steps_s: vectorized over contexts
        self._vector = Capability.VECTOR_PREFILLER in caps and Capability.MEMORY_FACTS in caps
        self._op_costed = Capability.OP_COSTED in caps  # per-operation power (prefill_cost, decode_power_w)
        self._score_by_prefill = Capability.PREFILL_SCORER in caps
        self._per_ctx_power = self._op_costed
        self._cum: list[float] = [0.0]  # _cum[c] = sum of decode_s(x) for x < c
        self._cum_e: list[float] = [0.0]  # the same for decode energy
        self._cum_ing: list[float] = [0.0]  # the same for one-token ingests
        self._prefill: dict[tuple[int, int], tuple[float, float]] = {}
        self._blocks = 0
        self._score: dict[tuple[int, int, bool], tuple[float, float]] = {}
        self._power: dict[Phase, float] = {}
        self._grow(initial_ctx)

    # ------------------------------------------------------------------------------------------------ tables
    def _chunks(self, have: int, ctx: int) -> list[tuple[int, int]]:
        """The context ranges [lo, hi) by which a table whose last index is ``have`` grows to reach index ``ctx``.

        Chunks are canonical -- each doubles the table, capped once at ``max_ctx`` -- whatever order the contexts
        are asked in, so the cumulative sums (and every time read from them) are bit-identical run to run, however
        problems are spread over worker processes."""
        out = []
        while have < ctx:
            top = 2 * have if have else _FIRST_CHUNK
            if self.max_ctx is not None and have < self.max_ctx:
                top = min(top, self.max_ctx)
            out.append((have, top))
            have = top
        return out

    def table_contexts(self, ctx: int) -> int:
        """How many contexts (``0 .. n - 1``) the decode and ingest tables tabulate once they cover ``ctx``."""
        chunks = self._chunks(0, ctx)
        return chunks[-1][1] if chunks else 0

    def _grow(self, ctx: int) -> None:
        """Extend the cumulative decode tables to cover contexts [0, ctx]."""
        for have, top in self._chunks(len(self._cum) - 1, ctx):
            if self._steps:
                times = np.asarray(self.engine.decode_steps_s(have, top - have), dtype=float)
            else:
                times = np.array([self.engine.decode_s(c) for c in range(have, top)], dtype=float)
            if self._per_ctx_power:
                power = np.array([self.engine.decode_power_w(c) for c in range(have, top)], dtype=float)
            else:
                power = np.full(len(times), self.power_w(Phase.DECODE))
            self._cum.extend((self._cum[-1] + np.cumsum(times)).tolist())
            self._cum_e.extend((self._cum_e[-1] + np.cumsum(times * power)).tolist())

    def _grow_ingest(self, ctx: int) -> None:
        for have, top in self._chunks(len(self._cum_ing) - 1, ctx):
            times = np.array([self.engine.ingest_s(1, c) for c in range(have, top)], dtype=float)
            self._cum_ing.extend((self._cum_ing[-1] + np.cumsum(times)).tolist())

    # ------------------------------------------------------------------------------------------------ decode
    def decode_span_s(self, ctx: int, n: int) -> float:
        """Time of ``n`` decode steps at contexts ``ctx, ctx + 1, ..., ctx + n - 1``."""
        if n <= 0:
            return 0.0
        if ctx + n >= len(self._cum):
            self._grow(ctx + n)
        return self._cum[ctx + n] - self._cum[ctx]

    def decode_energy_j(self, ctx: int, n: int) -> float:
        """Energy of the same ``n`` decode steps."""
        if n <= 0:
            return 0.0
        if ctx + n >= len(self._cum):
            self._grow(ctx + n)
        return self._cum_e[ctx + n] - self._cum_e[ctx]

    def decode_done(self, ctx: int, elapsed_s: float, n_max: int) -> int:
        """How many of the decode steps starting at ``ctx`` have finished ``elapsed_s`` seconds in (at most n_max)."""
        if elapsed_s <= 0.0 or n_max <= 0:
            return 0
        if ctx + n_max >= len(self._cum):
            self._grow(ctx + n_max)
        goal = self._cum[ctx] + elapsed_s
        done = bisect.bisect_right(self._cum, goal * (1 + 1e-12), ctx, ctx + n_max + 1) - 1 - ctx
        return max(0, min(n_max, done))

    def decode_finish_times(self, ctx: int, n: int) -> list[float]:
        """Offsets (from the first step's start) at which each of ``n`` decode steps from ``ctx`` finishes."""
        if n <= 0:
            return []
        self.decode_span_s(ctx, n)
        base = self._cum[ctx]
        return [x - base for x in self._cum[ctx + 1 : ctx + n + 1]]

    @property
    def cum_table(self) -> list[float]:
        """The cumulative decode-time table (``[c]`` = time of decode steps at contexts 0..c-1); read-only."""
        return self._cum

    # ------------------------------------------------------------------------------------------------ ingest
    def ingest_one_s(self, ctx: int) -> float:
        """One token ingested (logits discarded) at context ``ctx``."""
        if ctx + 1 >= len(self._cum_ing):
            self._grow_ingest(ctx + 1)
        return self._cum_ing[ctx + 1] - self._cum_ing[ctx]

    def ingest_times(self, ctx: int, n: int) -> np.ndarray:
        """Per-token ingest times of tokens at contexts ``ctx .. ctx + n - 1``."""
        if ctx + n >= len(self._cum_ing):
            self._grow_ingest(ctx + n)
        return np.diff(np.asarray(self._cum_ing[ctx : ctx + n + 1]))

    # ------------------------------------------------------------------------------------------------ prefill
    def _prefill_block(self, n: int, ctx: int) -> tuple[float, float] | None:
        """Fill the memo around ``(n, ctx)`` in one vectorized pass (the engine's ``prefill_many``): over a block of
        contexts at ``n`` tokens, or, for a pass from an empty cache (``ctx == 0``: a prompt, a PRM scoring without
        prefix caching), over a block of token counts. Returns None when the point is outside what the device can
        hold (the engine's own call then refuses it)."""
        eng = self.engine
        room = self._prefill_room()
        if n + ctx > room:
            return None
        if ctx == 0:
            n0 = max(1, (n // _PREFILL_BLOCK) * _PREFILL_BLOCK)
            ns = np.arange(n0, min(n0 + _PREFILL_BLOCK, room + 1))
            cs = np.zeros(len(ns), dtype=np.int64)
        else:
            c0 = (ctx // _PREFILL_BLOCK) * _PREFILL_BLOCK
            cs = np.arange(c0, min(c0 + _PREFILL_BLOCK, room - n + 1))
            ns = np.full(len(cs), n)
        times, power = eng.prefill_many(ns, cs)
        self._blocks += 1
        self._prefill.update(zip(zip(ns.tolist(), cs.tolist()), zip(times.tolist(), power.tolist())))
        return self._prefill[(n, ctx)]

    def _prefill_room(self) -> int:
        """The most tokens (cached + new) one sequence's prefill may hold: the resident bytes plus its KV cache fit
        the memory (the engine refuses the others), within the engine's context bound."""
        eng = self.engine
        room = int((eng.memory_capacity_bytes - eng.resident_bytes) // eng.kv_bytes(1))
        return room if self.max_ctx is None else min(room, self.max_ctx)

    @property
    def plans_prefills(self) -> bool:
        """Whether :meth:`prefill_points` memoizes anything (an engine whose misses fill vectorized blocks)."""
        return self._vector and self.vector_blocks

    def prefill_points(self, n_tokens: np.ndarray, ctx: np.ndarray) -> int:
        """Memoize the prefills at the points ``(n_tokens[i], ctx[i])`` ahead of the replays that ask for them
        (:mod:`hwmodel.reasoning.prefill_plan`), in vectorized passes of the engine's ``prefill_many``, whose
        element for a point does not depend on the pass's other points (tests/test_reasoning_prefill_plan.py): each
        memoized value is the one a block filled on demand would hold. Only an engine that fills blocks does this
        (others compute each point on demand); points already memoized, or that the device cannot hold, are left
        out. Returns how many points were computed."""
        if not self.plans_prefills:
            return 0
        n = np.asarray(n_tokens, dtype=np.int64)
        c = np.asarray(ctx, dtype=np.int64)
        keep = (n >= 1) & (c >= 0) & (n + c <= self._prefill_room())
        memo = self._prefill
        points = [p for p in zip(n[keep].tolist(), c[keep].tolist()) if p not in memo]
        for i in range(0, len(points), _PLAN_PASS):
            part = points[i : i + _PLAN_PASS]
            ns, cs = (np.array(col, dtype=np.int64) for col in zip(*part))
            times, power = self.engine.prefill_many(ns, cs)
            memo.update(zip(part, zip(times.tolist(), power.tolist())))
        return len(points)

    def prefill(self, n_tokens: int, ctx: int = 0) -> tuple[float, float]:
        """``(time_s, power_w)`` of prefilling ``n_tokens`` new tokens on top of ``ctx`` cached ones."""
        key = (n_tokens, ctx)
        v = self._prefill.get(key)
        if v is None:
            if self._vector and self.vector_blocks:
                v = self._prefill_block(n_tokens, ctx)
            if v is None:
                if self._op_costed:
                    cost = self.engine.prefill_cost(n_tokens, ctx)  # refuses what does not fit, else exact
                    v = (float(cost.time_s), float(cost.power_w))
                else:
                    v = (float(self.engine.prefill_s(n_tokens, ctx)), self.power_w(Phase.PREFILL))
                self._prefill[key] = v
        return v

    def prefill_s(self, n_tokens: int, ctx: int = 0) -> float:
        return self.prefill(n_tokens, ctx)[0]

    def score(self, n_tokens: int, ctx: int, prefix_cache: bool) -> tuple[float, float]:
        """``(time_s, power_w)`` of a PRM pass scoring ``n_tokens`` after ``ctx`` (an engine with the ``scorer``
        capability; the system refuses a PRM without it when it is loaded).

        Without prefix caching the engine recomputes the whole ``ctx + n_tokens``, so the memo is keyed by the total.
        A ``prefill-scorer`` scores with a prefill pass (its ``score_pass``), read from the prefill memo.
        """
        key = (n_tokens, ctx, True) if prefix_cache else (n_tokens + ctx, 0, False)
        v = self._score.get(key)
        if v is None:
            if self._score_by_prefill:  # a prefill pass: of the new tokens, or of the whole context
                v = self.prefill(*self.engine.score_pass(n_tokens, ctx, prefix_cache))
            else:
                v = (float(self.engine.score_s(n_tokens, ctx, prefix_cache=prefix_cache)), self.power_w(Phase.SCORE))
            self._score[key] = v
        return v

    def score_prefill_point(self, n_tokens: int, ctx: int, prefix_cache: bool) -> tuple[int, int] | None:
        """The ``(tokens, ctx)`` prefill point whose memo :meth:`score` reads for this pass, for an engine that
        scores with a prefill (``prefill-scorer``); None for others."""
        return self.engine.score_pass(n_tokens, ctx, prefix_cache) if self._score_by_prefill else None

    def power_w(self, phase: Phase) -> float:
        p = self._power.get(phase)
        if p is None:
            p = self._power[phase] = float(self.engine.power_w(phase))
        return p
