"""The prediction band of a multi-unit design varies its links too (hwmodel/studies/sensitivity.py, issue 33 item 6):
which link fields count as guesses, their ranges, that a varied link reaches the simulated program, and the per-field
rows and band on a latency function whose answer is known."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from fpga.streaming.design import load_design
from fpga.streaming.program import compile_token
from hwmodel import specs
from hwmodel.studies.sensitivity import check_fields, is_estimate, knobs, sensitivity

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "designs" / "two-unit-ring-u280.toml"


def test_link_fields_are_guesses_with_their_ranges() -> None:
    d = load_design(EXAMPLE)
    ks = {k.key: k for k in knobs(d)}
    # the example tags width, FIFO depth and latency [estimate] and leaves the link clock at its default (0 = the
    # kernel clock, varied around it)
    assert ks["links[ring].width_bits"].status == "estimate"
    assert (ks["links[ring].width_bits"].low, ks["links[ring].width_bits"].high) == (256, 1024)
    assert (ks["links[ring].fifo_depth"].low, ks["links[ring].fifo_depth"].high) == (8, 32)
    assert (ks["links[ring].latency_cycles"].low, ks["links[ring].latency_cycles"].high) == (4, 16)
    clk = ks["links[ring].clock_hz"]
    assert clk.status == "default" and (clk.value, clk.low, clk.high) == (
        round(d.clock_hz),
        *(round(d.clock_hz * f) for f in (0.5, 2)),
    )
    assert check_fields(["width_bits", "clock_hz", "latency_cycles"]) == ["width_bits", "clock_hz", "latency_cycles"]
    assert set(k.key for k in knobs(d, ["width_bits"])) == {"links[ring].width_bits"}


def test_a_varied_link_reaches_the_program() -> None:
    d = load_design(EXAMPLE)
    llm = dataclasses.replace(d.llm_spec(), layers=1)
    board = d.board_spec()
    k = {k.key: k for k in knobs(d)}["links[ring].width_bits"]
    narrow, wide = (compile_token(k.apply(d, v), board, llm, 4) for v in (k.low, k.high))
    link = narrow.engine_unit.index(-1)  # the first hop's engine
    assert narrow.t_cyc[narrow.t_eng == link].sum() > wide.t_cyc[wide.t_eng == link].sum()
    lat = {k.key: k for k in knobs(d)}["links[ring].latency_cycles"]
    assert compile_token(lat.apply(d, 16), board, llm, 4).e_lat[link] == 16  # link clock = kernel clock


def test_link_rows_and_band_on_a_known_latency() -> None:
    """latency = 1 ms + 1 us per link latency cycle + 1 us per halving of the link width below 1024 bits."""
    d = load_design(EXAMPLE)

    def lat(x):  # type: ignore[no-untyped-def]
        lk = x.links[0]
        return 1e-3 + 1e-6 * lk.latency_cycles + 1e-6 * {256: 2, 512: 1, 1024: 0}[lk.width_bits]

    out = sensitivity(d, lat, fields=["latency_cycles", "width_bits"])
    rows = {r["field"]: r for r in out["fields"]}
    assert set(rows) == {"links[ring].latency_cycles", "links[ring].width_bits"} == set(out["varied"])
    assert abs(rows["links[ring].latency_cycles"]["swing_s"] - 12e-6) < 1e-12  # 4 .. 16 cycles
    assert abs(rows["links[ring].width_bits"]["swing_s"] - 2e-6) < 1e-12
    lo, hi = out["band_s"]
    assert abs(lo - (1e-3 + 4e-6)) < 1e-12 and abs(hi - (1e-3 + 16e-6 + 2e-6)) < 1e-12


def test_a_source_that_begins_estimate_is_a_guess() -> None:
    assert is_estimate("estimate: FIFO and SLR crossing registers") and is_estimate("[estimate] copied")
    assert not is_estimate("C: stream_connect ...:64 [V]")
    specs.set_extra_spec_dirs([ROOT / "examples" / "llms"])
    try:
        d = load_design(ROOT / "examples" / "designs" / "published" / "terafly-opt-1.3b-u50-columns.toml")
    finally:
        specs.set_extra_spec_dirs([])
    ks = {k.key: k.status for k in knobs(d)}
    assert ks["links[ring].latency_cycles"] == "estimate"  # "estimate: FIFO and SLR crossing registers"
    assert "links[ring].width_bits" not in ks and "links[ring].fifo_depth" not in ks  # sourced to connectivity.cfg
