"""Device activity during a simulated problem: what each device did when, at what power (for energy, utilization
and the Perfetto timeline).

A :class:`Device` refuses an activity that overlaps one already recorded: no device ever runs two things at once
(the policies are written so that it never happens; the check makes a violation an error, not a wrong number).
"""

from __future__ import annotations

import bisect
import dataclasses

from hwmodel.engine import Phase
from hwmodel.errors import HwmodelError

_EPS_S = 1e-12


class OverlapError(HwmodelError):
    """A policy asked a device to run two things at once (a bug in the policy, reported with both activities)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Activity:
    start_s: float
    end_s: float
    phase: Phase
    label: str
    power_w: float
    busy_s: float  # of the span, the time the device actually computes (the rest is idle, at idle power)

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s

    @property
    def energy_j(self) -> float:
        """Energy above nothing: busy time at ``power_w`` (the idle rest is counted with the device's idle)."""
        return self.power_w * self.busy_s


class Device:
    """One device (GPU, FPGA board, edge board) of the simulated system, with its activity log."""

    def __init__(self, name: str, role: str, idle_power_w: float, keep_log: bool = True) -> None:
        self.name = name
        self.role = role
        self.idle_power_w = idle_power_w
        self.keep_log = keep_log
        self.log: list[Activity] = []
        self.busy_s = 0.0
        self.busy_energy_j = 0.0
        self._starts: list[float] = []  # every activity's interval, sorted by start (recorded in any order)
        self._spans: list[tuple[float, float, str]] = []
        self._last_end_s = 0.0

    def record(self, start_s: float, end_s: float, phase: Phase, label: str, power_w: float) -> None:
        """Log an activity; refuse it if it overlaps one already logged (activities may be logged out of order:
        a policy may schedule work that starts after another activity it has not logged yet)."""
        self.record_window(start_s, end_s, end_s - start_s, phase, label, power_w)

    def record_window(
        self, start_s: float, end_s: float, busy_s: float, phase: Phase, label: str, power_w: float
    ) -> None:
        """Reserve ``[start_s, end_s]`` for one activity that keeps the device busy ``busy_s`` of it (the rest is
        idle time, e.g. waiting for the next streamed token); same overlap rule as :meth:`record`."""
        if end_s < start_s - _EPS_S or busy_s > end_s - start_s + _EPS_S:
            raise OverlapError(
                f"{self.name}: activity '{label}' from {start_s:.9f} s to {end_s:.9f} s cannot be busy {busy_s:.9f} s"
            )
        if end_s <= start_s:
            return
        starts = self._starts
        # bisect_right, answered without the search when it starts last (the common case: activities in order)
        k = len(starts) if not starts or start_s >= starts[-1] else bisect.bisect_right(starts, start_s)
        if k > 0 and self._spans[k - 1][1] > start_s + _EPS_S:
            other = self._spans[k - 1]
            raise OverlapError(
                f"{self.name} would run two things at once: '{label}' starts at {start_s:.9f} s "
                f"while '{other[2]}' runs from {other[0]:.9f} s until {other[1]:.9f} s"
            )
        if k < len(self._spans) and self._spans[k][0] < end_s - _EPS_S:
            other = self._spans[k]
            raise OverlapError(
                f"{self.name} would run two things at once: '{label}' runs until {end_s:.9f} s "
                f"while '{other[2]}' starts at {other[0]:.9f} s"
            )
        self._starts.insert(k, start_s)
        self._spans.insert(k, (start_s, end_s, label))
        self.busy_s += busy_s
        self.busy_energy_j += power_w * busy_s
        self._last_end_s = max(self._last_end_s, end_s)
        if self.keep_log:
            self.log.append(Activity(start_s, end_s, phase, label, power_w, busy_s))

    @property
    def free_at_s(self) -> float:
        """When the last recorded activity ends."""
        return self._last_end_s

    def activities(self) -> list[Activity]:
        """The log in time order."""
        return sorted(self.log, key=lambda a: a.start_s)

    def energy_j(self, span_s: float) -> float:
        """Energy over ``[0, span_s]``: each activity at its power, the rest of the span idle."""
        return self.busy_energy_j + self.idle_power_w * max(0.0, span_s - self.busy_s)

    def utilization(self, span_s: float) -> float:
        return self.busy_s / span_s if span_s > 0 else 0.0


@dataclasses.dataclass(frozen=True, slots=True)
class Transfer:
    """One transfer over a link (tokens, a verdict, a KV cache)."""

    start_s: float
    end_s: float
    path: str  # e.g. "fpga->host->prm"
    n_bytes: int
    label: str

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s
