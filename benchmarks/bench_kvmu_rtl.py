"""KVMU RTL verification speed: examples and cycles per host second of `hwmodel kvmu verify` on the reference RTL
(fpga/kvmu/rtl/kvmu.v, Icarus Verilog under cocotb, one simulation serving every example), against the model-side
work alone (drawing the example, the per-cycle kernel and the schedule) in the same process.

    python benchmarks/bench_kvmu_rtl.py [--examples 1000] [--seed 0]

The ratio says how much of a verification run the simulator takes. Timings on a shared machine are noisy.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from fpga.kvmu.verify.contract import compare, schedule  # noqa: E402
from fpga.kvmu.verify.mutants import REFERENCE_RTL  # noqa: E402
from fpga.kvmu.verify.session import RtlSession, missing_tool  # noqa: E402
from fpga.kvmu.verify.streams import draw  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    why = missing_tool("icarus")
    if why:
        print(f"skipped: {why}")
        return 2
    exs = draw(args.examples, args.seed)
    schedule(exs[0])  # compile / load the kernel
    t0 = time.perf_counter()
    scheds = [schedule(ex) for ex in exs]
    model_s = time.perf_counter() - t0
    cycles = sum(len(s.stimulus) for s in scheds)
    with RtlSession([REFERENCE_RTL], "kvmu") as session:
        t0 = time.perf_counter()
        for ex, sch in zip(exs, scheds):
            _, observed = session.run(ex, sch)
            assert compare(sch, observed) is None
        rtl_s = time.perf_counter() - t0
    print(f"{len(exs)} examples, {cycles} cycles")
    print(f"model side (kernel + schedule): {len(exs) / model_s:,.0f} examples/s, {cycles / model_s:,.0f} cycles/s")
    print(
        f"RTL side (Icarus + cocotb + compare): {len(exs) / rtl_s:,.0f} examples/s, {cycles / rtl_s:,.0f} cycles/s "
        f"({rtl_s / model_s:.1f}x the model side)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
