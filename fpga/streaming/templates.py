"""Template caching: the parts of a token compiled once and reused.

Everything that does not depend on the context length (the head, each layer's pre- and post-attention parts,
the tail, the classes of identical ports) is compiled once per (design, board, LLM, LM head or not)
(:func:`_static_parts`). A decoder layer for a context length (:func:`_layer_for`) wraps attention compiled for
that context between the cached parts; attention compiles KV heads 0 and 1 and copies the rest from head 1 by
index and address arithmetic, since all heads attend over the same tokens. :func:`kv_region_bytes` is the KV
cache layout those copies address.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np
from numba import njit

from fpga.streaming import ctx_memo
from fpga.streaming.design import StreamingDesign
from fpga.streaming.lowering import _cdiv, _Compiler, _graph0, hop_matrix
from fpga.streaming.part_memo import clear as clear_part_memo
from fpga.streaming.part_memo import memo_part
from fpga.streaming.ports import dense_channels
from fpga.streaming.program_format import DEP_ATT, DEP_LOCAL, _Segment, _Vec, deps_array
from hwmodel.specs import BoardSpec, LlmSpec


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
    tail = memo_part(c, "tail", x_cum, with_lm_head)[0]  # shared by designs whose tails read the same fields
    port_eng = [i for i, e in enumerate(design.engines) for _ in range(e.ports)]
    chans = dense_channels(design)
    lone = [chans.count(ch) == 1 for ch in chans]  # a port on a shared channel is a class of its own
    parts = [seg.port_ids() for seg in (head, pre, post, tail)]
    classes: dict[tuple[int, ...], int] = {}
    port_class = []
    for p in range(c.n_ports):  # same engine and equal requests in every part, in order of first appearance
        sig = (port_eng[p], *(ids.get(p, -1) for ids in parts)) if lone[p] else (-1, p)
        port_class.append(classes.setdefault(sig, len(classes)))
    static_ledger = {k: c.ledger[k] - layer_ledger[k] for k in c.ledger}
    return _Static(
        x_cum,
        head,
        head_x,
        pre,
        rope,
        post,
        post_x,
        tail,
        layer_w,
        list(c.wptr),
        c.macs - layer_macs,
        layer_macs,
        static_ledger,
        layer_ledger,
        port_class,
    )


class _Layer:
    """One decoder layer as arrays (pre + attention + post), with the same interface the linker uses."""

    def __init__(
        self, arrs: dict[str, np.ndarray], reqs: Any, x_in: _Vec, x_out: np.ndarray, att_key: list[bytes]
    ) -> None:
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


@functools.lru_cache(maxsize=64)
def kv_region_bytes(design: StreamingDesign, llm: LlmSpec, board: BoardSpec) -> int:
    """Bytes one attention port reserves for one (layer, unit of ``attn_head_parallel`` KV heads, K or V) at
    ``max_ctx`` tokens, 4 KB aligned."""
    e = design.engine_of("attention")
    tb = _cdiv(design.attn_head_parallel * llm.head_dim * design.kv_bits, 8)
    per_port = _cdiv(design.max_ctx + 1, e.ports) + _cdiv(board.hbm.granule_bytes, tb)
    return _cdiv(per_port * tb, 4096) * 4096


@functools.lru_cache(maxsize=4)
def _layer_for(design: StreamingDesign, board: BoardSpec, llm: LlmSpec, ctx: int, kv_base0: int) -> tuple[_Layer, int]:
    """The layer :func:`compile_token` links for ``ctx`` with the KV cache at ``kv_base0``, memoized for the next
    token at the same context: the layer's pre and post parts are compiled before the tail (which alone holds the
    LM head), so a decoded and an ingested token at one context share it (the cycle-level drafts' samples come in
    such pairs; tests/test_streaming.py checks the parts are equal)."""
    st = _static_parts(design, board, llm, True)
    region = kv_region_bytes(design, llm, board)
    units = llm.kv_heads // design.attn_head_parallel
    return _layer(
        design, _Compiler(design, board, llm), st, ctx, [kv_base0 + i * region for i in range(2 * units)], region
    )


def _layer(
    design: StreamingDesign, c: _Compiler, st: _Static, ctx: int, kv_base: list[int], region: int
) -> tuple[_Layer, int]:
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
    att = {
        "eng": np.array(eng_list, np.int64),
        "cyc": np.array(seg.cyc[n_pre:], np.int64),
        "drain": np.array(seg.drain[n_pre:], np.int64),
        "op": np.array(seg.op[n_pre:], np.int64),
    }
    deps = deps_array(seg.deps[n_pre:])
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
            if r1 > r0:
                att_reqs[p] = _copy_head(att_reqs[p], r0, r1, extra, hl, 2 * region)
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
        doff[a_ref] = (
            att["cyc"][tgt - n_pre]
            + design.engines[a_eng].pipeline_latency_cycles
            + hop_matrix(design)[a_eng, po["eng"][np.nonzero(a_ref)[0]]]
        )
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


@njit(cache=True)
def _copy_head(reqs: np.ndarray, r0: int, r1: int, extra: int, blocks: int, stride: int) -> np.ndarray:
    """``reqs`` followed by ``extra`` copies of its rows ``r0:r1`` (one KV head's requests on a port): copy k
    addresses ``k * stride`` bytes further, and its reads feed blocks ``k * blocks`` further on (a write keeps
    its source block)."""
    n, m = reqs.shape[0], r1 - r0
    out = np.empty((n + extra * m, reqs.shape[1]), dtype=np.int64)
    out[:n] = reqs
    for k in range(1, extra + 1):
        for i in range(m):
            row = n + (k - 1) * m + i
            out[row] = reqs[r0 + i]
            out[row, 1] += k * stride
            if reqs[r0 + i, 2] == 0:
                out[row, 3] += k * blocks
    return out


@functools.lru_cache(maxsize=64)
def _base_compiler(design: StreamingDesign, board: BoardSpec, llm: LlmSpec) -> _Compiler:
    """A compiler for the facts :func:`fpga.streaming.program.compile_token` and the linker read (engine
    indices, port counts); memoized per design, never mutated."""
    return _Compiler(design, board, llm)


def clear_caches() -> None:
    """Forget every memoized part (:func:`_static_parts`, :func:`_layer_for`, the compiler facts, the KV layout,
    the hop matrix and the graph the lowering reads): a caller that swaps the compiler, as the conservation tests
    do, must not leave parts compiled by it for later callers."""
    for fn in (_static_parts, _layer_for, _base_compiler, kv_region_bytes, hop_matrix, _graph0):
        fn.cache_clear()
    clear_part_memo()
    ctx_memo.clear()  # and the linked parts (blocks, class requests) built from them
