"""What runs inside a worker (a local process or a Dask worker): evaluate a chunk of points.

Kept small and free of heavy imports: it is preloaded by the local process pool's fork server and pickled by
reference for Dask. The evaluator is resolved from its reference inside the worker (cached per process).
"""

from __future__ import annotations

import gc
import traceback
from collections.abc import Iterator
from contextlib import contextmanager

from hwmodel.dse.evaluators import Evaluator, resolve
from hwmodel.dse.space import Params
from hwmodel.errors import HwmodelError

ChunkResult = list[tuple[str, str, dict[str, float], str]]
"""Per point: (point id, status "ok" | "invalid", metrics, message)."""


class EvaluatorFailed(HwmodelError):
    """An evaluator raised an unexpected exception (a bug in it, not a property of the design point)."""


@contextmanager
def collector_running() -> Iterator[None]:
    """The cyclic garbage collector on (as it is outside a chunk), e.g. for an evaluator's reference path."""
    if gc.isenabled():
        yield
        return
    gc.enable()
    try:
        yield
    finally:
        gc.disable()


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off while a chunk is evaluated: compiling a token program allocates tens of
    thousands of small containers, and the collections they trigger rescan every long-lived object of the worker
    (its memoized programs included), which cost as much as the compilation itself. The chunk's garbage is
    reclaimed by reference counting as it goes, and any cycles once the collector runs again after the chunk."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def evaluate_chunk(evaluator_ref: str, points: list[tuple[str, Params]]) -> ChunkResult:
    """Evaluate ``points`` (id, params) in order. A HwmodelError marks that point ``invalid`` with its message;
    any other exception stops the chunk as an EvaluatorFailed naming the point and the traceback's last lines."""
    with collector_paused():
        return _evaluate(resolve(evaluator_ref), points)


def _evaluate(ev: Evaluator, points: list[tuple[str, Params]]) -> ChunkResult:
    out: ChunkResult = []
    for pid, params in points:
        try:
            out.append((pid, "ok", ev.run(params), ""))
        except HwmodelError as exc:
            out.append((pid, "invalid", {}, str(exc).replace("\n", " ")))
        except Exception as exc:  # noqa: BLE001 - reported with the point that triggered it
            tb = "".join(traceback.format_exception(exc)[-3:]).strip().replace("\n", " | ")
            raise EvaluatorFailed(
                f"evaluator '{ev.name}' raised {type(exc).__name__}: {exc} at point {params} [{tb}]"
            ) from None
    return out
