"""The linker's memo across contexts (fpga/streaming/ctx_memo.py) never changes a byte: programs compiled one
context after another (each linked from the blocks and class requests a neighbour built) equal each context
compiled alone from cleared caches, every array of the Program, and the fast engine's TokenResult on them too.
Runs cross KV-tiling boundaries (where the blocks change) and contexts where only the writing port, the MAC count
and the ledger change, on generated designs and a LLaMA2-7B-sized one with 4 KB and 16 KB requests."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fpga.streaming import ctx_memo, templates
from fpga.streaming.design import DesignError, load_design
from fpga.streaming.engine import run_program
from fpga.streaming.program import compile_token
from tests.streaming_gen import small_board, small_design, small_llm
from tests.test_compile_exact import program_digest


def _clear_ctx_parts() -> None:
    """Forget what depends on the context (the layer, the linked parts), keep the design's static parts."""
    ctx_memo.clear()
    templates._layer_for.cache_clear()


def _warm_then_cold(
    design: Any, board: Any, llm: Any, ctxs: list[int], lm_head: bool, per_port: bool, full_clear: bool = True
) -> list[str]:
    """Digests of ``ctxs`` compiled in order into warm caches, asserted equal to each compiled cold (every cache
    cleared; ``full_clear=False``: only the context-dependent ones, the design's static parts kept); returns them."""
    templates.clear_caches()
    warm = []
    for c in ctxs:
        try:
            warm.append(program_digest(compile_token(design, board, llm, c, lm_head, per_port)))
        except DesignError as exc:
            warm.append(f"error: {exc}")
    cold = []
    for c in ctxs:
        if full_clear:
            templates.clear_caches()
        else:
            _clear_ctx_parts()
        try:
            cold.append(program_digest(compile_token(design, board, llm, c, lm_head, per_port)))
        except DesignError as exc:
            cold.append(f"error: {exc}")
    templates.clear_caches()
    assert warm == cold
    return warm


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_generated_designs_linked_warm_equal_cold(data: st.DataObject) -> None:
    llm = data.draw(small_llm(max_layers=2))
    board = data.draw(small_board())
    design = data.draw(small_design(board, llm))
    lo = data.draw(st.integers(0, 50))
    ctxs = list(range(lo, lo + 8)) + data.draw(st.lists(st.integers(0, 64), min_size=1, max_size=4))
    _warm_then_cold(design, board, llm, ctxs, data.draw(st.booleans()), data.draw(st.booleans()))


def test_a_shared_channel_design_linked_warm_equals_cold() -> None:
    """Attention's ports share the linear engine's channels: each port's addresses start at its engine's base on
    its channel, so the class requests also depend on which port represents a class."""
    d = load_design("examples/designs/placed-shared-u280.toml")
    llm = dataclasses.replace(d.llm_spec(), layers=2)
    _warm_then_cold(d, d.board_spec(), llm, [30, 31, 32, 33, 34, 7, 63], True, True)


def test_llama_sized_tokens_linked_warm_equal_cold() -> None:
    """LLaMA2-7B W4 (32 layers, 32 x 512-bit ports; the benchmark's design) across ctx 1016-1033 (tiling changes
    at 1023, 1024 and 1025) and random contexts, with 4 KB and 16 KB requests; the fast engine's results on the
    warm and the cold program of three contexts are equal."""
    base = load_design("flexllm-u280-mem-opt-new")
    base = dataclasses.replace(base, name="llama2-7b-w4-u280", llm="llama2-7b", max_ctx=2048)
    rnd = random.Random(7)
    ctxs = list(range(1016, 1034)) + [rnd.randrange(0, 2049) for _ in range(4)]
    for burst in (4096, 16384):
        d = base.with_engine("linear", ports=32, burst_bytes=burst)
        board, llm = d.board_spec(), d.llm_spec()
        digests = _warm_then_cold(d, board, llm, ctxs, True, False, full_clear=False)
        assert len(set(digests[:18])) > 2  # the run crosses tiling boundaries: the memo must not hand one over
        for c in (1022, 1023, 1025):
            compile_token(d, board, llm, c - 1)  # a neighbour first: this context is linked from its parts
            warm = run_program(d, board, llm, compile_token(d, board, llm, c), c, True)
            _clear_ctx_parts()
            assert warm == run_program(d, board, llm, compile_token(d, board, llm, c), c, True)
