"""System configurations of system A (TOML, hwmodel/reasoning/systems/*.toml) and the platforms built from them.

A configuration names the three models and where each policy runs them: the baseline GPUs and their serving
framework, the FPGA draft design and clock, the edge board. Every value carries its source. ``build_platform``
turns a configuration and a policy into a :class:`~hwmodel.reasoning.platform.Platform` whose engines are the
project's device models: ``gpu.latency.GpuEngine`` (GPU and edge board), ``fpga.streaming.StreamingEngine``
(the FPGA draft), and ``interconnect.pcie`` for transfers. Engines are shared per process (memoized), so a
reproduction builds each one once.
"""
from __future__ import annotations

import dataclasses
import functools
import importlib
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from hwmodel.errors import HwmodelError, SpecError, UnknownNameError
from hwmodel.reasoning.costs import ContextSampledEngine, TimedEngine
from hwmodel.reasoning.platform import Platform, PromptMigration
from hwmodel.reasoning.policies import PolicySpec, policy as get_policy
from hwmodel.schema import internal, load_toml_as, non_negative, one_of, plain, positive, sourced
from hwmodel.specs import library

SYSTEMS_DIR = Path(__file__).resolve().parent / "systems"


class MissingDeviceModelError(HwmodelError):
    """A device model the platform needs is not part of this checkout."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReasoningSystem:
    """One configuration of system A (module docstring)."""

    kind: str = plain(check=one_of("reasoning-system"), doc="always 'reasoning-system'")
    name: str = plain(doc="the name used on the command line")
    display_name: str = plain(doc="human-readable name")
    notes: str = plain(default="")
    draft_llm: str = sourced(doc="LLM spec name of the draft")
    prm_llm: str = sourced(doc="LLM spec name of the process reward model")
    target_llm: str = sourced(doc="LLM spec name of the target")
    gpu: str = sourced(doc="GPU spec of every GPU server (draft in the baseline, PRM, target)")
    gpu_framework: str = sourced(doc="serving framework of the GPU servers")
    prm_prefix_cache: bool = sourced(doc="the PRM server reuses the KV of the unchanged prefix")
    api_call_overhead_s: float = sourced(check=non_negative, unit="s", doc="per request to a GPU model server")
    fpga_design: str = sourced(doc="FPGA draft design (fpga.streaming.load_design name)")
    fpga_clock_hz: float = sourced(check=positive, unit="Hz", doc="FPGA kernel clock")
    edge_gpu: str = sourced(doc="GPU spec of the edge board (edge-draft policy)")
    edge_framework: str = sourced(doc="serving framework of the edge draft")
    edge_link: str = sourced(doc="link spec between the edge board and the host")
    token_id_bytes: int = sourced(check=positive, unit="B", doc="a token id on the wire")
    kvmu_capacity_tokens: int = sourced(check=positive, unit="tokens", doc="KV slots the KVMU manages")
    origin: str = internal(default="")
    sources: Mapping[str, str] = internal(default_factory=dict)

    def _validate(self):  # noqa: ANN202 - generator of (field, expected, got)
        lib = library()
        for f in ("draft_llm", "prm_llm", "target_llm"):
            if getattr(self, f) not in lib.names("llm"):
                yield f, "an LLM spec name (" + ", ".join(lib.names("llm")) + ")", getattr(self, f)
        for f in ("gpu", "edge_gpu"):
            if getattr(self, f) not in lib.names("gpu"):
                yield f, "a GPU spec name (" + ", ".join(lib.names("gpu")) + ")", getattr(self, f)
        if self.edge_link not in lib.names("link"):
            yield "edge_link", "a link spec name (" + ", ".join(lib.names("link")) + ")", self.edge_link


def system_names() -> list[str]:
    return sorted(p.stem for p in SYSTEMS_DIR.glob("*.toml"))


@functools.cache
def load_system(name_or_path: str) -> ReasoningSystem:
    """A built-in configuration by name (config1, config2) or a TOML file by path."""
    path = Path(name_or_path)
    if not path.suffix:
        path = SYSTEMS_DIR / f"{name_or_path}.toml"
        if not path.is_file():
            raise UnknownNameError("reasoning system", str(name_or_path), system_names())
    sys_ = load_toml_as(ReasoningSystem, path)
    if path.parent == SYSTEMS_DIR and sys_.name != path.stem:
        raise SpecError(path, "name", f"'{path.stem}' (the file's name)", sys_.name)
    return sys_


def _module(name: str, what: str) -> Any:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        raise MissingDeviceModelError(f"the reasoning platform needs the {what} ({name}), which this checkout does "
                                      f"not have ({exc})") from None


@functools.cache
def gpu_engine(gpu: str, llm: str, framework: str, weight_bits: int | None = None) -> TimedEngine:
    """A memoized GPU engine (``gpu.latency.GpuEngine``)."""
    latency = _module("gpu.latency", "GPU latency model")
    kwargs: dict[str, Any] = {"framework": framework}
    if weight_bits is not None:
        kwargs["weight_bits"] = weight_bits
    return TimedEngine(latency.GpuEngine(gpu, llm, **kwargs))


FPGA_CTX_GRID = 16  # contexts between exact FPGA token simulations (costs.ContextSampledEngine; 1 = every one)


@functools.cache
def fpga_engine(design: str, clock_hz: float, ctx_grid: int = FPGA_CTX_GRID) -> TimedEngine:
    """A memoized FPGA streaming draft engine (``fpga.streaming.StreamingEngine``), its per-token times
    simulated every ``ctx_grid`` contexts (see :class:`~hwmodel.reasoning.costs.ContextSampledEngine`)."""
    streaming = _module("fpga.streaming", "FPGA streaming accelerator model")
    engine = streaming.StreamingEngine(streaming.load_design(design), clock_hz=clock_hz)
    return TimedEngine(ContextSampledEngine(engine, ctx_grid), initial_ctx=0)


class SystemLinks:
    """Transfers between the roles' devices and the host, timed by ``interconnect.pcie`` on each device's own host
    link: one DMA to or from the host, or a host-staged path (device -> host -> device) between two devices."""

    def __init__(self, role_links: Mapping[str, str]) -> None:
        self.pcie = _module("interconnect.pcie", "PCIe/link transfer model")
        lib = library()
        self.links = MappingProxyType({r: lib.link(n) for r, n in role_links.items()})
        self._memo: dict[tuple[str, str, int], float] = {}

    def transfer_s(self, src: str, dst: str, n_bytes: int) -> float:
        key = (src, dst, n_bytes)
        t = self._memo.get(key)
        if t is None:
            if src == "host":
                t = self.pcie.transfer_s(n_bytes, self.links[dst])
            elif dst == "host":
                t = self.pcie.transfer_s(n_bytes, self.links[src])
            else:
                t = self.pcie.host_staged_s(n_bytes, self.links[src], self.links[dst])
            t = self._memo[key] = float(t)
        return t


class _PromptMigrations:
    """``interconnect.pcie.kv_migration`` of the draft's prompt KV cache, memoized by prompt length."""

    def __init__(self, gpu: str, draft_llm: str, framework: str, board: str, kv_bits: int) -> None:
        latency = _module("gpu.latency", "GPU latency model")
        self.pcie = _module("interconnect.pcie", "PCIe/link transfer model")
        self.engine = latency.GpuEngine(gpu, draft_llm, framework=framework)
        self.board, self.kv_bits = board, kv_bits
        self._memo: dict[int, PromptMigration] = {}

    def __call__(self, n_tokens: int) -> PromptMigration:
        m = self._memo.get(n_tokens)
        if m is None:
            km = self.pcie.kv_migration(self.engine, self.board, n_tokens, path="host", kv_bits=self.kv_bits)
            power = self.engine.prefill_cost(n_tokens).power_w
            m = self._memo[n_tokens] = PromptMigration(prefill_s=km.prefill_s, prefill_power_w=float(power),
                                                       ready_s=km.total_s, transfer_s=km.transfer_s,
                                                       kv_bytes=km.kv_bytes)
        return m


@functools.cache
def prompt_migrations(gpu: str, draft_llm: str, framework: str, board: str, kv_bits: int) -> _PromptMigrations:
    return _PromptMigrations(gpu, draft_llm, framework, board, kv_bits)


def _kvmu_factory(capacity: int) -> Any:
    kvmu = _module("fpga.kvmu", "KVMU model")
    return functools.partial(kvmu.Kvmu, capacity)


def build_platform(system: ReasoningSystem | str, policy: PolicySpec | str, *, with_kvmu: bool = True) -> Platform:
    """The devices ``policy`` runs on in ``system`` (module docstring)."""
    sys_ = load_system(system) if isinstance(system, str) else system
    pol = get_policy(policy) if isinstance(policy, str) else policy
    lib = library()
    gpu = lib.gpu(sys_.gpu)
    prm = gpu_engine(sys_.gpu, sys_.prm_llm, sys_.gpu_framework)
    target = gpu_engine(sys_.gpu, sys_.target_llm, sys_.gpu_framework)
    names = {"prm": f"{gpu.display_name} (PRM)", "target": f"{gpu.display_name} (target)"}
    kvmu = None
    migration = None
    draft_overhead = sys_.api_call_overhead_s
    if pol.draft_on == "gpu":
        draft = gpu_engine(sys_.gpu, sys_.draft_llm, sys_.gpu_framework)
        names["draft"] = f"{gpu.display_name} (draft)"
        draft_link = gpu.host_link
    elif pol.draft_on == "fpga":
        draft = fpga_engine(sys_.fpga_design, sys_.fpga_clock_hz)
        design = draft.engine.engine.design  # TimedEngine -> ContextSampledEngine -> StreamingEngine
        board = lib.board(design.board)
        names["draft"] = f"{board.display_name} ({sys_.fpga_design} @ {sys_.fpga_clock_hz / 1e6:.0f} MHz)"
        draft_link = board.host_link
        # the target's GPU prefills the prompt with the draft model; its KV cache migrates once, overlapped
        migration = prompt_migrations(sys_.gpu, sys_.draft_llm, sys_.gpu_framework, board.name, int(design.kv_bits))
        draft_overhead = 0.0  # the host drives the FPGA directly (XRT/DMA), not through a model server
        if with_kvmu:
            kvmu = _kvmu_factory(sys_.kvmu_capacity_tokens)
    else:
        edge = lib.gpu(sys_.edge_gpu)
        draft = gpu_engine(sys_.edge_gpu, sys_.draft_llm, sys_.edge_framework)
        names["draft"] = f"{edge.display_name} (draft)"
        draft_link = sys_.edge_link
    links = SystemLinks({"draft": draft_link, "prm": gpu.host_link, "target": gpu.host_link})
    return Platform(draft=draft, prm=prm, target=target, links=links, device_names=names,
                    prompt_migration=migration, prm_prefix_cache=sys_.prm_prefix_cache,
                    api_call_overhead_s=sys_.api_call_overhead_s, draft_api_call_overhead_s=draft_overhead,
                    token_bytes=sys_.token_id_bytes, kvmu_factory=kvmu,
                    description={"system": sys_.name, "policy": pol.name, **names})
