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

**Where bytes and MACs come from.** The lowering reads every matrix, its quantization metadata and biases from
the operator graph (:mod:`hwmodel.graph`) under the streaming designs' convention (:func:`quant_of`: one fp16
scale per output channel, or per ``quant_group_size`` inputs when the design sets it). Streaming operators fuse
graph operators (:data:`FUSION`): ``qkv`` = q, k, v projections (rows concatenated); ``gate_up`` = gate and up
projections, and for a mixture of experts the router, the routed experts' gate/up and the shared expert's
gate/up and sigmoid gate; ``down`` = the down projection, or the routed and shared experts' down projections
with their inputs concatenated (their outputs are summed). Norm gains stay on chip (loaded with the bitstream's
configuration, not per token). :attr:`Program.param_bytes` is the per-class ledger of what the requests carry
and :attr:`Program.req_bytes` the bytes of the requests themselves; tests/test_graph_conservation.py checks both
against the graph, integers, no tolerance.
"""
from __future__ import annotations

import bisect
import dataclasses
import functools
from typing import Any

import numpy as np
from numba import njit

from fpga.streaming.design import ALL_OPS, DesignError, EngineSpec, StreamingDesign, check_structure
from fpga.streaming.placement import on_host, streamed_bytes
from fpga.streaming.ports import arbitration_code, channel_bases, dense_channels, shared
from hwmodel.graph import Graph, Op, QuantScheme, attention_keys, build_graph, per_channel
from hwmodel.specs import BoardSpec, LlmSpec

OP_ID = {op: i for i, op in enumerate(ALL_OPS)}
KIND_WEIGHT, KIND_KV = 0, 1
R_BYTES, R_ADDR, R_WRITE, R_DEP, R_DEP_OFF, R_SLOT, R_SLOT_OFF, R_OUTPREV = range(8)  # columns of r_table
DEP_NONE, DEP_LOCAL, DEP_XIN, DEP_ATT = 0, 1, 2, 3  # ATT: output block of attention head idx
NO = -1


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


#: streaming operator -> (graph operator names it computes, how they are fused: "rows" = output rows
#: concatenated, one input vector; "cols" = inputs concatenated, outputs summed). Names match a graph operator's
#: name or its last dotted part (``expert.3.gate_proj``, ``shared.up_proj``).
FUSION: dict[str, tuple[tuple[str, ...], str]] = {
    "embed": (("embed",), "rows"),
    "qkv": (("q_proj", "k_proj", "v_proj"), "rows"),
    "o_proj": (("o_proj",), "rows"),
    "gate_up": (("router", "gate_proj", "up_proj", "shared.gate"), "rows"),
    "down": (("down_proj",), "cols"),
    "lm_head": (("lm_head", "value_head"), "rows"),
}


def quant_of(design: StreamingDesign) -> QuantScheme:
    """The streaming designs' quantization convention: one fp16 scale per output channel (FlexLLM-style W8A8),
    or per ``quant_group_size`` input channels when the design sets it; no zero point; fp16 biases."""
    g = design.quant_group_size
    if g:
        return QuantScheme(weight_bits=design.weight_bits, kv_bits=design.kv_bits, granularity="group",
                           group_size=g, act_bits=design.act_bits)
    return per_channel(design.weight_bits, design.kv_bits, design.act_bits)


def embedding_table_bytes(design: StreamingDesign, llm: LlmSpec) -> int:
    """Bytes of the whole embedding table (rows and their metadata) under the design's convention (graph)."""
    q = quant_of(design)
    return llm.vocab * (q.weight_row_bytes(llm.hidden) + q.meta_row_bytes(llm.hidden))


def _graph0(llm: LlmSpec, q: QuantScheme) -> Graph:
    """The decode graph the lowering reads shapes and parameter bytes from (they do not depend on the context;
    attention's cached tokens do, and are taken per context from :func:`hwmodel.graph.attention_keys`)."""
    if llm.lowering_gaps:  # issue 26 families: refuse rather than drop their extra parameters
        raise DesignError(f"streaming lowering: {llm.name} has {', '.join(llm.lowering_gaps)}, not lowered "
                           f"here yet (bounds and the operator graph handle them)")
    if len({llm.window_of(i) for i in range(llm.layers)}) > 1:
        raise DesignError(f"'{llm.name}': the streaming lowering replicates one decoder layer, but its layers "
                          f"differ in attention window (full_attention_layers = {llm.full_attention_layers})")
    return build_graph(llm, q, "decode", 1, 0)


def hop_matrix(design: StreamingDesign) -> np.ndarray:
    """Cycles from a producer's result to its consumer, per (producer engine, consumer engine): 1 on the same
    engine; otherwise the FIFO latency plus ``slr_crossing_cycles`` per SLR boundary between the two engines
    (RapidStream pipelines every slot crossing of its floorplan)."""
    n = len(design.engines)
    h = np.ones((n, n), dtype=np.int64)
    for i, a in enumerate(design.engines):
        for j, b in enumerate(design.engines):
            if i != j:
                h[i, j] = design.fifo_latency_cycles + design.slr_crossing_cycles * abs(a.slr - b.slr)
    return h


def tile_ends(lo: int, hi: int, total: int, tile: int) -> int:
    """Dataflow tiles of ``tile`` items (the last one clipped at ``total``) that end inside items (lo, hi]."""
    if tile <= 0:
        return 0
    n = hi // tile - lo // tile
    if hi == total and total % tile:
        n += 1
    return n


@dataclasses.dataclass
class _Vec:
    """An activation vector as produced: entries (dep kind, index, cumulative elements), its producer engine."""

    entries: list[tuple[int, int, int]]
    engine: int
    free_tile: list[int] = dataclasses.field(default_factory=list)  # per entry: first consumer block that reads it
    consumer_engine: int = NO
    cum: list[int] = dataclasses.field(default_factory=list)
    buffered: bool = False  # read into a matrix-vector/attention operand buffer: no FIFO back-pressure

    def __post_init__(self) -> None:
        self.cum = [c for _k, _i, c in self.entries]


class _Segment:
    """Blocks and requests of one piece of the token (head, one layer, tail), indices local to the segment."""

    def __init__(self, n_ports: int) -> None:
        self.eng: list[int] = []
        self.cyc: list[int] = []
        self.drain: list[int] = []
        self.op: list[int] = []
        self.deps: list[list[tuple[int, int, int]]] = []  # per block 3 slots (kind, index, offset)
        self.reqs: list[list[tuple[int, int, int, int, int, int]]] = [[] for _ in range(n_ports)]
        # request record: (bytes, address, is_write, block (consumer or data source), offset, kind)

    def arrays(self) -> dict[str, np.ndarray]:
        """The blocks as arrays (memoized: head and tail segments are shared by every context length)."""
        if getattr(self, "_arrays", None) is None:
            deps = np.array(self.deps, dtype=np.int64).reshape(len(self.eng), 3, 3)
            self._arrays = {"eng": np.array(self.eng, np.int64), "cyc": np.array(self.cyc, np.int64),
                            "drain": np.array(self.drain, np.int64), "op": np.array(self.op, np.int64),
                            "dkind": deps[:, :, 0], "didx": deps[:, :, 1], "doff": deps[:, :, 2]}
        return self._arrays

    def req_array(self, port: int) -> np.ndarray:
        memo = self.__dict__.setdefault("_req_arrays", {})
        if port not in memo:
            memo[port] = np.array(self.reqs[port], dtype=np.int64).reshape(-1, 6)
        return memo[port]

    def block(self, eng: int, cyc: int, op: str, drain: bool = False) -> int:
        self.eng.append(eng)
        self.cyc.append(max(1, int(cyc)))
        self.drain.append(int(drain))
        self.op.append(OP_ID[op])
        self.deps.append([(DEP_NONE, 0, 0), (DEP_NONE, 0, 0), (DEP_NONE, 0, 0)])
        return len(self.eng) - 1


@dataclasses.dataclass(frozen=True)
class Program:
    """A compiled token (see the module docstring). Block times are kernel cycles; request times AXI cycles."""

    n_blocks: int
    t_eng: np.ndarray
    t_cyc: np.ndarray
    t_drain: np.ndarray
    t_op: np.ndarray
    t_layer: np.ndarray
    t_dep: np.ndarray  # (n, 3) block index or -1
    t_off: np.ndarray  # (n, 3)
    e_ptr: np.ndarray  # engine e's blocks are e_list[e_ptr[e]:e_ptr[e+1]] in program order
    e_list: np.ndarray
    e_lat: np.ndarray
    final_block: int
    # ports: port p belongs to engine port_eng[p] and class port_group[p]
    port_eng: np.ndarray
    port_group: np.ndarray
    port_bytes: np.ndarray  # per port: kernel-side bytes per cycle
    port_buffer: np.ndarray
    port_outstanding: np.ndarray
    # requests per class (fast engine; one representative port each) and per port (reference), CSR
    g_ptr: np.ndarray
    g_port: np.ndarray  # representative port of each class
    g_mult: np.ndarray  # ports in each class
    r_table: np.ndarray  # (n, 8) columns R_BYTES .. R_OUTPREV, per class (one cache line per request)
    t_need_group: np.ndarray  # (n_blocks, n_groups): class-local read request a block needs, or -1
    p_ptr: np.ndarray
    pr_table: np.ndarray  # (n, 8) per port
    t_need_port: np.ndarray  # (n_blocks, n_ports)
    macs: int
    port_chan: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int64))  # per port: channel
    arbitration: int = 0  # a shared channel's tie-break (fpga.streaming.ports: ARB_RR, ARB_FIXED)
    param_bytes: dict[str, int] = dataclasses.field(default_factory=dict)  # ledger: weights, metadata, bias, padding
    req_bytes: dict[str, int] = dataclasses.field(default_factory=dict)  # request bytes: param_read, kv_read, kv_write
    ops_names: tuple[str, ...] = ALL_OPS

    # request rows (write: r_dep is the block whose result it stores; read: r_slot is the block whose issue end
    # frees the buffer slot it needs, r_outprev the port-local read max_outstanding before it; -1 when none)
    r_bytes = property(lambda self: self.r_table[:, R_BYTES])
    r_addr = property(lambda self: self.r_table[:, R_ADDR])
    r_write = property(lambda self: self.r_table[:, R_WRITE])
    r_dep = property(lambda self: self.r_table[:, R_DEP])
    r_dep_off = property(lambda self: self.r_table[:, R_DEP_OFF])
    r_slot = property(lambda self: self.r_table[:, R_SLOT])
    r_slot_off = property(lambda self: self.r_table[:, R_SLOT_OFF])
    r_outprev = property(lambda self: self.r_table[:, R_OUTPREV])
    pr_bytes = property(lambda self: self.pr_table[:, R_BYTES])
    pr_addr = property(lambda self: self.pr_table[:, R_ADDR])
    pr_write = property(lambda self: self.pr_table[:, R_WRITE])
    pr_dep = property(lambda self: self.pr_table[:, R_DEP])
    pr_dep_off = property(lambda self: self.pr_table[:, R_DEP_OFF])
    pr_slot = property(lambda self: self.pr_table[:, R_SLOT])
    pr_slot_off = property(lambda self: self.pr_table[:, R_SLOT_OFF])
    pr_outprev = property(lambda self: self.pr_table[:, R_OUTPREV])

    @property
    def n_ports(self) -> int:
        return len(self.port_eng)

    @property
    def n_groups(self) -> int:
        return len(self.g_port)


# ============================================================================================== compiler
class _Compiler:
    def __init__(self, design: StreamingDesign, board: BoardSpec, llm: LlmSpec) -> None:
        self.d, self.b, self.m = design, board, llm
        self.eng_idx = {op: i for i, e in enumerate(design.engines) for op in e.ops}
        self.port0: list[int] = []
        n = 0
        for e in design.engines:
            self.port0.append(n)
            n += e.ports
        self.n_ports = n
        self.granule = board.hbm.granule_bytes
        self.wptr = [0] * len(design.engines)  # weight address pointer per engine (same on all its ports)
        self.macs = 0
        self.q = quant_of(design)
        self.g = _graph0(llm, self.q)
        self.ledger = {"weights": 0, "metadata": 0, "bias": 0, "onchip": 0, "padding": 0, "pad_bound": 0}
        self.hop = hop_matrix(design).tolist()

    # ---- helpers
    def E(self, op: str) -> EngineSpec:
        return self.d.engines[self.eng_idx[op]]

    def consume(self, seg: _Segment, t: int, slot: int, vec: _Vec, upto_elems: int, main: bool = True) -> None:
        """Block ``t`` needs the first ``upto_elems`` elements of ``vec`` (dependency slot ``slot``)."""
        k = bisect.bisect_left(vec.cum, upto_elems) if upto_elems > 0 else 0
        kind, idx, _c = vec.entries[k]
        if kind == DEP_LOCAL:
            same = seg.eng[idx] == seg.eng[t]
            off = seg.cyc[idx] + self.d.engines[seg.eng[idx]].pipeline_latency_cycles + \
                (1 if same else self.hop[seg.eng[idx]][seg.eng[t]])
            seg.deps[t][slot] = (DEP_LOCAL, idx, off)
        else:
            seg.deps[t][slot] = (kind, idx, 0)
        if main:
            vec.consumer_engine = seg.eng[t]
            while len(vec.free_tile) <= k:
                vec.free_tile.append(t)

    def close(self, seg: _Segment, vec: _Vec) -> None:
        """Back-pressure: a producer block making entry k waits until entry k - depth was read (other engine)."""
        q = self.d.fifo_depth
        if vec.buffered:
            return
        for k, (kind, idx, _c) in enumerate(vec.entries):
            if kind != DEP_LOCAL or k < q or k - q >= len(vec.free_tile):
                continue
            if seg.eng[idx] == vec.consumer_engine:
                continue
            seg.deps[idx][2] = (DEP_LOCAL, vec.free_tile[k - q], 1)

    def weight_reqs(self, seg: _Segment, t: int, eng: int, nbytes: int) -> None:
        """Block ``t`` streams ``nbytes`` of weights striped evenly over the engine's ports (granule-padded)."""
        e = self.d.engines[eng]
        share = _cdiv(_cdiv(nbytes, e.ports), self.granule) * self.granule
        addr = self.wptr[eng]
        recs = []
        left = share
        while left > 0:
            n = min(left, e.burst_bytes)
            recs.append((n, addr, 0, t, 0, KIND_WEIGHT))
            addr += n
            left -= n
        for p in range(self.port0[eng], self.port0[eng] + e.ports):
            seg.reqs[p].extend(recs)
        self.wptr[eng] += share
        self.ledger["padding"] += share * e.ports - nbytes
        self.ledger["pad_bound"] += e.ports * self.granule  # padding of one striped read is below this

    def vec_chunks(self, n: int) -> list[int]:
        c = self.d.vector_chunk
        return [min(n, (i + 1) * c) for i in range(_cdiv(n, c))]

    # ---- operators
    def stream_op(self, seg: _Segment, op: str, vin: _Vec, out_num: int = 1, out_den: int = 1,
                  skip: _Vec | None = None, produce: bool = True) -> _Vec:
        """Element-wise operator: one block per input block; ``out = in * num / den`` elements. A buffered operator
        (``buffered_ops``, ``rotation_ops``) takes its whole input first, then (rotation) runs the fast Hadamard
        transform's butterfly stages, then emits (a barrier, like RMSNorm)."""
        eng = self.eng_idx[op]
        lanes = self.d.engines[eng].lanes
        if produce and (op in self.d.buffered_ops or op in self.d.rotation_ops):
            return self._buffered_op(seg, op, vin, out_num, out_den, skip)
        out: list[tuple[int, int, int]] = []
        prev = 0
        for _k, _i, cum in vin.entries:
            t = seg.block(eng, _cdiv(cum - prev, lanes), op)
            self.consume(seg, t, 0, vin, cum)
            if skip is not None:
                self.consume(seg, t, 1, skip, cum, main=False)
            if produce:
                out.append((DEP_LOCAL, t, cum * out_num // out_den))
            prev = cum
        self.close(seg, vin)
        return _Vec(out, eng)

    def _take_whole(self, seg: _Segment, op: str, eng: int, lanes: int, vin: _Vec, skip: _Vec | None = None) -> None:
        """Consume the whole input vector block by block (and the residual ``skip`` beside it): the first half of an
        operator that needs every element before it emits (norms, re-layout buffers)."""
        prev = 0
        for _k, _i, cum in vin.entries:
            t = seg.block(eng, _cdiv(cum - prev, lanes), op)
            self.consume(seg, t, 0, vin, cum)
            if skip is not None:
                self.consume(seg, t, 1, skip, cum, main=False)
            prev = cum
        self.close(seg, vin)

    def _buffered_op(self, seg: _Segment, op: str, vin: _Vec, out_num: int, out_den: int,
                     skip: _Vec | None) -> _Vec:
        eng = self.eng_idx[op]
        lanes = self.d.engines[eng].lanes
        self._take_whole(seg, op, eng, lanes, vin, skip)
        n = vin.cum[-1] * out_num // out_den
        first = True
        if op in self.d.rotation_ops:  # FlexLLM FHT.h dec_FHT: per stage a shuffle pass + a half-rate exchange pass
            stages = max(1, (n - 1).bit_length())
            seg.block(eng, _cdiv(3 * stages * n, 2 * lanes), op, drain=True)
            first = False
        out = []
        prev = 0
        for j, cum in enumerate(self.vec_chunks(n)):
            t = seg.block(eng, _cdiv(cum - prev, lanes), op, drain=(j == 0 and first))
            out.append((DEP_LOCAL, t, cum))
            prev = cum
        return _Vec(out, eng)

    def norm_op(self, seg: _Segment, op: str, vin: _Vec, n: int) -> _Vec:
        """RMSNorm: sum of squares over the streamed input, then (barrier) scaled output blocks."""
        eng = self.eng_idx[op]
        lanes = self.d.engines[eng].lanes
        self._take_whole(seg, op, eng, lanes, vin)
        out = []
        prev = 0
        for j, cum in enumerate(self.vec_chunks(n)):
            t = seg.block(eng, _cdiv(cum - prev, lanes), op, drain=(j == 0))
            out.append((DEP_LOCAL, t, cum))
            prev = cum
        return _Vec(out, eng)

    def load_blocks(self, seg: _Segment, op: str, vin: _Vec) -> None:
        """The engine's pass over its operand buffer once the whole input vector is in: the per-token activation
        scale needs every element, then the vector is quantised (vector_chunk elements per cycle). The producer
        writes that buffer directly, so it never back-pressures."""
        eng = self.eng_idx[op]
        vin.buffered = True
        n = vin.cum[-1]
        t = seg.block(eng, self.d.operand_passes * _cdiv(n, self.d.vector_chunk), op)
        self.consume(seg, t, 0, vin, n)

    def fused(self, op: str, part: str = "layer") -> list[Op]:
        """The graph operators streaming operator ``op`` computes (see :data:`FUSION`)."""
        names, _how = FUSION[op]
        src = {"layer": self.g.layers[0], "prologue": self.g.prologue, "epilogue": self.g.epilogue}[part]
        return [o for o in src if o.kind in ("linear", "router", "head", "embed")
                and any(o.name == n or o.name.endswith("." + n) for n in names)]

    def account(self, ops: list[Op]) -> None:
        """Enter the parameter bytes of ``ops`` in the ledger (what the requests below carry, and ``onchip``: the
        bytes of the classes the design keeps on chip, which no request carries)."""
        for o in ops:
            self.ledger["weights"] += o.bytes.weights
            self.ledger["metadata"] += o.bytes.metadata
            self.ledger["bias"] += o.bytes.bias
            self.ledger["onchip"] += o.bytes.weights + o.bytes.metadata + o.bytes.bias - streamed_bytes(self.d, o)

    def shape(self, op: str, part: str = "layer") -> tuple[list[Op], int, int, list[tuple[int, int]]]:
        """(graph ops, rows, cols, row segments [(rows, payload bytes per row)]) of fused operator ``op``."""
        ops = self.fused(op, part)
        if not ops:
            raise DesignError(f"design '{self.d.name}': the graph of '{self.m.name}' has no operator for '{op}'")
        if FUSION[op][1] == "rows":
            cols = ops[0].in_features
            if any(o.in_features != cols for o in ops):
                raise DesignError(f"'{op}': fused operators of different input widths")
            segs = [(o.out_features, streamed_bytes(self.d, o) // o.out_features) for o in ops]
            return ops, sum(o.out_features for o in ops), cols, segs
        rows = ops[0].out_features  # inputs concatenated: one row holds every fused matrix's row
        per_row = sum(streamed_bytes(self.d, o) // o.out_features for o in ops)
        return ops, rows, sum(o.in_features for o in ops), [(rows, per_row)]

    @staticmethod
    def _prefix(segs: list[tuple[int, int]], k: int) -> int:
        """Payload bytes of the first ``k`` rows."""
        total = 0
        for n, rb in segs:
            take = min(n, k)
            total += take * rb
            k -= take
            if k <= 0:
                break
        return total

    def matvec(self, seg: _Segment, op: str, vin: _Vec, part: str = "layer") -> _Vec:
        """Matrix-vector product streaming its weights; output- or input-stationary per the engine. Shapes and
        payload bytes come from the graph operators ``op`` fuses."""
        ops, rows, cols, segs = self.shape(op, part)
        self.account(ops)
        eng = self.eng_idx[op]
        e = self.d.engines[eng]
        self.macs += rows * cols
        out: list[tuple[int, int, int]] = []
        if e.order == "output" or op == "lm_head":
            self.load_blocks(seg, op, vin)
            rb = max(b for _n, b in segs)
            uniform = all(b == rb for _n, b in segs)  # one payload per row: no prefix walk needed
            rpt = max(1, (e.ports * e.burst_bytes) // rb)
            done = 0
            first = True
            while done < rows:
                r = min(rpt, rows - done)
                fill = e.tile_overhead_cycles * tile_ends(done, done + r, rows, e.tile_rows)
                issue = _cdiv(r * cols, e.lanes)
                if e.scale_rows_per_cycle:  # the scale port delivers scale_rows_per_cycle output rows per cycle
                    issue = max(issue, _cdiv(r, e.scale_rows_per_cycle))
                t = seg.block(eng, issue + fill, op, drain=first)
                first = False
                self.weight_reqs(seg, t, eng, r * rb if uniform else
                                 self._prefix(segs, done + r) - self._prefix(segs, done))
                done += r
                out.append((DEP_LOCAL, t, done))
            return _Vec(out, eng)
        # input-stationary: column blocks accumulate into all outputs; outputs leave at the end
        dynamic = self.d.act_quant == "dynamic"
        vin.buffered = True
        if dynamic:
            self.load_blocks(seg, op, vin)
        wb = self.d.weight_bits
        w_total = sum(o.bytes.weights for o in ops)
        cpt = max(1, (e.ports * e.burst_bytes * 8) // (rows * wb))
        done = 0
        first = dynamic
        while done < cols:
            c = min(cpt, cols - done)
            t = seg.block(eng, _cdiv(rows * c, e.lanes), op, drain=first)
            first = False
            if not dynamic:
                self.consume(seg, t, 0, vin, done + c)
            self.weight_reqs(seg, t, eng, w_total * (done + c) // cols - w_total * done // cols)
            done += c
        if not dynamic:
            self.close(seg, vin)
        extra = sum(streamed_bytes(self.d, o) - o.bytes.weights for o in ops)
        prev = 0
        for j, cum in enumerate(self.vec_chunks(rows)):
            t = seg.block(eng, _cdiv(cum - prev, self.d.vector_chunk), op, drain=(j == 0))
            if j == 0 and extra:
                self.weight_reqs(seg, t, eng, extra)
            out.append((DEP_LOCAL, t, cum))
            prev = cum
        return _Vec(out, eng)

    def attention(self, seg: _Segment, vin: _Vec, ctx: int, kv_base: list[int], heads: int) -> dict[str, Any]:
        """GQA attention over ``ctx`` cached tokens (+ the new one, on chip) per *unit* of ``attn_head_parallel``
        KV heads processed side by side: K blocks, softmax, V blocks; the new token's K and V are written to HBM.
        With ``attn_q_serial`` the query heads of a group run one after another, each re-streaming K and V.
        Compiles the first ``heads`` units (the others are copies of unit 1, made by :func:`compile_token`)."""
        op = "attention"
        eng = self.eng_idx[op]
        e = self.d.engines[eng]
        m = self.m
        ctx = attention_keys(m, 0, 1, ctx)[1]  # cached tokens inside the attention window (graph)
        g = m.heads // m.kv_heads
        hp = self.d.attn_head_parallel
        rounds, gq = (g, 1) if self.d.attn_q_serial else (1, g)  # query-head rounds, query heads per round
        hd = m.head_dim
        tb = _cdiv(hp * hd * self.d.kv_bits, 8)  # bytes of one token's K (or V) for one unit
        tpu = max(1, _cdiv(self.granule, tb)) if tb < self.granule else 1  # tokens per striping unit
        tpr = max(1, e.burst_bytes // tb)  # tokens per read request
        P = e.ports
        units = _cdiv(ctx, tpu)
        tokens = []
        for p in range(P):
            n_u = units // P + (1 if p < units % P else 0)
            n_t = n_u * tpu
            if units and p == (units - 1) % P:
                n_t -= units * tpu - ctx
            tokens.append(n_t)
        n_req = [_cdiv(n, tpr) for n in tokens]
        n_tiles = max(n_req) if n_req else 0
        # per tile i (the same for every unit and query round): its read requests (port, bytes, offset from the K
        # or V base), the cached tokens it streams, and the cycles of its K and V blocks
        macs_per_token = hd * gq * hp
        port0 = self.port0[eng]
        tile_reqs: list[list[tuple[int, int, int]]] = []
        tile_toks: list[int] = []
        k_cyc: list[int] = []
        v_cyc: list[int] = []
        for i in range(n_tiles):
            reqs = []
            toks = 0
            for p in range(P):
                if i < n_req[p]:
                    n = min(tpr, tokens[p] - i * tpr)
                    toks += n
                    reqs.append((port0 + p, n * tb, i * tpr * tb))
            # K: one dataflow iteration per tile_rows cached tokens (V: per tile_rows dims, below)
            lo = sum(min(tpr * i, tokens[p]) for p in range(P))
            fill = e.tile_overhead_cycles * tile_ends(lo, lo + toks, ctx, e.tile_rows)
            tile_reqs.append(reqs)
            tile_toks.append(toks)
            k_cyc.append(max(1, _cdiv(toks * macs_per_token, e.lanes) + fill))
            v_cyc.append(max(1, _cdiv(toks * macs_per_token, e.lanes)))
        wport = (ctx // tpu) % P
        vc = self.d.vector_chunk
        sm_lanes = self.d.softmax_lanes or vc
        self.load_blocks(seg, op, vin)
        load_end = len(seg.eng) - 1
        out = []
        head_start = []
        head_reqs = []
        for h in range(heads):
            head_start.append(len(seg.eng))
            head_reqs.append([len(r) for r in seg.reqs])
            bases = (kv_base[2 * h], kv_base[2 * h + 1])

            def kv_tile(kind: int, i: int, drain: bool = False) -> None:
                t = seg.block(eng, k_cyc[i] if kind == 0 else v_cyc[i], op, drain=drain)
                base = bases[kind]
                for port, nb, offset in tile_reqs[i]:
                    seg.reqs[port].append((nb, base + offset, 0, t, 0, KIND_KV))
                self.macs += tile_toks[i] * macs_per_token

            for rnd in range(rounds):
                seg.block(eng, _cdiv(hd * gq * hp, e.lanes), op, drain=(h == 0 and rnd == 0))  # q . k_new
                self.macs += 2 * hd * gq * hp
                if self.d.softmax == "two-pass":
                    for i in range(n_tiles):
                        kv_tile(0, i)
                    # max, exp + sum (and normalise) over all scores
                    seg.block(eng, self.d.softmax_passes * _cdiv((ctx + 1) * gq * hp, sm_lanes), op, drain=True)
                    seg.block(eng, _cdiv(hd * gq * hp, e.lanes), op)  # p_new . v_new
                    for i in range(n_tiles):
                        kv_tile(1, i)
                else:
                    seg.block(eng, _cdiv(hd * gq * hp, e.lanes), op)
                    for i in range(n_tiles):
                        kv_tile(0, i)
                        kv_tile(1, i)
                # V's dataflow iterations (tile_rows head dimensions each, over all tokens) drain, then normalise
                v_fill = e.tile_overhead_cycles * _cdiv(hd, e.tile_rows) if e.tile_rows else 0
                t = seg.block(eng, _cdiv(hd * gq * hp, vc) + v_fill, op, drain=True)
            out.append((DEP_LOCAL, t, (h + 1) * g * hd * hp))
            # the new token's K and V go to the port that owns token ctx
            p = self.port0[eng] + wport
            for kind in (0, 1):
                off = seg.cyc[load_end] + e.pipeline_latency_cycles + 1
                seg.reqs[p].append((tb, bases[kind] + tokens[wport] * tb, 1, load_end, off, KIND_KV))
        head_start.append(len(seg.eng))
        head_reqs.append([len(r) for r in seg.reqs])
        return {"out": out, "head_start": head_start, "head_reqs": head_reqs, "engine": eng}

    # ---- whole token
    def down_cum(self) -> list[int]:
        """Blocks of the residual stream as the down projection (and the residual add after it) emit them."""
        e = self.E("down")
        _ops, h, _cols, segs = self.shape("down")
        if "ffn_add" in self.d.buffered_ops or "ffn_add" in self.d.rotation_ops:
            return self.vec_chunks(h)
        if e.order == "output":
            rpt = max(1, (e.ports * e.burst_bytes) // max(b for _n, b in segs))
            return [min(h, (k + 1) * rpt) for k in range(_cdiv(h, rpt))]
        return self.vec_chunks(h)

    def pre(self, x_cum: list[int]) -> tuple[_Segment, _Vec]:
        """Layer part before attention: RMSNorm, QKV projection, RoPE (independent of the context length)."""
        m = self.m
        seg = _Segment(self.n_ports)
        x_in = _Vec([(DEP_XIN, k, c) for k, c in enumerate(x_cum)], self.eng_idx["ffn_add"])
        xn = self.norm_op(seg, "attn_norm", x_in, m.hidden)
        qkv = self.matvec(seg, "qkv", xn)
        self.close(seg, xn)
        r = self.stream_op(seg, "rope", qkv)
        self.close(seg, qkv)
        seg.x_in = x_in  # type: ignore[attr-defined]
        return seg, r

    def post(self, x_cum: list[int]) -> tuple[_Segment, _Vec]:
        """Layer part after attention: O projection, residual, RMSNorm, gate/up, SiLU x up, down, residual."""
        m = self.m
        seg = _Segment(self.n_ports)
        hp = self.d.attn_head_parallel
        g_hd = m.heads // m.kv_heads * m.head_dim * hp
        a = _Vec([(DEP_ATT, h, (h + 1) * g_hd) for h in range(m.kv_heads // hp)], self.eng_idx["attention"])
        x_in = _Vec([(DEP_XIN, k, c) for k, c in enumerate(x_cum)], self.eng_idx["ffn_add"])
        o = self.matvec(seg, "o_proj", a)
        x2 = self.stream_op(seg, "attn_add", o, skip=x_in)
        self.close(seg, o)
        xn2 = self.norm_op(seg, "ffn_norm", x2, m.hidden)
        gu = self.matvec(seg, "gate_up", xn2)
        self.close(seg, xn2)
        s = self.stream_op(seg, "silu_mul", gu, self.shape("down")[2], self.shape("gate_up")[1])
        self.close(seg, gu)
        dn = self.matvec(seg, "down", s)
        self.close(seg, s)
        x3 = self.stream_op(seg, "ffn_add", dn, skip=x2)
        self.close(seg, dn)
        self.close(seg, x2)
        return seg, x3

    def head(self, x_cum: list[int]) -> tuple[_Segment, _Vec]:
        """The embedding row: gathered from HBM by the embed engine, or (embed on the host) received from the host
        link into the residual engine's buffer, vector_chunk elements per cycle."""
        seg = _Segment(self.n_ports)
        x_eng = self.eng_idx["ffn_add"]
        eng = x_eng if on_host(self.d, "embed") else self.eng_idx["embed"]
        t = seg.block(eng, _cdiv(self.m.hidden, self.d.vector_chunk), "embed")
        if not on_host(self.d, "embed"):
            emb = self.fused("embed", "prologue")
            self.account(emb)
            self.weight_reqs(seg, t, eng, sum(streamed_bytes(self.d, o) for o in emb))
        out = []
        prev = 0
        for j, cum in enumerate(x_cum):
            t = seg.block(x_eng, _cdiv(cum - prev, self.d.vector_chunk), "embed", drain=(j == 0))
            if x_eng != eng and j == 0:
                seg.deps[t][0] = (DEP_LOCAL, 0, seg.cyc[0] + self.d.engines[eng].pipeline_latency_cycles +
                                  self.hop[eng][x_eng])
            out.append((DEP_LOCAL, t, cum))
            prev = cum
        return seg, _Vec(out, x_eng)

    def tail(self, x_cum: list[int], with_lm_head: bool) -> tuple[_Segment, _Vec]:
        m = self.m
        seg = _Segment(self.n_ports)
        x_in = _Vec([(DEP_XIN, k, c) for k, c in enumerate(x_cum)], self.eng_idx["ffn_add"])
        if not with_lm_head or on_host(self.d, "final_norm"):
            # ingest (or the whole head on the host): the token ends when the last layer's residual stream is complete
            eng = self.eng_idx["ffn_add"]
            t = seg.block(eng, 1, "ffn_add")
            self.consume(seg, t, 0, x_in, x_cum[-1], main=False)
            seg.x_in = x_in  # type: ignore[attr-defined]
            return seg, x_in
        xn = self.norm_op(seg, "final_norm", x_in, m.hidden)
        if on_host(self.d, "lm_head"):  # the normed hidden state leaves for the host
            self._to_host(seg, "final_norm", xn)
            seg.x_in = x_in  # type: ignore[attr-defined]
            return seg, x_in
        logits = self.matvec(seg, "lm_head", xn, "epilogue")
        self.close(seg, xn)
        if on_host(self.d, "argmax"):  # the logits leave for the host, which samples
            self._to_host(seg, "lm_head", logits)
            seg.x_in = x_in  # type: ignore[attr-defined]
            return seg, x_in
        self.stream_op(seg, "argmax", logits, produce=False)
        self.close(seg, logits)
        eng = self.eng_idx["argmax"]
        seg.block(eng, 1, "argmax", drain=True)  # the sampled token id
        seg.x_in = x_in  # type: ignore[attr-defined]
        return seg, x_in


    def _to_host(self, seg: _Segment, op: str, vec: _Vec) -> None:
        """The token's last block: ``op``'s engine has handed the whole of ``vec`` to the host link."""
        t = seg.block(self.eng_idx[op], 1, op)
        self.consume(seg, t, 0, vec, vec.cum[-1])
        self.close(seg, vec)


# ============================================================================================== linking
@njit(cache=True)
def _expand_port(head: np.ndarray, layer: np.ndarray, tail: np.ndarray, base: np.ndarray, tail_base: int,
                 w_stride: int, kv_stride: int, cyc: np.ndarray, buffer_depth: int, outstanding: int,
                 out: np.ndarray, need: np.ndarray) -> int:
    """One port's requests over the whole token into ``out`` rows (bytes, address, write, write-source block,
    its offset, slot block, slot offset, outstanding predecessor); ``need[block]`` = the last read a block
    consumes. Returns the most reads one block consumes (must fit the port buffer)."""
    n_layers = len(base)
    k = 0
    reads = np.empty(out.shape[0], dtype=np.int64)  # request index of each read, in order
    cons = np.empty(out.shape[0], dtype=np.int64)  # consumer block of each read
    nr = 0
    worst = 0
    run_block = -1
    run = 0
    for part in range(3):
        src = head if part == 0 else (layer if part == 1 else tail)
        copies = n_layers if part == 1 else 1
        for j in range(copies):
            shift = 0 if part == 0 else (base[j] if part == 1 else tail_base)
            for i in range(src.shape[0]):
                addr = src[i, 1]
                if part == 1:
                    addr += j * (w_stride if src[i, 5] == 0 else kv_stride)
                out[k, 0] = src[i, 0]
                out[k, 1] = addr
                out[k, 2] = src[i, 2]
                blk = src[i, 3] + shift
                if src[i, 2] == 1:  # write: stores the result of block blk
                    out[k, 3] = blk
                    out[k, 4] = src[i, 4]
                    out[k, 5] = -1
                    out[k, 6] = 0
                    out[k, 7] = -1
                else:
                    out[k, 3] = -1
                    out[k, 4] = 0
                    if nr >= buffer_depth:
                        b = cons[nr - buffer_depth]
                        out[k, 5] = b
                        out[k, 6] = cyc[b]
                    else:
                        out[k, 5] = -1
                        out[k, 6] = 0
                    out[k, 7] = reads[nr - outstanding] - 0 if nr >= outstanding else -1
                    reads[nr] = k
                    cons[nr] = blk
                    nr += 1
                    need[blk] = k
                    if blk == run_block:
                        run += 1
                    else:
                        run_block = blk
                        run = 1
                    worst = max(worst, run)
                k += 1
    return worst


@njit(cache=True)
def _place(kind: np.ndarray, idx: np.ndarray, o: np.ndarray, first: np.ndarray, xprod: np.ndarray,
           eng: np.ndarray, cyc: np.ndarray, lat: np.ndarray, hop: np.ndarray, extra: int, dep: np.ndarray,
           off: np.ndarray) -> None:
    """Resolve a segment's dependencies for its copies starting at blocks ``first`` (copy j reads the layer
    input produced by blocks ``xprod[j]``): local indices are shifted, input-vector entries become producers
    (``extra`` cycles later: the layer-input round trip through HBM)."""
    m = kind.shape[0]
    for j in range(len(first)):
        for i in range(m):
            row = first[j] + i
            for s in range(3):
                k = kind[i, s]
                dep[row, s] = -1
                off[row, s] = 0
                if k == DEP_LOCAL:
                    dep[row, s] = idx[i, s] + first[j]
                    off[row, s] = o[i, s]
                elif k == DEP_XIN:
                    prod = xprod[j, idx[i, s]]
                    dep[row, s] = prod
                    off[row, s] = cyc[prod] + lat[eng[prod]] + hop[eng[prod], eng[row]] + extra


@dataclasses.dataclass
class _Static:
    """Everything of a token that does not depend on the context length (compiled once per design)."""

    x_cum: list[int]
    head: _Segment
    head_x: _Vec
    pre: _Segment
    rope: _Vec
    post: _Segment
    post_x: _Vec
    tail: _Segment
    layer_w: list[int]
    total_w: list[int]
    static_macs: int
    layer_macs: int
    static_ledger: dict[str, int]
    layer_ledger: dict[str, int]
    port_class: list[int]  # ports with equal head, pre, post and tail requests share a class


@functools.lru_cache(maxsize=64)
def _static_parts(design: StreamingDesign, board: BoardSpec, llm: LlmSpec, with_lm_head: bool) -> _Static:
    c = _Compiler(design, board, llm)
    x_cum = c.down_cum()
    head, head_x = c.head(x_cum)
    head_w = list(c.wptr)
    macs0 = c.macs
    led0 = dict(c.ledger)
    pre, rope = c.pre(x_cum)
    post, post_x = c.post(x_cum)
    layer_w = [c.wptr[i] - head_w[i] for i in range(len(design.engines))]
    layer_macs = c.macs - macs0
    layer_ledger = {k: c.ledger[k] - led0[k] for k in c.ledger}
    c.wptr = [head_w[i] + layer_w[i] * llm.layers for i in range(len(design.engines))]
    tail, _tail_x = c.tail(x_cum, with_lm_head)
    port_eng = [i for i, e in enumerate(design.engines) for _ in range(e.ports)]
    reps: list[int] = []
    port_class = []
    chans = dense_channels(design)
    lone = [chans.count(ch) == 1 for ch in chans]  # a port on a shared channel is a class of its own
    for p in range(c.n_ports):
        for k, q in enumerate(reps):
            if lone[p] and lone[q] and port_eng[q] == port_eng[p] and \
                    all(seg.reqs[p] == seg.reqs[q] for seg in (head, pre, post, tail)):
                port_class.append(k)
                break
        else:
            port_class.append(len(reps))
            reps.append(p)
    static_ledger = {k: c.ledger[k] - layer_ledger[k] for k in c.ledger}
    return _Static(x_cum, head, head_x, pre, rope, post, post_x, tail, layer_w, list(c.wptr),
                   c.macs - layer_macs, layer_macs, static_ledger, layer_ledger, port_class)


class _Layer:
    """One decoder layer as arrays (pre + attention + post), with the same interface the linker uses."""

    def __init__(self, arrs: dict[str, np.ndarray], reqs: Any, x_in: _Vec, x_out: np.ndarray,
                 att_key: list[bytes]) -> None:
        self._arrs = arrs
        self._make_reqs = reqs  # port -> request array, built on demand (only class representatives need one)
        self._reqs: dict[int, np.ndarray] = {}
        self.x_in = x_in
        self.x_out = x_out
        self.att_key = att_key

    def arrays(self) -> dict[str, np.ndarray]:
        return self._arrs

    def req_array(self, port: int) -> np.ndarray:
        if port not in self._reqs:
            self._reqs[port] = self._make_reqs(port)
        return self._reqs[port]


def kv_region_bytes(design: StreamingDesign, llm: LlmSpec, board: BoardSpec) -> int:
    """Bytes one attention port reserves for one (layer, unit of ``attn_head_parallel`` KV heads, K or V) at
    ``max_ctx`` tokens, 4 KB aligned."""
    e = design.engine_of("attention")
    tb = _cdiv(design.attn_head_parallel * llm.head_dim * design.kv_bits, 8)
    per_port = _cdiv(design.max_ctx + 1, e.ports) + _cdiv(board.hbm.granule_bytes, tb)
    return _cdiv(per_port * tb, 4096) * 4096


def compile_token(design: StreamingDesign, board: BoardSpec, llm: LlmSpec, ctx: int,
                  with_lm_head: bool = True, per_port: bool = False) -> Program:
    """The program of one token decoded after ``ctx`` cached tokens (``with_lm_head=False``: ingest, logits
    discarded, the LM head and sampler are skipped). ``per_port`` also builds every port's own request list
    (for the cycle-stepped reference, which simulates each port instead of one per class)."""
    if ctx < 0:
        raise DesignError(f"context length must be >= 0, got {ctx}")
    if ctx > design.max_ctx:
        raise DesignError(f"design '{design.name}': ctx {ctx} exceeds its KV-cache reservation max_ctx = "
                          f"{design.max_ctx}")
    check_structure(design)
    if llm.kv_heads % design.attn_head_parallel:
        raise DesignError(f"design '{design.name}': attn_head_parallel = {design.attn_head_parallel} must divide the "
                          f"{llm.kv_heads} KV heads of {llm.name}")
    st = _static_parts(design, board, llm, with_lm_head)
    c = _Compiler(design, board, llm)
    a_eng = c.eng_idx["attention"]
    kv_base0 = _cdiv(st.total_w[a_eng], 1 << 20) << 20
    region = kv_region_bytes(design, llm, board)
    units = llm.kv_heads // design.attn_head_parallel
    layer, att_macs = _layer_for(design, board, llm, ctx, kv_base0)
    L = llm.layers
    prog = _link(design, c, st, layer, L, 2 * units * region,
                 st.static_macs + (st.layer_macs + att_macs) * L, per_port)
    prog.param_bytes.update({k: st.static_ledger[k] + L * st.layer_ledger[k] for k in st.layer_ledger})
    prog.req_bytes.update(_request_bytes(st, layer, prog, L))
    return prog


@functools.lru_cache(maxsize=4)
def _layer_for(design: StreamingDesign, board: BoardSpec, llm: LlmSpec, ctx: int, kv_base0: int
               ) -> tuple[_Layer, int]:
    """The layer :func:`compile_token` links for ``ctx`` with the KV cache at ``kv_base0``, memoized for the next
    token at the same context: the layer's pre and post parts are compiled before the tail (which alone holds the
    LM head), so a decoded and an ingested token at one context share it (the cycle-level drafts' samples come in
    such pairs; tests/test_streaming.py checks the parts are equal)."""
    st = _static_parts(design, board, llm, True)
    region = kv_region_bytes(design, llm, board)
    units = llm.kv_heads // design.attn_head_parallel
    return _layer(design, _Compiler(design, board, llm), st, ctx,
                  [kv_base0 + i * region for i in range(2 * units)], region)


def _request_bytes(st: _Static, layer: _Layer, prog: Program, L: int) -> dict[str, int]:
    """Bytes the program's requests move, by kind (weights read, KV read, KV written), summed over every port
    (one representative per class of identical ports, times the class size)."""
    out = {"param_read": 0, "kv_read": 0, "kv_write": 0}
    for g, p in enumerate(prog.g_port):
        mult = int(prog.g_mult[g])
        for arr, copies in ((st.head.req_array(p), 1), (layer.req_array(int(p)), L), (st.tail.req_array(p), 1)):
            if not len(arr):
                continue
            kv = arr[:, 5] == KIND_KV
            wr = arr[:, 2] == 1
            n = arr[:, 0]
            out["param_read"] += mult * copies * int(n[~kv & ~wr].sum())
            out["kv_read"] += mult * copies * int(n[kv & ~wr].sum())
            out["kv_write"] += mult * copies * int(n[kv & wr].sum())
    return out


def _layer(design: StreamingDesign, c: _Compiler, st: _Static, ctx: int, kv_base: list[int],
           region: int) -> tuple[_Layer, int]:
    """Assemble one layer for ``ctx``: the cached pre/post parts around attention compiled for this context
    (heads 0 and 1 compiled, heads 2.. copied from head 1 with shifted block indices and KV addresses)."""
    m = c.m
    pre = st.pre
    n_pre = len(pre.eng)
    seg = _Segment(c.n_ports)
    seg.eng, seg.cyc, seg.drain, seg.op = list(pre.eng), list(pre.cyc), list(pre.drain), list(pre.op)
    seg.deps = list(pre.deps)
    rope = _Vec(list(st.rope.entries), st.rope.engine)
    units = m.kv_heads // design.attn_head_parallel
    info = c.attention(seg, rope, ctx, kv_base, heads=min(units, 2))
    eng_list = seg.eng[n_pre:]
    att = {"eng": np.array(eng_list, np.int64), "cyc": np.array(seg.cyc[n_pre:], np.int64),
           "drain": np.array(seg.drain[n_pre:], np.int64), "op": np.array(seg.op[n_pre:], np.int64)}
    deps = np.array(seg.deps[n_pre:], dtype=np.int64).reshape(len(eng_list), 3, 3)
    att.update(dkind=deps[:, :, 0], didx=deps[:, :, 1], doff=deps[:, :, 2])
    att_reqs = [np.array(r, dtype=np.int64).reshape(-1, 6) for r in seg.reqs]
    emit = [idx for _k, idx, _c in info["out"]]
    macs = c.macs // min(units, 2) * units  # every head attends over the same tokens
    extra = units - 2
    if extra > 0:  # copy head 1
        h0, h1 = info["head_start"][1] - n_pre, info["head_start"][2] - n_pre
        hl = h1 - h0
        for key in ("eng", "cyc", "drain", "op"):
            att[key] = np.concatenate([att[key], np.tile(att[key][h0:h1], extra)])
        for key in ("dkind", "didx", "doff"):
            att[key] = np.concatenate([att[key], np.tile(att[key][h0:h1], (extra, 1))])
        for p in range(c.n_ports):
            r0, r1 = info["head_reqs"][1][p], info["head_reqs"][2][p]
            if r1 == r0:
                continue
            one = att_reqs[p][r0:r1]
            rep = np.tile(one, (extra, 1))
            kk = np.repeat(np.arange(1, extra + 1), len(one))
            rep[:, 3] += np.where(rep[:, 2] == 0, kk * hl, 0)  # reads: their consumer moves; writes: same source
            rep[:, 1] += kk * 2 * region
            att_reqs[p] = np.concatenate([att_reqs[p], rep])
        emit += [emit[1] + j * hl for j in range(1, extra + 1)]
    n_att = len(att["eng"])
    # post, relocated behind pre + attention; its references to attention outputs become local
    po = st.post.arrays()
    shift = n_pre + n_att
    dkind, didx, doff = po["dkind"].copy(), po["didx"].copy(), po["doff"].copy()
    loc = dkind == DEP_LOCAL
    didx[loc] += shift
    a_ref = dkind == DEP_ATT
    if a_ref.any():
        emit_abs = np.array(emit, dtype=np.int64)  # layer-local already (the segment began with pre)
        tgt = emit_abs[didx[a_ref]]
        a_eng = info["engine"]
        doff[a_ref] = att["cyc"][tgt - n_pre] + design.engines[a_eng].pipeline_latency_cycles + \
            hop_matrix(design)[a_eng, po["eng"][np.nonzero(a_ref)[0]]]
        didx[a_ref] = tgt
        dkind[a_ref] = DEP_LOCAL
    pr = pre.arrays()
    arrs = {key: np.concatenate([pr[key], att[key], po[key]]) for key in ("eng", "cyc", "drain", "op")}
    for key, post_val in (("dkind", dkind), ("didx", didx), ("doff", doff)):
        arrs[key] = np.concatenate([pr[key], att[key], post_val])
    def port_reqs(p: int) -> np.ndarray:
        parts = []
        if pre.reqs[p]:
            parts.append(pre.req_array(p))
        if len(att_reqs[p]):
            parts.append(att_reqs[p])
        if st.post.reqs[p]:
            q = st.post.req_array(p).copy()
            q[:, 3] += shift
            parts.append(q)
        return np.concatenate(parts) if parts else np.zeros((0, 6), np.int64)

    att_key = [a.tobytes() for a in att_reqs]
    x_out = np.array([idx for _k, idx, _c in st.post_x.entries], dtype=np.int64) + shift
    return _Layer(arrs, port_reqs, pre.x_in, x_out, att_key), macs  # type: ignore[attr-defined]


def _link(design: StreamingDesign, c: _Compiler, st: _Static, layer: _Layer, L: int, kv_stride: int, macs: int,
          per_port: bool) -> Program:
    """Replicate the layer L times between head and tail and resolve every cross-segment reference."""
    head, head_x, tail, layer_w = st.head, st.head_x, st.tail, st.layer_w
    H, N, T = len(head.eng), len(layer.arrays()["eng"]), len(tail.eng)
    n = H + L * N + T
    hs, ls, ts = head.arrays(), layer.arrays(), tail.arrays()
    base = H + np.arange(L, dtype=np.int64) * N  # first block of each layer
    tail_base = H + L * N
    n_x = len(layer.x_out)
    # producers of each layer's input vector: head's emitted blocks, then each layer's residual-add blocks
    x_prod = np.empty((L + 1, n_x), dtype=np.int64)
    x_prod[0] = [idx for _k, idx, _c in head_x.entries]
    x_prod[1:] = base[:, None] + layer.x_out[None, :]

    eng = np.concatenate([hs["eng"], np.tile(ls["eng"], L), ts["eng"]])
    cyc = np.concatenate([hs["cyc"], np.tile(ls["cyc"], L), ts["cyc"]])
    lat = np.array([e.pipeline_latency_cycles for e in design.engines], dtype=np.int64)
    dep = np.empty((n, 3), dtype=np.int64)  # every row is written by _place
    off = np.empty((n, 3), dtype=np.int64)

    hop = hop_matrix(design)

    def place(arrs: dict[str, np.ndarray], first: np.ndarray, xprod: np.ndarray, extra: int = 0) -> None:
        _place(arrs["dkind"], arrs["didx"], arrs["doff"], first, xprod, eng, cyc, lat, hop, extra, dep, off)

    place(hs, np.array([0], dtype=np.int64), x_prod[:1])
    io = design.layer_io_cycles
    if io > 0:  # each layer reads its whole input back from HBM: every entry waits for the last one plus the trip
        place(ls, base, np.ascontiguousarray(np.broadcast_to(x_prod[:L, -1:], (L, n_x))), io)
    else:
        place(ls, base, x_prod[:L])
    place(ts, np.array([tail_base], dtype=np.int64), x_prod[L:L + 1])
    # back-pressure of each layer input's FIFO: producer of entry k waits for the reader of entry k - depth
    q = design.fifo_depth
    for s_arrs, seg, firsts, prods in ((ls, layer, base, x_prod[:L]),
                                       (ts, tail, np.array([tail_base]), x_prod[L:L + 1])):
        xin: _Vec = seg.x_in  # type: ignore[attr-defined]
        if xin.consumer_engine == NO or xin.consumer_engine == xin.engine or n_x <= q or (io > 0 and seg is layer):
            continue
        free = np.array(xin.free_tile, dtype=np.int64)
        ks = np.arange(q, min(n_x, len(free) + q))
        for j, f in enumerate(firsts):
            dep[prods[j, ks], 2] = f + free[ks - q]
            off[prods[j, ks], 2] = 1

    drain = np.concatenate([hs["drain"], np.tile(ls["drain"], L), ts["drain"]])
    op = np.concatenate([hs["op"], np.tile(ls["op"], L), ts["op"]])
    t_layer = np.concatenate([np.full(H, -1), np.repeat(np.arange(L), N), np.full(T, L)]).astype(np.int64)
    parts_e = []
    for e in range(len(design.engines)):
        parts_e += [np.nonzero(hs["eng"] == e)[0], (base[:, None] + np.nonzero(ls["eng"] == e)[0][None, :]).ravel(),
                    tail_base + np.nonzero(ts["eng"] == e)[0]]
    order = np.concatenate(parts_e).astype(np.int64)
    counts = np.bincount(eng, minlength=len(design.engines))
    e_ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)

    # ---- requests per port
    n_ports = c.n_ports
    port_eng = np.concatenate([np.full(e.ports, i) for i, e in enumerate(design.engines)]).astype(np.int64) \
        if n_ports else np.zeros(0, np.int64)
    # classes of identical ports (same requests, same consumers): the fast engine simulates one of each
    port_group = np.zeros(n_ports, dtype=np.int64)
    g_port: list[int] = []
    for p in range(n_ports):
        for g, rep in enumerate(g_port):
            if st.port_class[p] == st.port_class[rep] and layer.att_key[p] == layer.att_key[rep]:
                port_group[p] = g
                break
        else:
            port_group[p] = len(g_port)
            g_port.append(p)
    g_mult = np.bincount(port_group, minlength=len(g_port)).astype(np.int64) if n_ports else np.zeros(0, np.int64)

    bufs = [design.engines[int(port_eng[p])].buffer_depth for p in range(n_ports)]
    outs = [design.engines[int(port_eng[p])].max_outstanding for p in range(n_ports)]
    empty = np.zeros((0, 6), np.int64)

    def expand(ports: list[int]) -> tuple[np.ndarray, ...]:
        """Request arrays of ``ports`` (CSR), each port's head + L layer copies + tail, with buffer-slot and
        outstanding-limit predecessors and the read each block needs."""
        counts = [len(head.req_array(p)) + L * len(layer.req_array(p)) + len(tail.req_array(p)) for p in ports]
        ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        tot = int(ptr[-1])
        out = np.empty((tot, 8), dtype=np.int64)
        need = np.full((n, len(ports)), NO, dtype=np.int64)
        for i, p in enumerate(ports):
            ei = int(port_eng[p])
            worst = _expand_port(head.req_array(p) if len(head.req_array(p)) else empty,
                                 layer.req_array(p) if len(layer.req_array(p)) else empty,
                                 tail.req_array(p) if len(tail.req_array(p)) else empty,
                                 base, tail_base, layer_w[ei], kv_stride, cyc, bufs[p], outs[p],
                                 out[ptr[i]:ptr[i + 1]], need[:, i])
            e = design.engines[ei]
            if worst > e.buffer_depth:
                raise DesignError(f"design '{design.name}': engine '{e.name}' needs {worst} requests of "
                                  f"{e.burst_bytes} B per port for one block but its port buffer holds "
                                  f"buffer_depth = {e.buffer_depth}; raise buffer_depth or burst_bytes")
        return ptr, out, need

    g_ptr, r_table, t_need_group = expand(g_port)
    p_ptr, pr_table, t_need_port = expand(list(range(n_ports)) if per_port else [])
    if shared(design):  # engines sharing a channel keep their data apart on it (fpga.streaming.ports.channel_bases)
        a_eng = c.eng_idx["attention"]
        foot = list(st.total_w)
        foot[a_eng] = (_cdiv(foot[a_eng], 1 << 20) << 20) + kv_stride * L
        bases = np.array(channel_bases(design, foot), np.int64)
        for ptr, table, ports in ((g_ptr, r_table, g_port), (p_ptr, pr_table, range(n_ports) if per_port else [])):
            for i, q in enumerate(ports):
                table[ptr[i]:ptr[i + 1], R_ADDR] += bases[q]
    return Program(
        n_blocks=n, t_eng=eng, t_cyc=cyc, t_drain=drain, t_op=op, t_layer=t_layer, t_dep=dep, t_off=off,
        e_ptr=e_ptr, e_list=order.astype(np.int64), e_lat=lat, final_block=n - 1,
        port_eng=port_eng, port_group=port_group,
        port_bytes=np.array([design.engines[int(e)].port_bytes for e in port_eng], np.int64),
        port_buffer=np.array(bufs, np.int64), port_outstanding=np.array(outs, np.int64),
        g_ptr=g_ptr, g_port=np.array(g_port, np.int64), g_mult=g_mult,
        r_table=r_table, t_need_group=t_need_group, p_ptr=p_ptr, pr_table=pr_table, t_need_port=t_need_port,
        macs=macs, port_chan=np.array(dense_channels(design), np.int64), arbitration=arbitration_code(design),
    )
