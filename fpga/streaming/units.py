"""Several compute units in one token program: the split of the work, the exchanges it implies, the links.

A design with ``[[units]]`` (:mod:`fpga.streaming.unit_spec`) is lowered unit by unit: each unit is a streaming
design of its own (its engines, its channels) over *its share of the graph* (:func:`unit_llm`):

* ``split = "heads"``: the LLM with ``1/N`` of the query and KV heads and of the MLP's intermediate columns (so the
  QKV rows, the attention, the O projection's inputs, the gate/up rows and the down projection's inputs of that
  unit); the embedding and the head run on the first unit only;
* ``split = "layers"``: the LLM with the stage's layers; the embedding on the first stage, the head on the last.

The units' programs (:func:`fpga.streaming.program.compile_token`) are then joined into one program
(:func:`compile_units`): blocks, engines and ports side by side, plus one *link engine* per directed hop of the
design's links, whose blocks carry the exchanged chunks (built, with the dependencies they add, by
:mod:`fpga.streaming.unit_links`). What is exchanged is read off the graph's shapes, never
typed in (``exchange_bits`` per element):

* heads: after ``o_proj`` and after ``down`` each unit's partial sum of the hidden vector goes to every other unit
  (chunks as the producer emits them); a unit's residual add of a chunk waits for the other units' partials of it.
  If the embedding runs on the device, the first unit broadcasts the embedding row the same way;
* layers: each stage's residual stream (its last layer's output) goes to the next stage, chunk by chunk.

A link block takes ``ceil(bytes * 8 / width_bits)`` link cycles (in kernel cycles at the two clocks) on its hop,
in program order; its chunk arrives ``latency_cycles`` later. A hop buffers ``fifo_depth`` chunks at each end:
the sender's producer waits for room (the chunk ``fifo_depth`` earlier has entered the link) and the hop waits for
its reader (the next hop, or the consuming block). A chunk routed over several hops (a ring) is forwarded hop by
hop. The token ends when every unit has finished (the final unit's last block waits for the others').

Because links are blocks of the same program, the fast engine (:mod:`fpga.streaming.engine`) and the cycle-stepped
reference (:mod:`fpga.streaming.reference`) simulate them alike; tests/test_units.py checks they agree on
generated multi-unit designs. Dependency slots beyond the program's three: odd extra slots (3, 5, ...) are
inputs (remote chunks, the end-of-token join), even ones (4, 6, ...) are output space (room in a link).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator
from typing import Any

import numpy as np

from fpga.streaming.columns import GATHERS, RX
from fpga.streaming.design import ALL_OPS, DesignError, EngineSpec, StreamingDesign
from fpga.streaming.lowering import _cdiv, _Compiler
from fpga.streaming.program_format import OP_ID, Program
from fpga.streaming.unit_links import LinkInputs, link_blocks
from fpga.streaming.unit_spec import unit_problems
from hwmodel.specs import BoardSpec, LlmSpec

TAIL = ("final_norm", "lm_head", "argmax")
LINK_OP = len(ALL_OPS)  # operator id of link blocks (no operator: left out of the operator tables)


# ============================================================================================== the units
def resolve_units(d: StreamingDesign, where: str | None = None) -> StreamingDesign:
    """The design with each unit's engines given their pseudo-channels (ports that name none take the unit's
    channels in engine order) and the unit's SLR; idempotent. DesignError names the first problem."""
    at = where or f"design '{d.name}'"
    for problem in unit_problems(d):
        raise DesignError(f"{at}: {problem}")
    by_name = {e.name: e for e in d.engines}
    new: dict[str, EngineSpec] = {}
    for u in d.units:
        k = 0
        for en in u.engines:
            e = by_name[en]
            ch = e.channels
            if not ch and e.ports:
                if k + e.ports > len(u.channels):
                    raise DesignError(
                        f"{at}: unit '{u.name}': engine '{en}' needs {e.ports} pseudo-channels beyond the "
                        f"{k} already taken, but the unit lists {len(u.channels)} (channels = [...])"
                    )
                ch = tuple(u.channels[k : k + e.ports])
                k += e.ports
            elif ch and u.channels and not set(ch) <= set(u.channels):
                raise DesignError(
                    f"{at}: engine '{en}': channels {list(ch)} are not among unit '{u.name}''s {list(u.channels)}"
                )
            new[en] = dataclasses.replace(e, channels=ch, slr=u.slr if u.slr >= 0 else e.slr)
    owner: dict[int, str] = {}
    for u in d.units:
        for en in u.engines:
            for c in new[en].channels:
                if owner.setdefault(c, u.name) != u.name:
                    raise DesignError(f"{at}: pseudo-channel {c} is used by units '{owner[c]}' and '{u.name}'")
    return dataclasses.replace(d, engines=tuple(new[e.name] for e in d.engines))


def unit_roles(d: StreamingDesign) -> list[tuple[bool, bool]]:
    """Per unit: (runs the embedding, runs the head)."""
    n = len(d.units)
    if d.split == "layers":
        return [(i == 0, i == n - 1) for i in range(n)]
    return [(i == 0, i == 0) for i in range(n)]


def final_unit(d: StreamingDesign) -> int:
    return len(d.units) - 1 if d.split == "layers" else 0


def unit_design(d: StreamingDesign, i: int) -> StreamingDesign:
    """Unit ``i`` as a design of its own: its engines (without the operators it does not run), the design's
    placement plus the embedding / head operators other units run (they map to no engine here)."""
    u = d.units[i]
    embed, tail = unit_roles(d)[i]
    off = set() if embed else {"embed"}
    if not tail:
        off |= set(TAIL)
    by_name = {e.name: e for e in d.engines}
    engines = tuple(
        dataclasses.replace(by_name[en], ops=tuple(o for o in by_name[en].ops if o not in off)) for en in u.engines
    )
    host = set(d.host_ops) | off
    cols = 1
    if d.split == "columns":  # the unit's receive engine: remote slices land there (fpga/streaming/columns.py)
        cols = len(d.units)
        slr = u.slr if u.slr >= 0 else engines[0].slr
        engines += (EngineSpec(name=RX, ops=(), lanes=1, pipeline_latency_cycles=0, slr=slr),)
    return dataclasses.replace(
        d,
        name=f"{d.name}.{u.name}",
        engines=engines,
        host_ops=tuple(o for o in ALL_OPS if o in host),
        split="",
        units=(),
        links=(),
        column_units=cols,
    )


def stage_layers(d: StreamingDesign, layers: int) -> list[int]:
    """Layers of each stage (split = layers): the units' ``layers``, or an even share (the first stages take
    the remainder)."""
    n = len(d.units)
    if any(u.layers for u in d.units):
        counts = [u.layers for u in d.units]
        if 0 in counts or sum(counts) != layers:
            raise DesignError(
                f"design '{d.name}': the units' layers {counts} must all be >= 1 and add up to the {layers} layers"
            )
        return counts
    if layers < n:
        raise DesignError(f"design '{d.name}': split = 'layers' over {n} units needs >= {n} layers, got {layers}")
    return [layers // n + (1 if k < layers % n else 0) for k in range(n)]


def unit_llm(d: StreamingDesign, llm: LlmSpec, i: int) -> LlmSpec:
    """The share of the LLM unit ``i`` runs (see the module docstring)."""
    n = len(d.units)
    if d.split == "layers":
        return dataclasses.replace(llm, layers=stage_layers(d, llm.layers)[i])
    if llm.experts:
        raise DesignError(f"design '{d.name}': split = '{d.split}' of a mixture of experts ({llm.name}) is not built")
    # columns: the heads follow QKV's column split, and o_proj / down emit 1/N of the hidden vector each
    for field in ("heads", "kv_heads", "intermediate") + (("hidden",) if d.split == "columns" else ()):
        v = getattr(llm, field)
        if v % n:
            raise DesignError(
                f"design '{d.name}': split = '{d.split}' over {n} units needs {llm.name}'s {field} ({v}) "
                f"divisible by {n}"
            )
    return dataclasses.replace(
        llm, heads=llm.heads // n, kv_heads=llm.kv_heads // n, intermediate=llm.intermediate // n
    )


def units_problems(d: StreamingDesign) -> Iterator[str]:
    """Structure problems of a multi-unit design: its units and links, then each unit's own design."""
    from fpga.streaming.design import _problems

    problems = list(unit_problems(d))
    if problems:
        yield from problems
        return
    try:
        r = resolve_units(d, where="")
    except DesignError as exc:
        yield str(exc).lstrip(": ")
        return
    for i, u in enumerate(d.units):
        for problem in _problems(unit_design(r, i)):
            yield f"unit '{u.name}': {problem}"
    for a, b in exchange_pairs(d):
        if route(d, a, b) is None:
            yield f"units '{d.units[a].name}' and '{d.units[b].name}' exchange data but no link leads from one to the other"


def exchange_pairs(d: StreamingDesign) -> list[tuple[int, int]]:
    n = len(d.units)
    if d.split == "layers":
        return [(k, k + 1) for k in range(n - 1)]
    return [(a, b) for a in range(n) for b in range(n) if a != b]


def hops(d: StreamingDesign) -> list[tuple[int, int, int]]:
    """Directed hops of the design's links: (link index, from unit, to unit), in declaration order."""
    idx = {u.name: i for i, u in enumerate(d.units)}
    return [(k, idx[a], idx[b]) for k, lk in enumerate(d.links) for a, b in lk.hops()]


def route(d: StreamingDesign, a: int, b: int) -> list[int] | None:
    """The hops (indices into :func:`hops`) of the shortest path from unit a to unit b (ties: declaration order)."""
    hs = hops(d)
    prev: dict[int, int] = {a: -1}
    frontier = [a]
    while frontier and b not in prev:
        nxt = []
        for u in frontier:
            for h, (_k, x, y) in enumerate(hs):
                if x == u and y not in prev:
                    prev[y] = h
                    nxt.append(y)
        frontier = nxt
    if b not in prev:
        return None
    path = []
    u = b
    while u != a:
        path.append(prev[u])
        u = hs[prev[u]][1]
    return path[::-1]


def hop_name(d: StreamingDesign, h: tuple[int, int, int]) -> str:
    k, a, b = h
    return f"{d.links[k].name}:{d.units[a].name}->{d.units[b].name}"


# ============================================================================================== the program
@dataclasses.dataclass(frozen=True)
class UnitProgram(Program):
    """A multi-unit token program: :class:`Program` plus who is who (units, link hops) and the exchanged bytes."""

    engine_specs: tuple[EngineSpec, ...] = ()  # per engine of the program (units' engines, then link hops)
    engine_unit: tuple[int, ...] = ()  # unit of each engine; -1 for a link hop
    hop_info: tuple[dict[str, Any], ...] = ()  # per hop: link, kind, from, to, bytes, chunks
    exchange_bytes: dict[str, int] = dataclasses.field(default_factory=dict)  # per exchange kind, every message
    unit_programs: tuple[Program, ...] = ()


def _out_cums(c: _Compiler, op: str) -> list[int]:
    """Cumulative outputs of a matrix-vector operator's output entries, as :meth:`_Compiler.matvec` emits them."""
    _ops, rows, _cols, segs = c.shape(op)
    e = c.E(op)
    if e.order == "output":
        rpt = max(1, (e.ports * e.burst_bytes) // max(b for _n, b in segs))
        return [min(rows, (k + 1) * rpt) for k in range(_cdiv(rows, rpt))]
    return c.vec_chunks(rows)


@functools.lru_cache(maxsize=64)
def _cums(sub: StreamingDesign, board: BoardSpec, llm: LlmSpec) -> dict[str, Any]:
    c = _Compiler(sub, board, llm)
    out: dict[str, Any] = {"o_proj": _out_cums(c, "o_proj"), "down": _out_cums(c, "down"), "x": c.down_cum()}
    if sub.column_units > 1:  # the local slices the layer all-gathers, as its producers emit them
        c.post(out["x"])
        out["gathers"] = [cums for _op, cums in c.column_gathers]
    return out


def _op_blocks(prog: Program, op: str, layer: int) -> np.ndarray:
    return np.nonzero((prog.t_op == OP_ID[op]) & (prog.t_layer == layer))[0]


def _op_layer_blocks(prog: Program, ops: tuple[str, ...]) -> dict[tuple[int, int], np.ndarray]:
    """Per (operator id, layer) of ``ops``, its blocks in program order (:func:`_op_blocks` for every layer at once,
    from one sort instead of a scan of the program per operator and layer)."""
    sel = np.nonzero(np.isin(prog.t_op, [OP_ID[o] for o in ops]))[0]
    if len(sel) == 0:
        return {}
    op, layer = prog.t_op[sel], prog.t_layer[sel]
    order = np.lexsort((sel, layer, op))
    sel, op, layer = sel[order], op[order], layer[order]
    cut = np.r_[0, np.nonzero((op[1:] != op[:-1]) | (layer[1:] != layer[:-1]))[0] + 1, len(sel)]
    return {(int(op[a]), int(layer[a])): sel[a:b] for a, b in zip(cut[:-1], cut[1:])}


@dataclasses.dataclass
class _Exchange:
    kind: str  # embed, o_proj, down, stage
    layer: int
    src: int
    dst: int
    prod: np.ndarray  # producer blocks (unit-local)
    src_cums: list[int]
    cons: np.ndarray  # consumer blocks (unit-local)
    dst_cums: list[int]


def _exchanges(d: StreamingDesign, progs: list[Program], cums: list[dict[str, list[int]]], llms: list[LlmSpec]):  # type: ignore[no-untyped-def]
    """The exchanges of one token, in time order (kind, layer, source, destination, producer and consumer blocks)."""
    n = len(d.units)
    out: list[list[_Exchange]] = []  # groups of exchanges that happen together
    if d.split == "layers":
        for k in range(n - 1):
            last = llms[k].layers - 1
            px = cums[k]["x"]
            prod = _op_blocks(progs[k], "ffn_add", last)[-len(px) :]
            cx = cums[k + 1]["x"]
            cons = _op_blocks(progs[k + 1], "embed", -1)[-len(cx) :]
            out.append([_Exchange("stage", last, k, k + 1, prod, px, cons, cx)])
        return out
    if "embed" not in d.host_ops:
        p0 = cums[0]["x"]
        prod = _op_blocks(progs[0], "embed", -1)[-len(p0) :]
        out.append(
            [
                _Exchange(
                    "embed", -1, 0, b, prod, p0, _op_blocks(progs[b], "embed", -1)[-len(cums[b]["x"]) :], cums[b]["x"]
                )
                for b in range(1, n)
            ]
        )
    if d.split == "columns":
        return out + _gathers(d, progs, cums, llms)
    index = [_op_layer_blocks(p, ("o_proj", "attn_add", "down", "ffn_add")) for p in progs]
    none = np.zeros(0, np.int64)
    for layer in range(llms[0].layers):
        for op, cons_op in (("o_proj", "attn_add"), ("down", "ffn_add")):
            prods = [index[u].get((OP_ID[op], layer), none)[-len(cums[u][op]) :] for u in range(n)]
            conss = [index[u].get((OP_ID[cons_op], layer), none)[: len(cums[u][op])] for u in range(n)]
            for u in range(n):  # the consumer's first input is the local producer's entry (lowering's structure)
                assert np.array_equal(progs[u].t_dep[conss[u], 0], prods[u])
            out.append(
                [
                    _Exchange(op, layer, a, b, prods[a], cums[a][op], conss[b], cums[b][op])
                    for a in range(n)
                    for b in range(n)
                    if a != b
                ]
            )
    return out


def _gathers(d: StreamingDesign, progs: list[Program], cums: list[dict[str, Any]], llms: list[LlmSpec]):  # type: ignore[no-untyped-def]
    """The all-gathers of split = columns (fpga/streaming/columns.py), per layer and gather point: unit a's own
    chunks (the blocks its receive blocks keep in step with) to unit b's receive blocks of slice (a - b) mod N."""
    n = len(d.units)
    rx = [progs[u].e_list[progs[u].e_ptr[len(p.e_lat) - 1] : progs[u].e_ptr[len(p.e_lat)]] for u, p in enumerate(progs)]
    out: list[list[_Exchange]] = []
    for layer in range(llms[0].layers):
        recv = [r[progs[u].t_layer[r] == layer] for u, r in enumerate(rx)]
        pos = [0] * n
        for g, (src_op, _cons) in enumerate(GATHERS):
            own = [cums[u]["gathers"][g] for u in range(n)]
            mine = [recv[u][pos[u] : pos[u] + (n - 1) * len(own[u])] for u in range(n)]
            prods = [progs[u].t_dep[mine[u][: len(own[u])], 0] for u in range(n)]
            group = []
            for a in range(n):
                for b in range(n):
                    if a != b:
                        r, j = (a - b) % n, len(own[b])
                        group.append(
                            _Exchange(src_op, layer, a, b, prods[a], own[a], mine[b][(r - 1) * j : r * j], own[b])
                        )
            out.append(group)
            pos = [pos[u] + (n - 1) * len(own[u]) for u in range(n)]
        assert pos == [len(r) for r in recv]
    return out


def compile_units(
    design: StreamingDesign, board: BoardSpec, llm: LlmSpec, ctx: int, with_lm_head: bool = True, per_port: bool = False
) -> UnitProgram:
    """The token program of a multi-unit design (see the module docstring)."""
    from fpga.streaming.ports import port_channels
    from fpga.streaming.program import compile_token

    d = resolve_units(design)
    n = len(d.units)
    subs = [unit_design(d, i) for i in range(n)]
    llms = [unit_llm(d, llm, i) for i in range(n)]
    roles = unit_roles(d)
    progs = [compile_token(subs[i], board, llms[i], ctx, with_lm_head and roles[i][1], per_port) for i in range(n)]
    cums = [_cums(subs[i], board, llms[i]) for i in range(n)]
    groups = _exchanges(d, progs, cums, llms)

    b_off = np.cumsum([0] + [p.n_blocks for p in progs])
    e_off = np.cumsum([0] + [len(p.e_lat) for p in progs])
    n_ub, n_ue = int(b_off[-1]), int(e_off[-1])
    hs = hops(d)
    fk = round(d.clock_hz)
    hop_lat = [_cdiv(d.links[k].latency_cycles * fk, round(d.links[k].clock_hz or d.clock_hz)) for k, _a, _b in hs]
    routes: dict[tuple[int, int], list[int]] = {}
    for x in (x for group in groups for x in group):
        if (x.src, x.dst) not in routes:
            path = route(d, x.src, x.dst)
            assert path is not None  # structure checks refuse unreachable pairs
            routes[(x.src, x.dst)] = path
    cyc_all = np.concatenate([p.t_cyc for p in progs])
    # the token ends when every unit has: the final unit's last block waits for the others' last blocks
    fu = final_unit(d)
    final = int(b_off[fu] + progs[fu].final_block)
    inp = LinkInputs(
        d=d,
        hops=hs,
        routes=routes,
        hop_lat=hop_lat,
        progs=progs,
        b_off=b_off,
        cyc_all=cyc_all,
        lat_of_block=np.concatenate([p.e_lat[p.t_eng] for p in progs]),
        final=final,
        unit_finals=[int(b_off[u] + progs[u].final_block) for u in range(n) if u != fu],
    )
    links = link_blocks(inp, groups)
    l_hop, hop_blocks, dep, off = links.l_hop, links.hop_blocks, links.dep, links.off
    n_link = len(l_hop)
    n_b = n_ub + n_link

    def cat(name: str, shift: Any = None) -> np.ndarray:
        parts = [getattr(p, name) + (0 if shift is None else shift[u]) for u, p in enumerate(progs)]
        return np.concatenate(parts).astype(np.int64)

    t_eng = np.concatenate([cat("t_eng", e_off), n_ue + l_hop]).astype(np.int64)
    t_cyc = np.concatenate([cyc_all, links.l_cyc]).astype(np.int64)
    t_drain = np.concatenate([cat("t_drain"), np.zeros(n_link, np.int64)])
    t_op = np.concatenate([cat("t_op"), np.full(n_link, LINK_OP, np.int64)])
    rx = [int(e_off[u]) + k for u, s in enumerate(subs) for k, e in enumerate(s.engines) if e.name == RX]
    t_op[np.isin(t_eng, rx)] = LINK_OP  # receive blocks of split = columns: link work, not their consumer's
    layer0 = [0] * n
    if d.split == "layers":
        layer0 = list(np.cumsum([0] + [m.layers for m in llms])[:-1])
    t_layer = np.concatenate([p.t_layer + layer0[u] for u, p in enumerate(progs)] + [links.l_layer])
    e_lists = [p.e_list + b_off[u] for u, p in enumerate(progs)] + list(hop_blocks)
    counts = [int(p.e_ptr[k + 1] - p.e_ptr[k]) for p in progs for k in range(len(p.e_lat))] + [
        len(b) for b in hop_blocks
    ]
    e_ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    e_lat = np.concatenate([cat("e_lat"), np.array(hop_lat, np.int64)]).astype(np.int64)

    g_off = np.cumsum([0] + [p.n_groups for p in progs])
    q_off = np.cumsum([0] + [p.n_ports for p in progs])

    def requests(ptr: str, table: str, need: str, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        tabs, ptrs, row0 = [], [np.zeros(1, np.int64)], 0
        needs = np.full((n_b, int(cols[-1])), -1, np.int64)
        for u, p in enumerate(progs):
            t = getattr(p, table).copy()
            for c in (3, 5):  # write-source and buffer-slot blocks
                t[:, c] = np.where(t[:, c] >= 0, t[:, c] + b_off[u], -1)
            tabs.append(t)
            ptrs.append(getattr(p, ptr)[1:] + row0)
            row0 += len(t)
            needs[int(b_off[u]) : int(b_off[u + 1]), int(cols[u]) : int(cols[u + 1])] = getattr(p, need)
        return np.concatenate(ptrs).astype(np.int64), np.concatenate(tabs).astype(np.int64), needs

    g_ptr, r_table, t_need_group = requests("g_ptr", "r_table", "t_need_group", g_off)
    if per_port:
        p_ptr, pr_table, t_need_port = requests("p_ptr", "pr_table", "t_need_port", q_off)
    else:
        p_ptr, pr_table, t_need_port = np.zeros(1, np.int64), np.zeros((0, 8), np.int64), np.zeros((n_b, 0), np.int64)
    chans = [c for s in subs for c in port_channels(s)]
    ids: dict[int, int] = {}
    port_chan = np.array([ids.setdefault(c, len(ids)) for c in chans], np.int64)
    specs = [e for s in subs for e in s.engines] + [
        EngineSpec(name=hop_name(d, h), ops=(), lanes=1, pipeline_latency_cycles=hop_lat[i]) for i, h in enumerate(hs)
    ]
    hop_info = tuple(
        {
            "hop": hop_name(d, h),
            "link": d.links[h[0]].name,
            "kind": d.links[h[0]].kind,
            "from": d.units[h[1]].name,
            "to": d.units[h[2]].name,
            "bytes": links.hop_bytes[i],
            "chunks": len(hop_blocks[i]),
        }
        for i, h in enumerate(hs)
    )
    param_bytes: dict[str, int] = {}
    req_bytes: dict[str, int] = {}
    for p in progs:
        for k, v in p.param_bytes.items():
            param_bytes[k] = param_bytes.get(k, 0) + v
        for k, v in p.req_bytes.items():
            req_bytes[k] = req_bytes.get(k, 0) + v
    return UnitProgram(
        n_blocks=n_b,
        t_eng=t_eng,
        t_cyc=t_cyc,
        t_drain=t_drain,
        t_op=t_op,
        t_layer=t_layer.astype(np.int64),
        t_dep=dep,
        t_off=off,
        e_ptr=e_ptr,
        e_list=np.concatenate(e_lists).astype(np.int64),
        e_lat=e_lat,
        final_block=final,
        port_eng=cat("port_eng", e_off),
        port_group=cat("port_group", g_off),
        port_bytes=cat("port_bytes"),
        port_buffer=cat("port_buffer"),
        port_outstanding=cat("port_outstanding"),
        g_ptr=g_ptr,
        g_port=cat("g_port", q_off),
        g_mult=cat("g_mult"),
        r_table=r_table,
        t_need_group=t_need_group,
        p_ptr=p_ptr,
        pr_table=pr_table,
        t_need_port=t_need_port,
        macs=sum(p.macs for p in progs),
        port_chan=port_chan,
        arbitration=progs[0].arbitration,
        param_bytes=param_bytes,
        req_bytes=req_bytes,
        engine_specs=tuple(specs),
        engine_unit=tuple([u for u, p in enumerate(progs) for _ in range(len(p.e_lat))] + [-1] * len(hs)),
        hop_info=hop_info,
        exchange_bytes=links.exchange_bytes,
        unit_programs=tuple(progs),
    )
