"""Element-wise blocks, one per entry of an input vector (:class:`_StreamBlocks`, a part of
:class:`fpga.streaming.lowering._Compiler`): the sampler's pass over an LM head's logits alone is 600-1,200 blocks,
so :meth:`_StreamBlocks._stream_blocks` builds them in list comprehensions; :meth:`_StreamBlocks._stream_blocks_ref`
appends them one :meth:`consume` at a time and is the reference the fast path is checked against
(tests/test_compile_exact.py)."""

from __future__ import annotations

import bisect
from typing import Any

from fpga.streaming.program_format import DEP_LOCAL, DEP_NONE, OP_ID, _Segment, _Vec


class _StreamBlocks:
    """Needs the compiler's ``d`` (design), ``hop`` (the hop matrix) and :meth:`consume`."""

    d: Any
    hop: Any
    consume: Any

    def _stream_blocks_ref(
        self, seg: _Segment, op: str, eng: int, lanes: int, vin: _Vec, skip: _Vec | None
    ) -> list[int]:
        """One block per entry of ``vin`` (reading it, and ``skip`` beside it), one :meth:`consume` at a time: the
        reference :meth:`_stream_blocks` is checked against (tests/test_compile_exact.py)."""
        ts = []
        prev = 0
        for _k, _i, cum in vin.entries:
            t = seg.block(eng, -(-(cum - prev) // lanes), op)
            self.consume(seg, t, 0, vin, cum)
            if skip is not None:
                self.consume(seg, t, 1, skip, cum, main=False)
            ts.append(t)
            prev = cum
        return ts

    def _stream_blocks(self, seg: _Segment, op: str, eng: int, lanes: int, vin: _Vec, skip: _Vec | None) -> list[int]:
        """:meth:`_stream_blocks_ref` with :meth:`_Segment.block` and :meth:`consume` inlined (an argmax over an LM
        head's logits has thousands of entries; the same blocks, dependencies and first readers)."""
        s_eng, s_cyc, s_deps = seg.eng, seg.cyc, seg.deps
        lat = [e.pipeline_latency_cycles for e in self.d.engines]
        to_eng = [1 if i == eng else h[eng] for i, h in enumerate(self.hop)]  # producer engine -> cycles to eng

        def dep(vec: _Vec, upto: int) -> tuple[int, tuple[int, int, int]]:
            k = bisect.bisect_left(vec.cum, upto) if upto > 0 else 0
            kind, idx, _c = vec.entries[k]
            if kind == DEP_LOCAL:
                pe = s_eng[idx]
                return k, (DEP_LOCAL, idx, s_cyc[idx] + lat[pe] + to_eng[pe])
            return k, (kind, idx, 0)

        none = (DEP_NONE, 0, 0)
        vcum = vin.cum
        n0, n = len(s_eng), len(vcum)
        ts = list(range(n0, n0 + n))
        s_cyc.extend([max(1, -(-(c - p) // lanes)) for p, c in zip([0, *vcum[:-1]], vcum)])
        free = vin.free_tile
        if all(a < b for a, b in zip(vcum, vcum[1:])):  # entry k's own cumulative count finds entry k
            d0 = [
                (DEP_LOCAL, i, s_cyc[i] + lat[s_eng[i]] + to_eng[s_eng[i]]) if kind == DEP_LOCAL else (kind, i, 0)
                for kind, i, _c in vin.entries
            ]
            free.extend(ts[len(free) :])  # block k is entry k's first reader unless one was already
        else:
            d0 = []
            for c, t in zip(vcum, ts):
                k, d = dep(vin, c)
                d0.append(d)
                while len(free) <= k:
                    free.append(t)
        d1 = [dep(skip, c)[1] for c in vcum] if skip is not None else [none] * n
        s_deps.extend([[a, b, none] for a, b in zip(d0, d1)])
        s_eng.extend([eng] * n)
        seg.drain.extend([0] * n)
        seg.op.extend([OP_ID[op]] * n)
        if n:
            vin.consumer_engine = eng
        return ts
