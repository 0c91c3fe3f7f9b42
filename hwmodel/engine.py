"""Capability-typed engines: what a model on a device can do, declared, so systems never ask what it runs on
(ARCHITECTURE.md, "Interfaces that hold it together").

An *engine* is one LLM on one device (a GPU with a framework, a streaming or instruction-driven FPGA design, an
edge board). Instead of one wide interface, each engine class declares the capabilities it implements in
``CAPABILITIES`` (a frozenset of :class:`Capability`), and each capability is a small protocol below. A system
role (system A: draft, PRM, target; system B: prefill pool, decode pool) names the capabilities it needs and calls
:func:`require` when a system or cluster spec is loaded, which refuses a device that lacks one with the role, the
device and the missing capability named -- never a ``hasattr`` probe at replay time.

Times are seconds, contexts and counts are tokens, power is watts, energy joules. ``ctx`` is the number of tokens
already in the KV cache when the operation starts.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from hwmodel.errors import HwmodelError


class Phase(str, enum.Enum):
    """What a device is doing, for power and energy accounting."""

    IDLE = "idle"
    PREFILL = "prefill"
    DECODE = "decode"
    INGEST = "ingest"
    SCORE = "score"
    TRANSFER = "transfer"


class Capability(str, enum.Enum):
    """One thing an engine can do; each value names the protocol of the same name below."""

    DECODER = "decoder"  # decode_s(ctx), decode_steps_s(ctx0, n): one token at a time, vectorized over contexts
    PREFILLER = "prefiller"  # prefill_s(n, ctx)
    VECTOR_PREFILLER = "vector-prefiller"  # prefill_many(ns, ctxs): (time_s, power_w) of many prefills at once
    INGESTER = "ingester"  # ingest_s(n, ctx): forward passes whose logits are discarded (shadow synchronization)
    SCORER = "scorer"  # score_s(n, ctx, prefix_cache): a PRM value-head pass
    PREFILL_SCORER = "prefill-scorer"  # score_pass(n, ctx, prefix_cache): the prefill pass that scores a step
    BATCH_DECODER = "batch-decoder"  # decode_batch_s(ctxs): one step of a batch of requests
    PREFILL_TIMELINE = "prefill-timeline"  # prefill_timeline(n, ctx): when each layer's KV is ready
    OP_COSTED = "op-costed"  # prefill_cost/decode_cost: time and power of one operation (per-operation power)
    POWERED = "powered"  # power_w(phase)
    MEMORY_FACTS = "memory-facts"  # memory_capacity_bytes, resident_bytes, kv_bytes(ctx), max_ctx
    CONTEXT_BOUND = "context-bound"  # max_ctx: the engine holds at most this many tokens (a KV reservation)
    OPERATOR_TIMES = "operator-times"  # operator_times_s(n, ctx): seconds per layer of each canonical operator
    # samples_needed(ctx_hi, head), simulate_sample(ctx, head), add_samples(head, samples), shares_samples_with(e):
    # per-token times sampled on a grid of contexts, each a pure function of the engine and the context, so they can
    # be simulated in another process (hwmodel/sampled.py; the system-A warm-up)
    SAMPLED = "sampled"


@runtime_checkable
class Decoder(Protocol):
    name: str

    def decode_s(self, ctx: int) -> float:
        """Decode one token at context length ``ctx``."""
        ...

    def decode_steps_s(self, ctx0: int, n_steps: int) -> np.ndarray:
        """Times of ``n_steps`` consecutive decode steps at contexts ``ctx0 .. ctx0 + n_steps - 1``."""
        ...


@runtime_checkable
class Prefiller(Protocol):
    def prefill_s(self, n_tokens: int, ctx: int = 0) -> float:
        """Prefill ``n_tokens`` new tokens on top of ``ctx`` cached ones (logits of the last one)."""
        ...


@runtime_checkable
class VectorPrefiller(Protocol):
    def prefill_many(self, n_tokens: np.ndarray, ctx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(time_s, power_w)`` of the prefills ``(n_tokens[i], ctx[i])``, exactly as one by one, in one pass."""
        ...


@runtime_checkable
class Ingester(Protocol):
    def ingest_s(self, n_tokens: int, ctx: int) -> float:
        """Forward passes over ``n_tokens`` tokens that arrive from elsewhere; logits discarded (KV filled)."""
        ...


@runtime_checkable
class Scorer(Protocol):
    def score_s(self, n_tokens: int, ctx: int, prefix_cache: bool = False) -> float:
        """A reward-model pass scoring ``n_tokens`` after ``ctx`` (recomputing ``ctx`` without prefix caching)."""
        ...


@runtime_checkable
class PrefillScorer(Protocol):
    def score_pass(self, n_tokens: int, ctx: int, prefix_cache: bool = False) -> tuple[int, int]:
        """The ``(tokens, ctx)`` of the prefill whose time and power are those of scoring ``n_tokens`` after ``ctx``."""
        ...


@runtime_checkable
class BatchDecoder(Protocol):
    def decode_batch_s(self, ctxs: Sequence[int]) -> float:
        """One decode step of a batch of requests at contexts ``ctxs``."""
        ...


@runtime_checkable
class PrefillTimelined(Protocol):
    def prefill_timeline(self, n_tokens: int, ctx: int = 0) -> Any:
        """When each layer of a prefill finishes (``total_s``, ``layer_end_s``, ``host_done_s``)."""
        ...


@runtime_checkable
class OpCosted(Protocol):
    def prefill_cost(self, n_tokens: int, ctx: int = 0) -> Any:
        """``time_s`` and ``power_w`` of one prefill."""
        ...

    def decode_power_w(self, ctx: int) -> float:
        """Board power while decoding at context ``ctx``."""
        ...


@runtime_checkable
class Powered(Protocol):
    def power_w(self, phase: Phase) -> float:
        """Average device power while in ``phase``."""
        ...


@runtime_checkable
class MemoryFacts(Protocol):
    memory_capacity_bytes: int
    resident_bytes: int  # weights and everything else that stays on the device, KV cache excluded

    def kv_bytes(self, ctx: int) -> int:
        """Bytes of one sequence's KV cache at ``ctx`` tokens, as this device stores it."""
        ...

    @property
    def max_ctx(self) -> int | None:
        """The longest context the engine can hold (None: bounded only by memory)."""
        ...


@runtime_checkable
class ContextBound(Protocol):
    @property
    def max_ctx(self) -> int | None:
        """The longest context the engine holds (None: unbounded)."""
        ...


@runtime_checkable
class OperatorTimed(Protocol):
    def operator_times_s(self, n_tokens: int, ctx: int) -> dict[str, float]:
        """Seconds per decoder layer of each canonical operator of a pass of ``n_tokens`` after ``ctx`` (input_norm,
        qkv_proj, rope, kv_write, attention, o_proj, residual_add, post_norm, up_proj, act, down_proj) and of the
        embedding (``embed``, once per pass); see :mod:`hwmodel.interop.vidur`."""
        ...


@runtime_checkable
class Sampled(Protocol):
    def samples_needed(self, ctx_hi: int, head: bool) -> list[int]:
        """The sampled contexts not simulated yet that the per-token times at contexts ``0 .. ctx_hi - 1`` read."""
        ...

    def simulate_sample(self, ctx: int, head: bool) -> float:
        """One sample, simulated (not stored)."""
        ...

    def add_samples(self, head: bool, samples: dict[int, float]) -> None:
        """Store samples simulated by an engine that shares them (:meth:`shares_samples_with`)."""
        ...

    def shares_samples_with(self, other: object) -> bool:
        """Whether ``other`` simulates the same samples."""
        ...


PROTOCOLS: dict[Capability, type] = {
    Capability.DECODER: Decoder,
    Capability.PREFILLER: Prefiller,
    Capability.VECTOR_PREFILLER: VectorPrefiller,
    Capability.INGESTER: Ingester,
    Capability.SCORER: Scorer,
    Capability.PREFILL_SCORER: PrefillScorer,
    Capability.BATCH_DECODER: BatchDecoder,
    Capability.PREFILL_TIMELINE: PrefillTimelined,
    Capability.OP_COSTED: OpCosted,
    Capability.POWERED: Powered,
    Capability.MEMORY_FACTS: MemoryFacts,
    Capability.CONTEXT_BOUND: ContextBound,
    Capability.OPERATOR_TIMES: OperatorTimed,
    Capability.SAMPLED: Sampled,
}


@runtime_checkable
class Engine(Prefiller, Ingester, Powered, Protocol):
    """What every engine in the project has: one-token decode, prefill, ingest and power by phase."""

    name: str

    def decode_s(self, ctx: int) -> float:
        """Decode one token at context length ``ctx``."""
        ...


def capabilities(engine: object) -> frozenset[Capability]:
    """The capabilities ``engine`` declares (its class's ``CAPABILITIES``; empty when it declares none)."""
    return frozenset(getattr(type(engine), "CAPABILITIES", frozenset()))


def has(engine: object, cap: Capability) -> bool:
    """Whether ``engine`` declares ``cap``."""
    return cap in capabilities(engine)


class MissingCapabilityError(HwmodelError):
    """A system role was given an engine that lacks a capability the role needs."""


def require(engine: object, needed: Iterable[Capability], role: str, where: str = "") -> None:
    """Refuse ``engine`` for ``role`` unless it declares every capability in ``needed`` (and implements it).

    ``where`` names the spec (file and field) that placed the engine in the role, for the error message."""
    declared = capabilities(engine)
    name = getattr(engine, "name", type(engine).__name__)
    for cap in needed:
        cap = Capability(cap)
        if cap not in declared or not isinstance(engine, PROTOCOLS[cap]):
            at = f"{where}: " if where else ""
            raise MissingCapabilityError(
                f"{at}role '{role}' needs capability '{cap.value}', which device '{name}' does not have "
                f"(it has: {', '.join(sorted(c.value for c in declared)) or 'none'})"
            )
