"""What a system-A policy is: a strategy object the replay (:mod:`hwmodel.reasoning.sim`) consults.

The replay asks the policy four things -- does the draft speculate the next step during verification (T2), when
does the target start its prefetch, how does the draft catch up with the target's tokens, and which of the
system's devices runs the draft unless a study says otherwise -- and asks the platform's roles two: does the draft
keep its KV cache on its own device (``resident``: a host-driven accelerator) and must the host tell the draft's
device each verdict. Which capabilities each role needs follows from these answers (:meth:`Policy.needs`).
"""
from __future__ import annotations

import dataclasses

from hwmodel.engine import Capability

#: how the draft catches up with a target step: its model server's prefix cache (the next request prefills what is
#: new), shadow synchronization (a resident draft ingests each token as it arrives), or a local re-prefill
SYNC_MODES = ("prefix-cache", "shadow", "reprefill")
RESIDENT_SYNC = ("shadow", "reprefill")  # the modes of a draft that keeps its own KV cache (host-driven)
BASE_NEEDS = {
    "draft": frozenset({Capability.DECODER, Capability.PREFILLER, Capability.POWERED}),
    "prm": frozenset({Capability.SCORER, Capability.POWERED}),
    "target": frozenset({Capability.DECODER, Capability.PREFILLER, Capability.POWERED}),
}


@dataclasses.dataclass(frozen=True)
class Policy:
    """A system-A policy (module docstring)."""

    name: str
    label: str  # for tables and plots
    description: str
    step_ahead: bool  # T2: speculate the next step during verification; prefetch the target's refinement
    sync: str  # how the draft catches up with the target's tokens (SYNC_MODES)
    draft_device: str = "server"  # the system device ([devices.NAME]) that runs the draft unless a study overrides
    prefetch_at: str = "commit"  # T2: the target starts a step once the previous one is committed, or "submit"

    def __post_init__(self) -> None:
        if self.sync not in SYNC_MODES:
            raise ValueError(f"policy {self.name}: sync must be one of {', '.join(SYNC_MODES)}, got {self.sync!r}")
        if self.prefetch_at not in ("commit", "submit"):
            raise ValueError(f"policy {self.name}: prefetch_at must be 'commit' or 'submit', got {self.prefetch_at!r}")

    @property
    def resident_draft(self) -> bool:
        """The draft keeps the committed context's KV cache on its own device (prompt KV migrated once, steps
        decoded from it, target steps synchronized into it), driven by the host directly: needs a host-driven
        device."""
        return self.sync in RESIDENT_SYNC

    def needs(self, role: str) -> frozenset[Capability]:
        """The capabilities ``role`` ("draft", "prm", "target") needs under this policy."""
        caps = set(BASE_NEEDS[role])
        if role == "draft" and self.sync == "shadow":
            caps.add(Capability.INGESTER)  # ingest each of the target's tokens as it arrives
        return frozenset(caps)
