"""Per-token times of an expensive engine sampled on a grid of contexts (a cycle-level FPGA simulation per context).

:class:`ContextSampledEngine` wraps a *token-by-token* engine -- one whose decode and ingest of a token cost one
cycle-level simulation per context length, tens of milliseconds each (the streaming FPGA, the instruction-driven
FPGA). The per-token times -- decode (LM head and sampler included) and ingest of one token (logits discarded) --
are simulated exactly at every ``grid``-th context and linearly interpolated in between (a token's time grows by
about one KV row per context step; the error is measured in the tests and reported in docs/reasoning.md).
``ingest_s(n, ctx)`` sums the tokens at ``ctx .. ctx + n - 1``.

Multi-token prefill is the back-end's choice (``prefill``):

* ``"tokenwise"`` -- the engine has no batched prefill datapath (the streaming design re-runs its decode pipeline
  token by token): ``prefill_s(n, ctx)`` is ``n - 1`` ingested tokens and one decoded token, composed from the
  samples. The constructor checks that contract against the wrapped engine once.
* ``"engine"`` -- the engine has its own batched prefill (the instruction-driven design's MM mode): asked of the
  engine itself, memoized.

``grid=1`` simulates every context (exact). The wrapper declares the capabilities it implements: decoder,
prefiller, ingester, power by phase, and the wrapped engine's context bound.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hwmodel.engine import Capability, Phase, capabilities

PREFILL_MODES = ("tokenwise", "engine")


class ContextSampledEngine:
    """An engine whose per-token times are sampled every ``grid`` contexts (module docstring)."""

    CAPABILITIES = frozenset(
        {
            Capability.DECODER,
            Capability.PREFILLER,
            Capability.INGESTER,
            Capability.POWERED,
            Capability.CONTEXT_BOUND,
            Capability.SAMPLED,
        }
    )

    def __init__(self, engine: Any, grid: int = 16, max_ctx: int | None = None, prefill: str = "tokenwise") -> None:
        if grid < 1:
            raise ValueError(f"grid must be >= 1, got {grid}")
        if prefill not in PREFILL_MODES:
            raise ValueError(f"prefill must be one of {', '.join(PREFILL_MODES)}, got {prefill!r}")
        self.engine = engine
        self.grid = grid
        caps = capabilities(engine)
        if max_ctx is None and (Capability.CONTEXT_BOUND in caps or Capability.MEMORY_FACTS in caps):
            max_ctx = engine.max_ctx
        self.max_ctx = max_ctx
        self.prefill_mode = prefill
        self.name = engine.name if grid == 1 else f"{engine.name} (sampled every {grid} contexts)"
        self._decode_pts: dict[int, float] = {}
        self._ingest_pts: dict[int, float] = {}
        self._prefill_memo: dict[tuple[int, int], float] = {}
        self._powers: dict[Phase, float] = {}  # the wrapped engine's power per phase, asked once (or from a cache)
        if prefill == "tokenwise":
            self._check_contract()

    def _token_s(self, ctx: int, head: bool) -> float:
        return float(self.engine.decode_s(ctx) if head else self.engine.ingest_s(1, ctx))

    def _check_contract(self) -> None:
        c = 2 * self.grid
        want = self.engine.prefill_s(2, c)
        got = self._token_s(c, False) + self._token_s(c + 1, True)
        if abs(want - got) > 1e-12 * max(1.0, abs(want)):
            raise TypeError(
                f"{self.engine.name}: prefill_s is not token by token ({want} != {got}); "
                "sample it with prefill='engine'"
            )

    def _point(self, table: dict[int, float], ctx: int, head: bool) -> float:
        v = table.get(ctx)
        if v is None:
            v = table[ctx] = self._token_s(ctx, head)
        return v

    def _bracket(self, ctx: int) -> tuple[int, int]:
        """The sampled contexts (lo, hi) that the time at ``ctx`` is interpolated between (lo == hi: simulated)."""
        lo = (ctx // self.grid) * self.grid
        if lo == ctx or (self.max_ctx is not None and ctx >= self.max_ctx):
            return ctx, ctx  # beyond its capacity the engine refuses the context itself
        hi = lo + self.grid
        if self.max_ctx is not None and hi > self.max_ctx - 1:
            hi = self.max_ctx - 1
        return lo, hi

    def _interp(self, table: dict[int, float], ctx: int, head: bool) -> float:
        lo, hi = self._bracket(ctx)
        if lo == hi:
            return self._point(table, ctx, head)
        a, b = self._point(table, lo, head), self._point(table, hi, head)
        return a + (b - a) * (ctx - lo) / (hi - lo)

    # ---------------------------------------------------------------------------- samples computed elsewhere
    def samples_needed(self, ctx_hi: int, head: bool) -> list[int]:
        """The sampled contexts not simulated yet that the per-token times at contexts ``0 .. ctx_hi - 1`` read
        (``head``: decoded tokens, else ingested ones), in increasing order."""
        table = self._decode_pts if head else self._ingest_pts
        need: set[int] = set()
        for ctx in range(ctx_hi):
            need.update(self._bracket(ctx))
        return sorted(c for c in need if c not in table)

    def simulate_sample(self, ctx: int, head: bool) -> float:
        """One sample, simulated (not stored): what the table would hold at ``ctx``."""
        return self._token_s(ctx, head)

    def shares_samples_with(self, other: Any) -> bool:
        """Whether ``other`` (a sampled engine) simulates the same tokens: the same wrapped engine, or engines of one
        type whose ``token_identity()`` (what a token is a pure function of, with the context) are equal."""
        a, b = self.engine, getattr(other, "engine", None)
        if a is b:
            return True
        ident = getattr(type(a), "token_identity", None)
        return type(a) is type(b) and ident is not None and a.token_identity() == b.token_identity()

    def add_samples(self, head: bool, samples: dict[int, float]) -> None:
        """Store samples simulated by :meth:`simulate_sample` of an identical engine (another process): the same
        values the table would compute itself, so every time read from it is unchanged."""
        (self._decode_pts if head else self._ingest_pts).update(samples)

    def decode_s(self, ctx: int) -> float:
        return self._interp(self._decode_pts, ctx, True)

    def decode_steps_s(self, ctx0: int, n_steps: int) -> np.ndarray:
        return np.array([self._interp(self._decode_pts, ctx0 + i, True) for i in range(n_steps)], dtype=float)

    def ingest_s(self, n_tokens: int, ctx: int) -> float:
        return sum(self._interp(self._ingest_pts, ctx + i, False) for i in range(n_tokens))

    def prefill_s(self, n_tokens: int, ctx: int = 0) -> float:
        if n_tokens < 1:
            raise ValueError(f"prefill needs at least one token, got {n_tokens}")
        if self.prefill_mode == "engine":
            key = (int(n_tokens), int(ctx))
            v = self._prefill_memo.get(key)
            if v is None:
                v = self._prefill_memo[key] = float(self.engine.prefill_s(n_tokens, ctx))
            return v
        return self.ingest_s(n_tokens - 1, ctx) + self.decode_s(ctx + n_tokens - 1)

    def power_w(self, phase: Phase) -> float:
        p = self._powers.get(phase)
        if p is None:
            p = self._powers[phase] = float(self.engine.power_w(phase))
        return p

    def add_powers(self, powers: dict[Phase, float]) -> None:
        """Store per-phase powers an identical engine computed (the sample cache): the values :meth:`power_w`
        would compute itself."""
        self._powers.update(powers)

    @property
    def powers(self) -> dict[Phase, float]:
        """The per-phase powers known so far (computed or stored)."""
        return dict(self._powers)
