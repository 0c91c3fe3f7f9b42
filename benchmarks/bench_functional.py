"""Speed of the functional W8A8 draft model (JAX, CPU) at the Qwen2.5-0.5B shapes.

Prints per-token decode time (greedy, KV cache under KVMU control, LM head included) with the int8 products on
the Numba kernel inside the XLA computation (``int8_kernel="numba"``, 1 row, the default) and, interleaved step
in blocks of steps on the same model in the same run, on XLA's int8 dot (``int8_kernel="xla"``, 2 rows: the previous
default), with wall and CPU time and their ratio; then, as the reference, the int8 products alone (every
projection of every layer plus the LM head, same weights) with each kernel: the ratio says what the rest of the
integer datapath (requantization, RMSNorm, RoPE, attention, SiLU, KV writes, dispatch) adds on top of the
products. Then prefill throughput and the first call's compilation.

    .venv/bin/python benchmarks/bench_functional.py                 # XLA's default threads
    .venv/bin/python benchmarks/bench_functional.py --one-thread --steps 48

Weights are synthetic (seeded); speed does not depend on their values.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _stats(a: list[float]) -> str:
    return f"{np.median(a) * 1e3:.1f} ms median, minimum {np.min(a) * 1e3:.1f} ms"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--llm", default="qwen2.5-0.5b")
    ap.add_argument("--one-thread", action="store_true", help="limit XLA to one thread (as the bit-exact tests do)")
    ap.add_argument("--prompt", type=int, default=64, help="prompt tokens before decoding")
    ap.add_argument("--steps", type=int, default=24, help="timed decode steps per path")
    ap.add_argument("--capacity", type=int, default=512)
    ap.add_argument(
        "--block",
        type=int,
        default=6,
        help="A/B decode steps per block (alternating every step measured the Numba path at 0.8x XLA's CPU time, "
        "blocks of 5-6 at 1.5x, on the loaded VM: probably XLA's thread pool still busy from its dot when the "
        "next step starts)",
    )
    args = ap.parse_args()
    if args.one_thread:
        os.environ["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"

    import jax

    from fpga.functional import datapath as dp
    from fpga.functional import gemv
    from fpga.functional.model import DraftModel
    from fpga.functional.quantize import quantize_model
    from fpga.functional.weights import SyntheticWeights
    from hwmodel.specs import library

    if not gemv.available():
        sys.exit("the Numba int8 kernel is not available here (JAX's CPU backend and its FFI API are needed)")
    llm = library().llm(args.llm)
    t0 = time.perf_counter()
    qp = quantize_model(llm, SyntheticWeights(llm, 0))
    print(
        f"{llm.name}: synthetic weights generated and quantized in {time.perf_counter() - t0:.1f} s "
        f"({qp.nbytes / 1e6:.0f} MB of integers); XLA: {'one thread' if args.one_thread else 'default threads'}, "
        f"{os.cpu_count()} CPUs"
    )
    paths = {"numba": 1, "xla": 2}  # int8 kernel -> decode rows (the new default, the previous default)
    model = DraftModel(llm, qp, capacity=args.capacity, prefill_chunk=32, int8_kernel="numba")
    prompt = np.random.default_rng(0).integers(0, llm.vocab, args.prompt).tolist()
    t0 = time.perf_counter()
    model.prefill(prompt)
    model.decode()
    compile_s = time.perf_counter() - t0
    model.prefill(prompt)
    t0 = time.perf_counter()
    model.prefill(prompt)
    prefill_s = time.perf_counter() - t0
    for kernel, rows in paths.items():  # compiles both decode paths
        model.int8_kernel, model.decode_rows = kernel, rows
        model.decode()
    wall: dict[str, list[float]] = {k: [] for k in paths}
    cpu: dict[str, list[float]] = {k: [] for k in paths}
    for i in range(2 * args.steps):  # A/B interleaved in blocks: the Numba kernel, then XLA's dot, every step counted
        kernel = "numba" if (i // args.block) % 2 == 0 else "xla"
        model.int8_kernel, model.decode_rows = kernel, paths[kernel]
        t0, c0 = time.perf_counter(), time.process_time()
        model.decode()
        jax.block_until_ready((model._kv, model._stash))  # decode returns once the forward is dispatched
        wall[kernel].append(time.perf_counter() - t0)
        cpu[kernel].append(time.process_time() - c0)

    # reference: the int8 products alone, same device weights, one jitted call per layer
    mm: dict[str, list[float]] = {k: [] for k in paths}
    with jax.enable_x64(True):
        P = model._params
        calls = {}
        for kernel, rows in paths.items():
            layer_mm = jax.jit(
                lambda lp, x, xd, k=kernel: tuple(
                    dp.matmul(xd if name == "down_q" else x, lp[name], k) for name in ("qkv_q", "o_q", "gu_q", "down_q")
                )
            )
            head_mm = jax.jit(lambda top, x, k=kernel: dp.matmul(x, top["lm_q"], k))
            x = jax.numpy.ones((rows, llm.hidden), jax.numpy.int8)
            xd = jax.numpy.ones((rows, llm.intermediate), jax.numpy.int8)
            calls[kernel] = (layer_mm, head_mm, x, xd)

        def products(kernel: str) -> None:
            layer_mm, head_mm, x, xd = calls[kernel]
            outs = [layer_mm(lp, x, xd) for lp in P.layers]
            outs.append(head_mm(P.top, x))
            jax.block_until_ready(outs)

        for kernel in paths:
            products(kernel)
        for i in range(2 * args.steps):
            kernel = "numba" if i % 2 == 0 else "xla"
            t0 = time.perf_counter()
            products(kernel)
            mm[kernel].append(time.perf_counter() - t0)
    # the same products called from numpy: the previous kernel (the plain loop) against today's, alternating
    weights = [np.asarray(lp[name]) for lp in P.layers for name in ("qkv_q", "o_q", "gu_q", "down_q")]
    weights.append(np.asarray(P.top["lm_q"]))
    rows_x = {w.shape[1]: np.ones((1, w.shape[1]), np.int8) for w in weights}
    outs = [np.empty((1, w.shape[0]), np.int32) for w in weights]
    host: dict[str, list[float]] = {
        "plain loop (before)": [],
        f"{gemv.KERNEL} (now; one thread here, split over XLA's pool in a decode)": [],
    }
    for i in range(2 * 8 + 2):
        t0 = time.perf_counter()
        for w, o in zip(weights, outs):
            gemv.KERNELS["loop" if i % 2 == 0 else gemv.KERNEL](rows_x[w.shape[1]], w, o)
        if i >= 2:  # the first pair compiles and warms
            host[list(host)[i % 2]].append(time.perf_counter() - t0)
    ctx = f"context {args.prompt}..{args.prompt + 2 * args.steps}, blocks of {args.block} steps"
    for kernel, rows in paths.items():
        print(
            f"decode, int8 products on {kernel:5s} ({rows} row{'s' if rows > 1 else ''}): {_stats(wall[kernel])} "
            f"per token, CPU time (all threads) {np.median(cpu[kernel]) * 1e3:.1f} ms median; int8 products alone "
            f"{_stats(mm[kernel])}; decode / products {np.median(wall[kernel]) / np.median(mm[kernel]):.2f}x"
        )
    med = {k: float(np.median(wall[k])) for k in paths}
    print(
        f"A/B in this run ({ctx}): Numba kernel {med['numba'] * 1e3:.1f} ms/token median "
        f"({1 / med['numba']:.1f} tokens/s), XLA's dot {med['xla'] * 1e3:.1f}; speed-up "
        f"{med['xla'] / med['numba']:.2f}x wall median, {min(wall['xla']) / min(wall['numba']):.2f}x min, "
        f"{np.median(cpu['xla']) / np.median(cpu['numba']):.2f}x CPU time median"
    )
    (before, a), (now, b) = host.items()
    print(
        f"int8 products from numpy, 1 row (A/B alternating): {before} {_stats(a)}, {now} {_stats(b)}; "
        f"speed-up {np.median(a) / np.median(b):.2f}x median"
    )
    print(
        f"prefill {args.prompt} tokens {prefill_s:.2f} s ({args.prompt / prefill_s:.0f} tokens/s); "
        f"first-call compile {compile_s:.1f} s"
    )


if __name__ == "__main__":
    main()
