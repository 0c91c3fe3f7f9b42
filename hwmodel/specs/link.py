"""Link specs: a point-to-point link's bandwidth and latency (:class:`LinkSpec`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import ClassVar

from hwmodel.schema import non_negative, positive, sourced
from hwmodel.specs.base import Spec


@dataclasses.dataclass(frozen=True, kw_only=True)
class LinkSpec(Spec):
    """A point-to-point link (PCIe generation x width, or a network link): bandwidth and latency, one direction."""

    KIND: ClassVar[str] = "link"
    raw_bw_bytes_per_s: float = sourced(check=positive, unit="B/s", doc="signalling rate after line coding")
    effective_bw_bytes_per_s: float = sourced(check=positive, unit="B/s", doc="typical achieved DMA bandwidth")
    latency_s: float = sourced(check=non_negative, unit="s", doc="one-way latency of a transfer")

    def _validate(self) -> Iterator[tuple[str, str, object]]:
        if self.effective_bw_bytes_per_s > self.raw_bw_bytes_per_s:
            yield (
                "effective_bw_bytes_per_s",
                f"at most raw_bw_bytes_per_s ({self.raw_bw_bytes_per_s:g})",
                self.effective_bw_bytes_per_s,
            )
