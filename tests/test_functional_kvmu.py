"""The draft model's KV cache under KVMU control: speculation, rollback, shadow synchronization (ingest), accept and
backtrack leave the cache bit-identical to a fresh prefill of the validated context, and the next tokens identical.
Also: block size and padding never change a bit; misuse gives one-line errors."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fpga.functional import DraftModel, DraftModelError, quantize_model
from fpga.functional.weights import SyntheticWeights
from fpga.kvmu.model import CommandRefused, Kvmu
from hwmodel.errors import HwmodelError
from hwmodel.specs import library

LLM = dataclasses.replace(
    library().llm("qwen2.5-0.5b"),
    name="kvmu-test",
    layers=2,
    hidden=64,
    heads=4,
    kv_heads=2,
    head_dim=16,
    intermediate=128,
    vocab=500,
)
CAP = 128
PARAMS = quantize_model(LLM, SyntheticWeights(LLM, 3))


def fresh(**kw: object) -> DraftModel:
    """Same weights, same static shapes (so every model shares one set of compiled functions)."""
    args = dict(capacity=CAP, decode_rows=2, prefill_chunk=8, min_window=CAP)
    args.update(kw)
    return DraftModel(LLM, PARAMS, **args)  # type: ignore[arg-type]


def assert_same_cache(a: DraftModel, b: DraftModel, end: int) -> None:
    ka, kb = a.kv_state(end), b.kv_state(end)
    assert ka.keys() == kb.keys()
    for name in ka:
        assert np.array_equal(ka[name], kb[name]), f"KV buffer '{name}' differs in positions [0, {end})"


def continue_greedy(m: DraftModel, n: int) -> list[int]:
    return [m.decode() for _ in range(n)]


tokens = st.lists(st.integers(0, LLM.vocab - 1), min_size=1, max_size=12)


@settings(max_examples=12)
@given(prompt=tokens, k=st.integers(1, 10), ahead=st.integers(0, 6), target=tokens)
def test_rollback_then_ingest_equals_fresh_prefill(prompt: list[int], k: int, ahead: int, target: list[int]) -> None:
    """Draft a step of k tokens (and some step-ahead tokens), the PRM rejects it: rollback, then the target's tokens
    stream in. The cache over the validated context equals a fresh prefill of prompt + target, bit for bit."""
    m = fresh()
    m.prefill(prompt)
    continue_greedy(m, k)
    m.mark()
    continue_greedy(m, ahead)  # step-ahead speculation past the step under verification
    assert (m.valid, m.curr, m.ahead) == (len(prompt), len(prompt) + k, len(prompt) + k + ahead)
    m.rollback()
    assert m.ahead == len(prompt)
    m.ingest(target)
    ref = fresh()
    ref.prefill(prompt + target)
    n = len(prompt) + len(target)
    assert (m.valid, m.curr, m.ahead) == (n, n, n)
    assert_same_cache(m, ref, n)
    assert m.tokens.tolist() == ref.tokens.tolist() == prompt + target
    assert continue_greedy(m, 4) == continue_greedy(ref, 4)
    assert_same_cache(m, ref, n + 4)


@settings(max_examples=8)
@given(prompt=tokens, k1=st.integers(1, 8), k2=st.integers(1, 8))
def test_accept_keeps_drafted_kv_identical_to_a_prefill_of_the_same_tokens(prompt: list[int], k1: int, k2: int) -> None:
    """Accepted speculation is never recomputed: the KV written token by token while drafting equals the KV a
    block prefill of the same tokens writes."""
    m = fresh()
    m.prefill(prompt)
    continue_greedy(m, k1)
    m.mark()
    continue_greedy(m, k2)
    m.accept()
    assert (m.valid, m.curr, m.ahead) == (len(prompt) + k1, len(prompt) + k1 + k2, len(prompt) + k1 + k2)
    ref = fresh()
    ref.prefill(m.tokens.tolist())
    assert_same_cache(m, ref, m.ahead)
    assert continue_greedy(m, 3) == continue_greedy(ref, 3)


@settings(max_examples=6)
@given(prompt=tokens, step=st.integers(1, 6), back=st.integers(0, 6), alt=tokens)
def test_backtrack_with_init_then_ingest(prompt: list[int], step: int, back: int, alt: list[int]) -> None:
    """A backtrack (KVMU init to an earlier boundary) followed by the target's alternative equals a fresh prefill."""
    m = fresh()
    m.prefill(prompt)
    continue_greedy(m, step)
    m.mark()
    m.rollback()
    keep = max(1, len(prompt) - back)
    m.init(keep)
    m.ingest(alt)
    ref = fresh()
    ref.prefill(prompt[:keep] + alt)
    assert_same_cache(m, ref, keep + len(alt))
    assert continue_greedy(m, 3) == continue_greedy(ref, 3)


def test_block_size_padding_and_window_change_nothing() -> None:
    """Decode rows 2/1/3, prefill blocks of 8/5/23 rows (padded last blocks), attention windows of 128/64/32."""
    prompt = list(range(20, 43))
    runs = []
    for rows, chunk, window in ((2, 8, CAP), (1, 5, 64), (3, 23, 32)):
        m = fresh(decode_rows=rows, prefill_chunk=chunk, min_window=window)
        m.prefill(prompt)
        runs.append((m, continue_greedy(m, 8)))
    (a, ta), *others = runs
    for b, tb in others:
        assert ta == tb
        assert_same_cache(a, b, a.ahead)


def test_next_token_and_logits_do_not_change_state() -> None:
    m = fresh()
    m.prefill([5, 6, 7])
    before = m.kv_state()
    nxt = m.next_token()
    lg = m.logits(2)
    assert int(np.argmax(lg)) == nxt
    assert np.array_equal(m.logits([0, 1, 2])[2], lg)
    after = m.kv_state()
    assert all(np.array_equal(before[k], after[k]) for k in before)
    assert m.decode() == nxt


def test_decode_after_rollback_resumes_from_the_last_valid_token() -> None:
    m = fresh()
    m.prefill([9, 8, 7, 6])
    first = continue_greedy(m, 5)
    m.mark()
    m.rollback()
    assert continue_greedy(m, 5) == first  # same context, same greedy continuation; no recompute needed


def test_the_model_drives_its_kvmu() -> None:
    kvmu = Kvmu(CAP, record=True)
    m = fresh(kvmu=kvmu)
    m.prefill([1, 2, 3])
    m.decode()
    m.decode()
    m.mark()
    m.rollback()
    m.ingest([4])
    ops = [c.op.name.lower() for c in kvmu.history]
    assert ops == ["init", "ingest", "speculate", "speculate", "mark", "rollback", "ingest"]
    assert kvmu.memory.writes[:4].tolist() == [1, 1, 1, 2]  # position 3: drafted, rolled back, rewritten


def test_errors_are_one_line_and_change_nothing() -> None:
    m = fresh()
    with pytest.raises(DraftModelError, match="prefill first"):
        m.decode()
    with pytest.raises(DraftModelError, match="outside the vocabulary"):
        m.prefill([1, LLM.vocab])
    with pytest.raises(DraftModelError, match="non-empty 1-D sequence of integers"):
        m.prefill([])
    with pytest.raises(DraftModelError, match="exceeds the KV capacity"):
        m.prefill([1] * (CAP + 1))
    m.prefill([1, 2])
    m.ingest([3])  # still in init mode: more target tokens may stream in
    m.decode()
    before = (m.valid, m.curr, m.ahead, m.kv_state())
    with pytest.raises(CommandRefused, match="ingest"):
        m.ingest([4])  # speculate mode: the input mux does not select PCIe
    with pytest.raises(CommandRefused):
        m.accept()  # nothing under verification
    after = (m.valid, m.curr, m.ahead, m.kv_state())
    assert before[:3] == after[:3] and all(np.array_equal(before[3][k], after[3][k]) for k in before[3])
    with pytest.raises(DraftModelError, match="logits need positions"):
        m.logits(10)
    with pytest.raises(HwmodelError, match="KV capacity must be"):
        DraftModel(LLM, PARAMS, capacity=0)
    with pytest.raises(HwmodelError, match="KVMU's capacity"):
        DraftModel(LLM, PARAMS, capacity=CAP, kvmu=Kvmu(CAP + 1))
    for exc in (DraftModelError, CommandRefused):
        assert issubclass(exc, HwmodelError)
