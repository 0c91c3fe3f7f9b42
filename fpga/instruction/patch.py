"""The context fields of a compiled pass template, patched per context length with array operations.

The compiler (:mod:`fpga.instruction.compiler`) compiles one pass per template (new tokens, logits, number of K/V
chunks) and patches the fields that depend on the context into a copy for each context. The annotated
instructions (``_Ins.note``) and what each field is:

* ``("ld", which, head, i, layer)``: the load of K/V chunk ``i`` of one KV head: ``addr`` = the layer's block +
  the head's region + ``c0 // C`` rows of ``kv_row_bytes``, ``rows`` = ``c1 - c0``, ``nch`` = ``min(C, rows)``,
  where chunk ``i`` is tokens ``[c0, c1)`` = ``[i * chunk, min((i + 1) * chunk, from_hbm))`` of the ``from_hbm``
  tokens attention reads from HBM (decode: the cached ones; prefill: all);
* ``("qk", i)`` / ``("pv", i)``: the rows (QK) or row bytes (PV) of chunk ``i``, plus the new token in the last
  chunk of a decode step;
* ``("softmax",)``: ``rows`` = new tokens x query heads per KV head x (cached + new tokens);
* ``("st", which, head, layer)``: the store of the new K/V rows: ``addr`` = the layer's block + the head's region
  + ``prior // C`` rows, ``ch0`` = ``prior mod C``; a prefill block also sets ``rows`` = new and ``nch`` =
  ``min(C, new)``.

A :class:`PatchPlan` holds, per template segment, the row indices and the context-independent constants of these
fields, so that patching one context is a few array assignments instead of one Python call per annotated
instruction (a LLaMA2-7B decode step has about 5,400). tests/test_isa_compiler.py proves every patched pass equal
to a fresh compile.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from fpga.instruction import isa

_I64 = np.int64


def _idx(rows: list[int]) -> np.ndarray:
    return np.array(rows, dtype=_I64)


@dataclasses.dataclass(frozen=True)
class PatchPlan:
    """The annotated instructions of one template segment and their constants (see the module docstring)."""

    ld_idx: np.ndarray  # rows of the chunk loads
    ld_addr: np.ndarray  # their addresses (the chunk start is fixed by its index)
    ld_c0: np.ndarray  # first token of each load's chunk
    ld_end: np.ndarray  # (i + 1) * chunk: the chunk's end when it is full
    qk_idx: np.ndarray
    qk_chunk: np.ndarray
    pv_idx: np.ndarray
    pv_chunk: np.ndarray
    sm_idx: np.ndarray
    st_idx: np.ndarray
    st_addr: np.ndarray  # address of the store at prior = 0

    @property
    def empty(self) -> bool:
        return not (len(self.ld_idx) or len(self.qk_idx) or len(self.pv_idx) or len(self.sm_idx) or len(self.st_idx))


def make_plan(
    notes: Sequence[tuple[int, tuple[Any, ...]]],
    layer_addr: Any,
    k_addr: Sequence[int],
    v_addr: Sequence[int],
    kv_row_bytes: int,
    channels: int,
    chunk_tokens: int,
) -> PatchPlan:
    """The plan of one segment from its ``(row, note)`` annotations; ``layer_addr(layer)`` is a layer's block."""
    ld: list[tuple[int, int, int, int]] = []
    qk: list[tuple[int, int]] = []
    pv: list[tuple[int, int]] = []
    sm: list[int] = []
    st: list[tuple[int, int]] = []
    for row, note in notes:
        kind = note[0]
        if kind == "ld":
            _k, which, g, i, layer = note
            addrs = k_addr if which == "k" else v_addr
            c0 = i * chunk_tokens
            ld.append((row, layer_addr(layer) + addrs[g] + c0 // channels * kv_row_bytes, c0, c0 + chunk_tokens))
        elif kind == "qk":
            qk.append((row, note[1]))
        elif kind == "pv":
            pv.append((row, note[1]))
        elif kind == "softmax":
            sm.append(row)
        elif kind == "st":
            _k, which, g, layer = note
            addrs = k_addr if which == "k" else v_addr
            st.append((row, layer_addr(layer) + addrs[g]))
        else:
            raise AssertionError(f"compiler: unknown annotation {note!r}")

    def col(items: list[tuple[int, ...]], j: int) -> np.ndarray:
        return _idx([it[j] for it in items])

    return PatchPlan(
        ld_idx=col(ld, 0),  # type: ignore[arg-type]
        ld_addr=col(ld, 1),  # type: ignore[arg-type]
        ld_c0=col(ld, 2),  # type: ignore[arg-type]
        ld_end=col(ld, 3),  # type: ignore[arg-type]
        qk_idx=col(qk, 0),  # type: ignore[arg-type]
        qk_chunk=col(qk, 1),  # type: ignore[arg-type]
        pv_idx=col(pv, 0),  # type: ignore[arg-type]
        pv_chunk=col(pv, 1),  # type: ignore[arg-type]
        sm_idx=_idx(sm),
        st_idx=col(st, 0),  # type: ignore[arg-type]
        st_addr=col(st, 1),  # type: ignore[arg-type]
    )


def apply_plan(
    plan: PatchPlan,
    instrs: np.ndarray,
    prior: int,
    new: int,
    *,
    channels: int,
    chunk_tokens: int,
    kv_row_bytes: int,
    query_per_kv: int,
) -> np.ndarray:
    """A copy of ``instrs`` with the context fields of ``prior`` cached and ``new`` new tokens (``instrs`` itself
    when nothing in it depends on the context)."""
    if plan.empty:
        return instrs
    out = instrs.copy()
    decode = new == 1
    from_hbm = prior if decode else prior + new
    n_chunks = max(1, -(-from_hbm // chunk_tokens))  # a pass with nothing cached still has its one empty chunk

    def chunk_rows(i: np.ndarray) -> np.ndarray:
        c0 = i * chunk_tokens
        return np.asarray(np.minimum(c0 + chunk_tokens, from_hbm) - c0, dtype=_I64)

    if len(plan.ld_idx):
        rows = np.minimum(plan.ld_end, from_hbm) - plan.ld_c0
        out[plan.ld_idx, isa.F_ADDR] = plan.ld_addr
        out[plan.ld_idx, isa.F_ROWS] = rows
        out[plan.ld_idx, isa.F_NCH] = np.minimum(channels, rows)
    for idx, chunk, field in ((plan.qk_idx, plan.qk_chunk, isa.F_ROWS), (plan.pv_idx, plan.pv_chunk, isa.F_ROW_BYTES)):
        if len(idx):
            out[idx, field] = chunk_rows(chunk) + ((chunk == n_chunks - 1) if decode else 0)
    if len(plan.sm_idx):
        out[plan.sm_idx, isa.F_ROWS] = new * query_per_kv * (prior + new)
    if len(plan.st_idx):
        out[plan.st_idx, isa.F_ADDR] = plan.st_addr + prior // channels * kv_row_bytes
        out[plan.st_idx, isa.F_CH0] = prior % channels
        if not decode:
            out[plan.st_idx, isa.F_ROWS] = new
            out[plan.st_idx, isa.F_NCH] = min(channels, new)
    return out
