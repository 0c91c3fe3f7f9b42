"""Port back-pressure: one HBM port's requests over the whole token, with the limits that hold them back.

Each port's requests are its head's, then every layer copy's (weight addresses advance one layer's weights per
copy, KV addresses one layer's KV region), then the tail's. A read needs a free slot of the port's
``buffer_depth``-deep read buffer: read k waits until the block that consumed read k - buffer_depth has issued
(``slot`` columns); it also waits for read k - ``max_outstanding`` (the AXI outstanding-transaction limit,
``outprev``). A write stores the result of the block that produced it. ``need[block]`` is the last read a
block consumes; the most reads one block consumes must fit the port buffer.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def _expand_port(
    head: np.ndarray,
    layer: np.ndarray,
    tail: np.ndarray,
    base: np.ndarray,
    tail_base: int,
    w_stride: int,
    kv_stride: int,
    cyc: np.ndarray,
    buffer_depth: int,
    outstanding: int,
    out: np.ndarray,
    need: np.ndarray,
) -> int:
    """One port's requests over the whole token into ``out`` rows (bytes, address, write, write-source block,
    its offset, slot block, slot offset, outstanding predecessor); ``need[block]`` = the last read a block
    consumes. Returns the most reads one block consumes (must fit the port buffer)."""
    n_layers = len(base)
    k = 0
    reads = np.empty(out.shape[0], dtype=np.int64)  # request index of each read, in order
    cons = np.empty(out.shape[0], dtype=np.int64)  # consumer block of each read
    nr = 0
    worst = 0
    run_block = -1
    run = 0
    for part in range(3):
        src = head if part == 0 else (layer if part == 1 else tail)
        copies = n_layers if part == 1 else 1
        for j in range(copies):
            shift = 0 if part == 0 else (base[j] if part == 1 else tail_base)
            for i in range(src.shape[0]):
                addr = src[i, 1]
                if part == 1:
                    addr += j * (w_stride if src[i, 5] == 0 else kv_stride)
                out[k, 0] = src[i, 0]
                out[k, 1] = addr
                out[k, 2] = src[i, 2]
                blk = src[i, 3] + shift
                if src[i, 2] == 1:  # write: stores the result of block blk
                    out[k, 3] = blk
                    out[k, 4] = src[i, 4]
                    out[k, 5] = -1
                    out[k, 6] = 0
                    out[k, 7] = -1
                else:
                    out[k, 3] = -1
                    out[k, 4] = 0
                    if nr >= buffer_depth:
                        b = cons[nr - buffer_depth]
                        out[k, 5] = b
                        out[k, 6] = cyc[b]
                    else:
                        out[k, 5] = -1
                        out[k, 6] = 0
                    out[k, 7] = reads[nr - outstanding] - 0 if nr >= outstanding else -1
                    reads[nr] = k
                    cons[nr] = blk
                    nr += 1
                    need[blk] = k
                    if blk == run_block:
                        run += 1
                    else:
                        run_block = blk
                        run = 1
                    worst = max(worst, run)
                k += 1
    return worst
