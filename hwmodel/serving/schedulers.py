"""Request schedulers of the serving simulator, selectable by name.

A scheduler decides two things: the *order* in which queued requests are offered to the cluster, and *which* free
FPGA takes a request (plus, for the SLO-aware policy, whether a GPU may take one more request into its decode
batch). Placement mechanics (which devices are free, memory, paths) live in the simulator, so every policy sees the
same cluster rules.

* ``fcfs``: the published GLITCHES policy. Strict arrival order with head-of-line blocking: if the oldest request
  cannot be placed (devices busy, memory short), nobody behind it is. The first free FPGA (lowest index) whose
  node has a free GPU takes it.
* ``spf``: shortest-prompt-first. Shorter prompts prefill sooner and leave the queue sooner, which cuts the mean
  time to first token when prompt lengths vary; requests that do not fit now are skipped (backfilling).
* ``memory-aware``: arrival order with backfilling (a request that does not fit the free memory now is skipped,
  not blocking the others) and best-fit placement (the free FPGA with the least memory left over, so large-memory
  cards stay free for long contexts).
* ``slo-aware``: earliest deadline first on the time-to-first-token deadline; a request that can no longer meet
  its TTFT SLO is moved behind those that still can (it will not count for goodput either way), and a GPU admits
  a request into its decode batch only if the batched step time stays within the TPOT SLO.

Non-strict policies look at most ``window`` queued requests per decision (a bounded scan, as a real scheduler
loop would), so a long queue does not make each decision linear in its length.
"""
from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from hwmodel.errors import HwmodelError, UnknownNameError

if TYPE_CHECKING:
    from hwmodel.serving.simulator import Device, ReqState


@dataclasses.dataclass(frozen=True)
class Slo:
    """Service-level objectives: time to first token and time per output token (after the first)."""

    ttft_s: float = 1.0
    tpot_s: float = 0.05

    def __post_init__(self) -> None:
        if not (self.ttft_s > 0 and self.tpot_s > 0):
            raise HwmodelError(f"SLOs must be positive seconds, got ttft {self.ttft_s}, tpot {self.tpot_s}")


class _SortedQueue:
    """Requests kept sorted by a key (bisect insertion; removal by key lookup)."""

    def __init__(self) -> None:
        self.keys: list[tuple[Any, ...]] = []
        self.items: list[ReqState] = []

    def push(self, key: tuple[Any, ...], rs: ReqState) -> None:
        i = bisect.bisect_right(self.keys, key)
        self.keys.insert(i, key)
        self.items.insert(i, rs)

    def remove(self, key: tuple[Any, ...], rs: ReqState) -> None:
        i = bisect.bisect_left(self.keys, key)
        while self.items[i] is not rs:
            i += 1
        del self.keys[i]
        del self.items[i]

    def pop_front(self) -> tuple[tuple[Any, ...], ReqState]:
        return self.keys.pop(0), self.items.pop(0)

    def __len__(self) -> int:
        return len(self.items)


class Scheduler:
    """Base: a sorted queue; subclasses set the key, strictness and placement preferences."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    strict: ClassVar[bool] = True

    def __init__(self, slo: Slo, window: int = 256) -> None:
        if window < 1:
            raise HwmodelError(f"scheduler window must be >= 1 request, got {window}")
        self.slo = slo
        self.window = window
        self._q = _SortedQueue()
        self._key_of: dict[int, tuple[Any, ...]] = {}
        self.estimate_prefill_s: Callable[[ReqState], float] = lambda rs: 0.0

    def key(self, rs: ReqState) -> tuple[Any, ...]:
        return (rs.arrival_s, rs.id)

    def push(self, rs: ReqState, now_s: float) -> None:
        k = self.key(rs)
        self._key_of[rs.id] = k
        self._q.push(k, rs)

    def remove(self, rs: ReqState) -> None:
        self._q.remove(self._key_of.pop(rs.id), rs)

    def __len__(self) -> int:
        return len(self._q)

    def candidates(self, now_s: float) -> list[ReqState]:
        """Queued requests in the order they are offered to the cluster (just the head if strict)."""
        return self._q.items[: 1 if self.strict else self.window]

    def pick_fpga(self, rs: ReqState, fpgas: Sequence[Device], gpu_nodes: set[int]) -> Device:
        """Among free FPGAs that fit ``rs``: the first (by index) on a node with a free GPU, else the first."""
        for f in fpgas:
            if f.node in gpu_nodes:
                return f
        return fpgas[0]

    def admit_gpu_decode(self, g: Device, rs: ReqState) -> bool:
        """May GPU ``g`` take ``rs`` into its decode batch (beyond the batch-size and memory limits)?"""
        return True


class Fcfs(Scheduler):
    name = "fcfs"
    summary = "first-come-first-served, head-of-line blocking (published GLITCHES policy)"


class ShortestPromptFirst(Scheduler):
    name = "spf"
    summary = "shortest prompt first, with backfilling"
    strict = False

    def key(self, rs: ReqState) -> tuple[Any, ...]:
        return (rs.prompt_tokens, rs.arrival_s, rs.id)


class MemoryAware(Scheduler):
    name = "memory-aware"
    summary = "arrival order with backfilling; best-fit FPGA memory"
    strict = False

    def pick_fpga(self, rs: ReqState, fpgas: Sequence[Device], gpu_nodes: set[int]) -> Device:
        def leftover(f: Device) -> tuple[int, bool, int]:
            m = f.model
            return (m.memory_bytes - m.weights_bytes - m.kv_bytes(rs.final_ctx), f.node not in gpu_nodes, f.index)

        return min(fpgas, key=leftover)


class SloAware(Scheduler):
    name = "slo-aware"
    summary = "earliest TTFT deadline first; hopeless requests last; GPU batches capped by the TPOT SLO"
    strict = False

    def __init__(self, slo: Slo, window: int = 256) -> None:
        super().__init__(slo, window)
        self._late = _SortedQueue()
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

    def admit_gpu_decode(self, g: Device, rs: ReqState) -> bool:
        """A batch grows only while its step stays within the TPOT SLO (a lone request is always admitted, so
        nothing starves)."""
        ctxs = [r.ctx for r in g.batch] + [r.prompt_tokens for r in g.joining] + [rs.prompt_tokens]
        return len(ctxs) == 1 or g.model.decode_batch_s(ctxs) <= self.slo.tpot_s


SCHEDULERS: dict[str, type[Scheduler]] = {c.name: c for c in (Fcfs, ShortestPromptFirst, MemoryAware, SloAware)}


def make_scheduler(name: str, slo: Slo, window: int = 256) -> Scheduler:
    """A scheduler by name (``fcfs``, ``spf``, ``memory-aware``, ``slo-aware``)."""
    if name not in SCHEDULERS:
        raise UnknownNameError("scheduler", name, list(SCHEDULERS))
    return SCHEDULERS[name](slo, window)
