"""The link blocks of a multi-unit token program and the dependencies they add (fpga/streaming/units.py).

Each exchanged chunk becomes one block per hop of its route, in the exchange groups' order and, inside a group,
chunk by chunk (``j``), exchange by exchange (``m``), hop by hop: the program order of the link engines. What each
block waits for is the module docstring's rule of fpga/streaming/units.py:

* slot 0: its upstream (the producer block for a first hop, the previous hop's block after it), at the producer's
  output latency or the previous hop's serialization plus latency;
* slot 2: room at the reader's end -- the reader (next hop or consuming block) of the chunk ``fifo_depth`` earlier
  on the hop, unless that reader already waits for a later chunk of the hop;
* odd extra slots of a consuming block (3, 5, ...): the chunk holding its last element, per exchange it reads,
  then the end-of-token join of the final block;
* even extra slots of a producer block (4, 6, ...): room in each first hop's input buffer, the block ``fifo_depth``
  earlier on the hop (copies of one chunk to several destinations over one hop share one room).

:func:`link_blocks` builds these with array passes (one per exchange, then one per hop); :func:`link_blocks_ref`
is the chunk-by-chunk loop it replaced, kept as its reference: tests/test_compile_exact.py checks both give
byte-identical programs on generated multi-unit designs of every split.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from fpga.streaming.design import StreamingDesign
from fpga.streaming.lowering import _cdiv


@dataclasses.dataclass
class LinkBlocks:
    """The link blocks (hop, link cycles, layer per block; each hop's blocks in order) and the dependency arrays of
    the whole program (unit blocks' three slots copied in, the extra slots filled)."""

    l_hop: np.ndarray
    l_cyc: np.ndarray
    l_layer: np.ndarray
    hop_blocks: list[np.ndarray]
    hop_bytes: list[int]
    exchange_bytes: dict[str, int]
    dep: np.ndarray
    off: np.ndarray


@dataclasses.dataclass
class LinkInputs:
    """What the link blocks are built from: the design, its hops and the joined units' programs."""

    d: StreamingDesign
    hops: list[tuple[int, int, int]]  # (link, from unit, to unit) per directed hop
    routes: dict[tuple[int, int], list[int]]  # hops from unit a to unit b
    hop_lat: list[int]  # kernel cycles per hop
    progs: Sequence[Any]  # the units' programs
    b_off: np.ndarray  # first global block of each unit (and the total)
    cyc_all: np.ndarray  # cycles of every unit block
    lat_of_block: np.ndarray  # its engine's pipeline latency
    final: int  # the final unit's last block
    unit_finals: list[int]  # the other units' last blocks, which the final block waits for

    @property
    def n_ub(self) -> int:
        return int(self.b_off[-1])

    def ser(self, nbytes: int, h: int) -> int:
        """Link cycles of a chunk of ``nbytes`` on hop ``h``, in kernel cycles."""
        lk = self.d.links[self.hops[h][0]]
        return max(1, _cdiv(nbytes * 8 * round(self.d.clock_hz), lk.width_bits * round(lk.clock_hz or self.d.clock_hz)))


def _joined_deps(inp: LinkInputs, n_link: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    n_ub = inp.n_ub
    dep = np.full((n_ub + n_link, width), -1, np.int64)
    off = np.zeros((n_ub + n_link, width), np.int64)
    for u, p in enumerate(inp.progs):
        sl = slice(int(inp.b_off[u]), int(inp.b_off[u + 1]))
        dep[sl, :3] = np.where(p.t_dep >= 0, p.t_dep + inp.b_off[u], -1)
        off[sl, :3] = p.t_off
    return dep, off


def _cat(parts: Sequence[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts).astype(np.int64) if len(parts) else np.zeros(0, np.int64)


def _ranks(keys: np.ndarray) -> np.ndarray:
    """Each entry's position among the entries with its key, in array order (keys need not be sorted)."""
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    start = np.r_[0, np.nonzero(sk[1:] != sk[:-1])[0] + 1]
    first = np.repeat(start, np.diff(np.r_[start, len(sk)]))
    ranks = np.empty(len(keys), np.int64)
    ranks[order] = np.arange(len(keys)) - first
    return ranks


@dataclasses.dataclass
class _Chunks:
    """Every link block of a token in program order (hop, bytes, layer, producer block, first hop of its chunk?),
    the consuming blocks' waits on them and the last hops' readers, as the groups give them."""

    cols: dict[str, np.ndarray]
    ins: list[tuple[np.ndarray, np.ndarray]]  # (consuming blocks, the link block each waits for), in rule order
    readers: list[tuple[np.ndarray, np.ndarray, np.ndarray]]  # (last-hop blocks, their readers, what those wait for)
    exchange_bytes: dict[str, int]


def _chunks(inp: LinkInputs, groups: Sequence[Sequence[Any]]) -> _Chunks:
    """One array pass per exchange: its chunks' blocks on every hop of its route, ordered chunk by chunk, exchange
    by exchange, hop by hop within each group."""
    eb = inp.d.exchange_bits
    ex_bytes: dict[str, int] = {}
    cols: dict[str, list[np.ndarray]] = {k: [] for k in ("hop", "nbytes", "layer", "up0", "first")}
    ins: list[tuple[np.ndarray, np.ndarray]] = []
    readers: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    base = inp.n_ub
    for group in groups:
        if not group:  # one unit: nothing to exchange
            continue
        j_e, m_e, i_e, h_e, nb_e, up_e, lay_e = [], [], [], [], [], [], []
        for m, x in enumerate(group):
            path = np.array(inp.routes[(x.src, x.dst)], np.int64)
            sc = np.asarray(x.src_cums, np.int64)
            nbytes = np.diff(sc, prepend=0) * eb // 8
            ex_bytes[x.kind] = ex_bytes.get(x.kind, 0) + int(nbytes.sum())
            n_j, n_p = len(sc), len(path)
            j_e.append(np.repeat(np.arange(n_j), n_p))
            m_e.append(np.full(n_j * n_p, m))
            i_e.append(np.tile(np.arange(n_p), n_j))
            h_e.append(np.tile(path, n_j))
            nb_e.append(np.repeat(nbytes, n_p))
            up_e.append(np.repeat(inp.b_off[x.src] + np.asarray(x.prod[:n_j], np.int64), n_p))
            lay_e.append(np.full(n_j * n_p, x.layer))
        j, m_, i = np.concatenate(j_e), np.concatenate(m_e), np.concatenate(i_e)
        order = np.lexsort((i, m_, j))  # chunk by chunk, exchange by exchange, hop by hop
        pos = np.empty(len(order), np.int64)
        pos[order] = np.arange(len(order))
        for k, parts in (("hop", h_e), ("nbytes", nb_e), ("layer", lay_e), ("up0", up_e)):
            cols[k].append(np.concatenate(parts)[order])
        cols["first"].append((i[order] == 0).astype(np.int64))
        start = 0
        for x in group:  # consumer k waits for the chunk holding its last element
            n_p, n_j = len(inp.routes[(x.src, x.dst)]), len(x.src_cums)
            arrived = base + pos[start + np.arange(n_j) * n_p + n_p - 1]  # each chunk's last-hop block
            start += n_j * n_p
            jk = np.searchsorted(np.asarray(x.src_cums, np.int64), np.asarray(x.dst_cums, np.int64), side="left")
            assert x.src_cums[-1] == x.dst_cums[-1]
            cons = inp.b_off[x.dst] + np.asarray(x.cons[: len(jk)], np.int64)
            ins.append((cons, arrived[jk]))
            if inp.d.split == "columns" and x.kind != "embed":
                continue  # an all-gathered slice lands in a buffer of its own: the receiver never back-pressures
            k = np.searchsorted(jk, np.arange(n_j), side="left")
            readers.append((arrived, cons[k], arrived[jk[k]]))
        base += len(order)
    return _Chunks({k: _cat(v) for k, v in cols.items()}, ins, readers, ex_bytes)


def _first_hop_room(seq: np.ndarray, ups: np.ndarray, first: np.ndarray, depth: int) -> tuple[np.ndarray, ...]:
    """A hop's first-hop blocks that wait for room, and the position on the hop of the block they wait for: the
    block ``depth`` earlier, or before the run of copies of the same chunk that block belongs to."""
    q = np.arange(len(seq)) - depth
    run0 = np.r_[0, np.nonzero(ups[1:] != ups[:-1])[0] + 1]
    run_start = np.repeat(run0, np.diff(np.r_[run0, len(seq)]))
    f = np.nonzero(first & (q >= 0))[0]
    qf = np.where(ups[q[f]] == ups[f], run_start[q[f]] - 1, q[f])
    keep = qf >= 0
    return f[keep], qf[keep]


def _output_slots(o_up: np.ndarray, o_h: np.ndarray, o_b: np.ndarray, n_h: int) -> tuple[np.ndarray, ...]:
    """Per producer block, one slot per first hop in the order the hops were first met, holding the last block
    met on that hop (entries in program order)."""
    key = o_up * max(1, n_h) + o_h
    _u, first_i = np.unique(key, return_index=True)
    _u, last_r = np.unique(key[::-1], return_index=True)
    last_i = len(key) - 1 - last_r
    pair_order = np.lexsort((first_i, o_up[first_i]))
    p_up = o_up[first_i][pair_order]
    return p_up, o_b[last_i][pair_order], _ranks(p_up)


def link_blocks(inp: LinkInputs, groups: Sequence[Sequence[Any]]) -> LinkBlocks:
    """The link blocks and dependencies of a token (module docstring), built with array passes."""
    d, n_ub = inp.d, inp.n_ub
    n_h = len(inp.hops)
    fk = round(d.clock_hz)
    links = [d.links[k] for k, _a, _b in inp.hops]
    width_fl = np.array([lk.width_bits * round(lk.clock_hz or d.clock_hz) for lk in links], np.int64)
    hop_lat = np.array(inp.hop_lat, np.int64)
    ch = _chunks(inp, groups)
    l_hop, nbytes, first = ch.cols["hop"], ch.cols["nbytes"], ch.cols["first"].astype(bool)
    n_link = len(l_hop)
    assert n_link == 0 or int(nbytes.max()) * 8 * fk < 2**62  # the serialization below stays exact in int64
    l_cyc = np.maximum(1, -(-(nbytes * 8 * fk) // width_fl[l_hop])).astype(np.int64)
    blk = n_ub + np.arange(n_link)
    up0 = ch.cols["up0"]
    l_up = np.where(first, up0, blk - 1)  # a later hop reads the previous hop's block
    prev = np.maximum(np.arange(n_link) - 1, 0)
    l_upoff = np.where(first, inp.cyc_all[up0] + inp.lat_of_block[up0], l_cyc[prev] + hop_lat[l_hop[prev]])
    reader = np.full(n_link, -1, np.int64)
    wait = np.full(n_link, -1, np.int64)
    later = np.nonzero(~first)[0]
    reader[later - 1] = blk[later]  # a hop's block is read by the next hop's
    for lb, r, w in ch.readers:
        reader[lb - n_ub], wait[lb - n_ub] = r, w
    hop_bytes = np.zeros(n_h, np.int64)
    np.add.at(hop_bytes, l_hop, nbytes)

    hop_blocks, out_up, out_h, out_b, out_at, fifo_blk, fifo_reader = [], [], [], [], [], [], []
    for h, lk in enumerate(links):
        seq = np.nonzero(l_hop == h)[0]
        hop_blocks.append(n_ub + seq)
        f, qf = _first_hop_room(seq, l_up[seq], first[seq], lk.fifo_depth)  # the producer waits for room
        out_up.append(l_up[seq[f]])
        out_h.append(np.full(len(f), h))
        out_b.append(n_ub + seq[qf])
        out_at.append(seq[f])
        # the hop waits for the reader of the chunk fifo_depth earlier, unless that reader waits for a later one
        r, i_blk = seq[: max(0, len(seq) - lk.fifo_depth)], seq[lk.fifo_depth :]
        ok = (reader[r] >= 0) & (wait[r] < n_ub + i_blk)
        fifo_blk.append(n_ub + i_blk[ok])
        fifo_reader.append(reader[r][ok])

    # extra inputs of consuming blocks, in the order the rule lists them, then the end-of-token join
    finals = np.asarray(inp.unit_finals, np.int64)
    in_blk = np.concatenate([c for c, _a in ch.ins] + [np.full(len(finals), inp.final, np.int64)])
    in_dep = np.concatenate([a for _c, a in ch.ins] + [finals])
    is_link = in_dep >= n_ub
    in_off = np.empty(len(in_dep), np.int64)
    li, ui = in_dep[is_link] - n_ub, in_dep[~is_link]
    in_off[is_link] = l_cyc[li] + hop_lat[l_hop[li]]  # a chunk: its last hop's serialization and latency
    in_off[~is_link] = inp.cyc_all[ui] + inp.lat_of_block[ui]  # a unit's last block: its output latency
    in_slot = _ranks(in_blk)
    by_time = np.argsort(_cat(out_at), kind="stable")
    p_up, p_b, out_slot = _output_slots(*(_cat(v)[by_time] for v in (out_up, out_h, out_b)), n_h)

    k_in = int(in_slot.max()) + 1 if len(in_slot) else 0
    k_out = int(out_slot.max()) + 1 if len(out_slot) else 0
    dep, off = _joined_deps(inp, n_link, 3 + 2 * max(k_in, k_out))
    dep[blk, 0], off[blk, 0] = l_up, l_upoff
    fb, fr = _cat(fifo_blk), _cat(fifo_reader)
    dep[fb, 2], off[fb, 2] = fr, 1
    dep[in_blk, 3 + 2 * in_slot], off[in_blk, 3 + 2 * in_slot] = in_dep, in_off
    dep[p_up, 4 + 2 * out_slot], off[p_up, 4 + 2 * out_slot] = p_b, 1
    return LinkBlocks(
        l_hop=l_hop,
        l_cyc=l_cyc,
        l_layer=ch.cols["layer"],
        hop_blocks=hop_blocks,
        hop_bytes=[int(b) for b in hop_bytes],
        exchange_bytes=ch.exchange_bytes,
        dep=dep,
        off=off,
    )


def link_blocks_ref(inp: LinkInputs, groups: Sequence[Sequence[Any]]) -> LinkBlocks:
    """The reference of :func:`link_blocks`: the same rule, one chunk and one hop at a time."""
    d, n_ub = inp.d, inp.n_ub
    hs, hop_lat, cyc_all, lat_of_block = inp.hops, inp.hop_lat, inp.cyc_all, inp.lat_of_block
    l_hop: list[int] = []
    l_cyc: list[int] = []
    l_layer: list[int] = []
    l_up: list[int] = []
    l_upoff: list[int] = []
    hop_blocks: list[list[int]] = [[] for _ in hs]
    reader: dict[int, int] = {}  # link block -> the block that reads it (next hop or first consumer)
    reader_wait: dict[int, int] = {}  # link block -> the last link block its consuming reader waits for
    extra_in: dict[int, list[tuple[int, int]]] = {}  # block -> input deps beyond slot 2
    extra_out: dict[int, dict[int, tuple[int, int]]] = {}  # block -> per first hop, output-space dep
    hop_bytes = [0] * len(hs)
    ex_bytes: dict[str, int] = {}
    eb = d.exchange_bits
    for group in groups:
        if not group:  # one unit: nothing to exchange
            continue
        routes = [inp.routes[(x.src, x.dst)] for x in group]
        last_of: list[list[int]] = [[] for _ in group]
        for j in range(max(len(x.src_cums) for x in group)):
            for m, x in enumerate(group):
                if j >= len(x.src_cums):
                    continue
                elems = x.src_cums[j] - (x.src_cums[j - 1] if j else 0)
                nbytes = elems * eb // 8
                ex_bytes[x.kind] = ex_bytes.get(x.kind, 0) + nbytes
                up = int(inp.b_off[x.src] + x.prod[j])
                up_off = int(cyc_all[up] + lat_of_block[up])
                for i, h in enumerate(routes[m]):
                    blk = n_ub + len(l_hop)
                    l_hop.append(h)
                    l_cyc.append(inp.ser(nbytes, h))
                    l_layer.append(x.layer)
                    l_up.append(up)
                    l_upoff.append(up_off)
                    hop_bytes[h] += nbytes
                    if i == 0:
                        q = len(hop_blocks[h]) - d.links[hs[h][0]].fifo_depth
                        while q >= 0 and l_up[hop_blocks[h][q] - n_ub] == up:
                            q -= 1  # copies of one chunk to several destinations over one hop share its room
                        if q >= 0:  # the producer waits for room in the hop's input buffer
                            extra_out.setdefault(up, {})[h] = (hop_blocks[h][q], 1)
                    else:
                        reader[up] = blk
                    hop_blocks[h].append(blk)
                    up, up_off = blk, l_cyc[-1] + hop_lat[h]
                last_of[m].append(up)
        for m, x in enumerate(group):  # consumer k waits for the chunk holding its last element
            arrived = last_of[m]
            jk = [bisect.bisect_left(x.src_cums, c) for c in x.dst_cums]
            assert x.src_cums[-1] == x.dst_cums[-1]
            for k, j in enumerate(jk):
                cb = int(inp.b_off[x.dst] + x.cons[k])
                lb = arrived[j]
                extra_in.setdefault(cb, []).append((lb, l_cyc[lb - n_ub] + hop_lat[l_hop[lb - n_ub]]))
            if d.split == "columns" and x.kind != "embed":
                continue  # an all-gathered slice lands in a buffer of its own: the receiver never back-pressures
            for j, lb in enumerate(arrived):
                k = bisect.bisect_left(jk, j)
                reader.setdefault(lb, int(inp.b_off[x.dst] + x.cons[k]))
                reader_wait.setdefault(lb, arrived[jk[k]])
    for fb in inp.unit_finals:  # the token ends when every unit has: the final block waits for the others' last
        extra_in.setdefault(inp.final, []).append((fb, int(cyc_all[fb] + lat_of_block[fb])))

    n_link = len(l_hop)
    k_in = max((len(v) for v in extra_in.values()), default=0)
    k_out = max((len(v) for v in extra_out.values()), default=0)
    dep, off = _joined_deps(inp, n_link, 3 + 2 * max(k_in, k_out))
    for i in range(n_link):
        dep[n_ub + i, 0], off[n_ub + i, 0] = l_up[i], l_upoff[i]
    for h, blocks in enumerate(hop_blocks):  # a hop waits for its reader to take the chunk fifo_depth earlier
        q = d.links[hs[h][0]].fifo_depth
        for i in range(q, len(blocks)):
            r = blocks[i - q]
            # a receiver holds at least the chunks one of its consumer blocks reads (a consumer block coarser than
            # fifo_depth chunks would otherwise wait for a chunk its own room holds back)
            if r in reader and reader_wait.get(r, -1) < blocks[i]:
                dep[blocks[i], 2], off[blocks[i], 2] = reader[r], 1
    for b_in, deps in extra_in.items():
        for s, (b, o) in enumerate(deps):
            dep[b_in, 3 + 2 * s], off[b_in, 3 + 2 * s] = b, o
    for b_out, per_hop in extra_out.items():
        for s, (b, o) in enumerate(per_hop.values()):
            dep[b_out, 4 + 2 * s], off[b_out, 4 + 2 * s] = b, o
    return LinkBlocks(
        l_hop=np.array(l_hop, np.int64),
        l_cyc=np.array(l_cyc, np.int64),
        l_layer=np.array(l_layer, np.int64),
        hop_blocks=[np.array(b, np.int64) for b in hop_blocks],
        hop_bytes=hop_bytes,
        exchange_bytes=ex_bytes,
        dep=dep,
        off=off,
    )
