"""Cluster specs for the serving simulator (system B): nodes of GPUs, FPGAs and a host, joined by a network.

A cluster TOML names the LLM it serves (weights replicated on every device), how KV caches move from a GPU to an
FPGA (``kv_path``: ``host-staged`` bounces through host memory as GLITCHES does; ``p2p`` goes GPU -> FPGA through
the PCIe switch), one ``[[nodes]]`` table per server, and a ``[network]`` link when there are several nodes::

    name = "a100+7xu280"
    display_name = "1 x A100 40GB + 7 x U280 (GLITCHES hybrid node)"
    llm = "llama2-7b"
    kv_path = "host-staged"

    [[nodes]]
    name = "node0"
    prefill = [{ device = "a100-40gb", count = 1, framework = "hf" }]
    decode = [{ device = "glitches-u280", count = 7 }]
    [nodes.host]
    sampling_s_per_logit = { value = 5.9e-9, source = "..." }

Each node has a *prefill pool* and a *decode pool*, each a list of device groups; a group names any device the
engine builders know (a GPU spec with a framework, an instruction-driven or a streaming FPGA design) at any clock.
Every device hangs off its node's host by its own PCIe link (the device's ``host_link`` unless ``link`` names
another link spec). Built-in clusters live in ``hwmodel/serving/clusters/*.toml``; a path to a TOML file works
wherever a cluster name does. Device and link names are checked when the cluster is resolved
(:func:`resolve_cluster`), and each engine's capabilities against its role when the devices are built, with the
file and field in the error.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from pathlib import Path

from hwmodel.domains import MAX_DEVICES, device_count
from hwmodel.errors import SpecError, UnknownNameError
from hwmodel.schema import internal, load_toml_as, non_empty, one_of, plain, positive, sourced
from hwmodel.specs import LinkSpec, LlmSpec, SpecLibrary, library

CLUSTER_DIR = Path(__file__).resolve().parent / "clusters"
KV_PATHS = ("host-staged", "p2p")
GPU_FRAMEWORKS = ("hf", "vllm", "vllm-eager")


@dataclasses.dataclass(frozen=True, kw_only=True)
class DeviceGroup:
    """``count`` identical devices of one node in one role (a prefill pool or a decode pool).

    ``device`` names a GPU spec (gpu/devices/*.toml, with a serving ``framework``) or an FPGA design (an
    instruction-driven design, fpga/designs/instruction/*.toml, or a streaming design, fpga/designs/*.toml), at
    any clock and on the board its design names. ``engine`` picks the engine builder (see
    :mod:`hwmodel.serving.engines`); by default the first registered builder that knows the name. Fields that a
    builder does not use are refused by it (e.g. ``prefetch_ratio`` on a GPU)."""

    device: str = plain(doc="GPU spec name or FPGA design name")
    count: int = plain(check=device_count)
    engine: str | None = plain(
        default=None, doc="engine builder (gpu, instruction, streaming); default: inferred from the device name"
    )
    framework: str | None = plain(
        default=None, check=one_of(*GPU_FRAMEWORKS), doc="serving framework of a GPU model (default hf)"
    )
    weight_bits: int | None = plain(default=None, check=one_of(4, 8, 16), doc="GPU weight precision (default 16)")
    kv_bits: int | None = plain(default=None, check=one_of(4, 8, 16), doc="GPU KV precision (default 16)")
    max_decode_batch: int = plain(
        default=1,
        check=positive,
        doc="most requests one device decodes together (1 = batch-1 serving); > 1 needs the batch-decoder capability",
    )
    prefetch_ratio: int | None = plain(
        default=None, check=positive, doc="override an instruction design's prefetch ratio"
    )
    clock_hz: float | None = plain(default=None, check=positive, unit="Hz", doc="override an FPGA kernel clock")
    link: str | None = plain(default=None, doc="link spec to the host; default: the device's host_link")
    decode_table: str | None = plain(
        default=None,
        check=one_of("exact", "steps"),
        doc="per-context decode times: every context, or bisected steps (devices.py); default: the builder's",
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class HostSpec:
    """The node's CPU: it samples every token an FPGA decodes, from the logits the FPGA returns over PCIe."""

    sampling_s_per_logit: float = sourced(
        check=positive, unit="s", doc="host time per vocabulary entry to sample one token from its logits"
    )
    logits_bytes_per_value: int = plain(
        default=2, check=one_of(2, 4), unit="B", doc="logit precision on PCIe (fp16 = 2, fp32 = 4)"
    )
    token_id_bytes: int = plain(default=4, check=positive, unit="B", doc="a sampled token id sent back")


@dataclasses.dataclass(frozen=True, kw_only=True)
class NodeSpec:
    """One server: its prefill pool, its decode pool and its host.

    Prefill-pool devices prefill every request (and decode some themselves when no decode-pool device is free and
    they have the decoder capability); decode-pool devices decode one request each from a migrated KV cache. A
    cluster with no prefill pool at all prefills on the decode-pool device that will decode (which then needs the
    prefiller capability)."""

    name: str = plain()
    prefill: tuple[DeviceGroup, ...] = plain(default=(), doc="prefill pool")
    decode: tuple[DeviceGroup, ...] = plain(default=(), doc="decode pool")
    host: HostSpec

    def _validate(self) -> Iterator[tuple[str, str, object]]:
        if not self.prefill and not self.decode:
            yield "prefill", "at least one prefill or decode group in the node", ()


@dataclasses.dataclass(frozen=True, kw_only=True)
class NetworkSpec:
    """The link between nodes (a KV cache that crosses nodes goes host -> network -> host)."""

    link: str = plain(doc="link spec name (interconnect/links/*.toml), e.g. ethernet-100g")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClusterSpec:
    """A serving deployment: the model, the nodes, how KV caches move."""

    name: str = plain()
    display_name: str = plain()
    notes: str = plain(default="")
    llm: str = plain(doc="LLM spec name; its weights are replicated on every device")
    kv_path: str = plain(
        default="host-staged",
        check=one_of(*KV_PATHS),
        doc="GPU -> FPGA KV migration: through host memory, or peer-to-peer",
    )
    nodes: tuple[NodeSpec, ...] = plain(check=non_empty)
    network: NetworkSpec | None = plain(default=None)
    origin: str = internal(default="")
    sources: Mapping[str, str] = internal(default_factory=dict)

    def _validate(self) -> Iterator[tuple[str, str, object]]:
        names = [n.name for n in self.nodes]
        for i, n in enumerate(names):
            if n in names[:i]:
                yield f"nodes[{i}].name", "a node name not used by an earlier node", n
        if len(self.nodes) > 1 and self.network is None:
            yield "network", "a [network] table with a link, since the cluster has several nodes", None
        if self.prefill_count + self.decode_count > MAX_DEVICES:
            yield "nodes", f"at most {MAX_DEVICES:,} devices over all nodes", self.prefill_count + self.decode_count

    @property
    def prefill_count(self) -> int:
        return sum(g.count for n in self.nodes for g in n.prefill)

    @property
    def decode_count(self) -> int:
        return sum(f.count for n in self.nodes for f in n.decode)

    def groups(self) -> Iterator[tuple[int, str, int, DeviceGroup]]:
        """(node index, role, group index, group) for every device group, prefill pools first in each node."""
        for i, n in enumerate(self.nodes):
            for role, pool in (("prefill", n.prefill), ("decode", n.decode)):
                for j, g in enumerate(pool):
                    yield i, role, j, g


@dataclasses.dataclass(frozen=True)
class ResolvedCluster:
    """A cluster spec with the LLM and the network looked up (devices are resolved by the engine builders when
    the simulation builds them, :mod:`hwmodel.serving.engines`)."""

    spec: ClusterSpec
    llm: LlmSpec
    network: LinkSpec | None


def builtin_cluster_names() -> list[str]:
    return sorted(p.stem for p in CLUSTER_DIR.glob("*.toml"))


def load_cluster(name_or_path: str | Path) -> ClusterSpec:
    """A built-in cluster by name, or a cluster TOML file by path."""
    path = Path(name_or_path)
    if path.suffix != ".toml":
        candidate = CLUSTER_DIR / f"{name_or_path}.toml"
        if not candidate.is_file():
            raise UnknownNameError("cluster", str(name_or_path), builtin_cluster_names())
        path = candidate
    return load_toml_as(ClusterSpec, path)


def resolve_cluster(spec: ClusterSpec, lib: SpecLibrary | None = None, llm: str | None = None) -> ResolvedCluster:
    """Look up the LLM, the network link and every device group's device name; errors name the cluster file and
    the field. ``llm`` overrides the cluster's model. (Engines are built, and their capabilities checked against
    their roles, when a simulation starts: :func:`hwmodel.serving.engines.check_roles`.)"""
    from hwmodel.serving.engines import resolve_builder

    lib = lib or library()
    where = spec.origin or spec.name

    def lookup(kind: str, name: str, field: str) -> object:
        try:
            return lib.get(kind, name)
        except UnknownNameError as exc:
            raise SpecError(where, field, f"a known {exc.what} (" + ", ".join(exc.choices) + ")", name) from None

    llm_spec = lookup("llm", llm or spec.llm, "llm")
    for i, role, j, g in spec.groups():
        field = f"nodes[{i}].{role}[{j}]"
        resolve_builder(g, lib, where, field)
        if g.link is not None:
            lookup("link", g.link, f"{field}.link")
    network = lookup("link", spec.network.link, "network.link") if spec.network else None
    return ResolvedCluster(spec, llm_spec, network)  # type: ignore[arg-type]
