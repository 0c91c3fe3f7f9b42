"""KVMU simulation speed: commands (and cycles) per host second for the Numba kernel, against the Python face in
the same process, on a reasoning-like legal command stream.

    python benchmarks/bench_kvmu.py [--commands 1000000] [--seed 0]

The stream: problems of a 64..256-token prompt (``init``), then steps of 8..64 drafted tokens issued one
``speculate 1`` per token (as the draft's sampler produces them), ``mark`` at the step's end, step-ahead tokens of
the next step, and a verdict: accept (75 %) or rollback + the target's refined step ingested in 4-token PCIe
chunks; 1 step in 20 after a refinement backtracks (``init`` to the step's start). Cycle costs: 1 per command and
per token (the register traffic only). Timings on a shared machine are noisy; best of three.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from fpga.kvmu.kernel import kvmu_commands  # noqa: E402
from fpga.kvmu.model import Command, Kvmu, Op, kernel_per_cycle, run_kernel  # noqa: E402

CAPACITY = 32768


def reasoning_stream(n_commands: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A legal command stream shaped like step-wise speculative reasoning (see the module docstring)."""
    rng = np.random.default_rng(seed)
    ops: list[int] = []
    args: list[int] = []

    def emit(op: Op, arg: int = 0) -> None:
        ops.append(int(op))
        args.append(arg)

    while len(ops) < n_commands:
        prompt = int(rng.integers(64, 257))
        emit(Op.INIT, prompt)
        valid = prompt
        step = int(rng.integers(8, 65))
        for _ in range(step):
            emit(Op.SPECULATE, 1)
        emit(Op.MARK)
        curr = ahead = valid + step
        while ahead + 200 < CAPACITY and len(ops) < n_commands:
            nxt = int(rng.integers(8, 65))
            drafted = int(rng.integers(0, nxt + 1))  # step-ahead tokens before the verdict arrives
            for _ in range(drafted):
                emit(Op.SPECULATE, 1)
            ahead += drafted
            if rng.random() < 0.75:
                for _ in range(nxt - drafted):  # finish the step-ahead step, then accept at its boundary
                    emit(Op.SPECULATE, 1)
                ahead += nxt - drafted
                emit(Op.ACCEPT)
                valid, curr = curr, ahead
            else:
                step_start = valid
                emit(Op.ROLLBACK)
                refined = int(rng.integers(8, 65))
                for done in range(0, refined, 4):
                    emit(Op.INGEST, min(4, refined - done))
                valid = curr = ahead = valid + refined
                if rng.random() < 0.05:
                    emit(Op.INIT, step_start)  # backtrack
                    valid = curr = ahead = step_start
                    emit(Op.INGEST, 8)
                    valid = curr = ahead = step_start + 8
                step = int(rng.integers(8, 65))
                for _ in range(step):
                    emit(Op.SPECULATE, 1)
                emit(Op.MARK)
                curr = ahead = valid + step
    return np.array(ops[:n_commands], np.int64), np.array(args[:n_commands], np.int64)


def best_of(n: int, fn: Callable[[], object]) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def face_run(ops: np.ndarray, args: np.ndarray, record: bool) -> Kvmu:
    kv = Kvmu(CAPACITY, record=record)
    for op, arg in zip(ops.tolist(), args.tolist()):
        kv.apply(Command(Op(op), arg))
    return kv


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commands", type=int, default=1_000_000)
    parser.add_argument("--face-commands", type=int, default=200_000, help="commands for the (slower) Python face runs")
    parser.add_argument("--seed", type=int, default=0)
    a = parser.parse_args()

    ops, args = reasoning_stream(a.commands, a.seed)
    run_kernel(ops[:100], args[:100], CAPACITY)  # compile / load the cache outside the timings
    kernel_per_cycle(ops[:100], args[:100], CAPACITY)
    trace = run_kernel(ops, args, CAPACITY)
    assert not trace.refusals(), "the benchmark stream must be legal"
    n_cycles = trace.n_cycles
    costs = np.ones(7, np.int64)

    t_cmd = best_of(3, lambda: kvmu_commands(ops, args, CAPACITY, costs, 0, 0, 0, 0))
    t_runs = best_of(3, lambda: run_kernel(ops, args, CAPACITY))
    t_dense = best_of(3, lambda: kernel_per_cycle(ops, args, CAPACITY))
    fo, fa = ops[: a.face_commands], args[: a.face_commands]
    t_face = best_of(1, lambda: face_run(fo, fa, record=False))
    t_face_rec = best_of(1, lambda: face_run(fo, fa, record=True))
    # the face and the kernel agree on this stream (a cheap end-of-run check, not the test)
    assert face_run(fo, fa, record=True).trace().n_cycles == run_kernel(fo, fa, CAPACITY).n_cycles

    rows = [
        ("kernel, per-command pass only", a.commands, t_cmd),
        ("kernel, run-length cycles (run_kernel)", a.commands, t_runs),
        ("kernel, one sample per cycle (kernel_per_cycle)", a.commands, t_dense),
        ("Python face, record=False", len(fo), t_face),
        ("Python face, record=True", len(fo), t_face_rec),
    ]
    face_rate = len(fo) / t_face
    print(
        f"KVMU benchmark: {a.commands:,} commands ({n_cycles:,} cycles, {n_cycles / a.commands:.2f} cycles per "
        f"command), capacity {CAPACITY}, seed {a.seed}"
    )
    print(f"{'path':<50} {'commands/s':>14} {'cycles/s':>14} {'vs face':>9}")
    for name, n, t in rows:
        rate = n / t
        print(f"{name:<50} {rate:>14,.0f} {rate * n_cycles / a.commands:>14,.0f} {rate / face_rate:>8.1f}x")


if __name__ == "__main__":
    main()
