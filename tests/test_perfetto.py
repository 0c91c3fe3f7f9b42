"""Perfetto exports render as intended: no partially overlapping slices on one thread, for every exporter, full
slice names, counters; lane packing is optimal and loses nothing."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from hwmodel.cli import main
from hwmodel.report.perfetto import Counter, Slice, check_nesting, chrome_trace, pack_lanes

intervals = st.lists(st.tuples(st.integers(0, 50), st.integers(0, 20)), max_size=40)


@given(intervals)
def test_lanes_never_overlap_keep_every_slice_and_are_as_few_as_the_peak_overlap(raw) -> None:  # noqa: ANN001
    slices = [Slice(float(a), float(a + d), f"s{i}") for i, (a, d) in enumerate(raw)]
    lanes = pack_lanes(slices)
    assert sorted(s.name for lane in lanes for s in lane) == sorted(s.name for s in slices)
    for lane in lanes:
        spans = [s for s in lane if s.end_s > s.start_s]
        for a, b in zip(spans, spans[1:]):
            assert a.end_s <= b.start_s
    # the peak number of simultaneously open (positive-length) slices is a lower bound on any packing
    points = sorted({s.start_s for s in slices})
    peak = max((sum(s.start_s <= t < s.end_s for s in slices) for t in points), default=0)
    assert len(lanes) == max(peak, 1 if slices else 0)
    assert not check_nesting(chrome_trace({"t": slices}))


def test_check_nesting_flags_a_partial_overlap_and_accepts_nesting() -> None:
    bad = {
        "traceEvents": [
            {"ph": "X", "pid": 1, "tid": 1, "ts": 0, "dur": 10, "name": "a"},
            {"ph": "X", "pid": 1, "tid": 1, "ts": 5, "dur": 10, "name": "b"},
        ]
    }
    good = {
        "traceEvents": [
            {"ph": "X", "pid": 1, "tid": 1, "ts": 0, "dur": 10, "name": "a"},
            {"ph": "X", "pid": 1, "tid": 1, "ts": 2, "dur": 3, "name": "b"},
            {"ph": "X", "pid": 1, "tid": 2, "ts": 5, "dur": 10, "name": "c"},
        ]
    }
    assert len(check_nesting(bad)) == 1 and "'b'" in check_nesting(bad)[0]
    assert check_nesting(good) == []


def test_overlapping_slices_go_to_lanes_of_the_track_and_counters_are_c_events() -> None:
    long_name = "LD weights rows=4096 x 8192 B ch=0+32 addr=0x1234567 (8192 B/ch) coalesced x4"
    tr = chrome_trace(
        {"dev": [Slice(0, 2, long_name), Slice(1, 3, "b")], "other": []},
        counters={"HBM GB/s": [Counter(0.0, {"GB/s": 1.5}), Counter(1.0, {"GB/s": 0.0})]},
    )
    names = [e["args"]["name"] for e in tr["traceEvents"] if e["name"] == "thread_name"]
    assert names == ["dev", "dev #2", "other"]
    assert any(e["ph"] == "X" and e["name"] == long_name for e in tr["traceEvents"])
    cs = [e for e in tr["traceEvents"] if e["ph"] == "C"]
    assert [(c["ts"], c["args"]["GB/s"]) for c in cs] == [(0.0, 1.5), (1e6, 0.0)]
    assert not check_nesting(tr)


def test_instruction_trace_nests_and_names_instructions_in_full(tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    r = CliRunner().invoke(
        main, ["fpga", "instruction", "trace", "--ctx", "16", "--max-instructions", "2000", "--out", str(out)]
    )
    assert r.exit_code == 0, r.output
    trace = json.loads(out.read_text())
    assert check_nesting(trace) == []
    xs = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert any("addr=0x" in e["name"] and e["name"].endswith(")") for e in xs)  # never cut mid-address
    assert any(e["ph"] == "C" for e in trace["traceEvents"])


def test_reasoning_timeline_nests(tmp_path: Path) -> None:
    runner = CliRunner()
    path = tmp_path / "t.jsonl"
    r = runner.invoke(main, ["workload", "generate", "--dataset", "gsm8k", "--limit", "3", "--out", str(path)])
    assert r.exit_code == 0, r.output
    first = json.loads(path.read_text().splitlines()[1])["id"]
    for policy in ("baseline", "step-ahead", "heteroreason"):
        out = tmp_path / f"{policy}.json"
        r = runner.invoke(
            main,
            [
                "reason",
                "timeline",
                "--trace",
                str(path),
                "--problem",
                str(first),
                "--policy",
                policy,
                "--out",
                str(out),
            ],
        )
        assert r.exit_code == 0, r.output
        trace = json.loads(out.read_text())
        assert check_nesting(trace) == [], policy
        if policy == "heteroreason":  # the KVMU's pointer registers as a counter track
            cs = [e for e in trace["traceEvents"] if e["ph"] == "C" and e["name"].startswith("KVMU")]
            assert cs and all(e["args"]["valid"] <= e["args"]["curr"] <= e["args"]["ahead"] for e in cs)


def test_serving_trace_nests(tmp_path: Path) -> None:
    r = CliRunner().invoke(
        main, ["serve", "run", "--cluster", "a100+7xu280", "--n", "24", "--rate", "2", "--out", str(tmp_path)]
    )
    assert r.exit_code == 0, r.output
    trace = json.loads((tmp_path / "trace.json").read_text())
    assert check_nesting(trace) == []
    assert any(e["ph"] == "X" and e.get("cat") == "decode" for e in trace["traceEvents"])
