"""`hwmodel reproduce heteroreason`: the system-A study on the built-in traces (docs/reasoning.md).

4 datasets x 2 configurations x every policy; the ablation's policies (baseline, step-ahead, heteroreason) replay
the trace without and with backtracking, the others (re-prefill, edge draft, the T2 sensitivity run) the trace with
backtracking. Beyond the paper, the *draft placements* (:data:`DRAFT_PLACEMENTS`) replay a policy with the draft on
another device of the configuration (the instruction-driven FPGA, a V80 streaming design, an H200), with
backtracking; their rows carry the policy name ``policy@device``.

Work is split into (dataset, configuration, policy[, draft device]) units, the points of the one study runner
(:mod:`hwmodel.studies.runner`): local processes by default (forked, so they inherit the engines this process
built), Dask with ``scheduler``, journaled in ``journal.jsonl`` as each unit finishes; a rerun with
``resume=True`` skips the units already journaled under the same inputs, and the outputs are byte-identical to an
uninterrupted run's. The published reference values below appear only in the report, beside the model's results;
nothing in the model reads them.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hwmodel.reasoning import prefill_plan, warmup
from hwmodel.reasoning.costs import TimedEngine
from hwmodel.reasoning.metrics import CSV_FIELDS, ProblemMetrics, Summary, summarize_all
from hwmodel.reasoning.policies import policy as get_policy
from hwmodel.reasoning.runner import run_trace
from hwmodel.reasoning.system import MissingDeviceModelError, build_platform, load_system
from hwmodel.report.tables import csv_lines, write_csv_text
from hwmodel.studies.runner import journal_results, run_points
from hwmodel.workload.datasets import DATASETS
from hwmodel.workload.generator import DEFAULT_SEED, GENERATOR_VERSION, generate_pair
from hwmodel.workload.trace import Replay, Trace, replay_of

STUDY_VERSION = 4  # 3: fitted backtracking (issue 17) changed the traces; 4: rows journaled as value lists
CONFIGS = ("config1", "config2")
STUDY_POLICIES = ("baseline", "step-ahead", "heteroreason", "heteroreason-reprefill", "edge-draft", "step-ahead-submit")
FIRST_CONFIG_ONLY = ("step-ahead-submit",)  # sensitivity runs: the first configuration only
WITH_BACKTRACKING_ONLY = ("heteroreason-reprefill", "edge-draft", "step-ahead-submit")  # not in the ablation
#: (policy, draft device of the configuration): the draft on devices beyond the paper's (predictions)
DRAFT_PLACEMENTS = (
    ("heteroreason", "fpga-instruction"),
    ("heteroreason", "fpga-v80"),
    ("step-ahead", "h200"),
    ("heteroreason", "fpga-flexllm"),
    ("heteroreason", "fpga-flexllm-300"),
)
#: issue 17: the published-like draft (FlexLLM-derived) at 200 MHz and at the 300 MHz projection
PUBLISHED_LIKE_DRAFTS = ("fpga-flexllm", "fpga-flexllm-300")
#: issue 17: the baseline GPUs with CUDA graphs (vLLM 0.9.2's default) beside RSD's eager mode: configuration ->
#: its -graphs variant, replayed with backtracking under the ablation's policies
GPU_MODE_VARIANTS = {"config1": "config1-graphs", "config2": "config2-graphs"}
GPU_MODE_POLICIES = ("baseline", "step-ahead", "heteroreason")
POINT_FN = "hwmodel.reasoning.study:unit_point"

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
    draft: str | None = None  # a draft device of the configuration other than the policy's own

    @property
    def run_name(self) -> str:
        """The policy as the rows name it: ``policy`` or ``policy@device``."""
        return self.policy if self.draft is None else f"{self.policy}@{self.draft}"

    @property
    def name(self) -> str:
        return f"{self.dataset}__{self.config}__{self.run_name}"

    def spec(self, seed: int, limit: int | None) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "config": self.config,
            "policy": self.policy,
            "draft": self.draft,
            "seed": seed,
            "limit": limit,
        }


def policy_label(run_name: str) -> str:
    """The table label of a row's policy name (``policy`` or ``policy@device``)."""
    pol, _, dev = run_name.partition("@")
    label = get_policy(pol).label
    return f"{label}, draft on {dev}" if dev else label


def study_units(
    datasets: Sequence[str], configs: Sequence[str], policies: Sequence[str], placements: Sequence[tuple[str, str]] = ()
) -> list[Unit]:
    """The units of a study (sensitivity policies on the first configuration; placements on every one)."""
    units = [
        Unit(d, c, p)
        for d in datasets
        for c in configs
        for p in policies
        if c == configs[0] or p not in FIRST_CONFIG_ONLY
    ]
    units += [Unit(d, c, p, dev) for d in datasets for c in configs for p, dev in placements]
    units += [
        Unit(d, GPU_MODE_VARIANTS[c], p)
        for d in datasets
        for c in configs
        if c in GPU_MODE_VARIANTS
        for p in GPU_MODE_POLICIES
        if p in policies
    ]
    return units


def base_config(config: str) -> str:
    """The configuration whose traces ``config`` replays (a -graphs variant replays its base's)."""
    inv = {v: k for k, v in GPU_MODE_VARIANTS.items()}
    return inv.get(config, config)


def study_traces(dataset: str, config: str, seed: int = DEFAULT_SEED, limit: int | None = None) -> tuple[Trace, Trace]:
    """(without, with backtracking) traces of ``dataset`` for the baseline of ``config`` (memoized per process,
    by the base configuration: a -graphs variant gets its base's traces, the same objects, not a second copy)."""
    return _study_traces(dataset, base_config(config), seed, limit)


@functools.cache
def _study_traces(dataset: str, config: str, seed: int, limit: int | None) -> tuple[Trace, Trace]:
    return generate_pair(dataset, load_system(config).target_llm, seed=seed, limit=limit, config=config)


@functools.cache
def study_replays(
    dataset: str, config: str, seed: int = DEFAULT_SEED, limit: int | None = None
) -> tuple[tuple[Replay, ...], ...]:
    """The step-rule replays of both traces (shared by every policy of a unit, per process)."""
    if base_config(config) != config:
        return study_replays(dataset, base_config(config), seed, limit)
    return tuple(tuple(replay_of(p, t.header) for p in t.problems) for t in study_traces(dataset, config, seed, limit))


def unit_traces(
    unit: Unit, seed: int = DEFAULT_SEED, limit: int | None = None
) -> list[tuple[Trace, tuple[Replay, ...]]]:
    """The traces a unit replays, with their replays: both, or only the one with backtracking (the policies and
    placements that need it, and the GPU-mode variants)."""
    only_bt = unit.policy in WITH_BACKTRACKING_ONLY or unit.draft is not None or base_config(unit.config) != unit.config
    pairs = zip(
        study_traces(unit.dataset, unit.config, seed, limit), study_replays(unit.dataset, unit.config, seed, limit)
    )
    return [(t, r) for t, r in pairs if t.header.backtracking or not only_bt]


#: a replay's relative host cost by the policy's kind, for ordering the units only (measured with
#: benchmarks/bench_reasoning.py's event-loop setting, memos warm: ~0.65 ms per replay for a resident draft with its
#: KVMU, ~0.47 ms for T2 on servers, ~0.27 ms for the sequential baseline)
_REPLAY_COST = {"resident": 1.4, "step-ahead": 1.0, "sequential": 0.55}


def unit_cost(unit: Unit, seed: int = DEFAULT_SEED, limit: int | None = None) -> float:
    """The unit's estimated host time, relative (its replays times their policy's relative cost): for scheduling."""
    pol = get_policy(unit.policy)
    kind = "resident" if pol.resident_draft else ("step-ahead" if pol.speculates else "sequential")
    return _REPLAY_COST[kind] * sum(len(t.problems) for t, _ in unit_traces(unit, seed, limit))


def run_unit(unit: Unit, seed: int = DEFAULT_SEED, limit: int | None = None) -> list[ProblemMetrics]:
    platform = build_platform(unit.config, unit.policy, draft=unit.draft)
    rows: list[ProblemMetrics] = []
    for trace, replays in unit_traces(unit, seed, limit):
        rows += run_trace(trace, unit.policy, platform, unit.config, replays=replays)
    if unit.draft is not None:
        rows = [dataclasses.replace(r, policy=unit.run_name) for r in rows]
    return rows


def unit_point(spec: dict[str, Any]) -> list[list[Any]]:
    """The study runner's point function: one unit's per-problem rows, each as its values in field order
    (JSON-serializable; :func:`unit_metrics` reads them back)."""
    unit = Unit(spec["dataset"], spec["config"], spec["policy"], spec.get("draft"))
    return [r.values() for r in run_unit(unit, spec["seed"], spec["limit"])]


def unit_metrics(result: Sequence[Sequence[Any]]) -> list[ProblemMetrics]:
    """The rows of a :func:`unit_point` result (as it comes back from a worker or the journal)."""
    return [ProblemMetrics(*v) for v in result]


def warm_targets(
    units: Sequence[Unit], seed: int = DEFAULT_SEED, limit: int | None = None
) -> list[tuple[TimedEngine, int]]:
    """(timed engine, bound of the contexts its replays reach) of every role of every unit's platform."""
    bounds: dict[tuple[str, str, bool], int] = {}
    out = []
    for u in units:
        pf = build_platform(u.config, u.policy, draft=u.draft)
        b = 0
        for trace, replays in unit_traces(u, seed, limit):
            key = (u.dataset, base_config(u.config), trace.header.backtracking)
            if key not in bounds:
                bounds[key] = warmup.context_bound(trace.problems, replays)
            b = max(b, bounds[key])
        out += [(pf.draft, b), (pf.prm, b), (pf.target, b)]
    return out


def prefill_targets(
    units: Sequence[Unit], seed: int = DEFAULT_SEED, limit: int | None = None
) -> list[tuple[TimedEngine, list[np.ndarray]]]:
    """(timed engine, the packed prefill points its replays may ask for) of every role of every unit's platform
    (:mod:`hwmodel.reasoning.prefill_plan`): a GPU server's requests for the draft and the target, the scoring
    passes for the PRM."""
    points: dict[tuple[str, str, bool], np.ndarray] = {}
    scores: dict[tuple[str, str, bool, int, bool], np.ndarray] = {}
    out = []
    for u in units:
        pf = build_platform(u.config, u.policy, draft=u.draft)
        served, scored = [], []
        for trace, replays in unit_traces(u, seed, limit):
            key = (u.dataset, base_config(u.config), trace.header.backtracking)
            if key not in points:
                points[key] = prefill_plan.candidate_points(trace.problems, replays)
            skey = key + (id(pf.prm), pf.prm_prefix_cache)
            if skey not in scores:
                scores[skey] = prefill_plan.score_points(trace.problems, replays, pf.prm, pf.prm_prefix_cache)
            served.append(points[key])
            scored.append(scores[skey])
        out += [(pf.draft, served), (pf.target, served), (pf.prm, scored)]
    return out


def parent_warm_steps(
    units: Sequence[Unit],
    sampled: Sequence[tuple[TimedEngine, int]],
    seed: int = DEFAULT_SEED,
    limit: int | None = None,
) -> Iterator[object]:
    """What every worker would otherwise compute for itself, computed once in this process, one piece per step
    (run while the samples' workers run, before the study's workers fork and inherit it; values unchanged): the
    planned GPU prefills (:mod:`hwmodel.reasoning.prefill_plan`), the per-phase powers of the ``sampled``
    engines (a token simulated per phase), and the resident drafts' prompt migrations (one per prompt length)."""
    yield from prefill_plan.steps(prefill_targets(units, seed, limit))
    engines = {id(te): te for te, _bound in sampled if warmup.sampled(te) is not None}
    for te in engines.values():
        yield warmup.phase_powers(te)
    for u in units:
        migrate = build_platform(u.config, u.policy, draft=u.draft).prompt_migration  # a resident draft's
        if migrate is not None:
            yield [migrate(p.prompt_tokens) for trace, _ in unit_traces(u, seed, limit) for p in trace.problems]


def fingerprint(seed: int, limit: int | None, configs: Sequence[str]) -> str:
    """Identifies the inputs of a study run: units journaled under another fingerprint are recomputed."""
    h = hashlib.sha256()
    h.update(
        json.dumps(
            {"study": STUDY_VERSION, "generator": GENERATOR_VERSION, "seed": seed, "limit": limit}, sort_keys=True
        ).encode()
    )
    for c in list(configs) + [GPU_MODE_VARIANTS[c] for c in configs if c in GPU_MODE_VARIANTS]:
        h.update(Path(load_system(c).origin).read_bytes())
    return h.hexdigest()[:16]


def _unit_csv(out_dir: Path, unit: Unit) -> Path:
    return out_dir / "units" / f"{unit.name}.csv"


@dataclasses.dataclass
class StudyResult:
    rows: list[ProblemMetrics]
    summaries: list[Summary]
    wall_s: float
    jobs: int
    resumed_units: int
    skipped: dict[str, str] = dataclasses.field(default_factory=dict)  # policy -> why it could not run
    #: each unit's rows as CSV text (no header), in unit order: problems.csv is their concatenation
    unit_csv: list[str] = dataclasses.field(default_factory=list, compare=False, repr=False)


def available_policies(
    configs: Sequence[str], policies: Sequence[str], placements: Sequence[tuple[str, str]] = ()
) -> tuple[list[str], list[tuple[str, str]], dict[str, str]]:
    """Build every platform once (in this process, before workers fork, so they inherit the engines); a policy or
    placement whose device model this checkout lacks is skipped, with the reason."""
    ok, ok_place, skipped = [], [], {}
    for p in policies:
        try:
            for c in list(configs) + [
                GPU_MODE_VARIANTS[c] for c in configs if c in GPU_MODE_VARIANTS and p in GPU_MODE_POLICIES
            ]:
                build_platform(c, p)
        except MissingDeviceModelError as exc:
            skipped[p] = str(exc)
        else:
            ok.append(p)
    for p, dev in placements:
        try:
            for c in configs:
                build_platform(c, p, draft=dev)
        except MissingDeviceModelError as exc:
            skipped[f"{p}@{dev}"] = str(exc)
        else:
            ok_place.append((p, dev))
    return ok, ok_place, skipped


def run_study(
    out_dir: Path,
    *,
    datasets: Sequence[str] = DATASETS,
    configs: Sequence[str] = CONFIGS,
    policies: Sequence[str] = STUDY_POLICIES,
    placements: Sequence[tuple[str, str]] = DRAFT_PLACEMENTS,
    seed: int = DEFAULT_SEED,
    limit: int | None = None,
    jobs: int = 2,
    resume: bool = False,
    scheduler: str | None = None,
    on_unit_done: Callable[[Unit, int], None] | None = None,
    warm_also: Sequence[tuple[TimedEngine, int]] = (),
    while_running: Callable[[Sequence[str]], Iterator[object]] | None = None,
) -> StudyResult:
    """Run every unit on the study runner (``jobs`` local processes, or Dask at ``scheduler``), journal each unit
    as it finishes, write each unit's rows, return all rows (in unit order, however the units were run).

    Before the units run, the cycle-level drafts' samples that the units to run will read -- and those of
    ``warm_also`` ((timed engine, context bound) pairs the caller replays on afterwards, in this process) -- are
    simulated once over ``jobs`` processes (:mod:`hwmodel.reasoning.warmup`); results are unchanged.

    ``while_running(policies)``: the caller's work that needs no unit result (given the policies that run), as
    an iterator of steps, done in this process a step per unit result from the first one back (while the workers
    run the units queued ahead), the rest after the last."""
    t0 = time.perf_counter()
    out_dir = Path(out_dir)
    (out_dir / "units").mkdir(parents=True, exist_ok=True)
    fp = fingerprint(seed, limit, configs)
    policies, placements, skipped = available_policies(configs, policies, placements)
    units = study_units(datasets, configs, policies, placements)
    journaled = set(journal_results(out_dir / "journal.jsonl", fp)) if resume else set()
    todo = [] if scheduler is not None else [u for u in units if u.name not in journaled]  # Dask forks nothing
    sampled = warm_targets(todo, seed, limit) + list(warm_also)
    warmup.warm(sampled, jobs, side=parent_warm_steps(todo, sampled, seed, limit))
    # the outputs' unit order (biggest trace first; problems.csv concatenates the units in this order)
    units.sort(key=lambda u: -len(study_traces(u.dataset, u.config, seed, limit)[0].problems))
    by_name = {u.name: u for u in units}
    # the order the workers take them: longest first (estimated), so neither worker is left with a long unit alone
    # at the end; the outputs do not depend on it
    run_order = sorted(units, key=lambda u: -unit_cost(u, seed, limit))

    rows_by_unit: dict[str, list[ProblemMetrics]] = {}
    bodies: dict[str, str] = {}
    steps: Iterator[object] | None = None

    def side_work() -> None:
        nonlocal steps
        if steps is None:
            steps = while_running(policies) if while_running is not None else iter(())
        next(steps, None)

    def done(key: str, rows: list[list[Any]]) -> None:
        # each unit's rows and CSV as it finishes, while the workers run the others (formatted once: problems.csv
        # reuses the text)
        metrics = rows_by_unit[key] = unit_metrics(rows)
        bodies[key] = csv_lines(r.csv_values() for r in metrics)
        write_csv_text(_unit_csv(out_dir, by_name[key]), CSV_FIELDS, [bodies[key]])
        if on_unit_done:
            on_unit_done(by_name[key], len(rows))
        side_work()

    run = run_points(
        POINT_FN,
        [(u.name, u.spec(seed, limit)) for u in run_order],
        journal=out_dir / "journal.jsonl",
        fingerprint=fp,
        workers=max(1, jobs),
        scheduler=scheduler,
        chunk_size=1,
        start_method="fork",
        fresh=not resume,
        on_result=done,
    )
    side_work()  # no unit ran (every policy skipped)
    for _ in steps or ():
        pass
    rows = [r for u in units for r in rows_by_unit[u.name]]
    return StudyResult(
        rows,
        summarize_all(rows),
        time.perf_counter() - t0,
        run.workers,
        run.resumed,
        skipped,
        unit_csv=[bodies[u.name] for u in units],
    )


# ------------------------------------------------------------------------------------------------ derived results
def summary_index(summaries: Sequence[Summary]) -> dict[tuple[str, str, str, bool], Summary]:
    return {(s.dataset, s.config, s.policy, s.backtracking): s for s in summaries}


def speedup(
    idx: dict, dataset: str, config: str, policy: str, backtracking: bool, reference: str = "baseline"
) -> float:
    """Total-latency speedup of ``policy`` over ``reference`` on the same trace."""
    base = idx.get((dataset, config, reference, backtracking))
    pol = idx.get((dataset, config, policy, backtracking))
    if base is None or pol is None:
        return math.nan
    return base.latency_total_s / pol.latency_total_s
