"""System-A replay speed: problems simulated per host second, per policy, and the engine shortcuts of the replay
against their references in the same process.

    python benchmarks/bench_reasoning.py [--dataset math500] [--config config1] [--limit 500]

Figures:
* per policy, problems replayed per host second on the built-in trace (with backtracking): *cold* (fresh engine
  memos: the device models are evaluated as the replay asks) and *warm* (memos filled: the discrete-event replay
  alone); the ratio to the baseline policy's warm rate;
* cold replays of every dataset (baseline and step-ahead) with the GPU prefills in vectorized blocks vs one
  ``prefill_cost`` call per (tokens, context) pair (the reference), and whether both give the same latencies;
* FPGA draft per-token times: sampled every 16 contexts (the reproduction's setting) vs simulating every
  context (the reference), over contexts 0..511, and the largest relative difference.
* the replay's event loop: every study unit's replays (the first ``--loop-limit`` problems per dataset, memos
  warm) on the lean loop (hwmodel/reasoning/events.py) and on SimPy, its reference twin, back to back in one
  process (CPU time, best of two), and whether both give the same rows;
* with ``--full``: the full ``hwmodel reproduce heteroreason`` (2 workers) in a child process: wall time, CPU
  time of the whole process tree, and the load average around it (issue 30's target: 30 s on 2 quiet cores),
  twice back to back: the drafts' samples simulated, then read from the sample cache the first run filled, with
  the ratio and whether the outputs are byte-identical;
* with ``--against DIR`` (another checkout, e.g. the main branch): the same two runs of that checkout's code and of
  this one back to back (old then new, samples simulated then from disk, each checkout its own sample cache), the
  CPU ratio of their process trees (what to compare on a loaded machine) and whether their outputs are
  byte-identical (run.json and the journal excepted).
Timings on a shared machine are noisy; best of three where it is cheap.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from hwmodel.reasoning import system as system_mod  # noqa: E402
from hwmodel.reasoning.costs import TimedEngine  # noqa: E402
from hwmodel.reasoning.policies import POLICIES  # noqa: E402
from hwmodel.reasoning.runner import run_trace  # noqa: E402
from hwmodel.reasoning.study import study_traces  # noqa: E402
from hwmodel.reasoning.system import MissingDeviceModelError, build_platform  # noqa: E402
from hwmodel.sampled import ContextSampledEngine  # noqa: E402


def _fresh_engines() -> None:
    system_mod.clear_engine_memo()


def bench_policies(dataset: str, config: str, limit: int | None) -> None:
    trace = study_traces(dataset, config, limit=limit)[1]
    n = len(trace.problems)
    print(f"replay of {n} {dataset} problems ({config}, with backtracking)")
    print(f"{'policy':26s} {'cold problems/s':>16s} {'warm problems/s':>16s} {'warm vs baseline':>17s}")
    base_warm = None
    for name in POLICIES:
        _fresh_engines()
        try:
            t0 = time.perf_counter()
            pf = build_platform(config, name)
            run_trace(trace, name, pf, config)
            cold = time.perf_counter() - t0
        except MissingDeviceModelError as exc:
            print(f"{name:26s} skipped: {exc}")
            continue
        warm = min(_timed(lambda: run_trace(trace, name, pf, config)) for _ in range(3))
        base_warm = warm if name == "baseline" else base_warm
        ratio = f"{base_warm / warm:.2f}x" if base_warm else "-"
        print(f"{name:26s} {n / cold:16.0f} {n / warm:16.0f} {ratio:>17s}")


def _timed(fn) -> float:  # noqa: ANN001
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def bench_gpu_prefill(config: str, limit: int | None) -> None:
    """Cold replays of every dataset (baseline and step-ahead, both trace variants) with the GPU prefills computed
    one ``prefill_cost`` call per (tokens, context) pair (the reference), in vectorized blocks on demand, and
    planned from the traces ahead (hwmodel/reasoning/prefill_plan.py, the plan's own time included)."""
    from hwmodel.reasoning import prefill_plan
    from hwmodel.reasoning.platform import Platform
    from hwmodel.workload.datasets import DATASETS
    from hwmodel.workload.trace import replay_of

    traces = [t for d in DATASETS for t in study_traces(d, config, limit=limit)]
    n = sum(len(t.problems) for t in traces) * 2
    out = {}
    for mode in ("pair", "blocks", "planned"):
        _fresh_engines()
        t0 = time.process_time()
        lat = 0.0
        for name in ("baseline", "step-ahead"):
            pf = build_platform(config, name)
            fresh = {
                r: TimedEngine(getattr(pf, r).engine, vector_blocks=mode != "pair") for r in ("draft", "prm", "target")
            }
            pf = Platform(**{**pf.__dict__, **fresh})
            if mode == "planned":
                served, scored = [], []
                for t in traces:
                    replays = [replay_of(p, t.header) for p in t.problems]
                    served.append(prefill_plan.candidate_points(t.problems, replays))
                    scored.append(prefill_plan.score_points(t.problems, replays, pf.prm, pf.prm_prefix_cache))
                prefill_plan.warm([(pf.draft, served), (pf.target, served), (pf.prm, scored)])
            lat += sum(r.latency_s for t in traces for r in run_trace(t, name, pf, config))
        out[mode] = (time.process_time() - t0, lat)
    (t_ref, lat_ref), (t_blk, lat_blk), (t_plan, lat_plan) = out["pair"], out["blocks"], out["planned"]
    print(
        f"cold replays of {n} problems, GPU prefills one call per pair (reference): {n / t_ref:.0f} problems per "
        f"CPU second; in vectorized blocks on demand: {n / t_blk:.0f} ({t_ref / t_blk:.2f}x); planned from the "
        f"traces: {n / t_plan:.0f} ({t_ref / t_plan:.2f}x); same latencies: {lat_ref == lat_blk == lat_plan}"
    )


def bench_fpga_sampling(config: str) -> None:
    from fpga.streaming import engine as streaming
    from hwmodel.backends.streaming import DEFAULT_CTX_GRID
    from hwmodel.reasoning.policies import policy

    dev = system_mod.load_system(config).device(policy("heteroreason").draft_device)
    exact = streaming.StreamingEngine(streaming.load_design(dev.design), clock_hz=dev.clock_hz)
    ctxs = range(0, 512)
    t_ref = _timed(lambda: [exact.decode_s(c) for c in ctxs])
    grid = dev.ctx_grid or DEFAULT_CTX_GRID
    sampled = ContextSampledEngine(
        streaming.StreamingEngine(streaming.load_design(dev.design), clock_hz=dev.clock_hz), grid=grid
    )
    t_fast = _timed(lambda: [sampled.decode_s(c) for c in ctxs])
    err = max(abs(sampled.decode_s(c) - exact.decode_s(c)) / exact.decode_s(c) for c in ctxs)
    print(
        f"FPGA decode_s over contexts 0..511: {len(ctxs) / t_ref:.1f}/s every context simulated (reference), "
        f"{len(ctxs) / t_fast:.0f}/s sampled every {grid} ({t_ref / t_fast:.0f}x), max relative difference "
        f"{err:.2e}"
    )


def bench_event_loops(limit: int) -> None:
    """Every study unit's replays on the lean event loop and on SimPy (module docstring)."""
    from hwmodel.reasoning import warmup
    from hwmodel.reasoning.study import (
        CONFIGS,
        DRAFT_PLACEMENTS,
        STUDY_POLICIES,
        available_policies,
        parent_warm_steps,
        study_units,
        unit_traces,
        warm_targets,
    )
    from hwmodel.workload.datasets import DATASETS

    pols, places, _ = available_policies(CONFIGS, STUDY_POLICIES, DRAFT_PLACEMENTS)
    units = study_units(DATASETS, CONFIGS, pols, places)
    sampled = warm_targets(units, limit=limit)
    warmup.warm(sampled, 1, side=parent_warm_steps(units, sampled, limit=limit))
    work = [(u, build_platform(u.config, u.policy, draft=u.draft), unit_traces(u, limit=limit)) for u in units]

    def replay_all(loop: str) -> list:
        return [
            r
            for u, pf, pairs in work
            for trace, replays in pairs
            for r in run_trace(trace, u.policy, pf, u.config, replays=replays, event_loop=loop)
        ]

    replay_all("lean")  # fills every engine memo the replays read
    cpu: dict[str, float] = {}
    rows: dict[str, list] = {}
    for _ in range(2):
        for loop in ("simpy", "lean"):
            t0 = time.process_time()
            rows[loop] = replay_all(loop)
            cpu[loop] = min(cpu.get(loop, math.inf), time.process_time() - t0)
    n = len(rows["lean"])
    print(
        f"replays of every study unit, first {limit} problems per dataset ({n} replays, memos warm): SimPy "
        f"(reference) {1e3 * cpu['simpy'] / n:.3f} ms/replay, lean event loop {1e3 * cpu['lean'] / n:.3f} "
        f"({cpu['simpy'] / cpu['lean']:.2f}x less CPU); same rows: {rows['lean'] == rows['simpy']}"
    )


def bench_full_reproduction(jobs: int = 2, against: Path | None = None) -> None:
    """The whole system-A reproduction as a user runs it, in a child process (fresh engines, nothing memoized),
    twice back to back: the cycle-level drafts' samples simulated (an empty sample cache,
    hwmodel/reasoning/sample_cache.py), then read from the cache the first run filled; both outputs compared."""
    import tempfile

    here = Path(__file__).resolve().parents[1]
    trees = {"old": against.resolve(), "new": here} if against is not None else {"": here}
    with tempfile.TemporaryDirectory() as samples, tempfile.TemporaryDirectory() as out:
        runs: dict[tuple[str, str], tuple[float, float, float, float, float]] = {}
        for what in ("samples simulated", "samples from disk"):
            for name, tree in trees.items():
                where = Path(out) / f"{name}-{what.replace(' ', '-')}"
                runs[(name, what)] = r = _time_reproduction(jobs, where, str(Path(samples) / name), tree)
                wall, user, sys_s, load0, load1 = r
                print(
                    f"full reproduction (hwmodel reproduce heteroreason --jobs {jobs}){f' [{name}: {tree}]' * bool(name)}"
                    f", {what}: {wall:.1f} s wall, {user:.1f} s user + {sys_s:.1f} s system CPU (parent and "
                    f"workers); load average {load0:.2f} before, {load1:.2f} after"
                )
        for name in trees:
            ra, rb = runs[(name, "samples simulated")], runs[(name, "samples from disk")]
            same, n = _same_outputs(Path(out) / f"{name}-samples-simulated", Path(out) / f"{name}-samples-from-disk")
            print(
                f"  {name + ': ' if name else ''}from disk vs simulated: {ra[0] / rb[0]:.2f}x wall, "
                f"{_cpu(ra) / _cpu(rb):.2f}x CPU; {n} output files {'byte-identical' if same else 'DIFFERENT'}"
            )
        if against is not None:
            for what in ("samples simulated", "samples from disk"):
                old, new = runs[("old", what)], runs[("new", what)]
                w = what.replace(" ", "-")
                same, n = _same_outputs(Path(out) / f"old-{w}", Path(out) / f"new-{w}")
                print(
                    f"  new vs old, {what}: {_cpu(old) / _cpu(new):.2f}x less CPU ({_cpu(old):.1f} -> "
                    f"{_cpu(new):.1f} s), {old[0] / new[0]:.2f}x wall; {n} output files "
                    f"{'byte-identical' if same else 'DIFFERENT'}"
                )


def _cpu(run: tuple[float, float, float, float, float]) -> float:
    return run[1] + run[2]


def _same_outputs(a: Path, b: Path) -> tuple[bool, int]:
    """Whether two reproductions' output trees are byte-identical (run.json and the journal excepted: they record
    the run itself), and how many files were compared."""
    import filecmp

    a, b = a / "heteroreason", b / "heteroreason"
    names = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    names = [n for n in names if n.name not in ("run.json", "journal.jsonl")]
    same = all((b / n).is_file() and filecmp.cmp(a / n, b / n, shallow=False) for n in names)
    same = same and len(names) == sum(
        1 for p in b.rglob("*") if p.is_file() and p.name not in ("run.json", "journal.jsonl")
    )
    return same, len(names)


def _time_reproduction(
    jobs: int, out: Path, samples: str, tree: Path | None = None
) -> tuple[float, float, float, float, float]:
    """(wall s, user s, system s, load before, load after) of one reproduction in a child process, with the code
    of checkout ``tree`` (default: this one), whose draft samples are cached in ``samples``."""
    import os
    import resource
    import subprocess

    load0 = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    tree = tree or Path(__file__).resolve().parents[1]
    subprocess.run(
        [sys.executable, "-m", "hwmodel", "reproduce", "--out", str(out), "-q", "heteroreason", "--jobs", str(jobs)],
        check=True,
        cwd=tree,  # `python -m` imports the package of the working directory first
        stdout=subprocess.DEVNULL,
        env={**os.environ, "HWMODEL_SAMPLE_CACHE_DIR": samples, "PYTHONPATH": str(tree)},
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime, load0, os.getloadavg()[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="math500")
    ap.add_argument("--config", default="config1")
    ap.add_argument("--limit", type=int, default=None, help="first N problems only")
    ap.add_argument(
        "--full",
        action="store_true",
        help="also time the full `hwmodel reproduce heteroreason`, samples simulated then cached (two runs)",
    )
    ap.add_argument("--only-full", action="store_true", help="only the full reproduction's timing")
    ap.add_argument(
        "--against",
        type=Path,
        default=None,
        help="with --full/--only-full: also time another checkout's reproduction (e.g. main) back to back",
    )
    ap.add_argument("--loop-limit", type=int, default=40, help="problems per dataset of the event-loop A/B")
    args = ap.parse_args()
    if args.only_full:
        bench_full_reproduction(against=args.against)
        return
    bench_policies(args.dataset, args.config, args.limit)
    bench_gpu_prefill(args.config, args.limit)
    bench_fpga_sampling(args.config)
    bench_event_loops(args.loop_limit)
    if args.full:
        bench_full_reproduction(against=args.against)


if __name__ == "__main__":
    main()
