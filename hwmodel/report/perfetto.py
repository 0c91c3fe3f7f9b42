"""Timelines as Chrome trace event JSON (opens in https://ui.perfetto.dev and chrome://tracing).

Generic: a *track* is a named row (a device, a link); each slice has a start, an end, a name and optional args.
Times are seconds in, microseconds out (the format's unit).

Perfetto (like chrome://tracing) draws the complete ('X') events of one thread as a stack: two slices on a thread
must be either disjoint or one nested inside the other. Concurrent activities of one device (a prefetch running
beside a decode, instructions in flight in one unit) partially overlap, so :func:`chrome_trace` spreads each
track's slices over as many *lanes* (threads named ``track``, ``track #2``, ...) as its largest number of
simultaneously open slices needs -- first-fit interval colouring, which is optimal for intervals -- so the UI never
sees a partial overlap. :func:`check_nesting` is the rule itself; the tests run it on every exporter.

Counters (HBM bandwidth, KVMU pointers) are 'C' events: a named series of (time, value) samples per track.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hwmodel.io import atomic_write_text

_US_PER_S = 1e6


@dataclass(frozen=True)
class Slice:
    start_s: float
    end_s: float
    name: str
    category: str = ""
    args: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Counter:
    """A counter track: ``values`` is a mapping series name -> value, sampled at ``time_s`` (held until the next)."""

    time_s: float
    values: Mapping[str, float]


def pack_lanes(slices: Sequence[Slice]) -> list[list[Slice]]:
    """Spread slices over lanes so that the slices of one lane never overlap (touching ends are fine).

    First-fit by start time over lanes ordered by when they free up: the number of lanes equals the largest number
    of slices open at one instant. Zero-length slices never conflict (an instant nests inside whatever spans it)
    and stay on the first lane. Order within a lane is by start time."""
    order = sorted(range(len(slices)), key=lambda i: (slices[i].start_s, slices[i].end_s, i))
    lanes: list[list[Slice]] = []
    free: list[tuple[float, int]] = []  # (end of the lane's last slice, lane index)
    instants = [slices[i] for i in order if slices[i].end_s <= slices[i].start_s]
    for i in order:
        s = slices[i]
        end = s.end_s
        if end <= s.start_s:
            continue
        if free and free[0][0] <= s.start_s:
            _, lane = heapq.heappop(free)
        else:
            lane = len(lanes)
            lanes.append([])
        lanes[lane].append(s)
        heapq.heappush(free, (end, lane))
    if instants:
        if not lanes:
            lanes.append([])
        lanes[0] = sorted(lanes[0] + instants, key=lambda x: (x.start_s, -x.end_s))
    return lanes


def chrome_trace(
    tracks: Mapping[str, Sequence[Slice]],
    process_name: str = "hwmodel",
    metadata: Mapping[str, Any] | None = None,
    counters: Mapping[str, Sequence[Counter]] | None = None,
) -> dict[str, Any]:
    """The Chrome trace JSON object: one thread per track lane (tracks in the given order), complete ('X') events,
    and one counter ('C') series per entry of ``counters``."""
    events: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": process_name}}
    ]
    tid = 0
    for track, slices in tracks.items():
        lanes = pack_lanes(slices) or [[]]
        for k, lane in enumerate(lanes):
            tid += 1
            label = track if k == 0 else f"{track} #{k + 1}"
            events.append({"name": "thread_name", "ph": "M", "pid": 1, "tid": tid, "args": {"name": label}})
            events.append({"name": "thread_sort_index", "ph": "M", "pid": 1, "tid": tid, "args": {"sort_index": tid}})
            for s in lane:
                ev: dict[str, Any] = {
                    "name": s.name,
                    "ph": "X",
                    "pid": 1,
                    "tid": tid,
                    "ts": s.start_s * _US_PER_S,
                    "dur": max(0.0, s.end_s - s.start_s) * _US_PER_S,
                }
                if s.category:
                    ev["cat"] = s.category
                if s.args:
                    ev["args"] = dict(s.args)
                events.append(ev)
    for name, samples in (counters or {}).items():
        for c in samples:
            events.append(
                {
                    "name": name,
                    "ph": "C",
                    "pid": 1,
                    "ts": c.time_s * _US_PER_S,
                    "args": {k: float(v) for k, v in c.values.items()},
                }
            )
    out: dict[str, Any] = {"traceEvents": events, "displayTimeUnit": "ms"}
    if metadata:
        out["metadata"] = dict(metadata)
    return out


def write_chrome_trace(
    path: Path | str,
    tracks: Mapping[str, Sequence[Slice]],
    process_name: str = "hwmodel",
    metadata: Mapping[str, Any] | None = None,
    counters: Mapping[str, Sequence[Counter]] | None = None,
) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    trace = chrome_trace(tracks, process_name, metadata, counters)
    atomic_write_text(path, json.dumps(trace, indent=None, separators=(",", ":")))  # whole or not at all
    return path


def check_nesting(trace: Mapping[str, Any], tolerance_us: float = 1e-6) -> list[str]:
    """Every violation of the rule Perfetto draws by: on one (pid, tid), complete events are disjoint or nested.

    Returns one line per offending pair (empty when the trace is well formed). ``tolerance_us`` absorbs the
    rounding of seconds to microseconds."""
    by_thread: dict[tuple[Any, Any], list[tuple[float, float, str]]] = {}
    for ev in trace.get("traceEvents", []):
        if ev.get("ph") == "X":
            t0 = float(ev["ts"])
            by_thread.setdefault((ev.get("pid"), ev.get("tid")), []).append(
                (t0, t0 + float(ev.get("dur", 0.0)), str(ev.get("name", "")))
            )
    problems = []
    for key, evs in by_thread.items():
        evs.sort(key=lambda e: (e[0], -e[1]))
        stack: list[tuple[float, float, str]] = []
        for t0, t1, name in evs:
            while stack and stack[-1][1] <= t0 + tolerance_us:
                stack.pop()
            if stack and t1 > stack[-1][1] + tolerance_us:
                p = stack[-1]
                problems.append(
                    f"thread {key}: '{name}' [{t0:.3f}, {t1:.3f}] us partially overlaps "
                    f"'{p[2]}' [{p[0]:.3f}, {p[1]:.3f}] us"
                )
            stack.append((t0, t1, name))
    return problems
