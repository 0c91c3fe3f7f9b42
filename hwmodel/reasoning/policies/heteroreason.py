"""``heteroreason`` (T1+T2) -- T2 with the draft on a host-driven accelerator (the FPGA): the prompt prefilled on a
GPU and its KV cache migrated once, KVMU pointer management, shadow synchronization (the draft ingests the
target's tokens while the target is still generating). MISSION.md section A."""

from hwmodel.reasoning.policies import register
from hwmodel.reasoning.policies.base import Policy

POLICY = register(
    Policy(
        "heteroreason",
        "+T2+T1",
        "draft on the FPGA (KVMU, shadow synchronization), PRM and target on GPUs, with T2",
        step_ahead=True,
        sync="shadow",
        draft_device="fpga",
    )
)
