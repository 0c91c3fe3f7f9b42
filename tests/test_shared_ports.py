"""Shared HBM ports (fpga/streaming/ports.py): engines whose ports name the same pseudo-channel contend for it under the
design's arbitration. The fast engine equals the cycle-stepped reference on generated designs with shared channels
(both arbitration policies), sharing only moves time (never bytes), and bad channel lists are one clear line."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from fpga.streaming.design import DesignError, check_structure, load_design
from fpga.streaming.engine import simulate_token, validate_design
from fpga.streaming.placement import design_floor
from fpga.streaming.ports import channel_count, port_channels, shared
from tests.streaming_gen import small_board, small_design, small_llm
from tests.test_streaming_equivalence import assert_drawn_equivalent


def share(design, engine: str, channels, arbitration: str = "round-robin"):  # type: ignore[no-untyped-def]
    """``design`` with ``engine``'s ports moved onto ``channels``."""
    return dataclasses.replace(design.with_engine(engine, channels=tuple(channels)), arbitration=arbitration)


@st.composite
def shared_design(draw, board, llm):  # type: ignore[no-untyped-def]
    d = draw(small_design(board, llm))
    with_ports = [e for e in d.engines if e.ports]
    assume(len(with_ports) >= 2)
    e = draw(st.sampled_from(with_ports))
    total = len(port_channels(d))
    chans = draw(st.permutations(range(total)))[: e.ports]
    d = share(d, e.name, chans, draw(st.sampled_from(["round-robin", "fixed-priority"])))
    assume(shared(d))
    return d


@pytest.mark.slow  # --quick leaves it out (docs/testing.md)
@settings(max_examples=40, deadline=None)
@given(st.data())
def test_fast_engine_equals_reference_with_shared_channels(data: st.DataObject) -> None:
    llm = data.draw(small_llm())
    board = data.draw(small_board())
    assert_drawn_equivalent(data, data.draw(shared_design(board, llm)), board, llm, max_ctx=30)


def test_sharing_moves_time_not_bytes() -> None:
    """draft-u280 with its attention engine on four of the linear engine's channels: the same bytes, fewer
    channels, a lower ports peak, and the K/V reads contend with the weights (slower than with four of its own)."""
    d = load_design("draft-u280")
    s = share(d, "attn", range(4))
    validate_design(s)
    assert channel_count(d) == 32 and channel_count(s) == 28
    a, b = simulate_token(d, 2048), simulate_token(s, 2048)
    assert a.hbm_read_bytes == b.hbm_read_bytes and a.hbm_write_bytes == b.hbm_write_bytes
    assert b.cycles > a.cycles
    assert design_floor(s, 2048).floor_s > design_floor(d, 2048).floor_s
    assert b.seconds >= design_floor(s, 2048).floor_s
    shared_rows = [c for c in b.channels if c.get("shared_with")]
    assert len(shared_rows) == 8 and {c["engine"] for c in shared_rows} == {"linear", "attn"}
    f = simulate_token(share(d, "attn", range(4), "fixed-priority"), 2048)
    assert f.hbm_read_bytes == b.hbm_read_bytes


@pytest.mark.parametrize(
    "channels, why",
    [
        ((0, 1), "lists 2 pseudo-channels for its 4 ports"),
        ((0, 0, 1, 2), "names a pseudo-channel twice"),
        ((0, 1, 2, -3), "must be >= 0"),
    ],
)
def test_bad_channel_lists_are_one_clear_line(channels, why) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(DesignError, match=why):
        check_structure(share(load_design("draft-u280"), "attn", channels))


def test_channels_beyond_the_board_are_refused() -> None:
    with pytest.raises(DesignError, match="exceed the board's 32 pseudo-channels"):
        validate_design(share(load_design("draft-u280"), "attn", (28, 29, 30, 40)))
