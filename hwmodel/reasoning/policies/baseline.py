"""``baseline`` -- draft, PRM and target on three GPU model servers, strictly sequential: draft a step, score it,
regenerate it on the target if rejected (and score the refinement, with backtracking). MISSION.md section A."""

from hwmodel.reasoning.policies import register
from hwmodel.reasoning.policies.base import Policy

POLICY = register(
    Policy(
        "baseline",
        "Baseline",
        "3 GPUs, sequential draft -> PRM -> target",
        step_ahead=False,
        sync="prefix-cache",
        draft_device="server",
    )
)
