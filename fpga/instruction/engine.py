"""Instruction-driven FPGA decode accelerator (FlightLLM lineage, GLITCHES system B): the public face.

* :func:`load_design` -- a built-in design (``glitches-u280``, ``glitches-v80``) or a design TOML;
* :class:`InstructionEngine` -- implements :class:`hwmodel.engine.Engine` on the cycle-level model: every
  ``decode_s(ctx)`` / ``prefill_s(n, ctx)`` compiles the LLM for the design (:mod:`fpga.instruction.compiler`) and runs the
  instruction stream through the scheduler / scoreboard / datamover / HBM / compute model
  (:mod:`fpga.instruction.simulator`); results are memoized by context length.

The modules behind it: :mod:`fpga.instruction.isa` (instruction encoding), :mod:`fpga.instruction.design` (design TOML),
:mod:`fpga.instruction.compiler` (lowering) with :mod:`~fpga.instruction.layout`, :mod:`~fpga.instruction.prefetch`
(coalescing ratio), :mod:`~fpga.instruction.emitter`, :mod:`~fpga.instruction.scoreboard`, :mod:`~fpga.instruction.program`,
:mod:`fpga.instruction.simulator` (Numba engine),
:mod:`fpga.instruction.reference` (cycle-stepped reference).
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Any

import numpy as np

from fpga.instruction import run as instruction_sim
from fpga.instruction.compiler import Compiler
from fpga.instruction.design import InstructionDesign, design_names, load_design
from fpga.instruction.layout import build_layout
from fpga.instruction.placement import MultiCompiler
from fpga.instruction.prefetch import max_prefetch_ratio
from fpga.instruction.program import MultiProgram, Program
from hwmodel.engine import Capability, Phase
from hwmodel.errors import HwmodelError

__all__ = ["InstructionEngine", "RunResult", "load_design", "design_names", "InstructionDesign"]


@dataclasses.dataclass(frozen=True)
class RunResult:
    """One simulated run (a decode step or a prefill): time, traffic and activity."""

    cycles: int
    clock_hz: float
    counters: dict[str, int]
    peak_bw_bytes_per_s: float  # the board's HBM peak, for utilization
    engines: tuple[dict[str, int], ...] = ()  # per engine (designs of several): ENGINE_COUNTER_NAMES

    @property
    def seconds(self) -> float:
        return self.cycles / self.clock_hz

    @property
    def hbm_bytes(self) -> int:
        return self.counters["read_bytes"] + self.counters["write_bytes"]

    @property
    def achieved_bw_bytes_per_s(self) -> float:
        return self.hbm_bytes / self.seconds

    @property
    def hbm_utilization(self) -> float:
        """Achieved bandwidth over the board's peak HBM bandwidth (460 GB/s on U280)."""
        return self.achieved_bw_bytes_per_s / self.peak_bw_bytes_per_s

    @property
    def mpe_busy_fraction(self) -> float:
        """Busy cycles over the run's cycles, averaged over the engines of a design of several."""
        return self.counters["mpe_busy_cycles"] / (self.cycles * max(1, len(self.engines)))

    @property
    def sfu_busy_fraction(self) -> float:
        return self.counters["sfu_busy_cycles"] / (self.cycles * max(1, len(self.engines)))

    def as_dict(self) -> dict[str, Any]:
        return {
            "seconds": self.seconds,
            "cycles": self.cycles,
            "clock_hz": self.clock_hz,
            "hbm_bytes": self.hbm_bytes,
            "achieved_bw_bytes_per_s": self.achieved_bw_bytes_per_s,
            "hbm_utilization": self.hbm_utilization,
            "mpe_busy_fraction": self.mpe_busy_fraction,
            "sfu_busy_fraction": self.sfu_busy_fraction,
            "counters": dict(self.counters),
            **({"engines": [dict(e) for e in self.engines]} if self.engines else {}),
        }


def _resolve(design: InstructionDesign | str | Path) -> InstructionDesign:
    return design if isinstance(design, InstructionDesign) else load_design(design)


class InstructionEngine:
    """An instruction-driven design running its LLM (implements :class:`hwmodel.engine.Engine`).

    ``prefetch_ratio`` overrides the design's coalescing ratio k; ``clock_hz`` its kernel clock (the HBM keeps its
    own clock, so time does not scale with it).
    """

    CAPABILITIES = frozenset(
        {
            Capability.DECODER,
            Capability.PREFILLER,
            Capability.INGESTER,
            Capability.POWERED,
            Capability.MEMORY_FACTS,
            Capability.CONTEXT_BOUND,
        }
    )

    def __init__(
        self, design: InstructionDesign | str | Path, prefetch_ratio: int | None = None, clock_hz: float | None = None
    ) -> None:
        d = _resolve(design)
        if clock_hz is not None:
            from hwmodel.domains import check_kernel_clock

            check_kernel_clock(d.board_spec, clock_hz, "kernel clock override")
            d = d.with_params({"clock_hz": clock_hz})
        self.design = d
        self.prefetch_ratio = d.prefetch_ratio if prefetch_ratio is None else int(prefetch_ratio)
        self.compiler = _compiler(d, self.prefetch_ratio)
        self.llm = self.compiler.llm
        self.board = d.board_spec
        self.name = f"{d.name}@k{self.prefetch_ratio}"
        self._decode = functools.lru_cache(maxsize=None)(self._decode_uncached)
        self._prefill = functools.lru_cache(maxsize=None)(self._prefill_uncached)

    # ---- memory the serving simulator must respect
    @property
    def weights_bytes(self) -> int:
        """HBM bytes of weights, quantization metadata, embedding table and output head."""
        return self.compiler.layout.weights_bytes

    def kv_bytes(self, ctx: int) -> int:
        """HBM bytes of the KV cache of ``ctx`` tokens."""
        return ctx * self.compiler.layout.kv_bytes_per_token

    @property
    def hbm_capacity_bytes(self) -> int:
        return self.board.hbm.capacity_bytes

    @property
    def max_ctx(self) -> int:
        return self.llm.max_position

    @property
    def memory_capacity_bytes(self) -> int:
        return int(self.hbm_capacity_bytes)

    @property
    def resident_bytes(self) -> int:
        return int(self.weights_bytes)

    # ---- runs
    def run(self, program: Program | MultiProgram) -> RunResult:
        counters = instruction_sim.simulate_program(self.design, program)
        per_engine = tuple(counters.pop("engines", ()))
        return RunResult(
            cycles=counters["cycles"],
            clock_hz=self.design.clock_hz,
            counters=counters,
            peak_bw_bytes_per_s=self.board.hbm.peak_bw_bytes_per_s,
            engines=per_engine,
        )

    def _decode_uncached(self, ctx: int) -> RunResult:
        return self.run(self.compiler.decode_program(ctx))

    def _prefill_uncached(self, n_tokens: int, ctx: int, logits: bool) -> RunResult:
        return self.run(self.compiler.prefill_program(n_tokens, ctx, logits))

    def decode(self, ctx: int) -> RunResult:
        """One decoded token after ``ctx`` cached tokens (memoized)."""
        return self._decode(int(ctx))

    def prefill(self, n_tokens: int, ctx: int = 0, logits: bool = True) -> RunResult:
        return self._prefill(int(n_tokens), int(ctx), bool(logits))

    # ---- Engine protocol
    def decode_s(self, ctx: int) -> float:
        return self.decode(ctx).seconds

    def decode_steps_s(self, ctx0: int, n_steps: int) -> np.ndarray:
        """Times of ``n_steps`` consecutive decoded tokens at contexts ``ctx0 .. ctx0 + n_steps - 1``."""
        return np.array([self.decode_s(ctx0 + i) for i in range(n_steps)], dtype=float)

    def prefill_s(self, n_tokens: int, ctx: int = 0) -> float:
        return self.prefill(n_tokens, ctx, True).seconds

    def ingest_s(self, n_tokens: int, ctx: int) -> float:
        """Forward passes over ``n_tokens`` that arrive from elsewhere (KV filled, no output head)."""
        return self.prefill(n_tokens, ctx, False).seconds

    def decode_mean_s(self, ctx0: int, n_tokens: int) -> float:
        """Mean time per token of ``n_tokens`` decode steps starting at context ``ctx0`` (every step simulated)."""
        if n_tokens < 1:
            raise HwmodelError(f"need at least one decode step, got {n_tokens}")
        return sum(self.decode_s(ctx0 + i) for i in range(n_tokens)) / n_tokens

    def power_w(self, phase: Phase) -> float:
        from fpga.instruction.power import phase_power_w

        return phase_power_w(self, phase)


@functools.lru_cache(maxsize=32)
def _compiler(design: InstructionDesign, k: int) -> Compiler | MultiCompiler:
    """Compilers (and their template caches) depend only on the design's structure, not its timing values.

    The cached structure has no name, so a compiler error is re-raised naming the design and its file."""
    try:
        return _compiler_for_structure(structure_of(design), k)
    except HwmodelError as exc:
        where = f"{design.origin}: design '{design.name}'" if design.origin else f"design '{design.name}'"
        msg = str(exc).replace("design ''", where)
        if msg == str(exc):
            msg = f"{where}: {msg}"
        err = type(exc).__new__(type(exc))
        Exception.__init__(err, msg)
        err.__dict__.update(exc.__dict__)
        raise err from None


@functools.lru_cache(maxsize=32)
def _compiler_for_structure(structure: InstructionDesign, k: int) -> Compiler | MultiCompiler:
    return MultiCompiler(structure, k) if structure.engines > 1 else Compiler(structure, k)


def structure_of(design: InstructionDesign) -> InstructionDesign:
    """The design with every field the compiler does not read set to a canonical value (cache key)."""
    return dataclasses.replace(
        design,
        name="",
        display_name="",
        notes="",
        clock_hz=1.0,
        prefetch_ratio=1,
        mpe=dataclasses.replace(design.mpe, pipeline_cycles=0, mv_overhead_cycles=0, mm_efficiency=1.0),
        sfu=dataclasses.replace(design.sfu, pipeline_cycles=0, lanes=1),
        datamover=dataclasses.replace(
            design.datamover, port_width_bits=256, request_queue_depth=1, outstanding=1, request_latency_cycles=0
        ),
        scheduler=dataclasses.replace(design.scheduler, issue_cycles=1, unit_queue_depth=1, sync_cycles=1),
    )


__all__ += ["max_prefetch_ratio", "build_layout", "structure_of"]
