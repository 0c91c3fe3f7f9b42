"""What the system-A replay (:mod:`hwmodel.reasoning.sim`) times: one generation on a device, with its tokens'
emission times kept lazily from the engine's cumulative decode table, and the prefix cache of a GPU model server."""

from __future__ import annotations

import bisect
import dataclasses
from typing import Any

_EPS = 1e-12


@dataclasses.dataclass(slots=True)  # ~16 per replayed problem: slots make them cheaper to build and read
class Generation:
    """One generation on a device (draft step, speculative step, target refinement, prefetch)."""

    role: str
    ctx_key: tuple[int, ...]
    ctx_tokens: int
    n: int
    attempt: int | None  # the trace attempt this generation is, None for speculative work with no trace attempt
    label: str
    reuse: int = 0
    proc: Any = None
    start_s: float = 0.0
    compute_start_s: float | None = None  # when the device starts computing (after API overhead and transfer)
    end_s: float | None = None
    produced: int = 0
    energy_j: float = 0.0
    done: bool = False
    # token timing, kept lazily: tokens 1..k0 are out by t0 (reused ones at the start, the prefill's token at t0);
    # token m > k0 comes out at t0 + cum[c0 + m - k0] - cum[c0] (the engine's cumulative decode table)
    t0: float = 0.0
    k0: int = 0
    c0: int = 0
    cum: list[float] | None = None

    def time_of(self, m: int) -> float:
        """When token ``m`` (1-based) is out."""
        if m <= self.reuse:
            return self.start_s
        if m <= self.k0:
            return self.t0
        cum = self.cum
        return self.t0 + cum[self.c0 + m - self.k0] - cum[self.c0]

    @property
    def last_s(self) -> float:
        return self.time_of(self.n)

    def produced_by(self, t: float) -> int:
        """Tokens out by time ``t``."""
        if self.compute_start_s is None or t < self.t0 - _EPS:
            return self.reuse if (self.compute_start_s is not None and t >= self.start_s - _EPS) else 0
        cum, c0 = self.cum, self.c0
        hi = c0 + self.n - self.k0
        j = bisect.bisect_right(cum, cum[c0] + (t - self.t0) + _EPS, c0, hi + 1) - 1 - c0
        return self.k0 + j

    def stop_time(self, now: float) -> float:
        """When the device stops if told to stop at ``now``: a forward pass in flight runs to its end (a GPU or
        FPGA pass cannot be cut short); nothing started yet stops at once."""
        if self.compute_start_s is None or now <= self.compute_start_s:
            return now
        if now <= self.t0:
            return self.t0
        cum, c0 = self.cum, self.c0
        hi = c0 + self.n - self.k0
        j = bisect.bisect_left(cum, cum[c0] + (now - self.t0) - _EPS, c0 + 1, hi + 1)
        return self.t0 + cum[min(j, hi)] - cum[c0]

    def emission_times(self) -> list[float]:
        """When each token is out, tokens 1..n."""
        head = [self.time_of(m) for m in range(1, min(self.k0, self.n) + 1)]
        if self.n <= self.k0:
            return head
        cum, c0 = self.cum, self.c0
        base = self.t0 - cum[c0]
        return head + [base + x for x in cum[c0 + 1 : c0 + self.n - self.k0 + 1]]


class PrefixCache:
    """Contexts whose KV a GPU model server holds (vLLM automatic prefix caching, without eviction)."""

    def __init__(self, ctx_tokens_of: Any) -> None:
        self.keys: set[tuple[int, ...]] = set()
        self._tokens_of = ctx_tokens_of

    def add(self, key: tuple[int, ...]) -> None:
        self.keys.add(key)

    def cached_tokens(self, key: tuple[int, ...]) -> int:
        for m in range(len(key), -1, -1):
            if key[:m] in self.keys:
                return self._tokens_of(key[:m])
        return 0
