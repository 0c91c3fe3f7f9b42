"""A token-by-token test engine (like the streaming FPGA: a prefill is its ingested tokens plus one decoded), shared
by the tests of the sampled engine and of the warm-up."""

from __future__ import annotations

import dataclasses

from hwmodel.engine import Capability, Phase


@dataclasses.dataclass
class TokenEngine:
    """Per-token times with a kink at context 1,000 and a jitter in the context, so sums round differently in
    another order; it refuses contexts beyond its KV reservation."""

    CAPABILITIES = frozenset({Capability.PREFILLER, Capability.INGESTER, Capability.POWERED, Capability.CONTEXT_BOUND})
    name: str = "tokenwise"
    max_ctx: int = 2048
    calls: int = 0

    def _t(self, ctx: int, head: bool) -> float:
        self.calls += 1
        if not 0 <= ctx < self.max_ctx:
            raise ValueError(f"ctx {ctx} beyond the KV reservation")
        base = 1.5e-3 + 0.9e-6 * ctx + (2e-7 * (ctx - 1000) if ctx > 1000 else 0.0)
        return base + 1e-6 * ((ctx * 7919) % 5) / 5 + (0.2e-3 if head else 0.0)

    def decode_s(self, ctx: int) -> float:
        return self._t(ctx, True)

    def ingest_s(self, n: int, ctx: int) -> float:
        return sum(self._t(ctx + i, False) for i in range(n))

    def prefill_s(self, n: int, ctx: int = 0) -> float:
        return self.ingest_s(n - 1, ctx) + self.decode_s(ctx + n - 1)

    def power_w(self, phase: Phase) -> float:
        return 30.0 if phase is Phase.IDLE else 45.0
