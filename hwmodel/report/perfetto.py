"""Timelines as Chrome trace event JSON (opens in https://ui.perfetto.dev and chrome://tracing).

Generic: a *track* is a named row (a device, a link); each slice has a start, an end, a name and optional args.
Times are seconds in, microseconds out (the format's unit).
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Slice:
    start_s: float
    end_s: float
    name: str
    category: str = ""
    args: Mapping[str, Any] = field(default_factory=dict)


def chrome_trace(tracks: Mapping[str, Sequence[Slice]], process_name: str = "hwmodel",
                 metadata: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The Chrome trace JSON object: one thread per track (in the given order), complete ('X') events."""
    events: list[dict[str, Any]] = [{"name": "process_name", "ph": "M", "pid": 1, "tid": 0,
                                     "args": {"name": process_name}}]
    for tid, (track, slices) in enumerate(tracks.items(), start=1):
        events.append({"name": "thread_name", "ph": "M", "pid": 1, "tid": tid, "args": {"name": track}})
        events.append({"name": "thread_sort_index", "ph": "M", "pid": 1, "tid": tid, "args": {"sort_index": tid}})
        for s in slices:
            ev: dict[str, Any] = {"name": s.name, "ph": "X", "pid": 1, "tid": tid, "ts": s.start_s * 1e6,
                                  "dur": max(0.0, s.end_s - s.start_s) * 1e6}
            if s.category:
                ev["cat"] = s.category
            if s.args:
                ev["args"] = dict(s.args)
            events.append(ev)
    out: dict[str, Any] = {"traceEvents": events, "displayTimeUnit": "ms"}
    if metadata:
        out["metadata"] = dict(metadata)
    return out


def write_chrome_trace(path: Path | str, tracks: Mapping[str, Sequence[Slice]], process_name: str = "hwmodel",
                       metadata: Mapping[str, Any] | None = None) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(chrome_trace(tracks, process_name, metadata), indent=None, separators=(",", ":")))
    return path
