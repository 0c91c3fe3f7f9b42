"""System-A replay speed: problems simulated per host second, per policy, and the engine shortcuts of the replay
against its reference in the same process.

    python benchmarks/bench_reasoning.py [--dataset math500] [--config config1] [--limit 500]

Figures:
* per policy, problems replayed per host second on the built-in trace (with backtracking): *cold* (fresh engine
  memos: the device models are evaluated as the replay asks) and *warm* (memos filled: the discrete-event replay
  alone); the ratio to the baseline policy's warm rate;
* FPGA draft per-token times: sampled every 64 contexts vs simulating every context (the reference), over
  contexts 0..511, and the largest relative difference.
Timings on a shared machine are noisy; best of three where it is cheap.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from hwmodel.reasoning import system as system_mod  # noqa: E402
from hwmodel.reasoning.costs import ContextSampledEngine  # noqa: E402
from hwmodel.reasoning.policies import POLICIES  # noqa: E402
from hwmodel.reasoning.runner import run_trace  # noqa: E402
from hwmodel.reasoning.study import study_traces  # noqa: E402
from hwmodel.reasoning.system import MissingDeviceModelError, build_platform  # noqa: E402


def _fresh_engines() -> None:
    for fn in (system_mod.gpu_engine, system_mod.fpga_engine, system_mod.prompt_migrations):
        fn.cache_clear()


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


def bench_fpga_sampling(config: str) -> None:
    try:
        streaming = system_mod._module("fpga.streaming", "FPGA streaming accelerator model")
    except MissingDeviceModelError as exc:
        print(f"FPGA sampling skipped: {exc}")
        return
    sysc = system_mod.load_system(config)
    exact = streaming.StreamingEngine(streaming.load_design(sysc.fpga_design), clock_hz=sysc.fpga_clock_hz)
    ctxs = range(0, 512)
    t_ref = _timed(lambda: [exact.decode_s(c) for c in ctxs])
    sampled = ContextSampledEngine(streaming.StreamingEngine(streaming.load_design(sysc.fpga_design),
                                                             clock_hz=sysc.fpga_clock_hz), grid=64)
    t_fast = _timed(lambda: [sampled.decode_s(c) for c in ctxs])
    err = max(abs(sampled.decode_s(c) - exact.decode_s(c)) / exact.decode_s(c) for c in ctxs)
    print(f"FPGA decode_s over contexts 0..511: {len(ctxs) / t_ref:.1f}/s every context simulated (reference), "
          f"{len(ctxs) / t_fast:.0f}/s sampled every 64 ({t_ref / t_fast:.0f}x), max relative difference "
          f"{err:.2e}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="math500")
    ap.add_argument("--config", default="config1")
    ap.add_argument("--limit", type=int, default=None, help="first N problems only")
    args = ap.parse_args()
    bench_policies(args.dataset, args.config, args.limit)
    bench_fpga_sampling(args.config)


if __name__ == "__main__":
    main()
