"""Co-simulation: the functional W8A8 model decodes the real tokens, a timing model times each one.

The timing side is any :class:`TimingProvider` (the :class:`hwmodel.engine.Engine` timing methods); the default is
the cycle-level streaming accelerator, :class:`fpga.streaming.engine.StreamingEngine` (:func:`streaming_timing`), whose
``token(ctx)`` also reports the cycles of each token. Another device model (the instruction-driven accelerator, an
edge GPU) plugs in the same way. Pairing: ``prefill`` of ``n`` prompt tokens is timed as
``prefill_s(n, 0)`` (it ends with the logits of the first new token); each :meth:`DraftModel.decode` feeds one
token at context ``ctx = ahead`` and computes the logits of the next, which is one decode pass at that context,
``decode_s(ctx)``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

from hwmodel.errors import HwmodelError


@runtime_checkable
class TimingProvider(Protocol):
    """What co-simulation needs from a device model: seconds per operation at a context length."""

    name: str

    def prefill_s(self, n_tokens: int, ctx: int = 0) -> float: ...

    def decode_s(self, ctx: int) -> float: ...

    def ingest_s(self, n_tokens: int, ctx: int) -> float: ...


@dataclass(frozen=True)
class TokenRecord:
    """One decoded token: its position, the context it was decoded at, its simulated time and cycles."""

    step: int
    position: int
    ctx: int
    token: int
    decode_s: float
    cycles: int | None
    host_s: float  # wall time the functional model took for it on this machine


@dataclass(frozen=True)
class CosimResult:
    timing: str
    llm: str
    prompt: tuple[int, ...]
    prefill_s: float
    records: tuple[TokenRecord, ...] = field(default_factory=tuple)

    @property
    def tokens(self) -> list[int]:
        return [r.token for r in self.records]

    @property
    def decode_total_s(self) -> float:
        return sum(r.decode_s for r in self.records)

    @property
    def total_s(self) -> float:
        return self.prefill_s + self.decode_total_s

    @property
    def decode_tokens_per_s(self) -> float:
        return len(self.records) / self.decode_total_s if self.records and self.decode_total_s > 0 else float("nan")

    def as_dict(self) -> dict[str, Any]:
        return {
            "timing": self.timing,
            "llm": self.llm,
            "prompt": list(self.prompt),
            "prefill_s": self.prefill_s,
            "decode_total_s": self.decode_total_s,
            "total_s": self.total_s,
            "decode_tokens_per_s": self.decode_tokens_per_s,
            "tokens": self.tokens,
            "records": [asdict(r) for r in self.records],
        }


def _cycles(timing: Any, ctx: int) -> int | None:
    token = getattr(timing, "token", None)
    if token is None:
        return None
    return int(token(ctx).cycles)


def run(
    model: Any,
    timing: TimingProvider,
    prompt: Sequence[int],
    steps: int,
    on_token: Callable[[TokenRecord], None] | None = None,
) -> CosimResult:
    """Prefill ``prompt`` and greedily decode ``steps`` tokens with the functional ``model`` (a
    :class:`~fpga.functional.model.DraftModel`), timing every operation with ``timing``."""
    if steps < 0:
        raise HwmodelError(f"steps must be >= 0, got {steps}")
    if not isinstance(timing, TimingProvider):
        raise HwmodelError(f"the timing model {timing!r} lacks prefill_s / decode_s / ingest_s")
    prompt = [int(t) for t in prompt]
    model.prefill(prompt)
    prefill_s = float(timing.prefill_s(len(prompt), 0))
    records = []
    for step in range(steps):
        ctx = model.ahead
        t0 = time.perf_counter()
        tok = model.decode()
        host_s = time.perf_counter() - t0
        rec = TokenRecord(
            step=step,
            position=ctx,
            ctx=ctx,
            token=tok,
            decode_s=float(timing.decode_s(ctx)),
            cycles=_cycles(timing, ctx),
            host_s=host_s,
        )
        records.append(rec)
        if on_token is not None:
            on_token(rec)
    return CosimResult(
        timing=getattr(timing, "name", type(timing).__name__),
        llm=model.llm.name,
        prompt=tuple(prompt),
        prefill_s=prefill_s,
        records=tuple(records),
    )


def streaming_timing(design: str, clock_hz: float | None = None) -> Any:
    """The cycle-level streaming accelerator model of ``design`` (a built-in name or a TOML path) as the timing
    provider (:class:`fpga.streaming.engine.StreamingEngine`, memoized per context length)."""
    from fpga.streaming.engine import StreamingEngine

    return StreamingEngine(design, clock_hz=clock_hz)
