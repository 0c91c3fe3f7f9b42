"""Co-simulation driver: functional tokens, each timed by a timing model at its context length."""
from __future__ import annotations

import dataclasses

import pytest

from fpga.functional import DraftModel, quantize_model
from fpga.functional import cosim
from fpga.functional.weights import SyntheticWeights
from hwmodel.errors import HwmodelError
from hwmodel.specs import library

LLM = dataclasses.replace(library().llm("qwen2.5-0.5b"), name="cosim-test", layers=2, hidden=32, heads=2,
                          kv_heads=1, head_dim=16, intermediate=64, vocab=300)
PARAMS = quantize_model(LLM, SyntheticWeights(LLM, 2))


@dataclasses.dataclass
class _Result:
    cycles: int


class RecordingTiming:
    """A timing model whose time grows with context, recording every query (a test double of the Engine)."""

    name = "recording"

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, int]] = []

    def prefill_s(self, n_tokens: int, ctx: int = 0) -> float:
        self.calls.append(("prefill", n_tokens, ctx))
        return 1e-3 * n_tokens

    def decode_s(self, ctx: int) -> float:
        self.calls.append(("decode", 1, ctx))
        return 1e-3 + 1e-6 * ctx

    def ingest_s(self, n_tokens: int, ctx: int) -> float:
        return n_tokens * self.decode_s(ctx)

    def token(self, ctx: int) -> _Result:
        return _Result(cycles=1000 + ctx)


def model() -> DraftModel:
    return DraftModel(LLM, PARAMS, capacity=64, min_window=64)


def test_cosim_decodes_the_functional_tokens_and_times_each_at_its_context() -> None:
    prompt = [4, 8, 15, 16, 23]
    timing = RecordingTiming()
    seen = []
    res = cosim.run(model(), timing, prompt, 7, on_token=seen.append)
    direct = model()
    direct.prefill(prompt)
    assert res.tokens == [direct.decode() for _ in range(7)]
    assert [r.ctx for r in res.records] == list(range(5, 12))
    assert [r.cycles for r in res.records] == [1000 + c for c in range(5, 12)]
    assert timing.calls[0] == ("prefill", 5, 0)
    assert [c for c in timing.calls[1:]] == [("decode", 1, c) for c in range(5, 12)]
    assert res.prefill_s == pytest.approx(5e-3)
    assert res.decode_total_s == pytest.approx(sum(1e-3 + 1e-6 * c for c in range(5, 12)))
    assert res.total_s == pytest.approx(res.prefill_s + res.decode_total_s)
    assert seen == list(res.records)
    d = res.as_dict()
    assert d["tokens"] == res.tokens and len(d["records"]) == 7


def test_cosim_rejects_a_timing_model_without_the_engine_methods() -> None:
    with pytest.raises(HwmodelError, match="lacks prefill_s"):
        cosim.run(model(), object(), [1, 2], 1)
    with pytest.raises(HwmodelError, match="steps must be >= 0"):
        cosim.run(model(), RecordingTiming(), [1, 2], -1)
