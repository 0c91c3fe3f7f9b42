"""What a policy runs on: the three models on their devices, the links between them, and serving details.

A :class:`Platform` is built from a system configuration (:mod:`hwmodel.reasoning.system`) and a policy; tests
build small ones directly. Engines are :class:`~hwmodel.reasoning.costs.TimedEngine` wrappers, shared by every
problem a platform replays.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Protocol

from hwmodel.reasoning.costs import TimedEngine

ROLES = ("draft", "prm", "target")


class LinkModel(Protocol):
    """Transfer times between the roles' devices and the host."""

    def transfer_s(self, src: str, dst: str, n_bytes: int) -> float:
        """Move ``n_bytes`` from ``src`` to ``dst`` (roles "draft", "prm", "target", or "host"); through the host
        when neither end is the host."""
        ...


@dataclasses.dataclass(frozen=True)
class PromptMigration:
    """A prompt prefilled with the draft model on a GPU and its KV cache moved to the draft device, the transfer
    overlapped layer by layer with the prefill (``interconnect.pcie.kv_migration``)."""

    prefill_s: float  # GPU busy prefilling (and quantizing the KV)
    prefill_power_w: float
    ready_s: float  # from the prefill's start until the last KV byte is on the draft device
    transfer_s: float  # the transfer on its own (link time, counted as communication)
    kv_bytes: int


@dataclasses.dataclass
class Platform:
    """Everything a policy needs to replay a trace (module docstring)."""

    draft: TimedEngine
    prm: TimedEngine
    target: TimedEngine
    links: LinkModel
    device_names: dict[str, str]  # role -> display name of its device
    prompt_migration: Callable[[int], PromptMigration] | None = None  # resident draft: prompt prefill + KV migration
    prm_prefix_cache: bool = False
    api_call_overhead_s: float = 0.0  # per request to a GPU model server (OpenAI API round trip)
    draft_api_call_overhead_s: float = 0.0  # the same for the draft (0 when the host drives its device directly)
    draft_told_verdict: bool = False  # the host sends each verdict to the draft's device over its link
    token_bytes: int = 4  # a token id on the wire (int32)
    kvmu_factory: Callable[[], Any] | None = None  # a fresh KVMU per problem (resident draft), driven and checked
    kvmu_clocked: bool = False  # the KVMU takes the replay's clock (bind_clock): a co-simulated KVMU
    description: dict[str, str] = dataclasses.field(default_factory=dict)
