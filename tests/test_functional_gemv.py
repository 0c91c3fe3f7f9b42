"""The host int8 GEMV of the LM head (fpga/functional/gemv.py) against plain numpy, and the draft model's decode with
the host head against the all-XLA head: the same int32 accumulators, the same tokens."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fpga.functional import DraftModel, quantize_model
from fpga.functional.gemv import gemv_i8, gemv_i8_reference
from fpga.functional.weights import SyntheticWeights
from hwmodel.specs import library


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 300), k=st.integers(1, 200), seed=st.integers(0, 2**16), extreme=st.booleans())
def test_gemv_equals_the_numpy_product(n: int, k: int, seed: int, extreme: bool) -> None:
    rng = np.random.default_rng(seed)
    if extreme:  # every product at its largest magnitude: the int32 sum must still be exact
        w = np.full((n, k), -128, np.int8)
        x = rng.choice(np.array([-128, 127], np.int8), k)
    else:
        w = rng.integers(-128, 128, (n, k), dtype=np.int8)
        x = rng.integers(-128, 128, k, dtype=np.int8)
    assert np.array_equal(gemv_i8(w, x), gemv_i8_reference(w, x))


def test_gemv_at_the_largest_inner_dimension_and_bad_operands() -> None:
    k = 4864  # Qwen2.5-0.5B's intermediate size, the widest inner dimension of the model
    w = np.full((3, k), -128, np.int8)
    x = np.full(k, -128, np.int8)
    assert gemv_i8(w, x).tolist() == [k * 128 * 128] * 3
    with pytest.raises(ValueError, match="int8"):
        gemv_i8(w.astype(np.int16), x)
    with pytest.raises(ValueError, match=r"\(K,\)"):
        gemv_i8(w, x[:-1])


LLM = dataclasses.replace(
    library().llm("qwen2.5-0.5b"),
    name="gemv-test",
    layers=2,
    hidden=64,
    heads=4,
    kv_heads=2,
    head_dim=16,
    intermediate=128,
    vocab=700,
)


def test_decode_with_the_host_head_is_bit_identical_to_the_xla_head() -> None:
    params = quantize_model(LLM, SyntheticWeights(LLM, 4))
    a, b = (DraftModel(LLM, params, capacity=64, prefill_chunk=8, min_window=64, host_head=h) for h in (True, False))
    prompt = np.random.default_rng(1).integers(0, LLM.vocab, 11).tolist()
    for m in (a, b):
        m.prefill(prompt)
    assert a.next_token() == b.next_token()
    assert [a.decode() for _ in range(12)] == [b.decode() for _ in range(12)]
    assert a.next_token() == b.next_token()
    head = a.trace_forward(a.tokens[-1:], start=a.ahead - 1)["acc_lm"][0]
    assert np.array_equal(a._head_acc(a.ahead - 1), head)  # the XLA LM head's int32 accumulators, bit for bit
