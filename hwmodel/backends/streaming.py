"""The streaming-FPGA back-end: a fully-streaming dataflow design (``fpga.streaming.engine.StreamingEngine``) at any
clock, on its board spec; per-token times simulated every ``ctx_grid`` contexts (:mod:`hwmodel.sampled`), prefill
token by token (the design has no batched prefill datapath)."""

from __future__ import annotations

import dataclasses

from hwmodel.backends import BACKENDS, Device, DeviceEntry, need
from hwmodel.errors import SpecError
from hwmodel.sampled import ContextSampledEngine
from hwmodel.specs import library

DEFAULT_CTX_GRID = 16  # contexts between exact token simulations (1 = every one; docs/reasoning.md measures it)


@dataclasses.dataclass(frozen=True)
class StreamingBackend:
    name: str = "streaming"

    def build(self, entry: DeviceEntry, llm: str, where: str) -> Device:
        from fpga.streaming import engine as streaming

        design = streaming.load_design(need(entry, "design", where, "a streaming design name or path"))
        if design.llm != llm:
            raise SpecError(where, "design", f"a design running {llm}", f"{design.name} (runs {design.llm})")
        engine = streaming.StreamingEngine(design, clock_hz=entry.clock_hz)
        board = library().board(design.board)
        clock = engine.clock_hz
        sampled = ContextSampledEngine(engine, entry.ctx_grid or DEFAULT_CTX_GRID, prefill="tokenwise")
        label = entry.label or f"{board.display_name} ({design.name} @ {clock / 1e6:.0f} MHz)"
        return Device(
            engine=sampled,
            display_name=label,
            host_link=entry.link or board.host_link,
            board=board.name,
            kv_bits=int(design.kv_bits),
            warm_ctx=0,
        )


BACKENDS.register("streaming", StreamingBackend())
