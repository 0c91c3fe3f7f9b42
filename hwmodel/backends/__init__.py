"""Device back-ends: a device entry of a system spec (a GPU + framework, a streaming design, an instruction design,
an edge board; at any clock, on any board spec) -> an engine for one LLM (ARCHITECTURE.md, "Layers").

Each back-end is one file of this package that registers itself in :data:`BACKENDS` (a user's back-end is one
file too: :func:`hwmodel.registry.load_plugin`). A back-end reads only the fields of :class:`DeviceEntry` it
needs, refuses the others' absence with a one-line error naming the spec and field, and returns a
:class:`Device`: the engine, what the reports call it, its host link, and (for boards) the board spec name and KV
precision a migrated KV cache arrives in. The systems never ask which back-end made an engine: they ask the
engine's capabilities (:mod:`hwmodel.engine`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol

from hwmodel.errors import HwmodelError, SpecError
from hwmodel.registry import Registry
from hwmodel.schema import plain, positive, sourced


@dataclasses.dataclass(frozen=True, kw_only=True)
class DeviceEntry:
    """One device of a system spec (``[devices.NAME]``): which back-end builds it and that back-end's settings."""

    backend: str = sourced(doc="back-end that builds the engine (hwmodel.backends: gpu, streaming, instruction...)")
    attach: str = sourced(doc="how the host reaches the device: local-server, remote-server or host-driven")
    gpu: str | None = sourced(default=None, doc="GPU spec (gpu back-end)")
    framework: str | None = sourced(default=None, doc="serving framework (gpu back-end)")
    design: str | None = sourced(default=None, doc="FPGA design name or path (streaming, instruction back-ends)")
    clock_hz: float | None = sourced(
        default=None, check=positive, unit="Hz", doc="kernel clock (FPGA back-ends; default the design's)"
    )
    link: str | None = sourced(default=None, doc="link spec to the host (default: the device spec's host link)")
    ctx_grid: int | None = sourced(
        default=None,
        check=positive,
        unit="tokens",
        doc="contexts between exact per-token simulations (FPGA back-ends; default 16)",
    )
    label: str = plain(default="", doc="display name in reports (default: the back-end's)")

    def describe(self) -> str:
        """One line for reports: the back-end and the settings given."""
        parts = [x for x in (self.gpu, self.framework, self.design) if x]
        if self.clock_hz:
            parts.append(f"{self.clock_hz / 1e6:.0f} MHz")
        if self.link:
            parts.append(f"over {self.link}")
        return f"{self.backend} {' / '.join(parts)} ({self.attach})"


@dataclasses.dataclass(frozen=True)
class Device:
    """An engine built by a back-end, with what a system needs to place it (module docstring)."""

    engine: Any
    display_name: str
    host_link: str  # link spec name between the device and its host
    board: str | None = None  # FPGA board spec name (where a migrated KV cache lands), None for a GPU
    kv_bits: int = 16  # precision of the KV cache the device keeps
    warm_ctx: int = 1024  # contexts worth tabulating at once (0: an expensive engine, tabulated on demand)


class Backend(Protocol):
    @property
    def name(self) -> str: ...

    def build(self, entry: DeviceEntry, llm: str, where: str) -> Device:
        """The device ``entry`` running ``llm``; ``where`` names the spec field for error messages."""
        ...


BACKENDS: Registry[Backend] = Registry("device back-end", "hwmodel.backends")


def need(entry: DeviceEntry, field: str, where: str, what: str) -> Any:
    """A field the back-end needs (a one-line error naming the spec and field when it is absent)."""
    value = getattr(entry, field)
    if value is None:
        raise SpecError(where, field, f"{what} (back-end '{entry.backend}')", "nothing")
    return value


def build_device(entry: DeviceEntry, llm: str, where: str = "") -> Device:
    """The device of ``entry`` running ``llm``, memoized per process by (entry, llm): a reproduction builds each
    engine once, shared by every system and role that names the same device. ``where`` names the spec field in
    error messages."""
    key = (entry, llm)
    dev = _devices.get(key)
    if dev is None:
        backend = BACKENDS.get(entry.backend)
        try:
            dev = backend.build(entry, llm, where)
        except HwmodelError:
            raise
        except ModuleNotFoundError as exc:
            raise HwmodelError(
                f"{where}: back-end '{entry.backend}' needs a device model this checkout lacks ({exc})"
            ) from None
        _devices[key] = dev
    return dev


_devices: dict[tuple[DeviceEntry, str], Device] = {}


def clear_devices() -> None:
    """Forget every device built so far (benchmarks: cold runs)."""
    _devices.clear()
