"""Placement of a streaming design: operators on the host, parameters resident on chip, and the design's own floor.

A published FPGA decoder often keeps the embedding table and the LM head on the host (its CPU gathers the row and
multiplies the logits) and holds small parameters (biases, quantization scales) in BRAM/URAM, loaded once with the
configuration. Two design fields say so (:class:`fpga.streaming.design.StreamingDesign`):

* ``host_ops``: operators the FPGA does not run. ``embed`` (the embedding row arrives over the host link into the
  residual engine's buffer), and from the end of the token ``argmax`` (the logits leave for the host), ``lm_head``
  (the normed hidden state leaves; needs ``argmax`` on the host too) and ``final_norm`` (needs ``lm_head``). They map
  to no engine, move no HBM bytes and do no device MACs; the bytes that cross the host link per token are
  :func:`host_link_bytes` (timed by the system's link model, not by the FPGA token).
* ``onchip_params``: parameter classes of the graph (:mod:`hwmodel.graph`) held on chip: ``bias`` and ``metadata``
  (quantization scales and zero points). Their bytes leave every HBM request and are counted against on-chip memory
  (:func:`onchip_param_bytes`, in :mod:`fpga.streaming.resources`). Norm gains are on chip in every streaming design.

:func:`device_bytes` is what one token must move between HBM and the FPGA under that placement, from the graph
alone (independent of the lowering, so tests/test_placement.py checks the compiled program against it), and
:func:`design_floor` divides it by the peak bandwidth of the pseudo-channels the design's ports reach: the floor
``hwmodel bounds --design`` and ``hwmodel fpga decode`` print.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from hwmodel.graph import Graph, Op, build_graph

if TYPE_CHECKING:
    from fpga.streaming.design import StreamingDesign
    from hwmodel.specs import BoardSpec, LlmSpec

#: Operators a design may place on the host, with the operator each one needs on the host too.
HOST_PLACEABLE: dict[str, str | None] = {"embed": None, "argmax": None, "lm_head": "argmax", "final_norm": "lm_head"}
#: Parameter classes a design may keep on chip (graph byte classes).
ONCHIP_CLASSES = ("bias", "metadata")
#: graph operator kind -> streaming operator, for the operators that can live on the host
_GRAPH_KIND = {"embed": "embed", "head": "lm_head", "sample": "argmax"}


def placement_problems(d: StreamingDesign, mapped: Mapping[str, str]) -> Iterator[str]:
    """What is wrong with a design's ``host_ops`` / ``onchip_params`` (``mapped``: operator -> engine)."""
    for op in d.host_ops:
        if op not in HOST_PLACEABLE:
            yield f"host_ops: '{op}' cannot run on the host (allowed: {', '.join(HOST_PLACEABLE)})"
            continue
        need = HOST_PLACEABLE[op]
        if need and need not in d.host_ops:
            yield f"host_ops: '{op}' on the host needs '{need}' on the host too (its output goes there)"
        if op in mapped:
            yield f"host_ops: '{op}' is placed on the host but also mapped to engine '{mapped[op]}'"
    for cls in d.onchip_params:
        if cls not in ONCHIP_CLASSES:
            yield f"onchip_params: '{cls}' is not a parameter class that can stay on chip ({', '.join(ONCHIP_CLASSES)})"


def on_host(d: StreamingDesign, op: str) -> bool:
    return op in d.host_ops


def streamed_bytes(d: StreamingDesign, op: Op) -> int:
    """Parameter bytes of graph operator ``op`` that come from HBM under the design's placement."""
    b = op.bytes
    return (
        b.weights + (0 if "metadata" in d.onchip_params else b.metadata) + (0 if "bias" in d.onchip_params else b.bias)
    )


def _graph_op_on_host(d: StreamingDesign, op: Op, where: int, n_layers: int) -> bool:
    if where == n_layers and op.kind == "norm":
        return "final_norm" in d.host_ops
    name = _GRAPH_KIND.get(op.kind)
    return name is not None and name in d.host_ops


def device_graph(d: StreamingDesign, llm: LlmSpec, ctx: int, with_lm_head: bool = True) -> Graph:
    """The graph of one token the device sees: decode, or ingest (no final norm, head, sampling)."""
    from fpga.streaming.lowering import quant_of

    return build_graph(llm, quant_of(d), "decode" if with_lm_head else "ingest", 1, ctx)


def device_bytes(d: StreamingDesign, llm: LlmSpec, ctx: int, with_lm_head: bool = True) -> dict[str, int]:
    """Bytes one token moves between HBM and the FPGA under the design's placement, by graph class (weights,
    metadata, bias, kv_read, kv_write; norm gains are on chip), with the device's MACs and the bytes the
    resident classes would have moved (``onchip``)."""
    g = device_graph(d, llm, ctx, with_lm_head)
    out = dict.fromkeys(("weights", "metadata", "bias", "kv_read", "kv_write", "onchip", "macs"), 0)
    L = len(g.layers)
    for where, op in g.ops():
        if _graph_op_on_host(d, op, where, L):
            continue
        b = op.bytes
        for cls in ("weights", "metadata", "bias"):
            if cls in d.onchip_params:
                out["onchip"] += getattr(b, cls)
            else:
                out[cls] += getattr(b, cls)
        out["kv_read"] += b.kv_read
        out["kv_write"] += b.kv_write
        out["macs"] += op.macs
    return out


def onchip_param_bytes(d: StreamingDesign, llm: LlmSpec) -> int:
    """Bytes of every parameter of the resident classes the design holds on chip (all layers, all experts; the
    head's and embedding's only when they run on the device)."""
    from fpga.streaming.lowering import quant_of
    from hwmodel.graph import resident_param_bytes

    if not d.onchip_params:
        return 0
    total = resident_param_bytes(llm, quant_of(d))
    return sum(getattr(total, cls) for cls in d.onchip_params)


def host_link_bytes(d: StreamingDesign, llm: LlmSpec) -> dict[str, int]:
    """Bytes per token crossing the host link because of the placement: the embedding row into the FPGA (fp16),
    and out of it the normed or raw hidden state (LM head on the host, fp16) or the logits (sampling on the host,
    fp16). The sampled token id (4 B) comes back either way."""
    to_dev = llm.hidden * 2 if on_host(d, "embed") else 0
    if on_host(d, "lm_head"):
        to_host = llm.hidden * 2
    elif on_host(d, "argmax"):
        to_host = llm.head_out_channels * 2
    else:
        to_host = 4
    return {"to_device_bytes": to_dev, "to_host_bytes": to_host}


@dataclasses.dataclass(frozen=True)
class DesignFloor:
    """A design's decode floor: the bytes its placement moves over the peak of the pseudo-channels its ports use."""

    design: str
    ctx: int
    with_lm_head: bool
    bytes: Mapping[str, int]
    total_bytes: int
    channels: int
    ports_peak_bw_bytes_per_s: float
    floor_s: float

    def as_dict(self) -> dict[str, object]:
        return {**dataclasses.asdict(self), "bytes": dict(self.bytes)}


def design_floor(
    d: StreamingDesign, ctx: int, with_lm_head: bool = True, board: BoardSpec | None = None, llm: LlmSpec | None = None
) -> DesignFloor:
    """The design's own decode floor at ``ctx`` (see the module docstring); ``with_lm_head=False``: an ingested
    token."""
    from fpga.hbm import channel as hbm
    from fpga.streaming.ports import channel_count

    board = board or d.board_spec()
    llm = llm or d.llm_spec()
    b = device_bytes(d, llm, ctx, with_lm_head)
    total = sum(b[c] for c in ("weights", "metadata", "bias", "kv_read", "kv_write"))
    n = channel_count(d)
    peak = n * hbm.channel_peak_bytes_per_s(board)
    return DesignFloor(
        design=d.name,
        ctx=ctx,
        with_lm_head=with_lm_head,
        bytes=b,
        total_bytes=total,
        channels=n,
        ports_peak_bw_bytes_per_s=peak,
        floor_s=total / peak,
    )
