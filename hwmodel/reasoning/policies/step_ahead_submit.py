"""``step-ahead-submit`` -- a sensitivity variant of T2 for the other reading of "the target starts the next step as
soon as a step completes": the target starts regenerating a step only when the draft submits it for verification
(so its head start on a rejected step is the verification time, not the drafting time)."""

from hwmodel.reasoning.policies import register
from hwmodel.reasoning.policies.base import Policy

POLICY = register(
    Policy(
        "step-ahead-submit",
        "+T2 (target at submission)",
        "T2 where the target starts a step only when the draft submits it (sensitivity)",
        step_ahead=True,
        sync="prefix-cache",
        draft_device="server",
        prefetch_at="submit",
    )
)
