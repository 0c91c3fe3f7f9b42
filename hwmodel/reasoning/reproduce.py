"""The whole system-A reproduction in one call (what `hwmodel reproduce heteroreason` runs)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from hwmodel.reasoning import fidelity
from hwmodel.reasoning.breakeven import DESIGN_POINTS, run_breakeven
from hwmodel.reasoning.breakeven import warm_targets as breakeven_warm_targets
from hwmodel.reasoning.report import (
    pick_timeline_problem,
    render_report,
    write_ablation_plot,
    write_tables,
    write_timeline,
    write_traces,
)
from hwmodel.reasoning.study import (
    CONFIGS,
    DRAFT_PLACEMENTS,
    STUDY_POLICIES,
    StudyResult,
    Unit,
    run_study,
    study_traces,
)
from hwmodel.reasoning.system import MissingDeviceModelError, build_platform
from hwmodel.workload.datasets import DATASETS
from hwmodel.workload.generator import DEFAULT_SEED

TIMELINE_POLICIES = ("baseline", "step-ahead", "heteroreason")
BREAKEVEN_LIMIT = 25  # problems per dataset of the break-even study (hwmodel/reasoning/breakeven.py)
BREAKEVEN_DESIGNS = DESIGN_POINTS


def reproduce_heteroreason(
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
) -> tuple[StudyResult, Path]:
    """Run the study and write every output under ``out_dir``; returns the result and the report's path. Every
    output but ``run.json`` (run time, workers, resumed units) is byte-identical however the study ran."""
    out_dir = Path(out_dir)
    be_limit = min(limit, BREAKEVEN_LIMIT) if limit else BREAKEVEN_LIMIT
    be_args = dict(
        config=configs[0], datasets=datasets, seed=seed, limit=be_limit, designs=BREAKEVEN_DESIGNS, build=build_platform
    )
    try:  # the break-even study's cycle-level drafts: their samples are simulated with the study's (in parallel)
        be_warm = (
            breakeven_warm_targets(**be_args, bound_limit=limit)
            if "heteroreason" in policies and "step-ahead" in policies
            else []
        )
    except MissingDeviceModelError:
        be_warm = []  # the study skips the policy and says why; the break-even study does not run
    side: dict[str, Any] = {}

    def independent(ran: Sequence[str]) -> Iterator[None]:
        """What needs no replay of the study, in steps: done while the study's workers run."""
        write_traces(out_dir, datasets, configs, seed, limit)
        yield
        side["fits"] = fidelity.accuracy_fits(datasets, configs, seed, limit)
        side["be"] = None
        yield
        if "heteroreason" in ran and "step-ahead" in ran:
            side["be"] = run_breakeven(**be_args)
            fidelity.write_breakeven(out_dir, side["be"])

    result = run_study(
        out_dir,
        datasets=datasets,
        configs=configs,
        policies=policies,
        placements=placements,
        seed=seed,
        limit=limit,
        jobs=jobs,
        resume=resume,
        scheduler=scheduler,
        on_unit_done=on_unit_done,
        warm_also=be_warm,
        while_running=independent,
    )
    write_tables(out_dir, result)
    write_ablation_plot(out_dir, result, datasets, configs)
    # the timeline: a short MATH500 problem (config 1, with backtracking) that has a reject and a backtrack
    ds = "math500" if "math500" in datasets else datasets[0]
    trace = study_traces(ds, configs[0], seed, limit)[1]
    problem = pick_timeline_problem(trace)
    timelines = []
    ran = [p for p in policies if p not in result.skipped]
    for pol in TIMELINE_POLICIES:
        if pol in ran:
            name = f"timeline_{ds}_{problem.id}_{pol}.json"
            write_timeline(out_dir / name, problem, trace, pol, build_platform(configs[0], pol))
            timelines.append(name)
    platforms = {p: build_platform(configs[0], p).description for p in ran}
    report = render_report(result, datasets, configs, seed, limit, platforms, timelines)
    # issue 17: the fitted accuracy gains, backtracking costs, both waste metrics, both drafts, both GPU modes and
    # the T1 break-even study
    fits, be = side["fits"], side["be"]
    extra = "\n".join(fidelity.render(result, datasets, configs, seed, limit, fits, be)) + "\n"
    report = report.replace("## Files", extra + "## Files", 1)  # the issue-17 sections before the file list
    path = out_dir / "report.md"
    path.write_text(report, encoding="utf-8")
    (out_dir / "summary.json").write_text(json.dumps([s.as_row() for s in result.summaries], indent=1))
    (out_dir / "run.json").write_text(
        json.dumps(
            {
                "wall_s": result.wall_s,
                "workers": result.jobs,
                "resumed_units": result.resumed_units,
                "skipped": result.skipped,
            },
            indent=1,
        )
        + "\n"
    )
    return result, path
