"""Compile the project's Numba kernels into the on-disk kernel cache (:mod:`hwmodel.numba_cache`) once, before
the processes that need them start, so that they load them instead of compiling them each.

On a fresh checkout the cache is empty (its key is a digest of the sources): without this step each pytest-xdist
worker, and every ``hwmodel`` subprocess a test starts before the first one has written the cache, compiles the
same kernels (the instruction simulator and the streaming engine take 7-9 CPU-s each to compile). Two processes,
one per core, split the families (``python -m tests.warm_kernels 0 2`` and ``... 1 2``); ``tests/conftest.py``
starts them from the xdist controller and ``tasks.py run`` beside the studies.

Each family is a small call of the public entry point that runs its kernels with the argument types the models
pass (so the cached signatures are the ones later looked up). A family that fails prints one line and is skipped:
this is only a warm-up, the tests and studies compile what is missing.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable


def _instruction() -> None:
    from fpga.instruction.engine import InstructionEngine

    InstructionEngine("glitches-u280").decode(128)


def _streaming() -> None:
    from fpga.streaming.engine import StreamingEngine

    StreamingEngine("draft-u280").decode_s(128)


def _hbm() -> None:
    import numpy as np

    from fpga.hbm import channel as hbm
    from fpga.hbm import profile as hbm_profile
    from fpga.hbm.scheduler import port_profile
    from hwmodel.specs import library

    b = library().board("u280")
    p = hbm.hbm_params(b, 450e6)
    st = np.zeros((1, hbm.CS_N), dtype=np.int64)
    st[0] = hbm.new_channel_state()
    hbm.set_refresh_phase(p, st[0], 0)
    # first: the channel kernel every other HBM, instruction and streaming kernel calls (TWO_PARTS)
    hbm.channel_request(p, st[0], 0, 0, 64, 0)
    for pattern in ("sequential", "random"):
        hbm_profile.profile_bandwidth(
            b, 450e6, 64, pattern=pattern, total_bytes=1 << 14, outstanding=64, port_width_bits=256
        )
    i64 = np.zeros(2, dtype=np.int64)  # one port through the switch (the HBM peer rows, the switch tests)
    port_profile(p, st, np.array([0, 64], dtype=np.int64), i64, 64, i64, 4, 4, 1, 12, 64, i64[:1], 0)
    # the helpers the cycle-stepped references call from Python (fpga/instruction/reference.py, the HBM peer rows)
    hbm.read_landing(p, hbm.kernel_to_axi(p, 1), hbm.axi_to_kernel(p, 9), 64, 32, 0)
    hbm.granule_row(p, hbm.granule_bank(p, 3))


def _late() -> None:
    """Kernels the small calls above do not reach, called with the argument types the models pass (as recorded in
    the kernel cache index after a whole suite): the copy of a KV head's requests (a streaming layer with more than
    two KV-head units, e.g. LLaMA2-7B's 32; 4.1 CPU-s) and the FIFO schedule of a KV migration (serving)."""
    import numpy as np

    from fpga.streaming.templates import _copy_head
    from hwmodel.serving.transfer import _fifo_chunks

    _copy_head(np.zeros((4, 6), np.int64), 0, 2, 1, 2, 64)
    _fifo_chunks(np.zeros(2), 0.0, np.ones((1, 2)), np.zeros(1, np.bool_), False)


def _kvmu() -> None:
    import numpy as np

    from fpga.kvmu.codes import Op
    from fpga.kvmu.commands import Command
    from fpga.kvmu.model import kernel_per_cycle, run_commands

    cmds = [Command(Op.INIT), Command(Op.SPECULATE, 2), Command(Op.WAIT, 3)]
    trace = run_commands(cmds, 16)
    ops = np.array([int(c.op) for c in cmds], np.int64)
    kernel_per_cycle(ops, np.array([c.arg for c in cmds], np.int64), 16)
    del trace


def _gemv() -> None:
    import numpy as np

    from fpga.functional.gemv import matmul_i8_host

    matmul_i8_host(np.ones((2, 8), np.int8), np.ones((3, 8), np.int8))


#: the families, in the order the studies need them (one process: ``tasks.py run --jobs 1``)
FAMILIES: tuple[tuple[str, Callable[[], None]], ...] = (
    ("instruction", _instruction),
    ("streaming", _streaming),
    ("kvmu", _kvmu),
    ("hbm", _hbm),
    ("gemv", _gemv),
    ("late", _late),
)

#: the families of each of two processes (``tasks.py test``), run in the order listed and balanced by their compile
#: times with an empty cache (CPU-s, 2-core VM, 2026-12-04: hbm 13.5, instruction ~7 | kvmu 2.3, gemv 1.5, late 4.3,
#: streaming ~11 -> ~20 s wall each; the history is in CHANGELOG.md, rounds 12-15). The HBM channel kernel
#: (channel_request_at, ~6 CPU-s) is called by the instruction simulator and the streaming engine: part 0 compiles it
#: first while part 1 compiles kernels that do not call it, so it is compiled once, not by both side by side
TWO_PARTS: tuple[tuple[str, ...], ...] = (("hbm", "instruction"), ("kvmu", "gemv", "late", "streaming"))


def warm(part: int = 0, parts: int = 1, verbose: bool = False) -> None:
    """Run this part's families (of two: :data:`TWO_PARTS`; else every ``parts``-th from ``part``); stderr names any
    that failed, ``verbose`` each one's CPU time."""
    if parts == 2:
        mine = [(name, dict(FAMILIES)[name]) for name in TWO_PARTS[part]]
    else:
        mine = list(FAMILIES[part::parts])
    for name, fn in mine:
        t0 = time.process_time()
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - a warm-up never fails the run; what is missing compiles later
            print(f"warm_kernels: {name} skipped ({type(exc).__name__}: {exc})"[:200], file=sys.stderr)
            continue
        if verbose:
            print(f"warm_kernels: {name} {time.process_time() - t0:.1f} CPU-s", file=sys.stderr)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "-v"]
    warm(int(args[0]) if args else 0, int(args[1]) if len(args) > 1 else 1, verbose="-v" in sys.argv)
