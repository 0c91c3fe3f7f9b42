"""``edge-draft`` -- T2 with the draft served on an edge board (Jetson Orin Nano) reached over Ethernet."""

from hwmodel.reasoning.policies import register
from hwmodel.reasoning.policies.base import Policy

POLICY = register(
    Policy(
        "edge-draft",
        "+T2, edge draft",
        "draft on a Jetson Orin Nano over Ethernet, PRM and target on GPUs, with T2",
        step_ahead=True,
        sync="prefix-cache",
        draft_device="edge",
    )
)
