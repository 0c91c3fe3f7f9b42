"""Compile one decoded token of a design into the static *program* both simulators execute.

The program is a set of integer arrays (no Python objects), shared by the cycle-stepped reference
(:mod:`fpga.streaming_ref`) and the event-driven Numba engine (:mod:`fpga.streaming`):

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
"""
from __future__ import annotations

import bisect
import dataclasses
import functools
import math

import numpy as np

from fpga.design import ALL_OPS, DesignError, EngineSpec, StreamingDesign, check_structure
from hwmodel.specs import BoardSpec, LlmSpec

OP_ID = {op: i for i, op in enumerate(ALL_OPS)}
KIND_WEIGHT, KIND_KV = 0, 1
DEP_NONE, DEP_LOCAL, DEP_XIN = 0, 1, 2
NO = -1


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


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
    r_bytes: np.ndarray
    r_addr: np.ndarray
    r_write: np.ndarray
    r_dep: np.ndarray  # write: block whose result it stores, else -1
    r_dep_off: np.ndarray
    r_slot: np.ndarray  # read: block whose issue end frees the buffer slot this request needs, or -1
    r_slot_off: np.ndarray
    r_outprev: np.ndarray  # read: class-local index of the read max_outstanding before it, or -1
    t_need_group: np.ndarray  # (n_blocks, n_groups): class-local read request a block needs, or -1
    p_ptr: np.ndarray
    pr_bytes: np.ndarray
    pr_addr: np.ndarray
    pr_write: np.ndarray
    pr_dep: np.ndarray
    pr_dep_off: np.ndarray
    pr_slot: np.ndarray
    pr_slot_off: np.ndarray
    pr_outprev: np.ndarray
    t_need_port: np.ndarray  # (n_blocks, n_ports)
    macs: int
    ops_names: tuple[str, ...] = ALL_OPS

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
                (1 if same else self.d.fifo_latency_cycles)
            seg.deps[t][slot] = (DEP_LOCAL, idx, off)
        else:
            seg.deps[t][slot] = (DEP_XIN, idx, 0)
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

    def vec_chunks(self, n: int) -> list[int]:
        c = self.d.vector_chunk
        return [min(n, (i + 1) * c) for i in range(_cdiv(n, c))]

    # ---- operators
    def stream_op(self, seg: _Segment, op: str, vin: _Vec, out_num: int = 1, out_den: int = 1,
                  skip: _Vec | None = None, produce: bool = True) -> _Vec:
        """Element-wise operator: one block per input block; ``out = in * num / den`` elements."""
        eng = self.eng_idx[op]
        lanes = self.d.engines[eng].lanes
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

    def norm_op(self, seg: _Segment, op: str, vin: _Vec, n: int) -> _Vec:
        """RMSNorm: sum of squares over the streamed input, then (barrier) scaled output blocks."""
        eng = self.eng_idx[op]
        lanes = self.d.engines[eng].lanes
        prev = 0
        for _k, _i, cum in vin.entries:
            t = seg.block(eng, _cdiv(cum - prev, lanes), op)
            self.consume(seg, t, 0, vin, cum)
            prev = cum
        self.close(seg, vin)
        out = []
        prev = 0
        for j, cum in enumerate(self.vec_chunks(n)):
            t = seg.block(eng, _cdiv(cum - prev, lanes), op, drain=(j == 0))
            out.append((DEP_LOCAL, t, cum))
            prev = cum
        return _Vec(out, eng)

    def load_blocks(self, seg: _Segment, op: str, vin: _Vec) -> None:
        """The engine's pass over its operand buffer (per-token activation scale and quantisation) as the input
        arrives; the producer writes that buffer directly, so it never back-pressures."""
        eng = self.eng_idx[op]
        vin.buffered = True
        prev = 0
        for _k, _i, cum in vin.entries:
            t = seg.block(eng, _cdiv(cum - prev, self.d.vector_chunk), op)
            self.consume(seg, t, 0, vin, cum)
            prev = cum
        self.close(seg, vin)

    def row_bytes(self, cols: int, bias: bool) -> int:
        extra = 0 if self.d.weight_bits >= 16 else 2  # fp16 per-output-channel scale
        return _cdiv(cols * self.d.weight_bits, 8) + extra + (2 if bias else 0)

    def matvec(self, seg: _Segment, op: str, vin: _Vec, rows: int, cols: int, bias: bool = False) -> _Vec:
        """Matrix-vector product streaming its weights; output- or input-stationary per the engine."""
        eng = self.eng_idx[op]
        e = self.d.engines[eng]
        self.macs += rows * cols
        out: list[tuple[int, int, int]] = []
        if e.order == "output" or op == "lm_head":
            self.load_blocks(seg, op, vin)
            rb = self.row_bytes(cols, bias)
            rpt = max(1, (e.ports * e.burst_bytes) // rb)
            done = 0
            first = True
            while done < rows:
                r = min(rpt, rows - done)
                t = seg.block(eng, _cdiv(r * cols, e.lanes), op, drain=first)
                first = False
                self.weight_reqs(seg, t, eng, r * rb)
                done += r
                out.append((DEP_LOCAL, t, done))
            return _Vec(out, eng)
        # input-stationary: column blocks accumulate into all outputs; outputs leave at the end
        dynamic = self.d.act_quant == "dynamic"
        vin.buffered = True
        if dynamic:
            self.load_blocks(seg, op, vin)
        wb = self.d.weight_bits
        cpt = max(1, (e.ports * e.burst_bytes * 8) // (rows * wb))
        done = 0
        first = dynamic
        while done < cols:
            c = min(cpt, cols - done)
            t = seg.block(eng, _cdiv(rows * c, e.lanes), op, drain=first)
            first = False
            if not dynamic:
                self.consume(seg, t, 0, vin, done + c)
            self.weight_reqs(seg, t, eng, _cdiv(rows * c * wb, 8))
            done += c
        if not dynamic:
            self.close(seg, vin)
        extra = self.row_bytes(0, bias)
        prev = 0
        for j, cum in enumerate(self.vec_chunks(rows)):
            t = seg.block(eng, _cdiv(cum - prev, self.d.vector_chunk), op, drain=(j == 0))
            if j == 0 and extra:
                self.weight_reqs(seg, t, eng, rows * extra)
            out.append((DEP_LOCAL, t, cum))
            prev = cum
        return _Vec(out, eng)

    def attention(self, seg: _Segment, vin: _Vec, ctx: int, kv_base: list[int]) -> _Vec:
        """GQA attention over ``ctx`` cached tokens (+ the new one, on chip) per KV head: K blocks, softmax,
        V blocks; the new token's K and V are written to HBM."""
        op = "attention"
        eng = self.eng_idx[op]
        e = self.d.engines[eng]
        m = self.m
        g = m.heads // m.kv_heads
        hd = m.head_dim
        tb = _cdiv(hd * self.d.kv_bits, 8)  # bytes of one token's K (or V) for one head
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
        wport = (ctx // tpu) % P
        vc = self.d.vector_chunk
        self.load_blocks(seg, op, vin)
        load_end = len(seg.eng) - 1
        out = []
        for h in range(m.kv_heads):
            bases = (kv_base[2 * h], kv_base[2 * h + 1])

            def kv_tile(kind: int, i: int, drain: bool = False) -> None:
                toks = 0
                t = seg.block(eng, 1, op, drain=drain)
                for p in range(P):
                    if i < n_req[p]:
                        n = min(tpr, tokens[p] - i * tpr)
                        toks += n
                        seg.reqs[self.port0[eng] + p].append(
                            (n * tb, bases[kind] + i * tpr * tb, 0, t, 0, KIND_KV))
                seg.cyc[t] = max(1, _cdiv(toks * hd * g, e.lanes))
                self.macs += toks * hd * g

            seg.block(eng, _cdiv(hd * g, e.lanes), op, drain=(h == 0))  # q . k_new (on chip)
            self.macs += 2 * hd * g
            if self.d.softmax == "two-pass":
                for i in range(n_tiles):
                    kv_tile(0, i)
                seg.block(eng, _cdiv((ctx + 1) * g, vc), op, drain=True)  # max, exp, sum over all scores
                seg.block(eng, _cdiv(hd * g, e.lanes), op)  # p_new . v_new
                for i in range(n_tiles):
                    kv_tile(1, i)
            else:
                seg.block(eng, _cdiv(hd * g, e.lanes), op)
                for i in range(n_tiles):
                    kv_tile(0, i)
                    kv_tile(1, i)
            t = seg.block(eng, _cdiv(hd * g, vc), op, drain=True)  # normalise and emit the head's output
            out.append((DEP_LOCAL, t, (h + 1) * g * hd))
            # the new token's K and V go to the port that owns token ctx
            p = self.port0[eng] + wport
            for kind in (0, 1):
                off = seg.cyc[load_end] + e.pipeline_latency_cycles + 1
                seg.reqs[p].append((tb, bases[kind] + tokens[wport] * tb, 1, load_end, off, KIND_KV))
        return _Vec(out, eng)

    # ---- whole token
    def down_cum(self) -> list[int]:
        """Blocks of the residual stream as the down projection (and the residual add after it) emit them."""
        e = self.E("down")
        h, i = self.m.hidden, self.m.intermediate
        if e.order == "output":
            rpt = max(1, (e.ports * e.burst_bytes) // self.row_bytes(i, False))
            return [min(h, (k + 1) * rpt) for k in range(_cdiv(h, rpt))]
        return self.vec_chunks(h)

    def layer(self, ctx: int, x_cum: list[int], kv_base: list[int]) -> tuple[_Segment, _Vec]:
        m = self.m
        seg = _Segment(self.n_ports)
        x_eng = self.eng_idx["ffn_add"]
        x_in = _Vec([(DEP_XIN, k, c) for k, c in enumerate(x_cum)], x_eng)
        xn = self.norm_op(seg, "attn_norm", x_in, m.hidden)
        qkv = self.matvec(seg, "qkv", xn, m.q_dim + 2 * m.kv_dim, m.hidden, bias=m.qkv_bias)
        self.close(seg, xn)
        r = self.stream_op(seg, "rope", qkv)
        self.close(seg, qkv)
        a = self.attention(seg, r, ctx, kv_base)
        self.close(seg, r)
        o = self.matvec(seg, "o_proj", a, m.hidden, m.q_dim)
        self.close(seg, a)
        x2 = self.stream_op(seg, "attn_add", o, skip=x_in)
        self.close(seg, o)
        xn2 = self.norm_op(seg, "ffn_norm", x2, m.hidden)
        gu = self.matvec(seg, "gate_up", xn2, 2 * m.intermediate, m.hidden)
        self.close(seg, xn2)
        s = self.stream_op(seg, "silu_mul", gu, 1, 2)
        self.close(seg, gu)
        dn = self.matvec(seg, "down", s, m.hidden, m.intermediate)
        self.close(seg, s)
        x3 = self.stream_op(seg, "ffn_add", dn, skip=x2)
        self.close(seg, dn)
        self.close(seg, x2)
        seg.x_in = x_in  # type: ignore[attr-defined]
        return seg, x3

    def head(self, x_cum: list[int]) -> tuple[_Segment, _Vec]:
        seg = _Segment(self.n_ports)
        eng = self.eng_idx["embed"]
        t = seg.block(eng, _cdiv(self.m.hidden, self.d.vector_chunk), "embed")
        self.weight_reqs(seg, t, eng, self.row_bytes(self.m.hidden, False))
        x_eng = self.eng_idx["ffn_add"]
        out = []
        prev = 0
        for j, cum in enumerate(x_cum):
            t = seg.block(x_eng, _cdiv(cum - prev, self.d.vector_chunk), "embed", drain=(j == 0))
            if x_eng != eng and j == 0:
                seg.deps[t][0] = (DEP_LOCAL, 0, seg.cyc[0] + self.d.engines[eng].pipeline_latency_cycles +
                                  self.d.fifo_latency_cycles)
            out.append((DEP_LOCAL, t, cum))
            prev = cum
        return seg, _Vec(out, x_eng)

    def tail(self, x_cum: list[int], with_lm_head: bool) -> tuple[_Segment, _Vec]:
        m = self.m
        seg = _Segment(self.n_ports)
        x_in = _Vec([(DEP_XIN, k, c) for k, c in enumerate(x_cum)], self.eng_idx["ffn_add"])
        if not with_lm_head:  # ingest: the token ends when the last layer's residual stream is complete
            eng = self.eng_idx["ffn_add"]
            t = seg.block(eng, 1, "ffn_add")
            self.consume(seg, t, 0, x_in, x_cum[-1], main=False)
            seg.x_in = x_in  # type: ignore[attr-defined]
            return seg, x_in
        xn = self.norm_op(seg, "final_norm", x_in, m.hidden)
        logits = self.matvec(seg, "lm_head", xn, m.head_out_channels, m.hidden)
        self.close(seg, xn)
        self.stream_op(seg, "argmax", logits, produce=False)
        self.close(seg, logits)
        eng = self.eng_idx["argmax"]
        seg.block(eng, 1, "argmax", drain=True)  # the sampled token id
        seg.x_in = x_in  # type: ignore[attr-defined]
        return seg, x_in


# ============================================================================================== linking
def _seg_arrays(seg: _Segment) -> dict[str, np.ndarray]:
    deps = np.array(seg.deps, dtype=np.int64).reshape(len(seg.eng), 3, 3)
    return {"eng": np.array(seg.eng, np.int64), "cyc": np.array(seg.cyc, np.int64),
            "drain": np.array(seg.drain, np.int64), "op": np.array(seg.op, np.int64),
            "dkind": deps[:, :, 0], "didx": deps[:, :, 1], "doff": deps[:, :, 2]}


@functools.lru_cache(maxsize=64)
def _static_parts(design: StreamingDesign, board: BoardSpec, llm: LlmSpec, with_lm_head: bool):  # type: ignore[no-untyped-def]
    """Head and tail segments and the layer weight layout (independent of the context length)."""
    c = _Compiler(design, board, llm)
    x_cum = c.down_cum()
    head, head_x = c.head(x_cum)
    head_w = list(c.wptr)
    probe = _Compiler(design, board, llm)
    probe.wptr = [0] * len(design.engines)
    seg, _x = probe.layer(0, x_cum, [0] * (2 * llm.kv_heads))
    layer_w = list(probe.wptr)
    c.wptr = [head_w[i] + layer_w[i] * llm.layers for i in range(len(design.engines))]
    tail, tail_x = c.tail(x_cum, with_lm_head)
    total_w = list(c.wptr)
    return x_cum, head, head_x, head_w, layer_w, tail, tail_x, total_w, c.macs, probe.macs


def kv_region_bytes(design: StreamingDesign, llm: LlmSpec, board: BoardSpec) -> int:
    """Bytes one attention port reserves for one (layer, KV head, K or V) at ``max_ctx`` tokens, 4 KB aligned."""
    e = design.engine_of("attention")
    tb = _cdiv(llm.head_dim * design.kv_bits, 8)
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
    (x_cum, head, head_x, head_w, layer_w, tail, tail_x, total_w, static_macs,
     layer_macs_probe) = _static_parts(design, board, llm, with_lm_head)
    c = _Compiler(design, board, llm)
    a_eng = c.eng_idx["attention"]
    kv_base0 = _cdiv(total_w[a_eng], 1 << 20) << 20
    region = kv_region_bytes(design, llm, board)
    c.wptr = list(head_w)
    layer, layer_x = c.layer(ctx, x_cum, [kv_base0 + i * region for i in range(2 * llm.kv_heads)])
    L = llm.layers
    return _link(design, c, head, head_x, layer, layer_x, tail, L, layer_w, 2 * llm.kv_heads * region,
                 static_macs + c.macs * L, per_port)


def _link(design: StreamingDesign, c: _Compiler, head: _Segment, head_x: _Vec, layer: _Segment, layer_x: _Vec,
          tail: _Segment, L: int, layer_w: list[int], kv_stride: int, macs: int, per_port: bool) -> Program:
    H, N, T = len(head.eng), len(layer.eng), len(tail.eng)
    n = H + L * N + T
    hs, ls, ts = _seg_arrays(head), _seg_arrays(layer), _seg_arrays(tail)
    base = H + np.arange(L, dtype=np.int64) * N  # first block of each layer
    tail_base = H + L * N
    n_x = len(layer_x.entries)
    # producers of each layer's input vector: head's emitted blocks, then each layer's residual-add blocks
    x_prod = np.empty((L + 1, n_x), dtype=np.int64)
    x_prod[0] = [idx for _k, idx, _c in head_x.entries]
    loc_x = np.array([idx for _k, idx, _c in layer_x.entries], dtype=np.int64)
    x_prod[1:] = base[:, None] + loc_x[None, :]

    eng = np.concatenate([hs["eng"], np.tile(ls["eng"], L), ts["eng"]])
    cyc = np.concatenate([hs["cyc"], np.tile(ls["cyc"], L), ts["cyc"]])
    lat = np.array([e.pipeline_latency_cycles for e in design.engines], dtype=np.int64)
    dep = np.full((n, 3), NO, dtype=np.int64)
    off = np.zeros((n, 3), dtype=np.int64)

    def place(arrs: dict[str, np.ndarray], first: np.ndarray, xprod: np.ndarray) -> None:
        """Resolve a segment's dependencies for copies starting at blocks ``first`` (k copies)."""
        k = len(first)
        kind, idx, o = arrs["dkind"], arrs["didx"], arrs["doff"]
        m = len(kind)
        rows = (first[:, None] + np.arange(m)[None, :]).reshape(-1)
        for s in range(3):
            kd = np.tile(kind[:, s], k)
            ix = np.tile(idx[:, s], k)
            of = np.tile(o[:, s], k)
            copy = np.repeat(np.arange(k), m)
            g = np.full(k * m, NO, dtype=np.int64)
            loc = kd == DEP_LOCAL
            g[loc] = ix[loc] + np.repeat(first, m)[loc]
            xin = kd == DEP_XIN
            if xin.any():
                prod = xprod[copy[xin], ix[xin]]
                g[xin] = prod
                same = eng[prod] == eng[rows[xin]]
                of[xin] = cyc[prod] + lat[eng[prod]] + np.where(same, 1, design.fifo_latency_cycles)
            dep[rows, s] = g
            off[rows, s] = np.where(g >= 0, of, 0)

    place(hs, np.array([0], dtype=np.int64), x_prod[:1])
    place(ls, base, x_prod[:L])
    place(ts, np.array([tail_base], dtype=np.int64), x_prod[L:L + 1])
    # back-pressure of each layer input's FIFO: producer of entry k waits for the reader of entry k - depth
    q = design.fifo_depth
    for s_arrs, seg, firsts, prods in ((ls, layer, base, x_prod[:L]),
                                       (ts, tail, np.array([tail_base]), x_prod[L:L + 1])):
        xin: _Vec = seg.x_in  # type: ignore[attr-defined]
        if xin.consumer_engine == NO or xin.consumer_engine == xin.engine or n_x <= q:
            continue
        free = np.array(xin.free_tile, dtype=np.int64)
        ks = np.arange(q, min(n_x, len(free) + q))
        for j, f in enumerate(firsts):
            dep[prods[j, ks], 2] = f + free[ks - q]
            off[prods[j, ks], 2] = 1

    drain = np.concatenate([hs["drain"], np.tile(ls["drain"], L), ts["drain"]])
    op = np.concatenate([hs["op"], np.tile(ls["op"], L), ts["op"]])
    t_layer = np.concatenate([np.full(H, -1), np.repeat(np.arange(L), N), np.full(T, L)]).astype(np.int64)
    order = np.argsort(eng, kind="stable")
    counts = np.bincount(eng, minlength=len(design.engines))
    e_ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)

    # ---- requests per port
    n_ports = c.n_ports
    port_eng = np.concatenate([np.full(e.ports, i) for i, e in enumerate(design.engines)]).astype(np.int64) \
        if n_ports else np.zeros(0, np.int64)
    # classes of identical ports (same requests, same consumers): the fast engine simulates one of each
    sig: dict[tuple, int] = {}  # type: ignore[type-arg]
    port_group = np.zeros(n_ports, dtype=np.int64)
    g_port: list[int] = []
    for p in range(n_ports):
        key = (int(port_eng[p]), tuple(head.reqs[p]), tuple(layer.reqs[p]), tuple(tail.reqs[p]))
        if key not in sig:
            sig[key] = len(g_port)
            g_port.append(p)
        port_group[p] = sig[key]
    g_mult = np.bincount(port_group, minlength=len(g_port)).astype(np.int64) if n_ports else np.zeros(0, np.int64)

    def port_requests(p: int) -> np.ndarray:
        ei = int(port_eng[p])
        parts = []
        for seg, firsts, addr_step in ((head, np.array([0]), False), (layer, base, True),
                                       (tail, np.array([tail_base]), False)):
            rq = seg.reqs[p]
            if not rq:
                continue
            a = np.array(rq, dtype=np.int64).reshape(-1, 6)
            k = len(firsts)
            big = np.tile(a, (k, 1))
            big[:, 3] += np.repeat(firsts, len(a))
            if addr_step:
                layer_no = np.repeat(np.arange(k), len(a))
                big[:, 1] += layer_no * np.where(big[:, 5] == KIND_WEIGHT, layer_w[ei], kv_stride)
            parts.append(big)
        return np.concatenate(parts) if parts else np.zeros((0, 6), np.int64)

    def csr(lists: list[np.ndarray], buffers: list[int], outs: list[int]) -> tuple[np.ndarray, ...]:
        ptr = np.concatenate([[0], np.cumsum([len(a) for a in lists])]).astype(np.int64)
        allr = np.concatenate(lists) if lists else np.zeros((0, 6), np.int64)
        slot = np.full(len(allr), NO, np.int64)
        slot_off = np.zeros(len(allr), np.int64)
        outprev = np.full(len(allr), NO, np.int64)
        for i, a in enumerate(lists):
            if not len(a):
                continue
            reads = np.nonzero(a[:, 2] == 0)[0]
            qd, od = buffers[i], outs[i]
            if len(reads) > qd:
                tgt = a[reads[:-qd], 3]
                slot[ptr[i] + reads[qd:]] = tgt
                slot_off[ptr[i] + reads[qd:]] = cyc[tgt]
            if len(reads) > od:
                outprev[ptr[i] + reads[od:]] = reads[:-od]
        dep_w = np.where(allr[:, 2] == 1, allr[:, 3], NO)
        dep_off = np.where(allr[:, 2] == 1, allr[:, 4], 0)
        return (ptr, allr[:, 0].copy(), allr[:, 1].copy(), allr[:, 2].copy(), dep_w, dep_off, slot, slot_off,
                outprev, allr[:, 3].copy())

    bufs = [design.engines[int(port_eng[p])].buffer_depth for p in range(n_ports)]
    # (per-class lists are built below; per-port ones only for the cycle-stepped reference)
    outs = [design.engines[int(port_eng[p])].max_outstanding for p in range(n_ports)]
    g_lists = [port_requests(p) for p in g_port]
    (g_ptr, r_bytes, r_addr, r_write, r_dep, r_dep_off, r_slot, r_slot_off, r_outprev,
     r_cons) = csr(g_lists, [bufs[p] for p in g_port], [outs[p] for p in g_port])
    p_lists = [port_requests(p) for p in range(n_ports)] if per_port else g_lists[:0]
    (p_ptr, pr_bytes, pr_addr, pr_write, pr_dep, pr_dep_off, pr_slot, pr_slot_off, pr_outprev,
     pr_cons) = csr(p_lists, bufs if per_port else [], outs if per_port else [])

    def needs(ptr: np.ndarray, cons: np.ndarray, write: np.ndarray, k: int) -> np.ndarray:
        need = np.full((n, k), NO, dtype=np.int64)
        for i in range(k):
            sl = slice(ptr[i], ptr[i + 1])
            reads = np.nonzero(write[sl] == 0)[0]
            blocks = cons[sl][reads]
            # the latest request each block consumes (its earlier ones land first: lands are in order)
            if len(blocks):
                np.maximum.at(need[:, i], blocks, reads)
        return need

    t_need_group = needs(g_ptr, r_cons, r_write, len(g_port))
    t_need_port = needs(p_ptr, pr_cons, pr_write, len(p_lists))
    for g, p0 in enumerate(g_port):
        e = design.engines[int(port_eng[p0])]
        sl = slice(g_ptr[g], g_ptr[g + 1])
        per_block = np.bincount(r_cons[sl][r_write[sl] == 0], minlength=n)
        if per_block.max(initial=0) > e.buffer_depth:
            raise DesignError(f"design '{design.name}': engine '{e.name}' needs {per_block.max()} requests of "
                              f"{e.burst_bytes} B per port for one block but its port buffer holds "
                              f"buffer_depth = {e.buffer_depth}; raise buffer_depth or burst_bytes")
    return Program(
        n_blocks=n, t_eng=eng, t_cyc=cyc, t_drain=drain, t_op=op, t_layer=t_layer, t_dep=dep, t_off=off,
        e_ptr=e_ptr, e_list=order.astype(np.int64), e_lat=lat, final_block=n - 1,
        port_eng=port_eng, port_group=port_group,
        port_bytes=np.array([design.engines[int(e)].port_bytes for e in port_eng], np.int64),
        port_buffer=np.array(bufs, np.int64), port_outstanding=np.array(outs, np.int64),
        g_ptr=g_ptr, g_port=np.array(g_port, np.int64), g_mult=g_mult,
        r_bytes=r_bytes, r_addr=r_addr, r_write=r_write, r_dep=r_dep, r_dep_off=r_dep_off, r_slot=r_slot,
        r_slot_off=r_slot_off, r_outprev=r_outprev, t_need_group=t_need_group,
        p_ptr=p_ptr, pr_bytes=pr_bytes, pr_addr=pr_addr, pr_write=pr_write, pr_dep=pr_dep, pr_dep_off=pr_dep_off,
        pr_slot=pr_slot, pr_slot_off=pr_slot_off, pr_outprev=pr_outprev, t_need_port=t_need_port,
        macs=macs,
    )
