"""Physical floors: the reference numbers of shared/research/hardware.md s5, and their monotonicity."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hwmodel.bounds import bounds, decode_bytes, prefill_ops
from hwmodel.errors import HwmodelError
from hwmodel.specs import library


def test_qwen_0p5b_w8_on_u280_is_about_1p07_ms() -> None:
    lib = library()
    b = bounds(lib.llm("qwen2.5-0.5b"), lib.board("u280"), 8, 8, 0)
    assert b.decode_floor_peak_s * 1e3 == pytest.approx(1.07, abs=0.01)
    assert b.decode_floor_measured_s * 1e3 == pytest.approx(1.16, abs=0.01)
    assert b.fits


def test_llama2_7b_w4_on_u280_at_1k_is_about_7p8_ms() -> None:
    lib = library()
    b = bounds(lib.llm("llama2-7b"), lib.board("u280"), 4, 8, 1024)
    assert b.decode_floor_peak_s * 1e3 == pytest.approx(7.77, abs=0.05)


def test_fp16_llama2_7b_does_not_fit_u280_hbm_but_fits_v80() -> None:
    lib = library()
    assert not bounds(lib.llm("llama2-7b"), lib.board("u280"), 16, 16, 1024).fits
    assert bounds(lib.llm("llama2-7b"), lib.board("v80"), 16, 16, 1024).fits


@given(
    llm=st.sampled_from(library().names("llm")),
    wb=st.sampled_from([4, 8, 16]),
    kb=st.sampled_from([4, 8, 16]),
    ctx=st.integers(0, 32768),
    extra=st.integers(1, 4096),
)
def test_more_context_or_bits_never_reads_fewer_bytes(llm: str, wb: int, kb: int, ctx: int, extra: int) -> None:
    spec = library().llm(llm)
    base = decode_bytes(spec, wb, kb, ctx).total_bytes
    assert decode_bytes(spec, wb, kb, ctx + extra).total_bytes > base
    if wb < 16:
        assert decode_bytes(spec, 16, kb, ctx).total_bytes > base


@given(llm=st.sampled_from(library().names("llm")), n=st.integers(1, 8192), ctx=st.integers(0, 8192))
def test_prefill_ops_grow_with_tokens_and_context(llm: str, n: int, ctx: int) -> None:
    spec = library().llm(llm)
    assert prefill_ops(spec, n + 1, ctx) > prefill_ops(spec, n, ctx)
    assert prefill_ops(spec, n, ctx + 1) > prefill_ops(spec, n, ctx)


def test_bad_bits_and_context_are_refused() -> None:
    spec = library().llm("qwen2.5-0.5b")
    with pytest.raises(HwmodelError, match="weight bits"):
        decode_bytes(spec, 3, 8, 0)
    with pytest.raises(HwmodelError, match="context length"):
        decode_bytes(spec, 8, 8, -1)
