"""Context caps of a reasoning system: the most context any device of it can hold.

Each LLM's ``max_position`` (draft, PRM, target), the FPGA draft design's ``max_ctx`` (the KV-cache rows it
reserves in HBM) and the KVMU's ``kvmu_capacity_tokens``. The system layer reads them (it knows the devices); the
workload layer only checks a trace against them (:func:`hwmodel.workload.caps.check_trace_caps`), so it imports
no device model.
"""

from __future__ import annotations

from collections.abc import Iterable

from hwmodel.reasoning.system import ReasoningSystem
from hwmodel.specs import library


def context_caps(system: ReasoningSystem) -> list[tuple[int, str]]:
    """(tokens, what) for every context cap of ``system``."""
    lib = library()
    caps = [
        (lib.llm(getattr(system, f)).max_position, f"{f} '{getattr(system, f)}' max_position")
        for f in ("draft_llm", "prm_llm", "target_llm")
    ]
    try:
        from fpga.streaming.design import load_design

        for name, entry in system.devices.items():  # every streaming design the system can place a model on
            if entry.backend == "streaming" and entry.design:
                design = load_design(entry.design)
                caps.append((design.max_ctx, f"device '{name}': FPGA design '{design.name}' max_ctx"))
    except ImportError:  # pragma: no cover - checkout without the FPGA model
        pass
    caps.append((system.kvmu_capacity_tokens, "kvmu_capacity_tokens"))
    return caps


def systems_caps(systems: Iterable[ReasoningSystem]) -> list[tuple[int, str]]:
    """The caps of every system in ``systems``, each named with its system (for ``check_trace_caps``)."""
    return [(cap, f"system '{s.name}': {what}") for s in systems for cap, what in context_caps(s)]
