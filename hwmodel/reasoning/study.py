"""`hwmodel reproduce heteroreason`: the system-A study on the built-in traces (docs/reasoning.md).

4 datasets x 2 configurations x every policy; the ablation's policies (baseline, step-ahead, heteroreason) replay
the trace without and with backtracking, the others (re-prefill, edge draft, the T2 sensitivity run) the trace with
backtracking. Work is
split into (dataset, configuration, policy) units run in parallel processes; each unit's per-problem rows are
written as soon as it finishes, and a rerun with ``resume=True`` skips units already written with the same
inputs. The published reference values below appear only in the report, beside the model's results; nothing in
the model reads them.
"""
from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import functools
import hashlib
import json
import math
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hwmodel.reasoning.metrics import CSV_FIELDS, ProblemMetrics, Summary, summarize_all
from hwmodel.reasoning.runner import run_trace
from hwmodel.reasoning.system import MissingDeviceModelError, build_platform, load_system
from hwmodel.report.tables import read_csv, write_csv
from hwmodel.workload.datasets import DATASETS
from hwmodel.workload.generator import DEFAULT_SEED, GENERATOR_VERSION, generate_pair
from hwmodel.workload.trace import Replay, Trace, replay_of

STUDY_VERSION = 1
CONFIGS = ("config1", "config2")
STUDY_POLICIES = ("baseline", "step-ahead", "heteroreason", "heteroreason-reprefill", "edge-draft",
                  "step-ahead-submit")
FIRST_CONFIG_ONLY = ("step-ahead-submit",)  # sensitivity runs: the first configuration only
WITH_BACKTRACKING_ONLY = ("heteroreason-reprefill", "edge-draft", "step-ahead-submit")  # not in the ablation

# Published values (MISSION.md section A) -- for the report only.
PUBLISHED_T2_SPEEDUP_CONFIG1 = (1.25, 1.33)
PUBLISHED_COMM_SHARE_MAX = 0.0123e-2
PUBLISHED_REJECT_RATE_MAX = 0.30
PUBLISHED_EDGE_SLOWDOWN = (5.0, 6.0)


@dataclasses.dataclass(frozen=True)
class Unit:
    dataset: str
    config: str
    policy: str

    @property
    def name(self) -> str:
        return f"{self.dataset}__{self.config}__{self.policy}"


def study_units(datasets: Sequence[str], configs: Sequence[str], policies: Sequence[str]) -> list[Unit]:
    """The (dataset, configuration, policy) units of a study (sensitivity policies on the first configuration)."""
    return [Unit(d, c, p) for d in datasets for c in configs for p in policies
            if c == configs[0] or p not in FIRST_CONFIG_ONLY]


@functools.cache
def study_traces(dataset: str, config: str, seed: int = DEFAULT_SEED, limit: int | None = None
                 ) -> tuple[Trace, Trace]:
    """(without, with backtracking) traces of ``dataset`` for the baseline of ``config`` (memoized per process)."""
    system = load_system(config)
    return generate_pair(dataset, system.target_llm, seed=seed, limit=limit, config=config)


@functools.cache
def study_replays(dataset: str, config: str, seed: int = DEFAULT_SEED, limit: int | None = None
                  ) -> tuple[tuple[Replay, ...], ...]:
    """The step-rule replays of both traces (shared by every policy of a unit, per process)."""
    return tuple(tuple(replay_of(p, t.header) for p in t.problems) for t in study_traces(dataset, config, seed, limit))


def run_unit(unit: Unit, seed: int = DEFAULT_SEED, limit: int | None = None) -> list[ProblemMetrics]:
    platform = build_platform(unit.config, unit.policy)
    rows: list[ProblemMetrics] = []
    traces = study_traces(unit.dataset, unit.config, seed, limit)
    for trace, replays in zip(traces, study_replays(unit.dataset, unit.config, seed, limit)):
        if unit.policy in WITH_BACKTRACKING_ONLY and not trace.header.backtracking:
            continue
        rows += run_trace(trace, unit.policy, platform, unit.config, replays=replays)
    return rows


def fingerprint(seed: int, limit: int | None, configs: Sequence[str]) -> str:
    """Identifies the inputs of a study run: a unit written under another fingerprint is recomputed."""
    h = hashlib.sha256()
    h.update(json.dumps({"study": STUDY_VERSION, "generator": GENERATOR_VERSION, "seed": seed, "limit": limit},
                        sort_keys=True).encode())
    for c in configs:
        h.update(Path(load_system(c).origin).read_bytes())
    return h.hexdigest()[:16]


_TYPES = {f.name: f.type for f in dataclasses.fields(ProblemMetrics)}


def _row_from_csv(d: dict[str, str]) -> ProblemMetrics:
    kw: dict[str, Any] = {}
    for k, t in _TYPES.items():
        v = d[k]
        kw[k] = (v == "True") if t == "bool" else int(v) if t == "int" else float(v) if t == "float" else v
    return ProblemMetrics(**kw)


def _unit_paths(out_dir: Path, unit: Unit) -> tuple[Path, Path]:
    return out_dir / "units" / f"{unit.name}.csv", out_dir / "units" / f"{unit.name}.done"


@dataclasses.dataclass
class StudyResult:
    rows: list[ProblemMetrics]
    summaries: list[Summary]
    wall_s: float
    jobs: int
    resumed_units: int
    skipped: dict[str, str] = dataclasses.field(default_factory=dict)  # policy -> why it could not run


def available_policies(configs: Sequence[str], policies: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """Build every platform once (in this process, before workers fork, so they inherit the engines); a policy
    whose device model this checkout lacks is skipped, with the reason."""
    ok, skipped = [], {}
    for p in policies:
        try:
            for c in configs:
                build_platform(c, p)
        except MissingDeviceModelError as exc:
            skipped[p] = str(exc)
        else:
            ok.append(p)
    return ok, skipped


def _worker_init() -> None:  # keep each worker to one thread of numeric libraries
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
        os.environ.setdefault(var, "1")


def run_study(out_dir: Path, *, datasets: Sequence[str] = DATASETS, configs: Sequence[str] = CONFIGS,
              policies: Sequence[str] = STUDY_POLICIES, seed: int = DEFAULT_SEED, limit: int | None = None,
              jobs: int = 2, resume: bool = False,
              on_unit_done: Callable[[Unit, int], None] | None = None) -> StudyResult:
    """Run every unit (in ``jobs`` processes), write each unit's rows as it finishes, return all rows."""
    t0 = time.perf_counter()
    out_dir = Path(out_dir)
    (out_dir / "units").mkdir(parents=True, exist_ok=True)
    fp = fingerprint(seed, limit, configs)
    policies, skipped = available_policies(configs, policies)
    units = study_units(datasets, configs, policies)
    # biggest first for load balance (problems x relative cost of the policy)
    units.sort(key=lambda u: -len(study_traces(u.dataset, u.config, seed, limit)[0].problems))
    rows_by_unit: dict[Unit, list[ProblemMetrics]] = {}
    todo = []
    resumed = 0
    for u in units:
        csv_path, done_path = _unit_paths(out_dir, u)
        if resume and done_path.is_file() and done_path.read_text().strip() == fp and csv_path.is_file():
            rows_by_unit[u] = [_row_from_csv(d) for d in read_csv(csv_path)]
            resumed += 1
            if on_unit_done:
                on_unit_done(u, len(rows_by_unit[u]))
        else:
            todo.append(u)

    def finish(u: Unit, rows: list[ProblemMetrics]) -> None:
        csv_path, done_path = _unit_paths(out_dir, u)
        write_csv(csv_path, (r.as_row() for r in rows), CSV_FIELDS)
        done_path.write_text(fp + "\n")
        rows_by_unit[u] = rows
        if on_unit_done:
            on_unit_done(u, len(rows))

    if jobs <= 1 or len(todo) <= 1:
        for u in todo:
            finish(u, run_unit(u, seed, limit))
    else:
        with cf.ProcessPoolExecutor(max_workers=jobs, initializer=_worker_init) as pool:
            futures = {pool.submit(run_unit, u, seed, limit): u for u in todo}
            for fut in cf.as_completed(futures):
                finish(futures[fut], fut.result())
    rows = [r for u in units for r in rows_by_unit[u]]
    return StudyResult(rows, summarize_all(rows), time.perf_counter() - t0, jobs, resumed, skipped)


# ------------------------------------------------------------------------------------------------ derived results
def summary_index(summaries: Sequence[Summary]) -> dict[tuple[str, str, str, bool], Summary]:
    return {(s.dataset, s.config, s.policy, s.backtracking): s for s in summaries}


def speedup(idx: dict, dataset: str, config: str, policy: str, backtracking: bool,
            reference: str = "baseline") -> float:
    """Total-latency speedup of ``policy`` over ``reference`` on the same trace."""
    base = idx.get((dataset, config, reference, backtracking))
    pol = idx.get((dataset, config, policy, backtracking))
    if base is None or pol is None:
        return math.nan
    return base.latency_total_s / pol.latency_total_s
