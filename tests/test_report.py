"""Generic report writers: Chrome-trace timelines, tables, plots."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hwmodel.report.perfetto import Slice, chrome_trace, write_chrome_trace
from hwmodel.report.plots import grouped_bars
from hwmodel.report.tables import fmt, markdown_table, read_csv, write_csv


def test_chrome_trace_has_one_named_thread_per_track_and_microseconds(tmp_path: Path) -> None:
    tracks = {
        "gpu0": [Slice(0.0, 0.5, "prefill", "prefill", {"power_w": 300})],
        "fpga": [Slice(0.25, 0.2500015, "decode"), Slice(1.0, 2.0, "ingest")],
    }
    obj = chrome_trace(tracks, "p", {"k": 1})
    names = {e["tid"]: e["args"]["name"] for e in obj["traceEvents"] if e["name"] == "thread_name"}
    assert names == {1: "gpu0", 2: "fpga"}
    xs = [e for e in obj["traceEvents"] if e["ph"] == "X"]
    assert [(e["tid"], e["ts"], e["dur"]) for e in xs] == [
        (1, 0.0, 0.5e6),
        (2, 0.25e6, pytest.approx(1.5)),
        (2, 1e6, 1e6),
    ]
    assert obj["metadata"] == {"k": 1}
    path = write_chrome_trace(tmp_path / "t.json", tracks)
    assert json.loads(path.read_text())["traceEvents"][0]["ph"] == "M"


def test_csv_round_trip_and_markdown(tmp_path: Path) -> None:
    rows = [{"a": 1, "b": 0.1 + 0.2, "c": "x"}, {"a": 2, "b": float("nan"), "c": "y"}]
    path = write_csv(tmp_path / "r.csv", rows, ["a", "b"])
    back = read_csv(path)
    assert back == [{"a": "1", "b": repr(0.1 + 0.2)}, {"a": "2", "b": ""}]
    assert float(back[0]["b"]) == 0.1 + 0.2  # full precision
    md = markdown_table(["x", "y"], [["a", 1], ["b", 2]])
    assert md.splitlines()[1] == "| :--- | ---: |" and md.count("\n") == 3
    assert fmt(1234.5678, 3) == "1.23e+03" and fmt(None) == "-"


def test_grouped_bars_writes_a_png(tmp_path: Path) -> None:
    path = grouped_bars(
        tmp_path / "p.png",
        {"A": {"x": {"s1": 1.2, "s2": 1.1}}, "B": {"x": {"s1": 1.3}}},
        ["s1", "s2"],
        ylabel="speedup",
        hatched=["s2"],
        reference_band=(1.25, 1.33, "ref"),
    )
    assert path.read_bytes()[:4] == b"\x89PNG"
