"""Metrics of system A per problem and per dataset (MISSION.md section A, "Metrics"; docs/reasoning.md).

* latency: from the first operation of a problem to its last commit (s); the problem occupies the system a little
  longer when a stopped forward pass ends after the commit (its *span*, the window energy is integrated over);
* goodput: committed tokens (the final answer's steps) / latency;
* energy: every device's power over the whole problem, idle included; energy per committed token;
* speculation-stall ratio: time the draft device sits idle waiting for a verdict / latency;
* communication share: time spent moving tokens, verdicts and the KV cache over links / latency (every transfer
  counted, on the critical path or not, so it is an upper bound of what communication costs);
* discarded step-ahead work: tokens the draft speculated and the target prefetched that were never used, and the
  energy of the device activity that produced them (broad: ``discarded_*``); and the paper's narrower metric,
  step-ahead work a PRM rejection invalidated, cached prefetch excluded (``invalidated_*``,
  :mod:`hwmodel.reasoning.waste`);
* per-device utilization: busy time / span;
* accuracy: carried by the trace.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence

from hwmodel.reasoning.sim import ProblemOutcome
from hwmodel.workload.trace import Problem

ROLE_ORDER = ("draft", "prm", "target")


@dataclasses.dataclass(frozen=True, slots=True)
class ProblemMetrics:
    dataset: str
    problem: str
    config: str
    policy: str
    backtracking: bool
    latency_s: float
    span_s: float
    committed_tokens: int
    goodput_tokens_per_s: float
    energy_j: float
    energy_per_token_j: float
    stall_s: float
    stall_ratio: float
    comm_s: float
    comm_share: float
    discarded_draft_tokens: int
    discarded_target_tokens: int
    discarded_energy_j: float
    reused_target_tokens: int
    busy_draft_s: float
    busy_prm_s: float
    busy_target_s: float
    energy_draft_j: float
    energy_prm_j: float
    energy_target_j: float
    correct: bool
    attempts: int
    rejects: int
    backtracks: int
    invalidated_draft_tokens: int = 0
    invalidated_target_tokens: int = 0
    invalidated_energy_j: float = 0.0

    @property
    def util_draft(self) -> float:
        return self.busy_draft_s / self.span_s

    @property
    def util_prm(self) -> float:
        return self.busy_prm_s / self.span_s

    @property
    def util_target(self) -> float:
        return self.busy_target_s / self.span_s

    def as_dict(self) -> dict[str, object]:
        """The fields by name, in order: ``dataclasses.asdict(self)`` (every field is a scalar, so nothing needs the
        deep copy ``asdict`` makes; a full reproduction converts ~95,000 rows, where that copy cost seconds)."""
        return {f: getattr(self, f) for f in METRIC_FIELDS}

    def values(self) -> list[object]:
        """The fields' values in :data:`METRIC_FIELDS` order: ``ProblemMetrics(*m.values()) == m`` (a study unit's
        rows travel and are journaled as these lists: a third of the JSON of dicts, and no key sorting)."""
        return [getattr(self, f) for f in METRIC_FIELDS]

    def as_row(self) -> dict[str, object]:
        row = self.as_dict()
        row.update(util_draft=self.util_draft, util_prm=self.util_prm, util_target=self.util_target)
        return row

    def csv_values(self) -> list[object]:
        """The row's values in :data:`CSV_FIELDS` order (what :meth:`as_row` holds, without building the dict)."""
        return self.values() + [self.util_draft, self.util_prm, self.util_target]


METRIC_FIELDS = tuple(f.name for f in dataclasses.fields(ProblemMetrics))
CSV_FIELDS = list(METRIC_FIELDS) + ["util_draft", "util_prm", "util_target"]


def problem_metrics(
    problem: Problem,
    outcome: ProblemOutcome,
    *,
    config: str,
    policy: str,
    backtracking: bool,
    rejects: int,
    backtracks: int,
) -> ProblemMetrics:
    lat = outcome.latency_s
    comm_s = outcome.comm_s
    e = {r: outcome.devices[r].energy_j(outcome.span_s) for r in ROLE_ORDER}
    total = math.fsum(e.values())
    tokens = outcome.committed_tokens
    return ProblemMetrics(
        dataset=problem.dataset,
        problem=problem.id,
        config=config,
        policy=policy,
        backtracking=backtracking,
        latency_s=lat,
        span_s=outcome.span_s,
        committed_tokens=tokens,
        goodput_tokens_per_s=tokens / lat,
        energy_j=total,
        energy_per_token_j=total / tokens,
        stall_s=outcome.stall_s,
        stall_ratio=outcome.stall_s / lat,
        comm_s=comm_s,
        comm_share=comm_s / lat,
        discarded_draft_tokens=outcome.discarded_draft_tokens,
        discarded_target_tokens=outcome.discarded_target_tokens,
        discarded_energy_j=outcome.discarded_energy_j,
        reused_target_tokens=outcome.reused_target_tokens,
        busy_draft_s=outcome.devices["draft"].busy_s,
        busy_prm_s=outcome.devices["prm"].busy_s,
        busy_target_s=outcome.devices["target"].busy_s,
        energy_draft_j=e["draft"],
        energy_prm_j=e["prm"],
        energy_target_j=e["target"],
        correct=problem.correct,
        attempts=len(problem.attempts),
        rejects=rejects,
        backtracks=backtracks,
        invalidated_draft_tokens=outcome.invalidated_draft_tokens,
        invalidated_target_tokens=outcome.invalidated_target_tokens,
        invalidated_energy_j=outcome.invalidated_energy_j,
    )


@dataclasses.dataclass(frozen=True)
class Summary:
    """Per (dataset, config, policy, backtracking): totals over the problems, so ratios weight long problems more."""

    dataset: str
    config: str
    policy: str
    backtracking: bool
    problems: int
    latency_mean_s: float
    latency_total_s: float
    goodput_tokens_per_s: float
    energy_per_token_j: float
    energy_total_j: float
    stall_ratio: float
    comm_share: float
    discarded_energy_share: float
    discarded_draft_tokens: int
    discarded_target_tokens: int
    reused_target_tokens: int
    util_draft: float
    util_prm: float
    util_target: float
    accuracy: float
    invalidated_energy_share: float = 0.0  # the paper's waste metric (hwmodel/reasoning/waste.py)
    invalidated_draft_tokens: int = 0
    invalidated_target_tokens: int = 0
    backtracks: int = 0

    def as_row(self) -> dict[str, object]:
        return dataclasses.asdict(self)


def summarize(rows: Sequence[ProblemMetrics]) -> Summary:
    """Aggregate one group of problem metrics (all rows share dataset, config, policy and backtracking)."""
    if not rows:
        raise ValueError("no rows to summarize")
    r0 = rows[0]
    lat = math.fsum(r.latency_s for r in rows)
    span = math.fsum(r.span_s for r in rows)
    tok = sum(r.committed_tokens for r in rows)
    en = math.fsum(r.energy_j for r in rows)
    return Summary(
        dataset=r0.dataset,
        config=r0.config,
        policy=r0.policy,
        backtracking=r0.backtracking,
        problems=len(rows),
        latency_mean_s=lat / len(rows),
        latency_total_s=lat,
        goodput_tokens_per_s=tok / lat,
        energy_per_token_j=en / tok,
        energy_total_j=en,
        stall_ratio=math.fsum(r.stall_s for r in rows) / lat,
        comm_share=math.fsum(r.comm_s for r in rows) / lat,
        discarded_energy_share=math.fsum(r.discarded_energy_j for r in rows) / en,
        discarded_draft_tokens=sum(r.discarded_draft_tokens for r in rows),
        discarded_target_tokens=sum(r.discarded_target_tokens for r in rows),
        reused_target_tokens=sum(r.reused_target_tokens for r in rows),
        util_draft=math.fsum(r.busy_draft_s for r in rows) / span,
        util_prm=math.fsum(r.busy_prm_s for r in rows) / span,
        util_target=math.fsum(r.busy_target_s for r in rows) / span,
        accuracy=sum(r.correct for r in rows) / len(rows),
        invalidated_energy_share=math.fsum(r.invalidated_energy_j for r in rows) / en,
        invalidated_draft_tokens=sum(r.invalidated_draft_tokens for r in rows),
        invalidated_target_tokens=sum(r.invalidated_target_tokens for r in rows),
        backtracks=sum(r.backtracks for r in rows),
    )


def summarize_all(rows: Iterable[ProblemMetrics]) -> list[Summary]:
    groups: dict[tuple[str, str, str, bool], list[ProblemMetrics]] = {}
    for r in rows:
        groups.setdefault((r.dataset, r.config, r.policy, r.backtracking), []).append(r)
    return [summarize(g) for _k, g in sorted(groups.items())]
