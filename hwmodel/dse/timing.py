"""Timing-closure heuristic: the kernel clock a design can reach falls as its resource utilisation rises.

This is a documented *heuristic*, not a place-and-route model. It answers the DSE question "would this design
close timing at the clock the sweep asks for?" well enough to keep obviously over-packed points off a Pareto front.

Reasoning and sources:

1. **Below the vendor's utilisation guidelines the clock is not limited by utilisation.** AMD's Vitis guide
   (UG1393, "Timing Closure Considerations") warns that performance can be lower than estimated once device or SLR
   utilisation exceeds: LUT 70 %, FF 50 %, DSP / block RAM / UltraRAM 80 %. Those are the *knees* here. Below every
   knee the reachable clock is the board's fabric ceiling (``BoardSpec.max_kernel_clock_hz``; 450 MHz on U280, the
   HBM AXI clock).
2. **Above a knee it falls linearly**, reaching ``full_fraction`` of the ceiling at 100 % use of that resource.
   ``full_fraction = 0.5`` is chosen so a fully packed U280 design lands near 225 MHz, the clock heavily utilised
   published U280 LLM designs report (FlightLLM 225 MHz; DFX 200 MHz; shared/research/hardware.md s1.1) while a
   lightly used, well pipelined design keeps the ceiling. The most congested resource sets the clock.
3. **SLR crossings cost a little more.** A multi-die device (U280: 3 SLRs, all 32 HBM ports in SLR0) packed at
   utilisation u spans ``ceil(u x SLRs)`` dies; each extra die adds Laguna/SLL crossings on the datapath.
   Pipelined crossings (TAPA/RapidStream insert FF-to-FF crossings) keep most of the clock, so each extra SLR costs
   ``slr_derate = 5 %``. UG949 ("SLR Utilization Example") recommends balanced SLR use for the same reason.

All constants live in :class:`TimingModel`, so a study can state and vary them (a sweep spec's evaluator takes them
as parameters). The function is monotone: more utilisation never raises the clock (tests check this).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

RESOURCES = ("lut", "ff", "dsp", "bram", "uram")


@dataclasses.dataclass(frozen=True)
class TimingModel:
    """Constants of the heuristic (see the module docstring for where each comes from)."""

    knee: Mapping[str, float] = dataclasses.field(
        default_factory=lambda: {"lut": 0.70, "ff": 0.50, "dsp": 0.80, "bram": 0.80, "uram": 0.80}
    )
    full_fraction: float = 0.5
    slr_derate: float = 0.05

    def derate(self, resource: str, util: float) -> float:
        """Fraction of the ceiling reachable at utilisation ``util`` of one resource (1 below its knee)."""
        k = self.knee[resource]
        if util <= k:
            return 1.0
        over = min(util, 1.0) - k
        return 1.0 - (1.0 - self.full_fraction) * over / (1.0 - k)


DEFAULT_TIMING = TimingModel()


def slrs_spanned(util: Mapping[str, float], slrs: int) -> int:
    """Dies a design packed at its highest utilisation spans (at least 1, at most ``slrs``)."""
    u = max((util.get(r, 0.0) for r in RESOURCES), default=0.0)
    return int(min(slrs, max(1, math.ceil(u * slrs - 1e-9))))


def reachable_clock_hz(
    ceiling_hz: float, util: Mapping[str, float], slrs: int, model: TimingModel = DEFAULT_TIMING
) -> float:
    """The kernel clock a design with utilisation ``util`` (resource -> fraction of the board) is expected to close.

    ``util`` keys are among lut, ff, dsp, bram, uram (missing ones count as unused); ``ceiling_hz`` is the board's
    fabric clock ceiling; ``slrs`` its number of dies. Utilisation above 1 does not fit at all (a separate
    constraint); here it is treated as 1.
    """
    unknown = set(util) - set(RESOURCES)
    if unknown:
        raise ValueError(f"unknown resource(s) {sorted(unknown)}; expected {RESOURCES}")
    worst = min((model.derate(r, util.get(r, 0.0)) for r in RESOURCES), default=1.0)
    crossings = slrs_spanned(util, slrs) - 1
    return ceiling_hz * worst * (1.0 - model.slr_derate) ** crossings
