"""The GPU back-end: an LLM on a GPU spec under a serving framework (``gpu.latency.GpuEngine``); data-centre GPUs
and edge boards alike (an edge board is a GPU spec with its framework and its own link)."""

from __future__ import annotations

import dataclasses

from hwmodel.backends import BACKENDS, Device, DeviceEntry, need
from hwmodel.specs import library


@dataclasses.dataclass(frozen=True)
class GpuBackend:
    name: str = "gpu"

    def build(self, entry: DeviceEntry, llm: str, where: str) -> Device:
        from gpu.latency import GpuEngine

        gpu = library().gpu(need(entry, "gpu", where, "a GPU spec name"))
        framework = need(entry, "framework", where, "a serving framework name")
        engine = GpuEngine(gpu.name, llm, framework=framework)
        return Device(
            engine=engine,
            display_name=entry.label or gpu.display_name,
            host_link=entry.link or gpu.host_link,
            board=None,
            kv_bits=engine.kv_bits,
            warm_ctx=1024,
        )


BACKENDS.register("gpu", GpuBackend())
