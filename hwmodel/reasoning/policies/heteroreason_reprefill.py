"""``heteroreason-reprefill`` -- heteroreason with the vanilla alternative to shadow synchronization: the draft
waits for the whole target step and prefills it locally."""

from hwmodel.reasoning.policies import register
from hwmodel.reasoning.policies.base import Policy

POLICY = register(
    Policy(
        "heteroreason-reprefill",
        "+T2+T1 (re-prefill)",
        "as heteroreason, but the FPGA re-prefills the target's step instead of shadow synchronization",
        step_ahead=True,
        sync="reprefill",
        draft_device="fpga",
    )
)
