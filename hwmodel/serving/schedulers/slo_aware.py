"""Scheduler: SLO-aware earliest-deadline-first (see :mod:`hwmodel.serving.schedulers`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hwmodel.serving.schedulers import Scheduler, Slo, SortedQueue, register_scheduler

if TYPE_CHECKING:
    from hwmodel.serving.state import Device, ReqState


@register_scheduler
class SloAware(Scheduler):
    name = "slo-aware"
    rank = 3
    summary = "earliest TTFT deadline first; hopeless requests last; GPU batches capped by the TPOT SLO"
    strict = False

    def __init__(self, slo: Slo, window: int = 256) -> None:
        super().__init__(slo, window)
        self._late = SortedQueue()
        self._in_late: set[int] = set()

    def key(self, rs: ReqState) -> tuple[Any, ...]:
        # latest time the prefill may start and still meet the TTFT SLO
        return (rs.arrival_s + self.slo.ttft_s - self.estimate_prefill_s(rs), rs.id)

    def _demote(self, now_s: float) -> None:
        while len(self._q) and self._q.keys[0][0] < now_s:
            k, rs = self._q.pop_front()
            self._key_of[rs.id] = (rs.arrival_s, rs.id)
            self._late.push(self._key_of[rs.id], rs)
            self._in_late.add(rs.id)

    def remove(self, rs: ReqState) -> None:
        k = self._key_of.pop(rs.id)
        if rs.id in self._in_late:
            self._in_late.discard(rs.id)
            self._late.remove(k, rs)
        else:
            self._q.remove(k, rs)

    def __len__(self) -> int:
        return len(self._q) + len(self._late)

    def candidates(self, now_s: float) -> list[ReqState]:
        self._demote(now_s)
        live = self._q.items[: self.window]
        return live + self._late.items[: self.window - len(live)] if len(live) < self.window else live

    def admit_batch_decode(self, g: Device, rs: ReqState) -> bool:
        """A batch grows only while its step stays within the TPOT SLO (a lone request is always admitted, so
        nothing starves)."""
        ctxs = [r.ctx for r in g.batch] + [r.prompt_tokens for r in g.joining] + [rs.prompt_tokens]
        return len(ctxs) == 1 or g.model.decode_batch_s(ctxs) <= self.slo.tpot_s
