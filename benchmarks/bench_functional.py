"""Speed of the functional W8A8 draft model (JAX, CPU) at the Qwen2.5-0.5B shapes.

Prints per-token decode time (greedy, KV cache under KVMU control, LM head included) with XLA's LM head (the
default) and, interleaved step by step in the same run, with the host (Numba) LM head, prefill throughput, and, as
the reference run in the same process, the time XLA needs for the int8 matrix products alone (every projection of
every layer plus the LM head, same rows, same weights): the ratio says what the rest of the integer datapath
(requantization, RMSNorm, RoPE, attention, SiLU, KV writes, dispatch) adds on top of the matmuls.

    .venv/bin/python benchmarks/bench_functional.py                 # XLA's default threads, decode rows 2
    .venv/bin/python benchmarks/bench_functional.py --one-thread --rows 1 2 4

Weights are synthetic (seeded); speed does not depend on their values.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--llm", default="qwen2.5-0.5b")
    ap.add_argument("--one-thread", action="store_true", help="limit XLA to one thread (as the bit-exact tests do)")
    ap.add_argument("--rows", type=int, nargs="+", default=[2], help="decode rows (padding) to try")
    ap.add_argument("--prompt", type=int, default=64, help="prompt tokens before decoding")
    ap.add_argument("--steps", type=int, default=24, help="timed decode steps")
    ap.add_argument("--capacity", type=int, default=512)
    args = ap.parse_args()
    if args.one_thread:
        os.environ["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"

    import jax
    import numpy as np

    from fpga.functional import datapath as dp
    from fpga.functional.model import DraftModel
    from fpga.functional.quantize import quantize_model
    from fpga.functional.weights import SyntheticWeights
    from hwmodel.specs import library

    llm = library().llm(args.llm)
    t0 = time.perf_counter()
    qp = quantize_model(llm, SyntheticWeights(llm, 0))
    print(
        f"{llm.name}: synthetic weights generated and quantized in {time.perf_counter() - t0:.1f} s "
        f"({qp.nbytes / 1e6:.0f} MB of integers); XLA: {'one thread' if args.one_thread else 'default threads'}, "
        f"{os.cpu_count()} CPUs"
    )

    for rows in args.rows:
        model = DraftModel(llm, qp, capacity=args.capacity, decode_rows=rows, prefill_chunk=32)
        prompt = np.random.default_rng(0).integers(0, llm.vocab, args.prompt).tolist()
        t0 = time.perf_counter()
        model.prefill(prompt)
        model.decode()
        compile_s = time.perf_counter() - t0
        model.prefill(prompt)
        t0 = time.perf_counter()
        model.prefill(prompt)
        prefill_s = time.perf_counter() - t0
        model.host_head = False
        model.decode()  # compiles the all-XLA head too
        times: dict[bool, list[float]] = {True: [], False: []}
        cpu: dict[bool, list[float]] = {True: [], False: []}
        for i in range(2 * args.steps):  # A/B interleaved: host (Numba) LM head, then XLA's, step by step
            model.host_head = i % 2 == 0
            t0, c0 = time.perf_counter(), time.process_time()
            model.decode()
            times[model.host_head].append(time.perf_counter() - t0)
            cpu[model.host_head].append(time.process_time() - c0)
        model.host_head = False  # the default
        dec = np.array(times[True])
        dec_xla = np.array(times[False])

        # reference: the int8 products alone, same device weights, same rows, one jitted call per layer
        with jax.enable_x64(True):
            layer_mm = jax.jit(
                lambda lp, x, xi, xd: (
                    dp.matmul_i8(x, lp["qkv_q"]),
                    dp.matmul_i8(x, lp["o_q"]),
                    dp.matmul_i8(x, lp["gu_q"]),
                    dp.matmul_i8(xd, lp["down_q"]),
                )
            )
            head_mm = jax.jit(lambda top, x: dp.matmul_i8(x, top["lm_q"]))
            x = jax.numpy.ones((rows, llm.hidden), jax.numpy.int8)
            xd = jax.numpy.ones((rows, llm.intermediate), jax.numpy.int8)
            P = model._params

            def matmuls() -> None:
                outs = [layer_mm(lp, x, x, xd) for lp in P.layers]
                outs.append(head_mm(P.top, x))
                jax.block_until_ready(outs)

            matmuls()
            mm = []
            for _ in range(args.steps):
                t0 = time.perf_counter()
                matmuls()
                mm.append(time.perf_counter() - t0)
        mm_a = np.array(mm)
        print(
            f"rows {rows}: decode with the XLA LM head (the default) {np.median(dec_xla) * 1e3:.1f} ms/token "
            f"median, {dec_xla.min() * 1e3:.1f} min; with the host LM head (host_head=True) "
            f"{np.median(dec) * 1e3:.1f} median, {dec.min() * 1e3:.1f} min; host/XLA "
            f"{np.median(dec) / np.median(dec_xla):.2f}x; CPU time (all threads) "
            f"{np.median(cpu[False]) * 1e3:.1f} -> {np.median(cpu[True]) * 1e3:.1f} ms/token median"
        )
        dec = dec_xla
        print(
            f"rows {rows}: decode {np.median(dec) * 1e3:.1f} ms/token median, {dec.min() * 1e3:.1f} min "
            f"({1 / np.median(dec):.1f} tokens/s) at context {args.prompt}..{args.prompt + args.steps}; "
            f"int8 matmuls alone {np.median(mm_a) * 1e3:.1f} ms median, {mm_a.min() * 1e3:.1f} min; "
            f"ratio {np.median(dec) / np.median(mm_a):.2f}x (min {dec.min() / mm_a.min():.2f}x); "
            f"prefill {args.prompt} tokens {prefill_s:.2f} s ({args.prompt / prefill_s:.0f} tokens/s); "
            f"first-call compile {compile_s:.1f} s"
        )


if __name__ == "__main__":
    main()
