"""Workloads: reasoning traces for system A (the trace schema and its validator, the RSD-log importer, and the
trace generator built from real data; docs/traces.md) and serving request streams for system B
(:mod:`hwmodel.workload.requests`; docs/serving.md)."""

from hwmodel.workload.trace import Attempt, Problem, Replay, Trace, TraceError, TraceHeader, replay, replay_of
from hwmodel.workload.traceio import parse_trace_text, read_trace, write_trace

__all__ = [
    "Attempt",
    "Problem",
    "Replay",
    "Trace",
    "TraceError",
    "TraceHeader",
    "parse_trace_text",
    "read_trace",
    "replay",
    "replay_of",
    "write_trace",
]
