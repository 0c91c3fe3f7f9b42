"""Prefetch / coalescing ratio k: whether the weights, scales and zero points of ``k`` consecutive tiles of each
matrix (one coalesced LD each) fit the design's on-chip buffers, and the largest k that does.

A group must fit its buffer for the ratio to compile at all; two groups must fit for a load to overlap the compute
before it (``double_buffered``). See :mod:`fpga.instruction.compiler` for how the ratio shapes the loads.
"""

from __future__ import annotations

import math

from fpga.instruction.design import InstructionDesign
from fpga.instruction.layout import _matrix_bytes, linear_ops
from hwmodel.errors import HwmodelError
from hwmodel.specs import LlmSpec


class PrefetchError(HwmodelError):
    """The requested prefetch ratio does not fit the design's on-chip buffers."""


def group_bytes(design: InstructionDesign, llm: LlmSpec, k: int) -> dict[str, tuple[int, int, int]]:
    """Per linear (and the head): bytes of one coalesced group of ``k`` tiles in the weight/scale/zero buffers."""
    C = design.datamover.channels
    tile = design.tiling.mv_tile_rows
    out = {}
    for name, op in linear_ops(design, llm).items():
        rows = min(k * tile, op.out_features)
        wrow, srow, zrow = _matrix_bytes(design, op)
        per = math.ceil(rows / C) * C
        q = design.weight_bits < 16
        out[name] = (per * wrow, per * srow if (q or op.bias) else 0, per * zrow if q else 0)
    return out


def prefetch_fits(design: InstructionDesign, llm: LlmSpec, k: int, double_buffered: bool = False) -> bool:
    """Whether every coalesced group of ``k`` tiles fits its buffer (twice over if ``double_buffered``)."""
    b = design.buffers
    caps = (b.weight_bytes, b.scale_bytes, b.zero_bytes)
    factor = 2 if double_buffered else 1
    return all(factor * sizes[i] <= caps[i] for sizes in group_bytes(design, llm, k).values() for i in range(3))


def max_prefetch_ratio(design: InstructionDesign, llm: LlmSpec | None = None, double_buffered: bool = False) -> int:
    """Largest k whose coalesced groups fit the weight, scale and zero buffers (twice over if double_buffered)."""
    llm = llm or design.llm_spec
    outs = [op.out_features for op in linear_ops(design, llm).values()]
    max_tiles = max(math.ceil(o / design.tiling.mv_tile_rows) for o in outs)
    best = 0
    for k in range(1, max_tiles + 1):  # beyond max_tiles every matrix is one group: nothing changes
        if not prefetch_fits(design, llm, k, double_buffered):
            break
        best = k
    return best
