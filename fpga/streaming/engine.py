"""Fully-streaming batch-1 decode accelerator: cycle-level simulation of one token (fast, event-driven Numba).

The model (docs/streaming.md): a design's engines run the blocks of the token program (:mod:`fpga.streaming.program`) in
order. A block starts at the first kernel cycle at which

* the engine has finished issuing its previous block (and, for a *drain* block, that block left the pipeline);
* its input activations are visible: the producing block finished ``pipeline latency`` cycles after its issue,
  plus the FIFO latency (inter-engine) or one cycle (same engine);
* every HBM read it consumes has landed in its port's buffer;
* its output FIFO has room: the block ``fifo_depth`` entries earlier has been read by the consumer.

Ports issue their requests in program order, one per kernel cycle at most, as soon as a buffer slot is free (slots
free when the consuming block's issue ends), fewer than ``max_outstanding`` reads are in flight, and (writes) the
data exists. Requests cross to the AXI clock domain, are served by their channel (:mod:`fpga.hbm.channel`), and cross back.

Ports whose engines name the same pseudo-channel share it (:mod:`fpga.streaming.ports`): the channel serves their requests in
order of arrival, ties broken by the design's arbitration.

This engine computes those start/issue times as max-plus recurrences (its Numba kernel: :mod:`fpga.streaming.kernel`, scheduled by
:mod:`fpga.streaming.schedule`),
visiting each block and each request once (AXI3 bursts, row changes and refresh windows inside a request are
computed in closed form), and simulates one port per class of identical ports (same requests, same consumers, hence
the same trajectory). The cycle-stepped reference (:mod:`fpga.streaming.reference`) steps every kernel and AXI cycle
of every port; the test suite proves both give identical block start cycles, request times and counters.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from fpga.hbm import channel as hbm
from fpga.streaming.checks import check_design_clock, check_hbm_capacity, validate_design
from fpga.streaming.design import ALL_OPS, DesignError, StreamingDesign, design_names, load_design
from fpga.streaming.kernel import RT_END, RT_FIRST, RT_ISSUE, RT_LAND
from fpga.streaming.program import compile_token
from fpga.streaming.program_format import Program
from fpga.streaming.schedule import _simulate
from fpga.streaming.token_result import (  # noqa: F401  (re-exported: callers import them from here)
    ENGINE_COUNTERS,
    TokenResult,
    _channels,
    _engine_table,
    _op_tables,
    build_result,
    class_channels,
)
from hwmodel.allocator import keep_freed_memory
from hwmodel.engine import Capability, Phase
from hwmodel.specs import BoardSpec, LlmSpec

__all__ = [
    "StreamingDesign",
    "TokenResult",
    "StreamingEngine",
    "load_design",
    "simulate_token",
    "validate_design",
    "check_design_clock",
    "check_hbm_capacity",
    "design_names",
    "ENGINE_COUNTERS",
]


class DeadlockError(DesignError):
    """The design's FIFOs and engine order can never let the token finish."""


def _deadlock(design: StreamingDesign, ctx: int, prog: Program, start: np.ndarray) -> DeadlockError:
    """Name the blocked engines: each one's next block, and what it waits for."""
    waits = []
    for e, eng in enumerate(design.engines):
        blocks = prog.e_list[prog.e_ptr[e] : prog.e_ptr[e + 1]]
        pending = blocks[start[blocks] < 0]
        if not len(pending):
            continue
        b = int(pending[0])
        d = int(prog.t_dep[b, 2])
        why = ""
        if d >= 0 and start[d] < 0:
            other = design.engines[int(prog.t_eng[d])].name
            why = f" for FIFO space towards {ALL_OPS[prog.t_op[d]]} on '{other}'"
        waits.append(f"'{eng.name}' at {ALL_OPS[prog.t_op[b]]} (layer {prog.t_layer[b]}){why}")
    return DeadlockError(
        f"design '{design.name}' deadlocks at ctx {ctx}: " + "; ".join(waits) + f". A temporal engine cannot run "
        f"the consumer while it still produces into a full FIFO: raise fifo_depth (now {design.fifo_depth}) or "
        f"map the operators differently"
    )


# ============================================================================================== API
def simulate_token(
    design: StreamingDesign | str | Path, ctx: int, clock_hz: float | None = None, with_lm_head: bool = True
) -> TokenResult:
    """Simulate decoding one token after ``ctx`` cached tokens (fast engine). ``clock_hz`` overrides the design's
    kernel clock; ``with_lm_head=False`` simulates an ingested token (LM head and sampler skipped)."""
    if not isinstance(design, StreamingDesign):
        design = load_design(design)
    if clock_hz is not None:
        design = dataclasses.replace(design, clock_hz=float(clock_hz))
    keep_freed_memory()
    board, llm = design.board_spec(), design.llm_spec()
    prog = compile_token(design, board, llm, ctx, with_lm_head)
    return run_program(design, board, llm, prog, ctx, with_lm_head)


def run_program(
    design: StreamingDesign, board: BoardSpec, llm: LlmSpec, prog: Program, ctx: int, with_lm_head: bool
) -> TokenResult:
    if design.units:  # per-unit and per-link results (fpga/streaming/units_result.py)
        from fpga.streaming.units_result import run_unit_program

        return run_unit_program(design, board, llm, prog, ctx, with_lm_head)
    return kernel_result(design, design, board, llm, prog, ctx, with_lm_head)[0]


def kernel_result(
    design: StreamingDesign,
    shown: StreamingDesign,
    board: BoardSpec,
    llm: LlmSpec,
    prog: Program,
    ctx: int,
    with_lm_head: bool,
    deadlock: Callable[[StreamingDesign, int, Any, np.ndarray], Exception] | None = None,
) -> tuple[TokenResult, np.ndarray, int]:
    """Run the fast engine on ``prog`` and build the token's result with the engines of ``shown`` (``design`` itself,
    or a multi-unit design's engines flattened, fpga/streaming/units_result.py); a deadlock raises what
    ``deadlock`` (default: the one-unit message) makes of it. Returns the result, the per-engine counters and the
    token's cycles."""
    p = hbm.hbm_params(board, design.clock_hz, hbm.token_refresh_phase(board, ctx))
    status, total, start, cnt, _i, _l, _f, _e, st, _sweeps = run_kernel(p, prog)
    if status:
        raise (deadlock or _deadlock)(design, ctx, prog, start)
    seconds = total / design.clock_hz
    channels = _channels(shown, board, prog, st, seconds)
    res = build_result(shown, board, llm, prog, ctx, with_lm_head, design.clock_hz, total, start, cnt, channels)
    return res, cnt, int(total)


def run_kernel(p: np.ndarray, prog: Program) -> tuple[Any, ...]:
    """The fast engine on a compiled program: (status, cycles, block starts, engine counters, request issue,
    landing, first-data and end cycles, channel states — per port class —, scheduling sweeps or queue visits)."""
    g_port_bytes = prog.port_bytes[prog.g_port] if prog.n_groups else np.zeros(0, np.int64)
    g_chan, c_ptr, c_list = class_channels(prog)
    status, total, start, cnt, rt, st, sweeps = _simulate(
        p,
        prog.t_eng,
        prog.t_cyc,
        prog.t_drain,
        prog.t_dep,
        prog.t_off,
        prog.e_ptr,
        prog.e_list,
        prog.e_lat,
        prog.t_need_group,
        prog.g_ptr,
        prog.port_eng[prog.g_port],
        g_port_bytes,
        prog.r_table,
        prog.final_block,
        g_chan,
        c_ptr,
        c_list,
        prog.arbitration,
    )
    # per request: issue, landing, first-data and end cycles (views, not copies: a token's callers rarely read them)
    return status, total, start, cnt, rt[:, RT_ISSUE], rt[:, RT_LAND], rt[:, RT_FIRST], rt[:, RT_END], st, sweeps


class StreamingEngine:
    """hwmodel.engine.Engine for a streaming design: per-token latency memoized by context length.

    * ``decode_s(ctx)``: one token (LM head and argmax sampler included).
    * ``ingest_s(n, ctx)``: ``n`` tokens arriving from elsewhere (shadow synchronisation): forward passes whose
      logits are discarded, so the LM head and sampler are skipped; token i sees ``ctx + i`` cached tokens.
    * ``prefill_s(n, ctx)``: a local re-prefill. The streaming design has no batched prefill datapath: it re-runs
      the decode pipeline token by token (``n - 1`` ingested tokens, then one decoded token for the logits of the
      last), which is why the system avoids re-prefill on the FPGA.
    * ``power_w(phase)``: from :mod:`fpga.streaming.power` (static + dynamic at this design's activity).
    """

    CAPABILITIES = frozenset(
        {
            Capability.DECODER,
            Capability.PREFILLER,
            Capability.INGESTER,
            Capability.POWERED,
            Capability.CONTEXT_BOUND,
            Capability.OPERATOR_TIMES,
        }
    )

    def __init__(
        self, design: StreamingDesign | str | Path, clock_hz: float | None = None, validate: bool = True
    ) -> None:
        if not isinstance(design, StreamingDesign):
            design = load_design(design)
        if clock_hz is not None:
            design = dataclasses.replace(design, clock_hz=float(clock_hz))
        keep_freed_memory()  # a token allocates ~15 MB of temporaries: reuse freed memory (no page faults)
        self.design = design
        self.board = design.board_spec()
        self.llm = design.llm_spec()
        if validate:
            validate_design(design, self.board, self.llm)
        else:
            check_design_clock(design, self.board)
        self.name = f"fpga:{design.name}@{design.clock_hz / 1e6:g}MHz"
        self._p = hbm.hbm_params(self.board, design.clock_hz)
        self._memo: dict[tuple[int, bool], TokenResult] = {}

    @property
    def clock_hz(self) -> float:
        return self.design.clock_hz

    def token_identity(self) -> StreamingDesign:
        """What a token's result is a pure function of, with its context: the design (its clock included; the board
        and LLM specs are looked up by the names it holds). Engines of equal designs simulate identical tokens."""
        return self.design

    def token(self, ctx: int, with_lm_head: bool = True) -> TokenResult:
        key = (int(ctx), with_lm_head)
        res = self._memo.get(key)
        if res is None:
            prog = compile_token(self.design, self.board, self.llm, int(ctx), with_lm_head)
            res = run_program(self.design, self.board, self.llm, prog, int(ctx), with_lm_head)
            self._memo[key] = res
        return res

    @property
    def max_ctx(self) -> int:
        """The KV-cache capacity the design reserves (tokens)."""
        return self.design.max_ctx

    @property
    def host_link_bytes(self) -> dict[str, int]:
        """Bytes per token the design's placement sends over the host link (``to_device_bytes``, ``to_host_bytes``;
        fpga/streaming/placement.py): what a system times with its link model around the FPGA's token."""
        from fpga.streaming.placement import host_link_bytes

        return host_link_bytes(self.design, self.llm)

    def decode_s(self, ctx: int) -> float:
        return self.token(ctx).seconds

    def decode_steps_s(self, ctx0: int, n_steps: int) -> np.ndarray:
        """Times of ``n_steps`` consecutive decoded tokens at contexts ``ctx0 .. ctx0 + n_steps - 1``."""
        return np.array([self.token(ctx0 + i).seconds for i in range(n_steps)], dtype=float)

    def ingest_s(self, n_tokens: int, ctx: int) -> float:
        return sum(self.token(ctx + i, with_lm_head=False).seconds for i in range(n_tokens))

    def prefill_s(self, n_tokens: int, ctx: int = 0) -> float:
        if n_tokens < 1:
            raise DesignError(f"prefill needs at least one token, got {n_tokens}")
        return self.ingest_s(n_tokens - 1, ctx) + self.decode_s(ctx + n_tokens - 1)

    def layer_operator_shares_s(self, ctx: int) -> dict[str, float]:
        """Seconds per layer of each streaming operator in one ingested token at ``ctx`` (logits discarded).

        Operators of a dataflow design overlap, so their spans add up to more than the token: each operator gets
        the token's time in proportion to its span (first start to last result, summed over layers), which makes
        the operators' times add up to the token exactly. Layer operators are divided by the layer count; the
        embedding is reported once."""
        tok = self.token(ctx, with_lm_head=False)
        spans = tok.op_span_cycles
        scale = tok.seconds / max(1, sum(spans.values()))
        layers = self.llm.layers
        return {op: span * scale / (1 if op in _ONCE_PER_PASS else layers) for op, span in spans.items()}

    def operator_times_s(self, n_tokens: int, ctx: int) -> dict[str, float]:
        """Canonical operators' seconds per layer for ``n_tokens`` ingested one after another from ``ctx``
        (:mod:`hwmodel.interop.vidur`). The design has no batched datapath: a pass of ``n`` tokens is ``n``
        tokens. Every operator but attention takes its share of a token at context 0
        (:meth:`layer_operator_shares_s`), the same at every context; attention takes the rest of the token at
        its context, so the operators of a token at any context add up to that token exactly. Over ``n`` tokens
        attention is integrated by the trapezoid rule between the first and the last (its per-token time is
        affine in the context; ``tests/test_interop.py`` bounds the error). The KV write happens inside the
        attention engine (``kv_write`` 0)."""
        if n_tokens < 1 or ctx < 0:
            raise DesignError(f"operator times need n_tokens >= 1 and ctx >= 0, got {n_tokens}, {ctx}")
        base = self.layer_operator_shares_s(0)
        layers = self.llm.layers
        out = dict.fromkeys(
            (
                "input_norm",
                "qkv_proj",
                "rope",
                "kv_write",
                "attention",
                "o_proj",
                "residual_add",
                "post_norm",
                "up_proj",
                "act",
                "down_proj",
                "embed",
            ),
            0.0,
        )
        fixed_once = sum(v for op, v in base.items() if op in _ONCE_PER_PASS)
        fixed_layer = 0.0
        for op, sec in base.items():
            canon = _CANONICAL_OPERATOR.get(op)
            if canon is None or canon == "attention":
                continue
            out[canon] += n_tokens * sec
            if op not in _ONCE_PER_PASS:
                fixed_layer += sec

        def attention(c: int) -> float:
            return (self.token(c, with_lm_head=False).seconds - fixed_once) / layers - fixed_layer

        a0 = attention(ctx)
        a1 = attention(ctx + n_tokens - 1) if n_tokens > 1 else a0
        out["attention"] = n_tokens * (a0 + a1) / 2.0
        return out

    def power_w(self, phase: Phase) -> float:
        from fpga.streaming.power import phase_power_w

        return phase_power_w(self, phase)

    def energy_per_token_j(self, ctx: int) -> float:
        return self.power_w(Phase.DECODE) * self.decode_s(ctx)

    @property
    def memo_size(self) -> int:
        return len(self._memo)


_ONCE_PER_PASS = frozenset({"embed", "final_norm", "lm_head", "argmax"})
#: streaming operator -> canonical operator (hwmodel.interop.vidur); the head operators have none
_CANONICAL_OPERATOR = {
    "embed": "embed",
    "attn_norm": "input_norm",
    "qkv": "qkv_proj",
    "rope": "rope",
    "attention": "attention",
    "o_proj": "o_proj",
    "attn_add": "residual_add",
    "ffn_norm": "post_norm",
    "gate_up": "up_proj",
    "silu_mul": "act",
    "down": "down_proj",
    "ffn_add": "residual_add",
}
