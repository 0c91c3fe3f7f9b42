"""The Python API of system A (:mod:`hwmodel.api`, re-exported as ``hw.*``): reasoning traces and their replay
under a policy on a system."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from hwmodel.api.progress import ProgressBar
from hwmodel.errors import HwmodelError
from hwmodel.io import jsonable


def generate_trace(
    dataset: str,
    target: str = "qwen2.5-math-7b",
    backtracking: bool = True,
    *,
    limit: int | None = None,
    seed: int | None = None,
) -> Any:
    """A reasoning trace of ``dataset`` (math500, gsm8k, gaokao2023en, olympiadbench) (``workload generate``)."""
    from hwmodel.workload.generator import DEFAULT_SEED, generate

    return generate(dataset, target, backtracking, seed=DEFAULT_SEED if seed is None else seed, limit=limit)


def read_trace(path: str | Path) -> Any:
    """A trace file (JSONL, optionally gzipped), validated line by line."""
    from hwmodel.workload.traceio import read_trace as _read

    return _read(Path(path))


@dataclasses.dataclass(frozen=True)
class Replay:
    """A trace replayed under one policy on one system: per-problem metrics and their summary."""

    policy: str
    system: str
    rows: tuple[Any, ...]
    summary: Any

    def records(self) -> list[dict[str, Any]]:
        return [jsonable(r) for r in self.rows]

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "system": self.system,
            "summary": jsonable(self.summary),
            "problems": len(self.rows),
        }


def replay(
    trace: Any,
    policy: str = "heteroreason",
    system: Any = "config1",
    draft: str | None = None,
    *,
    seeds: int | None = None,
    first_seed: int | None = None,
    limit: int | None = None,
    backtracking: bool = True,
    progress: bool | None = None,
) -> Any:
    """Replay ``trace`` (a Trace or a path) with a system-A policy (``hwmodel reason policies``) on a built-in
    system, a system TOML or a spec from :func:`system`; ``draft`` names another device of the system for the draft
    role.

    With ``seeds=N``, ``trace`` is a dataset name (math500, gsm8k, gaokao2023en, olympiadbench): ``N`` traces of
    ``limit`` problems are generated (seeds ``first_seed ..``) and replayed, and the result is a
    :class:`hwmodel.replicas.Replicas` (``summary[metric]``: mean and 95 % interval; ``markdown``, ``plot``).
    ``progress`` shows a bar (per problem, or per seed; default: in a notebook only)."""
    from hwmodel.reasoning.metrics import summarize
    from hwmodel.reasoning.runner import run_trace
    from hwmodel.reasoning.system import build_platform, load_system

    if seeds is not None:
        from hwmodel.reasoning.replicas import run_seeds

        if not isinstance(trace, str):
            raise HwmodelError("replay(..., seeds=N) takes a dataset name as trace (each seed generates its trace)")
        bar = ProgressBar(progress, seeds, f"replaying {seeds} traces of {trace}")
        try:
            return run_seeds(
                trace,
                policy,
                system,
                seeds,
                first_seed=first_seed,
                limit=limit,
                draft=draft,
                backtracking=backtracking,
                on_seed=lambda _s: bar.advance(),
            )
        finally:
            bar.close()
    if isinstance(trace, (str, Path)):
        trace = read_trace(trace)
    spec = load_system(system) if isinstance(system, (str, Path)) else system
    platform = build_platform(spec, policy, draft=draft)
    bar = ProgressBar(progress, len(trace.problems), f"replaying {len(trace.problems)} problems")
    try:
        rows = tuple(run_trace(trace, policy, platform, spec.name, progress=bar.advance))
    finally:
        bar.close()
    return Replay(policy, spec.name, rows, summarize(rows))
