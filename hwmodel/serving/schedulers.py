"""Request schedulers of the serving simulator, selectable by name; one file each (hwmodel/serving/policies/*.py,
or any file loaded with :func:`load_scheduler_file`), registered with :func:`register_scheduler`.

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
import importlib
import importlib.util
from pathlib import Path
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


SCHEDULERS: dict[str, type[Scheduler]] = {}
BUILTIN_POLICIES = ("fcfs", "spf", "memory_aware", "slo_aware")  # modules of hwmodel/serving/policies/


def register_scheduler(cls: type[Scheduler]) -> type[Scheduler]:
    """Class decorator: make ``cls`` selectable by its ``name`` (a new scheduler is one file that defines a
    :class:`Scheduler` subclass with this decorator; load it with :func:`load_scheduler_file`)."""
    if not (isinstance(cls, type) and issubclass(cls, Scheduler)) or not cls.name:
        raise HwmodelError(f"{cls!r}: a scheduler is a Scheduler subclass with a non-empty name")
    SCHEDULERS[cls.name] = cls
    return cls


def load_scheduler_file(path: str | Path) -> list[str]:
    """Import a Python file that registers schedulers; returns the names it added."""
    p = Path(path)
    if not p.is_file():
        raise HwmodelError(f"{p}: expected an existing Python file defining a scheduler")
    before = set(SCHEDULERS)
    spec = importlib.util.spec_from_file_location(f"hwmodel_scheduler_{p.stem}", p)
    if spec is None or spec.loader is None:
        raise HwmodelError(f"{p}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - a user file: report it in one line
        raise HwmodelError(f"{p}: importing the scheduler failed: {type(exc).__name__}: {exc}") from None
    added = sorted(set(SCHEDULERS) - before) or [c.name for c in vars(module).values()
                                                  if isinstance(c, type) and issubclass(c, Scheduler)
                                                  and c.name and SCHEDULERS.get(c.name) is c]
    if not added:
        raise HwmodelError(f"{p}: defines no scheduler (a Scheduler subclass decorated with @register_scheduler)")
    return added


def _load_builtins() -> None:
    for mod in BUILTIN_POLICIES:
        importlib.import_module(f"hwmodel.serving.policies.{mod}")


def scheduler_names() -> list[str]:
    _load_builtins()
    return list(SCHEDULERS)


def make_scheduler(name: str, slo: Slo, window: int = 256) -> Scheduler:
    """A registered scheduler by name (built-ins: ``fcfs``, ``spf``, ``memory-aware``, ``slo-aware``)."""
    _load_builtins()
    if name not in SCHEDULERS:
        raise UnknownNameError("scheduler", name, list(SCHEDULERS))
    return SCHEDULERS[name](slo, window)
