"""A multi-unit token's result: per-unit and per-link cycles and bytes beside the usual token result, and the board
checks of each unit (:mod:`fpga.streaming.units` builds the program)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from fpga.streaming.design import ALL_OPS, DesignError, StreamingDesign
from fpga.streaming.engine import (
    ENGINE_COUNTERS,
    DeadlockError,
    TokenResult,
    check_design_clock,
    check_hbm_capacity,
    kernel_result,
)
from fpga.streaming.ports import channel_count, port_problems
from fpga.streaming.units import UnitProgram, resolve_units, unit_design, unit_llm
from hwmodel.specs import BoardSpec, LlmSpec


@dataclasses.dataclass(frozen=True)
class UnitTokenResult(TokenResult):
    """A token of a multi-unit design: :class:`TokenResult` (engines include one per link hop) plus

    * ``units``: per unit, its engines, the cycle at which its last engine finished issuing (``finish_cycles``) and
      the counters of its busiest engine (``bottleneck``: busy, drain, stall_in — waiting on inputs, exchanged
      chunks included —, stall_mem, stall_out, done; they add up to the token);
    * ``links``: per directed hop, its link and kind, the bytes and chunks it carried, its cycles (busy =
      serialising, stall_in = waiting for a chunk, stall_out = waiting for room at the receiver, done) and its
      utilization (busy over the token);
    * ``exchange_bytes``: bytes of every exchanged message by kind (o_proj and down partial sums, embed, stage),
      counted once per message whatever its hops."""

    split: str = ""
    units: tuple[Mapping[str, Any], ...] = ()
    links: tuple[Mapping[str, Any], ...] = ()
    exchange_bytes: Mapping[str, int] = dataclasses.field(default_factory=dict)


def flat_design(design: StreamingDesign, prog: UnitProgram) -> StreamingDesign:
    """A one-unit view of the program's engines (units' engines, then link hops), for the shared result tables."""
    return dataclasses.replace(design, engines=prog.engine_specs, units=(), links=(), split="")


def run_unit_program(
    design: StreamingDesign, board: BoardSpec, llm: LlmSpec, prog: UnitProgram, ctx: int, with_lm_head: bool
) -> UnitTokenResult:
    base, cnt, total = kernel_result(design, flat_design(design, prog), board, llm, prog, ctx, with_lm_head, _deadlock)
    fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(TokenResult)}
    return UnitTokenResult(
        **fields,
        split=design.split,
        units=unit_rows(design, prog, cnt, total),
        links=link_rows(prog, cnt, total),
        exchange_bytes=dict(prog.exchange_bytes),
    )


def unit_rows(design: StreamingDesign, prog: UnitProgram, cnt: np.ndarray, total: int) -> tuple[dict[str, Any], ...]:
    rows = []
    for u, unit in enumerate(design.units):
        idx = [i for i, x in enumerate(prog.engine_unit) if x == u]
        top = max(idx, key=lambda i: (int(cnt[i, 0]), -i))
        rows.append(
            {
                "unit": unit.name,
                "engines": [prog.engine_specs[i].name for i in idx],
                "finish_cycles": max(total - int(cnt[i, ENGINE_COUNTERS.index("done")]) for i in idx),
                "bottleneck": prog.engine_specs[top].name,
                **{f"{k}_cycles": int(cnt[top, j]) for j, k in enumerate(ENGINE_COUNTERS)},
            }
        )
    return tuple(rows)


def link_rows(prog: UnitProgram, cnt: np.ndarray, total: int) -> tuple[dict[str, Any], ...]:
    rows = []
    first = len(prog.engine_unit) - len(prog.hop_info)
    for h, info in enumerate(prog.hop_info):
        c = {f"{k}_cycles": int(cnt[first + h, j]) for j, k in enumerate(ENGINE_COUNTERS)}
        rows.append({**info, **c, "utilization": c["busy_cycles"] / total if total else 0.0})
    return tuple(rows)


def _deadlock(design: StreamingDesign, ctx: int, prog: UnitProgram, start: np.ndarray) -> DeadlockError:
    waits = []
    for e, spec in enumerate(prog.engine_specs):
        blocks = prog.e_list[prog.e_ptr[e] : prog.e_ptr[e + 1]]
        pending = blocks[start[blocks] < 0]
        if len(pending):
            b = int(pending[0])
            what = ALL_OPS[prog.t_op[b]] if prog.t_op[b] < len(ALL_OPS) else "a link chunk"
            waits.append(f"'{spec.name}' at {what} (layer {prog.t_layer[b]})")
    return DeadlockError(
        f"design '{design.name}' deadlocks at ctx {ctx}: " + "; ".join(waits) + ". Raise fifo_depth (activation "
        f"FIFOs, now {design.fifo_depth}) or the links' fifo_depth, or map the operators differently"
    )


def validate_units(design: StreamingDesign, board: BoardSpec, llm: LlmSpec) -> None:
    """The board checks of a multi-unit design: its pseudo-channels on the board, the clock, and each unit's
    weights and KV cache on its own channels (resources are checked over all engines)."""
    from fpga.streaming.resources import check_fits

    d = resolve_units(design)
    if channel_count(d) > board.hbm.axi_ports:
        raise DesignError(
            f"design '{d.name}' uses {channel_count(d)} HBM pseudo-channels but board '{board.name}' has "
            f"{board.hbm.axi_ports}"
        )
    for problem in port_problems(d, board.hbm.axi_ports):
        raise DesignError(f"design '{d.name}': {problem}")
    check_design_clock(d, board)
    for i in range(len(d.units)):
        check_hbm_capacity(unit_design(d, i), board, unit_llm(d, llm, i))
    check_fits(d, board, llm)
