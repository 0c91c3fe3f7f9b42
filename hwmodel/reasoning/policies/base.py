"""What a system-A policy is: a strategy object the replay (:mod:`hwmodel.reasoning.sim`) calls through hooks.

The replay never tests a policy's name or flags; it calls the policy's hooks: ``speculates`` (does the draft
speculate the next step during verification: T2), ``prefetches_at(moment)`` (does the target start its
asynchronous prefetch at "commit" or "submit"), and the draft-sync hooks ``setup``, ``draft_process`` and
``catch_up`` (:mod:`hwmodel.reasoning.policies.sync`: how the draft's KV cache is prepared, how a draft step runs,
how the draft catches up with a target step). A built-in policy is data naming its behaviour; a policy with new
behaviour subclasses :class:`Policy` and overrides a hook. The platform's roles say whether the draft keeps its KV
cache on its own device (``resident``: a host-driven accelerator) and whether the host tells the draft's device
each verdict. Which capabilities each role needs follows from the hooks (:meth:`Policy.needs`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

from hwmodel.engine import Capability
from hwmodel.reasoning.policies.sync import SYNCS, DraftSync

if TYPE_CHECKING:
    from hwmodel.reasoning.generation import Generation
    from hwmodel.reasoning.sim import ProblemSimulation

#: how the draft catches up with a target step: its model server's prefix cache (the next request prefills what is
#: new), shadow synchronization (a resident draft ingests each token as it arrives), or a local re-prefill
SYNC_MODES = tuple(SYNCS)  # ("prefix-cache", "shadow", "reprefill")
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
    def draft_sync(self) -> DraftSync:
        """The strategy behind ``sync`` (:mod:`hwmodel.reasoning.policies.sync`)."""
        return SYNCS[self.sync]

    @property
    def resident_draft(self) -> bool:
        """The draft keeps the committed context's KV cache on its own device (prompt KV migrated once, steps
        decoded from it, target steps synchronized into it), driven by the host directly: needs a host-driven
        device."""
        return self.draft_sync.resident

    # ---------------------------------------------------------------- hooks the replay calls (module docstring)
    @property
    def speculates(self) -> bool:
        """T2: after submitting a step, the draft speculates the next one while it is verified."""
        return self.step_ahead

    def prefetches_at(self, moment: str) -> bool:
        """Whether the target starts generating the next step at ``moment`` ("commit": a step was committed;
        "submit": the draft submitted a step for verification)."""
        return self.step_ahead and moment == self.prefetch_at

    def setup(self, sim: ProblemSimulation) -> Generator[Any, Any, None]:
        """SimPy sub-process before the first step."""
        return self.draft_sync.setup(sim)

    def draft_process(self, sim: ProblemSimulation, op: Generation, wait_until_s: float) -> Generator[Any, Any, None]:
        """The SimPy process that generates draft step ``op`` (not before ``wait_until_s``)."""
        return self.draft_sync.draft_process(sim, op, wait_until_s)

    def catch_up(self, sim: ProblemSimulation, op: Generation, ctx_tokens: int) -> None:
        """The draft catches up with target step ``op`` (all its tokens emitted) from ``ctx_tokens``."""
        self.draft_sync.catch_up(sim, op, ctx_tokens)

    def needs(self, role: str) -> frozenset[Capability]:
        """The capabilities ``role`` ("draft", "prm", "target") needs under this policy."""
        caps = set(BASE_NEEDS[role])
        if role == "draft":
            caps |= self.draft_sync.draft_needs  # e.g. shadow sync ingests each of the target's tokens
        return frozenset(caps)
