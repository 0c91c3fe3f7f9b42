"""Output-stationary matrix-vector blocks built all at once as numpy arrays (:class:`_RowBlocks`, a part of
:class:`fpga.streaming.lowering._Compiler`): an LM head has thousands of row blocks, and appending them one at a
time dominated a design point's compile in the DSE (docs/dse.md). The blocks and requests are the ones the
one-block-at-a-time path appends, in the same order (tests/test_dse_shared.py compares the programs)."""

from __future__ import annotations

from typing import Any

import numpy as np

from fpga.streaming.program_format import DEP_LOCAL, DEP_NONE, KIND_WEIGHT, OP_ID, _Segment, _Vec


class _RowBlocks:
    """Needs the compiler's ``d`` (design), ``granule``, ``wptr``, ``port0`` and ``ledger``."""

    d: Any
    granule: int
    wptr: list[int]
    port0: list[int]
    ledger: dict[str, int]

    def _row_blocks(
        self, seg: _Segment, op: str, eng: int, rows: int, cols: int, segs: list[tuple[int, int]], rpt: int
    ) -> _Vec:
        """Output-stationary blocks of ``rpt`` rows each (the last one clipped), each streaming its rows' weights:
        all blocks at once, as numpy arrays (an LM head has thousands), in the order one block at a time would
        append them."""
        e = self.d.engines[eng]
        lo = np.arange(0, rows, rpt, dtype=np.int64)
        hi = np.minimum(lo + rpt, rows)
        r = hi - lo
        issue = -(-(r * cols) // e.lanes)
        if e.scale_rows_per_cycle:  # the scale port delivers scale_rows_per_cycle output rows per cycle
            issue = np.maximum(issue, -(-r // e.scale_rows_per_cycle))
        if e.tile_rows > 0:  # tile_ends per block
            ends = hi // e.tile_rows - lo // e.tile_rows
            if rows % e.tile_rows:
                ends[-1] += 1
            issue = issue + e.tile_overhead_cycles * ends
        t0 = len(seg.eng)
        n = len(lo)
        seg.eng.extend([eng] * n)
        seg.cyc.extend(np.maximum(issue, 1).tolist())
        seg.drain.extend([1] + [0] * (n - 1))
        seg.op.extend([OP_ID[op]] * n)
        seg.deps.extend([[(DEP_NONE, 0, 0), (DEP_NONE, 0, 0), (DEP_NONE, 0, 0)] for _ in range(n)])
        rb = np.array([b for _n, b in segs], dtype=np.int64)
        before = np.concatenate([[0], np.cumsum([n_ for n_, _b in segs])[:-1]]).astype(np.int64)
        nrows = np.array([n_ for n_, _b in segs], dtype=np.int64)

        def prefix(k: np.ndarray) -> np.ndarray:  # payload bytes of the first k rows
            return (np.clip(k[:, None] - before[None, :], 0, nrows[None, :]) * rb[None, :]).sum(axis=1)

        nbytes = prefix(hi) - prefix(lo)
        ts = np.arange(t0, t0 + n, dtype=np.int64)
        self._weight_reqs_many(seg, ts, eng, nbytes)
        return _Vec([(DEP_LOCAL, t, d) for t, d in zip(ts.tolist(), hi.tolist())], eng)

    def _weight_reqs_many(self, seg: _Segment, ts: np.ndarray, eng: int, nbytes: np.ndarray) -> None:
        """:meth:`weight_reqs` for blocks ``ts`` (consecutive, in order) streaming ``nbytes`` each."""
        e = self.d.engines[eng]
        g = self.granule
        per_port = -(-nbytes // e.ports)
        share = -(-per_port // g) * g
        start = self.wptr[eng] + np.concatenate([[0], np.cumsum(share)[:-1]]).astype(np.int64)
        k = -(-share // e.burst_bytes)  # requests per block
        owner = np.repeat(np.arange(len(ts)), k)
        j = np.arange(len(owner), dtype=np.int64) - np.repeat(np.cumsum(k) - k, k)  # request index in its block
        size = np.minimum(e.burst_bytes, share[owner] - j * e.burst_bytes)
        addr = start[owner] + j * e.burst_bytes
        n = len(owner)
        recs = list(zip(size.tolist(), addr.tolist(), [0] * n, ts[owner].tolist(), [0] * n, [KIND_WEIGHT] * n))
        for p in range(self.port0[eng], self.port0[eng] + e.ports):
            seg.reqs[p].extend(recs)
        self.wptr[eng] += int(share.sum())
        self.ledger["padding"] += int((share * e.ports - nbytes).sum())
        self.ledger["pad_bound"] += len(ts) * e.ports * self.granule
