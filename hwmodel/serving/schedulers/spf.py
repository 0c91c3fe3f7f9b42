"""Scheduler: shortest prompt first (see :mod:`hwmodel.serving.schedulers`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hwmodel.serving.schedulers import Scheduler, register_scheduler

if TYPE_CHECKING:
    from hwmodel.serving.state import ReqState


@register_scheduler
class ShortestPromptFirst(Scheduler):
    name = "spf"
    rank = 1
    summary = "shortest prompt first, with backfilling"
    strict = False

    def key(self, rs: ReqState) -> tuple[Any, ...]:
        return (rs.prompt_tokens, rs.arrival_s, rs.id)
