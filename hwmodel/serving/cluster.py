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
    gpus = [{ device = "a100-40gb", count = 1, framework = "hf" }]
    fpgas = [{ design = "glitches-u280", count = 7 }]
    [nodes.host]
    sampling_s_per_logit = { value = 5.9e-9, source = "..." }

Every device hangs off its node's host by its own PCIe link (the device spec's ``host_link`` unless ``link`` names
another link spec). Built-in clusters live in ``hwmodel/serving/clusters/*.toml``; a path to a TOML file works
wherever a cluster name does. Names of GPUs, designs and links are checked against the spec library when the
cluster is resolved (:func:`resolve_cluster`), with the file and field in the error.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from pathlib import Path

from hwmodel.errors import SpecError, UnknownNameError
from hwmodel.domains import MAX_DEVICES, device_count
from hwmodel.schema import internal, load_toml_as, non_empty, one_of, plain, positive, sourced
from hwmodel.specs import GpuSpec, LinkSpec, LlmSpec, SpecLibrary, library

CLUSTER_DIR = Path(__file__).resolve().parent / "clusters"
KV_PATHS = ("host-staged", "p2p")
GPU_FRAMEWORKS = ("hf", "vllm", "vllm-eager")


@dataclasses.dataclass(frozen=True, kw_only=True)
class GpuGroup:
    """``count`` identical GPUs of one node."""

    device: str = plain(doc="GPU spec name (gpu/devices/*.toml)")
    count: int = plain(check=device_count)
    framework: str = plain(default="hf", check=one_of(*GPU_FRAMEWORKS), doc="serving framework of the GPU model")
    weight_bits: int = plain(default=16, check=one_of(4, 8, 16))
    kv_bits: int = plain(default=16, check=one_of(4, 8, 16))
    max_decode_batch: int = plain(default=1, check=positive,
                                  doc="most requests one GPU decodes together (1 = HF batch-1 serving)")
    link: str | None = plain(default=None, doc="link spec to the host; default: the GPU's host_link")


@dataclasses.dataclass(frozen=True, kw_only=True)
class FpgaGroup:
    """``count`` identical FPGA cards of one node, each loaded with the same accelerator design."""

    design: str = plain(doc="instruction-driven accelerator design (fpga.instruction.load_design)")
    count: int = plain(check=device_count)
    prefetch_ratio: int | None = plain(default=None, check=positive, doc="override the design's prefetch ratio")
    clock_hz: float | None = plain(default=None, check=positive, unit="Hz", doc="override the kernel clock")
    link: str | None = plain(default=None, doc="link spec to the host; default: the board's host_link")
    decode_table: str = plain(default="steps", check=one_of("exact", "steps"),
                              doc="per-context decode times: every context, or bisected steps (see devices.py)")


@dataclasses.dataclass(frozen=True, kw_only=True)
class HostSpec:
    """The node's CPU: it samples every token an FPGA decodes, from the logits the FPGA returns over PCIe."""

    sampling_s_per_logit: float = sourced(check=positive, unit="s", doc="host time per vocabulary entry to "
                                                                        "sample one token from its logits")
    logits_bytes_per_value: int = plain(default=2, check=one_of(2, 4), unit="B",
                                        doc="logit precision on PCIe (fp16 = 2, fp32 = 4)")
    token_id_bytes: int = plain(default=4, check=positive, unit="B", doc="a sampled token id sent back")


@dataclasses.dataclass(frozen=True, kw_only=True)
class NodeSpec:
    """One server: its GPUs, FPGAs and host."""

    name: str = plain()
    gpus: tuple[GpuGroup, ...] = plain(default=())
    fpgas: tuple[FpgaGroup, ...] = plain(default=())
    host: HostSpec

    def _validate(self) -> Iterator[tuple[str, str, object]]:
        if not self.gpus and not self.fpgas:
            yield "gpus", "at least one GPU or FPGA group in the node", ()


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
    kv_path: str = plain(default="host-staged", check=one_of(*KV_PATHS),
                         doc="GPU -> FPGA KV migration: through host memory, or peer-to-peer")
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
        if self.gpu_count + self.fpga_count > MAX_DEVICES:
            yield "nodes", f"at most {MAX_DEVICES:,} devices over all nodes", self.gpu_count + self.fpga_count

    @property
    def gpu_count(self) -> int:
        return sum(g.count for n in self.nodes for g in n.gpus)

    @property
    def fpga_count(self) -> int:
        return sum(f.count for n in self.nodes for f in n.fpgas)


@dataclasses.dataclass(frozen=True)
class ResolvedCluster:
    """A cluster spec with every name looked up: the LLM, GPU specs, links."""

    spec: ClusterSpec
    llm: LlmSpec
    gpu_specs: Mapping[str, GpuSpec]
    links: Mapping[str, LinkSpec]
    network: LinkSpec | None

    def gpu_link(self, group: GpuGroup) -> LinkSpec:
        return self.links[group.link or self.gpu_specs[group.device].host_link]


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
    """Look up the LLM, the GPUs and the links of ``spec``; errors name the cluster file and the field.
    ``llm`` overrides the cluster's model. (FPGA designs are resolved with the engines, see devices.py.)"""
    lib = lib or library()
    where = spec.origin or spec.name

    def lookup(kind: str, name: str, field: str) -> object:
        try:
            return lib.get(kind, name)
        except UnknownNameError as exc:
            raise SpecError(where, field, f"a known {exc.what} (" + ", ".join(exc.choices) + ")", name) from None

    llm_spec = lookup("llm", llm or spec.llm, "llm")
    gpus: dict[str, GpuSpec] = {}
    links: dict[str, LinkSpec] = {}
    for i, node in enumerate(spec.nodes):
        for j, g in enumerate(node.gpus):
            gpu = lookup("gpu", g.device, f"nodes[{i}].gpus[{j}].device")
            gpus[g.device] = gpu  # type: ignore[assignment]
            link = g.link or gpu.host_link  # type: ignore[attr-defined]
            links[link] = lookup("link", link, f"nodes[{i}].gpus[{j}].link")  # type: ignore[assignment]
        for j, f in enumerate(node.fpgas):
            if f.link is not None:
                links[f.link] = lookup("link", f.link, f"nodes[{i}].fpgas[{j}].link")  # type: ignore[assignment]
    network = lookup("link", spec.network.link, "network.link") if spec.network else None
    return ResolvedCluster(spec, llm_spec, gpus, links, network)  # type: ignore[arg-type]
