"""The discarded-token energy as HeteroReason defines it (shared/research/measurements.md s3; docs/reasoning.md
"Metrics").

The paper's metric: *the additional energy consumed by step-ahead tokens that a PRM rejection invalidates* -- tokens
generated from an invalid reasoning state, i.e. from a context that contains a step the PRM rejected (a draft step
rejected, or with backtracking a target step that failed and triggered a backtrack). It is measured on the
homogeneous 3-GPU platform, configuration 1, as a share of the total energy. Prefetching is interrupted at the
reject signal, and a target run interrupted because the step it would have refined was accepted keeps its partial
tokens in a cache for reuse: those are *not* waste, even when no later step happens to reuse them.

The report's broader figure (``discarded_energy_share``) counts every generation whose tokens were never used --
those invalidated by a rejection, interrupted prefetches whose cache was never reused, and a prefetch stopped when
the answer ended. This module selects, among those, the ones the paper's definition counts; the two are reported
side by side under distinct names (``invalidated_energy_share`` vs ``discarded_energy_share``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

from hwmodel.workload.trace import ACCEPT


@dataclasses.dataclass(frozen=True)
class Invalidated:
    """Work a PRM rejection invalidated: tokens (new ones, not reused from a cache) and their energy, per role."""

    draft_tokens: int = 0
    target_tokens: int = 0
    energy_j: float = 0.0


def from_invalid_state(ctx_key: Sequence[int], attempts: Sequence[Any]) -> bool:
    """Whether a generation from context ``ctx_key`` (the attempt indices it builds on) was generated from an
    invalid reasoning state: some step of its context was rejected by the PRM (verdict ``reject`` or
    ``backtrack``)."""
    return any(attempts[j].verdict != ACCEPT for j in ctx_key)


def invalidated(discarded_ops: Iterable[Any], attempts: Sequence[Any]) -> Invalidated:
    """Select, among the generations a replay threw away (each with ``role``, ``ctx_key``, ``produced``, ``reuse``
    and ``energy_j``), those a PRM rejection invalidated (module docstring), and total them."""
    d = t = 0
    e = 0.0
    for op in discarded_ops:
        if not from_invalid_state(op.ctx_key, attempts):
            continue
        new = max(0, op.produced - op.reuse)
        if op.role == "draft":
            d += new
        else:
            t += new
        e += op.energy_j
    return Invalidated(d, t, e)
