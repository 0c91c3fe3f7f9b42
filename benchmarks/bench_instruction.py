"""Speed of the instruction-driven accelerator model.

    python benchmarks/bench_instruction.py

Prints, on this machine (timings are noisy on a shared one):
* the fast engine against the cycle-stepped reference on the same small program (simulated cycles per host
  second, and the ratio), with identical results;
* LLaMA2-7B W4A8 on glitches-u280: one decode step at 1,792 cached tokens (ratios 1 and 4) and a 1,536-token
  prefill -- simulated kernel cycles per host second, decode steps per host second; compile time of a first
  program and of a context-patched one.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from fpga.instruction.compiler import Compiler  # noqa: E402
from fpga.instruction.design import load_design  # noqa: E402
from fpga.instruction.reference import ReferenceMachine  # noqa: E402
from fpga.instruction.run import simulate_program  # noqa: E402
from hwmodel.specs import library  # noqa: E402


def _best(fn, repeat: int = 3) -> tuple[float, object]:  # noqa: ANN001
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    llm = dataclasses.replace(
        library().llm("llama2-7b"),
        layers=2,
        hidden=256,
        heads=4,
        kv_heads=2,
        head_dim=64,
        intermediate=512,
        vocab=1000,
        max_position=512,
    )
    small = load_design("glitches-u280").with_params(
        {
            "datamover.channels": 4,
            "tiling.mv_tile_rows": 16,
            "mpe.row_lanes": 4,
            "mpe.col_lanes": 16,
            "buffers.weight_bytes": 65536,
            "buffers.scale_bytes": 8192,
            "buffers.zero_bytes": 8192,
            "buffers.kv_bytes": 16384,
            "tiling.prefill_token_block": 16,
        }
    )
    prog = Compiler(small, 1, llm=llm).decode_program(100)
    simulate_program(small, prog)  # JIT
    t_fast, fast = _best(lambda: simulate_program(small, prog))
    # best of two: the reference's first run also compiles the HBM helpers it calls (fpga/hbm/channel.py), 7 s with
    # an empty kernel cache, which made this ratio read 3,303x instead of ~60x (2026-12-04)
    t_ref, ref = _best(lambda: ReferenceMachine(small).run(prog), repeat=2)
    assert fast["cycles"] == ref["cycles"]
    cyc = fast["cycles"]
    print(
        f"small program ({prog.n_instructions} instructions, {cyc:,} cycles): fast {cyc / t_fast / 1e6:.1f} M cycles/s,"
        f" reference {cyc / t_ref / 1e6:.3f} M cycles/s, ratio {t_ref / t_fast:.0f}x (identical counters)"
    )

    d = load_design("glitches-u280")
    for k in (1, 4):
        c = Compiler(d, k)
        t_compile, _ = _best(lambda: Compiler(d, k).decode_program(1792), repeat=1)
        t_patch, p = _best(lambda: c.decode_program(1793))
        t_run, r = _best(lambda: simulate_program(d, p))
        print(
            f"LLaMA2-7B decode step, ctx 1793, k={k}: {r['cycles']:,} cycles in {t_run * 1e3:.0f} ms "
            f"({r['cycles'] / t_run / 1e6:.0f} M cycles/s, {1 / (t_run + t_patch):.1f} steps/s with patching); "
            f"first compile {t_compile:.2f} s, patched compile {t_patch * 1e3:.1f} ms; "
            f"{r['evaluated_cycles']:,} cycles evaluated, {r['channel_classes']} channel classes"
        )
    c = Compiler(d, 1)
    t_pc, pp = _best(lambda: c.prefill_program(1536), repeat=1)
    t_pr, r = _best(lambda: simulate_program(d, pp), repeat=1)
    print(
        f"LLaMA2-7B prefill of 1536 tokens: {r['cycles']:,} cycles in {t_pr:.2f} s "
        f"({r['cycles'] / t_pr / 1e6:.0f} M cycles/s); compile {t_pc:.2f} s"
    )


if __name__ == "__main__":
    main()
