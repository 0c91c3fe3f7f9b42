"""Linking: replicate the layer template L times between the head and the tail into one :class:`Program`.

Every cross-segment reference is resolved to a global block (:func:`_place`): local indices are shifted by the
copy's first block, and a layer's reads of its input vector point at the previous layer's residual-add blocks
(or the head's), ``layer_io_cycles`` later when each layer reads its input back from HBM. The layer input's FIFO
back-pressure is added across copies, engines' block lists are ordered, ports are grouped into classes of
identical ports (the fast engine simulates one of each), and each port's requests are expanded
(:mod:`fpga.streaming.backpressure`). :func:`_request_bytes` is the ledger of the bytes the requests move.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from fpga.streaming import ctx_memo
from fpga.streaming.backpressure import _expand_port
from fpga.streaming.design import DesignError, StreamingDesign
from fpga.streaming.lowering import _cdiv, _Compiler, hop_matrix
from fpga.streaming.ports import arbitration_code, channel_bases, dense_channels, shared
from fpga.streaming.program_format import DEP_LOCAL, DEP_XIN, KIND_KV, NO, R_ADDR, Program, _Vec
from fpga.streaming.templates import _Layer, _Static


def _writable_c(a: np.ndarray) -> np.ndarray:
    """``a`` itself when C-contiguous and writable, else a C-contiguous copy (the layout _place is compiled for)."""
    return a if a.flags.c_contiguous and a.flags.writeable else np.array(a, order="C")


@njit(cache=True)
def _place(
    kind: np.ndarray,
    idx: np.ndarray,
    o: np.ndarray,
    first: np.ndarray,
    xprod: np.ndarray,
    eng: np.ndarray,
    cyc: np.ndarray,
    lat: np.ndarray,
    hop: np.ndarray,
    extra: int,
    dep: np.ndarray,
    off: np.ndarray,
) -> None:
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


def _tally(st: _Static, layer: _Layer, p: int) -> tuple[np.ndarray, np.ndarray]:
    """Bytes (weights read, KV read, KV written) of port ``p``'s head + tail requests and of one layer copy's;
    memoized on the port's request key (:func:`_port_key`)."""

    def build() -> tuple[np.ndarray, np.ndarray]:
        out = []
        for arrs in ((st.head.req_array(p), st.tail.req_array(p)), (layer.req_array(p),)):
            t = np.zeros(3, np.int64)
            for arr in arrs:
                if len(arr):
                    kv = arr[:, 5] == KIND_KV
                    wr = arr[:, 2] == 1
                    n = arr[:, 0]
                    t += [int(n[~kv & ~wr].sum()), int(n[kv & ~wr].sum()), int(n[kv & wr].sum())]
            out.append(t)
        return out[0], out[1]

    return ctx_memo.TALLIES.get((st,), _port_key(st, layer, p), (), build)


def _request_bytes(st: _Static, layer: _Layer, prog: Program, L: int) -> dict[str, int]:
    """Bytes the program's requests move, by kind (weights read, KV read, KV written), summed over every port
    (one representative per class of identical ports, times the class size)."""
    tot = np.zeros(3, np.int64)
    for g, p in enumerate(prog.g_port):
        once, per_layer = _tally(st, layer, int(p))
        tot += int(prog.g_mult[g]) * (once + L * per_layer)
    return {"param_read": int(tot[0]), "kv_read": int(tot[1]), "kv_write": int(tot[2])}


def _port_key(st: _Static, layer: _Layer, p: int) -> tuple[int, bytes]:
    """What decides port ``p``'s requests over a token: its class of equal head, pre, post and tail requests
    (same engine, so the same buffer and outstanding limits) and its attention requests."""
    return st.port_class[p], layer.att_key[p]


def _blocks(design: StreamingDesign, st: _Static, layer: _Layer, L: int) -> dict[str, np.ndarray]:
    """The token's blocks: the layer replicated L times between head and tail, every cross-segment reference
    resolved, engines' block lists ordered."""
    head, head_x, tail = st.head, st.head_x, st.tail
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
        # one kernel signature for every caller: C-contiguous, writable arrays (a sliced template's dependency
        # arrays, or a read-only producer view, each made Numba compile _place once more: 2 of its 3 cached
        # specializations after a whole suite, 2026-12-04)
        c = _writable_c
        _place(c(arrs["dkind"]), c(arrs["didx"]), c(arrs["doff"]), first, c(xprod), eng, cyc, lat, hop, extra, dep, off)

    place(hs, np.array([0], dtype=np.int64), x_prod[:1])
    io = design.layer_io_cycles
    if io > 0:  # each layer reads its whole input back from HBM: every entry waits for the last one plus the trip
        place(ls, base, np.ascontiguousarray(np.broadcast_to(x_prod[:L, -1:], (L, n_x))), io)
    else:
        place(ls, base, x_prod[:L])
    place(ts, np.array([tail_base], dtype=np.int64), x_prod[L : L + 1])
    # back-pressure of each layer input's FIFO: producer of entry k waits for the reader of entry k - depth
    q = design.fifo_depth
    for _s_arrs, seg, firsts, prods in (
        (ls, layer, base, x_prod[:L]),
        (ts, tail, np.array([tail_base]), x_prod[L : L + 1]),
    ):
        xin: _Vec = seg.x_in  # type: ignore[union-attr]
        if xin.consumer_engine == NO or xin.consumer_engine == xin.engine or n_x <= q or (io > 0 and seg is layer):
            continue
        free = np.array(xin.free_tile, dtype=np.int64)
        ks = np.arange(q, min(n_x, len(free) + q))
        rows = prods[:, ks]  # every copy at once (copy j's producers are its own blocks), in copy order
        dep[rows, 2] = np.asarray(firsts)[:, None] + free[ks - q][None, :]
        off[rows, 2] = 1

    drain = np.concatenate([hs["drain"], np.tile(ls["drain"], L), ts["drain"]])
    op = np.concatenate([hs["op"], np.tile(ls["op"], L), ts["op"]])
    t_layer = np.concatenate([np.full(H, -1), np.repeat(np.arange(L), N), np.full(T, L)]).astype(np.int64)
    parts_e = []
    for e in range(len(design.engines)):
        parts_e += [
            np.nonzero(hs["eng"] == e)[0],
            (base[:, None] + np.nonzero(ls["eng"] == e)[0][None, :]).ravel(),
            tail_base + np.nonzero(ts["eng"] == e)[0],
        ]
    order = np.concatenate(parts_e).astype(np.int64)
    counts = np.bincount(eng, minlength=len(design.engines))
    e_ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return dict(
        eng=eng,
        cyc=cyc,
        lat=lat,
        dep=dep,
        off=off,
        drain=drain,
        op=op,
        t_layer=t_layer,
        order=order,
        e_ptr=e_ptr,
        base=base,
        tail_base=np.array(tail_base),
    )


def _requests(
    design: StreamingDesign,
    c: _Compiler,
    st: _Static,
    layer: _Layer,
    blk: dict[str, np.ndarray],
    kv_stride: int,
    ports: list[int],
    bases: np.ndarray | None,
) -> tuple[np.ndarray, ...]:
    """Request arrays of ``ports`` (CSR), each port's head + L layer copies + tail, with buffer-slot and
    outstanding-limit predecessors and the read each block needs; each port's addresses start at ``bases``
    (its engine's base on a channel shared by engines)."""
    head, tail, layer_w = st.head, st.tail, st.layer_w
    base, tail_base, cyc = blk["base"], int(blk["tail_base"]), blk["cyc"]
    L, n = len(base), len(cyc)
    empty = np.zeros((0, 6), np.int64)
    counts = [len(head.req_array(p)) + L * len(layer.req_array(p)) + len(tail.req_array(p)) for p in ports]
    ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    out = np.empty((int(ptr[-1]), 8), dtype=np.int64)
    need = np.full((n, len(ports)), NO, dtype=np.int64)
    port_eng = [i for i, e in enumerate(design.engines) for _ in range(e.ports)]
    for i, p in enumerate(ports):
        e = design.engines[port_eng[p]]
        worst = _expand_port(
            head.req_array(p) if len(head.req_array(p)) else empty,
            layer.req_array(p) if len(layer.req_array(p)) else empty,
            tail.req_array(p) if len(tail.req_array(p)) else empty,
            base,
            tail_base,
            layer_w[port_eng[p]],
            kv_stride,
            cyc,
            e.buffer_depth,
            e.max_outstanding,
            out[ptr[i] : ptr[i + 1]],
            need[:, i],
        )
        if worst > e.buffer_depth:
            raise DesignError(
                f"design '{design.name}': engine '{e.name}' needs {worst} requests of "
                f"{e.burst_bytes} B per port for one block but its port buffer holds "
                f"buffer_depth = {e.buffer_depth}; raise buffer_depth or burst_bytes"
            )
    if bases is not None:
        for i, q in enumerate(ports):
            out[ptr[i] : ptr[i + 1], R_ADDR] += bases[q]
    return ptr, out, need


def _channel_bases(design: StreamingDesign, c: _Compiler, st: _Static, kv_stride: int, L: int) -> np.ndarray | None:
    """Per port, where its engine's data starts on its channel when engines share channels (they keep their data
    apart there: fpga.streaming.ports.channel_bases); None when no channel is shared."""
    if not shared(design):
        return None
    a_eng = c.eng_idx["attention"]
    foot = list(st.total_w)
    foot[a_eng] = (_cdiv(foot[a_eng], 1 << 20) << 20) + kv_stride * L
    return np.array(channel_bases(design, foot), np.int64)


def _link(
    design: StreamingDesign, c: _Compiler, st: _Static, layer: _Layer, L: int, kv_stride: int, macs: int, per_port: bool
) -> Program:
    """Replicate the layer L times between head and tail and resolve every cross-segment reference; the blocks
    and the class requests come from :mod:`fpga.streaming.ctx_memo` when a neighbouring context built the same."""
    la = layer.arrays()
    key_arrs = tuple(la[k] for k in ("eng", "cyc", "drain", "op", "dkind", "didx", "doff")) + (layer.x_out,)
    blk = ctx_memo.BLOCKS.get((st, design), L, key_arrs, lambda: _blocks(design, st, layer, L))
    eng = blk["eng"]
    n = len(eng)

    # ---- requests per port
    n_ports = c.n_ports
    port_eng = (
        np.concatenate([np.full(e.ports, i) for i, e in enumerate(design.engines)]).astype(np.int64)
        if n_ports
        else np.zeros(0, np.int64)
    )
    # classes of identical ports (same requests, same consumers): the fast engine simulates one of each
    keys = [_port_key(st, layer, p) for p in range(n_ports)]
    port_group = np.zeros(n_ports, dtype=np.int64)
    g_port: list[int] = []
    first: dict[tuple[int, bytes], int] = {}
    for p in range(n_ports):
        g = first.setdefault(keys[p], len(g_port))
        if g == len(g_port):
            g_port.append(p)
        port_group[p] = g
    g_mult = np.bincount(port_group, minlength=len(g_port)).astype(np.int64) if n_ports else np.zeros(0, np.int64)

    bases = _channel_bases(design, c, st, kv_stride, L)

    def requests(ports: list[int]) -> tuple[np.ndarray, ...]:
        where = None if bases is None else tuple(int(bases[p]) for p in ports)
        key = (kv_stride, tuple(keys[p] for p in ports), where)
        build = lambda: _requests(design, c, st, layer, blk, kv_stride, ports, bases)  # noqa: E731
        return ctx_memo.REQUESTS.get((blk, design), key, (), build)

    g_ptr, r_table, t_need_group = requests(g_port)
    # every port's own requests (the cycle-stepped reference's): built each time, not memoized (L x ports rows)
    every = list(range(n_ports)) if per_port else []
    p_ptr, pr_table, t_need_port = _requests(design, c, st, layer, blk, kv_stride, every, bases)
    bufs = [design.engines[int(port_eng[p])].buffer_depth for p in range(n_ports)]
    outs = [design.engines[int(port_eng[p])].max_outstanding for p in range(n_ports)]
    return Program(
        n_blocks=n,
        t_eng=eng,
        t_cyc=blk["cyc"],
        t_drain=blk["drain"],
        t_op=blk["op"],
        t_layer=blk["t_layer"],
        t_dep=blk["dep"],
        t_off=blk["off"],
        e_ptr=blk["e_ptr"],
        e_list=blk["order"],
        e_lat=blk["lat"],
        final_block=n - 1,
        port_eng=port_eng,
        port_group=port_group,
        port_bytes=np.array([design.engines[int(e)].port_bytes for e in port_eng], np.int64),
        port_buffer=np.array(bufs, np.int64),
        port_outstanding=np.array(outs, np.int64),
        g_ptr=g_ptr,
        g_port=np.array(g_port, np.int64),
        g_mult=g_mult,
        r_table=r_table,
        t_need_group=t_need_group,
        p_ptr=p_ptr,
        pr_table=pr_table,
        t_need_port=t_need_port,
        macs=macs,
        port_chan=np.array(dense_channels(design), np.int64),
        arbitration=arbitration_code(design),
    )
