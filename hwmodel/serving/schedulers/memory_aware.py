"""Scheduler: memory-aware backfilling (see :mod:`hwmodel.serving.schedulers`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from hwmodel.serving.schedulers import Scheduler, register_scheduler

if TYPE_CHECKING:
    from hwmodel.serving.state import Device, ReqState


@register_scheduler
class MemoryAware(Scheduler):
    name = "memory-aware"
    rank = 2
    summary = "arrival order with backfilling; best-fit FPGA memory"
    strict = False

    def pick_decoder(self, rs: ReqState, fpgas: Sequence[Device], gpu_nodes: set[int]) -> Device:
        def leftover(f: Device) -> tuple[int, bool, int]:
            m = f.model
            return (m.memory_bytes - m.weights_bytes - m.kv_bytes(rs.final_ctx), f.node not in gpu_nodes, f.index)

        return min(fpgas, key=leftover)
