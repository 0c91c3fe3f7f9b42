"""``step-ahead`` (T2) -- the baseline's devices; the draft speculates step i+1 while step i is verified; the target
starts regenerating step i as soon as it is submitted (asynchronous prefetch), is interrupted if the step is
accepted, and its partial tokens are kept for a later backtrack from the same context. MISSION.md section A."""

from hwmodel.reasoning.policies import register
from hwmodel.reasoning.policies.base import Policy

POLICY = register(
    Policy(
        "step-ahead",
        "+T2",
        "3 GPUs, step-ahead speculation + asynchronous target prefetch with partial-token cache",
        step_ahead=True,
        sync="prefix-cache",
        draft_device="server",
    )
)
