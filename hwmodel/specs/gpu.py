"""GPU specs: memory, tensor-core peaks, power and price (:class:`GpuSpec`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import ClassVar

from hwmodel.schema import positive, sourced
from hwmodel.specs.base import Spec


@dataclasses.dataclass(frozen=True, kw_only=True)
class GpuSpec(Spec):
    """A GPU: memory, tensor-core peaks, power and price."""

    KIND: ClassVar[str] = "gpu"
    memory_bytes: int = sourced(check=positive, unit="B")
    mem_bw_bytes_per_s: float = sourced(check=positive, unit="B/s", doc="peak DRAM bandwidth")
    mem_bw_measured_bytes_per_s: float = sourced(check=positive, unit="B/s", doc="sustained (stream-like) bandwidth")
    fp16_flops: float = sourced(check=positive, unit="FLOP/s", doc="dense FP16/BF16 tensor peak")
    int8_ops: float = sourced(check=positive, unit="OP/s", doc="dense INT8 peak")
    tdp_w: float = sourced(check=positive, unit="W")
    idle_power_w: float = sourced(check=positive, unit="W")
    host_link: str = sourced(doc="name of the link spec of the host interface")
    price_usd: float = sourced(check=positive, unit="USD")

    def _validate(self) -> Iterator[tuple[str, str, object]]:
        if self.mem_bw_measured_bytes_per_s > self.mem_bw_bytes_per_s:
            yield (
                "mem_bw_measured_bytes_per_s",
                f"at most mem_bw_bytes_per_s ({self.mem_bw_bytes_per_s:g})",
                self.mem_bw_measured_bytes_per_s,
            )
        if self.idle_power_w >= self.tdp_w:
            yield "idle_power_w", f"below tdp_w ({self.tdp_w:g})", self.idle_power_w

    def peak_ops_per_s(self, weight_bits: int) -> float:
        """Tensor peak for the precision the weights run at: FP16 for 16-bit weights, INT8 for 8/4-bit (A8)."""
        return self.fp16_flops if weight_bits >= 16 else self.int8_ops
