"""Request schedulers of the serving simulator, selectable by name; one file each (this package's modules,
or any file loaded with :func:`load_scheduler_file`), registered with :func:`register_scheduler` in
:data:`REGISTRY` (the project's one registry mechanism, :mod:`hwmodel.registry`).

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

Non-strict schedulers look at most ``window`` queued requests per decision (a bounded scan, as a real scheduler
loop would), so a long queue does not make each decision linear in its length.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from hwmodel.errors import HwmodelError
from hwmodel.registry import Registry, load_plugin

if TYPE_CHECKING:
    from hwmodel.serving.state import Device, ReqState


@dataclasses.dataclass(frozen=True)
class Slo:
    """Service-level objectives: time to first token and time per output token (after the first)."""

    ttft_s: float = 1.0
    tpot_s: float = 0.05

    def __post_init__(self) -> None:
        if not (self.ttft_s > 0 and self.tpot_s > 0):
            raise HwmodelError(f"SLOs must be positive seconds, got ttft {self.ttft_s}, tpot {self.tpot_s}")


class SortedQueue:
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
    rank: ClassVar[int] = 100  # where a built-in stands in listings and the study's comparison (user files: last)
    strict: ClassVar[bool] = True

    def __init__(self, slo: Slo, window: int = 256) -> None:
        if window < 1:
            raise HwmodelError(f"scheduler window must be >= 1 request, got {window}")
        self.slo = slo
        self.window = window
        self._q = SortedQueue()
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
        return len(self._q.items)

    def candidates(self, now_s: float) -> list[ReqState]:
        """Queued requests in the order they are offered to the cluster (just the head if strict)."""
        return self._q.items[: 1 if self.strict else self.window]

    def pick_decoder(self, rs: ReqState, fpgas: Sequence[Device], gpu_nodes: set[int]) -> Device:
        """Among free FPGAs that fit ``rs``: the first (by index) on a node with a free GPU, else the first."""
        node, ok = -1, False
        for f in fpgas:
            if f.node != node:  # devices come node by node: one membership test per node
                node, ok = f.node, f.node in gpu_nodes
            if ok:
                return f
        return fpgas[0]

    def admit_batch_decode(self, g: Device, rs: ReqState) -> bool:
        """May GPU ``g`` take ``rs`` into its decode batch (beyond the batch-size and memory limits)?"""
        return True


#: every scheduler by name: the built-ins (this package's modules, one file each) and user files
REGISTRY: Registry[type[Scheduler]] = Registry("scheduler", "hwmodel.serving.schedulers")


class _Schedulers(Mapping[str, "type[Scheduler]"]):
    """Every registered scheduler by name, built-ins first in their ``rank`` order (a live view)."""

    def __getitem__(self, name: str) -> type[Scheduler]:
        return REGISTRY.get(name)

    def __iter__(self) -> Iterator[str]:
        return iter(scheduler_names())

    def __len__(self) -> int:
        return len(REGISTRY.names())


SCHEDULERS: Mapping[str, type[Scheduler]] = _Schedulers()


def register_scheduler(cls: type[Scheduler]) -> type[Scheduler]:
    """Class decorator: make ``cls`` selectable by its ``name`` (a new scheduler is one file that defines a
    :class:`Scheduler` subclass with this decorator; load it with :func:`load_scheduler_file`)."""
    if not (isinstance(cls, type) and issubclass(cls, Scheduler)) or not cls.name:
        raise HwmodelError(f"{cls!r}: a scheduler is a Scheduler subclass with a non-empty name")
    REGISTRY.register(cls.name, cls, replace=True)
    return cls


def load_scheduler_file(path: str | Path) -> list[str]:
    """Import a Python file that registers schedulers (:func:`hwmodel.registry.load_plugin`, as for every other
    extension kind); returns the names of the schedulers it defines."""
    p = Path(path)
    if not p.is_file():
        raise HwmodelError(f"{p}: expected an existing Python file defining a scheduler")
    REGISTRY.names()  # the built-ins first, so a user file's name clash is seen
    module = load_plugin(p)
    added = sorted(
        c.name
        for c in vars(module).values()
        if isinstance(c, type)
        and issubclass(c, Scheduler)
        and c.name
        and c.name in REGISTRY
        and REGISTRY.get(c.name) is c
    )
    if not added:
        raise HwmodelError(f"{p}: defines no scheduler (a Scheduler subclass decorated with @register_scheduler)")
    return added


def scheduler_names(builtin_only: bool = False) -> list[str]:
    """Registered scheduler names: the built-ins in their ``rank`` order, then user schedulers as registered."""
    items = REGISTRY.items()
    named = [
        (cls.rank, i, name)
        for i, (name, cls) in enumerate(items)
        if not builtin_only or cls.__module__.startswith(__name__ + ".")
    ]
    return [name for _r, _i, name in sorted(named)]


def make_scheduler(name: str, slo: Slo, window: int = 256) -> Scheduler:
    """A registered scheduler by name (built-ins: ``fcfs``, ``spf``, ``memory-aware``, ``slo-aware``)."""
    return REGISTRY.get(name)(slo, window)
