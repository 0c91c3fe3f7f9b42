"""Channel classes: the HBM pseudo-channels that receive identical request streams from a program, so the fast
engine (:mod:`fpga.instruction.simulator`) simulates one representative per class and counts its traffic for all."""

from __future__ import annotations

import numpy as np

from fpga.instruction import isa


def _unique_rows(triples: np.ndarray) -> np.ndarray:
    """``np.unique(triples, axis=0)`` for non-negative int64 (rows, ch0, nch) triples: each packed into one integer
    that sorts like the row, so numpy deduplicates a flat array (a row-wise unique sorts a structured view, several
    times slower on a program's thousands of LD/ST instructions)."""
    if triples.shape[0] == 0 or triples.min() < 0:
        return np.unique(triples, axis=0)
    k = int(triples[:, 1:].max()) + 1
    if int(triples[:, 0].max()) >= (2**62) // (k * k):
        return np.unique(triples, axis=0)
    codes = np.unique((triples[:, 0] * k + triples[:, 1]) * k + triples[:, 2])
    return np.stack([codes // (k * k), (codes // k) % k, codes % k], axis=1)


def channel_classes(prog: np.ndarray, channels: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Group the datamover channels by the request stream the program sends them.

    Request ``j`` of an LD/ST goes to channel ``(CH0 + j) mod C`` with ``ceil((ROWS - j) / NCH)`` rows at
    ``ADDR + ((CH0 + j) div C) * STRIDE`` (addresses advance identically for every channel between repetitions).
    Channels whose (rows, address) pairs agree for every instruction are interchangeable. Returns (class of each
    channel, representative channel of each class, class sizes)."""
    dm = prog[(prog[:, isa.F_OP] == isa.OP_LD) | (prog[:, isa.F_OP] == isa.OP_ST)]
    if dm.shape[0] == 0:
        return np.zeros(channels, dtype=np.int64), np.zeros(1, dtype=np.int64), np.array([channels], dtype=np.int64)
    dm = _unique_rows(dm[:, [isa.F_ROWS, isa.F_CH0, isa.F_NCH]])
    rows, ch0, nch = dm[:, 0:1], dm[:, 1:2], dm[:, 2:3]
    c = np.arange(channels, dtype=np.int64)[None, :]
    j = (c - ch0) % channels
    touched = j < nch
    nrows = np.where(touched, np.maximum((rows - j + nch - 1) // nch, 0), 0)
    wrap = np.where(touched, (ch0 + j) // channels, 0)
    keys = (nrows * 2 + wrap).T  # one row per channel
    _u, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    order = np.argsort(first)  # number the classes by their lowest channel
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    cls = rank[inverse].astype(np.int64)
    rep = first[order].astype(np.int64)
    size = np.bincount(cls, minlength=rep.size).astype(np.int64)
    return cls, rep, size


def engine_classes(flat: np.ndarray, starts: np.ndarray, eng_seg: np.ndarray, ce: int):  # noqa: ANN201
    """:func:`channel_classes` of each engine's instructions over its ``ce`` channels, numbered globally (engine e's
    channels are ``e*ce ..``): (class of each channel, representative of each class, class sizes)."""
    cls_l, rep_l, size_l = [], [], []
    n = 0
    for e in range(eng_seg.size - 1):
        rows = flat[starts[eng_seg[e]] : starts[eng_seg[e + 1]]]
        cls, rep, size = channel_classes(rows, ce)
        cls_l.append(cls + n)
        rep_l.append(rep + e * ce)
        size_l.append(size)
        n += rep.size
    return np.concatenate(cls_l), np.concatenate(rep_l), np.concatenate(size_l)
