"""The one interface every model-running device implements (FPGA, GPU, edge GPU), so policies never ask what
they run on (ARCHITECTURE.md, "Interfaces that hold it together").

Times are seconds, contexts and counts are tokens, power is watts. ``ctx`` is the number of tokens already in the
KV cache when the operation starts.
"""
from __future__ import annotations

import enum
from typing import Protocol, runtime_checkable


class Phase(str, enum.Enum):
    """What a device is doing, for power and energy accounting."""

    IDLE = "idle"
    PREFILL = "prefill"
    DECODE = "decode"
    INGEST = "ingest"
    SCORE = "score"
    TRANSFER = "transfer"


@runtime_checkable
class Engine(Protocol):
    """A model on a device: latency of each operation and power in each phase."""

    name: str

    def prefill_s(self, n_tokens: int, ctx: int = 0) -> float:
        """Prefill ``n_tokens`` new tokens on top of ``ctx`` cached ones (logits of the last one)."""
        ...

    def decode_s(self, ctx: int) -> float:
        """Decode one token at context length ``ctx``."""
        ...

    def ingest_s(self, n_tokens: int, ctx: int) -> float:
        """Forward passes over ``n_tokens`` tokens that arrive from elsewhere; logits discarded (KV filled)."""
        ...

    def power_w(self, phase: Phase) -> float:
        """Average device power while in ``phase``."""
        ...
