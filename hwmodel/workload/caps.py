"""The check that a trace stays within the context caps of the systems that replay it (``workload validate``).

A trace is only replayable on a system if no attempt pushes its context (prompt + committed tokens before it +
the attempt's own tokens) past what every device of that system can hold. The caps themselves (each LLM's
``max_position``, an FPGA design's ``max_ctx``, the KVMU capacity) come from the system layer
(:func:`hwmodel.reasoning.caps.systems_caps`), so this layer imports no device model. A trace that breaks a cap is
refused here, naming the file, the problem and the attempt, instead of failing inside the replay.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from hwmodel.workload.trace import Trace, TraceError, replay_of


def peak_contexts(trace: Trace) -> Iterable[tuple[int, int, int]]:
    """(problem index, attempt index, context after that attempt) for the largest context of every problem."""
    for i, problem in enumerate(trace.problems):
        rep = replay_of(problem, trace.header)
        peaks = [c + a.tokens for c, a in zip(rep.context_tokens, problem.attempts)]
        k = max(range(len(peaks)), key=peaks.__getitem__)
        yield i, k, peaks[k]


def check_trace_caps(trace: Trace, path: Path | str, caps: Iterable[tuple[int, str]]) -> None:
    """Raise TraceError for the first problem whose context exceeds one of ``caps`` ((tokens, what) pairs)."""
    pairs = list(caps)
    if not pairs:
        return
    limit, why = min(pairs, key=lambda c: c[0])
    for i, k, peak in peak_contexts(trace):
        if peak > limit:
            p = trace.problems[i]
            raise TraceError(
                path,
                None,
                f"attempts[{k}]",
                f"expected contexts of at most {limit:,} tokens ({why}), got {peak:,} in problem "
                f"{p.dataset}/{p.id} (prompt {p.prompt_tokens:,} + committed steps + this attempt)",
            )
