"""Design points per minute of `hwmodel sweep` for the 0.5B draft decode at context 512 (streaming-decode on U280).

    python benchmarks/bench_dse.py                 # 2 worker processes (the "done when" figure)
    python benchmarks/bench_dse.py --workers 4 --clocks 5

A grid of 864 points (weight bits, linear-engine lanes and ports, attention ports, FIFO depth, 9 clocks) runs
through the whole sweep machinery -- planning and screening, the process pool (started inside the timed region),
chunking, the fsync'd CSV journal -- into a fresh directory. Numba's on-disk cache is warmed first, as it is after
any first run. For reference, the same process then evaluates a sample of points serially, once through the
evaluator (which reuses a token program across clocks) and once calling fpga.streaming.engine.simulate_token per point.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SPEC = """
[sweep]
name = "bench-0p5b-ctx512"
evaluator = "streaming-decode"

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--clocks", type=int, default=9, help="clocks per design (the grid's innermost axis)")
    ap.add_argument("--sample", type=int, default=36, help="points of the serial reference runs")
    args = ap.parse_args()

    import dataclasses

    from fpga.streaming.engine import simulate_token
    from hwmodel.dse import load_plan, run_sweep
    from hwmodel.dse.streaming_eval import EVALUATOR, build_design

    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "bench.toml"
        spec.write_text(SPEC.format(clocks=args.clocks))
        simulate_token("draft-u280", 512)  # warm Numba's on-disk cache (a one-time cost of the first run ever)

        t0 = time.perf_counter()
        plan = load_plan(spec)
        stats = run_sweep(plan, Path(tmp) / "out", workers=args.workers, progress=False)
        wall = time.perf_counter() - t0
        assert stats.remaining == 0, stats
        n = stats.evaluated
        print(
            f"sweep: {n} points ({len(plan.screened_out)} screened out) on {args.workers} worker processes in "
            f"{wall:.1f} s (planning {wall - stats.elapsed_s:.2f} s and the pool start-up included): "
            f"{60 * n / wall:,.0f} design points per minute"
        )

        sample = plan.points[: args.sample]
        t0 = time.perf_counter()
        for pt in sample:
            EVALUATOR.run(pt.params)
        ev_s = (time.perf_counter() - t0) / len(sample)
        t0 = time.perf_counter()
        for pt in sample:
            d = build_design(pt.params)
            simulate_token(dataclasses.replace(d, clock_hz=pt.params["clock_mhz"] * 1e6), 512)
        ref_s = (time.perf_counter() - t0) / len(sample)
        print(
            f"serial, one process, {len(sample)} points: evaluator {1e3 * ev_s:.1f} ms/point "
            f"({60 / ev_s:,.0f}/min); simulate_token per point {1e3 * ref_s:.1f} ms/point ({60 / ref_s:,.0f}/min); "
            f"program reuse across clocks: {ref_s / ev_s:.2f}x"
        )


if __name__ == "__main__":
    main()
