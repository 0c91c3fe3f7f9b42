"""Context caps of a reasoning system, and the check that a trace stays within them (``workload validate``).

A trace is only replayable on a system if no attempt pushes its context (prompt + committed tokens before it +
the attempt's own tokens) past what every device of that system can hold: each LLM's ``max_position`` (draft,
PRM, target), the FPGA draft design's ``max_ctx`` (the KV-cache rows it reserves in HBM) and the KVMU's
``kvmu_capacity_tokens``. A trace that breaks a cap is refused here, naming the file, the problem and the
attempt, instead of failing inside the replay.
"""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from hwmodel.workload.trace import Trace, TraceError, replay_of


def context_caps(system: Any) -> list[tuple[int, str]]:
    """(tokens, what) for every context cap of ``system`` (a :class:`hwmodel.reasoning.system.ReasoningSystem`)."""
    from hwmodel.specs import library

    lib = library()
    caps = [(lib.llm(getattr(system, f)).max_position, f"{f} '{getattr(system, f)}' max_position")
            for f in ("draft_llm", "prm_llm", "target_llm")]
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


def peak_contexts(trace: Trace) -> Iterable[tuple[int, int, int]]:
    """(problem index, attempt index, context after that attempt) for the largest context of every problem."""
    for i, problem in enumerate(trace.problems):
        rep = replay_of(problem, trace.header)
        peaks = [c + a.tokens for c, a in zip(rep.context_tokens, problem.attempts)]
        k = max(range(len(peaks)), key=peaks.__getitem__)
        yield i, k, peaks[k]


def check_trace_caps(trace: Trace, path: Path | str, systems: Iterable[Any]) -> None:
    """Raise TraceError for the first problem whose context exceeds a cap of one of ``systems``."""
    caps = [(cap, f"system '{s.name}': {what}") for s in systems for cap, what in context_caps(s)]
    if not caps:
        return
    limit, why = min(caps, key=lambda c: c[0])
    for i, k, peak in peak_contexts(trace):
        if peak > limit:
            p = trace.problems[i]
            raise TraceError(path, None, f"attempts[{k}]",
                             f"expected contexts of at most {limit:,} tokens ({why}), got {peak:,} in problem "
                             f"{p.dataset}/{p.id} (prompt {p.prompt_tokens:,} + committed steps + this attempt)")
