"""Compile one decoded token of a design into the static *program* both simulators execute.

The program is a set of integer arrays (no Python objects), shared by the cycle-stepped reference
(:mod:`fpga.streaming.reference`) and the event-driven Numba engine (:mod:`fpga.streaming.engine`):

* **blocks** (``t_*``): the unit of work of an engine — a row block of a matrix-vector product, a block of K or V
  tokens, a chunk of a vector operator. Each has an engine, issue cycles, a *drain* flag (wait for the engine's
  pipeline to empty first: a barrier such as RMSNorm's sum of squares or a softmax), up to three dependencies on
  other blocks ``(block, offset)`` meaning ``start >= start(block) + offset`` — input activations, a skip
  (residual) input, and output-FIFO space — and, per HBM port, the read request whose data it consumes.
* **requests** per port (``r_*``): bytes, address, read/write; a read names the block that consumes it (its buffer
  slot frees when that block's issue ends); a write names the block whose result it stores.

Engines run their blocks in program (token) order. A decoder layer is compiled once per context length as a
template and replicated for every layer by index arithmetic (all layers have the same shapes), so compiling a
token costs one layer, not all of them.

The lowering (:mod:`fpga.streaming.lowering`) builds the blocks and requests; the format lives in
:mod:`fpga.streaming.program_format`; :mod:`fpga.streaming.templates` caches what does not depend on the
context; :mod:`fpga.streaming.linking` replicates the layer and resolves references, and
:mod:`fpga.streaming.backpressure` expands each port's requests with its buffer and outstanding limits.

Where bytes and MACs come from (the operator graph, fused per :data:`fpga.streaming.lowering.FUSION`): see
:mod:`fpga.streaming.lowering`. :attr:`Program.param_bytes` is the per-class ledger of what the requests carry
and :attr:`Program.req_bytes` the bytes of the requests themselves; tests/test_graph_conservation.py checks both
against the graph, integers, no tolerance.
"""

from __future__ import annotations

from fpga.streaming.design import DesignError, StreamingDesign, check_structure
from fpga.streaming.linking import _link, _request_bytes
from fpga.streaming.lowering import _cdiv
from fpga.streaming.program_format import Program
from fpga.streaming.templates import _base_compiler, _layer_for, _static_parts, kv_region_bytes
from fpga.streaming.temporal import apply_temporal, without_temporal
from hwmodel.specs import BoardSpec, LlmSpec


def compile_token(
    design: StreamingDesign, board: BoardSpec, llm: LlmSpec, ctx: int, with_lm_head: bool = True, per_port: bool = False
) -> Program:
    """The program of one token decoded after ``ctx`` cached tokens (``with_lm_head=False``: ingest, logits
    discarded, the LM head and sampler are skipped). ``per_port`` also builds every port's own request list
    (for the cycle-stepped reference, which simulates each port instead of one per class)."""
    if ctx < 0:
        raise DesignError(f"context length must be >= 0, got {ctx}")
    if ctx > design.max_ctx:
        raise DesignError(
            f"design '{design.name}': ctx {ctx} exceeds its KV-cache reservation max_ctx = {design.max_ctx}"
        )
    if design.units:  # several compute units and the links between them (fpga/streaming/units.py)
        from fpga.streaming.units import compile_units

        prog = compile_units(without_temporal(design), board, llm, ctx, with_lm_head, per_port)
        return apply_temporal(design, prog)  # the temporal units' barriers (fpga/streaming/temporal.py)
    check_structure(design)
    if llm.kv_heads % design.attn_head_parallel:
        raise DesignError(
            f"design '{design.name}': attn_head_parallel = {design.attn_head_parallel} must divide the "
            f"{llm.kv_heads} KV heads of {llm.name}"
        )
    st = _static_parts(design, board, llm, with_lm_head)
    c = _base_compiler(design, board, llm)
    a_eng = c.eng_idx["attention"]
    kv_base0 = _cdiv(st.total_w[a_eng], 1 << 20) << 20
    region = kv_region_bytes(design, llm, board)
    units = llm.kv_heads // design.attn_head_parallel
    layer, att_macs = _layer_for(design, board, llm, ctx, kv_base0)
    L = llm.layers
    prog = _link(design, c, st, layer, L, 2 * units * region, st.static_macs + (st.layer_macs + att_macs) * L, per_port)
    prog.param_bytes.update({k: st.static_ledger[k] + L * st.layer_ledger[k] for k in st.layer_ledger})
    prog.req_bytes.update(_request_bytes(st, layer, prog, L))
    return apply_temporal(design, prog) if design.execution == "temporal" else prog
