"""Design points per minute of `hwmodel sweep` for the 0.5B draft decode at context 512 (streaming-decode on U280).

    python benchmarks/bench_dse.py                 # 2 worker processes (the "done when" figure)
    python benchmarks/bench_dse.py --workers 4 --clocks 5

A grid of 864 points (weight bits, linear-engine lanes and ports, attention ports, FIFO depth, 9 clocks) runs
through the whole sweep machinery -- planning and screening, the process pool (started inside the timed region),
chunking, the fsync'd CSV journal -- into a fresh directory. Numba's on-disk cache is warmed first, as it is after
any first run; that also loads the kernels into this process, which the sweep's workers, forked from it, inherit
(as in any session that has simulated before sweeping). The same process then runs the same sweep on the reference
path (``hwmodel.dse.streaming_eval:REFERENCE_EVALUATOR``: every point built from scratch but the program reused
across clocks, the garbage collector running -- the evaluator before hwmodel/dse/streaming_shared.py) and checks
that both wrote the same rows, bit for bit; and, in this process, times a sample of points both ways in CPU time
from cold caches (the ratio to quote on a loaded machine). The last line is the same sweep as a fresh
``hwmodel sweep`` command, whose workers each load the kernels from the disk cache themselves.
"""

from __future__ import annotations

import argparse
import csv
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SPEC = """
[sweep]
name = "bench-0p5b-ctx512"
evaluator = "{evaluator}"

[parameters]
design = "draft-u280"
ctx = 512
weight_bits = [4, 8]
"attn.ports" = [2, 4]
fifo_depth = [4, 8]
clock_mhz = {{ min = 200, max = 400, num = {clocks} }}

[parameters.linear]
lanes = [1024, 2048, 4096]
ports = [16, 20, 24, 28]

[objectives]
latency_s = "min"
energy_per_token_j = "min"
dsp_util = "min"
"""


def _rows(path: Path) -> dict[str, dict[str, str]]:
    with open(path, newline="") as fh:
        return {r["point_id"]: r for r in csv.DictReader(fh)}


def _sweep(tmp: Path, name: str, evaluator: str, clocks: int, workers: int) -> tuple[Any, float, Any]:
    from hwmodel.dse import load_plan, run_sweep

    spec = tmp / f"{name}.toml"
    spec.write_text(SPEC.format(clocks=clocks, evaluator=evaluator))
    t0 = time.perf_counter()
    plan = load_plan(spec)
    stats = run_sweep(plan, tmp / name, workers=workers, progress=False)
    wall = time.perf_counter() - t0
    assert stats.remaining == 0, stats
    return stats, wall, plan


def _cpu_per_point(evaluator: Any, points: list[Any]) -> float:
    from hwmodel.dse.streaming_eval import clear_caches
    from hwmodel.dse.worker import evaluate_chunk

    clear_caches()
    t0 = time.process_time()
    evaluate_chunk(evaluator, [(p.id, p.params) for p in points])
    return (time.process_time() - t0) / len(points)


def _cli_sweep(tmp: Path, clocks: int, workers: int) -> dict[str, float]:
    """The shared sweep as a fresh ``hwmodel sweep`` command: its run statistics and the command's wall time."""
    import json
    import os
    import subprocess

    spec = tmp / "cli.toml"
    spec.write_text(SPEC.format(clocks=clocks, evaluator="streaming-decode"))
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "hwmodel", "sweep", str(spec), "--out", str(tmp / "cli"), "--no-progress"]
    t0 = time.perf_counter()
    out = subprocess.run([*cmd, "--workers", str(workers), "--json"], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if out.returncode:
        raise SystemExit(f"hwmodel sweep failed: {out.stderr.strip()}")
    return {**json.loads(out.stdout)["run"], "command_s": wall}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--clocks", type=int, default=9, help="clocks per design (the grid's innermost axis)")
    ap.add_argument("--sample", type=int, default=144, help="points of the serial CPU-time comparison")
    args = ap.parse_args()

    from fpga.streaming.engine import simulate_token

    ref_name = "hwmodel.dse.streaming_eval:REFERENCE_EVALUATOR"
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        simulate_token("draft-u280", 512)  # warm Numba's on-disk cache (a one-time cost of the first run ever)
        stats, wall, plan = _sweep(tmp, "shared", "streaming-decode", args.clocks, args.workers)
        n = stats.evaluated
        print(
            f"sweep: {n} points ({len(plan.screened_out)} screened out) on {args.workers} worker processes in "
            f"{wall:.2f} s (planning {wall - stats.elapsed_s:.2f} s and the pool start-up included): "
            f"{60 * n / wall:,.0f} design points per minute"
        )
        ref_stats, ref_wall, _ = _sweep(tmp, "reference", ref_name, args.clocks, args.workers)
        same = _rows(tmp / "shared" / "results.csv") == _rows(tmp / "reference" / "results.csv")
        print(
            f"reference path, same sweep: {ref_wall:.2f} s, {60 * ref_stats.evaluated / ref_wall:,.0f} points per "
            f"minute; speed-up {ref_wall / wall:.2f}x (wall); rows identical: {'yes' if same else 'NO'}"
        )
        sample = plan.points[: args.sample]
        ref_s = _cpu_per_point(ref_name, sample)
        new_s = _cpu_per_point("streaming-decode", sample)
        print(
            f"serial, this process, {len(sample)} points from cold caches, CPU time: reference "
            f"{1e3 * ref_s:.2f} ms/point, shared {1e3 * new_s:.2f} ms/point ({60 / new_s:,.0f}/min per core): "
            f"{ref_s / new_s:.2f}x"
        )
        cold = _cli_sweep(tmp, args.clocks, args.workers)
        print(
            f"a fresh `hwmodel sweep` process, same sweep: {cold['evaluated']} points in {cold['elapsed_s']:.2f} s "
            f"after planning ({cold['points_per_min']:,.0f} points per minute), the whole command "
            f"{cold['command_s']:.2f} s (interpreter, imports, planning and the report included)"
        )
        if not same:
            raise SystemExit("the shared path wrote different rows from the reference path")


if __name__ == "__main__":
    main()
