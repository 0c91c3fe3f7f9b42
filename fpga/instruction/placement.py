"""Work placed per engine in an instruction-driven design of several engines (``engines = N``, ``[placement]``).

Each engine is a whole overlay core — a scheduler with its own instruction stream, a datamover over its own
``datamover.channels / N`` HBM pseudo-channels (engine e owns channels ``e*C/N ..``), an MPE, an SFU and buffers
of the design's geometry — and the engines meet only at semaphores (:mod:`fpga.instruction.isa`, SIGNAL / WAIT).
The compiler lowers one stream per engine:

* **linears** (``placement.linears``): ``"rows"`` shards every linear and the LM head by output rows over all
  engines — engine i of N computes tiles ``[i*T/N, (i+1)*T/N)`` of a matrix of T tiles and loads only their weights,
  scales and zero points, from the start of that matrix's region in its own channels; ``"engine:K"`` runs them all
  on engine K;
* **attention** (``placement.attention``, engine H): the K/V cache (in H's channels), QK, softmax, PV, and every
  element-wise function of the full hidden vector (RMSNorm, RoPE, residual adds, activation quantisation) and the
  embedding gather run on H; the SiLU x up of a sharded MLP runs where its rows are.

Where data crosses engines the compiler puts a semaphore pair: H broadcasts the normalised hidden vector and the
attention output to the linear engines (SIGNAL on H, WAIT on each); the linear engines send their output slices
back to H (q, k, v; o_proj; down_proj); the MLP's intermediate slices are all-gathered among the linear engines
before down_proj. A SIGNAL fires once its data is computed (scoreboard waits) and the waiting engine sees it
``scheduler.sync_cycles`` later; the activations are assumed to land in the receiver's activation buffer within that
cost (no HBM traffic). Every exchange is causally ordered behind the one before it (a producer rewrites a buffer
only after a WAIT that follows its consumers' reads), so no extra WAR waits are needed across engines.

The sum over engines of MACs and HBM bytes equals the one-engine program's (tests/test_instruction_engines.py).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from fpga.instruction import isa
from fpga.instruction.emitter import _dm_row, _Emitter, _Ins, _row, _Step
from fpga.instruction.layout import _LOGIT_BYTES, build_layout
from fpga.instruction.program import MultiProgram

if TYPE_CHECKING:
    from fpga.instruction.compiler import Compiler
    from fpga.instruction.design import InstructionDesign
    from hwmodel.specs import LlmSpec


@dataclasses.dataclass(frozen=True)
class Role:
    """Which engine a stream is for, and where the work is placed (the default: one engine does everything)."""

    engine: int = 0
    engines: int = 1
    home: int = 0  # the attention engine
    linear_engines: tuple[int, ...] = (0,)

    def tiles(self, n_tiles: int, engine: int | None = None) -> tuple[int, int]:
        """The tiles ``[t0, t1)`` of a matrix of ``n_tiles`` that ``engine`` (default: this one) computes."""
        e = self.engine if engine is None else engine
        if e not in self.linear_engines:
            return 0, 0
        i, n = self.linear_engines.index(e), len(self.linear_engines)
        return i * n_tiles // n, (i + 1) * n_tiles // n

    def rows(self, out_features: int, tile: int, engine: int) -> int:
        """Output rows of a matrix that ``engine`` computes."""
        t0, t1 = self.tiles(math.ceil(out_features / tile), engine)
        return max(0, min(t1 * tile, out_features) - t0 * tile)


class _Exchange:
    """Emits the SIGNAL / WAIT pairs of one engine's stream."""

    def __init__(self, c: Compiler, em: _Emitter, steps: list[_Step], new: int) -> None:
        self.c, self.em, self.steps, self.new = c, em, steps, new
        self.r = c.role
        self.act_bytes = c.design.act_bits // 8
        self.tile = c.design.tiling.mv_tile_rows

    def _signal(self, dst: int, reads: Sequence[str], nbytes: int) -> None:
        row = _row(isa.OP_SIGNAL, dst, rows=nbytes)
        self.steps.append(self.c._plain(_Ins(row, reads=tuple(self.em.res(x) for x in reads))))

    def _wait(self, src: int, nbytes: int) -> None:
        self.steps.append(self.c._plain(_Ins(_row(isa.OP_WAIT, src, rows=nbytes))))

    def _bytes(self, outs: Sequence[int], engine: int) -> int:
        return self.new * self.act_bytes * sum(self.r.rows(o, self.tile, engine) for o in outs)

    def broadcast(self, names: Sequence[str], elements: int) -> None:
        """The attention engine's ``names`` (``elements`` values) to every other linear engine."""
        me, home = self.r.engine, self.r.home
        for e in self.r.linear_engines:
            if e == home:
                continue
            if me == home:
                self._signal(e, names, elements * self.act_bytes)
            elif me == e:
                self._wait(home, elements * self.act_bytes)

    def gather(self, names: Sequence[str], outs: Sequence[int]) -> None:
        """Every other linear engine's slices of ``names`` (matrices of ``outs`` rows) to the attention engine."""
        me, home = self.r.engine, self.r.home
        for e in self.r.linear_engines:
            if e == home:
                continue
            if me == e:
                self._signal(home, names, self._bytes(outs, e))
            elif me == home:
                self._wait(e, self._bytes(outs, e))

    def all_gather(self, name: str, out: int) -> None:
        """Each linear engine's slice of ``name`` to every other: all signals first, then the waits."""
        me, group = self.r.engine, self.r.linear_engines
        if me not in group:
            return
        for b in group:
            if b != me:
                self._signal(b, (name,), self._bytes((out,), me))
        for a in group:
            if a != me:
                self._wait(a, self._bytes((out,), a))


def layer_steps(c: Compiler, em: _Emitter, layer: int, astride: int, prior: int, new: int) -> list[_Step]:
    """One decoder layer's steps on engine ``c.role.engine`` (module docstring for who does what)."""
    llm, L, r = c.llm, c.layout.linears, c.role
    me, home, linear = r.engine, r.home, r.engine in r.linear_engines
    steps: list[_Step] = []
    x = _Exchange(c, em, steps, new)

    def linears(*pairs: tuple[str, str, str]) -> None:
        if linear:
            for name, src, dst in pairs:
                steps.extend(c._linear_steps(em, name, L[name], src, dst, new, layer, astride))

    if me == home:
        steps.append(c._sfu(em, isa.SFU_RMSNORM, new * llm.hidden, 3, ("x",), ("xn",)))
    x.broadcast(("xn",), new * llm.hidden)
    linears(("q_proj", "xn", "q"), ("k_proj", "xn", "k"), ("v_proj", "xn", "v"))
    x.gather(("q", "k", "v"), [L[n].out_features for n in ("q_proj", "k_proj", "v_proj")])
    if me == home:
        if llm.qk_norm:
            steps.append(c._sfu(em, isa.SFU_RMSNORM, new * (llm.q_dim + llm.kv_dim), 3, ("q", "k"), ("q", "k")))
        steps.append(c._sfu(em, isa.SFU_ROPE, new * (llm.q_dim + llm.kv_dim), 1, ("q", "k"), ("q", "k")))
        steps += c._store_kv_steps(em, layer, astride, prior, new)
        steps += c._attention_steps(em, layer, astride, prior, new)
        steps.append(c._sfu(em, isa.SFU_QUANT, new * llm.q_dim, 2, ("ao",), ("ao",)))
    x.broadcast(("ao",), new * llm.q_dim)
    linears(("o_proj", "ao", "y"))
    x.gather(("y",), [L["o_proj"].out_features])
    if me == home:
        steps.append(c._sfu(em, isa.SFU_ADD, new * llm.hidden, 1, ("x", "y"), ("x",)))
        steps.append(c._sfu(em, isa.SFU_RMSNORM, new * llm.hidden, 3, ("x",), ("xn",)))
    x.broadcast(("xn",), new * llm.hidden)
    mine = r.rows(llm.intermediate, c.design.tiling.mv_tile_rows, me)  # this engine's MLP rows
    if "gate_proj" in L:
        linears(("gate_proj", "xn", "h1"), ("up_proj", "xn", "h2"))
        if mine:
            steps.append(c._sfu(em, isa.SFU_SILU_MUL, new * mine, 3, ("h1", "h2"), ("hm",)))
    else:
        linears(("up_proj", "xn", "h2"))
        if mine:
            steps.append(c._sfu(em, isa.SFU_SILU_MUL, new * mine, 2, ("h2",), ("hm",)))
    x.all_gather("hm", L["down_proj"].in_features)
    linears(("down_proj", "hm", "y"))
    x.gather(("y",), [L["down_proj"].out_features])
    if me == home:
        steps.append(c._sfu(em, isa.SFU_ADD, new * llm.hidden, 1, ("x", "y"), ("x",)))
    return steps


def head_steps(c: Compiler, em: _Emitter) -> list[_Step]:
    """The final norm (attention engine), the LM head sharded like a linear, each shard's logits stored."""
    llm, lay, r = c.llm, c.layout, c.role
    steps: list[_Step] = []
    if r.engine == r.home:
        steps.append(c._sfu(em, isa.SFU_RMSNORM, llm.hidden, 3, ("x",), ("xn",)))
    _Exchange(c, em, steps, 1).broadcast(("xn",), llm.hidden)
    if r.engine not in r.linear_engines:
        return steps
    steps += c._linear_steps(em, "lm_head", lay.head, "xn", "logits", 1, -1, 0)
    rows = r.rows(lay.head.out_features, c.design.tiling.mv_tile_rows, r.engine)
    if rows:
        row = _dm_row(isa.OP_ST, isa.BUF_ACT, lay.logits_addr, rows, _LOGIT_BYTES, nch=min(c.C, rows))
        steps.append(c._plain(_Ins(row, reads=(em.res("logits"),))))
    return steps


class MultiCompiler:
    """One :class:`~fpga.instruction.compiler.Compiler` per engine, on the design with that engine's channels."""

    def __init__(self, design: InstructionDesign, prefetch_ratio: int | None = None, llm: LlmSpec | None = None):
        from fpga.instruction.compiler import Compiler

        n, p = design.engines, design.placement
        one = p.linear_engine
        group = tuple(range(n)) if one is None else (one,)
        sub = dataclasses.replace(
            design, datamover=dataclasses.replace(design.datamover, channels=design.channels_per_engine)
        )
        self.design = design
        self.compilers = tuple(Compiler(sub, prefetch_ratio, llm, Role(e, n, p.attention, group)) for e in range(n))
        home = self.compilers[p.attention]
        self.llm, self.k = home.llm, home.k
        # what the HBM holds (weights once, the KV cache once): the one-engine layout's bytes
        self.layout = build_layout(dataclasses.replace(design, engines=1), self.llm)

    @property
    def first_linear(self) -> Compiler:
        """The compiler of the first engine that runs linears (its access sizes are the design's)."""
        return next(c for c in self.compilers if c.role.engine in c.role.linear_engines)

    def decode_program(self, ctx: int) -> MultiProgram:
        return MultiProgram(tuple(c.decode_program(ctx) for c in self.compilers))

    def prefill_program(self, n_tokens: int, ctx: int = 0, logits: bool = True) -> MultiProgram:
        return MultiProgram(tuple(c.prefill_program(n_tokens, ctx, logits) for c in self.compilers))

    def compile_fresh(self, ctx: int, new: int = 1, logits: bool = True) -> MultiProgram:
        return MultiProgram(tuple(c.compile_fresh(ctx, new, logits) for c in self.compilers))
