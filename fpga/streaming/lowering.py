"""Lower one decoded token's operators into program blocks and requests (:class:`_Compiler`).

Each streaming operator of the design becomes blocks on its engine (issue cycles from its lanes, tile fill,
barriers) and read/write requests on the engine's HBM ports; activation vectors between operators become
block dependencies with FIFO back-pressure between engines. The result is segments (head, the parts of one
layer, tail) that :mod:`fpga.streaming.templates` caches and :mod:`fpga.streaming.linking` replicates into a
:class:`fpga.streaming.program_format.Program`.

**Where bytes and MACs come from.** The lowering reads every matrix, its quantization metadata and biases from
the operator graph (:mod:`hwmodel.graph`) under the streaming designs' convention (:func:`quant_of`: one fp16
scale per output channel, or per ``quant_group_size`` inputs when the design sets it). Streaming operators fuse
graph operators (:data:`FUSION`): ``qkv`` = q, k, v projections (rows concatenated); ``gate_up`` = gate and up
projections, and for a mixture of experts the router, the routed experts' gate/up and the shared expert's
gate/up and sigmoid gate; ``down`` = the down projection, or the routed and shared experts' down projections
with their inputs concatenated (their outputs are summed). Norm gains stay on chip (loaded with the bitstream's
configuration, not per token). The compiler's ledger becomes :attr:`Program.param_bytes
<fpga.streaming.program_format.Program.param_bytes>`, the per-class bytes the requests carry (beside
``req_bytes``, the bytes of the requests themselves); tests/test_graph_conservation.py checks both against the
graph, integers, no tolerance.
"""

from __future__ import annotations

import bisect
import functools
from typing import Any

import numpy as np

from fpga.streaming.columns import Columns, column_graph
from fpga.streaming.design import DesignError, EngineSpec, StreamingDesign
from fpga.streaming.placement import on_host, streamed_bytes
from fpga.streaming.program_format import (
    DEP_ATT,
    DEP_LOCAL,
    DEP_XIN,
    KIND_KV,
    KIND_WEIGHT,
    _Segment,
    _Vec,
)
from fpga.streaming.row_blocks import _RowBlocks
from fpga.streaming.stream_blocks import _StreamBlocks
from hwmodel.graph import Graph, Op, QuantScheme, attention_keys, build_graph, per_channel
from hwmodel.specs import BoardSpec, LlmSpec


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
        return QuantScheme(
            weight_bits=design.weight_bits,
            kv_bits=design.kv_bits,
            granularity="group",
            group_size=g,
            act_bits=design.act_bits,
        )
    return per_channel(design.weight_bits, design.kv_bits, design.act_bits)


def embedding_table_bytes(design: StreamingDesign, llm: LlmSpec) -> int:
    """Bytes of the whole embedding table (rows and their metadata) under the design's convention (graph)."""
    q = quant_of(design)
    return llm.vocab * (q.weight_row_bytes(llm.hidden) + q.meta_row_bytes(llm.hidden))


@functools.lru_cache(maxsize=64)
def _graph0(llm: LlmSpec, q: QuantScheme) -> Graph:
    """The decode graph the lowering reads shapes and parameter bytes from (they do not depend on the context;
    attention's cached tokens do, and are taken per context from :func:`hwmodel.graph.attention_keys`)."""
    if llm.lowering_gaps:  # issue 26 families: refuse rather than drop their extra parameters
        raise DesignError(
            f"streaming lowering: {llm.name} has {', '.join(llm.lowering_gaps)}, not lowered "
            f"here yet (bounds and the operator graph handle them)"
        )
    if len({llm.window_of(i) for i in range(llm.layers)}) > 1:
        raise DesignError(
            f"'{llm.name}': the streaming lowering replicates one decoder layer, but its layers "
            f"differ in attention window (full_attention_layers = {llm.full_attention_layers})"
        )
    return build_graph(llm, q, "decode", 1, 0)


@functools.lru_cache(maxsize=64)
def hop_matrix(design: StreamingDesign) -> np.ndarray:
    """Cycles from a producer's result to its consumer, per (producer engine, consumer engine): 1 on the same
    engine; otherwise the FIFO latency plus ``slr_crossing_cycles`` per SLR boundary between the two engines
    (RapidStream pipelines every slot crossing of its floorplan). Memoized per design (read-only)."""
    n = len(design.engines)
    h = np.ones((n, n), dtype=np.int64)
    for i, a in enumerate(design.engines):
        for j, b in enumerate(design.engines):
            if i != j:
                h[i, j] = design.fifo_latency_cycles + design.slr_crossing_cycles * abs(a.slr - b.slr)
    h.setflags(write=False)
    return h


def tile_ends(lo: int, hi: int, total: int, tile: int) -> int:
    """Dataflow tiles of ``tile`` items (the last one clipped at ``total``) that end inside items (lo, hi]."""
    if tile <= 0:
        return 0
    n = hi // tile - lo // tile
    if hi == total and total % tile:
        n += 1
    return n


# ============================================================================================== compiler
class _Compiler(_RowBlocks, _StreamBlocks):
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
        if design.column_units > 1:  # one unit of split = columns: o_proj and down take whole inputs
            self.g = column_graph(self.g, design.column_units)
        self.ledger = {"weights": 0, "metadata": 0, "bias": 0, "onchip": 0, "padding": 0, "pad_bound": 0}
        self.hop = hop_matrix(design).tolist()

    # ---- helpers
    def segment(self) -> _Segment:
        """An empty segment with a request list per port (fpga/streaming/part_memo.py traces a part with its own)."""
        return _Segment(self.n_ports)

    def E(self, op: str) -> EngineSpec:
        return self.d.engines[self.eng_idx[op]]

    def consume(self, seg: _Segment, t: int, slot: int, vec: _Vec, upto_elems: int, main: bool = True) -> None:
        """Block ``t`` needs the first ``upto_elems`` elements of ``vec`` (dependency slot ``slot``)."""
        k = bisect.bisect_left(vec.cum, upto_elems) if upto_elems > 0 else 0
        kind, idx, _c = vec.entries[k]
        if kind == DEP_LOCAL:
            same = seg.eng[idx] == seg.eng[t]
            off = (
                seg.cyc[idx]
                + self.d.engines[seg.eng[idx]].pipeline_latency_cycles
                + (1 if same else self.hop[seg.eng[idx]][seg.eng[t]])
            )
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
        ents, free, reader, s_eng, deps = vec.entries, vec.free_tile, vec.consumer_engine, seg.eng, seg.deps
        for k in range(q, min(len(ents), len(free) + q)):  # entries k - q read already
            kind, idx, _c = ents[k]
            if kind == DEP_LOCAL and s_eng[idx] != reader:
                deps[idx][2] = (DEP_LOCAL, free[k - q], 1)

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
    def stream_op(
        self,
        seg: _Segment,
        op: str,
        vin: _Vec,
        out_num: int = 1,
        out_den: int = 1,
        skip: _Vec | None = None,
        produce: bool = True,
    ) -> _Vec:
        """Element-wise operator: one block per input block; ``out = in * num / den`` elements. A buffered operator
        (``buffered_ops``, ``rotation_ops``) takes its whole input first, then (rotation) runs the fast Hadamard
        transform's butterfly stages, then emits (a barrier, like RMSNorm)."""
        eng = self.eng_idx[op]
        lanes = self.d.engines[eng].lanes
        if produce and (op in self.d.buffered_ops or op in self.d.rotation_ops):
            return self._buffered_op(seg, op, vin, out_num, out_den, skip)
        ts = self._stream_blocks(seg, op, eng, lanes, vin, skip)
        self.close(seg, vin)
        if not produce:
            return _Vec([], eng)
        return _Vec([(DEP_LOCAL, t, c * out_num // out_den) for t, c in zip(ts, vin.cum)], eng)

    def _take_whole(self, seg: _Segment, op: str, eng: int, lanes: int, vin: _Vec, skip: _Vec | None = None) -> None:
        """Consume the whole input vector block by block (and the residual ``skip`` beside it): the first half of an
        operator that needs every element before it emits (norms, re-layout buffers)."""
        self._stream_blocks(seg, op, eng, lanes, vin, skip)
        self.close(seg, vin)

    def _buffered_op(self, seg: _Segment, op: str, vin: _Vec, out_num: int, out_den: int, skip: _Vec | None) -> _Vec:
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
        return [
            o
            for o in src
            if o.kind in ("linear", "router", "head", "embed")
            and any(o.name == n or o.name.endswith("." + n) for n in names)
        ]

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
            rpt = max(1, (e.ports * e.burst_bytes) // max(b for _n, b in segs))
            return self._row_blocks(seg, op, eng, rows, cols, segs, rpt)
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
        n = self.d.column_units  # split = columns: the unit's rows, then the other units' (all-gathered)
        if "ffn_add" in self.d.buffered_ops or "ffn_add" in self.d.rotation_ops:
            return self.vec_chunks(h * n)
        own = self.vec_chunks(h)
        if e.order == "output":
            rpt = max(1, (e.ports * e.burst_bytes) // max(b for _n, b in segs))
            own = [min(h, (k + 1) * rpt) for k in range(_cdiv(h, rpt))]
        return [r * h + c for r in range(n) for c in own]

    def pre(self, x_cum: list[int]) -> tuple[_Segment, _Vec]:
        """Layer part before attention: RMSNorm, QKV projection, RoPE (independent of the context length)."""
        m = self.m
        seg = self.segment()
        x_in = _Vec([(DEP_XIN, k, c) for k, c in enumerate(x_cum)], self.eng_idx["ffn_add"])
        xn = self.norm_op(seg, "attn_norm", x_in, m.hidden)
        qkv = self.matvec(seg, "qkv", xn)
        self.close(seg, xn)
        r = self.stream_op(seg, "rope", qkv)  # stream_op closes its input (qkv's FIFO back-pressure)
        seg.x_in = x_in  # type: ignore[attr-defined]
        return seg, r

    def post(self, x_cum: list[int]) -> tuple[_Segment, _Vec]:
        """Layer part after attention: O projection, residual, RMSNorm, gate/up, SiLU x up, down, residual."""
        m = self.m
        seg = self.segment()
        hp = self.d.attn_head_parallel
        g_hd = m.heads // m.kv_heads * m.head_dim * hp
        a = _Vec([(DEP_ATT, h, (h + 1) * g_hd) for h in range(m.kv_heads // hp)], self.eng_idx["attention"])
        x_in = _Vec([(DEP_XIN, k, c) for k, c in enumerate(x_cum)], self.eng_idx["ffn_add"])
        col = Columns(self)  # the all-gathers of split = columns (fpga/streaming/columns.py); identity otherwise
        o = col.matvec(seg, "o_proj", a)
        x2 = col.stream(seg, "attn_add", o, x_in)
        self.close(seg, o)
        xn2 = self.norm_op(seg, "ffn_norm", x2, m.hidden)
        gu = self.matvec(seg, "gate_up", xn2)
        self.close(seg, xn2)
        s = self.stream_op(seg, "silu_mul", gu, self.shape("down")[2] // col.n, self.shape("gate_up")[1])  # closes gu
        dn = col.matvec(seg, "down", s)
        self.close(seg, s)
        x3 = col.stream(seg, "ffn_add", dn, x2)
        self.close(seg, dn)
        self.close(seg, x2)
        return seg, x3

    def head(self, x_cum: list[int]) -> tuple[_Segment, _Vec]:
        """The embedding row: gathered from HBM by the embed engine, or (embed on the host) received from the host
        link into the residual engine's buffer, vector_chunk elements per cycle."""
        seg = self.segment()
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
                seg.deps[t][0] = (
                    DEP_LOCAL,
                    0,
                    seg.cyc[0] + self.d.engines[eng].pipeline_latency_cycles + self.hop[eng][x_eng],
                )
            out.append((DEP_LOCAL, t, cum))
            prev = cum
        return seg, _Vec(out, x_eng)

    def tail(self, x_cum: list[int], with_lm_head: bool) -> tuple[_Segment, _Vec]:
        m = self.m
        seg = self.segment()
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
        self.stream_op(seg, "argmax", logits, produce=False)  # closes logits (a second close wrote the same deps)
        eng = self.eng_idx["argmax"]
        seg.block(eng, 1, "argmax", drain=True)  # the sampled token id
        seg.x_in = x_in  # type: ignore[attr-defined]
        return seg, x_in

    def _to_host(self, seg: _Segment, op: str, vec: _Vec) -> None:
        """The token's last block: ``op``'s engine has handed the whole of ``vec`` to the host link."""
        t = seg.block(self.eng_idx[op], 1, op)
        self.consume(seg, t, 0, vec, vec.cum[-1])
        self.close(seg, vec)
