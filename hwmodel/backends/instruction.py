"""The instruction-driven-FPGA back-end: a design that executes compiled instruction streams
(``fpga.instruction.engine.InstructionEngine``) at any clock, on its board spec; per-token decode and ingest times
simulated every ``ctx_grid`` contexts (:mod:`hwmodel.sampled`), multi-token prefill by the design's own batched
(MM-mode) program."""

from __future__ import annotations

import dataclasses

from hwmodel.backends import BACKENDS, Device, DeviceEntry, need
from hwmodel.errors import SpecError
from hwmodel.sampled import ContextSampledEngine
from hwmodel.specs import library

DEFAULT_CTX_GRID = 16


@dataclasses.dataclass(frozen=True)
class InstructionBackend:
    name: str = "instruction"

    def build(self, entry: DeviceEntry, llm: str, where: str) -> Device:
        from fpga.instruction.design import load_design
        from fpga.instruction.engine import InstructionEngine

        design = load_design(need(entry, "design", where, "an instruction design name or path"))
        if design.llm != llm:
            raise SpecError(where, "design", f"a design running {llm}", f"{design.name} (runs {design.llm})")
        engine = InstructionEngine(design, clock_hz=entry.clock_hz)
        board = library().board(design.board)
        clock = engine.design.clock_hz
        sampled = ContextSampledEngine(engine, entry.ctx_grid or DEFAULT_CTX_GRID, prefill="engine")
        label = entry.label or f"{board.display_name} ({design.name} @ {clock / 1e6:.0f} MHz)"
        return Device(
            engine=sampled,
            display_name=label,
            host_link=entry.link or board.host_link,
            board=board.name,
            kv_bits=int(design.kv_bits),
            warm_ctx=0,
        )


BACKENDS.register("instruction", InstructionBackend())
