"""Per-operation times and energies of an engine, memoized for replaying thousands of problems (ARCHITECTURE.md:
"FPGA engines memoize per-token results by context length ... replaying 500 problems costs a few thousand cycle
simulations").

:class:`TimedEngine` wraps any :class:`hwmodel.engine.Engine`:

* decode times (and energies) are cumulative tables over context lengths, so ``n`` consecutive decode steps, and
  how many of them finish within a given time (what a stopped generation has produced), are O(1) / O(log n);
* per-token ingest times likewise (shadow synchronization ingests one token at a time);
* prefill and PRM-scoring times are memoized by their arguments. For a GPU engine a miss computes a whole block of
  neighbouring points in one vectorized pass (:func:`gpu_prefill_block`, exactly the engine's own ``prefill_cost``:
  the tests compare them point by point, and the replay spot-checks blocks as it goes), because a full reproduction
  asks for tens of thousands of distinct (tokens, context) pairs (measured: ~30 % of its CPU time saved).

Power: an engine that reports per-operation power (``prefill_cost(...).power_w``, ``decode_power_w(ctx)``: the GPU
model) is charged per operation; otherwise at its per-phase ``power_w``. The wrapper never changes a time.
"""
from __future__ import annotations

import bisect
from typing import Any

import numpy as np

from hwmodel.engine import Engine, Phase

_PREFILL_BLOCK = 256  # contexts per vectorized GPU prefill block
_FIRST_CHUNK = 1024  # contexts in the first block of a cumulative table; later blocks double it
_CHECK_EVERY = 16  # every so many blocks, compare the vectorized pass with the engine's own prefill_cost


def gpu_prefill_block(engine: Any, n_tokens: np.ndarray, ctx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(time_s, power_w)`` of ``engine.prefill_cost(n, ctx)`` for many points in one vectorized pass.

    Composed from the public pieces :meth:`gpu.latency.GpuEngine.prefill_cost` itself uses (the kernel program of a
    single-sequence pass, the roofline per kernel, the eager launch queue, the utilisation-based board power);
    ``tests/test_reasoning_engines.py`` proves it equal to ``prefill_cost`` point by point.
    """
    from gpu import launch
    from gpu.kernels import Pass, build_program
    from gpu.power import board_power_w, utilisation

    n = np.asarray(n_tokens, dtype=np.float64)
    c = np.asarray(ctx, dtype=np.float64)
    head = n if engine.llm.output_head == "value" else np.ones_like(n)
    prog = build_program(engine.llm, engine.framework.program, Pass.single(n, c, head), engine.weight_bits,
                         engine.kv_bits, "auto")
    times = launch.PassTimes.of(prog, engine.roofline)
    tl = launch.eager(engine.c_op_s, times, start_s=engine.t_step_s)
    u = utilisation(engine.gpu, prog.total_bytes(), prog.total_ops(), tl.total_s, engine.weight_bits)
    return np.asarray(tl.total_s, dtype=float), np.asarray(board_power_w(engine.gpu, u, engine.power_gamma),
                                                           dtype=float)


def _is_gpu_engine(engine: Any) -> bool:
    return all(hasattr(engine, a) for a in ("prefill_cost", "roofline", "framework", "c_op_s", "t_step_s",
                                             "power_gamma", "decode_power_w", "weights_bytes", "gpu", "llm"))


class TimedEngine:
    """An engine with memoized operation times and energies (module docstring)."""

    def __init__(self, engine: Engine, initial_ctx: int = 1024, vector_blocks: bool = True) -> None:
        self.engine = engine
        self.vector_blocks = vector_blocks  # False: one engine call per (tokens, context) pair (the reference)
        self.name = engine.name
        self.max_ctx: int | None = getattr(engine, "max_ctx", None)  # contexts the engine can hold, if bounded
        self._gpu = _is_gpu_engine(engine)
        self._per_ctx_power = hasattr(engine, "decode_power_w")
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

    def _grow(self, ctx: int) -> None:
        """Extend the cumulative decode tables to cover contexts [0, ctx]."""
        steps = getattr(self.engine, "decode_steps_s", None)
        for have, top in self._chunks(len(self._cum) - 1, ctx):
            if steps is not None:
                times = np.asarray(steps(have, top - have), dtype=float)
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
        return [x - base for x in self._cum[ctx + 1: ctx + n + 1]]

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
        return np.diff(np.asarray(self._cum_ing[ctx: ctx + n + 1]))

    # ------------------------------------------------------------------------------------------------ prefill
    def _prefill_block(self, n: int, ctx: int) -> tuple[float, float] | None:
        """Fill the memo around ``(n, ctx)`` in one vectorized pass: over a block of contexts at ``n`` tokens, or,
        for a pass from an empty cache (``ctx == 0``: a prompt, a PRM scoring without prefix caching), over a block
        of token counts. Every ``_CHECK_EVERY``-th block is checked against the engine's own ``prefill_cost`` at
        the requested point. Returns None when the point is outside what the GPU can hold (the engine's own call
        then refuses it)."""
        eng = self.engine  # only points whose weights + KV fit the GPU (prefill_cost refuses the others)
        room = int((eng.gpu.memory_bytes - eng.weights_bytes) // eng.llm.kv_bytes(1, eng.kv_bits))
        if self.max_ctx is not None:
            room = min(room, self.max_ctx)
        if n + ctx > room:
            return None
        if ctx == 0:
            n0 = max(1, (n // _PREFILL_BLOCK) * _PREFILL_BLOCK)
            ns = np.arange(n0, min(n0 + _PREFILL_BLOCK, room + 1))
            cs = np.zeros(len(ns), dtype=np.int64)
            k = n - n0
        else:
            c0 = (ctx // _PREFILL_BLOCK) * _PREFILL_BLOCK
            cs = np.arange(c0, min(c0 + _PREFILL_BLOCK, room - n + 1))
            ns = np.full(len(cs), n)
            k = ctx - c0
        times, power = gpu_prefill_block(eng, ns, cs)
        if self._blocks % _CHECK_EVERY == 0:
            cost = eng.prefill_cost(n, ctx)
            if abs(times[k] - cost.time_s) > 1e-12 * cost.time_s or abs(power[k] - cost.power_w) > 1e-9 * cost.power_w:
                raise TypeError(f"{self.name}: the vectorized prefill no longer matches prefill_cost at ({n}, {ctx}); "
                                "update gpu_prefill_block")
        self._blocks += 1
        for nn, c, t, p in zip(ns.tolist(), cs.tolist(), times.tolist(), power.tolist()):
            self._prefill[(nn, c)] = (t, p)
        return self._prefill[(n, ctx)]

    def prefill(self, n_tokens: int, ctx: int = 0) -> tuple[float, float]:
        """``(time_s, power_w)`` of prefilling ``n_tokens`` new tokens on top of ``ctx`` cached ones."""
        key = (n_tokens, ctx)
        v = self._prefill.get(key)
        if v is None:
            if self._gpu and self.vector_blocks:
                v = self._prefill_block(n_tokens, ctx)
            if v is None:
                if self._gpu:
                    cost = self.engine.prefill_cost(n_tokens, ctx)  # refuses what does not fit, else exact
                    v = (float(cost.time_s), float(cost.power_w))
                else:
                    v = (float(self.engine.prefill_s(n_tokens, ctx)), self.power_w(Phase.PREFILL))
                self._prefill[key] = v
        return v

    def prefill_s(self, n_tokens: int, ctx: int = 0) -> float:
        return self.prefill(n_tokens, ctx)[0]

    def score(self, n_tokens: int, ctx: int, prefix_cache: bool) -> tuple[float, float]:
        """``(time_s, power_w)`` of a PRM pass scoring ``n_tokens`` after ``ctx`` (GPU engines with ``score_s``).

        Without prefix caching the engine recomputes the whole ``ctx + n_tokens`` (``GpuEngine.score_s``), so the
        memo is keyed by the total.
        """
        key = (n_tokens, ctx, True) if prefix_cache else (n_tokens + ctx, 0, False)
        v = self._score.get(key)
        if v is None:
            if not hasattr(self.engine, "score_s"):
                raise TypeError(f"engine {self.name} cannot score (no score_s)")
            if self._gpu:  # GpuEngine.score_cost is a prefill pass: of the new tokens, or of the whole context
                v = self.prefill(n_tokens, ctx) if prefix_cache else self.prefill(n_tokens + ctx, 0)
            else:
                v = (float(self.engine.score_s(n_tokens, ctx, prefix_cache=prefix_cache)), self.power_w(Phase.SCORE))
            self._score[key] = v
        return v

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

    def __init__(self, engine: Any, grid: int = 16, max_ctx: int | None = None) -> None:
        if grid < 1:
            raise ValueError(f"grid must be >= 1, got {grid}")
        self.engine = engine
        self.grid = grid
        if max_ctx is None:
            max_ctx = getattr(engine, "max_ctx", None) or getattr(getattr(engine, "design", None), "max_ctx", None)
        self.max_ctx = max_ctx
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
        lo = (ctx // self.grid) * self.grid
        if lo == ctx or (self.max_ctx is not None and ctx >= self.max_ctx):
            return self._point(table, ctx, head)  # beyond its capacity the engine refuses the context itself
        hi = lo + self.grid
        if self.max_ctx is not None and hi > self.max_ctx - 1:
            hi = self.max_ctx - 1
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
