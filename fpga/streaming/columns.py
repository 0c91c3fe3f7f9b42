"""One unit of a ``split = "columns"`` design: its share of the graph and the all-gathers of its layer.

Under the column split (:mod:`fpga.streaming.unit_spec`) every unit computes ``1/N`` of every linear's output
columns (``1/N`` of the rows of each weight matrix ``W``, ``out x in``). Which operators then need a whole vector
follows from the graph's shapes:

* ``q_proj``/``k_proj``/``v_proj``: ``1/N`` of the rows = ``1/N`` of the query and KV heads (the KV head count must
  divide by N: attention heads follow the QKV column split, each unit attends with its own heads over its own
  KV cache); attention and RoPE need nothing from other units;
* ``o_proj`` reads every head's output: the attention output is **all-gathered** before it; it computes ``1/N`` of
  the hidden vector, which the residual add and the next RMSNorm need whole: **all-gathered** after it;
* ``gate_proj``/``up_proj``: ``1/N`` of the intermediate columns; SiLU x up is element-wise, so it runs on the
  slice; ``down_proj`` reads the whole intermediate vector: **all-gathered** before it; its ``1/N`` of the hidden
  vector is **all-gathered** after it (the residual add and the next layer's norm need it whole).

So a unit's graph (:func:`column_graph`) is the graph of the LLM with ``1/N`` of the heads and intermediate columns
(its q/k/v and gate/up rows) in which ``o_proj`` and ``down_proj`` take their whole input (``N x`` the share's) and
emit ``1/N`` of their rows; bytes and MACs are recomputed from the shapes, so the units together hold exactly the
graph's weights, scales and biases (tests/test_units_columns.py). Norms and residual adds run on every unit over the
whole vector; the embedding and the head run on the first unit, as under the heads split.

**An all-gather in the unit's program** (:class:`Columns`): the whole vector is the unit's own slice (its entries
as its producer emits them) followed by the ``N - 1`` other slices, slice ``r`` being unit ``(u + r) mod N``'s,
chunked like the local one. Each remote chunk lands through a one-cycle *receive block* on the unit's receive
engine (``rx``, added to the unit by :func:`fpga.streaming.units.unit_design`); the consumers read the whole vector
as if it were local. A receive block of chunk ``j`` also waits for the unit's own chunk ``j`` (the all-gather
advances in step: a unit takes its partners' chunk ``j`` in once its own is there), so a unit alone is its
share run with partners that are exactly as fast as it and an infinitely fast link; :mod:`fpga.streaming.units`
then adds the link: the chunk's serialisation, latency and back-pressure on every hop it crosses up to the
receiver, where a slice lands in a buffer with room for all of it (the receiver never back-pressures the link).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fpga.streaming.program_format import DEP_LOCAL, DEP_NONE, _Segment, _Vec
from hwmodel.graph import Graph, Op

RX = "rx"  # name of a column unit's receive engine
#: the all-gather points of a layer, in program order: (producer operator, consumer operator)
GATHERS = (("attention", "o_proj"), ("o_proj", "attn_add"), ("silu_mul", "down"), ("down", "ffn_add"))
_TRANSPOSED = ("o_proj", "down_proj")  # whole input, 1/N of the output rows


def column_graph(g: Graph, n: int) -> Graph:
    """The graph of one column unit from the graph of its head share (see the module docstring): ``o_proj`` and
    ``down_proj`` take ``n x`` the share's input and emit ``1/n`` of its output, bytes and MACs from the shapes."""
    q = g.quant

    def fix(o: Op) -> Op:
        if o.kind != "linear" or o.name not in _TRANSPOSED:
            return o
        i, r = o.in_features * n, o.out_features // n
        b = dataclasses.replace(
            o.bytes,
            weights=r * q.weight_row_bytes(i),
            metadata=r * q.meta_row_bytes(i),
            bias=r * q.vector_bytes if o.bias else 0,
            act_in=o.tokens * i * q.act_bytes,
            act_out=o.tokens * r * q.act_bytes,
        )
        return dataclasses.replace(o, in_features=i, out_features=r, macs=o.tokens * i * r, bytes=b)

    memo: dict[int, tuple[Op, ...]] = {}
    layers = tuple(memo.setdefault(id(layer), tuple(fix(o) for o in layer)) for layer in g.layers)
    return dataclasses.replace(g, layers=layers)


class Columns:
    """The all-gathers of one layer's post-attention part (identity for any other design)."""

    def __init__(self, c: Any) -> None:
        self.c = c
        self.n = c.d.column_units
        self.rx = next((i for i, e in enumerate(c.d.engines) if e.name == RX), -1)
        self.gathered: list[tuple[str, list[int]]] = []  # per all-gather: (consumer, cumulative local elements)
        c.column_gathers = self.gathered  # read by fpga.streaming.units (the exchanged chunks)

    def gather(self, seg: _Segment, vin: _Vec, op: str) -> _Vec:
        """The whole vector for ``op``: the local slice ``vin``, then the other units' slices (receive blocks)."""
        if self.n == 1:
            return vin
        local = [cum for _k, _i, cum in vin.entries]
        self.gathered.append((op, local))
        out = list(vin.entries)
        for r in range(1, self.n):
            for cum in local:
                t = seg.block(self.rx, 1, op)
                self.c.consume(seg, t, 0, vin, cum, main=False)  # in step: after the unit's own chunk
                out.append((DEP_LOCAL, t, r * local[-1] + cum))
        return _Vec(out, self.rx)

    def stream(self, seg: _Segment, op: str, vin: _Vec, skip: _Vec) -> _Vec:
        """Element-wise ``op`` over the gathered ``vin`` (with the residual ``skip``). The remote slices land in a
        buffer beside the consumer, not a FIFO: their receive blocks are not back-pressured by it (the consumer reads
        its local slice first; a FIFO would hold the link, and through it the partners' producers, until then)."""
        if self.n == 1:
            return self.c.stream_op(seg, op, vin, skip=skip)
        first = len(seg.eng)
        out = self.c.stream_op(seg, op, self.gather(seg, vin, op), skip=skip)
        for t in range(first, len(seg.eng)):
            if seg.eng[t] == self.rx:
                seg.deps[t][2] = (DEP_NONE, 0, 0)
        return out

    def matvec(self, seg: _Segment, op: str, vin: _Vec) -> _Vec:
        """``op`` over the gathered ``vin``. A block that reads into a remote slice also waits for the whole local
        slice (an input-stationary engine consumes its input progressively, and receive blocks keep in step with
        the local chunks, not behind the whole local slice)."""
        c = self.c
        if self.n == 1:
            return c.matvec(seg, op, vin)
        first = len(seg.eng)
        out = c.matvec(seg, op, self.gather(seg, vin, op))
        for t in range(first, len(seg.eng)):
            kind, idx, _off = seg.deps[t][0]
            if kind == DEP_LOCAL and seg.eng[idx] == self.rx and seg.deps[t][1][0] == DEP_NONE:
                c.consume(seg, t, 1, vin, vin.entries[-1][2], main=False)
        return out
