"""The scheduling policies of system A (MISSION.md section A), as the switches the simulator reads.

* ``baseline`` -- draft, PRM and target on three GPUs, strictly sequential: draft a step, score it, regenerate it on
  the target if rejected (and score the refinement, with backtracking).
* ``step-ahead`` (T2) -- same GPUs; the draft speculates step i+1 while step i is verified; the target starts
  regenerating step i as soon as it is submitted (asynchronous prefetch), is interrupted if the step is accepted,
  and its partial tokens are kept for a later backtrack from the same context.
* ``heteroreason`` (T1+T2) -- T2 with the draft on the FPGA: prompt prefilled on a GPU and its KV cache migrated
  once, KVMU pointer management, shadow synchronization (the FPGA ingests the target's tokens while the target is
  still generating).
* ``heteroreason-reprefill`` -- the same with the vanilla alternative to shadow synchronization: the FPGA waits for
  the whole target step and prefills it locally.
* ``edge-draft`` -- T2 with the draft on an edge GPU (Jetson Orin Nano) reached over Ethernet.
* ``step-ahead-submit`` -- a sensitivity variant of T2 for the other reading of "the target starts the next step
  as soon as a step completes": the target starts regenerating a step only when the draft submits it for
  verification (so its head start on a rejected step is the verification time, not the drafting time).

Whether a run backtracks is a property of the trace it replays, not of the policy.
"""
from __future__ import annotations

import dataclasses

from hwmodel.errors import UnknownNameError


@dataclasses.dataclass(frozen=True)
class PolicySpec:
    name: str
    step_ahead: bool  # T2: speculate the next step during verification; prefetch the target's refinement
    draft_on: str  # "gpu", "fpga" or "edge"
    sync: str  # how the draft catches up with the target's tokens: "prefix-cache", "shadow" or "reprefill"
    label: str  # for tables and plots
    description: str
    prefetch_at: str = "commit"  # T2: the target starts a step once the previous one is committed, or "submit"


POLICIES: dict[str, PolicySpec] = {p.name: p for p in (
    PolicySpec("baseline", False, "gpu", "prefix-cache", "Baseline",
               "3 GPUs, sequential draft -> PRM -> target"),
    PolicySpec("step-ahead", True, "gpu", "prefix-cache", "+T2",
               "3 GPUs, step-ahead speculation + asynchronous target prefetch with partial-token cache"),
    PolicySpec("heteroreason", True, "fpga", "shadow", "+T2+T1",
               "draft on the FPGA (KVMU, shadow synchronization), PRM and target on GPUs, with T2"),
    PolicySpec("heteroreason-reprefill", True, "fpga", "reprefill", "+T2+T1 (re-prefill)",
               "as heteroreason, but the FPGA re-prefills the target's step instead of shadow synchronization"),
    PolicySpec("edge-draft", True, "edge", "prefix-cache", "+T2, edge draft",
               "draft on a Jetson Orin Nano over Ethernet, PRM and target on GPUs, with T2"),
    PolicySpec("step-ahead-submit", True, "gpu", "prefix-cache", "+T2 (target at submission)",
               "T2 where the target starts a step only when the draft submits it (sensitivity)", "submit"),
)}


def policy(name: str) -> PolicySpec:
    try:
        return POLICIES[name]
    except KeyError:
        raise UnknownNameError("reasoning policy", name, list(POLICIES)) from None
