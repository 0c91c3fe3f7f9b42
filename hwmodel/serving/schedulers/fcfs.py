"""Scheduler: first-come-first-served (the published GLITCHES policy) (see :mod:`hwmodel.serving.schedulers`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hwmodel.serving.schedulers import Scheduler, register_scheduler

if TYPE_CHECKING:
    pass


@register_scheduler
class Fcfs(Scheduler):
    name = "fcfs"
    rank = 0
    summary = "first-come-first-served, head-of-line blocking (published GLITCHES policy)"
