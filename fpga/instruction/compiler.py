"""Lower an LLM's decoder layers into instruction streams (decode and prefill) for an instruction-driven design.

What the compiler decides (FlightLLM-style, as GLITCHES uses it):

* **HBM layout.** Every weight matrix is row-interleaved over the datamover's ``C`` pseudo-channels: output row
  ``r`` lives in channel ``r mod C`` at per-channel row index ``r // C``. Group-wise scales and zero points live in
  their *own* regions (and on-chip buffers), with the same interleave. Each decoder layer owns one per-channel block
  of ``layer_stride_bytes`` (weights, metadata and its K/V cache, heads major, tokens dealt round-robin over
  channels), so layer ``l + 1`` is layer ``l`` shifted by a constant: consecutive layers that compile to the same
  instructions become one segment the engine repeats with shifted addresses.
* **Tiles.** One MV (decode) or MM (prefill) instruction produces ``mv_tile_rows`` output rows over the full input
  width (activations stay on chip). A tile therefore spans all ``C`` channels with ``mv_tile_rows / C`` rows each.
* **Prefetch / coalescing ratio k.** The weights, scales and zero points of ``k`` consecutive tiles of one matrix
  are fetched by one LD each. As the rows of consecutive tiles are contiguous inside a channel, a coalesced LD is
  one access per channel of ``k`` times the size:

      weight access = k * (mv_tile_rows / C) * in_features * weight_bits / 8
      metadata access = k * (mv_tile_rows / C) * ceil(in_features / group_size) * scale_bits / 8

  For LLaMA2-7B W4A8 on U280 (``mv_tile_rows`` 128, C = 32, group 128, fp16 scales and scaled zeros) q_proj gives
  4 * 4096 * 0.5 = 8 KB and 4 * 32 * 2 = 256 B at k = 1, and 32 KB and 1 KB at k = 4.
* **Buffers.** Each on-chip buffer is a ring; an LD allocates ``bytes`` in it. Loads of later tiles are hoisted
  ahead of the compute of the current one (software prefetch) as long as their allocation does not overlap data
  whose consumer has not been emitted yet. The buffer capacity therefore bounds both the coalescing ratio (a group
  must fit) and how far loads run ahead (two groups must fit to overlap a load with compute). A design with
  ``[buffers] overlap_loads = false`` has one buffer: no load runs ahead, and each load overwrites the previous one
  only after its consumer (no load/compute overlap).
* **Dependencies.** A pass over the stream turns buffer/register reads and writes into the scoreboard fields
  (RAW, WAR, WAW) of :mod:`fpga.instruction.isa`.
* **Where shapes and bytes come from.** Every matrix (its shape, weight row, scale row, zero-point row and bias)
  comes from the operator graph (:mod:`hwmodel.graph`) under the design's declared convention
  (:func:`quant_of`: group-wise ``[quant] group_size``, fp16 scales and scaled zero points); a bias rides in the
  scale region, after its row's scales. The embedding row gathered per token brings its scales and zero points.
  Mixture-of-experts and sliding-window models are refused (no expert dispatch or windowed cache walk is
  lowered). tests/test_graph_conservation.py checks the compiled programs against the graph.

The parts live in their own modules: :mod:`fpga.instruction.layout` (HBM layout), :mod:`fpga.instruction.prefetch`
(buffer fit of a ratio), :mod:`fpga.instruction.emitter` (IR, rings, prefetch hoisting),
:mod:`fpga.instruction.scoreboard` (dependency pass), :mod:`fpga.instruction.program` (the program); this module
lowers the decoder layers (:class:`Compiler`) and the datamover profile's load stream.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from fpga.instruction import isa, placement
from fpga.instruction.design import InstructionDesign
from fpga.instruction.emitter import _dm_row, _Emitter, _Ins, _Load, _row, _Step
from fpga.instruction.layout import _LAYER_ALIGN_BYTES, _LOGIT_BYTES, MatrixRegion, _align, build_layout
from fpga.instruction.patch import PatchPlan, apply_plan, make_plan
from fpga.instruction.placement import Role
from fpga.instruction.prefetch import PrefetchError, max_prefetch_ratio, prefetch_fits
from fpga.instruction.program import Program, Segment
from fpga.instruction.scoreboard import _dependencies
from hwmodel.errors import HwmodelError
from hwmodel.specs import LlmSpec


class Compiler:
    """Lowers one LLM for one design at one prefetch ratio."""

    def __init__(
        self,
        design: InstructionDesign,
        prefetch_ratio: int | None = None,
        llm: LlmSpec | None = None,
        role: Role | None = None,
    ):
        self.design = design
        self.role = role or Role()  # which engine of a design of several this stream is for
        self.llm = llm or design.llm_spec
        self.k = design.prefetch_ratio if prefetch_ratio is None else int(prefetch_ratio)
        if self.k < 1:
            raise PrefetchError(f"prefetch ratio must be >= 1, got {self.k}")
        self.layout = build_layout(design, self.llm)
        self.C = design.datamover.channels
        if not prefetch_fits(design, self.llm, self.k):
            kmax = max_prefetch_ratio(design, self.llm)
            raise PrefetchError(
                f"prefetch ratio {self.k} does not fit design '{design.name}': a group of {self.k} "
                f"tiles exceeds an on-chip buffer (largest ratio that fits: {kmax})"
            )
        row_b = self.layout.kv_row_bytes
        chunk = design.buffers.kv_bytes // 4 // row_b // self.C * self.C  # K and V, double-buffered
        if chunk < self.C:
            raise HwmodelError(
                f"design '{design.name}': buffers.kv_bytes {design.buffers.kv_bytes} holds fewer than "
                f"{4 * self.C} K/V rows of {row_b} B"
            )
        self.kv_chunk_tokens = chunk
        self.kv_slot_bytes = chunk * row_b
        self._templates: dict[tuple[int, bool, int], tuple[list[Segment], list[list[tuple]]]] = {}
        self._plans: dict[tuple[int, bool, int], list[PatchPlan]] = {}  # per template, per segment

    # ------------------------------------------------------------------ building blocks
    def _linear_steps(
        self, em: _Emitter, name: str, m: MatrixRegion, src: str, dst: str, tokens: int, layer: int, astride: int
    ) -> list[_Step]:
        d, C = self.design, self.C
        tile = d.tiling.mv_tile_rows
        n_tiles = math.ceil(m.out_features / tile)
        base = self.layout.layer_base + layer * self.layout.layer_stride_bytes if layer >= 0 else 0
        steps = []
        opid = isa.OPID[name]
        src_r, dst_r = em.res(src), em.res(dst)
        t0, t1 = self.role.tiles(n_tiles)  # this engine's shard of the tiles (all of them on one engine)
        shift = t0 * tile // C  # a shard's rows start its matrix's regions in this engine's channels
        for g0 in range(t0, t1, self.k):
            g1 = min(g0 + self.k, t1)
            r0, r1 = g0 * tile, min(g1 * tile, m.out_features)
            rows = r1 - r0
            ntile = g1 - g0
            nch = min(C, rows)
            loads = [
                _Load(
                    isa.BUF_WEIGHT,
                    math.ceil(rows / C) * C * m.weight_row_bytes,
                    _dm_row(
                        isa.OP_LD,
                        isa.BUF_WEIGHT,
                        base + m.weight_addr + (r0 // C - shift) * m.weight_row_bytes,
                        rows,
                        m.weight_row_bytes,
                        nch=nch,
                        astride=astride,
                        group=ntile,
                    ),
                )
            ]
            for buf, addr, rb in (
                (isa.BUF_SCALE, m.scale_addr, m.meta_row_bytes_scale),
                (isa.BUF_ZERO, m.zero_addr, m.meta_row_bytes_zero),
            ):
                if rb:
                    loads.append(
                        _Load(
                            buf,
                            math.ceil(rows / C) * C * rb,
                            _dm_row(
                                isa.OP_LD,
                                buf,
                                base + addr + (r0 // C - shift) * rb,
                                rows,
                                rb,
                                nch=nch,
                                astride=astride,
                                group=ntile,
                            ),
                        )
                    )
            op = isa.OP_MV if tokens == 1 else isa.OP_MM

            def build(res: list[int], g0: int = g0, g1: int = g1) -> list[_Ins]:
                out = []
                for t in range(g0, g1):
                    trows = min((t + 1) * tile, m.out_features) - t * tile
                    out.append(
                        _Ins(
                            _row(op, opid, rows=trows, row_bytes=m.in_features, stride=tokens),
                            reads=(*res, src_r),
                            writes=(dst_r,),
                            partial=True,
                        )
                    )
                return out

            steps.append(_Step(loads, build))
        return steps

    def _sfu(
        self,
        em: _Emitter,
        func: int,
        elements: int,
        passes: int,
        reads: Sequence[str],
        writes: Sequence[str],
        note: tuple = (),
    ) -> _Step:
        ins = _Ins(
            _row(isa.OP_SFU, func, rows=elements, row_bytes=passes),
            reads=tuple(em.res(r) for r in reads),
            writes=tuple(em.res(w) for w in writes),
            note=note,
        )
        return _Step([], lambda _res: [ins])

    def _plain(self, ins: _Ins) -> _Step:
        return _Step([], lambda _res: [ins])

    # ------------------------------------------------------------------ context-dependent fields
    def _kv_chunks(self, prior: int, new: int) -> list[tuple[int, int]]:
        """Token ranges of the K/V chunks attention reads from HBM (decode: the cached tokens; prefill: all)."""
        from_hbm = prior if new == 1 else prior + new
        return [(c0, min(c0 + self.kv_chunk_tokens, from_hbm)) for c0 in range(0, from_hbm, self.kv_chunk_tokens)]

    def _template_key(self, prior: int, new: int, logits: bool) -> tuple[int, bool, int]:
        return new, logits, len(self._kv_chunks(prior, new))

    def _layer_addr(self, layer: int) -> int:
        return self.layout.layer_base + layer * self.layout.layer_stride_bytes

    def _ctx_fields(self, note: tuple, prior: int, new: int) -> dict[str, int]:
        """The fields of an annotated instruction that depend on the context length (see :meth:`_patch`)."""
        llm, lay, C = self.llm, self.layout, self.C
        rb = lay.kv_row_bytes
        chunks = self._kv_chunks(prior, new) or [(0, 0)]
        decode = new == 1
        kind = note[0]
        if kind == "ld":  # ("ld", which, head, chunk, layer)
            _k, which, g, i, layer = note
            c0, c1 = chunks[i]
            addrs = lay.k_addr if which == "k" else lay.v_addr
            return dict(addr=self._layer_addr(layer) + addrs[g] + c0 // C * rb, rows=c1 - c0, nch=min(C, c1 - c0))
        if kind in ("qk", "pv"):  # (kind, chunk)
            i = note[1]
            n = chunks[i][1] - chunks[i][0] + (1 if decode and i == len(chunks) - 1 else 0)
            return dict(rows=n) if kind == "qk" else dict(row_bytes=n)
        if kind == "softmax":
            return dict(rows=new * (llm.heads // llm.kv_heads) * (prior + new))
        if kind == "st":  # ("st", which, head, layer): decode stores every head's row in one instruction
            _k, which, g, layer = note
            addrs = lay.k_addr if which == "k" else lay.v_addr
            fields = dict(addr=self._layer_addr(layer) + addrs[g] + prior // C * rb, ch0=prior % C)
            if not decode:
                fields.update(rows=new, nch=min(C, new))
            return fields
        raise AssertionError(f"compiler: unknown annotation {note!r}")

    def _attention_steps(self, em: _Emitter, layer: int, astride: int, prior: int, new: int) -> list[_Step]:
        """Attention of ``new`` query tokens over ``prior`` cached keys (from HBM) plus the new ones.

        Decode (``new`` = 1) takes the new key/value from the K/V registers; prefill reads the whole block back
        from HBM after storing it (it needs the rectangle anyway). K/V chunks use fixed-size buffer slots, so the
        dependency structure depends only on the number of chunks, not on the context length."""
        llm = self.llm
        group = llm.heads // llm.kv_heads
        decode = new == 1
        q_tokens = new * group
        chunks = self._kv_chunks(prior, new)
        n_chunks = max(len(chunks), 1)
        op = isa.OP_MV if q_tokens == 1 else isa.OP_MM
        steps: list[_Step] = []
        for g in range(llm.kv_heads):
            kvmem = f"kvmem{g}"
            sc = f"sc{g % 2}"
            for which in ("k", "v"):
                for i in range(n_chunks):
                    loads = []
                    if chunks:
                        f = self._ctx_fields(("ld", which, g, i, layer), prior, new)
                        row = _dm_row(
                            isa.OP_LD,
                            isa.BUF_KV,
                            f["addr"],
                            f["rows"],
                            self.layout.kv_row_bytes,
                            nch=f["nch"],
                            astride=astride,
                            group=1,
                        )
                        loads.append(
                            _Load(
                                isa.BUF_KV,
                                self.kv_slot_bytes,
                                row,
                                reads=() if decode else (em.res(kvmem),),
                                note=("ld", which, g, i, layer),
                            )
                        )
                    extra = decode and i == n_chunks - 1
                    if which == "k":
                        note = ("qk", i)
                        fields = dict(rows=0, row_bytes=llm.head_dim, stride=q_tokens)
                        reads, dst, tag = (("q", "k") if extra else ("q",)), sc, isa.OPID["qk"]
                    else:
                        note = ("pv", i)
                        fields = dict(rows=llm.head_dim, row_bytes=0, stride=q_tokens)
                        reads, dst, tag = ((sc, "v") if extra else (sc,)), "ao", isa.OPID["pv"]
                    fields.update(self._ctx_fields(note, prior, new))

                    def build(
                        res: list[int],
                        fields: dict = fields,
                        reads: tuple = reads,
                        dst: str = dst,
                        tag: int = tag,
                        note: tuple = note,
                    ) -> list[_Ins]:
                        return [
                            _Ins(
                                _row(op, tag, **fields),
                                reads=(*res, *(em.res(r) for r in reads)),
                                writes=(em.res(dst),),
                                partial=True,
                                note=note,
                            )
                        ]

                    steps.append(_Step(loads, build))
                if which == "k":
                    steps.append(
                        self._sfu(
                            em,
                            isa.SFU_SOFTMAX,
                            self._ctx_fields(("softmax",), prior, new)["rows"],
                            3,
                            (sc,),
                            (sc,),
                            note=("softmax",),
                        )
                    )
        return steps

    def _store_kv_steps(self, em: _Emitter, layer: int, astride: int, prior: int, new: int) -> list[_Step]:
        """Write the new tokens' K and V to the cache (tokens dealt round-robin over the channels)."""
        llm, lay = self.llm, self.layout
        rb = lay.kv_row_bytes
        steps: list[_Step] = []
        for which, addrs in (("k", lay.k_addr), ("v", lay.v_addr)):
            if new == 1:  # one token: every head's row goes to channel (prior mod C), heads apart by their region
                note = ("st", which, 0, layer)
                f = self._ctx_fields(note, prior, new)
                stride = addrs[1] - addrs[0] if llm.kv_heads > 1 else rb
                row = _dm_row(
                    isa.OP_ST,
                    isa.BUF_KV,
                    f["addr"],
                    llm.kv_heads,
                    rb,
                    stride=stride,
                    ch0=f["ch0"],
                    nch=1,
                    astride=astride,
                )
                steps.append(
                    self._plain(
                        _Ins(
                            row,
                            reads=(em.res(which),),
                            note=note,
                            writes=tuple(em.res(f"kvmem{g}") for g in range(llm.kv_heads)),
                        )
                    )
                )
            else:
                for g in range(llm.kv_heads):
                    note = ("st", which, g, layer)
                    f = self._ctx_fields(note, prior, new)
                    row = _dm_row(
                        isa.OP_ST, isa.BUF_KV, f["addr"], f["rows"], rb, ch0=f["ch0"], nch=f["nch"], astride=astride
                    )
                    mem = em.res(f"kvmem{g}")
                    steps.append(
                        _Step(
                            [],
                            lambda _res, row=row, which=which, mem=mem, note=note: [
                                _Ins(row, reads=(em.res(which),), writes=(mem,), note=note)
                            ],
                            fences=(mem,),
                        )
                    )
        return steps

    def _layer_steps(self, em: _Emitter, layer: int, astride: int, prior: int, new: int) -> list[_Step]:
        if self.role.engines > 1:
            return placement.layer_steps(self, em, layer, astride, prior, new)
        llm = self.llm
        L = self.layout.linears
        steps: list[_Step] = [self._sfu(em, isa.SFU_RMSNORM, new * llm.hidden, 3, ("x",), ("xn",))]
        for name, dst in (("q_proj", "q"), ("k_proj", "k"), ("v_proj", "v")):
            steps += self._linear_steps(em, name, L[name], "xn", dst, new, layer, astride)
        if llm.qk_norm:
            steps.append(self._sfu(em, isa.SFU_RMSNORM, new * (llm.q_dim + llm.kv_dim), 3, ("q", "k"), ("q", "k")))
        steps.append(self._sfu(em, isa.SFU_ROPE, new * (llm.q_dim + llm.kv_dim), 1, ("q", "k"), ("q", "k")))
        steps += self._store_kv_steps(em, layer, astride, prior, new)
        steps += self._attention_steps(em, layer, astride, prior, new)
        steps.append(self._sfu(em, isa.SFU_QUANT, new * llm.q_dim, 2, ("ao",), ("ao",)))
        steps += self._linear_steps(em, "o_proj", L["o_proj"], "ao", "y", new, layer, astride)
        steps.append(self._sfu(em, isa.SFU_ADD, new * llm.hidden, 1, ("x", "y"), ("x",)))
        steps.append(self._sfu(em, isa.SFU_RMSNORM, new * llm.hidden, 3, ("x",), ("xn",)))
        if "gate_proj" in L:
            steps += self._linear_steps(em, "gate_proj", L["gate_proj"], "xn", "h1", new, layer, astride)
            steps += self._linear_steps(em, "up_proj", L["up_proj"], "xn", "h2", new, layer, astride)
            steps.append(self._sfu(em, isa.SFU_SILU_MUL, new * llm.intermediate, 3, ("h1", "h2"), ("hm",)))
        else:  # ungated MLP: up, activation, down
            steps += self._linear_steps(em, "up_proj", L["up_proj"], "xn", "h2", new, layer, astride)
            steps.append(self._sfu(em, isa.SFU_SILU_MUL, new * llm.intermediate, 2, ("h2",), ("hm",)))
        steps += self._linear_steps(em, "down_proj", L["down_proj"], "hm", "y", new, layer, astride)
        steps.append(self._sfu(em, isa.SFU_ADD, new * llm.hidden, 1, ("x", "y"), ("x",)))
        return steps

    def _prologue_steps(self, em: _Emitter, new: int) -> list[_Step]:
        if self.role.engine != self.role.home:
            return []  # the embedding gather runs on the attention engine
        lay, C = self.layout, self.C
        # token ids are data: model the embedding rows as non-contiguous rows dealt over the channels
        row = _dm_row(
            isa.OP_LD,
            isa.BUF_ACT,
            lay.embed_addr,
            new,
            lay.embed_row_bytes,
            stride=2 * lay.embed_row_bytes,
            nch=min(C, new),
        )
        steps = [self._plain(_Ins(row, writes=(em.res("x"),)))]
        for addr, rb in (
            (lay.embed.scale_addr, lay.embed.meta_row_bytes_scale),
            (lay.embed.zero_addr, lay.embed.meta_row_bytes_zero),
        ):
            if rb:  # the rows' scales and zero points (dequantization of the gathered rows)
                r = _dm_row(isa.OP_LD, isa.BUF_ACT, addr, new, rb, stride=2 * rb, nch=min(C, new))
                steps.append(self._plain(_Ins(r, reads=(em.res("x"),), writes=(em.res("x"),))))
        return steps

    def _epilogue_steps(self, em: _Emitter, logits: bool) -> list[_Step]:
        steps: list[_Step] = []
        if logits and self.role.engines > 1:
            steps += placement.head_steps(self, em)
        elif logits:
            llm, lay, C = self.llm, self.layout, self.C
            steps.append(self._sfu(em, isa.SFU_RMSNORM, llm.hidden, 3, ("x",), ("xn",)))
            steps += self._linear_steps(em, "lm_head", lay.head, "xn", "logits", 1, -1, 0)
            row = _dm_row(
                isa.OP_ST,
                isa.BUF_ACT,
                lay.logits_addr,
                llm.head_out_channels,
                _LOGIT_BYTES,
                nch=min(C, llm.head_out_channels),
            )
            steps.append(self._plain(_Ins(row, reads=(em.res("logits"),))))
        steps.append(self._plain(_Ins(_row(isa.OP_SYNC))))
        return steps

    # ------------------------------------------------------------------ passes
    def _compile_pass(self, prior: int, new: int, logits: bool) -> tuple[list[Segment], list[list[tuple]]]:
        """One pass (a decode step or a prefill block): prologue, every decoder layer, epilogue.

        The buffer rings run on from one layer into the next (the next layer's first loads are placed after the
        last ones of this layer), so consecutive layers may differ in their dependency fields; runs of layers whose
        programs are identical up to the layer shift of their addresses become one repeated segment.
        Returns the segments and, per segment, the annotations of its context-dependent instructions."""
        stride = self.layout.layer_stride_bytes
        em = _Emitter(self.design)
        marks = []
        em.run_steps(self._prologue_steps(em, new))
        marks.append(len(em.out))
        for layer in range(self.llm.layers):
            em.run_steps(self._layer_steps(em, layer, stride, prior, new))
            marks.append(len(em.out))
        em.run_steps(self._epilogue_steps(em, logits))
        prog = _dependencies(em.out)
        cuts = [0, *marks, len(prog)]
        parts = [
            (
                prog[cuts[i] : cuts[i + 1]],
                [(j - cuts[i], em.out[j].note) for j in range(cuts[i], cuts[i + 1]) if em.out[j].note],
            )
            for i in range(len(cuts) - 1)
        ]
        segs: list[Segment] = [Segment(parts[0][0], 1)]
        seg_notes = [parts[0][1]]
        for body, note in parts[1:-1]:
            last = segs[-1]
            if len(segs) > 1 and last.instrs.shape == body.shape:
                shifted = body.copy()
                shifted[:, isa.F_ADDR] -= last.reps * shifted[:, isa.F_ASTRIDE]
                if np.array_equal(shifted, last.instrs):
                    segs[-1] = Segment(last.instrs, last.reps + 1)
                    continue
            segs.append(Segment(body, 1))
            seg_notes.append(note)
        segs.append(Segment(parts[-1][0], 1))
        seg_notes.append(parts[-1][1])
        return segs, seg_notes

    def _pass(self, prior: int, new: int, logits: bool) -> list[Segment]:
        """The segments of one pass at ``prior`` cached tokens: a cached template with its context fields patched
        (:mod:`fpga.instruction.patch`: the fields :meth:`_ctx_fields` gives, set with array operations)."""
        key = self._template_key(prior, new, logits)
        if key not in self._templates:
            self._templates[key] = segs, notes = self._compile_pass(prior, new, logits)
            lay = self.layout
            self._plans[key] = [
                make_plan(n, self._layer_addr, lay.k_addr, lay.v_addr, lay.kv_row_bytes, self.C, self.kv_chunk_tokens)
                for n in notes
            ]
        segs, _notes = self._templates[key]
        fixed = dict(
            channels=self.C,
            chunk_tokens=self.kv_chunk_tokens,
            kv_row_bytes=self.layout.kv_row_bytes,
            query_per_kv=self.llm.heads // self.llm.kv_heads,
        )
        return [
            Segment(apply_plan(plan, s.instrs, prior, new, **fixed), s.reps) for s, plan in zip(segs, self._plans[key])
        ]

    def decode_program(self, ctx: int) -> Program:
        """One decoded token at context length ``ctx`` (tokens already in the KV cache)."""
        self._check_ctx(ctx, 1)
        return Program(tuple(self._pass(ctx, 1, True)))

    def prefill_program(self, n_tokens: int, ctx: int = 0, logits: bool = True) -> Program:
        """Prefill ``n_tokens`` after ``ctx`` cached ones in blocks of ``tiling.prefill_token_block`` tokens."""
        if n_tokens < 1:
            raise HwmodelError(f"prefill needs at least one token, got {n_tokens}")
        self._check_ctx(ctx, n_tokens)
        block = self.design.tiling.prefill_token_block
        segs: list[Segment] = []
        starts = list(range(0, n_tokens, block))
        for b0 in starts:
            b1 = min(b0 + block, n_tokens)
            segs += self._pass(ctx + b0, b1 - b0, logits and b0 == starts[-1])
        return Program(tuple(segs))

    def compile_fresh(self, ctx: int, new: int = 1, logits: bool = True) -> Program:
        """One pass compiled from scratch, bypassing the template cache (tests prove it equals the patched one)."""
        self._check_ctx(ctx, new)
        return Program(tuple(self._compile_pass(ctx, new, logits)[0]))

    def _check_ctx(self, ctx: int, new: int) -> None:
        if ctx < 0:
            raise HwmodelError(f"context length must be >= 0, got {ctx}")
        if ctx + new > self.llm.max_position:
            raise HwmodelError(
                f"context {ctx} + {new} new tokens exceeds {self.llm.name}'s max_position {self.llm.max_position}"
            )


def metadata_fraction(design: InstructionDesign) -> float:
    """Bytes of one metadata buffer (scales, or zero points) per weight byte: ``(scale_bits / 8 / group) /
    (weight_bits / 8)`` (1/32 for W4 with fp16 per-128 groups)."""
    q = design.quant
    return (q.scale_bits / 8 / q.group_size) / (design.weight_bits / 8)


def load_stream_program(
    design: InstructionDesign, access_bytes: int, n_loads: int, with_metadata: bool = False
) -> Program:
    """``n_loads`` independent LD instructions that each read ``access_bytes`` from every channel, sequential
    addresses, then SYNC: the datamover path alone, for the access-size profile (`hwmodel fpga profile-hbm`).
    ``with_metadata``: each weight LD is followed by the scale and zero-point LDs the lowering pairs with it
    (:func:`metadata_fraction` of its size, from their own regions)."""
    if access_bytes < 1 or n_loads < 1:
        raise HwmodelError(f"access size and load count must be positive, got {access_bytes} B x {n_loads}")
    C = design.datamover.channels
    meta = max(1, round(access_bytes * metadata_fraction(design))) if with_metadata else 0
    region = _align(n_loads * access_bytes, _LAYER_ALIGN_BYTES)
    rows = []
    for i in range(n_loads):
        rows.append(_dm_row(isa.OP_LD, isa.BUF_WEIGHT, i * access_bytes, C, access_bytes, nch=C))
        if meta:
            rows.append(_dm_row(isa.OP_LD, isa.BUF_SCALE, region + i * meta, C, meta, nch=C))
            rows.append(_dm_row(isa.OP_LD, isa.BUF_ZERO, 2 * region + i * meta, C, meta, nch=C))
    prog = np.array([*rows, _row(isa.OP_SYNC)], dtype=np.int64)
    return Program((Segment(prog, 1),))
