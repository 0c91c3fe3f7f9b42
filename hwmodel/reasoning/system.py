"""System configurations of system A (TOML, hwmodel/reasoning/systems/*.toml) and the platforms built from them.

A configuration names the three models, the devices of the system (``[devices.NAME]``: a GPU + framework, a
streaming design, an instruction design, an edge board -- at any clock, on any board spec; see
:class:`hwmodel.backends.DeviceEntry`) and which device plays each role by default (``[roles]``). A policy
(:mod:`hwmodel.reasoning.policies`) names the device its draft runs on; a study may put the draft on any other
device of the system. Every value carries its source.

``build_platform`` turns a configuration, a policy and (optionally) a draft device into a
:class:`~hwmodel.reasoning.platform.Platform`. It checks, before anything runs, that every role's engine has the
capabilities the policy needs there (:func:`hwmodel.engine.require`) and that the draft's device is attached the
way the policy drives it, and refuses otherwise with the role, the device and what is missing named. Engines are
built by the device back-ends (:mod:`hwmodel.backends`) and shared per process (memoized), so a reproduction
builds each one once. Nothing here asks what kind of device a role runs on.

How the host reaches a device (``attach``):

* ``local-server`` -- a model server on the host's own server (a GPU): each request pays the API overhead; the
  host needs to tell it nothing between requests;
* ``remote-server`` -- a model server on another box (an edge board over Ethernet): as above, and the host sends
  it each verdict (to stop a speculation) over its link;
* ``host-driven`` -- the host drives the device directly (XRT/DMA, no server): no API overhead, the device keeps
  the draft's KV cache (a KVMU manages it, prompt KV migrated once from a GPU) and is told each verdict.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from hwmodel.backends import Device, DeviceEntry, build_device, clear_devices
from hwmodel.engine import Capability, require
from hwmodel.errors import HwmodelError, SpecError, UnknownNameError
from hwmodel.reasoning.costs import TimedEngine
from hwmodel.reasoning.platform import ROLES, Platform, PromptMigration
from hwmodel.reasoning.policies import Policy
from hwmodel.reasoning.policies import policy as get_policy
from hwmodel.schema import internal, load_toml_as, non_negative, one_of, plain, positive, sourced
from hwmodel.specs import library

SYSTEMS_DIR = Path(__file__).resolve().parent / "systems"


class MissingDeviceModelError(HwmodelError):
    """A device model the platform needs is not part of this checkout."""


@dataclasses.dataclass(frozen=True)
class Attachment:
    """How the host reaches a device (module docstring)."""

    name: str
    api_call: bool  # requests go through a model server's API (api_call_overhead_s each)
    resident: bool  # host-driven: the device keeps the draft's KV cache, managed by a KVMU
    told_verdict: bool  # the host sends each verdict to the device over its link


ATTACHMENTS: Mapping[str, Attachment] = MappingProxyType(
    {
        a.name: a
        for a in (
            Attachment("local-server", api_call=True, resident=False, told_verdict=False),
            Attachment("remote-server", api_call=True, resident=False, told_verdict=True),
            Attachment("host-driven", api_call=False, resident=True, told_verdict=True),
        )
    }
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Roles:
    """Which device plays each role unless a policy or study says otherwise."""

    draft: str = sourced(doc="device of the draft in the baseline")
    prm: str = sourced(doc="device of the process reward model")
    target: str = sourced(doc="device of the target")
    prompt_prefill: str = sourced(
        doc="device that prefills the prompt with the draft model before its KV cache "
        "migrates to a resident (host-driven) draft"
    )


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
    prm_prefix_cache: bool = sourced(doc="the PRM server reuses the KV of the unchanged prefix")
    api_call_overhead_s: float = sourced(check=non_negative, unit="s", doc="per request to a model server")
    token_id_bytes: int = sourced(check=positive, unit="B", doc="a token id on the wire")
    kvmu_capacity_tokens: int = sourced(check=positive, unit="tokens", doc="KV slots the KVMU manages")
    roles: Roles
    devices: dict[str, DeviceEntry]
    origin: str = internal(default="")
    sources: Mapping[str, str] = internal(default_factory=dict)

    def _validate(self):  # noqa: ANN202 - generator of (field, expected, got)
        lib = library()
        for f in ("draft_llm", "prm_llm", "target_llm"):
            if getattr(self, f) not in lib.names("llm"):
                yield f, "an LLM spec name (" + ", ".join(lib.names("llm")) + ")", getattr(self, f)
        known = ", ".join(sorted(self.devices))
        for r in ("draft", "prm", "target", "prompt_prefill"):
            if getattr(self.roles, r) not in self.devices:
                yield f"roles.{r}", f"a device of [devices] ({known})", getattr(self.roles, r)
        for name, d in self.devices.items():
            if d.attach not in ATTACHMENTS:
                yield f"devices.{name}.attach", "one of " + ", ".join(ATTACHMENTS), d.attach
            if d.link is not None and d.link not in lib.names("link"):
                yield f"devices.{name}.link", "a link spec name (" + ", ".join(lib.names("link")) + ")", d.link

    def device(self, name: str) -> DeviceEntry:
        try:
            return self.devices[name]
        except KeyError:
            raise UnknownNameError(f"device of system {self.name}", name, list(self.devices)) from None


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


_memo: dict[tuple[Any, ...], Any] = {}  # per process, keyed by id(system) and names
_alive: dict[int, ReasoningSystem] = {}  # the systems those ids belong to, kept alive so an id is never reused


def _memoized(key: tuple[Any, ...], make: Any) -> Any:
    v = _memo.get(key)
    if v is None:
        v = _memo[key] = make()
    return v


def clear_engine_memo() -> None:
    """Forget every engine built so far (benchmarks: cold replays)."""
    _memo.clear()
    _alive.clear()
    clear_devices()


def _device(system: ReasoningSystem, device: str, llm: str) -> Device:
    where = f"{system.origin or system.name}: devices.{device}"
    _alive[id(system)] = system
    return _memoized(("device", id(system), device, llm), lambda: build_device(system.device(device), llm, where))


def role_engine(system: ReasoningSystem, device: str, llm: str) -> TimedEngine:
    """The memoized, timed engine of ``llm`` on ``device`` of ``system`` (one per built device: systems and roles
    naming the same device share it, and its memos)."""
    d = _device(system, device, llm)
    return _memoized(("engine", id(d)), lambda: TimedEngine(d.engine, initial_ctx=d.warm_ctx))


class SystemLinks:
    """Transfers between the roles' devices and the host, timed by ``interconnect.pcie`` on each device's own host
    link: one DMA to or from the host, or a host-staged path (device -> host -> device) between two devices."""

    def __init__(self, role_links: Mapping[str, str]) -> None:
        from interconnect import pcie

        self.pcie = pcie
        lib = library()
        self.links = MappingProxyType({r: lib.link(n) for r, n in role_links.items()})
        self.memo: dict[tuple[str, str, int], float] = {}  # (src, dst, bytes) -> s; read directly by the replay

    def transfer_s(self, src: str, dst: str, n_bytes: int) -> float:
        key = (src, dst, n_bytes)
        t = self.memo.get(key)
        if t is None:
            if src == "host":
                t = self.pcie.transfer_s(n_bytes, self.links[dst])
            elif dst == "host":
                t = self.pcie.transfer_s(n_bytes, self.links[src])
            else:
                t = self.pcie.host_staged_s(n_bytes, self.links[src], self.links[dst])
            t = self.memo[key] = float(t)
        return t


class _PromptMigrations:
    """``interconnect.pcie.kv_migration`` of the draft's prompt KV cache from the prompt-prefill GPU to the draft's
    board, memoized by prompt length."""

    def __init__(self, source: Any, board: str, dst_link: str, kv_bits: int) -> None:
        from interconnect import pcie

        self.pcie = pcie
        self.engine = source
        self.board, self.dst_link, self.kv_bits = board, library().link(dst_link), kv_bits
        self._memo: dict[int, PromptMigration] = {}

    def __call__(self, n_tokens: int) -> PromptMigration:
        m = self._memo.get(n_tokens)
        if m is None:
            km = self.pcie.kv_migration(
                self.engine, self.board, n_tokens, path="host", kv_bits=self.kv_bits, dst_link=self.dst_link
            )
            power = self.engine.prefill_cost(n_tokens).power_w
            m = self._memo[n_tokens] = PromptMigration(
                prefill_s=km.prefill_s,
                prefill_power_w=float(power),
                ready_s=km.total_s,
                transfer_s=km.transfer_s,
                kv_bytes=km.kv_bytes,
            )
        return m


def prompt_migrations_to(
    system: ReasoningSystem, board: str, kv_bits: int, dst_link: str | None = None
) -> _PromptMigrations:
    """The prompt-KV migrations to a draft on ``board`` (KV at ``kv_bits``, over ``dst_link``, default the board's
    host link), prefilled with the draft model on the system's prompt-prefill device (memoized)."""

    def make() -> _PromptMigrations:
        src = _device(system, system.roles.prompt_prefill, system.draft_llm)
        require(
            src.engine,
            (Capability.PREFILL_TIMELINE, Capability.OP_COSTED),
            "prompt prefill (KV migration source)",
            f"{system.origin or system.name}: roles.prompt_prefill",
        )
        return _PromptMigrations(src.engine, board, dst_link or library().board(board).host_link, kv_bits)

    src_dev = _device(system, system.roles.prompt_prefill, system.draft_llm)
    return _memoized(("migration", id(src_dev), board, kv_bits, dst_link), make)


def prompt_migrations(system: ReasoningSystem, draft_device: str) -> _PromptMigrations:
    """The prompt-KV migrations to ``draft_device``, prefilled on the system's prompt-prefill device."""
    dst = _device(system, draft_device, system.draft_llm)
    if dst.board is None:
        raise SpecError(
            f"{system.origin or system.name}",
            f"devices.{draft_device}",
            "a device on an FPGA board spec, where a migrated prompt KV cache can land",
            draft_device,
        )
    return prompt_migrations_to(system, dst.board, dst.kv_bits, dst.host_link)


def _kvmu_factory(capacity: int) -> Any:
    from fpga.kvmu import model as kvmu

    return functools.partial(kvmu.Kvmu, capacity, tags=False)  # the replay checks the pointers, reads no tag


_ROLE_LABEL = {"draft": "draft", "prm": "PRM", "target": "target"}


def build_platform(
    system: ReasoningSystem | str, policy: Policy | str, *, draft: str | None = None, with_kvmu: bool = True
) -> Platform:
    """The devices ``policy`` runs on in ``system``, the draft on device ``draft`` (default: the policy's);
    refuses a role whose engine lacks a capability the policy needs there (module docstring)."""
    sys_ = load_system(system) if isinstance(system, str) else system
    pol = get_policy(policy) if isinstance(policy, str) else policy
    where = sys_.origin or sys_.name
    placement = {
        "draft": draft or (sys_.roles.draft if pol.draft_device == "server" else pol.draft_device),
        "prm": sys_.roles.prm,
        "target": sys_.roles.target,
    }
    llms = {"draft": sys_.draft_llm, "prm": sys_.prm_llm, "target": sys_.target_llm}
    devices = {r: _device(sys_, placement[r], llms[r]) for r in ROLES}
    engines = {r: role_engine(sys_, placement[r], llms[r]) for r in ROLES}
    for r in ROLES:
        require(devices[r].engine, pol.needs(r), r, f"{where}: devices.{placement[r]} (policy {pol.name})")
    attach = ATTACHMENTS[sys_.device(placement["draft"]).attach]
    if attach.resident != pol.resident_draft:
        want = "host-driven" if pol.resident_draft else "local-server or remote-server"
        raise SpecError(
            where,
            f"devices.{placement['draft']}.attach",
            f"{want} for the draft under policy '{pol.name}' (sync: {pol.sync})",
            attach.name,
        )
    names = {r: f"{devices[r].display_name} ({_ROLE_LABEL[r]})" for r in ("prm", "target")}
    names["draft"] = devices["draft"].display_name if attach.resident else f"{devices['draft'].display_name} (draft)"
    migration = prompt_migrations(sys_, placement["draft"]) if attach.resident else None
    kvmu = _kvmu_factory(sys_.kvmu_capacity_tokens) if (attach.resident and with_kvmu) else None
    links = SystemLinks({r: devices[r].host_link for r in ROLES})
    return Platform(
        draft=engines["draft"],
        prm=engines["prm"],
        target=engines["target"],
        links=links,
        device_names=names,
        prompt_migration=migration,
        prm_prefix_cache=sys_.prm_prefix_cache,
        api_call_overhead_s=sys_.api_call_overhead_s,
        draft_api_call_overhead_s=sys_.api_call_overhead_s if attach.api_call else 0.0,
        draft_told_verdict=attach.told_verdict,
        token_bytes=sys_.token_id_bytes,
        kvmu_factory=kvmu,
        description={"system": sys_.name, "policy": pol.name, **({"draft_device": draft} if draft else {}), **names},
    )
