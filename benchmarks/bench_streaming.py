"""Speed of the streaming decode simulator (fpga/streaming/engine.py), against its cycle-stepped reference in the same
process.

    python benchmarks/bench_streaming.py            # all figures (about a minute on a quiet machine)
    python benchmarks/bench_streaming.py --quick    # smaller reference run, fewer tokens

Prints:
1. simulated kernel cycles per host second of the fast engine and of the cycle-stepped reference on the same
   design (draft-u280 with 2 layers and an 8k vocabulary, so the reference finishes), and their ratio;
2. fresh (unmemoized) draft-u280 tokens per host second;
3. host time to cover ctx 1..4096 for draft-u280, on one core and on two worker processes;
4. a LLaMA2-7B-sized token (W4, int8 KV, 32 x 512-bit ports on U280): host time (wall and CPU, median of eight
   fresh contexts) vs the modelled FPGA time;
5. a two-unit design (the published TeraFly OPT-1.3B on two U50s, shared channels: the kernel's ready queue) and
   the same model folded on one unit: CPU time of a fresh token, each against its modelled time, and their ratio;
   and the two-unit token's compile (fpga/streaming/units.py) with its link blocks built in array passes vs chunk
   by chunk (fpga/streaming/unit_links.py's reference), alternating in this process, programs compared equal.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fpga.hbm import channel as hbm  # noqa: E402
from fpga.streaming.design import load_design  # noqa: E402
from fpga.streaming.engine import StreamingEngine, run_kernel  # noqa: E402
from fpga.streaming.program import compile_token  # noqa: E402
from fpga.streaming.reference import run_reference  # noqa: E402


def _cover(args: tuple[int, int]) -> float:
    """Decode every ctx in [lo, hi) on draft-u280 (one worker); returns host seconds."""
    lo, hi = args
    eng = StreamingEngine("draft-u280")
    eng.token(0)  # JIT / cache warm-up outside the timed part
    t = time.perf_counter()
    for c in range(lo, hi):
        eng.decode_s(c)
    return time.perf_counter() - t


def bench_reference(quick: bool) -> None:
    d = load_design("draft-u280")
    llm = dataclasses.replace(d.llm_spec(), layers=1 if quick else 2, vocab=2048 if quick else 8192)
    board = d.board_spec()
    prog = compile_token(d, board, llm, 64, per_port=True)
    p = hbm.hbm_params(board, d.clock_hz)
    run_kernel(p, prog)
    t = time.perf_counter()
    reps = 20
    for _ in range(reps):
        fast = run_kernel(p, prog)
    t_fast = (time.perf_counter() - t) / reps
    t = time.perf_counter()
    ref = run_reference([int(x) for x in p], prog)
    t_ref = time.perf_counter() - t
    assert fast[1] == ref.cycles, "fast engine and reference disagree"
    cyc = ref.cycles
    print(
        f"[1] same design (draft-u280, {llm.layers} layer(s), vocab {llm.vocab}, ctx 64; {cyc:,} kernel cycles, "
        f"{ref.axi_cycles_stepped:,} AXI cycles, {prog.n_ports} ports):"
    )
    print(f"    cycle-stepped reference: {t_ref:8.3f} s  -> {cyc / t_ref:12,.0f} simulated cycles / host s")
    print(f"    fast engine            : {t_fast * 1e3:8.3f} ms -> {cyc / t_fast:12,.0f} simulated cycles / host s")
    print(f"    ratio fast / reference : {t_ref / t_fast:,.0f}x (identical cycles: {cyc:,})")


def bench_tokens(quick: bool) -> None:
    eng = StreamingEngine("draft-u280")
    eng.token(0)
    n = 100 if quick else 400
    ctxs = [(i * 977) % 4097 for i in range(1, n + 1)]
    t = time.perf_counter()
    for c in ctxs:
        eng.token(c)
    dt = time.perf_counter() - t
    print(
        f"[2] fresh draft-u280 tokens (ctx spread over 0..4096): {len(set(ctxs)) / dt:,.0f} tokens / host s "
        f"({dt / len(set(ctxs)) * 1e3:.2f} ms each)"
    )


def bench_cover(quick: bool) -> None:
    hi = 1024 if quick else 4097
    one = _cover((1, hi))
    print(f"[3] ctx 1..{hi - 1} for draft-u280 on one core: {one:.2f} s")
    with concurrent.futures.ProcessPoolExecutor(max_workers=2) as pool:
        t = time.perf_counter()
        list(pool.map(_cover, [(1, hi // 2), (hi // 2, hi)]))
        wall = time.perf_counter() - t
    print(f"    ctx 1..{hi - 1} on two worker processes: {wall:.2f} s wall (worker start-up included)")


def bench_llama(quick: bool) -> None:
    """Fresh tokens (a context never simulated before, so nothing memoized but the context-independent parts of
    the program): the median over eight contexts of host wall time and CPU time against the modelled time, and
    the CPU time of the program's compilation and of the kernel alone at the same contexts."""
    base = load_design("flexllm-u280-mem-opt-new")
    base = dataclasses.replace(base, name="llama2-7b-w4-u280", llm="llama2-7b", max_ctx=2048)
    print(
        "[4] LLaMA2-7B-sized token (W4A4, int8 KV, 32 x 512-bit ports on U280, 300 MHz), fresh, median of 8 contexts:"
    )
    med = statistics.median
    for burst in (4096, 16384):
        d = base.with_engine("linear", ports=32, burst_bytes=burst)
        eng = StreamingEngine(d)
        eng.token(1)
        for ctx0 in (1020,) if quick else (0, 1020, 2040):
            wall, cpu, comp, kern, model = [], [], [], [], []
            for ctx in range(ctx0, ctx0 + 8):
                t, c = time.perf_counter(), time.process_time()
                res = eng.token(ctx)
                wall.append(time.perf_counter() - t)
                cpu.append(time.process_time() - c)
                model.append(res.seconds)
                # where the CPU time goes: the program's compilation and the kernel alone (same context again)
                c0 = time.process_time()
                prog = compile_token(eng.design, eng.board, eng.llm, ctx)
                c1 = time.process_time()
                run_kernel(hbm.hbm_params(eng.board, d.clock_hz, hbm.token_refresh_phase(eng.board, ctx)), prog)
                comp.append(c1 - c0)
                kern.append(time.process_time() - c1)
            m = med(model)
            print(
                f"    {burst // 1024:2d} KB requests, ctx {ctx0:5d}: (to {ctx0 + 7}) modelled {m * 1e3:6.2f} ms, "
                f"host {med(wall) * 1e3:6.2f} ms (host / modelled = {med(wall) / m:.2f}), "
                f"CPU {med(cpu) * 1e3:6.2f} ms (CPU / modelled = {med(cpu) / m:.2f}; compile {med(comp) * 1e3:.2f}, "
                f"kernel {med(kern) * 1e3:.2f})"
            )


def bench_units(quick: bool) -> None:
    """Fresh tokens of a multi-unit design and of its one-unit fold (median CPU over contexts 16..16+n)."""
    from hwmodel import specs

    root = Path(__file__).resolve().parent.parent
    specs.set_extra_spec_dirs([root / "examples" / "llms"])
    print("[5] TeraFly OPT-1.3B, two U50 units on a ring vs the same model folded on one, fresh tokens:")
    cpu_of = {}
    for name in ("terafly-opt-1.3b-u50.toml", "terafly-opt-1.3b-u50-units.toml"):
        eng = StreamingEngine(root / "examples" / "designs" / "published" / name)
        eng.token(15)  # JIT / cache warm-up outside the timed part
        cpu, model = [], []
        for ctx in range(16, 18 if quick else 24):
            c = time.process_time()
            model.append(eng.token(ctx).seconds)
            cpu.append(time.process_time() - c)
        cpu_of[name] = statistics.median(cpu)
        m = statistics.median(model)
        print(
            f"    {name:34s} modelled {m * 1e3:7.2f} ms, CPU {cpu_of[name] * 1e3:7.1f} ms (CPU / modelled = {cpu_of[name] / m:.2f})"
        )
    ratio = cpu_of["terafly-opt-1.3b-u50-units.toml"] / cpu_of["terafly-opt-1.3b-u50.toml"]
    print(f"    two units cost {ratio:.1f}x the fold's CPU per token")
    bench_unit_links(eng.design, quick)


def bench_unit_links(design: object, quick: bool) -> None:
    """The multi-unit compile with its link blocks from array passes and from the chunk-by-chunk reference."""
    from fpga.streaming import unit_links, units
    from hwmodel.specs import library
    from tests.test_compile_exact import program_digest

    board, llm = library().board(design.board), library().llm(design.llm)  # type: ignore[attr-defined]
    cpu: dict[str, list[float]] = {"array passes": [], "chunk by chunk": []}
    same = True
    try:
        for ctx in range(16, 18 if quick else 22):
            digests = []
            for name, fn in (("array passes", unit_links.link_blocks), ("chunk by chunk", unit_links.link_blocks_ref)):
                units.link_blocks = fn  # type: ignore[assignment]
                c = time.process_time()
                prog = units.compile_units(design, board, llm, ctx)  # type: ignore[arg-type]
                cpu[name].append(time.process_time() - c)
                digests.append(program_digest(prog))
            same &= digests[0] == digests[1]
    finally:
        units.link_blocks = unit_links.link_blocks  # type: ignore[assignment]
    fast, ref = (statistics.median(cpu[k]) for k in ("array passes", "chunk by chunk"))
    print(
        f"    two-unit compile: link blocks chunk by chunk (reference) {ref * 1e3:.0f} ms, in array passes "
        f"{fast * 1e3:.0f} ms ({ref / fast:.1f}x less CPU); same programs: {same}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="", help="comma list of sections to run: reference, tokens, cover, llama, units")
    args = ap.parse_args()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"bench_streaming: {os.cpu_count()} CPUs, load average {load:.1f} (timings are wall clock)")
    parts = {
        "reference": bench_reference,
        "tokens": bench_tokens,
        "cover": bench_cover,
        "llama": bench_llama,
        "units": bench_units,
    }
    for name in args.only.split(",") if args.only else parts:
        parts[name](args.quick)


if __name__ == "__main__":
    main()
