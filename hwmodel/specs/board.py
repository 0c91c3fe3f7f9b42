"""FPGA board specs: resources, DSP packing, clocks, power and the memory sections (:class:`BoardSpec`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any, ClassVar

from hwmodel.errors import HwmodelError
from hwmodel.schema import non_negative, positive, sourced
from hwmodel.specs.base import Spec
from hwmodel.specs.memory import DdrSpec, HbmSpec


@dataclasses.dataclass(frozen=True, kw_only=True)
class FpgaResources:
    """Programmable resources available to user kernels (after the shell/platform)."""

    lut: int = sourced(check=positive)
    ff: int = sourced(check=positive)
    dsp: int = sourced(check=positive)
    bram18k: int = sourced(check=non_negative, doc="18 Kb block RAMs")
    uram: int = sourced(check=non_negative, doc="288 Kb UltraRAMs")


@dataclasses.dataclass(frozen=True, kw_only=True)
class DspPacking:
    """Multiply-accumulates one DSP slice does per cycle, per operand precision."""

    int4_macs: int = sourced(check=positive)
    int8_macs: int = sourced(check=positive)
    fp16_macs: float = sourced(check=positive)

    def macs(self, bits: int) -> float:
        """MACs per DSP per cycle for weights of ``bits`` bits (4 -> int4 packing, 8 -> int8, 16 -> fp16)."""
        return {4: self.int4_macs, 8: self.int8_macs, 16: self.fp16_macs}[bits]


class MissingMemory:
    """Stands in for a memory section a board does not have (``[hbm]`` on a DDR-only card, ``[ddr]`` on an
    HBM-only one): false in a test, and any use of it raises one line naming the board and the section."""

    def __init__(self, section: str, board: str, origin: str) -> None:
        self._section, self._board, self._origin = section, board, origin

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"(no [{self._section}])"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise HwmodelError(
            f"board '{self._board}' ({self._origin or 'no file'}) has no [{self._section}] section: "
            f"this needs a board with {self._section.upper()} (it asked for {self._section}.{name})"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (MissingMemory, (self._section, self._board, self._origin))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MissingMemory) and other._section == self._section

    def __hash__(self) -> int:
        return hash(("MissingMemory", self._section))


@dataclasses.dataclass(frozen=True, kw_only=True)
class BoardSpec(Spec):
    """An FPGA accelerator card. ``[hbm]`` and ``[ddr]`` are each optional (at least one): a card without one
    leaves the section out, and a model that needs it stops with one line naming the board."""

    KIND: ClassVar[str] = "fpga-board"
    part: str = sourced(doc="FPGA device part number")
    slrs: int = sourced(check=positive, doc="super logic regions (dies)")
    hbm: HbmSpec | None = None
    ddr: DdrSpec | None = None
    resources: FpgaResources
    dsp_packing: DspPacking
    typical_kernel_clock_hz: float = sourced(check=positive, unit="Hz")
    max_kernel_clock_hz: float = sourced(check=positive, unit="Hz", doc="fabric clock ceiling for the studies")
    host_link: str = sourced(doc="name of the link spec of the host interface")
    max_power_w: float = sourced(check=positive, unit="W")
    static_power_w: float = sourced(
        check=positive, unit="W", doc="the card idle with a bitstream loaded (HBM refreshed, PHYs up, fans)"
    )
    price_usd: float = sourced(check=positive, unit="USD")

    def __post_init__(self) -> None:
        for section in ("hbm", "ddr"):  # (again after dataclasses.replace: the loader sets origin last)
            if getattr(self, section) is None or isinstance(getattr(self, section), MissingMemory):
                object.__setattr__(self, section, MissingMemory(section, self.name, self.origin))

    def _validate(self) -> Iterator[tuple[str, str, object]]:
        if not self.hbm and not self.ddr:
            yield "hbm", "an [hbm] or a [ddr] section (the card's device memory)", None
        if self.typical_kernel_clock_hz > self.max_kernel_clock_hz:
            yield (
                "typical_kernel_clock_hz",
                f"at most max_kernel_clock_hz ({self.max_kernel_clock_hz:g})",
                self.typical_kernel_clock_hz,
            )

    @property
    def memory_bytes(self) -> int:
        """Fast memory that holds weights and KV cache for decode (HBM; DDR on a card without HBM)."""
        return self.hbm.capacity_bytes if self.hbm else self.ddr.capacity_bytes

    def peak_ops_per_s(self, weight_bits: int, clock_hz: float | None = None) -> float:
        """All DSPs busy: 2 ops per MAC x MACs per DSP x DSPs x clock (the compute roof of the board)."""
        clock = self.typical_kernel_clock_hz if clock_hz is None else clock_hz
        return 2.0 * self.dsp_packing.macs(weight_bits) * self.resources.dsp * clock
