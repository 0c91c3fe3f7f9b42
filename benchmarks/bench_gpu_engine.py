"""GPU engine speed: decode steps and prefills evaluated per host second, and the two shortcuts of the engine
against their references in the same process.

    python benchmarks/bench_gpu_engine.py [--contexts 4096]

Figures (LLaMA2-7B / HF on an A100: 1,340 kernels per decode step):
* ``decode_s`` over contexts 0..N-1 on a fresh engine (memoized blocks of 256 contexts: what the simulators use);
* ``prefill_s`` of 2,000 distinct prompt lengths on a fresh engine;
* one pass's launch queue: closed form per layer (:func:`gpu.launch.eager`) vs kernel by kernel
  (:func:`gpu.launch.eager_reference`);
* one pass's kernel table: affine template (:func:`gpu.kernels.build_program`) vs direct evaluation of the recipe
  (:func:`gpu.kernels.evaluate_program`).
Timings on a shared machine are noisy; best of three.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from gpu import launch  # noqa: E402
from gpu.kernels import Pass, build_program, evaluate_program  # noqa: E402
from gpu.latency import GpuEngine  # noqa: E402


def best_of(n: int, fn: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--contexts", type=int, default=4096, help="decode contexts 0..N-1 to evaluate")
    args = ap.parse_args()
    n = args.contexts

    def engine_decode() -> None:
        eng = GpuEngine("a100-40gb", "llama2-7b", "hf")  # fresh engine: cold memo
        for c in range(n):
            eng.decode_s(c)

    def engine_prefill() -> None:
        eng = GpuEngine("a100-40gb", "llama2-7b", "hf")
        for p in range(1, 2001):
            eng.prefill_s(p)

    eng = GpuEngine("a100-40gb", "llama2-7b", "hf")
    one = Pass.single(1, 1000)
    prog = build_program(eng.llm, "hf", one, 16, 16)
    times = launch.PassTimes.of(prog, eng.roofline)
    np.testing.assert_allclose(
        launch.eager(eng.c_op_s, times).total_s, launch.eager_reference(eng.c_op_s, times).total_s, rtol=1e-12
    )
    reps = 200
    t_decode = best_of(3, engine_decode)
    t_prefill = best_of(3, engine_prefill)
    t_closed = best_of(3, lambda: [launch.eager(eng.c_op_s, times) for _ in range(reps)])
    t_ref = best_of(3, lambda: [launch.eager_reference(eng.c_op_s, times) for _ in range(reps)])
    t_tmpl = best_of(3, lambda: [build_program(eng.llm, "hf", one, 16, 16) for _ in range(reps)])
    t_direct = best_of(3, lambda: [evaluate_program(eng.llm, "hf", one, 16, 16) for _ in range(reps)])
    print(f"decode_s, fresh engine:              {n / t_decode:10.0f} steps/s   ({prog.n_kernels} kernels per step)")
    print(f"prefill_s, 2000 distinct prompts:    {2000 / t_prefill:10.0f} prefills/s")
    print(f"launch queue, closed form:           {reps / t_closed:10.0f} passes/s")
    print(f"launch queue, kernel by kernel:      {reps / t_ref:10.0f} passes/s  -> closed form {t_ref / t_closed:.0f}x")
    print(f"kernel table, affine template:       {reps / t_tmpl:10.0f} passes/s")
    print(
        f"kernel table, direct recipe:         {reps / t_direct:10.0f} passes/s  -> template {t_direct / t_tmpl:.0f}x"
    )


if __name__ == "__main__":
    main()
